"""The trio emulation and the centralised reference model agree record for record."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.routing import registry
from node.topology import Topology
from tests.helpers import emulated, link_sets, modelled

ALGORITHMS = [a.name for a in registry]
TREES = [a.name for a in registry if a.family == "malani"]


@st.composite
def plans(draw: st.DrawFn, algorithm: str, max_mcs: int = 3) -> Plan:
    alg = registry.get(algorithm)
    kinds = [k for k in ("mesh", "torus") if k in alg.kinds]
    kind = draw(st.sampled_from(kinds))
    lo = 3 if kind == "torus" else 2
    topo = Topology(kind, draw(st.integers(lo, 6)), draw(st.integers(lo, 6)))
    if alg.unsupported(topo):
        topo = Topology(kind, 6, 6)
    nodes = list(topo.nodes())
    mcs = []
    for i in range(draw(st.integers(1, max_mcs))):
        src = draw(st.sampled_from(nodes))
        others = [n for n in nodes if n != src]
        dests = draw(
            st.lists(st.sampled_from(others), min_size=1, max_size=min(10, len(others)), unique=True)
        )
        mcs.append(Multicast(i, algorithm, src, tuple(dests), draw(st.integers(0, 2))))
    return Plan(topo, tuple(mcs))


def assert_same(plan: Plan, s: RunSettings) -> None:
    emu, ref = emulated(plan, s), modelled(plan, s)
    assert not emu.incomplete, emu.incomplete
    assert emu.logical_arrivals() == ref.logical_arrivals()
    assert emu.traffic == ref.traffic
    assert link_sets(emu) == link_sets(ref)
    assert sorted(e["kind"] for e in emu.errors) == sorted(e["kind"] for e in ref.errors)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_emulation_equals_model(algorithm: str, data: st.DataObject) -> None:
    plan = data.draw(plans(algorithm))
    port_model = data.draw(st.sampled_from(["one-port", "all-port"]))
    contention = data.draw(st.sampled_from(["isolated", "shared"]))
    assert_same(plan, RunSettings(port_model=port_model, contention=contention))


@pytest.mark.parametrize("algorithm", ["unicast", "vh"])
@pytest.mark.parametrize("port_model", ["one-port", "all-port"])
@pytest.mark.parametrize("contention", ["isolated", "shared"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_core_rules_agree_in_every_mode(
    algorithm: str, port_model: str, contention: str, data: st.DataObject
) -> None:
    plan = data.draw(plans(algorithm, max_mcs=4))
    assert_same(plan, RunSettings(port_model=port_model, contention=contention))


@pytest.mark.parametrize("algorithm", ["unicast", *TREES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_free_clock_equals_lockstep_for_isolated_single_multicasts(
    algorithm: str, data: st.DataObject
) -> None:
    plan = data.draw(plans(algorithm, max_mcs=1))
    port_model = data.draw(st.sampled_from(["one-port", "all-port"]))
    lock = emulated(plan, RunSettings(port_model=port_model))
    free = emulated(plan, RunSettings(port_model=port_model, clock="free"))
    assert free.logical_arrivals() == lock.logical_arrivals()
    assert free.traffic == lock.traffic


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_every_destination_exactly_once(algorithm: str, data: st.DataObject) -> None:
    plan = data.draw(plans(algorithm))
    raw = modelled(plan, RunSettings(port_model=data.draw(st.sampled_from(["one-port", "all-port"]))))
    got = sorted((a.mc, a.node) for a in raw.arrivals)
    want = sorted((m.id, d) for m in plan.multicasts for d in m.destinations)
    assert got == want
