"""The engines runtime under wormhole switching hands flits from engine to engine directly
(``coordinator/runtimes/engines.py:_run_flits``); its frame loop (``_run_frames``: every node's
:class:`node.switching.lockstep.Lockstep` in sparse mode, flits in msgpack step frames) is what the other
runtimes do. The two must give the same record, field for field — arrivals, traffic, links,
errors and deadlock reports, node statistics (peaks, mean occupancy, copies) and the last step —
on random plans with contention, virtual channels and deadlocks.

The frame loop has no deadlock verdict (docs/wormhole.md "Deadlock": the distributed runtimes end
by their quiescence): where the direct loop names one, the two agree on what both still define —
the record without the verdict's line, when no injection came after the verdict's cycle (after it
the direct loop makes none, the frame loop goes on).
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.runtimes.engines import _run_flits, _run_frames
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology
from tests.test_wormhole import NO_EXPLAIN, draw_topology_and_multicasts


def _record(raw: RawRun) -> dict[str, Any]:
    """Everything of a run but its wall clocks."""
    return {
        "arrivals": raw.logical_arrivals(),
        "traffic": raw.traffic,
        "links": raw.links,
        "errors": raw.errors,
        "incomplete": raw.incomplete,
        "peak_queue": raw.peak_queue,
        "node_stats": raw.node_stats,
        "node_status": raw.node_status,
        "link_sends": list(raw.link_sends.items()),
        "dropped": raw.dropped,
        "last_step": raw.last_step,
        "injected": sorted(raw.injected),
    }


def _both_define(plan: Plan, direct: RawRun, framed: RawRun) -> bool:
    """Compare the records of both (True), or only that both stopped short (False): the direct loop
    named a deadlock before the plan's last injection, which the frame loop still made."""
    named = [x for x in direct.incomplete if re.match(r"deadlock at cycle \d+: \d+ worms wait", x)]
    if not named:
        assert _record(direct) == _record(framed)
        return True
    at = int(named[0].split()[3].rstrip(":"))
    if plan.last_step > at:
        assert framed.incomplete or any(e["kind"] == "deadlock" for e in framed.errors)
        return False
    direct.incomplete.remove(named[0])
    assert any(e["kind"] == "deadlock" for e in framed.errors)  # the frame loop's stall saw it too
    assert _record(direct) == _record(framed)
    return True


@st.composite
def plans(draw: st.DrawFn) -> tuple[Plan, RunSettings]:
    kind, topo, mcs = draw_topology_and_multicasts(draw, (4, 16), draw(st.sampled_from([2, 12])))
    classes = draw(st.sampled_from(["shared", "split"]))
    vcs = draw(st.sampled_from([1, 1, 2, 4]))
    if classes == "split" and vcs < (4 if kind == "torus" else 2):
        classes = "shared"
    s = RunSettings(
        switching="wormhole",
        contention="shared",
        port_model=draw(st.sampled_from(["all-port", "one-port"])),
        flits=draw(st.integers(1, 10)),
        ts=draw(st.integers(0, 5)),
        buffer_flits=draw(st.integers(1, 4)),
        vcs=vcs,
        vc_classes=classes,
        dateline=draw(st.sampled_from(["wrap", "ring"])) if vcs > 1 and kind == "torus" else "wrap",
        max_steps=draw(st.sampled_from([30, 3000])),  # a short budget cuts some runs mid-way
    )
    return Plan(topo, tuple(mcs)), s


@settings(max_examples=60, deadline=None, phases=NO_EXPLAIN)
@given(plans())
def test_direct_flits_equal_the_frame_loop(case: tuple[Plan, RunSettings]) -> None:
    plan, s = case
    direct, framed = _run_flits(plan, s, None), _run_frames(plan, s)
    event("deadlock" if any(e["kind"] == "deadlock" for e in framed.errors) else "no deadlock")
    event("budget ran out" if any("budget" in x for x in framed.incomplete) else "within budget")
    event("compared" if _both_define(plan, direct, framed) else "deadlock before the last injection")


def test_direct_flits_equal_the_frame_loop_in_a_deadlock() -> None:
    """Unicasts around a torus ring, each two hops on: every worm waits for the next (one VC)."""
    topo = Topology.parse("torus:5x3")
    plan = Plan(topo, tuple(Multicast(i, "unicast", (i, 0), (((i + 2) % 5, 0),), 0) for i in range(5)))
    s = RunSettings(switching="wormhole", contention="shared", flits=8, ts=2, max_steps=5000)
    direct, framed = _run_flits(plan, s, None), _run_frames(plan, s)
    assert direct.arrivals == [] and direct.last_step < 100  # ended by the stall rule
    assert {e["mc"] for e in direct.errors if e["kind"] == "deadlock"} == set(range(5))
    assert direct.incomplete[0].startswith("deadlock at cycle")
    assert _both_define(plan, direct, framed)


def test_direct_flits_equal_the_frame_loop_under_load() -> None:
    """Issue #36's speed workload, shortened: thousands of worm-hops through full B = 8 buffers."""
    from coordinator.experiments.load import Traffic, poisson_plan

    plan = poisson_plan(Topology.parse("mesh:6x6"), "unicast", Traffic(0.004, 1, 600, seed=3))
    s = RunSettings(switching="wormhole", contention="shared", flits=64, buffer_flits=8, max_steps=2400)
    direct, framed = _run_flits(plan, s, None), _run_frames(plan, s)
    assert len(direct.arrivals) == len(plan.multicasts) > 50
    assert _record(direct) == _record(framed)
