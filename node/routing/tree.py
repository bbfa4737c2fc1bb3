"""Explicit trees carried in headers, and the optimal one-port send order.

A tree algorithm may compute its whole tree at the source and let each branch carry its
subtree: the header of a packet is ``[deliver, [[port, subheader], ...]]``. A node then just
obeys it. Sends are ordered by non-increasing subtree completion time t(c), where t(leaf)=0
and t(v) = max_i(i + 1 + t(c_i)) (Slater–Cockayne–Hedetniemi): optimal under one-port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from node.routing.base import Forward, Header, HeaderError, Send, check_port
from node.topology import Coord, Topology

__all__ = [
    "Children",
    "build_children",
    "completion_times",
    "encode_tree",
    "order_children",
    "tree_forward",
]

Children = dict[Coord, list[Coord]]


def build_children(edges: Iterable[tuple[Coord, Coord]]) -> Children:
    """Children lists from (parent, child) edges; each child must have one parent."""
    children: Children = {}
    seen: set[Coord] = set()
    for parent, child in edges:
        if child in seen:
            raise ValueError(f"node {child} has two parents: not a tree")
        seen.add(child)
        children.setdefault(parent, []).append(child)
    return children


def completion_times(root: Coord, children: Mapping[Coord, Sequence[Coord]]) -> dict[Coord, int]:
    """t(v) for every node of the tree under the optimal order (post-order, no recursion)."""
    t: dict[Coord, int] = {}
    stack: list[tuple[Coord, bool]] = [(root, False)]
    while stack:
        v, done = stack.pop()
        kids = children.get(v, ())
        if not done:
            stack.append((v, True))
            stack.extend((c, False) for c in kids)
            continue
        ts = sorted((t[c] for c in kids), reverse=True)
        t[v] = max((i + 1 + tc for i, tc in enumerate(ts)), default=0)
    return t


def order_children(
    root: Coord, children: Mapping[Coord, Sequence[Coord]]
) -> tuple[Children, dict[Coord, int]]:
    """Children sorted by non-increasing completion time (ties: smaller coordinate first)."""
    t = completion_times(root, children)
    ordered = {v: sorted(kids, key=lambda c: (-t[c], c)) for v, kids in children.items()}
    return ordered, t


def _port_to(topology: Topology, a: Coord, b: Coord) -> str:
    dx, dy = b[0] - a[0], b[1] - a[1]
    if topology.is_torus:  # wrap-around steps: offsets of ±(side - 1)
        dx = (dx + 1) % topology.cols - 1
        dy = (dy + 1) % topology.rows - 1
    port = {(1, 0): "+x", (-1, 0): "-x", (0, 1): "+y", (0, -1): "-y"}.get((dx, dy))
    if port is not None:
        return port
    raise ValueError(f"{a} and {b} are not neighbours in {topology.spec}")


def encode_tree(
    topology: Topology, root: Coord, children: Mapping[Coord, Sequence[Coord]], dests: Iterable[Coord]
) -> list[Send]:
    """The root's ordered sends, each header holding its branch's subtree."""
    ordered, _ = order_children(root, children)
    dset = set(dests)
    # Build headers bottom-up without recursion (trees can be hundreds deep).
    headers: dict[Coord, Header] = {}
    order: list[Coord] = []
    stack = [root]
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(ordered.get(v, ()))
    for v in reversed(order):
        kids = ordered.get(v, ())
        sends = [[_port_to(topology, v, c), headers.pop(c)] for c in kids]
        headers[v] = [1 if v in dset else 0, sends]
    return [(p, h) for p, h in headers[root][1]]


def tree_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey an explicit-tree header: deliver if marked, send each subtree on its port."""
    if not (isinstance(header, (list, tuple)) and len(header) == 2):
        raise HeaderError(f"tree header must be [deliver, branches], got {header!r:.80}")
    deliver, branches = header
    if deliver not in (0, 1) or type(deliver) not in (int, bool):
        raise HeaderError(f"tree header deliver flag must be 0 or 1, got {deliver!r}")
    if not isinstance(branches, (list, tuple)):
        raise HeaderError("tree header branches must be a list")
    sends: list[Send] = []
    used: set[str] = set()
    for b in branches:
        if not (isinstance(b, (list, tuple)) and len(b) == 2):
            raise HeaderError(f"tree branch must be [port, subtree], got {b!r:.80}")
        port = check_port(b[0])
        if port in used:
            raise HeaderError(f"tree header sends twice on port {port}")
        if topology.neighbour(here, port) is None:
            raise HeaderError(f"tree header sends on {port} from {here}, an edge of {topology.spec}")
        used.add(port)
        sends.append((port, b[1]))
    return Forward(bool(deliver), sends, False)
