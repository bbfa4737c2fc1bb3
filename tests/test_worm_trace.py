"""The wormhole flit trace (issue 38): each worm's runs of flits per link and ejection, as the
replay page rebuilds worms from them. Checked against what wormhole switching must satisfy, per
flit and per cycle, on random small runs; the same in every runtime; absent without ``--trace``."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.cli import main
from coordinator.experiments.run import result_document
from coordinator.runtimes.containers import raw_from_json, raw_to_json
from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.processes import run_processes
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.topology import Coord, Topology
from node.transport.wire import Worm
from tests._env import need_broker
from tests.test_switching import shared_plan
from tests.test_wormhole import NO_EXPLAIN, draw_topology_and_multicasts

WORM: dict[str, Any] = {"switching": "wormhole", "contention": "shared", "trace": True}

Key = tuple[Worm, Coord, str, str]
"""A worm's flits that came into a node on a port (``inj``: injected there) leaving it on a port
(``ej``: to the node's processor)."""


def flit_times(raw: RawRun) -> dict[Key, list[int]]:
    """Per worm, node, input and output: the step each of its flits crossed, in order (runs expanded)."""
    out: dict[Key, list[int]] = defaultdict(list)
    for _, node, came, port, worm, first, count in sorted(raw.worms, key=lambda e: e[5]):
        out[(worm, node, came, port)].extend(range(first, first + count))
    return out


def worm_state(topo: Topology, runs: list[dict[str, Any]], flits: int, t: int) -> list[dict[str, Any]]:
    """What the page must show at cycle ``t`` for one multicast's ``worms`` (run.json), worked out
    flit by flit: a flit crossed a link if it was sent in a step before ``t``; a worm holds a link
    while a pass of it over the link has begun and not ended (its first flit crossed, its last
    not); a flit waits in a node's input buffer from the step after it arrived until it went on
    (on every branch at once) or to the processor; a head is where a pass has arrived and not
    gone on, while the worm is still there."""
    order: list[list[int]] = []
    sent: dict[int, dict[tuple[Coord, str], list[int]]] = defaultdict(lambda: defaultdict(list))
    left: dict[int, dict[tuple[Coord, str], dict[str, list[int]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for r in runs:
        if r["worm"] not in order:
            order.append(r["worm"])
        w, node = order.index(r["worm"]), (r["from"][0], r["from"][1])
        times = list(range(r["first"], r["first"] + r["count"]))
        left[w][(node, r["in"])][r["port"]] += times
        if r["port"] != "ej":
            sent[w][(node, r["port"])] += times
    out = []
    for w, wid in enumerate(order):
        holds, heads, buffered = [], [], 0
        for (node, port), times in sent[w].items():
            to = topo.neighbour(node, port)
            assert to is not None
            crossed = sum(1 for s in times if s < t)
            if crossed % flits:
                holds.append([*node, *to])
            came = topo.opposite(port)
            gone = {o: sum(1 for s in ts if s < t) for o, ts in left[w].get((to, came), {}).items()}
            cycles = {s for ts in left[w].get((to, came), {}).values() for s in ts if s < t}
            here = crossed - len(cycles)  # one flit leaves an input a cycle, on all its branches at once
            buffered += here
            went_on = max([n for o, n in gone.items() if o != "ej"], default=0)
            earlier = (crossed - 1) // flits * flits if crossed else 0  # flits of its earlier passes
            if crossed and (crossed % flits or here) and went_on <= earlier:
                heads.append(list(to))
        if holds or buffered:
            heads.sort()
            out.append(
                {"worm": wid, "head": heads[0] if heads else None, "heads": heads, "holds": sorted(holds),
                 "buffered": buffered}
            )  # fmt: skip
    return out


def check_trace(plan: Plan, s: RunSettings, raw: RawRun) -> None:
    """The wormhole invariants a flit trace must satisfy; complete runs also account for every flit."""
    topo, flits = plan.topology, s.flits
    times = flit_times(raw)
    mc_of = {worm: mc for mc, _, _, _, worm, _, _ in raw.worms}
    links: dict[tuple[Worm, Coord, str], list[int]] = defaultdict(list)  # per worm and link, all passes
    for (worm, node, _came, port), ts in times.items():
        assert len(ts) == len(set(ts)), (worm, node, port)  # a run is one flit a cycle
        if port != "ej":
            assert topo.neighbour(node, port) is not None
            links[(worm, node, port)] += ts
    for ts in links.values():
        ts.sort()
        assert len(ts) == len(set(ts))  # one flit of a worm a cycle on a link
    # each head crossing of the link trace is the first flit of a pass of a worm over that link
    heads = sorted(
        (mc_of[w], n, p, ts[i]) for (w, n, p), ts in links.items() for i in range(0, len(ts), flits)
    )
    assert heads == sorted(raw.trace)
    # a flit leaves an input on every branch at once, and not before the step after it arrived
    outs: dict[tuple[Worm, Coord, str], dict[str, list[int]]] = defaultdict(dict)
    for (worm, node, came, port), ts in times.items():
        outs[(worm, node, came)][port] = sorted(ts)
    for (worm, node, came), by_port in outs.items():
        lists = list(by_port.values())
        nb = topo.neighbour(node, came) if came != "inj" else None
        if nb is not None and len(links.get((worm, nb, topo.opposite(came)), [])) > flits:
            continue  # the worm passed this input more than once (a tree that meets itself, as HCM's can)
        for ts in lists[1:]:
            n = min(len(ts), len(lists[0]))
            assert ts[:n] == lists[0][:n], "a branching worm moves a flit on all its branches at once"
        if came != "inj":
            nb = topo.neighbour(node, came)
            assert nb is not None
            arrived = links.get((worm, nb, topo.opposite(came)), [])
            for i, s_out in enumerate(lists[0]):
                assert i < len(arrived) and arrived[i] < s_out, (worm, node, i)
    # per cycle: no input buffer holds more than B flits (one VC); a link carries one worm at a time
    last = max([0, *(ts[-1] for ts in times.values())]) + 2
    for t in range(last + 1):
        for (worm, node, port), ts in links.items():
            to = topo.neighbour(node, port)
            assert to is not None
            n_in = sum(1 for x in ts if x < t)
            # one flit leaves an input a cycle (on all its branches at once): count the cycles
            n_out = len(
                {x for g in outs.get((worm, to, topo.opposite(port)), {}).values() for x in g if x < t}
            )
            assert 0 <= n_in - n_out <= s.buffer_flits * s.vcs, (worm, to, t)
        if s.vcs == 1:
            held: dict[tuple[Coord, str], list[Worm]] = defaultdict(list)
            for (worm, node, port), ts in links.items():
                if sum(1 for x in ts if x < t) % flits:
                    held[(node, port)].append(worm)
            assert all(len(ws) == 1 for ws in held.values()), (t, held)
    if raw.incomplete or raw.errors:  # e.g. a deadlock (a worm may even block itself on a small ring)
        return
    for (worm, node, port), ts in links.items():
        assert len(ts) % flits == 0, (worm, node, port)  # every flit of each pass crossed
    # a delivery is the step after its worm's tail went to the destination's processor
    ejected = {
        (mc_of[w], n, ts[i] + 1)
        for (w, n, _, p), ts in times.items()
        if p == "ej"
        for i in range(flits - 1, len(ts), flits)
    }
    delivered = {(a.mc, a.node, a.step) for a in raw.arrivals}
    assert delivered <= ejected


@st.composite
def traced_runs(draw: st.DrawFn) -> tuple[Plan, RunSettings]:
    _, topo, mcs = draw_topology_and_multicasts(draw, (1, 5), 15)
    s = RunSettings(
        **WORM,
        runtime="engines",
        port_model=draw(st.sampled_from(["all-port", "one-port"])),
        flits=draw(st.integers(1, 6)),
        ts=draw(st.integers(0, 4)),
        buffer_flits=draw(st.integers(1, 3)),
        vcs=draw(st.sampled_from([1, 1, 2])) if topo.is_torus is False else 1,
    )
    return Plan(topo, tuple(mcs)), s


@settings(max_examples=40, deadline=None, phases=NO_EXPLAIN)
@given(traced_runs())
def test_the_flit_trace_is_what_wormhole_switching_allows(case: tuple[Plan, RunSettings]) -> None:
    plan, s = case
    raw = run_engines(plan, s)
    event("deadlocked" if raw.incomplete or raw.errors else "completed")
    assert raw.worms, "a traced wormhole run records its flits"
    check_trace(plan, s, raw)


def test_the_page_state_from_run_json_follows_the_flits(tmp_path: Path) -> None:
    """The independent worm state above on a run.json: the worms grow, stream and drain."""
    out = tmp_path / "dp"
    argv = ["run", "--topology", "mesh:6x6", "--algorithm", "dp", "--dests", "3,2 5,5 1,4 0,5 4,0",
            "--switching", "wormhole", "--flits", "4", "--trace", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads((out / "run.json").read_text())
    (m,) = doc["multicasts"]
    topo = Topology.parse(doc["run"]["topology"])
    first = min(r["first"] for r in m["worms"])
    assert worm_state(topo, m["worms"], 4, first) == []
    assert [w["holds"] for w in worm_state(topo, m["worms"], 4, first + 1)] == [
        [[*m["source"], *m["worms"][0]["to"]]]
    ]
    seen = [worm_state(topo, m["worms"], 4, t) for t in range(first, first + 200)]
    assert max(len(w["holds"]) for ws in seen for w in ws) >= 2  # a worm spans links
    assert seen[-1] == []  # all gone


def test_every_runtime_records_the_same_flits(tmp_path: Path) -> None:
    plan = shared_plan()
    s = RunSettings(**WORM, flits=8, ts=5)
    engines = run_engines(plan, replace(s, runtime="engines"))
    inproc = trio.run(run_inprocess, plan, s)
    check_trace(plan, s, engines)
    assert sorted(inproc.worms) == sorted(engines.worms)
    sharded = trio.run(run_inprocess, plan, replace(s, shards=2))  # nodes in two processes
    assert sorted(sharded.worms) == sorted(engines.worms)
    need_broker()
    procs = trio.run(
        run_processes, plan, replace(s, runtime="processes", wall_budget=120, run_dir=str(tmp_path))
    )
    assert sorted(procs.worms) == sorted(engines.worms)


def test_trace_off_records_no_worms_and_the_same_results() -> None:
    plan = shared_plan()
    on = RunSettings(**WORM, runtime="engines", flits=8, ts=5)
    off = replace(on, trace=False)
    traced, plain = run_engines(plan, on), run_engines(plan, off)
    assert plain.worms == [] and plain.trace == [] and traced.worms
    # the containers' raw records (and deploy's raw.json) carry them, and only with a trace
    assert raw_from_json(raw_to_json(traced)).worms == traced.worms
    assert '"worms"' not in raw_to_json(plain)
    doc_on, doc_off = result_document(plan, on, traced), result_document(plan, off, plain)
    assert all("worms" not in m and "links" not in m for m in doc_off["multicasts"])

    def logical(m: dict[str, Any]) -> dict[str, Any]:  # the record without its wall clock and trace
        out = {k: v for k, v in m.items() if k not in ("links", "worms", "cv_wall")}
        out["arrivals"] = [{k: v for k, v in a.items() if k != "wall_ns"} for a in m["arrivals"]]
        return out

    assert [logical(m) for m in doc_on["multicasts"]] == [logical(m) for m in doc_off["multicasts"]]
    assert set(doc_on["multicasts"][0]) - set(doc_off["multicasts"][0]) == {"links", "worms"}
    saf = replace(on, switching="store-and-forward", contention="isolated")
    doc_saf = result_document(plan, saf, run_engines(plan, saf))
    assert all("links" in m and "worms" not in m for m in doc_saf["multicasts"])
