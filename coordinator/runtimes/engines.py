"""Every node's own engine in one plain lockstep loop: the in-process runtime without trio and links.

Why: large mcast(n, d, c) runs (seed 002) need each node's buffer occupancy (``peak_queue``,
``node_stats``), which only the nodes' :class:`~node.switching.engine.Engine` measures — the reference
model (``coordinator/runtimes/model.py``) does not — while the trio runtime spends most of its time on
per-step link frames. This loop drives the very same engines with the very same lockstep
driver as the actor (:class:`node.switching.lockstep.Lockstep`: credits, packets, injections, step,
quiescence), handing each node's step frames to its neighbours in memory, in its sparse mode
(:class:`node.switching.lockstep.Schedule`: only nodes with work do a step; empty frames are not made).
Frames that carry packets, and the plan, go through msgpack as on the wire, and the records are gathered from
the nodes' own reports by the session's :class:`Collector`. Its records equal the in-process
runtime's, node statistics included (``tests/test_mcast.py`` checks it).

Under wormhole switching (:func:`_run_flits`) the same sparse schedule steps the flit engines
without frames: each flit an engine sends is handed to its neighbour's engine as it is (a head's
header through msgpack, as the wire would give it; body and tail flits carry nothing to encode),
with the credits returned beside them — a flit costs a few list operations, not a frame. Holding
every engine, it also judges deadlock as the reference model does (:func:`_verdict`,
docs/wormhole.md "Deadlock"), which the frame loop, like the distributed runtimes, does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from coordinator.runtimes.records import Collector, RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node import protocol
from node.actor import done_report, take_report
from node.routing import registry
from node.switching.engine import Injection
from node.switching.factory import STALL_STEPS, AnyEngine, LockstepWormhole, Segment, make_engine
from node.switching.lockstep import Lockstep, Schedule
from node.switching.wormhole import WormholeEngine
from node.topology import PORTS, Coord, Topology
from node.transport.wire import Credits, Flit, StepFrame, as_received, decode_flit, decode_link, encode_link

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
    return _run_frames(plan, settings, progress)


def _run_frames(
    plan: Plan, settings: RunSettings, progress: Callable[[int, int], None] | None = None
) -> RawRun:
    """Every node's :class:`Lockstep` clock in sparse mode, frames between them (any switching)."""
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


_HEADS = frozenset({"H", "W"})

_Key = tuple[Coord, str]  # a worm segment: the node and the input channel it is bound to


def _vc(port: str, vc: int) -> str:
    return port if vc == 0 else f"{port}.{vc}"


def _closed(why: dict[_Key, list[tuple[_Key, ...]]]) -> set[_Key]:
    """The largest set of ``why``'s keys in which each has a reason (a tuple of keys) inside the set:
    drop those with none, then those whose last such reason a drop broke, and so on."""
    outside: dict[tuple[_Key, int], int] = {}  # (key, its reason's index) -> members outside the set
    left: dict[_Key, int] = {}  # key -> its reasons with every member inside
    member_of: dict[_Key, list[tuple[_Key, int]]] = {}
    for key, rs_all in why.items():
        left[key] = 0
        for j, rs in enumerate(rs_all):
            n = 0
            for x in rs:
                member_of.setdefault(x, []).append((key, j))
                if x not in why:
                    n += 1
            outside[(key, j)] = n
            if not n:
                left[key] += 1
    dead = {k for k, n in left.items() if n}
    drop = [k for k, n in left.items() if not n]
    while drop:
        for key, j in member_of.get(drop.pop(), []):
            outside[(key, j)] += 1
            if outside[(key, j)] == 1 and key in dead:
                left[key] -= 1
                if not left[key]:
                    dead.discard(key)
                    drop.append(key)
    return dead


def _verdict(
    t: int,
    topo: Topology,
    eng: dict[Coord, LockstepWormhole],
    suspects: list[Coord],
    still: int = STALL_STEPS,
) -> str | None:
    """The deadlock verdict at the end of step ``t`` (docs/wormhole.md "Deadlock"), from the engines'
    own tables: None, or the ``incomplete`` line naming the worm segments on its cycles.

    From the segments that became still at ``t`` (at the ``suspects``, the nodes with one: every
    new cycle has one), the still segments their waits reach, and the reasons each cannot move:
    a set of segments it waits for, every one of which must stay still for the reason to last.
    The deadlocked segments are the largest set in which each has a reason inside the set.
    """
    now = t - still - 1
    cache: dict[Coord, dict[str, Segment]] = {}

    def at(n: Coord) -> dict[str, Segment]:
        """Node ``n``'s still segments by channel (asked of its engine once)."""
        got = cache.get(n)
        if got is None:
            got = cache[n] = {sg.channel: sg for sg in eng[n].segments(t)}
        return got

    def across(n: Coord, port: str, vc: int) -> _Key:
        """The input channel across output VC ``vc`` of ``port`` at ``n``."""
        nb = topo.neighbour(n, port)
        assert nb is not None
        return (nb, _vc(topo.opposite(port), vc))

    segs: dict[_Key, Segment] = {}
    todo: list[_Key] = []
    for n in suspects:
        for ch, sg in at(n).items():
            if sg.since == now:
                segs[(n, ch)] = sg
                todo.append((n, ch))
    why: dict[_Key, list[tuple[_Key, ...]]] = {}
    while todo:
        key = todo.pop()
        sg = segs[key]
        n = key[0]
        rs = [tuple((n, h) if isinstance(h, str) else across(n, *h) for h in hs) for hs in sg.held_by]
        rs += [(across(n, port, vc),) for port, vc in sg.dry]
        if sg.empty_on is not None:
            port, vc = sg.empty_on
            nb = topo.neighbour(n, port)
            assert nb is not None
            h = eng[nb].holder(topo.opposite(port), vc)
            if h is not None:
                rs.append(((nb, h),))
        if not rs:
            continue
        why[key] = rs
        for w in rs:
            for x in w:
                if x not in segs:
                    got = at(x[0]).get(x[1])
                    if got is not None:
                        segs[x] = got
                        todo.append(x)
    dead = _closed(why)
    if not dead:
        return None
    nxt = {k: {x for rs in why[k] if all(y in dead for y in rs) for x in rs} for k in dead}
    ring = []
    for k in dead:  # on a cycle: reachable from its own successors
        seen, todo = set(nxt[k]), list(nxt[k])
        while todo and k not in seen:
            for x in nxt[todo.pop()]:
                if x not in seen:
                    seen.add(x)
                    todo.append(x)
        if k in seen:
            ring.append(k)
    ring.sort()
    worms = {segs[k].worm for k in ring}
    parts = [
        f"worm {list(segs[k].worm)} at ({k[0][0]},{k[0][1]}) in {k[1]} holds {sorted(segs[k].owns)} "
        f"and waits for {sorted(segs[k].wants)}"
        for k in ring
    ]
    return f"deadlock at cycle {t}: {len(worms)} worms wait for each other in a cycle: " + "; ".join(parts)


def _as_received(flit: Flit) -> Flit:
    """A head as its neighbour decodes it (its header through msgpack)."""
    got = decode_flit(as_received(flit.to_wire()))
    assert isinstance(got, Flit), got
    return got


def _run_flits(plan: Plan, settings: RunSettings, progress: Callable[[int, int], None] | None) -> RawRun:
    """Wormhole switching: :func:`run_engines`' sparse lockstep loop with flits handed over directly.

    Step for step what :class:`node.switching.lockstep.Lockstep` in sparse mode does for each node, and the
    schedule of :class:`node.switching.lockstep.Schedule` written out for two kinds of wake-up: a node works
    at t+1 when it is busy after step t or a neighbour sent it a flit or a credit at t, and at
    each step it injects; the run ends at the first step past the last busy step + diameter + 1
    (or the step budget) with no node due. The idle steps are counted, and every engine ends with
    :meth:`LockstepWormhole.end` there: the records are the frame loop's.

    The flits and credits sent at t are given to their engines before any node does t+1; a node's
    step reads only its own state, and a flit on one port and a credit on another change
    different tables, so this equals taking each node's frames, port by port, just before its
    step.

    Deadlock: after each step (and at the steps no node works at, while some worm is bound) the
    loop judges the verdict of docs/wormhole.md "Deadlock" (:func:`_verdict`); from the step it
    holds no injection is made, ``last_busy`` forgets the plan's later steps, and the verdict's
    line heads ``incomplete``. Otherwise the loop, and its records, are the frame loop's.
    """
    topo = plan.topology
    engines = _engines(topo, settings)
    nodes = sorted(topo.nodes())  # node i is nodes[i]: a step visits its nodes in this order
    rank = {n: i for i, n in enumerate(nodes)}
    eng: list[LockstepWormhole] = []
    still = STALL_STEPS + settings.router_timing().settle  # a worm's longest wait that is not stuck
    for n in nodes:
        e = engines[n]
        assert isinstance(e, LockstepWormhole)
        e.watch(still)
        eng.append(e)
    pending: list[dict[int, list[Injection]]] = [{} for _ in nodes]
    injecting: dict[int, set[int]] = {}  # step -> the nodes that inject then
    for i, n in enumerate(nodes):
        for inj in _injections(plan, n):
            pending[i].setdefault(inj.step, []).append(inj)
            injecting.setdefault(inj.step, set()).add(i)
    inj_steps = sorted(injecting)
    # per node and port: the neighbour across it, its engine and the port it hears us on
    across: list[dict[str, tuple[int, LockstepWormhole, str]]] = []
    for n in nodes:
        sides = {}
        for p in PORTS:
            nb = topo.neighbour(n, p)
            if nb is not None:
                sides[p] = (rank[nb], eng[rank[nb]], topo.opposite(p))
        across.append(sides)
    collector = Collector(plan)
    expected = collector.expected
    diameter, max_steps = topo.diameter, settings.max_steps
    last_busy = plan.last_step
    done = [0] * len(nodes)  # per node: the next step its clock would do
    flits: list[tuple[LockstepWormhole, str, Flit]] = []  # sent at t, received at t+1
    credits: list[tuple[LockstepWormhole, str, Credits]] = []
    due: set[int] = set()  # the nodes that work at t+1
    take = WormholeEngine.receive
    k = 0  # inj_steps[k]: the next step at which some node injects
    t = -1
    delivered = 0
    busy_at = -1  # the last step a node was busy (last_busy without the plan's last step)
    touched: dict[int, list[int]] = {}  # step -> the nodes where a worm changed then
    by_node = {n: eng[i] for i, n in enumerate(nodes)}
    verdict: str | None = None

    def judge(at: int) -> str | None:
        """The deadlock verdict at the end of step ``at``, when a worm may have become still then
        (else the still worms and what they wait for are those of ``at`` − 1: no deadlock)."""
        nonlocal k, last_busy
        now = at - still - 1
        suspects = [nodes[i] for i in touched.pop(now, ()) if eng[i].last_changed_at(now)]
        found = _verdict(at, topo, by_node, suspects, still) if suspects else None
        if found is not None:  # the injections still to come are not made; the run drains
            k = len(inj_steps)
            for pq in pending:
                pq.clear()
            last_busy = max(busy_at, min(plan.last_step, at))
        return found

    started = time.perf_counter()
    while True:
        horizon = min(last_busy + diameter + 1, max_steps)
        nxt = t + 1 if due else None
        if k < len(inj_steps) and (nxt is None or inj_steps[k] < nxt):
            nxt = inj_steps[k]
        if verdict is None and touched and nxt != t + 1:
            # the steps no node works at: the tables stand still, only the worms' waits grow
            last = t + still + 1 if nxt is None else min(nxt - 1, t + still + 1)
            for at in range(t + 1, min(last, max_steps) + 1):
                verdict = judge(at)
                if verdict is not None:
                    horizon = min(last_busy + diameter + 1, max_steps)
                    nxt = t + 1 if due else None
                    break
        if nxt is None or nxt > horizon:
            break
        t = nxt
        active, due = due, set()
        if k < len(inj_steps) and inj_steps[k] == t:
            active |= injecting[t]
            k += 1
        for e, p, c in credits:
            e.credit_back(p, c)
        for e, p, flit in flits:
            take(e, flit, p)  # a Flit from an engine: not LockstepWormhole.receive's check for other items
        flits, credits = [], []
        for i in sorted(active):
            e = eng[i]
            e.steps += t - done[i]
            done[i] = t + 1
            injs = pending[i]
            if t in injs:
                for inj in injs.pop(t):
                    e.inject(inj)
            if progress is not None:
                delivered -= len(e.deliveries)
            was_busy = e.busy()
            sends = e.step(t)
            if progress is not None:
                delivered += len(e.deliveries)
            if was_busy or sends:
                busy_at = t
                if t > last_busy:
                    last_busy = t
            if verdict is None and e.touched() == t:  # after a verdict, nothing more to judge
                touched.setdefault(t, []).append(i)
            if e.busy():
                due.add(i)
            if not (sends or e.freed):
                continue
            nbs = across[i]
            for p, flit in sends:
                j, ne, q = nbs[p]
                flits.append((ne, q, _as_received(flit) if flit.kind in _HEADS else flit))
                due.add(j)
            for p, c in e.take_freed().items():
                j, ne, q = nbs[p]
                credits.append((ne, q, c))
                due.add(j)
        if verdict is None and touched:
            verdict = judge(t)
        if progress is not None:
            progress(delivered, expected)
    end = horizon
    for i, e in enumerate(eng):
        e.steps += max(0, end + 1 - done[i])
        e.end(end)
    for n in topo.nodes():  # the frame loop's order of reports
        e = eng[rank[n]]
        collector.handle(protocol.Hello(n, ""))
        collector.handle(take_report(e, n, 0))
        collector.handle(done_report(e, n, host="", status="ok", last_step=end))
    raw = collector.raw
    raw.wall_s = time.perf_counter() - started
    if verdict is not None:
        raw.incomplete.insert(0, verdict)
    if raw.last_step >= settings.max_steps:
        raw.incomplete.append(f"step budget of {settings.max_steps} steps ran out")
    return raw
