"""Link and control-channel interfaces, and their in-memory implementations.

A link end carries msgpack bytes to one neighbour and from it — the same bytes a TCP stream
would carry. The control channel carries encoded control messages between a node and the
coordinator (an in-memory bus here, MQTT in the distributed runtimes).

In one process, lockstep needs no null frames: a :class:`StepBarrier` shared by the nodes wakes
only those with work at each step (the sans-IO :class:`node.switching.lockstep.Schedule` decides which),
and they exchange their non-empty frames over :class:`PolledLink` ends without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import outcome
import trio

from node.switching.lockstep import Lockstep, Schedule

__all__ = [
    "CHECKPOINT_S",
    "Control",
    "DirectLink",
    "Exchange",
    "Link",
    "MemoryControl",
    "MemoryLink",
    "PolledLink",
    "QueueLink",
    "StepBarrier",
    "Stepper",
    "memory_link_pair",
    "queue_link_pair",
]


class Link(Protocol):
    """One node's end of a bidirectional link."""

    async def send(self, data: bytes) -> None: ...
    async def receive(self) -> bytes: ...
    async def aclose(self) -> None: ...


class PolledLink(Link, Protocol):
    """A link end that also sends and takes frames without waiting (in-process sparse lockstep)."""

    def send_nowait(self, data: bytes) -> None: ...
    def receive_nowait(self) -> bytes | None: ...


class Control(Protocol):
    """A node's channel to the coordinator: encoded control frames, or, inside one process, the
    ``(event, epoch)`` pairs of :func:`node.protocol.stamp` (so no bytes type is enforced here)."""

    async def send(self, data: Any) -> None: ...
    async def receive(self) -> Any: ...


@dataclass
class MemoryLink:
    """A link end over two trio memory channels (frames, or in-process control pairs: :class:`Control`)."""

    tx: trio.MemorySendChannel[Any]
    rx: trio.MemoryReceiveChannel[Any]

    async def send(self, data: Any) -> None:
        await self.tx.send(data)

    async def receive(self) -> Any:
        return await self.rx.receive()

    def send_nowait(self, data: bytes) -> None:
        self.tx.send_nowait(data)

    def receive_nowait(self) -> bytes | None:
        """The next frame if one is waiting, else None."""
        try:
            return self.rx.receive_nowait()
        except trio.WouldBlock:
            return None

    async def aclose(self) -> None:
        await self.tx.aclose()
        await self.rx.aclose()


class _Pipe:
    """One direction of a :class:`QueueLink`: frames in order, and who has closed which end."""

    __slots__ = ("frames", "lot", "parked", "receiver_closed", "sender_closed")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        """Oldest first: a list, not a deque (760 bytes empty, four a node), as it holds a frame or two."""
        self.lot: trio.lowlevel.ParkingLot | None = None
        """Made when a receiver first parks: under the step barrier nobody does (four a node)."""
        self.parked = 0
        """Receivers parked in :attr:`lot` (read per send; a ParkingLot's own ``len`` is interpreted)."""
        self.sender_closed = False
        self.receiver_closed = False


class QueueLink:
    """A link end over two plain queues: in-process sparse lockstep, where nobody waits on a link.

    The step barrier says when a neighbour's frame is there, so the driver only takes and puts
    frames without waiting (:class:`PolledLink`); a trio memory channel would cost a checkpoint
    and, on every empty port, an exception. ``receive`` still waits (parked until a frame or the
    peer's close), so the end is a whole :class:`Link`. Unbounded: a sparse node sends at most one
    frame per port per step, and its neighbour takes it the next step.
    """

    __slots__ = ("_rx", "_tx", "waiting")

    def __init__(self, tx: _Pipe, rx: _Pipe) -> None:
        self._tx = tx
        self._rx = rx
        self.waiting: list[bytes] = rx.frames
        """The frames that came in and wait, oldest first (the sparse step reads it without a call)."""

    def send_nowait(self, data: bytes) -> None:
        tx = self._tx
        if tx.sender_closed:
            raise trio.ClosedResourceError("this link end is closed")
        if tx.receiver_closed:
            raise trio.BrokenResourceError("the peer closed the link")
        tx.frames.append(data)
        if tx.parked:
            assert tx.lot is not None
            tx.lot.unpark()

    async def send(self, data: bytes) -> None:
        self.send_nowait(data)
        await trio.lowlevel.checkpoint()

    def receive_nowait(self) -> bytes | None:
        """The next frame if one is waiting, else None."""
        frames = self._rx.frames
        return frames.pop(0) if frames else None

    async def receive(self) -> bytes:
        rx = self._rx
        while not rx.frames:
            if rx.receiver_closed:
                raise trio.ClosedResourceError("this link end is closed")
            if rx.sender_closed:
                raise trio.EndOfChannel
            if rx.lot is None:
                rx.lot = trio.lowlevel.ParkingLot()
            rx.parked += 1
            try:
                await rx.lot.park()
            finally:
                rx.parked -= 1
        await trio.lowlevel.checkpoint()
        return rx.frames.pop(0)

    async def aclose(self) -> None:
        self.close()
        await trio.lowlevel.checkpoint()

    def close(self) -> None:
        """:meth:`aclose` without its checkpoint (the in-process runtime closes a node's links at its
        end at once: four task switches a node were a tenth of a large run's CPU time)."""
        self._tx.sender_closed = True  # the peer reads to the end, then EndOfChannel
        self._rx.receiver_closed = True  # the peer's sends now fail
        for pipe in (self._tx, self._rx):
            if pipe.lot is not None:
                pipe.lot.unpark_all()


def queue_link_pair() -> tuple[QueueLink, QueueLink]:
    """Both ends of one bidirectional in-process link over plain queues."""
    a_to_b, b_to_a = _Pipe(), _Pipe()
    return QueueLink(a_to_b, b_to_a), QueueLink(b_to_a, a_to_b)


def memory_link_pair(capacity: int = 16) -> tuple[MemoryLink, MemoryLink]:
    """Both ends of one bidirectional in-memory link."""
    a_tx, b_rx = trio.open_memory_channel[bytes](capacity)
    b_tx, a_rx = trio.open_memory_channel[bytes](capacity)
    return MemoryLink(a_tx, a_rx), MemoryLink(b_tx, b_rx)


@dataclass
class DirectLink:
    """A link end whose frames go straight into the peer node's inbox (in-process free clock).

    No reader task and no task switch per frame: ``send`` hands the bytes to ``deliver`` (the
    peer's :meth:`node.actor.Node.deliver`, which decodes them) without waiting; FIFO as a link.
    Nothing is ever received on this end: frames for this node arrive the same way.
    """

    deliver: Callable[[bytes], None]

    async def send(self, data: bytes) -> None:
        self.deliver(data)

    def send_nowait(self, data: bytes) -> None:
        self.deliver(data)

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    def receive_nowait(self) -> bytes | None:
        return None

    async def aclose(self) -> None:
        return None


@dataclass
class MemoryControl:
    """A node's end of the in-memory control bus (unbounded: reports never block a node).

    It carries bytes or :func:`node.protocol.stamp` pairs, so it is typed ``Any`` (a compiled
    build would refuse the pairs if it said bytes)."""

    tx: trio.MemorySendChannel[Any]
    rx: trio.MemoryReceiveChannel[Any]

    async def send(self, data: Any) -> None:
        self.tx.send_nowait(data)

    def send_nowait(self, data: Any) -> None:
        """Send without a checkpoint (a node's reports from within a step the barrier drives)."""
        self.tx.send_nowait(data)

    async def receive(self) -> Any:
        return await self.rx.receive()


Stepper = Callable[[int], list[Hashable]]
Exchange = Callable[[int, tuple[str, ...]], Awaitable[Mapping[str, Hashable]]]
"""A node's step across processes: read the frames of the step before on the ports given, do the
step, send its frames; the ports it sent a non-empty frame on, each with its neighbour."""
"""A node's step, as the driving barrier calls it: do step ``t``; the neighbours sent a frame."""


CHECKPOINT_S = 0.001
"""The in-process step barrier's driver checkpoints once this many seconds have passed since its last
one (at a step's end): cancellation and the coordinator's tasks wait no longer than that and a step."""


class StepBarrier:
    """The step barrier of in-process lockstep: only the nodes with work at a step do it.

    Each node joins (:meth:`drive`) with its step as a plain function and parks; the last to
    join drives the run, calling the due nodes' steps one after the other, with a checkpoint
    at a step's end once :data:`CHECKPOINT_S` has passed and no task switch per node-step. The
    sans-IO :class:`node.switching.lockstep.Schedule` picks the steps and their nodes from what
    each step reports (its busy step, its next work, whom it sent a non-empty frame), and ends
    the run at the step the α-synchronizer would.
    """

    def __init__(self, nodes: Iterable[Hashable]) -> None:
        self._joining = len(set(nodes))
        """Nodes yet to join: the last one drives."""
        self.schedule: Schedule[Hashable] | None = None
        self._waiting: dict[Hashable, trio.lowlevel.Task] = {}
        """The parked nodes' tasks."""
        self._current: int | None = None
        self._steppers: dict[Hashable, tuple[Stepper, Lockstep]] = {}

    @property
    def end(self) -> int | None:
        """The run's last step, once it is over."""
        return self.schedule.end if self.schedule is not None else None

    async def run_node(
        self, node: Hashable, clock: Lockstep, stepper: Callable[[], Stepper], exchange: Exchange
    ) -> None:
        """The lockstep driver's one entry (:class:`node.sync.barrier.LockstepDriver`): in one process
        the barrier calls ``node``'s step as a plain function (``stepper()``); ``exchange`` is the
        remote barrier's way and is not used here."""
        await self.drive(node, clock, stepper())

    async def drive(self, node: Hashable, clock: Lockstep, step: Stepper) -> None:
        """Join with ``step`` (``node``'s step as a function of the step number); return once the run is over.

        The barrier calls ``step(t)`` for every step ``t`` the node is due at, from whichever
        task drives. An exception from it is raised here, in ``node``'s own task, and the run
        then goes no further (the others wait until they are stopped, as they would for a node
        that never reports its step).
        """
        self._steppers[node] = (step, clock)
        self._report(node, clock, ())
        self._joining -= 1
        if self._joining == 0:
            assert self.schedule is not None
            await self._drive(node, self.schedule)
        else:
            await self._park(node)

    async def _drive(self, me: Hashable, schedule: Schedule[Hashable]) -> None:
        """Run every due node's step, step after step, until the run is over (the driver's task)."""
        steppers = self._steppers
        report = self._report
        clock_s = time.perf_counter
        last = clock_s()
        while True:
            nodes = await self._next(schedule)
            t = self._current
            if nodes is None or t is None:
                self._wake_all()
                return
            # In node order, not the set's: nodes made one after the other lie near each other
            # in memory. Nodes are coordinates here.
            for n in sorted(nodes):  # type: ignore[type-var]
                entry = steppers.get(n)
                if entry is None:  # its task was cancelled while it waited: it takes no more steps
                    continue
                stepper, clock = entry
                try:
                    sent = stepper(t)
                except Exception as exc:
                    if n == me:
                        raise
                    self._fail(n, exc)
                    break
                report(n, clock, sent)
            else:
                # the coordinator and the rest go on: at least every CHECKPOINT_S, not every step (a
                # sparse run's step is a few node-steps, and a checkpoint costs as much as two)
                now = clock_s()
                if now - last >= CHECKPOINT_S:
                    await trio.lowlevel.checkpoint()
                    last = clock_s()
                continue
            await trio.sleep_forever()  # a node failed: wait, as the others, until the run is stopped

    async def _park(self, node: Hashable) -> None:
        """Park ``node``'s task until the barrier wakes it (or fails it)."""
        self._waiting[node] = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            del self._waiting[node]
            self._steppers.pop(node, None)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def _fail(self, node: Hashable, exc: Exception) -> None:
        """Raise ``exc`` in ``node``'s parked task."""
        self._steppers.pop(node, None)
        task = self._waiting.pop(node, None)
        if task is not None:
            trio.lowlevel.reschedule(task, outcome.Error(exc))

    async def _next(self, schedule: Schedule[Hashable]) -> set[Hashable] | None:
        """The next step's nodes (:attr:`_current` is the step), or None once the run is over."""
        due = schedule.next()
        if due is None:
            self._current = None
            return None
        self._current, nodes = due
        return nodes

    def _report(self, node: Hashable, clock: Lockstep, sent: Iterable[Hashable]) -> None:
        """Take ``node``'s joining, or a step it did and whom it sent a frame, into the schedule."""
        schedule = self.schedule
        if schedule is None:
            schedule = self.schedule = Schedule[Hashable](
                diameter=clock.diameter, max_steps=clock.max_steps, last_busy=clock.last_busy
            )
        if clock.busy:
            schedule.busy(clock.step - 1)
        schedule.wake(node, clock.next_work)
        for other in sent:
            self._wake_sent(other, clock.step)

    def _wake_sent(self, node: Hashable, step: int) -> None:
        """``node`` was sent a frame at ``step - 1``: it works at ``step``."""
        assert self.schedule is not None
        self.schedule.wake(node, step)

    def _wake_all(self) -> None:
        """The run is over: let every waiting node go, and drop their steps (each refers to its node,
        which refers to this barrier: left here, every node of the run is garbage only to the cyclic
        collector, whose one pass over them took seconds at 16,384 nodes)."""
        self._steppers.clear()
        waiting, self._waiting = self._waiting, {}
        for task in waiting.values():
            trio.lowlevel.reschedule(task)
