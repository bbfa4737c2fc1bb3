"""Proximity grouping (grouping.py) and the two-level leader scheme it rides on (twolevel.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.routing import registry
from node.routing.base import Algorithm, HeaderError, Params, PlanError, Send
from node.routing.grouping import (
    box,
    graph_cuts,
    graph_groups,
    graph_split,
    maximin_representatives,
    pattern_groups,
)
from node.routing.twolevel import leader_of, two_level_forward, two_level_prepare, with_leaders
from node.topology import Coord, Topology
from tests.routing_walk import cases, check_two_level, walk

GRAPH, PATTERN = registry.get("group-graph"), registry.get("group-pattern")
MESH8 = Topology.parse("mesh:8x8")
S8 = (2, 5)
D8 = [(1, 6), (2, 6), (1, 7), (2, 3), (5, 2), (1, 2), (0, 2), (6, 1)]
PAPER_GROUPS = [[(1, 6), (2, 6), (1, 7)], [(2, 3), (1, 2), (0, 2)], [(5, 2), (6, 1)]]


def _fixed(groups: Sequence[Sequence[Coord]]) -> Algorithm:
    """A two-level rule over given groups (to test the routing apart from the grouping)."""

    def prepare(t: Topology, s: Coord, d: Sequence[Coord], p: Params) -> list[Send]:
        return two_level_prepare(t, s, groups)

    return Algorithm("fixed", "test", prepare, two_level_forward)


def _norm(groups: Sequence[Sequence[Coord]]) -> set[frozenset[Coord]]:
    return {frozenset(g) for g in groups}


DP = registry.get("dp")


def _check(t: Topology, source: Coord, dests: list[Coord], groups: list[list[Coord]], alg: Algorithm,
           params: Params) -> None:  # fmt: skip
    """Two-level checks, or — for a single group (§4: the whole mesh is a group) — plain dual-path."""
    w = walk(alg, t, source, dests, params)
    if len(groups) == 1:
        assert w.first_sends == DP.prepare(t, source, dests, {})
        assert w.delivered() == Counter(dests)
        assert all(d.startups == 1 for d in w.deliveries)
        assert w.channels == walk(DP, t, source, dests).channels
    else:
        check_two_level(t, source, dests, groups, w)


# -- the seed 003 vector ------------------------------------------------------------------------


def test_paper_groups_cost_15_channels_through_the_paper_leaders() -> None:
    # seed 003 Fig. 3: leaders (2,6), (2,3), (5,2); 15 channels in all.
    assert set(with_leaders(MESH8, S8, PAPER_GROUPS)) == {(2, 6), (2, 3), (5, 2)}
    w = walk(_fixed(PAPER_GROUPS), MESH8, S8, D8)
    assert w.channels == 15
    assert w.delivered() == Counter(D8)
    starts = {d.node: d.startups for d in w.deliveries}
    assert starts == {(2, 6): 1, (2, 3): 1, (5, 2): 1, (1, 6): 2, (1, 7): 2, (1, 2): 2, (0, 2): 2, (6, 1): 2}


def test_graph_grouping_reproduces_the_seed_003_example() -> None:
    # Every partition of D by a hyperplane, with its crossing weight: y ≥ 3 (through (2,3)) is
    # the heaviest, but only x ≥ 3 and y ≥ 4 are free lines; the paper cuts at x_2 = 4.
    cuts = {(c.dim, c.h): (c.weight, c.free) for c in graph_cuts(D8)}
    assert cuts == {
        (0, 1): (33, False),
        (0, 2): (88, False),
        (0, 3): (86, True),
        (0, 6): (51, False),
        (1, 2): (51, False),
        (1, 3): (100, False),
        (1, 4): (97, True),  # paper: 93 (no partition of D weighs 93)
        (1, 7): (39, False),
    }
    weight, dim, d1, d2 = graph_split(D8)
    assert (weight, dim, set(d1)) == (97, 1, {(1, 6), (2, 6), (1, 7)})
    # the paper's second cut x_1 = 4 of its D2: weight 32
    weight2, dim2, e1, e2 = graph_split(d2)
    assert (weight2, dim2, set(e1), set(e2)) == (32, 0, {(5, 2), (6, 1)}, {(2, 3), (1, 2), (0, 2)})
    assert _norm(graph_groups(D8, 0.5)) == _norm(PAPER_GROUPS)
    w = walk(GRAPH, MESH8, S8, D8, {"T": 0.5})
    assert w.delivered() == Counter(D8)
    assert w.channels == 15  # paper: 15
    assert {d.node for d in w.deliveries if d.startups == 1} == {(2, 6), (2, 3), (5, 2)}  # the leaders


def test_graph_split_falls_back_to_every_hyperplane_without_a_free_line() -> None:
    # no free line inside the box: Step 2's full range, nodes on the hyperplane going to D1
    nodes = [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1)]
    assert not any(c.free for c in graph_cuts(nodes))
    weight, dim, d1, d2 = graph_split(nodes)
    assert weight == max(c.weight for c in graph_cuts(nodes))
    assert max(n[dim] for n in d2) < min(n[dim] for n in d1) and set(d1) | set(d2) == set(nodes)


def test_pattern_grouping_finds_the_paper_groups_on_the_seed_003_example() -> None:
    assert _norm(pattern_groups(D8)) == _norm(PAPER_GROUPS)
    assert walk(PATTERN, MESH8, S8, D8).channels == 15


def test_a_single_group_is_plain_dual_path() -> None:
    # seed 003 §4: when the destinations fill the mesh, "the whole mesh is a group", i.e. dual-path
    t = Topology.parse("mesh:4x4")
    dests = [n for n in t.nodes() if n != (1, 1)]
    assert len(graph_groups(dests, 0.8)) == 1
    assert GRAPH.prepare(t, (1, 1), dests, {"T": 0.8}) == DP.prepare(t, (1, 1), dests, {})
    w = walk(GRAPH, t, (1, 1), dests, {"T": 0.8})
    assert w.delivered() == Counter(dests) and {d.startups for d in w.deliveries} == {1}


def test_graph_threshold_stops_on_density() -> None:
    dense = [(0, 0), (1, 0), (0, 1)]  # 3 of a 2×2 box
    assert graph_groups(dense, 0.75) == [sorted(dense)]
    assert len(graph_groups(dense, 0.8)) == 2
    assert graph_groups([], 0.5) == []


def test_maximin_representatives_and_the_new_cluster_rule() -> None:
    # seed 003 §3.2's first three representatives: (0,0), then (7,2), then (3,5)
    assert maximin_representatives([(0, 0), (7, 2), (3, 5), (1, 1), (6, 2), (3, 4)]) == [
        (0, 0),
        (7, 2),
        (3, 5),
    ]
    # (6,3) is nearest (6,5) but growing that sub-mesh would overlap (2,0)'s: it opens a group
    d = [(2, 0), (3, 3), (3, 5), (6, 3), (6, 5)]
    assert maximin_representatives(d) == [(2, 0), (6, 5)]
    assert pattern_groups(d) == [[(2, 0), (3, 3)], [(3, 5), (6, 5)], [(6, 3)]]


#: 18 destinations on an 8×8 mesh built to fit every fact seed 003 §3.2 states of its Figs. 7–8 (the
#: figures are missing: this is a set consistent with the text, not the paper's set).
PATTERN_EXAMPLE = [
    *((0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 2)),
    *((3, 3), (3, 4), (3, 5), (5, 0), (5, 1), (5, 3), (6, 1), (6, 4), (7, 2)),
]


def test_pattern_grouping_follows_the_seed_003_text_on_a_set_that_fits_it() -> None:
    """§3.2: c1 = (0,0); c2 = (7,2) at √53; c3 = (3,5), its gap ≥ √53/2; (3,2), nearest c3, would make
    sub-meshes 1 and 3 overlap, so it becomes c4; four disjoint sub-meshes result."""
    assert maximin_representatives(PATTERN_EXAMPLE) == [(0, 0), (7, 2), (3, 5)]
    groups = pattern_groups(PATTERN_EXAMPLE)
    assert [g[0] for g in groups] == [(0, 0), (5, 0), (1, 3), (3, 2)] and len(groups) == 4
    assert (3, 5) in groups[2] and (7, 2) in groups[1] and groups[3] == [(3, 2)]
    cells = [{(x, y) for x in range(b[0], b[1] + 1) for y in range(b[2], b[3] + 1)} for b in map(box, groups)]
    assert not any(a & b for i, a in enumerate(cells) for b in cells[i + 1 :])  # disjoint sub-meshes
    assert sorted(p for g in groups for p in g) == sorted(PATTERN_EXAMPLE)


# -- properties --------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(cases(), st.sampled_from([0.25, 0.5, 0.8, 1.0]))
def test_graph_grouping_properties(case: tuple[Topology, Coord, list[Coord]], threshold: float) -> None:
    t, source, dests = case
    groups = graph_groups(dests, threshold)
    for g in groups:
        b = box(g)
        assert len(g) == 1 or len(g) / ((b[1] - b[0] + 1) * (b[3] - b[2] + 1)) >= threshold
    _check(t, source, dests, groups, GRAPH, {"T": threshold})


@settings(max_examples=100, deadline=None)
@given(cases())
def test_pattern_grouping_properties(case: tuple[Topology, Coord, list[Coord]]) -> None:
    t, source, dests = case
    groups = pattern_groups(dests)
    reps = maximin_representatives(dests)
    assert len(groups) >= len(reps)
    _check(t, source, dests, groups, PATTERN, {})


# -- headers and parameters --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (7, "expected a leader header"),
        ({"leaders": []}, "at least one leader"),
        ({"leaders": [[[1, 1], []]], "x": 1}, "leader header must be"),
        ({"leaders": [[1, 1, 1]]}, "not a \\[leader, members\\] pair"),
        ({"leaders": [[[9, 9], []]]}, "bad leader"),
        ({"leaders": [[[1, 1], [[1, 1]]]]}, "appears twice"),
        ({"leaders": [[[1, 1], "x"]]}, "must be a list"),
        ({"group": [[1, 1]], "leaders": []}, "leader header must be"),
        ([], "empty"),
    ],
)
def test_malformed_two_level_headers(header: Any, match: str) -> None:
    for alg in (GRAPH, PATTERN):
        with pytest.raises(HeaderError, match=match):
            alg.forward(MESH8, (1, 1), header)


def test_leader_forward_carries_the_worm_and_starts_its_group() -> None:
    # (1,1) leads [(1,2)] and the path goes on to (3,3): the continuation is carried, the group new
    fwd = two_level_forward(MESH8, (1, 1), {"leaders": [[[1, 1], [[1, 2]]], [[3, 3], []]]})
    assert fwd.deliver and fwd.startup and fwd.carried == 1
    assert fwd.sends[0][1] == {"leaders": [[[3, 3], []]]}
    assert fwd.sends[1] == ("+y", [[1, 2]])
    assert fwd.startups_of(1) == [1, 2]
    # the last leader marks its own start-up
    fwd = two_level_forward(MESH8, (3, 3), {"leaders": [[[3, 3], [[4, 3]]]]})
    assert fwd == (True, [("+x", [[4, 3]])], True, 0)


def test_leader_is_the_member_nearest_the_source() -> None:
    assert leader_of(MESH8, (0, 0), [(3, 3), (1, 5), (5, 1)]) == (1, 5)  # ties: smallest (x, y)


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), float("inf"), "abc", True, None, [0.5]])
def test_bad_threshold_is_a_plan_error(bad: object) -> None:
    with pytest.raises(PlanError, match="T="):
        GRAPH.prepare(MESH8, S8, D8, {"T": bad})


def test_threshold_default_and_text() -> None:
    assert GRAPH.prepare(MESH8, S8, D8, {}) == GRAPH.prepare(MESH8, S8, D8, {"T": "0.5"})


def test_mesh_only() -> None:
    torus = Topology.parse("torus:8x8")
    for alg in (GRAPH, PATTERN):
        assert alg.unsupported(torus) is not None
        with pytest.raises(PlanError, match="mesh only"):
            alg.prepare(torus, S8, D8, {})
