"""The leader of the distributed step barrier (``sync: barrier``), sans-IO: step-dones in, goes out.

It holds the :class:`node.switching.lockstep.Schedule` the in-process
:class:`node.transport.links.StepBarrier` uses and feeds it the same facts, from each node's
:class:`node.protocol.StepDone` instead of its clock: every node joins once, then each node due at a
step reports it; once all have, :meth:`Leader.release` gives the next step's nodes their
:class:`node.protocol.Go` (with the ports on which a neighbour sent them a frame the step before),
or, when the schedule says the run is over, the go that ends it. A step-done that does not fit is an
error string, never an exception.
"""

from __future__ import annotations

from node import protocol
from node.switching.lockstep import Schedule
from node.topology import Coord, Topology

__all__ = ["Leader"]


class Leader:
    """Which nodes the barrier waits for, and what to tell them next."""

    def __init__(self, topology: Topology, *, max_steps: int, last_injection: int) -> None:
        self.topology = topology
        self.schedule = Schedule[Coord](
            diameter=topology.diameter, max_steps=max_steps, last_busy=last_injection
        )
        self.step: int | None = None
        """The step being done (None: the nodes are joining)."""
        self.waiting: set[Coord] = set(topology.nodes())
        """The nodes whose step-done for :attr:`step` has not come yet."""
        self._expect: dict[Coord, list[str]] = {}
        self._last: dict[Coord, int | None] = {}
        """The step each node last reported (a step-done sent again repeats it)."""
        self.goes: dict[Coord, protocol.Go] = {}
        """The goes of the step being done, by node (to send again after a broker restart)."""
        self.steps_done = 0
        """Steps at which some node worked (the others were skipped)."""

    def step_done(self, msg: protocol.StepDone) -> str | None:
        """Take ``msg`` in; why it does not fit (None: it does, and counts)."""
        node = msg.node
        where = f"({node[0]},{node[1]})"
        if node not in self.waiting:
            if msg.step is not None and self._last.get(node) == msg.step:
                return None  # sent again (its go was sent again after a broker restart): taken once
            return f"step-done for step {msg.step} from {where}, which is not due at step {self.step}"
        if msg.step != self.step:
            return f"step-done for step {msg.step} from {where} while step {self.step} is being done"
        topo = self.topology
        if msg.next_work is not None and msg.step is not None and msg.next_work <= msg.step:
            return f"step-done from {where}: next work at step {msg.next_work}, not after step {msg.step}"
        links = []
        for port in msg.sent:
            other = topo.neighbour(node, port)
            if other is None:
                return f"step-done from {where}: sent on port {port}, which it lacks"
            links.append((other, port))
        if msg.sent and msg.step is None:
            return f"step-done from {where}: frames sent before its first step"
        self.waiting.discard(node)
        self._last[node] = msg.step
        schedule = self.schedule
        if msg.busy and msg.step is not None:
            schedule.busy(msg.step)
        schedule.wake(node, msg.next_work)
        for other, port in links:
            assert msg.step is not None
            schedule.wake(other, msg.step + 1)
            self._expect.setdefault(other, []).append(topo.opposite(port))
        return None

    def release(self) -> dict[Coord, protocol.Go] | protocol.Go:
        """Once nobody is waited for: the next step's goes by node, or the go that ends the run."""
        assert not self.waiting
        due = self.schedule.next()
        expect, self._expect = self._expect, {}
        if due is None:
            assert self.schedule.end is not None
            self.goes = {}
            return protocol.Go(None, (), self.schedule.end)
        step, nodes = due
        self.step = step
        self.waiting = set(nodes)
        self.steps_done += 1
        # a frame sent at step s is read at step s + 1, and the schedule woke its receiver there
        self.goes = {n: protocol.Go(step, tuple(sorted(expect.get(n, ())))) for n in nodes}
        return self.goes

    def pending(self) -> dict[Coord, protocol.Go]:
        """What to send the nodes still waited for when a broker restart may have lost messages:
        their go again (the go or the step-done was lost), or while they join a go of no step
        and no end, which asks a node for its last step-done again."""
        if self.step is None:
            return {n: protocol.Go(None, (), None) for n in self.waiting}
        return {n: go for n, go in self.goes.items() if n in self.waiting}
