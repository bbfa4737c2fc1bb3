"""The sparse in-process lockstep (step barrier, no null frames) gives the α-synchronizer's records.

Random plans on small tori and meshes, both port models, isolated and shared contention,
bounded buffers with both policies: the sparse in-process run, the α-synchronized in-process
run, the engines runtime and the reference model agree record for record (the node statistics
too, between the runtimes that measure them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.model import run_model
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine, Injection
from node.switching.lockstep import Lockstep, Schedule
from node.topology import Topology
from tests.helpers import link_sets

ALGORITHMS = ["unicast", "vh", *[a.name for a in registry if a.family == "malani"][:2]]


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    algorithm = draw(st.sampled_from(ALGORITHMS))
    alg = registry.get(algorithm)
    kind = draw(st.sampled_from([k for k in ("mesh", "torus") if k in alg.kinds]))
    lo = 3 if kind == "torus" else 2
    topo = Topology(kind, draw(st.integers(lo, 5)), draw(st.integers(lo, 5)))
    if alg.unsupported(topo):
        topo = Topology(kind, 6, 6)
    nodes = list(topo.nodes())
    mcs = []
    for i in range(draw(st.integers(1, 4))):
        src = draw(st.sampled_from(nodes))
        others = [n for n in nodes if n != src]
        dests = draw(st.lists(st.sampled_from(others), min_size=1, max_size=min(8, len(others)), unique=True))
        mcs.append(Multicast(i, algorithm, src, tuple(dests), draw(st.integers(0, 4))))
    return Plan(topo, tuple(mcs))


@st.composite
def run_settings(draw: st.DrawFn) -> RunSettings:
    contention = draw(st.sampled_from(["isolated", "shared"]))
    bounded = contention == "shared" and draw(st.booleans())
    return RunSettings(
        port_model=draw(st.sampled_from(["one-port", "all-port"])),
        contention=contention,
        buffer=draw(st.integers(1, 3)) if bounded else None,
        out_buffer=draw(st.sampled_from([None, 2, 4])) if bounded else None,
        policy=draw(st.sampled_from(["block", "drop"])),
    )


def _inprocess(plan: Plan, s: RunSettings, sparse: bool) -> RawRun:
    async def main() -> RawRun:
        return await run_inprocess(plan, s, sparse=sparse)

    return trio.run(main)


def _records(raw: RawRun) -> dict[str, Any]:
    return {
        "arrivals": raw.logical_arrivals(),
        "traffic": raw.traffic,
        "links": link_sets(raw),
        "errors": sorted((e["kind"], str(e.get("node"))) for e in raw.errors),
        "last_step": raw.last_step,
        "dropped": raw.dropped,
    }


def _stats(raw: RawRun) -> dict[str, Any]:
    return {"stats": raw.node_stats, "peak": raw.peak_queue, "sends": raw.link_sends}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), s=run_settings())
def test_sparse_inprocess_equals_alpha_engines_and_model(plan: Plan, s: RunSettings) -> None:
    sparse = _inprocess(plan, s, sparse=True)
    alpha = _inprocess(plan, s, sparse=False)
    engines = run_engines(plan, s)
    model = run_model(plan, s)
    assert not sparse.incomplete, sparse.incomplete
    assert _records(sparse) == _records(alpha) == _records(engines)
    assert _stats(sparse) == _stats(alpha) == _stats(engines)
    ref = _records(model)
    got = _records(sparse)
    for key in ("arrivals", "traffic", "links", "dropped"):
        assert got[key] == ref[key], key
    assert sorted(k for k, _ in got["errors"]) == sorted(k for k, _ in ref["errors"])


def test_sparse_run_ends_at_the_alpha_step_and_budget() -> None:
    """The step budget cuts both modes at the same step, with the same partial records."""
    topo = Topology("torus", 6, 6)
    plan = Plan(topo, (Multicast(0, "unicast", (0, 0), ((3, 3),), 0),))
    for budget in (2, 4, 50):
        s = RunSettings(max_steps=budget)
        sparse, alpha = _inprocess(plan, s, True), _inprocess(plan, s, False)
        assert _records(sparse) == _records(alpha)
        assert sparse.incomplete == alpha.incomplete
    assert _records(sparse)["last_step"] == 6 + topo.diameter + 1  # 6 hops, then D + 1 idle


def test_schedule_wakes_only_due_nodes_and_ends_after_the_diameter() -> None:
    sched = Schedule[str](diameter=3, max_steps=100, last_busy=0)
    sched.wake("a", 0)
    sched.wake("b", None)
    assert sched.next() == (0, {"a"})
    sched.busy(0)
    sched.wake("b", 1)
    sched.wake("c", 1)
    assert sched.next() == (1, {"b", "c"})
    assert sched.next() is None
    assert sched.end == 0 + 3 + 1
    capped = Schedule[str](diameter=3, max_steps=2, last_busy=0)
    capped.wake("a", 5)
    assert capped.next() is None and capped.end == 2


def test_an_idle_engine_step_changes_only_its_step_count() -> None:
    """What the sparse mode relies on to count idle steps instead of doing them."""
    topo = Topology("torus", 4, 4)
    e = Engine(topo, (1, 1), registry, NodeSettings(contention="shared", buffer=2))
    e.inject(Injection(0, "unicast", [(2, 2)], {}, 0))
    for t in range(6):
        e.step(t)
    assert not e.busy()
    before = {k: v for k, v in vars(e).items() if k != "steps"} if hasattr(e, "__dict__") else None
    steps = e.steps
    assert e.step(6) == [] and e.take_freed() == {}
    assert e.steps == steps + 1
    if before is not None:
        assert {k: v for k, v in vars(e).items() if k != "steps"} == before


def test_lockstep_work_counts_skipped_steps() -> None:
    topo = Topology("torus", 4, 4)
    e = Engine(topo, (0, 0), registry, NodeSettings())
    clock = Lockstep(e, topo.ports((0, 0)), diameter=topo.diameter, max_steps=100,
                     injections=[Injection(0, "unicast", [(0, 1)], {}, 3)], last_injection=3)  # fmt: skip
    assert clock.next_work == 3
    out = clock.work(3, {})
    assert e.steps == 4 and clock.busy and list(out) == ["+y"] and len(out["+y"].packets) == 1
    assert clock.next_work is None
    clock.finish(9)
    assert e.steps == 10 and clock.step == 9 and clock.finished


def _without_wall(raw: RawRun) -> dict[str, Any]:
    """Every record of ``raw`` with its types (a tuple is not a list here), the wall clock's
    values and the order reports came in (trio's scheduling is not deterministic) aside."""
    out = dataclasses.asdict(raw)
    out.pop("wall_s")
    for a in out["arrivals"]:
        a["wall_ns"] = None if a["wall_ns"] is None else type(a["wall_ns"])
        if a["tel"] is not None:  # the telemetry's times, not its shape, are the wall clock's
            a["tel"] = (type(a["tel"]), len(a["tel"]))
    out["injected"] = {mc: (type(ns), host) for mc, (ns, host) in out["injected"].items()}
    for key in ("arrivals", "trace", "worms", "errors"):
        out[key] = sorted(out[key], key=repr)
    return out


@pytest.mark.parametrize(
    "s",
    [
        RunSettings(trace=True),
        RunSettings(contention="shared", buffer=1, out_buffer=2, policy="drop", trace=True),
        RunSettings(sync="alpha", port_model="all-port"),
        RunSettings(switching="wormhole", contention="shared", trace=True),
        RunSettings(clock="free", telemetry=True, trace=True),
    ],
    ids=["lockstep-trace", "shared-drop", "alpha", "wormhole", "free-telemetry"],
)
def test_control_without_the_codec_gives_the_records_of_msgpack(s: RunSettings) -> None:
    """In one process control messages skip msgpack by default: the records are those of the codec
    (every field, with its types), so nothing a node or the session takes in differs."""
    topo = Topology("torus", 5, 4)
    nodes = list(topo.nodes())
    plan = Plan(
        topo,
        (
            Multicast(0, "vh", (0, 0), tuple(nodes[3:12]), 0),
            Multicast(1, "unicast", (2, 1), ((4, 3),), 1),
            Multicast(2, "vh", (4, 3), tuple(nodes[:6]), 2),
        ),
    )

    def once(codec: bool) -> RawRun:
        async def main() -> RawRun:
            return await run_inprocess(plan, s, codec=codec)

        return trio.run(main)

    plain, packed = once(False), once(True)
    assert not plain.incomplete, plain.incomplete
    assert plain.arrivals and plain.traffic
    assert _without_wall(plain) == _without_wall(packed)
