"""Path-based rules: the snake labelling and R (hamiltonian.py), DP, MP and CP (paths.py)."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.routing import registry
from node.routing.base import HeaderError, PlanError, check_destinations
from node.routing.hamiltonian import (
    lmn_route,
    path_forward,
    path_nodes,
    snake_label,
    snake_node,
    xy_route,
)
from node.routing.paths import cp_split, dp_split, mp_split
from node.topology import Coord, Topology
from tests.routing_walk import Walk, cases, meshes, tori, walk

DP, MP, CP = registry.get("dp"), registry.get("mp"), registry.get("cp")
MESH6, MESH8 = Topology.parse("mesh:6x6"), Topology.parse("mesh:8x8")
D6 = [(0, 0), (5, 0), (5, 1), (0, 2), (5, 3), (1, 3), (5, 4), (4, 5), (0, 5)]
D8 = [(1, 6), (2, 6), (1, 7), (2, 3), (5, 2), (1, 2), (0, 2), (6, 1)]


# -- the labelling and R ---------------------------------------------------------------------


def test_snake_labels_follow_the_rows() -> None:
    assert [snake_label(MESH6, (x, 0)) for x in range(6)] == [0, 1, 2, 3, 4, 5]
    assert [snake_label(MESH6, (x, 1)) for x in range(6)] == [11, 10, 9, 8, 7, 6]
    assert snake_label(MESH6, (1, 3)) == 22
    assert all(snake_node(MESH8, snake_label(MESH8, c)) == c for c in MESH8.nodes())
    with pytest.raises(ValueError, match="outside"):
        snake_node(MESH6, 36)


def test_r_vector_goes_up_from_1_3_toward_label_29() -> None:
    # ALGORITHMS.md: on the 6×6 mesh of the DP vector, label 29 is (5,4); R at (1,3) picks (1,4).
    target = snake_node(MESH6, 29)
    assert target == (5, 4)
    port = lmn_route(MESH6, (1, 3), target)
    assert port == "+y" and MESH6.neighbour((1, 3), port) == (1, 4)
    assert snake_label(MESH6, (1, 4)) == 25
    assert lmn_route(MESH6, (1, 3), (1, 3)) is None


@settings(max_examples=100, deadline=None)
@given(cases(st.one_of(meshes, tori)), st.data())
def test_r_is_strictly_monotone_and_shortest_on_the_mesh(
    case: tuple[Topology, Coord, list[Coord]], data: st.DataObject
) -> None:
    t, u, _ = case
    v = data.draw(st.sampled_from(list(t.nodes())))
    nodes = path_nodes(t, u, [v], lmn_route)
    labels = [snake_label(t, n) for n in nodes]
    assert nodes[-1] == v
    assert labels == sorted(labels) or labels == sorted(labels, reverse=True)
    assert len(set(labels)) == len(labels)
    if not t.is_torus:
        # Lin–McKinley–Ni: on the mesh R's route is a shortest path.
        assert len(nodes) - 1 == t.distance(u, v)


# -- DP --------------------------------------------------------------------------------------


def _split_trails(t: Topology, source: Coord, w: Walk) -> tuple[list[int], list[int]]:
    """Hop counts of the high and low worms of a walk."""
    ls = snake_label(t, source)
    high = [len(tr) - 1 for tr in w.trails if snake_label(t, tr[1]) > ls]
    low = [len(tr) - 1 for tr in w.trails if snake_label(t, tr[1]) < ls]
    return high, low


def test_dp_vector_6x6() -> None:
    w = walk(DP, MESH6, (3, 2), D6)
    assert _split_trails(MESH6, (3, 2), w) == ([18], [15])
    assert w.channels == 33
    assert w.delivered() == Counter(D6)
    # the high path's destinations in ascending label order, the low one's descending
    high, low = dp_split(MESH6, (3, 2), D6)
    assert high == [(5, 3), (1, 3), (5, 4), (4, 5), (0, 5)]
    assert low == [(0, 2), (5, 1), (5, 0), (0, 0)]


def test_dp_vector_8x8_seed_003_fig_2() -> None:
    w = walk(DP, MESH8, (2, 5), D8)
    assert w.channels == 23
    assert _split_trails(MESH8, (2, 5), w) == ([5], [18])
    high, low = dp_split(MESH8, (2, 5), D8)
    # seed 003 §2.2: high (1,6), (2,6), (1,7); low (2,3), (5,2), (1,2), (0,2), (6,1)
    assert high == [(1, 6), (2, 6), (1, 7)]
    assert low == [(2, 3), (5, 2), (1, 2), (0, 2), (6, 1)]


def test_dp_sends_the_longer_path_first() -> None:
    sends = DP.prepare(MESH6, (3, 2), D6, {})
    assert [p for p, _ in sends] == ["+x", "-x"]  # high 18 hops, low 15 hops
    assert sends[0][1][0] == [5, 3]


def test_dp_empty_and_one_sided() -> None:
    assert DP.prepare(MESH6, (3, 2), [], {}) == []
    w = walk(DP, MESH6, (0, 0), [(5, 5), (2, 2)])
    assert len(w.trails) == 1 and w.delivered() == Counter([(5, 5), (2, 2)])


# -- MP --------------------------------------------------------------------------------------


def test_mp_vector_6x6() -> None:
    w = walk(MP, MESH6, (3, 2), D6)
    assert sorted((len(tr) - 1 for tr in w.trails), reverse=True) == [6, 6, 5, 4]
    assert w.channels == 21
    assert w.delivered() == Counter(D6)
    ports = [p for p, _ in w.first_sends]
    assert sorted(ports) == sorted(["+x", "+y", "-x", "-y"])


def test_mp_split_even_and_odd_rows() -> None:
    assert mp_split(MESH6, (3, 2), D6) == [
        ("+x", [(5, 3), (5, 4), (4, 5)]),
        ("+y", [(1, 3), (0, 5)]),
        ("-x", [(0, 2), (0, 0)]),
        ("-y", [(5, 1), (5, 0)]),
    ]
    # odd row: labels run right to left, so the x-tests mirror
    assert mp_split(MESH6, (2, 3), [(0, 3), (4, 4), (5, 3), (1, 1)]) == [
        ("-x", [(0, 3)]),
        ("+y", [(4, 4)]),
        ("+x", [(5, 3)]),
        ("-y", [(1, 1)]),
    ]


def test_mp_merges_an_empty_side_into_a_dp_path() -> None:
    # only east-side high destinations: one R-routed path (like DP), not a forced +x hop
    split = mp_split(MESH6, (0, 0), [(5, 5), (2, 2)])
    assert split == [(None, [(2, 2), (5, 5)])]
    assert (
        walk(MP, MESH6, (0, 0), [(5, 5), (2, 2)]).channels
        == walk(DP, MESH6, (0, 0), [(5, 5), (2, 2)]).channels
    )


# -- CP --------------------------------------------------------------------------------------


def test_cp_two_messages_per_column_xy_routed() -> None:
    src = (3, 2)
    msgs = cp_split(MESH6, src, D6)
    assert msgs == [[(0, 2), (0, 5)], [(0, 0)], [(1, 3)], [(4, 5)], [(5, 3), (5, 4)], [(5, 1), (5, 0)]]
    w = walk(CP, MESH6, src, D6)
    assert w.delivered() == Counter(D6)
    # each message: along the source row, then along the column
    assert w.channels == 6 + 5 + 3 + 4 + 4 + 4
    assert all(all(xy_route(MESH6, a, b) is not None for a, b in pairwise(tr)) for tr in w.trails)


# -- properties --------------------------------------------------------------------------------


def _exactly_once(w: Walk, dests: list[Coord]) -> None:
    assert w.delivered() == Counter(dests)


@settings(max_examples=100, deadline=None)
@given(cases(st.one_of(meshes, tori)))
def test_dp_and_mp_deliver_once_along_label_monotone_paths(case: tuple[Topology, Coord, list[Coord]]) -> None:
    t, source, dests = case
    ls = snake_label(t, source)
    for alg in (DP, MP):
        w = walk(alg, t, source, dests)
        _exactly_once(w, dests)
        for tr in w.trails:
            labels = [snake_label(t, n) for n in tr]
            if labels[1] > ls:  # high-channel network: strictly increasing
                assert all(a < b for a, b in pairwise(labels)), (alg.name, tr)
            else:  # low-channel network: strictly decreasing
                assert all(a > b for a, b in pairwise(labels)), (alg.name, tr)
        assert len(w.trails) <= (2 if alg is DP else 4)
        assert len({p for p, _ in w.first_sends}) == len(w.first_sends)  # one path per port


@settings(max_examples=100, deadline=None)
@given(cases())
def test_cp_delivers_once_with_at_most_two_messages_per_column(
    case: tuple[Topology, Coord, list[Coord]],
) -> None:
    t, source, dests = case
    w = walk(CP, t, source, dests)
    _exactly_once(w, dests)
    per_column: Counter[int] = Counter()
    for _, header in w.first_sends:
        cols = {x for x, _ in header}
        assert len(cols) == 1
        per_column[cols.pop()] += 1
        ys = [y for _, y in header]
        assert all(y >= source[1] for y in ys) or all(y < source[1] for y in ys)
    assert all(n <= 2 for n in per_column.values())
    # every message is one XY route from the source through its column
    for tr in w.trails:
        assert len(tr) - 1 == t.distance(source, tr[-1])


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "match"),
    [
        ("nonsense", "must be a list"),
        ([], "empty"),
        ([[1]], "destination list"),
        ([[9, 9]], "destination list"),
        ([[1, True]], "destination list"),
        ([[1, 1], [1, 1]], "twice"),
    ],
)
def test_malformed_path_headers_raise_header_error(header: Any, match: str) -> None:
    for alg in (DP, MP, CP):
        with pytest.raises(HeaderError, match=match):
            alg.forward(MESH6, (1, 1), header)


def test_bad_plans_raise_plan_error() -> None:
    with pytest.raises(PlanError, match="cannot also be a destination"):
        DP.prepare(MESH6, (1, 1), [(1, 1)], {})
    with pytest.raises(PlanError, match="listed twice"):
        MP.prepare(MESH6, (1, 1), [(2, 2), (2, 2)], {})
    with pytest.raises(PlanError, match="not a node"):
        CP.prepare(MESH6, (1, 1), [(6, 0)], {})
    assert check_destinations(MESH6, (0, 0), [[1, 2]]) == [(1, 2)]


def test_kinds() -> None:
    torus = Topology.parse("torus:6x6")
    assert DP.unsupported(torus) is None and MP.unsupported(torus) is None
    assert CP.unsupported(torus) is not None


def test_path_forward_passes_through_and_delivers() -> None:
    fwd = path_forward(MESH6, (1, 3), [[5, 4], [4, 5]], lmn_route, "x")
    assert fwd.deliver is False and fwd.sends == [("+y", [[5, 4], [4, 5]])] and not fwd.startup
    fwd = path_forward(MESH6, (5, 4), [[5, 4], [4, 5]], lmn_route, "x")
    assert fwd.deliver is True and fwd.sends == [("+y", [[4, 5]])]
    fwd = path_forward(MESH6, (4, 5), [[4, 5]], lmn_route, "x")
    assert fwd == (True, [], False, 0)
