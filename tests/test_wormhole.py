"""Flit-level wormhole switching: node engines (node/switching/wormhole.py) and the reference model.

* one multicast in an idle network arrives exactly at seed 004's eq. 7 (β = 1) plus the
  preparation time and the waits for an injection channel — computed here by a message-level
  oracle that walks the routing rules, never by the engines' code;
* two worms that need the same channel serialize by L cycles;
* a blocked head holds every channel behind it (a chain of four worms, cycles by hand);
* a cyclic wait ends as a deadlock that names the worms and the channels they hold;
* the engines' lockstep network and the centralised model agree record for record.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import msgpack
import pytest
from hypothesis import Phase, event, example, given, settings
from hypothesis import strategies as st

from coordinator.analysis.timing import Timing
from coordinator.experiments.run import emulate
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.routing import registry
from node.switching.wormhole import PREP, Flit, WormholeEngine, decode_flit
from node.topology import Coord, Topology
from node.transport.wire import WireError
from tests.wormhole_helpers import Record, model_run, run_network, up_to_verdict, worm_settings

NO_EXPLAIN = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)  # explaining a failure takes minutes
MESH_ALGS = ("dp", "mp", "cp", "qg", "group-graph", "group-pattern", "tree", "unicast", "pair", "vh")
TORUS_ALGS = ("dp", "mp", "tasnem", "hcm", "t2w", "uniform", "tree", "unicast", "dor")


def _wire(x: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(x, use_bin_type=True), raw=False)


def eq7_oracle(
    topo: Topology, m: Multicast, *, port_model: str, flits: int, ts: int, prep: Mapping[str, int]
) -> tuple[list[Record], bool]:
    """Contention-free arrivals, message by message: prep + Σ (wait + Ts + L) + hops.

    Messages take the injection channel of their first port (one channel under one-port) in
    order; a message whose start-up begins at s delivers h of its own hops away at s + Ts + L + h;
    a node that starts new messages does so when it has received the tail (no preparation there).
    Also says whether two of the multicast's own messages would use one link at overlapping
    cycles (self-contention: then eq. 7 is only a lower bound).
    """
    busy: dict[tuple[Coord, str], list[tuple[int, int, int]]] = {}
    alg = registry.get(m.algorithm)
    free: dict[tuple[Coord, str], int] = {}
    heap: list[tuple[int, int, Coord, str, Any, int, int]] = []
    seq = 0
    out: list[Record] = []

    def push(ready: int, node: Coord, port: str, header: Any, hops: int, startups: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (ready, seq, node, port, _wire(header), hops, startups))
        seq += 1

    for port, header in alg.prepare(topo, m.source, list(m.destinations), m.params):
        push(m.step + prep.get(m.algorithm, 0), m.source, port, header, 1, 1)
    while heap:
        ready, msg, node, port, header, hops0, st0 = heapq.heappop(heap)
        chan = (node, "one" if port_model == "one-port" else port)
        start = max(ready, free.get(chan, 0))
        free[chan] = start + ts + flits
        depart = start + ts
        stack = [(node, port, header, hops0, st0)]
        while stack:
            at, p, h, hops, sts = stack.pop()
            sent = depart + hops - hops0
            busy.setdefault((at, p), []).append((sent, sent + flits - 1, msg))
            nb = topo.neighbour(at, p)
            assert nb is not None
            fwd = alg.forward(topo, nb, h)
            tail_in = depart + (hops - hops0 + 1) + flits
            if fwd.deliver:
                out.append((m.id, nb, tail_in, hops, sts))
            cont = fwd.carried if fwd.startup else len(fwd.sends)
            for i, ((q, hq), sq) in enumerate(zip(fwd.sends, fwd.startups_of(sts), strict=True)):
                if i < cont:
                    stack.append((nb, q, _wire(hq), hops + 1, sq))
                else:
                    push(tail_in, nb, q, hq, hops + 1, sq)
    # two uses of one link overlapping in time, by two worms or by one worm passing twice (an HCM
    # path on a torus can take a link again before its own tail has left it)
    clash = any(
        a[0] <= b[1] and b[0] <= a[1]
        for uses in busy.values()
        for i, a in enumerate(uses)
        for b in uses[i + 1 :]
    )
    return sorted(out), clash


@st.composite
def isolated(draw: st.DrawFn, kind: str) -> tuple[Topology, Multicast, str]:
    if kind == "mesh":
        topo = Topology.parse(f"mesh:{draw(st.integers(3, 7))}x{draw(st.integers(3, 7))}")
        alg = draw(st.sampled_from(MESH_ALGS))
    else:
        topo = Topology.parse(f"torus:{draw(st.integers(3, 6))}x{draw(st.integers(3, 6))}")
        alg = draw(st.sampled_from(TORUS_ALGS))
    nodes = sorted(topo.nodes())
    src = draw(st.sampled_from(nodes))
    others = [n for n in nodes if n != src]
    dests = draw(st.lists(st.sampled_from(others), min_size=1, max_size=min(12, len(others)), unique=True))
    step = draw(st.integers(0, 3))
    return topo, Multicast(0, alg, src, tuple(dests), step), draw(st.sampled_from(["all-port", "one-port"]))


def _check_eq7(case: tuple[Topology, Multicast, str], flits: int, ts: int) -> None:
    topo, m, pm = case
    run = run_network(topo, [m], port_model=pm, flits=flits, ts=ts)
    expected, clash = eq7_oracle(topo, m, port_model=pm, flits=flits, ts=ts, prep=PREP)
    if run.deadlock and clash:
        # alone in the network a worm can only block itself: a path that takes a link again while
        # its own tail still holds it (hypothesis found an HCM path on a 4x3 torus, 8 flits), and
        # every holding named is that multicast's
        event("self-deadlock")
        assert all(h.mc == m.id for h in run.deadlock)
        return
    assert not run.deadlock and not run.errors
    if clash:  # the multicast's own worms meet on a link: eq. 7 is a lower bound
        event("self-contention")
        assert [a[:2] + a[3:] for a in run.arrivals] == [a[:2] + a[3:] for a in expected]
        assert all(a[2] >= b[2] for a, b in zip(run.arrivals, expected, strict=True))
    else:
        assert run.arrivals == expected
    assert {(a[1]) for a in run.arrivals} == set(m.destinations)


@settings(max_examples=60, deadline=None, phases=NO_EXPLAIN)
@given(isolated("mesh"), st.integers(1, 12), st.integers(0, 40))
def test_isolated_mesh_multicast_arrives_at_eq7(
    case: tuple[Topology, Multicast, str], flits: int, ts: int
) -> None:
    _check_eq7(case, flits, ts)


@settings(max_examples=40, deadline=None, phases=NO_EXPLAIN)
@given(isolated("torus"), st.integers(1, 12), st.integers(0, 40))
@example(  # an HCM path that takes the source's -x link again right behind its own tail
    (Topology.parse("torus:5x6"), Multicast(0, "hcm", (4, 0), ((0, 0), (3, 4)), 0), "all-port"), 6, 0
)
@example(  # an HCM path of 8 flits that deadlocks on itself: it wants a link its own tail holds
    (
        Topology.parse("torus:4x3"),
        Multicast(0, "hcm", (0, 2), tuple((x, y) for x in range(4) for y in range(3) if (x, y) != (0, 2)), 0),
        "all-port",
    ),
    8,
    0,
)
def test_isolated_torus_multicast_arrives_at_eq7(
    case: tuple[Topology, Multicast, str], flits: int, ts: int
) -> None:
    _check_eq7(case, flits, ts)


@st.composite
def several(draw: st.DrawFn) -> tuple[Topology, list[Multicast], str]:
    """Two to four multicasts on one mesh, each of any algorithm, all injected at step 0."""
    topo, first, pm = draw(isolated("mesh"))
    out = [replace(first, step=0)]
    nodes = sorted(topo.nodes())
    for i in range(1, draw(st.integers(2, 4))):
        src = draw(st.sampled_from(nodes))
        dests = draw(
            st.lists(st.sampled_from([n for n in nodes if n != src]), min_size=1, max_size=8, unique=True)
        )
        out.append(Multicast(i, draw(st.sampled_from(MESH_ALGS)), src, tuple(dests), 0))
    return topo, out, pm


@settings(max_examples=8, deadline=None, phases=NO_EXPLAIN)
@given(several(), st.integers(1, 8), st.integers(0, 20))
async def test_isolated_contention_runs_each_multicast_in_an_idle_network(
    case: tuple[Topology, list[Multicast], str], flits: int, ts: int
) -> None:
    """Issue 36: ``--contention isolated`` under wormhole: several multicasts in one run (the
    in-process runtime, through ``emulate``), each arriving as eq. 7 says for it alone."""
    topo, multicasts, pm = case
    settings_ = RunSettings(port_model=pm, contention="isolated", switching="wormhole", flits=flits, ts=ts)
    raw = await emulate(Plan(topo, tuple(multicasts)), settings_)
    assert not raw.incomplete, raw.incomplete
    for m in multicasts:
        expected, clash = eq7_oracle(topo, m, port_model=pm, flits=flits, ts=ts, prep=PREP)
        got = sorted(a.logical() for a in raw.arrivals if a.mc == m.id)
        if clash:  # the multicast's own worms meet on a link: eq. 7 is a lower bound
            assert all(a[2] >= b[2] for a, b in zip(got, expected, strict=True))
        else:
            assert got == expected, m


@pytest.mark.parametrize("alg", ["dp", "mp", "qg"])
def test_seed004_defaults_equal_timing_eq7_plus_prep(alg: str) -> None:
    """DP, MP, QG send one worm per port: every arrival is prep + s·(Ts + L) + hops (Timing, β = 1)."""
    topo = Topology.parse("mesh:8x8")
    d = ((1, 6), (2, 6), (1, 7), (2, 3), (5, 2), (1, 2), (0, 2), (6, 1), (7, 7), (0, 0))
    m = Multicast(0, alg, (2, 5), d)
    run = run_network(topo, [m], port_model="all-port")
    timing = Timing("wormhole", ts=33, beta=1, flits=64)
    assert len(run.arrivals) == len(d)
    for _, _, step, hops, sts in run.arrivals:
        assert step == PREP[alg] + timing.latency(step, hops, sts)


def test_cp_pays_one_startup_per_worm_on_a_port() -> None:
    """CP from (0,0): every column is east, so its worms leave +x one after another (farthest first)."""
    topo = Topology.parse("mesh:4x4")
    m = Multicast(0, "cp", (0, 0), ((1, 1), (2, 2), (3, 3)))
    assert [p for p, _ in registry.get("cp").prepare(topo, m.source, list(m.destinations), {})] == ["+x"] * 3
    run = run_network(topo, [m], flits=10, ts=5)
    prep, per = PREP["cp"], 5 + 10  # the j-th worm on +x waits j·(Ts + L)
    assert run.arrivals == [
        (0, (1, 1), prep + 2 * per + per + 2, 2, 1),
        (0, (2, 2), prep + 1 * per + per + 4, 4, 1),
        (0, (3, 3), prep + 0 * per + per + 6, 6, 1),
    ]


def test_two_worms_on_one_channel_serialize_by_l() -> None:
    """A (0,0)→(3,0) wins (1,0)'s +x (its -x input comes before the injection channel); B waits L."""
    topo = Topology.parse("mesh:4x4")
    L, ts = 6, 4
    a = Multicast(0, "unicast", (0, 0), ((3, 0),), 0)
    b = Multicast(1, "unicast", (1, 0), ((3, 0),), 1)
    alone = run_network(topo, [b], flits=L, ts=ts).arrivals
    both = run_network(topo, [a, b], flits=L, ts=ts).arrivals
    assert alone == [(1, (3, 0), 1 + ts + L + 2, 2, 1)]
    assert both == [(0, (3, 0), ts + L + 3, 3, 1), (1, (3, 0), 1 + ts + L + 2 + L, 2, 1)]


def test_blocked_head_holds_its_channels() -> None:
    """C blocks B at (3,0), B blocks A at (2,0), A — blocked — still holds (1,0)'s +x, so D waits.

    By hand (Ts, L): C leaves (3,0) at Ts, its tail at Ts+L−1: C arrives at Ts+L+2. B's head
    reaches (3,0) at Ts+1, gets +x at Ts+L, arrives at (5,0) at Ts+2L+2; its tail leaves (2,0)
    at Ts+2L−2. A's head reaches (2,0) at Ts+2, gets +x at Ts+2L−1, arrives at (4,0) at Ts+3L+1;
    its tail leaves (1,0) at Ts+3L−3. D's head reaches (1,0) at Ts+3 but gets +x only at Ts+3L−2:
    it arrives at (2,0) at Ts+4L−1 instead of Ts+L+4.
    """
    topo = Topology.parse("mesh:6x1")
    ts, L = 3, 7
    c = Multicast(0, "unicast", (3, 0), ((5, 0),), 0)
    b = Multicast(1, "unicast", (2, 0), ((5, 0),), 0)
    a = Multicast(2, "unicast", (1, 0), ((4, 0),), 1)
    d = Multicast(3, "unicast", (0, 0), ((2, 0),), 2)
    expected = [
        (0, (5, 0), ts + L + 2, 2, 1),
        (1, (5, 0), ts + 2 * L + 2, 3, 1),
        (2, (4, 0), ts + 3 * L + 1, 3, 1),
        (3, (2, 0), ts + 4 * L - 1, 2, 1),
    ]
    assert run_network(topo, [c, b, a, d], flits=L, ts=ts).arrivals == expected
    model = model_run(Plan(topo, (c, b, a, d)), flits=L, ts=ts)
    assert model.logical_arrivals() == expected
    assert run_network(topo, [d], flits=L, ts=ts).arrivals == [(3, (2, 0), 2 + ts + L + 2, 2, 1)]


def test_cyclic_wait_ends_as_a_deadlock_naming_worms_and_channels() -> None:
    """Five worms on a ring, each two hops along +x: each head waits for the +x the next one holds."""
    topo = Topology.parse("torus:5x3")
    mcs = [Multicast(i, "unicast", (i, 0), (((i + 2) % 5, 0),), 0) for i in range(5)]
    run = run_network(topo, mcs, flits=8, ts=2)
    assert run.arrivals == []
    held = {(h.node, h.mc, h.channel, h.owns, h.wants) for h in run.deadlock}
    for i in range(5):
        assert ((i, 0), i, "inj+x", ("+x",), ()) in held  # its source's +x
        assert (((i + 1) % 5, 0), i, "-x", (), ("+x",)) in held  # its head, waiting for the next +x
    model = model_run(Plan(topo, tuple(mcs)), flits=8, ts=2)
    assert model.arrivals == [] and model.incomplete and "deadlock" in model.incomplete[0]
    assert sorted(e["mc"] for e in model.errors if e["kind"] == "deadlock") == sorted(2 * list(range(5)))
    assert any("holds ['+x']" in e["cause"] for e in model.errors)


def test_buffer_depth_two_streams_at_full_rate_and_one_does_not() -> None:
    topo = Topology.parse("mesh:5x1")
    m = [Multicast(0, "unicast", (0, 0), ((4, 0),))]
    arrival = {b: run_network(topo, m, flits=10, ts=0, buffer_flits=b).arrivals[0][2] for b in (1, 2, 8)}
    assert arrival[2] == arrival[8] == 10 + 4
    assert arrival[1] == 2 * (10 - 1) + 4 + 1  # one flit every other cycle


def draw_topology_and_multicasts(
    draw: st.DrawFn, count: tuple[int, int], last_step: int
) -> tuple[str, Topology, list[Multicast]]:
    """A small mesh or torus and ``count`` (low, high) random multicasts of its algorithms, each
    injected by ``last_step``: the kind, the topology and the multicasts."""
    kind = draw(st.sampled_from(["mesh", "torus"]))
    topo = Topology.parse(f"{kind}:{draw(st.integers(3, 5))}x{draw(st.integers(3, 5))}")
    algs = MESH_ALGS if kind == "mesh" else TORUS_ALGS
    nodes = sorted(topo.nodes())
    mcs = []
    for i in range(draw(st.integers(*count))):
        src = draw(st.sampled_from(nodes))
        others = [n for n in nodes if n != src]
        dests = draw(st.lists(st.sampled_from(others), min_size=1, max_size=6, unique=True))
        mcs.append(
            Multicast(i, draw(st.sampled_from(algs)), src, tuple(dests), draw(st.integers(0, last_step)))
        )
    return kind, topo, mcs


@st.composite
def shared_plans(draw: st.DrawFn) -> tuple[Plan, dict[str, Any]]:
    _, topo, mcs = draw_topology_and_multicasts(draw, (2, 6), 20)
    kw = {
        "port_model": draw(st.sampled_from(["all-port", "one-port"])),
        "flits": draw(st.integers(1, 8)),
        "ts": draw(st.integers(0, 6)),
        "buffer_flits": draw(st.integers(1, 3)),
    }
    return Plan(topo, tuple(mcs)), kw


@settings(max_examples=60, deadline=None, phases=NO_EXPLAIN)
@given(shared_plans())
def test_engines_and_model_agree_under_shared_contention(case: tuple[Plan, dict[str, Any]]) -> None:
    plan, kw = case
    model = model_run(plan, **kw)
    net = run_network(plan.topology, up_to_verdict(plan.multicasts, model), **kw)
    assert net.arrivals == model.logical_arrivals()
    assert bool(net.deadlock) == any("deadlock" in x for x in model.incomplete)
    event("deadlocked" if net.deadlock else "completed")
    assert net.traffic == model.traffic


def test_flit_wire_round_trip_and_bad_flits_are_data() -> None:
    head = Flit("H", 3, (1, 2, 0), "dp", [[1, 1]], 2, 1)
    body = Flit("B", 3, (1, 2, 0))
    for f in (head, body, Flit("T", 3, (1, 2, 0)), Flit("W", 0, (0, 0, 5), "unicast", [0, 1], 1, 1)):
        assert decode_flit(_wire(f.to_wire())) == f
    for bad in ([], ["X", 1, [0, 0, 0]], ["H", 1, [0, 0, 0]], ["B", -1, [0, 0, 0]], ["T", 1, [0, 0]], "H"):
        assert isinstance(decode_flit(bad), WireError)


def test_bad_flits_at_a_node_are_reported_never_raised() -> None:
    """A body flit with no head, a foreign worm's flit, an unknown port: errors; the node goes on."""
    topo = Topology.parse("mesh:3x3")
    e = WormholeEngine(topo, (1, 1), registry, worm_settings(flits=3, ts=0))
    e.receive(Flit("B", 0, (0, 1, 0)), "-x")
    e.receive(Flit("T", 0, (0, 1, 0)), "nowhere")
    assert e.step(0) == [] and not e.busy()
    e.receive(Flit("H", 1, (0, 1, 1), "unicast", [2, 1], 1, 1), "-x")
    e.receive(Flit("B", 1, (9, 9, 9)), "-x")
    assert [(p, f.kind) for p, f in e.step(1)] == [("+x", "H")]
    assert e.step(2) == [] and e.busy()  # the foreign flit dropped; the worm waits for its own
    e.receive(Flit("T", 1, (0, 1, 1)), "-x")
    assert [(p, f.kind) for p, f in e.step(3)] == [("+x", "T")] and not e.busy()
    assert [x.kind for x in e.errors] == ["bad-port", "stray-flit", "worm-mismatch"]
    assert e.take_freed() == {"-x": 4}


def _report(run_holdings: list[Any]) -> list[tuple[list[int], str, int]]:
    return sorted(
        (list(h.node), f"worm {list(h.worm)} in {h.channel} holds {sorted(h.owns)}", h.mc)
        for h in run_holdings
    )


@settings(max_examples=30, deadline=None, phases=NO_EXPLAIN)
@given(st.data())
def test_engines_and_model_report_the_same_deadlocks(data: st.DataObject) -> None:
    """Plans prone to deadlock (trees; path worms with one ejection channel): same cycle, same holdings."""
    topo = Topology.parse(data.draw(st.sampled_from(["mesh:4x4", "mesh:5x5", "torus:4x4"])))
    nodes = sorted(topo.nodes())
    alg = data.draw(st.sampled_from(["tree", "dp", "mp"]))
    mcs = []
    for i in range(data.draw(st.integers(4, 10))):
        src = data.draw(st.sampled_from(nodes))
        dests = data.draw(
            st.lists(st.sampled_from([n for n in nodes if n != src]), min_size=2, max_size=8, unique=True)
        )
        mcs.append(Multicast(i, alg, src, tuple(dests), data.draw(st.integers(0, 6))))
    kw: dict[str, Any] = {"port_model": "one-port", "flits": data.draw(st.integers(4, 12)), "ts": 2}
    model = model_run(Plan(topo, tuple(mcs)), **kw)
    net = run_network(topo, up_to_verdict(mcs, model), **kw)
    assert net.arrivals == model.logical_arrivals()
    if net.deadlock:
        assert net.last_step == model.last_step  # the same cycle ends the run
    assert _report(net.deadlock) == sorted(
        (e["node"], e["cause"], e["mc"]) for e in model.errors if e["kind"] == "deadlock"
    )
    event("deadlocked" if net.deadlock else "completed")
