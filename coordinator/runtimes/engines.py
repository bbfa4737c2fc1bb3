"""Every node's own engine in one plain lockstep loop: the in-process runtime without trio and links.

Why: large mcast(n, d, c) runs (seed 002) need each node's buffer occupancy (``peak_queue``,
``node_stats``), which only the nodes' :class:`~node.engine.Engine` measures — the reference
model (``coordinator/runtimes/model.py``) does not — while the trio runtime spends most of its time on
per-step link frames. This loop drives the very same engines with the very same lockstep
driver as the actor (:class:`node.lockstep.Lockstep`: credits, packets, injections, step,
quiescence), handing each node's step frames to its neighbours in memory, in its sparse mode
(:class:`node.lockstep.Schedule`: only nodes with work do a step; empty frames are not made).
Frames that carry packets, and the plan, go through msgpack as on the wire, and the records are gathered from
the nodes' own reports by the session's :class:`Collector`. Its records equal the in-process
runtime's, node statistics included (``tests/test_mcast.py`` checks it).

Under wormhole switching (:func:`_run_flits`) the same sparse schedule steps the flit engines
without frames: each flit an engine sends is handed to its neighbour's engine as it is (a head's
header through msgpack, as the wire would give it; body and tail flits carry nothing to encode),
with the credits returned beside them — a flit costs a few list operations, not a frame.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgpack

from coordinator.runtimes.records import Collector, RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node import protocol
from node.actor import done_report, take_report
from node.engine import Injection
from node.lockstep import Lockstep, Schedule
from node.routing import registry
from node.switching import AnyEngine, LockstepWormhole, make_engine
from node.topology import PORTS, Coord, Topology
from node.wire import Credits, Flit, StepFrame, decode_flit, decode_link, encode_link

__all__ = ["run_engines"]


def _injections(plan: Plan, node: Coord) -> list[Injection]:
    """``node``'s injections, as the node gets them: through an encoded plan message."""
    entries = [(m.id, m.algorithm, m.source, tuple(m.destinations), m.step, dict(m.params))
               for m in plan.multicasts if m.source == node]  # fmt: skip
    msg = protocol.decode(protocol.encode(protocol.PlanMessage(plan.last_step, tuple(entries))))
    assert isinstance(msg, protocol.PlanMessage)
    return [
        Injection(mc, alg, list(dests), dict(params), step)
        for mc, alg, _, dests, step, params in msg.multicasts
    ]


def _over_the_wire(frame: StepFrame) -> StepFrame:
    """A frame with packets as its neighbour would decode it (headers through msgpack)."""
    if not frame.packets:
        return frame
    out = decode_link(encode_link(frame))
    assert isinstance(out, StepFrame), out
    return out


def _engines(topo: Topology, s: RunSettings) -> dict[Coord, AnyEngine]:
    return {n: make_engine(topo, n, registry, s, clock_ns=time.monotonic_ns) for n in topo.nodes()}


def run_engines(
    plan: Plan, settings: RunSettings, progress: Callable[[int, int], None] | None = None
) -> RawRun:
    """Run ``plan`` in lockstep on every node's engine; the same :class:`RawRun` as a runtime."""
    if settings.clock != "lockstep":
        raise ValueError("the engine loop runs the lockstep clock only")
    if settings.switching == "wormhole":
        return _run_flits(plan, settings, progress)
    topo = plan.topology
    engines = _engines(topo, settings)
    nodes = list(topo.nodes())
    clocks = {
        n: Lockstep(
            engines[n], [p for p in PORTS if topo.neighbour(n, p) is not None], diameter=topo.diameter,
            max_steps=settings.max_steps, injections=_injections(plan, n), last_injection=plan.last_step,
        )
        for n in nodes
    }  # fmt: skip
    collector = Collector(plan)
    expected = collector.expected
    first = clocks[nodes[0]]
    schedule = Schedule[Coord](diameter=first.diameter, max_steps=first.max_steps, last_busy=first.last_busy)
    for n in nodes:
        schedule.wake(n, clocks[n].next_work)
    neighbours = {n: {p: topo.neighbour(n, p) for p in clocks[n].ports} for n in nodes}
    # inbox[node][port]: the non-empty frame the neighbour across ``port`` sent at the step before
    inbox: dict[Coord, dict[str, StepFrame]] = {}
    delivered = 0
    started = time.perf_counter()
    while (due := schedule.next()) is not None:
        t, active = due
        frames, inbox = inbox, {}
        for n in sorted(active):
            clock = clocks[n]
            before = len(engines[n].deliveries)
            out = clock.work(t, frames.get(n, {}))
            delivered += len(engines[n].deliveries) - before
            if clock.busy:
                schedule.busy(t)
            schedule.wake(n, clock.next_work)
            for p, frame in out.items():
                nb = neighbours[n][p]
                assert nb is not None
                inbox.setdefault(nb, {})[topo.opposite(p)] = _over_the_wire(frame)
                schedule.wake(nb, t + 1)
        if progress is not None:
            progress(delivered, expected)
    assert schedule.end is not None
    for clock in clocks.values():
        clock.finish(schedule.end)
    for n, e in engines.items():
        clock = clocks[n]
        assert clock.finished, f"node {n} did not finish with the others"
        collector.handle(protocol.Hello(n, ""))
        collector.handle(take_report(e, n, 0))
        collector.handle(done_report(e, n, host="", status="ok", last_step=clock.step))
    raw = collector.raw
    raw.wall_s = time.perf_counter() - started
    if raw.last_step >= settings.max_steps:
        raw.incomplete.append(f"step budget of {settings.max_steps} steps ran out")
    return raw


def _as_received(flit: Flit) -> Flit:
    """A head as its neighbour decodes it (its header through msgpack); other flits as they are."""
    if not flit.head:
        return flit
    got = decode_flit(msgpack.unpackb(msgpack.packb(flit.to_wire(), use_bin_type=True), raw=False))
    assert isinstance(got, Flit), got
    return got


def _run_flits(plan: Plan, settings: RunSettings, progress: Callable[[int, int], None] | None) -> RawRun:
    """Wormhole switching: :func:`run_engines`' sparse lockstep loop with flits handed over directly.

    Step for step what :class:`node.lockstep.Lockstep` in sparse mode does for each node (credits
    and flits of t−1 per port in canonical order, the injections of t, the step; busy and the next
    step with work; the idle steps counted; :meth:`LockstepWormhole.end` at the run's end), and the
    same :class:`Schedule` decides who works when and where the run ends: the records are the
    frame loop's. A port's items are a flit list and a credit count, not a frame.
    """
    topo = plan.topology
    engines = _engines(topo, settings)
    nodes = list(topo.nodes())
    flit_engines: dict[Coord, LockstepWormhole] = {}
    for n, e in engines.items():
        assert isinstance(e, LockstepWormhole)
        flit_engines[n] = e
    pending: dict[Coord, dict[int, list[Injection]]] = {n: {} for n in nodes}
    for n in nodes:
        for inj in _injections(plan, n):
            pending[n].setdefault(inj.step, []).append(inj)
    ports = {n: [p for p in PORTS if topo.neighbour(n, p) is not None] for n in nodes}
    # per node and port: the neighbour across it and the port the neighbour hears it on
    across = {n: {p: (topo.neighbour(n, p), topo.opposite(p)) for p in ports[n]} for n in nodes}
    collector = Collector(plan)
    expected = collector.expected
    schedule = Schedule[Coord](diameter=topo.diameter, max_steps=settings.max_steps, last_busy=plan.last_step)
    for n in nodes:
        schedule.wake(n, min(pending[n]) if pending[n] else None)
    done = dict.fromkeys(nodes, 0)  # per node: the next step its clock would do
    # inbox[node][port]: (credits, flits) the neighbour across ``port`` sent at the step before
    inbox: dict[Coord, dict[str, tuple[list[Credits], list[Flit]]]] = {}
    delivered = 0
    started = time.perf_counter()
    while (due := schedule.next()) is not None:
        t, active = due
        boxes, inbox = inbox, {}
        for n in sorted(active):
            e = flit_engines[n]
            e.steps += t - done[n]
            box = boxes.get(n)
            if box is not None:
                for p in ports[n]:  # canonical order, credits first, as Lockstep takes a frame
                    got = box.get(p)
                    if got is None:
                        continue
                    for c in got[0]:
                        e.credit_back(p, c)
                    for flit in got[1]:
                        e.receive(flit, p)
            injs = pending[n]
            if injs:
                for inj in injs.pop(t, ()):
                    e.inject(inj)
            before = len(e.deliveries)
            was_busy = e.busy()
            sends = e.step(t)
            done[n] = t + 1
            delivered += len(e.deliveries) - before
            if was_busy or sends:
                schedule.busy(t)
            schedule.wake(n, t + 1 if e.busy() else (min(injs) if injs else None))
            if not (sends or e.freed):
                continue
            nbs = across[n]
            for p, flit in sends:
                nb, q = nbs[p]
                assert nb is not None
                to = inbox.setdefault(nb, {})
                got = to.get(q)
                if got is None:
                    to[q] = ([], [_as_received(flit)])
                    schedule.wake(nb, t + 1)
                else:
                    got[1].append(_as_received(flit))
            for p, c in e.take_freed().items():
                nb, q = nbs[p]
                assert nb is not None
                to = inbox.setdefault(nb, {})
                got = to.get(q)
                if got is None:
                    to[q] = ([c], [])
                    schedule.wake(nb, t + 1)
                else:
                    got[0].append(c)
        if progress is not None:
            progress(delivered, expected)
    end = schedule.end
    assert end is not None
    for n in nodes:
        e = flit_engines[n]
        e.steps += max(0, end + 1 - done[n])
        e.end(end)
    for n, e in flit_engines.items():
        collector.handle(protocol.Hello(n, ""))
        collector.handle(take_report(e, n, 0))
        collector.handle(done_report(e, n, host="", status="ok", last_step=end))
    raw = collector.raw
    raw.wall_s = time.perf_counter() - started
    if raw.last_step >= settings.max_steps:
        raw.incomplete.append(f"step budget of {settings.max_steps} steps ran out")
    return raw
