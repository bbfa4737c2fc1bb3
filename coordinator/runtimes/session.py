"""The coordinator's side of the control protocol, the same for every runtime.

hello from every node → assign → ready from every node → plan → start → reports, until
every node is done (lockstep: nodes stop by themselves at global quiescence) or, in the
free clock, until probes find the network quiescent twice in a row. Each node's conversation
follows the phase table of :mod:`node.protocol`; a message out of order is recorded as a
``protocol`` error. A wall-clock budget bounds everything: when it runs out the run stops,
says why and keeps what it has. A node declared lost ends the run at once (the others are
stopped and their final reports kept); a lost broker is named in the incomplete causes.

A node is assigned once it and every neighbour it dials (:func:`node.transport.tcp.dials`) have said
hello: a node listens before its hello, so no node dials a port nobody listens on yet. Without
this, nodes started early retried their dials for as long as the start-up lasted, and at 1,024
node processes those retries took much of the CPU the later nodes needed to start.

Under ``sync: barrier`` (lockstep across processes without null frames) the session is also
the step barrier's leader (:class:`coordinator.runtimes.leader.Leader`): after start it takes
in every node's step-done and sends go to the nodes due at the next step, then to every node
the run's last step; each wait has a deadline (:data:`BARRIER_WAIT`), after which the run is
stopped and marked incomplete, naming the nodes it waited for.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Any

import trio

from coordinator.runtimes.leader import Leader
from coordinator.runtimes.records import REFUSED, Collector, RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node import protocol
from node.choices import Sync
from node.protocol import Phase, ProtocolError
from node.settings import NodeSettings
from node.topology import Coord, coords_text
from node.transport.tcp import dials

__all__ = ["ASSIGNED", "Session"]

ASSIGNED = tuple(f.name for f in dataclasses.fields(NodeSettings))
"""The settings a node is told as they are (the rest of Assign is the session's own: run, node,
token, the sync it leads, the link model's wire form, the peers)."""

SendTo = Callable[[Coord, bytes], Awaitable[None]]
Broadcast = Callable[[bytes], Awaitable[None]]

PROBE_INTERVAL = 0.02
PROBE_SHARE = 4
"""Free clock: the wait between probes is at least this many times what the start cost the nodes,
so that probing thousands of nodes that share the CPU with the coordinator takes at most about a
fifth of the time while packets move."""
PROBE_MAX = 0.25
"""Free clock with a link model: probes are at least a hop of the model apart (a probe wakes every
node, and nothing moves faster than a hop), but at most this many seconds."""
FREE_SETTLE = 0.05
FREE_SETTLE_PER_NODE = 0.002
"""Free clock across processes: the sources inject this long after the start (plus this much per
node), once every node has taken the start in. Else a node still busy with its own start message
(hundreds of processes wake for it on a few cores) holds the first packets for milliseconds."""
FREE_HOP = 0.001
FREE_QUIET_MAX = 1.0
"""Free clock: before its first probe the coordinator lets a packet cross up to every node of the
network (a path visits each node at most once), this long a hop across processes when links have
no model (their model's bound when they do), at most ``FREE_QUIET_MAX`` seconds: a probe wakes
every node, and while packets are in flight that is noise in their arrival times."""
STOP_GRACE = 5.0
BROKER_LOSS_LIMIT = 10.0
"""Seconds a run waits for its lost broker to come back (a restart) before it ends, incomplete."""
BARRIER_WAIT = 60.0
"""Seconds the barrier's leader waits for the step-dones of one step (the nodes are up by then)."""
RESEND_EVERY = 2.0
"""Barrier sync, once the broker was lost during the run: seconds without progress after which the
leader sends the waited-for nodes their go again (a broker restart loses messages in flight)."""

_RANK = {p: i for i, p in enumerate(Phase)}


class _NodeLost(Exception):
    """A node was declared lost while the run was going: stop waiting for the rest."""


class _BarrierStalled(Exception):
    """The barrier's leader cannot go on (a node went silent, or ended, mid-run)."""


class _Refused(Exception):
    """A node cannot run this plan (it lacks an algorithm): the run is refused before it starts."""


class Session:
    """One run seen from the coordinator."""

    def __init__(
        self,
        plan: Plan,
        settings: RunSettings,
        send_to: SendTo,
        broadcast: Broadcast,
        inbox: trio.MemoryReceiveChannel[bytes],
        *,
        peers: Callable[[Coord], dict[str, Any]] | None = None,
        progress: Callable[[int, int], None] | None = None,
        run_id: str | None = None,
        lead: bool = True,
        epoch: int | None = None,
        codec: bool = True,
        wired: bool = False,
    ) -> None:
        """``lead``: be the step barrier's leader when the settings ask for barrier sync (False:
        the nodes share a barrier of their own, as in-process, and take every broadcast before
        the sources start: no free-clock settling). ``epoch``: this run's (None: a new one; the bus
        that beats for the run passes its own), stamped on every message it sends; messages of
        other epochs are dropped and counted (:attr:`stale`). ``codec`` False: messages to the nodes
        go as :func:`node.protocol.stamp` tuples (nodes in this process), not msgpack bytes.
        ``wired``: the links exist before the nodes start (in one process): a node is assigned at
        its hello, as nothing it dials has to listen first."""
        self.plan = plan
        self.lead = lead
        self.settings = settings
        self.send_to = send_to
        self.broadcast = broadcast
        self.inbox = inbox
        self.peers = peers
        self.progress = progress
        self.run_id = run_id or secrets.token_hex(4)
        self.token = secrets.token_hex(8)
        self.epoch = epoch or protocol.new_epoch()
        self._pack: Callable[[protocol.Event, int], Any] = protocol.encode if codec else protocol.stamp
        self._wired = wired
        self._lacks: dict[tuple[str, ...], list[str]] = {}
        """:meth:`_lacking` by the algorithms a hello names (every node of a run names the same)."""
        self.stale = 0
        self.collector = Collector(plan)
        self.phases: dict[Coord, Phase] = {}
        self._nodes: set[Coord] = set()
        self._counters: dict[Coord, tuple[int, int, int]] = {}
        self._probe = 0
        self._lost: list[Coord] = []
        self._refusals: list[str] = []
        self._algorithms = {m.algorithm for m in plan.multicasts}
        self._broker_down: str | None = None
        self._broker_lost: list[str] = []
        self._broker_wait = trio.CancelScope()
        """Ends the run when the broker has been gone :data:`BROKER_LOSS_LIMIT` seconds."""
        self._end_go: protocol.Go | None = None
        self._watch_lost = False
        self._leader: Leader | None = None
        self._stalled = ""

    @property
    def barrier(self) -> bool:
        """Whether the nodes step under the coordinator-led barrier: lockstep unless ``--sync alpha``
        (the default across processes: idle nodes sleep instead of exchanging null frames)."""
        return self.lead and self.settings.clock == "lockstep" and self.settings.sync != "alpha"

    def _assign(self, node: Coord) -> protocol.Assign:
        """``node``'s assignment: every setting the wire's Assign names, copied by name."""
        s = self.settings
        return protocol.Assign(
            run=self.run_id,
            topology=self.plan.topology.spec,
            node=node,
            token=self.token,
            sync=Sync.BARRIER if self.barrier else Sync.ALPHA,
            links=s.link_model.to_wire() if s.link_model is not None else {},
            peers=self.peers(node) if self.peers else {},
            **{name: getattr(s, name) for name in ASSIGNED},
        )

    def partial(self) -> RawRun:
        """What the run gathered so far, its ``last_step`` the last step it is known to have
        reached (the barrier's, else the latest arrival's): a run cut short (a signal) has no
        node's final report to say it."""
        raw = self.collector.raw
        known = max((a.step for a in raw.arrivals), default=0)
        if self._leader is not None and self._leader.step is not None:
            known = max(known, self._leader.step)
        raw.last_step = max(raw.last_step, known)
        return raw

    # -- the phase table, coordinator side ------------------------------------------------------
    def _error(self, node: Coord | None, cause: str) -> None:
        self.collector.raw.errors.append(
            {"node": list(node) if node else None, "kind": "protocol", "cause": cause}
        )

    def _advance(self, node: Coord, event: protocol.Event) -> bool:
        """Move ``node``'s conversation past ``event``; False (recorded) if it is out of order."""
        try:
            self.phases[node] = protocol.advance(self.phases.get(node, Phase.NEW), event)
            return True
        except ProtocolError as exc:
            self._error(node, f"from ({node[0]},{node[1]}): {exc}")
            return False

    def _reached(self, node: Coord, phase: Phase) -> bool:
        return _RANK[self.phases.get(node, Phase.NEW)] >= _RANK[phase]

    async def _to(self, node: Coord, event: protocol.Event) -> None:
        self.phases[node] = protocol.advance(self.phases.get(node, Phase.NEW), event)
        await self.send_to(node, self._pack(event, self.epoch))

    async def _to_all(self, event: protocol.Event) -> None:
        for n in self._nodes:
            if self.phases.get(n) != Phase.DONE:
                self.phases[n] = protocol.advance(self.phases.get(n, Phase.NEW), event)
        await self.broadcast(self._pack(event, self.epoch))

    # -- receiving ------------------------------------------------------------------------------
    async def _next(self) -> Coord | None:
        """Take in the next message from the inbox; the node it moved on, if any (only that node's
        phase can change here)."""
        data = await self.inbox.receive()
        try:
            msg, epoch = protocol.unpack(data)
        except ProtocolError as exc:
            self.collector.raw.errors.append({"node": None, "kind": "bad-control", "cause": str(exc)})
            return None
        if not protocol.same_run(self.epoch, epoch):
            self.stale += 1  # a node still in an earlier run (the epoch rule): not this run's business
            return None
        if isinstance(msg, protocol.BrokerLost):
            self._broker_down = f"broker lost: {msg.broker} ({msg.cause})"
            if self._broker_down not in self._broker_lost:
                self._broker_lost.append(self._broker_down)
            self._broker_wait.deadline = min(
                self._broker_wait.deadline, trio.current_time() + BROKER_LOSS_LIMIT
            )
            return None
        if isinstance(msg, protocol.BrokerBack):
            self._broker_down = None
            self._broker_wait.deadline = math.inf
            return None
        if msg.TYPE not in protocol.TO_COORDINATOR:
            self._error(None, f"{msg.TYPE!r} is not a message for the coordinator")
            return None
        node: Coord = msg.node  # type: ignore[union-attr]
        if node not in self._nodes:
            self._error(node, f"{msg.TYPE!r} from ({node[0]},{node[1]}), not a node of this run")
            return None
        if not self._advance(node, msg):
            return None
        if isinstance(msg, protocol.Hello):
            self.collector.handle(msg)
            if msg.version != protocol.PROTOCOL_VERSION:
                self._refusals.append(
                    f"node ({node[0]},{node[1]}) speaks protocol version {msg.version}, this coordinator"
                    f" {protocol.PROTOCOL_VERSION}: run the same meshcast on both (redeploy, or rebuild"
                    " the image)"
                )
                raise _Refused
            lacking = self._lacking(msg)
            if lacking:
                self._refusals.append(
                    f"node ({node[0]},{node[1]}) lacks algorithm(s) {', '.join(lacking)}: install the "
                    "plug-in where the nodes run (the container image: EXTRA_WHEELS=PROJECT make image)"
                )
                raise _Refused
            await self._assign_those_ready(node)
        elif isinstance(msg, protocol.Counters):
            self._counters[node] = (msg.probe, msg.sent, msg.received)
        elif isinstance(msg, protocol.StepDone):
            problem = (
                "step-done without barrier sync" if self._leader is None else self._leader.step_done(msg)
            )
            if problem is not None:
                self._error(node, problem)
        else:
            before = self.collector.reached
            self.collector.handle(msg)
            if self.progress and self.collector.reached != before:
                self.progress(self.collector.reached, self.collector.expected)
            if isinstance(msg, protocol.Done) and msg.lost:
                self._lost.append(node)
                if self._watch_lost:
                    raise _NodeLost
        return node

    async def _assign_those_ready(self, node: Coord) -> None:
        """``node`` said hello: assign it and the neighbours that dial it, each once every
        neighbour it dials has said hello too (so its dials find a listener)."""
        if self._wired:
            await self._to(node, self._assign(node))
            return
        neighbours = self.plan.topology.neighbours
        for n in (node, *sorted({p for p in neighbours(node).values() if dials(p, node)})):
            if self.phases.get(n) == Phase.HELLO and all(
                self._reached(p, Phase.HELLO) for p in neighbours(n).values() if dials(n, p)
            ):
                await self._to(n, self._assign(n))

    def _lacking(self, hello: protocol.Hello) -> list[str]:
        """The plan's algorithms that this node says it cannot run (none if it did not say)."""
        if hello.algorithms is None:
            return []
        lacking = self._lacks.get(hello.algorithms)
        if lacking is None:
            lacking = self._lacks[hello.algorithms] = sorted(self._algorithms - set(hello.algorithms))
        return lacking

    @property
    def broker_gone(self) -> bool:
        """Whether the run ended because its broker stayed gone (nothing more can be sent)."""
        return self._broker_wait.cancelled_caught

    @property
    def lost(self) -> list[Coord]:
        """The nodes declared lost during the run (their processes may hang: don't wait for them);
        every node when the broker was lost for good (none can hear the stop)."""
        if self._broker_wait.cancelled_caught:
            return sorted(self._nodes)
        return list(self._lost)

    async def _gather(self, phase: Phase, nodes: set[Coord]) -> None:
        """Wait until every node in ``nodes`` has reached ``phase`` (or is done)."""
        pending = {n for n in nodes if not self._reached(n, phase)}
        while pending:
            with trio.move_on_after(RESEND_EVERY) if self._end_go is not None else nullcontext():
                while pending:
                    moved = await self._next()
                    if moved in pending and self._reached(moved, phase):
                        pending.discard(moved)
            if pending and self._end_go is not None and self._may_resend():
                for n in sorted(pending):  # barrier sync: the go that ends the run, again
                    await self._to(n, self._end_go)

    def _may_resend(self) -> bool:
        """Barrier sync: whether goes may have been lost (the broker was lost, and is back)."""
        return bool(self._broker_lost) and self._broker_down is None

    async def run(self, nodes: set[Coord]) -> RawRun:
        """Drive the whole protocol; always returns, marking the run incomplete when it must."""
        raw = self.collector.raw
        self._nodes = set(nodes)
        phase = "waiting for nodes to say hello"
        t0 = time.perf_counter()
        lost = False
        with trio.move_on_after(self.settings.wall_budget) as budget, self._broker_wait:
            try:
                self._watch_lost = True
                await self._gather(Phase.ASSIGNED, nodes)
                phase = "waiting for nodes to open their links"
                await self._gather(Phase.READY, nodes)
                await self._send_plan(nodes)
                if not self.barrier and self.settings.clock != "lockstep":
                    await self._settle()  # the plan taken in, so that the start's cost is its own
                await self._to_all(protocol.Start(settle=self._free_settle(nodes)))
                t0 = time.perf_counter()
                phase = "running"
                if self.barrier:
                    phase = "running under the step barrier"
                    await self._lead(nodes)
                    phase = "running"
                    await self._gather(Phase.DONE, nodes)
                elif self.settings.clock == "lockstep":
                    await self._gather(Phase.DONE, nodes)
                else:
                    await self._free_until_quiescent(nodes)
            except _NodeLost:
                lost = True
            except _BarrierStalled:
                raw.incomplete.append(self._stalled)
            except _Refused:
                raw.incomplete.append(REFUSED + self._refusals[0])
            finally:
                self._watch_lost = False
        raw.wall_s = time.perf_counter() - t0
        if budget.cancelled_caught:
            raw.incomplete.append(
                f"wall-clock budget of {self.settings.wall_budget:g} s ran out while {phase}"
            )
        if self._broker_wait.cancelled_caught:
            raw.incomplete.append(
                f"the broker was gone for {BROKER_LOSS_LIMIT:g} s while {phase}: the run ended there"
            )
        if lost:
            raw.incomplete.append(
                "run ended early while " + phase + ": "
                + ", ".join(f"node ({x},{y}) lost" for x, y in self._lost)
            )  # fmt: skip
        if self.collector.done != nodes and not self._broker_wait.cancelled_caught:
            await self._to_all(protocol.Stop())  # (with the broker gone, no node could hear it)
            with trio.move_on_after(STOP_GRACE):
                await self._gather(Phase.DONE, nodes)
            silent = sorted(nodes - self.collector.done)
            if silent:
                raw.incomplete.append(
                    "no final report from "
                    + coords_text(silent[:20])
                    + (f" and {len(silent) - 20} more" if len(silent) > 20 else "")
                )
        lost_reports = self.collector.lost_reports()
        if lost_reports:  # e.g. published while the broker restarted: say so, never "complete"
            raw.incomplete.append("arrival reports lost in transit: " + "; ".join(lost_reports[:5]))
        if self._broker_lost and (self._broker_down or raw.incomplete):
            raw.incomplete.extend(self._broker_lost)
        for n, status in sorted(raw.node_status.items()):
            if status != "ok":
                raw.incomplete.append(f"node ({n[0]},{n[1]}) stopped early: {status}")
        if raw.last_step >= self.settings.max_steps and self.settings.clock == "lockstep":
            raw.incomplete.append(f"step budget of {self.settings.max_steps} steps ran out")
        if raw.incomplete:  # final reports may be missing: the step it is known to have reached
            self.partial()
        return raw

    async def _send_plan(self, nodes: set[Coord]) -> None:
        """Each node gets the injections it sources (and when the last one is), before start."""
        mine: dict[Coord, list[protocol.PlanEntry]] = {}
        for m in self.plan.multicasts:
            entry = (m.id, m.algorithm, m.source, tuple(m.destinations), m.step, dict(m.params))
            mine.setdefault(m.source, []).append(entry)
        last = self.plan.last_step
        nothing = protocol.PlanMessage(last, ())  # one (frozen) for every node that sources none
        for n in sorted(nodes):
            if self.phases.get(n) != Phase.DONE:
                entries = mine.get(n)
                await self._to(n, nothing if entries is None else protocol.PlanMessage(last, tuple(entries)))

    async def _lead(self, nodes: set[Coord]) -> None:
        """Barrier sync: lead the nodes' steps until the schedule ends the run (then they finish)."""
        leader = self._leader = Leader(
            self.plan.topology, max_steps=self.settings.max_steps, last_injection=self.plan.last_step
        )
        leader.waiting &= nodes
        wait = BARRIER_WAIT
        while True:
            deadline = trio.current_time() + wait
            while leader.waiting and trio.current_time() < deadline:
                with trio.move_on_at(min(deadline, trio.current_time() + RESEND_EVERY)):
                    while leader.waiting:
                        moved = await self._next()
                        if moved is not None and self.phases.get(moved) == Phase.DONE:
                            self._stalled = (
                                f"step barrier: node ({moved[0]},{moved[1]}) ended at step {leader.step}"
                                " while the run went on"
                            )
                            raise _BarrierStalled
                if leader.waiting and self._may_resend():
                    for n, go in sorted(leader.pending().items()):  # a node acts on a go once
                        await self._to(n, go)
            if leader.waiting:
                silent = sorted(leader.waiting)
                self._stalled = (
                    f"step barrier: no step-done for step {leader.step} within {wait:g} s from "
                    + coords_text(silent[:10])
                    + (f" and {len(silent) - 10} more" if len(silent) > 10 else "")
                )  # fmt: skip
                raise _BarrierStalled
            goes = leader.release()
            if isinstance(goes, protocol.Go):
                self._end_go = goes
                await self._to_all(goes)
                return
            for n, go in goes.items():
                await self._to(n, go)

    @staticmethod
    async def _settle() -> float:
        """Seconds until the nodes in this process have taken the last broadcast (none elsewhere).

        They all run before this task runs again after two checkpoints (after one it may come
        back in the same scheduling batch as theirs); nodes in other processes cost nothing here.
        """
        t0 = time.perf_counter()
        await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()
        return time.perf_counter() - t0

    def _free_settle(self, nodes: set[Coord]) -> float:
        """Free clock: seconds the sources wait after the start (0 when the nodes are this process's
        own, ``lead`` False; see FREE_SETTLE)."""
        s = self.settings
        if s.clock == "lockstep" or not self.lead:
            return 0.0
        return min(10.0, FREE_SETTLE + FREE_SETTLE_PER_NODE * len(nodes))

    async def _free_until_quiescent(self, nodes: set[Coord]) -> None:
        """Free clock: probe counters until two probes in a row agree and sent == received.

        The first probe waits for the sources' settling and for a packet to cross the network
        (FREE_HOP, FREE_QUIET_MAX): a probe wakes every node, and while packets move that is
        noise in their arrival times.
        """
        previous: tuple[int, int] | None = None
        # Probing costs what the start cost: a control message taken in at every node (a probe
        # round's own length is no measure: while packets move it includes their forwarding).
        interval = max(PROBE_INTERVAL, PROBE_SHARE * await self._settle())
        settle = self._free_settle(nodes)
        model = self.settings.link_model
        hop = (
            model.hop_bound(self.settings.flits * self.settings.flit_bytes)
            if model is not None
            else FREE_HOP
            if settle
            else 0.0
        )
        if model is not None:
            # nothing moves faster than a hop of the model: probing more often than that only
            # wakes every node while packets are on the links (under --time-dilation 80 a probe
            # every 20 ms doubled the host time on each hop; docs/measurements/telemetry.md), and
            # at most PROBE_MAX apart, so that a run of slow links ends soon after its last packet
            interval = max(interval, min(hop, PROBE_MAX))
        wait = settle + min(FREE_QUIET_MAX, (self.plan.topology.size + 1) * hop) + interval
        while True:
            with trio.move_on_after(wait):
                while True:
                    await self._next()
            wait = interval
            self._probe += 1
            await self._to_all(protocol.Probe(self._probe))
            while not all(
                self._counters.get(n, (0,))[0] == self._probe or n in self.collector.done for n in nodes
            ):
                await self._next()
            sent = sum(c[1] for c in self._counters.values())
            received = sum(c[2] for c in self._counters.values())
            if sent == received and previous == (sent, received):
                await self._to_all(protocol.Stop())
                await self._gather(Phase.DONE, nodes)
                return
            previous = (sent, received)
