"""mcast(n, d, c) (seed 002): message sets, the four rules, exact delivery under blocking buffers,
emulation = model, the engine loop = the in-process runtime, and ``meshcast run --mcast-set``."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.cli import main
from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.mcast import (
    ALGORITHMS,
    McastSet,
    lower_bound,
    mcast_plan,
    mcast_stats,
    message_set,
    random_params,
    random_set,
    tiles_params,
    worst_set,
)
from coordinator.workloads.plan import Plan, PlanError
from node.routing import registry
from node.routing.base import HeaderError
from node.routing.herley import cells, cycle_order, itinerary_forward, tiles, tree_forward, tree_prepare
from node.topology import Topology
from tests.helpers import emulated, link_sets, modelled

M8 = Topology.parse("mesh:8x8")


def _in_degree(ms: McastSet) -> Counter[tuple[int, int]]:
    return Counter(t for _, ds in ms.messages for t in ds)


def _exactly_once(plan: Plan, raw: RawRun) -> None:
    assert raw.dropped == 0 and not raw.incomplete, raw.incomplete
    got = sorted((a.mc, a.node) for a in raw.arrivals)
    assert got == sorted((m.id, d) for m in plan.multicasts for d in m.destinations)


# -- message sets ---------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(
    side=st.tuples(st.integers(2, 9), st.integers(2, 9)),
    d=st.integers(1, 8),
    c=st.integers(1, 8),
    seed=st.integers(0, 10**6),
    kind=st.sampled_from(["random", "worst"]),
)
def test_sets_respect_d_and_c(side: tuple[int, int], d: int, c: int, seed: int, kind: str) -> None:
    topo = Topology("mesh", *side)
    if not (d < topo.size and c < topo.size):
        with pytest.raises(PlanError):
            message_set(topo, kind, d, c, seed)
        return
    ms = message_set(topo, kind, d, c, seed)
    sources = [s for s, _ in ms.messages]
    assert len(sources) == len(set(sources))  # one message per node at most
    for s, ds in ms.messages:
        assert 1 <= len(ds) <= d and s not in ds and len(set(ds)) == len(ds)
    assert max(_in_degree(ms).values()) <= c
    assert ms.congestion <= c and ms.degree <= d
    assert message_set(topo, kind, d, c, seed) == ms  # seeded


def test_random_set_with_d_equal_c_fills_every_node() -> None:
    ms = random_set(Topology.parse("mesh:16x16"), 8, 8, seed=3)
    deg = _in_degree(ms)
    assert ms.congestion == 8 and sum(deg.values()) >= 0.98 * 8 * 256
    assert len(ms.messages) == 256


@pytest.mark.parametrize(
    ("spec", "c"), [("mesh:8x8", 1), ("mesh:8x8", 4), ("mesh:16x16", 8), ("mesh:6x4", 2)]
)
def test_worst_set_is_theorem_1s_instance(spec: str, c: int) -> None:
    topo = Topology.parse(spec)
    ms = worst_set(topo, 3, c, seed=2)
    side = max(1, math.isqrt(topo.size // (2 * c)))
    assert ms.region == (0, 0, side, side)

    def in_a(p: tuple[int, int]) -> bool:
        return p[0] < side and p[1] < side

    deg = _in_degree(ms)
    assert all(deg[p] == c for p in topo.nodes() if in_a(p))  # every node of A receives exactly c
    into_a = [(s, ds) for s, ds in ms.messages if any(in_a(t) for t in ds)]
    assert len(into_a) == c * side * side
    assert all(not in_a(s) and sum(map(in_a, ds)) == 1 for s, ds in into_a)
    entering = 2 * side if side < min(topo.cols, topo.rows) else 0
    assert lower_bound(ms) >= math.ceil(len(into_a) / entering)


def test_bad_sets_are_refused() -> None:
    with pytest.raises(PlanError, match="on the mesh"):
        random_set(Topology.parse("torus:4x4"), 2, 2)
    with pytest.raises(PlanError, match="unknown mcast set"):
        message_set(M8, "nope", 2, 2)
    with pytest.raises(PlanError, match="1 ≤ d, c < n"):
        random_set(M8, 0, 2)


# -- geometry ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("gx", "gy"), [(2, 2), (4, 2), (2, 4), (4, 4), (3, 4), (4, 3), (8, 2), (6, 6)])
def test_cycle_order_is_a_hamiltonian_cycle(gx: int, gy: int) -> None:
    order = cycle_order(gx, gy)
    assert sorted(order) == sorted((x, y) for x in range(gx) for y in range(gy))
    for a, b in zip(order, order[1:] + order[:1], strict=True):
        assert abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1


@pytest.mark.parametrize(
    ("w", "h", "count"), [(8, 8, 4), (16, 16, 16), (8, 8, 8), (6, 4, 4), (5, 5, 4), (16, 8, 2)]
)
def test_tiles_partition_the_rectangle_along_a_cycle(w: int, h: int, count: int) -> None:
    tl = tiles((0, 0, w, h), count)
    covered = [p for t in tl for p in cells(t)]
    assert sorted(covered) == sorted((x, y) for x in range(w) for y in range(h))
    assert len({(t[2], t[3]) for t in tl}) == 1 and len(tl) <= count
    if len(tl) > 2 and len(tl) % 2 == 0:  # consecutive tiles (and the last and first) touch
        for a, b in zip(tl, tl[1:] + tl[:1], strict=True):
            assert abs(a[0] - b[0]) // a[2] + abs(a[1] - b[1]) // a[3] == 1


# -- the rules on their own -----------------------------------------------------------------------
def test_itinerary_delivers_spawns_and_continues() -> None:
    header = [[2, 0, 1, [[[2, 2, 1, []]]]], [4, 0, 1, []]]
    assert itinerary_forward(M8, (0, 0), header).sends == [("+x", header)]
    f = itinerary_forward(M8, (2, 0), header)
    assert f.deliver and f.sends == [("+y", [[2, 2, 1, []]]), ("+x", [[4, 0, 1, []]])]
    g = itinerary_forward(M8, (2, 0), [[2, 0, 0, [[[2, 0, 1, []]]]]])  # a spawn that starts here
    assert g.deliver and g.sends == []


@pytest.mark.parametrize(
    "header",
    [[], [[9, 9, 1, []]], [[1, 1, 2, []]], [[1, 1, 1, 5]], [[1, 1]], 7, [["a", 1, 1, []]], [[1, 0, 0, [[]]]]],
)
def test_bad_itineraries_are_header_errors(header: object) -> None:
    with pytest.raises(HeaderError):
        itinerary_forward(M8, (1, 0), header)


def test_tree_wraps_a_registered_rule_and_refuses_itself() -> None:
    sends = tree_prepare(M8, (0, 0), [(3, 3), (5, 1)], {"base": "vh"})
    assert sends and all(h[0] == "vh" for _, h in sends)
    f = tree_forward(M8, M8.neighbour((0, 0), sends[0][0]) or (0, 0), sends[0][1])
    assert all(h[0] == "vh" for _, h in f.sends)
    for bad in ("tree", "herley-tiles", 3):
        with pytest.raises(PlanError):
            tree_prepare(M8, (0, 0), [(3, 3)], {"base": bad})
    with pytest.raises(HeaderError):
        tree_forward(M8, (0, 0), ["replicate", [1, 1]])


def test_rules_refuse_bad_parameters() -> None:
    tiles_rule, random_rule = registry.get("herley-tiles"), registry.get("herley-random")
    with pytest.raises(PlanError, match="does not split"):
        tiles_rule.prepare(Topology.parse("mesh:6x6"), (0, 0), [(1, 1)], {"level": 2})
    with pytest.raises(PlanError, match="never selected"):
        random_rule.prepare(M8, (0, 0), [(1, 1)], {"phases": []})
    with pytest.raises(PlanError, match="nothing left"):
        random_rule.prepare(M8, (0, 0), [(1, 1)], {"phases": [[1, 1, 0, 0, [[0, 0, 0], [1, 0, 0]]]]})
    with pytest.raises(PlanError, match="listed twice"):
        tiles_rule.prepare(M8, (0, 0), [(1, 1), (1, 1)], {})


def test_coordinator_parameters_have_the_papers_shape() -> None:
    ms = random_set(Topology.parse("mesh:16x16"), 16, 16, seed=1)
    tp = tiles_params(ms)
    assert {p["level"] for p in tp} == {2}  # 4^2 = 16 c-tiles of 4×4
    per_node = Counter((t, s) for p in tp for t, s in p["im"])
    assert max(per_node.values()) <= 1 + math.floor(math.log2(16)) + 16  # Theorem 2's O(c) bound
    rp = random_params(ms, r=2, seed=1)
    assert all(p["phases"] for p in rp)
    n_tiles, n_blocks = rp[0]["phases"][0][:2]
    assert (n_tiles, n_blocks) == (16, 4)  # c tiles of n/c = 16 nodes, √16 = 4 blocks of 4
    slots = Counter((ph[2], ph[3]) for p in rp for ph in p["phases"][:1])
    assert max(slots.values()) <= 2  # at most two master copies per intermediate node


# -- runs: exact delivery, emulation = model, the engine loop = the runtime ------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    side=st.tuples(st.integers(2, 8), st.integers(2, 8)),
    d=st.integers(1, 5),
    c=st.integers(1, 5),
    seed=st.integers(0, 1000),
    kind=st.sampled_from(["random", "worst"]),
    algorithm=st.sampled_from(ALGORITHMS),
    port_model=st.sampled_from(["one-port", "all-port"]),
    buffer=st.integers(1, 3),
)
def test_every_message_delivered_exactly_once_under_blocking(
    side: tuple[int, int], d: int, c: int, seed: int, kind: str, algorithm: str, port_model: str, buffer: int
) -> None:
    topo = Topology("mesh", *side)
    if d >= topo.size or c >= topo.size:
        return
    plan = mcast_plan(message_set(topo, kind, d, c, seed), algorithm)
    s = RunSettings(contention="shared", port_model=port_model, buffer=buffer, policy="block", max_steps=5000)
    _exactly_once(plan, modelled(plan, s))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(
    "s",
    [
        RunSettings(contention="shared", port_model="all-port", buffer=1, policy="block", max_steps=2000),
        RunSettings(contention="shared", port_model="one-port", buffer=2, policy="block", max_steps=2000),
        RunSettings(contention="shared", port_model="all-port", buffer=1, policy="drop", max_steps=2000),
    ],
    ids=["all-port-block", "one-port-block", "all-port-drop"],
)
def test_emulation_equals_model_and_engine_loop(algorithm: str, s: RunSettings) -> None:
    plan = mcast_plan(worst_set(Topology.parse("mesh:6x6"), 3, 4, seed=5), algorithm)
    emu, ref, loop = emulated(plan, s), modelled(plan, s), run_engines(plan, s)
    for other in (ref, loop):
        assert emu.logical_arrivals() == other.logical_arrivals()
        assert emu.traffic == other.traffic and link_sets(emu) == link_sets(other)
        assert emu.link_sends == other.link_sends and emu.dropped == other.dropped
    assert emu.peak_queue == loop.peak_queue and emu.node_stats == loop.node_stats
    assert emu.last_step == loop.last_step
    if s.policy == "block":
        _exactly_once(plan, emu)
    else:
        assert emu.dropped == sum(1 for e in emu.errors if e["kind"] == "buffer-full")


def test_stats_against_sqrt_cn_and_c() -> None:
    ms = random_set(M8, 4, 4, seed=1)
    plan = mcast_plan(ms, "herley-tiles")
    raw = run_engines(plan, RunSettings(contention="shared", port_model="all-port"))
    stats = mcast_stats(plan, raw, ms)
    assert stats.delivered == stats.deliveries == ms.deliveries and stats.missing == 0
    assert stats.c == 4 and stats.sqrt_cn == 16.0 and stats.time is not None
    assert stats.time >= stats.lower_bound and stats.time_ratio == stats.time / 16
    assert stats.peak_buffer == max(raw.peak_queue.values()) and stats.buffer_ratio == stats.peak_buffer / 4


@pytest.mark.parametrize("alg", ["replicate", "tree"])
def test_copies_are_counted_where_they_are_made(alg: str) -> None:
    """Each delivery beyond a message's first needs a copy: the nodes' counts sum to deliveries − messages;
    replication makes all of them at the sources (one fewer than its destinations per message), a tree
    makes some on the way."""
    ms = random_set(M8, 5, 4, seed=3)
    plan = mcast_plan(ms, alg)
    raw = run_engines(plan, RunSettings(contention="shared", port_model="all-port"))
    stats = mcast_stats(plan, raw, ms)
    per_node = {n: int(st["copies"]) for n, st in raw.node_stats.items()}
    assert sum(per_node.values()) == ms.deliveries - len(plan.multicasts)
    assert stats.busiest_copies == max(per_node.values())
    at_sources: Counter[tuple[int, int]] = Counter()
    for m in plan.multicasts:
        at_sources[m.source] += len(m.destinations) - 1
    if alg == "replicate":
        assert {n: c for n, c in per_node.items() if c} == {n: c for n, c in at_sources.items() if c}
    else:
        assert any(c for n, c in per_node.items() if n not in at_sources)


# -- the command line ---------------------------------------------------------------------------------
MC = ["run", "--topology", "mesh:8x8", "--mcast-set", "random", "--d", "3", "--c", "4", "--seed", "2"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_run_mcast_set_reports_time_and_buffers(algorithm: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*MC, "--algorithm", algorithm, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["contention"] == "shared" and doc["run"]["port_model"] == "all-port"
    m = doc["mcast"]
    assert m["n"] == 64 and m["c"] <= 4 and m["d"] <= 3 and m["missing"] == 0
    assert m["time_over_sqrt_cn"] == pytest.approx(m["time"] / math.sqrt(m["c"] * 64))
    assert m["peak_buffer"] >= 1 and m["requested"] == {"set": "random", "d": 3, "c": 4, "seed": 2}
    assert doc["errors"] == []


def test_run_mcast_summary_and_worst(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", "herley-random", "--mcast-set", "worst"]
    assert main([*argv, "--d", "2", "--c", "2", "--port-model", "one-port"]) == 0
    out = capsys.readouterr().out
    assert "× √(cn)" in out and "peak buffer occupancy" in out and "one-port" in out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--algorithm", "replicate,tree", "--c", "4"], "one algorithm at a time"),
        (["--algorithm", "replicate", "--c", "4", "--random-dests", "3"], "leave out --dests"),
        (["--algorithm", "replicate", "--c", "0"], "1 ≤ d, c"),
        (["--algorithm", "herley-tiles", "--c", "4", "--topology", "torus:8x8"], "defined on the mesh"),
    ],
)
def test_run_mcast_bad_input_is_one_line(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "--topology", "mesh:8x8", "--mcast-set", "random", "--d", "3", "--seed", "2"]
    assert main([*base, *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_any_registered_rule_runs_a_message_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*MC, "--algorithm", "vh", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mcast"]["missing"] == 0


def test_run_mcast_needs_d_and_c(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", "replicate", "--mcast-set", "random"]
    assert main(argv) == 2
    assert "needs --d" in capsys.readouterr().err


def test_the_model_runtime_reports_no_buffers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*MC, "--algorithm", "herley-tiles", "--runtime", "model"]) == 0
    assert "not measured by this runtime" in capsys.readouterr().out
    ms = random_set(M8, 3, 4, seed=2)
    plan = mcast_plan(ms, "replicate")
    stats = mcast_stats(plan, modelled(plan, RunSettings(contention="shared", port_model="all-port")), ms)
    assert stats.peak_buffer is None and stats.buffer_ratio is None and stats.time is not None
