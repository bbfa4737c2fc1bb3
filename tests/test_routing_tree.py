"""Explicit-tree headers (node/routing/tree.py): chains fold into one port string, the sends stay the same."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.routing.base import HeaderError
from node.routing.tree import Children, encode_tree, order_children, tree_forward
from node.topology import Coord, Topology

MESH = Topology.parse("mesh:6x6")
TORUS = Topology.parse("torus:5x5")


def test_a_straight_branch_is_one_chain_link() -> None:
    line = {(0, y): [(0, y + 1)] for y in range(4)}
    assert encode_tree(MESH, (0, 0), line, [(0, 4)]) == [("+y", [0, "+y+y+y", [1, []]])]
    # a destination on the way ends the chain there: it must deliver
    assert encode_tree(MESH, (0, 0), line, [(0, 2), (0, 4)]) == [("+y", [0, "+y", [1, "+y+y", [1, []]]])]


def test_a_chain_link_sends_its_first_port_and_passes_the_rest() -> None:
    fwd = tree_forward(MESH, (0, 1), [0, "+y+y+x", [1, []]])
    assert (fwd.deliver, fwd.sends) == (False, [("+y", [0, "+y+x", [1, []]])])
    last = tree_forward(MESH, (1, 3), [1, "+x", [1, []]])
    assert (last.deliver, last.sends) == (True, [("+x", [1, []])])


@pytest.mark.parametrize(
    ("header", "cause"),
    [
        ([0, "+y+", [1, []]], "port names strung together"),
        ([0, "", [1, []]], "port names strung together"),
        ([0, 7, [1, []]], "port names strung together"),
        ([0, "zz+y", [1, []]], "unknown port"),
        ([2, "+y", [1, []]], "deliver flag"),
        ([0, "-x", [1, []]], "an edge of mesh:6x6"),
    ],
)
def test_a_bad_chain_link_is_a_header_error(header: Any, cause: str) -> None:
    with pytest.raises(HeaderError, match=cause):
        tree_forward(MESH, (0, 1), header)


def _plain_header(topo: Topology, v: Coord, kids: Children, dests: set[Coord]) -> list[Any]:
    """The unfolded form, ``[deliver, [[port, subheader], ...]]`` at every node, in the same order."""
    port = {topo.neighbour(v, p): p for p in topo.ports(v)}
    return [1 if v in dests else 0, [[port[c], _plain_header(topo, c, kids, dests)] for c in kids.get(v, [])]]


def _walk(topo: Topology, root: Coord, sends: list[tuple[str, Any]]) -> dict[Coord, tuple[bool, list[str]]]:
    """Every node the packets reach: whether it delivers and the ports it sends on, in order."""
    seen: dict[Coord, tuple[bool, list[str]]] = {}
    stack = [(root, sends)]
    while stack:
        node, out = stack.pop()
        for port, header in out:
            child = topo.neighbour(node, port)
            assert child is not None and child not in seen
            fwd = tree_forward(topo, child, msgpack.unpackb(msgpack.packb(header)))
            seen[child] = (fwd.deliver, [p for p, _ in fwd.sends])
            stack.append((child, fwd.sends))
    return seen


@st.composite
def _trees(draw: st.DrawFn) -> tuple[Topology, Coord, Children, list[Coord]]:
    """A random tree grown from a random root of a small mesh or torus, and destinations in it."""
    topo = draw(st.sampled_from([MESH, TORUS]))
    nodes = list(topo.nodes())
    root = draw(st.sampled_from(nodes))
    tree: list[Coord] = [root]
    children: Children = {}
    for _ in range(draw(st.integers(1, topo.size - 1))):
        v = draw(st.sampled_from(tree))
        free = [n for n in topo.neighbours(v).values() if n not in tree and n not in children.get(v, [])]
        if free and (c := draw(st.sampled_from(sorted(free)))) not in tree:
            children.setdefault(v, []).append(c)
            tree.append(c)
    dests = draw(st.lists(st.sampled_from(tree[1:]), min_size=1, unique=True)) if len(tree) > 1 else []
    return topo, root, children, dests


@given(_trees())
def test_folded_headers_send_exactly_as_unfolded_ones(
    case: tuple[Topology, Coord, Children, list[Coord]],
) -> None:
    topo, root, children, dests = case
    folded = encode_tree(topo, root, children, dests)
    ordered, _ = order_children(root, children)
    plain = _plain_header(topo, root, ordered, set(dests))[1]
    assert [p for p, _ in folded] == [p for p, _ in plain]
    walked = _walk(topo, root, folded)
    assert walked == _walk(topo, root, [(p, h) for p, h in plain])
    assert {n for n, (deliver, _) in walked.items() if deliver} == set(dests)
