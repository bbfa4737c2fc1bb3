"""Qualified Groups (qg.py): Phases 1–4 on a hand-worked case, properties, parameters."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.routing import registry
from node.routing.base import PlanError
from node.routing.qg import (
    Area,
    divisor_dimension,
    multicast_area,
    primary_groups,
    qg_groups,
    qg_plan,
    weight,
)
from node.topology import Coord, Topology
from tests.routing_walk import cases, check_two_level, walk

QG = registry.get("qg")
MESH10 = Topology.parse("mesh:10x10")
SRC = (0, 0)
D = [(1, 1), (8, 1), (1, 8), (5, 5), (9, 9), (9, 5), (5, 9)]


def test_phases_by_hand() -> None:
    # Phase 1: the area spans (0,0)..(9,9), mid (4,4).
    assert multicast_area([SRC, *D]) == Area((0, 0), (9, 9), (4, 4))
    # Phase 2: 5 of 7 destinations above mid in x and in y: N_x = N_y = 3, the tie goes to x.
    _, div, primary = primary_groups(SRC, D)
    assert div == 0
    assert primary == [[(1, 1)], [(1, 8)], [(8, 1)], [(5, 5), (5, 9), (9, 5), (9, 9)]]
    # Phase 3: W_m = Ext + Dist(p_f, p_n) + N: 2+0+1, 9+0+1, 9+0+1, 10+8+4; W_av = 45/4.
    assert [weight(MESH10, SRC, g) for g in primary] == [3, 10, 10, 22]
    plan = qg_plan(MESH10, SRC, D, 0.5)
    assert plan.w_av == 11.25
    # QP(G4) = (22 - 11.25)/11.25 ≈ 0.96 > 0.5: bisect at its own mid x = 7 → W 16 (QP 0.42, qualified)
    # and W 20 (QP 0.78) → cut again along y → (9,5) W 15 and (9,9) W 19, indivisible. 4 parts max.
    assert plan.groups == [[(1, 1)], [(1, 8)], [(8, 1)], [(5, 5), (5, 9)], [(9, 5)], [(9, 9)]]
    # With TD = 0.99, G4 qualifies as it is.
    assert qg_groups(MESH10, SRC, D, 0.99) == primary


def test_walk_two_start_ups() -> None:
    w = walk(QG, MESH10, SRC, D)
    assert w.delivered() == Counter(D)
    leaders = {(1, 1), (1, 8), (8, 1), (5, 5), (9, 5), (9, 9)}
    assert {d.node for d in w.deliveries if d.startups == 1} == leaders
    assert {d.node: d.startups for d in w.deliveries}[(5, 9)] == 2


def test_divisor_dimension_prefers_the_balanced_axis() -> None:
    # all destinations in the lower half of x, split evenly in y: y divides
    d = [(0, 0), (1, 9), (0, 8), (1, 1)]
    area = multicast_area([(9, 5), *d])
    assert divisor_dimension(area, d) == 1
    # an area spanning one row only can divide along x alone
    assert divisor_dimension(multicast_area([(0, 3), (5, 3)]), [(0, 3), (5, 3)]) == 0
    assert divisor_dimension(multicast_area([(2, 2)]), [(2, 2)]) is None


def test_no_destinations() -> None:
    assert qg_groups(MESH10, SRC, [], 0.5) == []
    assert QG.prepare(MESH10, SRC, [], {}) == []


@settings(max_examples=100, deadline=None)
@given(cases(), st.sampled_from([0.05, 0.2, 0.5, 0.8]))
def test_qg_groups_partition_and_deliver(case: tuple[Topology, Coord, list[Coord]], td: float) -> None:
    t, source, dests = case
    plan = qg_plan(t, source, dests, td)
    groups = plan.groups
    # disjoint and covering D (and, through check_two_level, disjoint sub-meshes)
    assert Counter(c for g in groups for c in g) == Counter(dests)
    assert len(plan.primary) <= 4
    # each primary group yields at most 2^n = 4 qualified groups, each inside it
    for p in plan.primary:
        parts = [g for g in groups if set(g) <= set(p)]
        assert 1 <= len(parts) <= 4 and sorted(c for g in parts for c in g) == sorted(p)
    check_two_level(t, source, dests, groups, walk(QG, t, source, dests, {"TD": td}))


@pytest.mark.parametrize("bad", [0, 1, -1, 2.5, float("nan"), "x", False])
def test_bad_td_is_a_plan_error(bad: object) -> None:
    with pytest.raises(PlanError, match="TD="):
        QG.prepare(MESH10, SRC, D, {"TD": bad})


def test_mesh_only() -> None:
    torus = Topology.parse("torus:10x10")
    assert QG.unsupported(torus) is not None
    with pytest.raises(PlanError, match="mesh only"):
        QG.prepare(torus, SRC, D, {})
