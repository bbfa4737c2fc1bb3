"""Shared contention with bounded buffers: credits block without loss; drop-and-count accounts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology
from tests.helpers import emulated, link_sets, modelled


@st.composite
def loads(draw: st.DrawFn, algorithms: tuple[str, ...] = ("unicast", "vh", "pair", "dp")) -> Plan:
    kind = draw(st.sampled_from(["mesh", "torus"]))
    topo = Topology(kind, draw(st.integers(3, 5)), draw(st.integers(3, 5)))
    nodes = list(topo.nodes())
    mcs = []
    for i in range(draw(st.integers(1, 8))):
        alg = draw(st.sampled_from([a for a in algorithms if not (a == "dp" and kind == "torus")]))
        src = draw(st.sampled_from(nodes))
        others = [n for n in nodes if n != src]
        dests = draw(st.lists(st.sampled_from(others), min_size=1, max_size=6, unique=True))
        mcs.append(Multicast(i, alg, src, tuple(dests), draw(st.integers(0, 4))))
    return Plan(topo, tuple(mcs))


def _same(plan: Plan, s: RunSettings) -> None:
    emu, ref = emulated(plan, s), modelled(plan, s)
    assert emu.logical_arrivals() == ref.logical_arrivals()
    assert emu.traffic == ref.traffic and link_sets(emu) == link_sets(ref)
    assert emu.link_sends == ref.link_sends
    assert emu.dropped == ref.dropped


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=loads(), data=st.data())
def test_bounded_buffers_emulation_equals_model(plan: Plan, data: st.DataObject) -> None:
    s = RunSettings(
        contention="shared",
        port_model=data.draw(st.sampled_from(["one-port", "all-port"])),
        buffer=data.draw(st.integers(1, 3)),
        out_buffer=data.draw(st.sampled_from([None, 2, 4])),
        policy=data.draw(st.sampled_from(["block", "drop"])),
        max_steps=400,
    )
    _same(plan, s)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=loads(("unicast", "vh", "pair")), data=st.data())
def test_blocking_never_loses_a_packet(plan: Plan, data: st.DataObject) -> None:
    s = RunSettings(
        contention="shared",
        port_model=data.draw(st.sampled_from(["one-port", "all-port"])),
        buffer=data.draw(st.integers(1, 2)),
        policy="block",
        max_steps=2000,
    )
    raw = modelled(plan, s)
    assert raw.dropped == 0 and not raw.incomplete
    got = sorted((a.mc, a.node) for a in raw.arrivals)
    assert got == sorted((m.id, d) for m in plan.multicasts for d in m.destinations)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=loads(("unicast",)))
def test_drop_and_count_accounts_for_every_copy(plan: Plan) -> None:
    s = RunSettings(contention="shared", port_model="all-port", buffer=1, policy="drop")
    raw = modelled(plan, s)
    copies = sum(len(m.destinations) for m in plan.multicasts)  # unicast: one copy per destination
    assert len(raw.arrivals) + raw.dropped == copies
    assert sum(1 for e in raw.errors if e["kind"] == "buffer-full") == raw.dropped


def test_a_one_packet_buffer_makes_the_upstream_wait() -> None:
    # Two sources push through (1,0) to (2,0) under one-port shared contention with 1-packet buffers.
    topo = Topology.parse("mesh:3x2")
    plan = Plan(
        topo,
        (
            Multicast(0, "unicast", (0, 0), ((2, 0),)),
            Multicast(1, "unicast", (1, 1), ((2, 0),)),
        ),
    )
    free = modelled(plan, RunSettings(contention="shared", port_model="one-port"))
    tight = modelled(plan, RunSettings(contention="shared", port_model="one-port", buffer=1))
    assert sorted(a.step for a in free.arrivals) == sorted(a.step for a in tight.arrivals)
    assert tight.dropped == 0
    _same(plan, RunSettings(contention="shared", port_model="one-port", buffer=1))
