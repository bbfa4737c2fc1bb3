"""Seed 000 (Malani) tree rules: worked examples from ALGORITHMS.md and tree properties.

Packets are walked through the rules exactly as nodes would handle them: ``prepare`` at the
source, then ``forward`` at every node a header reaches (headers round-trip through msgpack,
as on the wire). Traffic is the number of links used; the one-port time is the latest arrival
when each node sends its packets one per time unit in the order the rule gives them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import msgpack
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from node.routing import malani
from node.routing.base import Algorithm
from node.routing.tree import build_children, completion_times, encode_tree, id_children
from node.routing.zones import zoned_tree
from node.topology import Coord, Topology

RULES = {a.name: a for a in malani.ALGORITHMS}
MESH_RULES = {
    "vh": malani.vh_edges,  # on the torus only: a mesh's VH sends by destination lists (vh_mesh_sends)
    "diag": malani.diag_edges,
    "dist": malani.dist_edges,
    "pair": malani.pair_edges,
    "min": malani.min_edges,
}
SHORTEST = ("vh", "diag", "pair")


@dataclass(frozen=True)
class Walk:
    links: int
    time: int
    delivered: list[Coord]
    hops: dict[Coord, int]
    parent: dict[Coord, Coord]


def walk(alg: Algorithm, topo: Topology, source: Coord, dests: Sequence[Coord]) -> Walk:
    """Follow every packet from ``prepare`` through ``forward``; each node must be reached once."""
    arrival = {source: 0}
    hops = {source: 0}
    parent: dict[Coord, Coord] = {}
    delivered: list[Coord] = []
    stack = [(source, alg.prepare(topo, source, list(dests), {}))]
    while stack:
        node, sends = stack.pop()
        ports = [p for p, _ in sends]
        assert len(set(ports)) == len(ports), f"{node} sends twice on one port"
        for i, (port, header) in enumerate(sends):
            child = topo.neighbour(node, port)
            assert child is not None, f"{node} sends off the edge on {port}"
            assert child not in arrival, f"{child} reached twice: not a tree"
            arrival[child] = arrival[node] + i + 1
            hops[child] = hops[node] + 1
            parent[child] = node
            wire = msgpack.unpackb(msgpack.packb(header))
            fw = alg.forward(topo, child, wire)
            if fw.deliver:
                delivered.append(child)
            stack.append((child, fw.sends))
    return Walk(len(parent), max(arrival.values()), delivered, hops, parent)


# -- worked examples (ALGORITHMS.md, "Tree-based, store-and-forward") -------------------------

EX1 = [(4, 6), (6, 6), (0, 2), (4, 0), (3, 0), (7, 4)]
EX2 = [(3, 2), (9, 3), (8, 5), (4, 7), (7, 7), (2, 8), (5, 8), (9, 8)]
BAD = [(9, 3), (3, 1), (2, 8), (4, 8)]
EX3 = [(4, 7), (7, 5), (0, 3), (2, 3), (5, 1), (6, 3), (1, 0), (3, 0)]

# (topology, destinations, algorithm, traffic, one-port time or None where not given)
VECTORS = [
    ("mesh:8x8", EX1, "vh", 25, 12),
    ("mesh:8x8", EX1, "diag", 21, 12),
    ("mesh:8x8", EX1, "dist", 17, 12),  # the paper says time 17 (open: its order is not given)
    ("mesh:8x8", EX1, "pair", 17, 12),
    ("mesh:10x9", EX2, "pair", 34, 17),
    ("mesh:10x9", EX2, "min", 29, 17),  # the paper says time 20 (open)
    ("mesh:10x9", BAD, "pair", 23, None),  # the paper draws 24
    ("mesh:10x9", BAD, "min", 20, None),  # the paper says 21
    ("torus:8x8", EX3, "pair", 21, 6),
    ("torus:8x8", EX3, "min", 20, 6),
    ("torus:8x8", EX3, "vh", 22, None),
]


@pytest.mark.parametrize(("spec", "dests", "name", "traffic", "time"), VECTORS)
def test_worked_example(spec: str, dests: list[Coord], name: str, traffic: int, time: int | None) -> None:
    topo = Topology.parse(spec)
    w = walk(RULES[name], topo, (0, 0), dests)
    assert sorted(w.delivered) == sorted(dests)
    assert w.links == traffic
    if time is not None:
        assert w.time == time
    # The headers' send order is the optimal one-port order.
    children = build_children((p, c) for c, p in w.parent.items())
    assert w.time == completion_times((0, 0), children)[(0, 0)]


def test_pair_intermediates_example_2() -> None:
    edges, joined = malani.pair_construction(10, 9, EX2)
    assert joined == [(2, 2), (4, 3), (5, 5), (7, 7), (9, 8)]
    assert edges == malani.pair_edges(10, 9, EX2)
    assert set(joined) <= {b for _, b in edges}  # each I is a node of the tree


def test_diag_trunk_and_branches_example_1() -> None:
    edges = malani.diag_edges(8, 8, EX1)
    children = build_children(edges)
    # Follow the trunk: alternate x, y from the origin to the farthest destination (6, 6).
    expected = [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2), (3, 2), (3, 3), (4, 3), (4, 4), (5, 4)]
    expected += [(5, 5), (6, 5), (6, 6)]
    parent = {c: p for p, c in edges}
    node = (6, 6)
    trunk = [node]
    while node != (0, 0):
        node = parent[node]
        trunk.append(node)
    assert trunk[::-1] == expected
    # Branches: (0,2) up from (0,0); (4,6) up from (4,4); (3,0),(4,0) right from (1,0); (7,4)
    # right from (5,4).
    assert parent[(0, 1)] == (0, 0) and parent[(4, 5)] == (4, 4)
    assert parent[(2, 0)] == (1, 0) and parent[(6, 4)] == (5, 4)
    assert len(edges) == 21 and (6, 6) not in children


def test_children_builders_refuse_a_node_with_two_parents() -> None:
    # By coordinate (the tests' front end) and by id (what every source runs), one check.
    edges = [((0, 0), (1, 0)), ((1, 0), (1, 1)), ((0, 0), (0, 1))]
    assert build_children(edges) == {(0, 0): [(1, 0), (0, 1)], (1, 0): [(1, 1)]}
    with pytest.raises(ValueError, match=r"node \(1, 1\) has two parents"):
        build_children([*edges, ((0, 1), (1, 1))])
    assert id_children(4, [(0, 2), (2, 3), (0, 1)]) == [[2, 1], None, [3], None]
    with pytest.raises(ValueError, match=r"node \(1, 1\) has two parents"):
        id_children(4, [(0, 2), (2, 3), (1, 3)], lambda i: divmod(i, 2))


def test_mesh_quadrants_and_torus_zones_share_the_rule() -> None:
    # A corner source uses a single quadrant: the mesh tree is the rule's tree itself.
    topo = Topology.parse("mesh:8x8")
    for name, rule in MESH_RULES.items():
        w = walk(RULES[name], topo, (0, 0), EX1)
        assert sorted(w.parent.items()) == sorted((c, p) for p, c in rule(8, 8, EX1)), name


def test_empty_and_duplicate_destinations() -> None:
    topo = Topology.parse("torus:5x4")
    for name in MESH_RULES:
        assert RULES[name].prepare(topo, (2, 2), [], {}) == []
        w = walk(RULES[name], topo, (2, 2), [(4, 0), (4, 0), (1, 3)])
        assert sorted(w.delivered) == [(1, 3), (4, 0)]
        assert MESH_RULES[name](3, 3, []) == []


def test_registered_in_family() -> None:
    from node.routing import registry

    for name in ("vh", "diag", "dist", "pair", "min"):
        alg = registry.get(name)
        assert alg.family == "malani"
        assert alg.kinds == ("mesh", "torus")


# -- properties --------------------------------------------------------------------------------


@st.composite
def multicasts(draw: st.DrawFn) -> tuple[Topology, Coord, list[Coord]]:
    kind = draw(st.sampled_from(["mesh", "torus"]))
    topo = Topology(kind, draw(st.integers(3, 12)), draw(st.integers(3, 12)))
    nodes = list(topo.nodes())
    source = draw(st.sampled_from(nodes))
    others = [n for n in nodes if n != source]
    k = draw(st.integers(1, len(others)))
    return topo, source, draw(st.permutations(others))[:k]


@pytest.mark.parametrize("name", sorted(RULES))
@settings(max_examples=150, deadline=None)
@given(case=multicasts())
def test_tree_properties(name: str, case: tuple[Topology, Coord, list[Coord]]) -> None:
    topo, source, dests = case
    w = walk(RULES[name], topo, source, dests)  # asserts that no node is reached twice
    assert sorted(w.delivered) == sorted(dests)  # each destination delivered exactly once
    links = {(p, c) for c, p in w.parent.items()}
    assert len(links) == w.links
    # Every leaf is a destination: no wasted branches.
    inner = set(w.parent.values())
    assert all(n in set(dests) for n in w.parent if n not in inner)
    if name in SHORTEST:
        for d in dests:
            assert w.hops[d] == topo.distance(source, d), (name, d)


# -- the fast searches against a plain reading -------------------------------------------------


def _ref_grow(tree: dict[Coord, Coord | None], start: Coord, target: Coord) -> None:
    path = [start]
    x, y = start
    while x != target[0]:
        x += 1 if target[0] > x else -1
        path.append((x, y))
    while y != target[1]:
        y += 1 if target[1] > y else -1
        path.append((x, y))
    for a, b in itertools.pairwise(path):
        tree.setdefault(b, a)


def _ref_nearest(tree: dict[Coord, Coord | None], t: Coord, below: bool = False) -> Coord:
    nodes = [n for n in tree if not below or (n[0] <= t[0] and n[1] <= t[1])]
    return min(nodes, key=lambda n: (abs(n[0] - t[0]) + abs(n[1] - t[1]), n))


def _ref_rule(name: str, dests: list[Coord]) -> set[tuple[Coord, Coord]]:
    """VH, DIST, PAIR, MIN read plainly: sets and full scans for the nearest tree node."""
    tree: dict[Coord, Coord | None] = {(0, 0): None}
    left = set(dests)

    def remaining() -> list[Coord]:
        return [d for d in left if d not in tree]

    if name == "vh":  # the union of the XY paths from the root
        for d in dests:
            _ref_grow(tree, (0, 0), d)
    elif name == "dist":
        for d in sorted(left, key=lambda d: (d[0] + d[1], d)):
            if d not in tree:
                _ref_grow(tree, _ref_nearest(tree, d), d)
    else:
        first = True
        pick_x = True
        while rest := remaining():
            a = min(rest)
            b = min(rest, key=lambda d: (d[1], d[0]))
            if name == "pair" or first:
                i = (a[0], b[1])
                _ref_grow(tree, _ref_nearest(tree, i, below=True), i)
                _ref_grow(tree, i, a)
                _ref_grow(tree, i, b)
                first = False
            else:
                d = a if pick_x else b
                _ref_grow(tree, _ref_nearest(tree, d), d)
                pick_x = not pick_x
    return {(p, c) for c, p in tree.items() if p is not None}


@pytest.mark.parametrize("name", ["vh", "dist", "pair", "min"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_matches_plain_reading(name: str, data: st.DataObject) -> None:
    w, h = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    cells = [(x, y) for x in range(w) for y in range(h) if (x, y) != (0, 0)]
    if not cells:
        return
    k = data.draw(st.integers(1, len(cells)))
    dests = data.draw(st.permutations(cells))[:k]
    assert set(MESH_RULES[name](w, h, dests)) == _ref_rule(name, dests)


@pytest.mark.parametrize("name", sorted(MESH_RULES))
@settings(max_examples=100, deadline=None)
@given(case=multicasts())
def test_source_headers_are_the_zoned_tree_encoded(
    name: str, case: tuple[Topology, Coord, list[Coord]]
) -> None:
    """The source's fast path (node ids, `zoned_ids`) sends what the coordinate tree encodes."""
    topo, source, dests = case
    assume(name != "vh" or topo.is_torus)
    tree = zoned_tree(topo, source, dests, MESH_RULES[name])
    assert RULES[name].prepare(topo, source, dests, {}) == encode_tree(topo, source, tree, dests)


@settings(max_examples=300, deadline=None)
@given(
    w=st.integers(2, 9),
    h=st.integers(2, 9),
    data=st.data(),
)
def test_vh_mesh_one_pass_forward_equals_the_plain_reading(w: int, h: int, data: st.DataObject) -> None:
    """The one-pass mesh VH forward (a wire header: ``[x, y]`` lists) gives what the plain reading
    does (coordinates, split, branch times, order), for headers in order or not, with the node
    itself listed or not, duplicates included."""
    topo = Topology.parse(f"mesh:{w}x{h}")
    here = data.draw(st.tuples(st.integers(0, w - 1), st.integers(0, h - 1)))
    coords = st.lists(st.tuples(st.integers(0, w - 1), st.integers(0, h - 1)), max_size=3 * w * h)
    dests = data.draw(coords)
    if data.draw(st.booleans()):
        dests = sorted(dests)
    header = [[x, y] for x, y in dests]
    fast = malani._vh_mesh_forward(topo, here, header)
    assert fast is not None
    plain = malani.Forward(here in dests, malani.vh_mesh_sends(here, dests), False)
    assert fast == plain


@pytest.mark.parametrize(
    "header",
    [[(1, 1)], [[1, 1, 1]], [[1, True]], [[9, 1]], [[-1, 0]], "ab", [[1.0, 2]], ((1, 1),)],
)
def test_vh_mesh_one_pass_forward_leaves_anything_else_to_the_strict_reading(header: object) -> None:
    """Tuples, wrong lengths, bools, floats, coordinates outside the mesh, a non-list: not the
    fast path's (None); the strict reading then accepts the tuples and names the rest."""
    topo = Topology.parse("mesh:4x4")
    assert malani._vh_mesh_forward(topo, (0, 0), header) is None
