"""Explicit-tree headers (node/routing/tree.py): one bytes record per subtree, read back exactly."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.routing.base import HeaderError
from node.routing.tree import Children, encode_tree, order_children, tree_forward, tree_lists
from node.topology import Coord, Topology

MESH = Topology.parse("mesh:6x6")
TORUS = Topology.parse("torus:5x5")


def test_a_record_reads_back_as_the_tree_it_encodes() -> None:
    line = {(0, y): [(0, y + 1)] for y in range(4)}
    ((port, rec),) = encode_tree(MESH, (0, 0), line, [(0, 2), (0, 4)])
    assert port == "+y" and type(rec) is bytes
    assert tree_lists(rec) == [0, [["+y", [1, [["+y", [0, [["+y", [1, []]]]]]]]]]]
    # head byte (deliver flag, branch count), then per branch its port index and 3-byte length
    assert rec[:5] == bytes((0x01, 2, 0, 0, len(rec) - 5))


def test_a_node_sends_each_branch_on_its_port_in_the_record_order() -> None:
    star = {(2, 2): [(3, 2), (2, 3), (1, 2)], (3, 2): [(4, 2)], (1, 2): [(1, 1)], (1, 1): [(1, 0)]}
    sends = encode_tree(MESH, (2, 1), {(2, 1): [(2, 2)], **star}, [(4, 2), (2, 3), (1, 0), (2, 2)])
    fwd = tree_forward(MESH, (2, 2), sends[0][1])
    # completion times: (1, 2) has 2 below in a chain, (3, 2) 1, (2, 3) 0
    assert fwd.deliver and [p for p, _ in fwd.sends] == ["-x", "+x", "+y"]
    assert [tree_lists(h) for _, h in fwd.sends][2] == [1, []]
    leaf = tree_forward(MESH, (2, 3), fwd.sends[2][1])
    assert (leaf.deliver, leaf.sends) == (True, [])


@pytest.mark.parametrize(
    ("header", "cause"),
    [
        (b"", "empty"),
        (bytes((0x05,)), "0-4 branches"),
        (bytes((0x41,)), "0-4 branches"),
        (bytes((0x01, 2, 0, 0)), "shorter than its 1 branch"),
        (bytes((0x01, 2, 0, 0, 2, 0x80)), "claims 2 bytes"),
        (bytes((0x01, 2, 0, 0, 0)), "claims 0 bytes"),
        (bytes((0x01, 2, 0, 0, 1, 0x80, 0x80)), "1 bytes after its branches"),
        (bytes((0x01, 9, 0, 0, 1, 0x80)), "port index 9, not 0-3"),
        (bytes((0x02, 2, 0, 0, 1, 2, 0, 0, 1, 0x80, 0x80)), "sends twice on port \\+y"),
        (bytes((0x01, 1, 0, 0, 1, 0x80)), "an edge of mesh:6x6"),
        ([2, []], "deliver flag"),
        ([0, 7], "branches must be a list"),
        ([0, [["zz", [1, []]]]], "unknown port"),
        ("0+y", "must be a tree record"),
    ],
)
def test_a_bad_header_is_a_header_error_naming_the_fault(header: Any, cause: str) -> None:
    with pytest.raises(HeaderError, match=cause):
        tree_forward(MESH, (0, 1), header)


@pytest.mark.parametrize(
    "rec",
    [b"", bytes((0x09,)), bytes((0x01, 9, 0, 0, 1, 0x80)), bytes((0x01, 2, 0, 0, 1, 0x05))],
    ids=["empty", "bad head", "bad port", "bad branch below"],
)
def test_reading_a_malformed_record_is_a_header_error(rec: bytes) -> None:
    with pytest.raises(HeaderError):
        tree_lists(rec)


def _plain_header(topo: Topology, v: Coord, kids: Children, dests: set[Coord]) -> list[Any]:
    """The readable form, ``[deliver, [[port, subheader], ...]]`` at every node, in the same order."""
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
def test_records_send_exactly_as_the_readable_form(
    case: tuple[Topology, Coord, Children, list[Coord]],
) -> None:
    topo, root, children, dests = case
    records = encode_tree(topo, root, children, dests)
    ordered, _ = order_children(root, children)
    plain = _plain_header(topo, root, ordered, set(dests))[1]
    assert [p for p, _ in records] == [p for p, _ in plain]
    assert [tree_lists(h) for _, h in records] == [h for _, h in plain]
    walked = _walk(topo, root, records)
    assert walked == _walk(topo, root, [(p, h) for p, h in plain])
    assert {n for n, (deliver, _) in walked.items() if deliver} == set(dests)
