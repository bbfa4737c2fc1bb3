"""The distributed step barrier, node side: step-done to the coordinator, go back (barrier sync).

The across-processes counterpart of the in-process :class:`node.transport.links.StepBarrier`: the node
does its own steps, and :meth:`RemoteBarrier.done` returns the next one to do, or None when the
run is over and :attr:`RemoteBarrier.end` is its last step. Each call sends a
:class:`node.protocol.StepDone` on the control channel and waits, within a deadline, for the
coordinator's :class:`node.protocol.Go`.
A go also says on which ports (:attr:`RemoteBarrier.expect`) the node must read a frame of the
step before: over TCP the node awaits exactly those, and no null frame is ever sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Protocol

import trio

from node import protocol
from node.switching.lockstep import Lockstep
from node.topology import Coord
from node.transport.links import Exchange, Stepper

__all__ = ["LockstepDriver", "NoGo", "RemoteBarrier"]


class LockstepDriver(Protocol):
    """What paces a node's lockstep without null frames: the in-process
    :class:`node.transport.links.StepBarrier` (it calls the node's steps) and :class:`RemoteBarrier` (the
    node exchanges each step's frames when the coordinator says go). The actor calls
    :meth:`run_node` and knows no more of which one it has."""

    @property
    def end(self) -> int | None:
        """The run's last step, once it is over."""
        ...

    async def run_node(
        self, node: Hashable, clock: Lockstep, stepper: Callable[[], Stepper], exchange: Exchange
    ) -> None:
        """Take ``node`` through every step it is due at, until the run is over."""
        ...


class NoGo(Exception):
    """No usable go came from the coordinator within the deadline."""


class RemoteBarrier:
    """One node's end of the coordinator-led step barrier."""

    def __init__(
        self,
        send: Callable[[protocol.Event], Awaitable[None]],
        gos: trio.MemoryReceiveChannel[protocol.Go],
        *,
        ports: Iterable[str],
        timeout: float,
        report: Callable[[str], None],
    ) -> None:
        """``send``: a control message out; ``gos``: the go messages in; ``report``: a bad go."""
        self._send = send
        self._gos = gos
        self._ports = frozenset(ports)
        self.timeout = timeout
        self._report = report
        self._joined = False
        self.end: int | None = None
        """The run's last step, once it is over."""
        self.expect: tuple[str, ...] = ()
        """The ports whose frame of the step before the node must read before its next step."""
        self._last: protocol.StepDone | None = None

    async def run_node(
        self, node: Hashable, clock: Lockstep, stepper: Callable[[], Stepper], exchange: Exchange
    ) -> None:
        """Across processes: report each step done, wait for the coordinator's go, and
        ``exchange`` that step's frames (``stepper`` is the in-process barrier's way, not used
        here). :class:`NoGo` when no usable go comes in time."""
        t = await self.done(node, clock)
        while t is not None:
            sent = await exchange(t, self.expect)
            t = await self.done(node, clock, sent)

    async def done(
        self, node: Hashable, clock: Lockstep, sent: Mapping[str, Hashable] | Iterable[Hashable] = ()
    ) -> int | None:
        """Report ``node``'s step (or its joining), then wait for its next step; None: run over.

        ``sent``: the ports this step sent a non-empty frame on (a mapping port → neighbour, as
        the actor passes it, or the ports). :class:`NoGo` when no usable go comes in time.
        """
        here: Coord = node  # type: ignore[assignment]
        step = clock.step - 1 if self._joined else None
        self._joined = True
        ports = tuple(str(p) for p in sent)
        self._last = protocol.StepDone(here, step, clock.busy, clock.next_work, ports)
        await self._send(self._last)
        with trio.move_on_after(self.timeout):
            while True:
                go = await self._gos.receive()
                problem = self._problem(go, clock)
                if problem is None:
                    if go.step is None:
                        self.end = go.end
                        return None
                    self.expect = go.expect
                    return go.step
                if (go.step is not None and go.step == step) or (go.step is None and go.end is None):
                    # the go of the step just done again, or a go of no step (while nodes join):
                    # the coordinator lost our step-done (a broker restart); say it again, wait on
                    await self._send(self._last)
                    continue
                self._report(problem)
        after = "joining" if step is None else f"step {step}"
        raise NoGo(f"no go from the coordinator within {self.timeout:g} s after {after}")

    def _problem(self, go: protocol.Go, clock: Lockstep) -> str | None:
        """Why ``go`` cannot be obeyed at this clock (None: it can)."""
        if go.step is None:
            if go.end is None:
                return "go without a step or an end"  # (taken as: say the step-done again)
            if go.end < clock.step - 1:
                return f"go without a step must end the run at step {clock.step - 1} or later, got {go.end}"
            return None
        if go.step < clock.step:
            return f"go for step {go.step}, already done (next is {clock.step})"
        unknown = set(go.expect) - self._ports
        if unknown:
            return f"go for step {go.step} expects frames on ports {sorted(unknown)} this node lacks"
        if go.step == 0 and go.expect:
            return "go for step 0 expects frames (there is no step before it)"
        return None
