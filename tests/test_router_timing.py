"""Router timing (``--router``, the stage settings; docs/wormhole.md "Router timing").

* the engines runtime (every node's own :class:`~node.switching.wormhole.WormholeEngine`) and the
  reference model (``coordinator/runtimes/wormhole_model.py``, no shared code) agree record for
  record under random stage settings on random small plans (mesh and torus, 1-2 VCs);
* one worm's zero-load latency under ``--router booksim`` is the formula of the docs;
* the paper preset is the default router, a stage setting overrides the preset, and a stage
  setting under store-and-forward switching is refused with one line.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.records import RunSettings
from coordinator.runtimes.wormhole_model import run_wormhole_model
from coordinator.workloads.plan import Multicast, Plan
from node import defaults
from node.choices import Router
from node.settings import NodeSettings
from node.switching.factory import check_switching
from node.topology import Topology
from tests.test_wormhole import NO_EXPLAIN, draw_topology_and_multicasts

STAGES = ("routing_delay", "vc_alloc_delay", "sw_alloc_delay", "st_delay", "credit_delay")


def _settings(**kw: Any) -> RunSettings:
    base: dict[str, Any] = {"switching": "wormhole", "contention": "shared", "max_steps": 100_000}
    return RunSettings(**{**base, **kw})


@st.composite
def timed_plans(draw: st.DrawFn) -> tuple[Plan, dict[str, Any]]:
    """A shared plan with contention, 1 or 2 VCs and random router timing (preset and overrides)."""
    _, topo, mcs = draw_topology_and_multicasts(draw, (2, 8), 12)
    kw: dict[str, Any] = {
        "port_model": draw(st.sampled_from(["all-port", "one-port"])),
        "flits": draw(st.integers(1, 6)),
        "ts": draw(st.integers(0, 3)),
        "buffer_flits": draw(st.integers(1, 4)),
        "vcs": draw(st.integers(1, 2)),
        "router": draw(st.sampled_from(list(Router))),
    }
    for name in STAGES:
        kw[name] = draw(st.one_of(st.none(), st.integers(0, 3)))
    kw["link_latency"] = draw(st.one_of(st.none(), st.integers(1, 3)))
    kw["wait_for_tail_credit"] = draw(st.one_of(st.none(), st.integers(0, 1)))
    kw["input_speedup"] = draw(st.one_of(st.none(), st.integers(0, 2)))
    return Plan(topo, tuple(mcs)), kw


@settings(max_examples=150, deadline=None, phases=NO_EXPLAIN)
@given(timed_plans())
def test_engines_and_model_agree_under_any_router_timing(case: tuple[Plan, dict[str, Any]]) -> None:
    """Arrivals, traffic, link sends and deadlocked multicasts: the engines runtime equals the model."""
    plan, kw = case
    model = run_wormhole_model(plan, _settings(runtime="model", **kw))
    raw = run_engines(plan, _settings(runtime="engines", **kw))
    assert not [e for e in raw.errors if e["kind"] not in ("deadlock", "unfinished")], raw.errors[:3]
    assert raw.logical_arrivals() == model.logical_arrivals()
    assert raw.traffic == model.traffic
    assert raw.link_sends == model.link_sends
    stuck = sorted(e["mc"] for e in model.errors if e["kind"] == "deadlock")
    assert sorted(e["mc"] for e in raw.errors if e["kind"] == "deadlock") == stuck
    timing = _settings(**kw).router_timing()
    event(f"{plan.topology.kind} vcs={kw['vcs']} pipe={timing.pipe}: " + ("deadlocked" if stuck else "ok"))


@pytest.mark.parametrize(("spec", "dest", "flits"), [("mesh:6x6", (4, 3), 16), ("torus:8x8", (6, 2), 5)])
@pytest.mark.parametrize("run", ["model", "engines"])
def test_one_worm_zero_load_latency_under_the_booksim_preset(
    spec: str, dest: tuple[int, int], flits: int, run: str
) -> None:
    """A unicast worm of L flits over h links crosses h + 1 routers, each costing its head routing +
    VC allocation + switch allocation + traversal cycles, then h links and the one-cycle ejection
    channel; the tail follows L − 1 cycles behind:
    delivered at t0 + Ts + (h + 1)·(R + VA + SA + ST) + h·link + 1 + L − 1."""
    topo = Topology.parse(spec)
    src, t0, ts = (1, 1), 3, 2
    plan = Plan(topo, (Multicast(0, "unicast", src, (dest,), t0),))
    s = _settings(runtime=run, router="booksim", flits=flits, ts=ts, buffer_flits=8, vcs=2)
    raw = run_wormhole_model(plan, s) if run == "model" else run_engines(plan, s)
    timing = s.router_timing()
    router = timing.routing_delay + timing.vc_alloc_delay + timing.sw_alloc_delay + timing.st_delay
    h = topo.distance(src, dest)
    ((mc, node, step, hops, _),) = raw.logical_arrivals()
    assert (mc, node, hops) == (0, dest, h)
    assert step == t0 + ts + (h + 1) * router + h * timing.link_latency + 1 + flits - 1
    paper = run_wormhole_model(plan, _settings(runtime="model", flits=flits, ts=ts, buffer_flits=8, vcs=2))
    assert paper.logical_arrivals()[0][2] == t0 + ts + flits + h  # the papers' s + Ts + L + h
    over = _settings(runtime=run, router="booksim", link_latency=2, flits=flits, ts=ts, buffer_flits=8, vcs=2)
    slow = run_wormhole_model(plan, over) if run == "model" else run_engines(plan, over)
    assert slow.logical_arrivals()[0][2] == step + h  # each link one cycle longer, not the ejection


def test_the_paper_preset_is_the_default_and_stage_settings_override_the_preset() -> None:
    paper = NodeSettings().router_timing()
    assert NodeSettings().router == defaults.ROUTER == Router.PAPER
    assert paper.is_paper and paper.pipe == 1
    booksim = NodeSettings(router="booksim").router_timing()
    assert not booksim.is_paper
    assert {k: getattr(booksim, k) for k in defaults.ROUTERS[Router.BOOKSIM]} == defaults.ROUTERS[
        Router.BOOKSIM
    ]
    over = NodeSettings(router="booksim", vc_alloc_delay=0, link_latency=3).router_timing()
    assert (over.vc_alloc_delay, over.link_latency, over.sw_alloc_delay) == (0, 3, booksim.sw_alloc_delay)


@pytest.mark.parametrize("kw", [{"router": "booksim"}, {"st_delay": 2}, {"link_latency": 2}])
def test_router_timing_needs_wormhole_switching(kw: dict[str, Any]) -> None:
    why = check_switching(NodeSettings(**kw))
    assert why is not None and "wormhole" in why and "\n" not in why
    assert check_switching(NodeSettings(switching="wormhole", contention="shared", **kw)) is None


@pytest.mark.parametrize("spec", ["mesh:4x4", "torus:4x4"])
def test_the_in_process_runtime_carries_the_booksim_router(spec: str) -> None:
    """The trio actors' lockstep frames (the distributed runtimes' driver) under --router booksim with
    longer links and delayed credits: the same records as the model."""
    topo = Topology.parse(spec)
    nodes = sorted(topo.nodes())
    mcs = tuple(
        Multicast(i, "unicast", nodes[(5 * i) % len(nodes)], (nodes[(5 * i + 7) % len(nodes)],), i % 4)
        for i in range(10)
    )
    plan = Plan(topo, mcs)
    kw: dict[str, Any] = {"router": "booksim", "flits": 6, "ts": 1, "buffer_flits": 3, "vcs": 2}
    kw |= {"link_latency": 2, "credit_delay": 1}
    model = run_wormhole_model(plan, _settings(runtime="model", **kw))
    raw = trio.run(run_inprocess, plan, _settings(runtime="inprocess", **kw))
    assert len(model.arrivals) == len(mcs)
    assert raw.logical_arrivals() == model.logical_arrivals()
    assert raw.traffic == model.traffic
    assert raw.link_sends == model.link_sends
