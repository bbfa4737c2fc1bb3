"""Virtual channels (``--vcs``, ``--vc-classes``): engines and the reference model agree record for record.

* ``--vcs 1`` is the wormhole engine as it was (the existing tests and reproductions check the
  records; here the wire and the credits stay as they were);
* random shared plans on meshes and tori with 2 and 3 VCs, shared and split classes: the
  engines' lockstep network, the engines runtime, the in-process runtime and the model agree;
* the torus dateline: a ring of unicast worms that deadlocks with one VC completes with two;
* impossible settings are refused with one line.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.experiments.load import Traffic, load_point
from coordinator.experiments.run import result_document
from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.model import run_model
from coordinator.runtimes.processes import run_processes
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.routing import registry
from node.switching.vocabulary import crosses_wrap
from node.switching.wormhole import WormholeEngine
from node.topology import Coord, Topology
from node.transport.wire import Flit, StepFrame, decode_flit, decode_link, encode_link
from tests._env import need_broker
from tests.test_wormhole import (
    NO_EXPLAIN,
    _report,
    _wire,
    draw_topology_and_multicasts,
)
from tests.wormhole_helpers import model_run, run_network, up_to_verdict, worm_settings


@st.composite
def vc_plans(draw: st.DrawFn) -> tuple[Plan, dict[str, Any]]:
    """A shared plan with contention and some VC settings the topology allows."""
    kind, topo, mcs = draw_topology_and_multicasts(draw, (3, 10), 12)
    classes = draw(st.sampled_from(["shared", "split"]))
    low = 4 if classes == "split" and kind == "torus" else 2
    kw = {
        "port_model": draw(st.sampled_from(["all-port", "one-port"])),
        "flits": draw(st.integers(1, 8)),
        "ts": draw(st.integers(0, 4)),
        "buffer_flits": draw(st.integers(1, 3)),
        "vcs": draw(st.integers(low, low + 1)),
        "vc_classes": classes,
        "dateline": draw(st.sampled_from(["wrap", "ring"])) if kind == "torus" else "wrap",
    }
    return Plan(topo, tuple(mcs)), kw


@settings(max_examples=80, deadline=None, phases=NO_EXPLAIN)
@given(vc_plans())
def test_engines_and_model_agree_with_virtual_channels(case: tuple[Plan, dict[str, Any]]) -> None:
    plan, kw = case
    model = model_run(plan, **kw)
    net = run_network(plan.topology, up_to_verdict(plan.multicasts, model), **kw)
    assert not net.errors, net.errors[:3]
    assert net.arrivals == model.logical_arrivals()
    assert bool(net.deadlock) == any("deadlock" in x for x in model.incomplete)
    if net.deadlock:
        assert net.last_step == model.last_step
    assert _report(net.deadlock) == sorted(
        (e["node"], e["cause"], e["mc"]) for e in model.errors if e["kind"] == "deadlock"
    )
    assert net.traffic == model.traffic
    event(
        f"{plan.topology.kind} vcs={kw['vcs']} {kw['vc_classes']} {kw['dateline']}: "
        + ("deadlocked" if net.deadlock else "ok")
    )


def _settings(**kw: Any) -> RunSettings:
    base: dict[str, Any] = {"switching": "wormhole", "contention": "shared", "flits": 8, "ts": 3}
    return RunSettings(**{**base, **kw})


def _heavy(topo: Topology, n: int, seed: int, alg: str = "unicast") -> Plan:
    """``n`` multicasts at once-ish from random sources (seeded), the kind that contends."""
    rnd = random.Random(seed)
    nodes = sorted(topo.nodes())
    mcs = []
    for i in range(n):
        src = rnd.choice(nodes)
        k = 1 if alg == "unicast" else rnd.randint(2, 6)
        dests = tuple(rnd.sample([x for x in nodes if x != src], k))
        mcs.append(
            Multicast(
                i, alg if alg != "mixed" else rnd.choice(["unicast", "dp"]), src, dests, rnd.randint(0, 4)
            )
        )
    return Plan(topo, tuple(mcs))


@pytest.mark.parametrize(
    ("spec", "alg", "vcs", "classes", "n", "seed"),
    [
        ("mesh:4x4", "mixed", 2, "shared", 12, 22),
        ("mesh:4x4", "mixed", 2, "split", 12, 22),
        ("torus:4x4", "unicast", 2, "shared", 12, 23),
        ("torus:4x4", "mixed", 4, "split", 12, 37),
        ("torus:5x4", "tree", 3, "shared", 12, 30),
        ("torus:4x4", "mixed", 2, "shared", 10, 3),  # deadlocks: dp paths are not covered by the dateline
    ],
)
def test_runtimes_and_model_have_identical_records(
    spec: str, alg: str, vcs: int, classes: str, n: int, seed: int
) -> None:
    """The engines runtime and the in-process runtime (trio actors) equal the model: arrivals, traffic,
    link sends, and the worms a deadlock leaves holding channels."""
    plan = _heavy(Topology.parse(spec), n, seed=seed, alg=alg)
    s = _settings(vcs=vcs, vc_classes=classes)
    model = run_model(plan, _settings(runtime="model", vcs=vcs, vc_classes=classes))
    assert len(model.arrivals) >= n // 2
    stuck = sorted(e["mc"] for e in model.errors if e["kind"] == "deadlock")
    assert bool(stuck) == (seed == 3)
    for raw in (run_engines(plan, _settings(runtime="engines", vcs=vcs, vc_classes=classes)),
                trio.run(run_inprocess, plan, s)):  # fmt: skip
        assert raw.logical_arrivals() == model.logical_arrivals()
        assert raw.traffic == model.traffic
        assert raw.link_sends == model.link_sends
        assert sorted(e["mc"] for e in raw.errors if e["kind"] == "deadlock") == stuck


def ring_plan() -> Plan:
    """Five worms on a torus ring, each two hops along +x: a cyclic wait without virtual channels."""
    topo = Topology.parse("torus:5x3")
    return Plan(topo, tuple(Multicast(i, "unicast", (i, 0), (((i + 2) % 5, 0),), 0) for i in range(5)))


def test_the_dateline_breaks_the_ring_deadlock() -> None:
    plan = ring_plan()
    one = model_run(plan, flits=8, ts=2)
    assert one.arrivals == [] and "deadlock" in one.incomplete[0]
    two = model_run(plan, flits=8, ts=2, vcs=2)
    assert not two.incomplete and len(two.arrivals) == 5
    net = run_network(plan.topology, plan.multicasts, flits=8, ts=2, vcs=2)
    assert not net.deadlock and net.arrivals == two.logical_arrivals()
    raw = run_engines(plan, _settings(runtime="engines", flits=8, ts=2, vcs=2))
    assert raw.logical_arrivals() == two.logical_arrivals() and not raw.errors
    doc = result_document(plan, _settings(runtime="engines", flits=8, ts=2, vcs=2), raw)
    assert doc["run"]["complete"] and doc["run"]["switching"]["vcs"] == 2
    assert "vcs" not in result_document(plan, _settings(runtime="engines"), one)["run"]["switching"]


def test_heavy_torus_unicast_deadlocks_with_one_vc_and_not_with_two() -> None:
    """DOR unicast on a torus: seeded heavy plans (120 worms in 11 cycles); one VC deadlocks, two never.

    The engines' lockstep network says the same as the model for one plan of each outcome.
    """
    topo = Topology.parse("torus:6x6")
    dead: dict[int, list[int]] = {1: [], 2: []}
    for seed in range(6):
        plan = _unicasts(topo, 120, seed)
        for vcs in (1, 2):
            raw = model_run(plan, flits=16, ts=10, vcs=vcs)
            if any("deadlock" in x for x in raw.incomplete):
                dead[vcs].append(seed)
            elif vcs == 2:
                assert not raw.incomplete and len(raw.arrivals) == 120
    assert dead[1] and not dead[2]
    plan = _unicasts(topo, 120, dead[1][0])
    for vcs in (1, 2):
        net = run_network(topo, plan.multicasts, flits=16, ts=10, vcs=vcs)
        assert bool(net.deadlock) == (vcs == 1)
        assert net.arrivals == model_run(plan, flits=16, ts=10, vcs=vcs).logical_arrivals()


def test_booksim_dateline_gives_a_crossing_worm_the_upper_vcs_for_its_whole_ring() -> None:
    """--dateline ring: a worm that will cross the wrap link takes the upper VC from its first hop (and
    keeps it after the wrap); one that will not keeps to the lower VC. --dateline wrap: the lower VC
    until the wrap link. Checked on the VCs the worms' links were granted in the engines and the model."""
    topo = Topology.parse("torus:8x3")
    # (6,0) -> (1,0) goes + over the wrap 7->0; (1,0) -> (4,0) goes + without crossing it
    plan = Plan(topo, (Multicast(0, "dor", (6, 0), ((1, 0),), 0), Multicast(1, "dor", (1, 0), ((4, 0),), 0)))
    kw: dict[str, Any] = {"flits": 4, "ts": 1, "vcs": 2}
    for dateline, upper in (("ring", {(6, 0), (7, 0), (0, 0)}), ("wrap", {(7, 0), (0, 0)})):
        heads: list[tuple[Coord, str, Flit]] = []
        net = run_network(topo, plan.multicasts, heads, dateline=dateline, **kw)
        assert not net.errors and len(net.arrivals) == 2
        assert {p for _, p, _ in heads} == {"+x"} and len(heads) == 3 + 3
        assert {n for n, _, f in heads if f.vc == 1} == upper, dateline
        assert net.arrivals == model_run(plan, dateline=dateline, **kw).logical_arrivals()


def test_crosses_wrap_runs_the_rule_ahead_along_the_ring() -> None:
    topo = Topology.parse("torus:8x8")
    assert crosses_wrap(topo, registry, "unicast", (5, 2), "+x", [1, 2])
    assert crosses_wrap(topo, registry, "unicast", (7, 2), "+x", [0, 5])  # its first link is the wrap
    assert not crosses_wrap(topo, registry, "unicast", (1, 2), "+x", [4, 6])
    assert crosses_wrap(topo, registry, "unicast", (1, 2), "-y", [1, 6])
    assert not crosses_wrap(topo, registry, "unicast", (1, 2), "+x", [1, 2])  # ends here: not on the ring
    assert not crosses_wrap(topo, registry, "unicast", (1, 2), "+x", "not a header")  # fails ahead
    assert not crosses_wrap(Topology.parse("mesh:8x8"), registry, "unicast", (5, 2), "+x", [7, 2])


def test_dor_splits_the_half_ring_tie_so_every_link_carries_the_same_share() -> None:
    """Every pair of nodes on an even torus: unicast's + at the tie gives + links 5/3 of the − links'
    hops (K = 8: 1+2+3+4 against 1+2+3), dor's parity split the same; both routes are shortest, and
    equal on a mesh."""
    topo = Topology.parse("torus:8x8")
    rules = {name: registry.get(name).forward for name in ("unicast", "dor")}
    load: dict[str, dict[str, int]] = {name: {} for name in rules}
    for name, forward in rules.items():
        for src in topo.nodes():
            for dst in topo.nodes():
                here, hops = src, 0
                while not (fwd := forward(topo, here, [dst[0], dst[1]])).deliver:
                    port = fwd.sends[0][0]
                    load[name][port] = load[name].get(port, 0) + 1
                    nxt = topo.neighbour(here, port)
                    assert nxt is not None
                    here, hops = nxt, hops + 1
                assert hops == topo.distance(src, dst)
    assert load["unicast"]["+x"] * 3 == load["unicast"]["-x"] * 5
    assert load["dor"]["+x"] == load["dor"]["-x"] and load["dor"]["+y"] == load["dor"]["-y"]
    mesh = Topology.parse("mesh:5x4")
    assert all(
        registry.get("dor").forward(mesh, a, [b[0], b[1]])
        == registry.get("unicast").forward(mesh, a, [b[0], b[1]])
        for a in mesh.nodes()
        for b in mesh.nodes()
    )


def test_booksim_routing_on_a_heavy_torus_never_deadlocks_and_agrees() -> None:
    """dor with --dateline ring (BookSim2's dim_order_torus) on the seeded heavy plans: no deadlock with
    two VCs, the engines' network equal to the model."""
    topo = Topology.parse("torus:6x6")
    for seed in range(3):
        plan = _unicasts(topo, 120, seed, "dor")
        raw = model_run(plan, flits=16, ts=10, vcs=2, dateline="ring")
        assert not raw.incomplete and len(raw.arrivals) == 120
    net = run_network(topo, plan.multicasts, flits=16, ts=10, vcs=2, dateline="ring")
    assert not net.deadlock and net.arrivals == raw.logical_arrivals()


def _unicasts(topo: Topology, n: int, seed: int, alg: str = "unicast") -> Plan:
    """``n`` unicast worms between random distinct nodes in cycles 0 to 10 (seeded)."""
    rnd = random.Random(seed)
    nodes = sorted(topo.nodes())
    mcs = []
    for i in range(n):
        src = rnd.choice(nodes)
        dest = rnd.choice([x for x in nodes if x != src])
        mcs.append(Multicast(i, alg, src, (dest,), rnd.randint(0, 10)))
    return Plan(topo, tuple(mcs))


def test_vc_flits_and_credits_on_the_wire() -> None:
    """One VC: the wire as before; above one, flits name their VC and credits go per VC."""
    head = Flit("H", 3, (1, 2, 0), "dp", [[1, 1]], 2, 1)
    assert head.to_wire() == ["H", 3, [1, 2, 0], "dp", [[1, 1]], 2, 1]
    for f in (Flit("H", 3, (1, 2, 0), "dp", [[1, 1]], 2, 1, 2), Flit("B", 3, (1, 2, 0), vc=1)):
        assert decode_flit(_wire(f.to_wire())) == f
    frame = StepFrame(4, 3, (Flit("T", 1, (0, 0, 0), vc=1),), (0, 2))
    assert decode_link(encode_link(frame)) == frame
    assert decode_link(encode_link(StepFrame(4, 3, (), 1))) == StepFrame(4, 3, (), 1)
    e = WormholeEngine(Topology.parse("mesh:3x3"), (1, 1), registry, worm_settings(flits=2, ts=0, vcs=2))
    e.receive(Flit("H", 1, (0, 1, 0), "unicast", [2, 1], 1, 1, 1), "-x")
    e.receive(Flit("B", 1, (0, 1, 0), vc=5), "-x")
    assert [x.kind for x in e.errors] == ["bad-vc"]
    sent = e.step(0)
    assert [(p, f.kind, f.vc) for p, f in sent] == [("+x", "H", 0)]
    assert e.take_freed() == {"-x": (0, 1)}
    e.credit_back("+x", (1, 0))
    one = WormholeEngine(Topology.parse("mesh:3x3"), (1, 1), registry, worm_settings(flits=2, ts=0))
    one.receive(Flit("H", 1, (0, 1, 0), "unicast", [2, 1], 1, 1), "-x")
    one.step(0)
    assert one.take_freed() == {"-x": 1}


async def test_processes_with_two_vcs_equal_the_model(tmp_path: Path) -> None:
    """The settings reach processes' nodes through Assign; flits and per-VC credits cross TCP."""
    need_broker()
    plan = _unicasts(Topology.parse("torus:4x4"), 16, seed=3)  # DOR unicast: the dateline covers it
    s = _settings(runtime="processes", vcs=2, wall_budget=120, run_dir=str(tmp_path))
    raw = await run_processes(plan, s)
    model = run_model(plan, _settings(runtime="model", vcs=2))
    assert not raw.errors, raw.errors[:3]
    assert raw.logical_arrivals() == model.logical_arrivals() and not model.incomplete


@settings(max_examples=40, deadline=None, phases=NO_EXPLAIN)
@given(st.data())
def test_engines_and_model_report_the_same_deadlocks_with_vcs(data: st.DataObject) -> None:
    """Deadlock-prone plans (trees, one-port path worms) with VCs: same cycle, same holdings named."""
    topo = Topology.parse(data.draw(st.sampled_from(["mesh:4x4", "mesh:5x5", "torus:4x4", "torus:5x4"])))
    nodes = sorted(topo.nodes())
    algs = data.draw(
        st.sampled_from([("tree",), ("dp", "unicast"), ("mp",), ("tree", "unicast"), ("mp", "dor")])
    )
    mcs = []
    for i in range(data.draw(st.integers(6, 14))):
        src = data.draw(st.sampled_from(nodes))
        dests = data.draw(
            st.lists(st.sampled_from([n for n in nodes if n != src]), min_size=1, max_size=8, unique=True)
        )
        mcs.append(
            Multicast(i, data.draw(st.sampled_from(algs)), src, tuple(dests), data.draw(st.integers(0, 6)))
        )
    classes = data.draw(st.sampled_from(["shared", "split"]))
    vcs = data.draw(st.integers(4 if classes == "split" and topo.is_torus else 2, 4))
    kw: dict[str, Any] = {
        "port_model": data.draw(st.sampled_from(["one-port", "all-port"])),
        "flits": data.draw(st.integers(4, 12)),
        "ts": 2,
        "buffer_flits": data.draw(st.integers(1, 2)),
        "vcs": vcs,
        "vc_classes": classes,
        "dateline": data.draw(st.sampled_from(["wrap", "ring"])) if topo.is_torus else "wrap",
    }
    model = model_run(Plan(topo, tuple(mcs)), **kw)
    net = run_network(topo, up_to_verdict(mcs, model), **kw)
    assert net.arrivals == model.logical_arrivals()
    if net.deadlock:
        assert net.last_step == model.last_step
    assert _report(net.deadlock) == sorted(
        (e["node"], e["cause"], e["mc"]) for e in model.errors if e["kind"] == "deadlock"
    )
    event("deadlocked" if net.deadlock else "completed")


def test_load_on_a_torus_deadlocks_with_one_vc_and_saturates_with_two() -> None:
    """``meshcast load`` on a 6x6 torus past saturation: one VC ends in a deadlock, two in a saturated
    point without one; the engines runtime gives the model's point."""
    topo = Topology.parse("torus:6x6")
    traffic = Traffic(rate=0.03, k=1, duration=600, seed=1)
    worm = _settings(flits=16, ts=0, max_steps=5000)
    one = load_point(topo, "unicast", traffic, replace(worm, runtime="model"), warmup=100, batches=5)
    two = load_point(topo, "unicast", traffic, replace(worm, runtime="model", vcs=2), warmup=100, batches=5)
    on_engines = replace(worm, runtime="engines", vcs=2)
    engines = load_point(topo, "unicast", traffic, on_engines, warmup=100, batches=5)
    assert one.saturated is not None and "deadlock" in one.saturated
    assert two.saturated is not None and "deadlock" not in two.saturated
    assert replace(two, peak_queue=0) == replace(engines, peak_queue=0)


def test_the_containers_coordinator_is_told_the_vcs() -> None:
    """The coordinator container decodes the settings' wire form from its environment."""
    import json

    from coordinator.runtimes.containers import SETTINGS_ENV, settings_env

    told = RunSettings.from_wire(json.loads(settings_env(_settings(vcs=4, vc_classes="split"))[SETTINGS_ENV]))
    assert (told.vcs, told.vc_classes) == (4, "split")
    assert "vcs" not in json.loads(settings_env(_settings())[SETTINGS_ENV])  # a default is not shown


@pytest.mark.slow
async def test_containers_with_two_vcs_equal_the_model(tmp_path: Path) -> None:
    """The same on one container per node (the image's node code; CI builds the image first)."""
    import os

    from coordinator.experiments.run import emulate
    from tests._env import need_docker, need_image

    need_docker()
    need_image(os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest"))
    plan = _unicasts(Topology.parse("torus:3x3"), 9, seed=4)
    s = _settings(runtime="containers", vcs=2, wall_budget=300, run_dir=str(tmp_path))
    raw = await emulate(plan, s)
    model = run_model(plan, _settings(runtime="model", vcs=2))
    assert not raw.incomplete and not raw.errors, (raw.incomplete, raw.errors[:3])
    assert raw.logical_arrivals() == model.logical_arrivals() and not model.incomplete
