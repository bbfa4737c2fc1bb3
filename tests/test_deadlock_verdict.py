"""The deadlock verdict (docs/wormhole.md "Deadlock"): the engines runtime and the reference model
each find the cycle of still worms from their own tables and name it at the same cycle.

* random plans with one VC on small tori (unicast and multicast worms, injections at random steps
  that go on after many a deadlock; the papers' router or BookSim2's, whose output VCs drain after
  a tail): the same ``incomplete`` (the verdict's line word for word), the same arrivals and
  traffic, and never a stall that no verdict named first;
* four unicast worms around a torus ring: the cycle and the worms named, at the cycle worked out
  by hand;
* a deadlock while injections are still to come ends the run instead of running to the budget.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.experiments.load import Traffic, load_point, poisson_plan
from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.model import run_model
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology
from tests.test_wormhole import NO_EXPLAIN

MIXES = [("dp",), ("tasnem",), ("tree",), ("unicast", "dp"), ("unicast", "tasnem"), ("unicast",)]
"""The algorithms of a plan: multicast worms alone, beside unicasts, or unicasts alone."""


@st.composite
def torus_plans(draw: st.DrawFn, lasts: tuple[int, ...] = (3, 15, 40)) -> tuple[Plan, RunSettings]:
    """A few dozen multicasts at random steps on a 3x3 … 6x6 torus, short worms, one VC."""
    cols, rows = draw(st.sampled_from([3, 4, 5, 6])), draw(st.sampled_from([3, 4, 5, 6]))
    topo = Topology.parse(f"torus:{cols}x{rows}")
    nodes = sorted(topo.nodes())
    last = draw(st.sampled_from(lasts))  # how densely they come
    algs = draw(st.sampled_from(MIXES))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))  # the rest seeded: plans as dense as drawn
    mcs = []
    for i in range(draw(st.sampled_from([12, 24, 48]))):
        src = rnd.choice(nodes)
        alg = rnd.choice(algs)
        k = 1 if alg == "unicast" else rnd.randint(2, 4)
        dests = rnd.sample([n for n in nodes if n != src], k)
        mcs.append(Multicast(i, alg, src, tuple(dests), rnd.randint(0, last)))
    s = RunSettings(
        switching="wormhole",
        contention="shared",
        port_model=draw(st.sampled_from(["all-port", "one-port"])),
        flits=draw(st.integers(2, 8)),
        ts=draw(st.integers(0, 3)),
        buffer_flits=draw(st.integers(1, 3)),
        router=draw(st.sampled_from(["paper", "paper", "booksim"])),  # booksim: wait_for_tail_credit
        max_steps=20_000,
    )
    return Plan(topo, tuple(mcs)), s


def _runs(plan: Plan, s: RunSettings) -> tuple[RawRun, RawRun]:
    return run_engines(plan, s), run_model(plan, replace(s, runtime="model"))


def _same_verdict(plan: Plan, s: RunSettings) -> None:
    """The engines runtime and the model: the same incomplete (verdict), arrivals and traffic."""
    engines, model = _runs(plan, s)
    assert engines.incomplete == model.incomplete
    assert not any("none moves" in x for x in model.incomplete)  # every stall was a cycle first
    assert engines.logical_arrivals() == model.logical_arrivals()
    assert engines.traffic == model.traffic
    dead = [x for x in model.incomplete if x.startswith("deadlock")]
    if dead:
        at = int(dead[0].split()[3].rstrip(":"))
        event("deadlock before the last injection" if plan.last_step > at else "deadlock after it")
        # no injection after the verdict: no worm of a later multicast moved
        assert all(m.step <= at for m in plan.multicasts if m.id in model.traffic)
    else:
        event("no deadlock")
        assert len(model.arrivals) == sum(len(m.destinations) for m in plan.multicasts)


@settings(max_examples=150, deadline=None, phases=NO_EXPLAIN)
@given(torus_plans())
def test_engines_and_model_name_the_same_deadlock(case: tuple[Plan, RunSettings]) -> None:
    _same_verdict(*case)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, phases=NO_EXPLAIN)  # ~25 s in CI (800: 67 s)
@given(torus_plans(lasts=(40, 120)))
def test_engines_and_model_name_the_same_deadlock_in_longer_plans(case: tuple[Plan, RunSettings]) -> None:
    """More and longer plans: more of them deadlock before their last injection."""
    _same_verdict(*case)


def _ring(n: int, ts: int) -> Plan:
    """``n`` unicast worms on a torus ring, worm i from (i, 0) two hops along +x, all at step 0."""
    topo = Topology.parse(f"torus:{n}x3")
    return Plan(topo, tuple(Multicast(i, "unicast", (i, 0), (((i + 2) % n, 0),), 0) for i in range(n)))


def test_four_worms_around_a_ring_are_the_named_cycle() -> None:
    """Each worm's head leaves at Ts, the next flit at Ts + 1 (B = 2); at Ts + 1 each head sits in the
    next node's -x input wanting the +x the next worm's injection channel holds. Nothing moves
    after Ts + 1, so the verdict holds first at the end of cycle Ts + 1 + 3 = Ts + 4."""
    ts = 3
    plan = _ring(4, ts)
    s = RunSettings(switching="wormhole", contention="shared", flits=8, ts=ts, max_steps=1000)
    engines, model = _runs(plan, s)
    parts = []
    for i in range(4):
        here, nxt = (i, 0), ((i + 1) % 4, 0)
        parts.append((here, "inj", f"worm [{i}, 0, 0] at ({i},0) in inj holds ['+x'] and waits for []"))
        parts.append((nxt, "-x", f"worm [{i}, 0, 0] at ({nxt[0]},0) in -x holds [] and waits for ['+x']"))
    want = f"deadlock at cycle {ts + 4}: 4 worms wait for each other in a cycle: " + "; ".join(
        p for _, _, p in sorted(parts)
    )
    assert model.incomplete == [want]
    assert engines.incomplete == [want]
    assert model.arrivals == engines.arrivals == []


def test_a_ring_deadlock_with_injections_to_come_ends_the_run() -> None:
    """The ring deadlocks at once; a later unicast elsewhere is not made, and the run ends (not at
    the budget) in both."""
    ring = _ring(4, 0)
    late = Multicast(4, "unicast", (0, 2), ((2, 2),), 500)
    plan = Plan(ring.topology, (*ring.multicasts, late))
    s = RunSettings(switching="wormhole", contention="shared", flits=8, ts=0, max_steps=5000)
    engines, model = _runs(plan, s)
    assert engines.incomplete == model.incomplete and len(model.incomplete) == 1
    assert model.incomplete[0].startswith("deadlock at cycle 4:")
    assert 4 not in model.traffic and 4 not in engines.traffic
    assert model.last_step < 500 and engines.last_step < 500


CI_7_DEC = [
    ((2, 2), ((1, 2), (0, 0), (2, 0), (2, 1)), 79), ((2, 0), ((2, 1), (0, 1), (0, 2), (2, 2)), 101),
    ((2, 2), ((2, 0), (0, 1), (0, 2)), 96), ((1, 2), ((2, 0), (1, 1), (2, 1), (1, 0)), 86),
    ((0, 1), ((2, 1), (0, 0), (1, 0)), 90), ((0, 2), ((0, 0), (1, 1)), 99), ((0, 1), ((1, 0), (2, 1)), 101),
    ((0, 0), ((0, 2), (1, 2), (2, 2), (1, 0)), 107), ((1, 2), ((0, 1), (0, 2), (0, 0)), 96),
    ((1, 2), ((0, 0), (2, 2), (2, 0), (2, 1)), 73), ((0, 1), ((1, 0), (1, 1), (1, 2), (2, 0)), 80),
    ((0, 1), ((1, 1), (2, 2), (1, 2), (2, 0)), 29), ((1, 2), ((1, 0), (0, 2)), 84),
    ((2, 1), ((1, 1), (1, 0)), 75),
    ((2, 0), ((0, 0), (2, 1), (1, 1), (0, 2)), 116),
]  # fmt: skip
"""TASNEM worms on a 3x3 torus (source, destinations, step), CI's counterexample of 7 Dec 2026, made
smaller: the network stops, and the deadlock holds first at cycle 116, the very cycle of the last
injection."""


def test_an_injection_at_the_deadlock_s_own_cycle_is_made_on_both_runtimes() -> None:
    """The verdict is the end of its cycle's state, that cycle's injections made: the model, which
    judges the cycles of a stopped network without stepping them, makes that injection first, as
    the engines runtime, which steps to it, does (it used to stop at the cycle before it)."""
    topo = Topology.parse("torus:3x3")
    plan = Plan(
        topo, tuple(Multicast(i, "tasnem", src, dests, t) for i, (src, dests, t) in enumerate(CI_7_DEC))
    )
    s = RunSettings(switching="wormhole", contention="shared", port_model="one-port", flits=2, ts=0,
                    buffer_flits=1, max_steps=20_000)  # fmt: skip
    engines, model = _runs(plan, s)
    assert model.incomplete[0].startswith("deadlock at cycle 116:")
    assert engines.incomplete == model.incomplete
    last = len(CI_7_DEC) - 1
    assert model.traffic.get(last, 0) >= 1 and engines.traffic == model.traffic
    assert engines.logical_arrivals() == model.logical_arrivals()


def test_the_torus_load_example_says_deadlock_on_both_runtimes() -> None:
    """docs/wormhole.md's 6x6 torus at 0.03 (one VC): the same point, a deadlock, on both."""
    topo = Topology.parse("torus:6x6")
    traffic = Traffic(rate=0.03, k=1, duration=600, seed=1)
    s = RunSettings(switching="wormhole", contention="shared", flits=16, ts=0)
    points = [
        load_point(topo, "unicast", traffic, replace(s, runtime=r), warmup=100, batches=5)
        for r in ("model", "engines")
    ]
    assert points[0].saturated is not None and points[0].saturated.startswith("deadlock at cycle")
    assert points[0].saturated == points[1].saturated
    assert points[0].throughput == points[1].throughput


@pytest.mark.parametrize(
    "timing",
    [{"router": "booksim", "link_latency": 4, "credit_delay": 3},
     {"link_latency": 6, "credit_delay": 5, "vc_alloc_delay": 3}],
)  # fmt: skip
def test_a_worm_waiting_on_its_own_flits_in_flight_is_not_a_deadlock(timing: dict[str, int]) -> None:
    """With long links and late credits a live worm goes several cycles without a change (its flits
    and credits are in the pipeline): the verdict waits the router timing's ``settle`` longer, so a
    light load with B = 2 completes on both, and the ring of four worms still deadlocks on both."""
    topo = Topology.parse("mesh:6x6")
    plan = poisson_plan(topo, "unicast", Traffic(rate=0.004, k=1, duration=600, seed=1))
    s = RunSettings(switching="wormhole", contention="shared", flits=16, ts=0, buffer_flits=2, max_steps=6000,
                    **timing)  # type: ignore[arg-type]  # fmt: skip
    engines, model = _runs(plan, s)
    assert engines.incomplete == model.incomplete == []
    assert len(model.arrivals) == len(engines.arrivals) == len(plan.multicasts) > 0
    ring = _ring(4, 3)
    s = RunSettings(switching="wormhole", contention="shared", flits=8, ts=3, max_steps=1000, **timing)  # type: ignore[arg-type]
    engines, model = _runs(ring, s)
    assert engines.incomplete == model.incomplete and model.incomplete[0].startswith("deadlock at cycle")
    assert "4 worms wait for each other" in model.incomplete[0]
    assert model.arrivals == engines.arrivals == []
