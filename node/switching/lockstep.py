"""The lockstep clock of one node, sans-IO: frames of step t-1 in, frames of step t out.

A node runs an α-synchronizer: it does step t only after it has every neighbour's frame for
t-1, and it stops by itself once no node can be busy any more (:func:`quiescent`), so every
node stops at the same step. Step t: per port in canonical order, the neighbour's credits then
its packets; then the injections of step t; then the engine's step. Credits travel in the
frames (``freed``), and so does the latest busy step the node knows (``last_busy``).

Nothing here awaits or touches a socket: the trio actor (:mod:`node.actor`) drives it over
real links, and the engines runtime drives one per node in a plain loop. It is generic over
the engine (:class:`StepEngine`: the packet engine of :mod:`node.switching.engine`, or any engine with
the same step-in/step-out shape).

Sparse mode (nodes that share one process): a shared :class:`Schedule` wakes a node only at the
steps where it has work — packets queued, an injection, or a non-empty frame from a neighbour —
and ends the run at the very step the α-synchronizer would (``last busy step + diameter + 1``,
or the step budget). The node does the step with :meth:`Lockstep.work`, which sends only the
non-empty frames; the idle steps in between are counted, not done. This is exact because a step
of an idle engine (nothing queued, no arrivals, no injection) changes nothing but its step count.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from node.switching.engine import Injection
from node.transport.wire import Credits, Item, StepFrame

__all__ = ["Lockstep", "Schedule", "StepEngine", "grouped", "quiescent"]


class StepEngine(Protocol):
    """What the driver needs of an engine: arrivals, credits, injections, one step at a time."""

    steps: int
    """Steps done (sparse mode adds the idle steps it skips)."""

    def credit_back(self, port: str, n: Credits) -> None: ...
    def receive(self, item: Any, port: str | None = None, /) -> None: ...  # a Packet or a Flit
    def inject(self, inj: Injection) -> None: ...
    def busy(self) -> bool: ...
    def step(self, t: int) -> list[tuple[str, Any]]: ...
    def take_freed(self) -> Mapping[str, Credits]: ...


def quiescent(step: int, last_busy: int, diameter: int) -> bool:
    """True once nothing can happen any more anywhere.

    ``last_busy`` is the latest step at which this node knows any node was busy (its own
    busy steps and its neighbours' values, one step old). Information travels one hop per
    step, so once ``step - last_busy > diameter`` every busy step would have reached us:
    the network has been idle since ``last_busy``, and every node concludes so at the same
    step.
    """
    return step - last_busy > diameter


class Lockstep:
    """One node's lockstep clock around its engine."""

    def __init__(
        self,
        engine: StepEngine,
        ports: Sequence[str],
        *,
        diameter: int,
        max_steps: int,
        injections: Iterable[Injection] = (),
        last_injection: int = 0,
    ) -> None:
        self.engine = engine
        self.ports = tuple(ports)
        self.diameter = diameter
        self.max_steps = max_steps
        self._injections: dict[int, list[Injection]] = {}
        for inj in injections:
            self._injections.setdefault(inj.step, []).append(inj)
        self.last_busy = last_injection
        self.step = 0
        """The step to do next; once :attr:`finished`, the run's last step."""
        self.finished = False
        self.busy = False
        """Whether the last step done had work (packets queued before it, or sends)."""

    @property
    def due(self) -> int | None:
        """The step whose neighbour frames :meth:`advance` needs next (None: none, step 0)."""
        return self.step - 1 if self.step > 0 else None

    def _do(self, frames: Mapping[str, StepFrame]) -> list[tuple[str, Item]]:
        """Step :attr:`step` with the neighbours' frames of the step before; the engine's sends."""
        engine = self.engine
        t = self.step
        last_busy = self.last_busy
        if t > 0 and frames:
            receive = engine.receive
            for p in self.ports:  # canonical order: it is the order packets join the input buffer
                if p not in frames:  # (a test and an index, not .get(): no call for the absent ports)
                    continue
                frame = frames[p]
                if frame.last_busy > last_busy:
                    last_busy = frame.last_busy
                if frame.freed:
                    engine.credit_back(p, frame.freed)
                for pkt in frame.packets:
                    receive(pkt, p)
        if self._injections:
            for inj in self._injections.pop(t, ()):
                engine.inject(inj)
        was_busy = engine.busy()
        sends = engine.step(t)
        self.busy = busy = was_busy or bool(sends)
        if busy and t > last_busy:
            last_busy = t
        self.last_busy = last_busy
        return sends

    def advance(self, frames: Mapping[str, StepFrame]) -> dict[str, StepFrame] | None:
        """Do the next step with the neighbours' frames of the step before (by port).

        Returns this step's frame for every port, or None when the run is over at this step
        (every node stops at the same step, so nobody waits for a frame of it). A port with no
        frame counts as an empty one.
        """
        if self.finished:
            raise RuntimeError("the lockstep run is over")
        t = self.step
        sends = self._do(frames)
        if quiescent(t, self.last_busy, self.diameter) or t >= self.max_steps:
            self.finished = True
            self._end(t)
            return None
        return self._frames(t, sends, every_port=True)

    def _frames(self, t: int, sends: list[tuple[str, Item]], *, every_port: bool) -> dict[str, StepFrame]:
        by_port = grouped(sends)
        freed = self.engine.take_freed()
        self.step = t + 1
        if not (every_port or by_port or freed):  # sparse: nothing to send (the common case of a quiet node)
            return {}
        last_busy = self.last_busy
        return {
            p: StepFrame(t, last_busy, tuple(by_port.get(p, ())), freed.get(p, 0))
            for p in self.ports
            if every_port or p in by_port or p in freed
        }

    # -- sparse mode -------------------------------------------------------------------
    @property
    def next_work(self) -> int | None:
        """Sparse: the next step at which this node has work of its own (queued packets or an injection)."""
        if self.engine.busy():
            return self.step
        return min(self._injections) if self._injections else None

    def work(self, t: int, frames: Mapping[str, StepFrame]) -> dict[str, StepFrame]:
        """Sparse: do step ``t`` (the idle steps before it only counted); the non-empty frames.

        The run's end is the :class:`Schedule`'s to decide (then :meth:`finish`).
        """
        if self.finished:
            raise RuntimeError("the lockstep run is over")
        if t < self.step:
            raise RuntimeError(f"step {t} is already done (next is {self.step})")
        self.engine.steps += t - self.step
        self.step = t
        return self._frames(t, self._do(frames), every_port=False)

    def fusable(self, t: int) -> bool:
        """Sparse: whether step ``t`` can be done as :meth:`took_in` records it (no injection then)."""
        return not self.finished and t >= self.step and t not in self._injections

    def took_in(self, t: int, last_busy: int) -> int:
        """Sparse: step ``t`` was done by the engine taking packets in and nothing else (frames
        whose latest busy step was ``last_busy``); the clock's side of :meth:`work` then. Returns
        the last busy step its frames carry."""
        self.engine.steps += t - self.step
        if last_busy < self.last_busy:
            last_busy = self.last_busy
        if t > last_busy:  # the node held a packet: busy
            last_busy = t
        self.last_busy = last_busy
        self.busy = True
        self.step = t + 1
        return last_busy

    def finish(self, last: int) -> None:
        """Sparse: the run ended at step ``last``; count the idle steps up to and including it."""
        self.engine.steps += max(0, last + 1 - self.step)
        self.step = last
        self.finished = True
        self._end(last)

    def _end(self, t: int) -> None:
        end = getattr(self.engine, "end", None)  # an engine that reports what it still holds
        if end is not None:
            end(t)


T = TypeVar("T")


def grouped(sends: list[tuple[str, T]]) -> dict[str, list[T]]:
    """A step's sends by port, each port's in the order sent (a frame's items)."""
    by_port: dict[str, list[T]] = {}
    for port, item in sends:
        got = by_port.get(port)
        if got is None:
            by_port[port] = [item]
        else:
            got.append(item)
    return by_port


N = TypeVar("N", bound=Hashable)


class Schedule(Generic[N]):
    """Sparse lockstep, sans-IO: which nodes work at which step, and the step the run ends.

    A node is due at a step when it has packets queued or an injection then (it says so after
    each step: :meth:`wake` with its :attr:`Lockstep.next_work`), or when a neighbour sent it a
    non-empty frame the step before. The busy steps nodes report (:meth:`busy`) give the end the
    α-synchronizer reaches: ``last busy + diameter + 1``, capped by the step budget.
    """

    def __init__(self, *, diameter: int, max_steps: int, last_busy: int) -> None:
        self.diameter = diameter
        self.max_steps = max_steps
        self.last_busy = last_busy
        self.end: int | None = None
        """The run's last step, once :meth:`next` found none to do."""
        self._due: dict[int, set[N]] = {}

    def wake(self, node: N, step: int | None) -> None:
        """``node`` has work at ``step`` (None: nothing)."""
        if step is not None:
            due = self._due.get(step)
            if due is None:
                self._due[step] = {node}
            else:
                due.add(node)

    def busy(self, step: int) -> None:
        """Some node was busy at ``step``."""
        if step > self.last_busy:
            self.last_busy = step

    def earliest(self) -> int | None:
        """The earliest step any node is due at (None: none is)."""
        return min(self._due) if self._due else None

    def take(self, step: int) -> set[N]:
        """The nodes due at ``step``, which are then no longer due."""
        return self._due.pop(step, set())

    def next(self) -> tuple[int, set[N]] | None:
        """The next step with work and its nodes; None once the run is over (:attr:`end` set)."""
        horizon = min(self.last_busy + self.diameter + 1, self.max_steps)
        if self._due:
            step = min(self._due)
            if step <= horizon:
                return step, self._due.pop(step)
        self.end = horizon
        return None
