"""Explicit trees carried in headers, and the optimal one-port send order.

A tree algorithm may compute its whole tree at the source and let each branch carry its
subtree: the header of a packet is ``[deliver, [[port, subheader], ...]]``. A node then just
obeys it. A node with one branch is written ``[deliver, ports, subheader]`` instead, where
``ports`` strings together the port of that branch and of each following node that delivers
nothing and has one branch itself (``"+y+y-x"``): each node on such a chain sends on the first
port and passes the rest on. The sends are the same; the header is a few msgpack objects per
chain instead of five per hop, and msgpack's cost is per object (benchmarks/header_cost.py).

Sends are ordered by non-increasing subtree completion time t(c), where t(leaf)=0 and
t(v) = max_i(i + 1 + t(c_i)) (Slater–Cockayne–Hedetniemi): optimal under one-port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from node.routing.base import Forward, Header, HeaderError, Send, check_port
from node.topology import PORTS, Coord, Topology

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
        kids = children.get(parent)
        if kids is None:
            children[parent] = [child]
        else:
            kids.append(child)
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


_STEP_PORT = {(1, 0): "+x", (-1, 0): "-x", (0, 1): "+y", (0, -1): "-y"}


def _port_to(topology: Topology, a: Coord, b: Coord) -> str:
    dx, dy = b[0] - a[0], b[1] - a[1]
    if topology.is_torus:  # wrap-around steps: offsets of ±(side - 1)
        dx = (dx + 1) % topology.cols - 1
        dy = (dy + 1) % topology.rows - 1
    port = _STEP_PORT.get((dx, dy))
    if port is not None:
        return port
    raise ValueError(f"{a} and {b} are not neighbours in {topology.spec}")


def encode_tree(
    topology: Topology, root: Coord, children: Mapping[Coord, Sequence[Coord]], dests: Iterable[Coord]
) -> list[Send]:
    """The root's ordered sends, each header holding its branch's subtree.

    One bottom-up pass (no recursion: trees can be hundreds deep) computes each node's
    completion time, orders its children as :func:`order_children` does (non-increasing time,
    ties smaller coordinate) and builds its header; every multicast's source runs this.
    """
    dset = set(dests)
    # Breadth-first order: reversed, every child comes before its parent.
    order: list[Coord] = [root]
    i = 0
    while i < len(order):
        kids = children.get(order[i])
        if kids:
            order.extend(kids)
        i += 1
    t: dict[Coord, int] = {}
    headers: dict[Coord, Header] = {}
    for v in reversed(order):
        kids = children.get(v)
        mark = 1 if v in dset else 0
        if not kids:
            t[v] = 0
            headers[v] = [mark, []]
        elif len(kids) == 1:  # a chain link: [deliver, ports, tail], joined to a chain below
            c = kids[0]
            t[v] = t[c] + 1
            port = _port_to(topology, v, c)
            below = headers.pop(c)
            if below[0] == 0 and len(below) == 3:
                headers[v] = [mark, port + below[1], below[2]]
            else:
                headers[v] = [mark, port, below]
        else:
            ordered = sorted(kids, key=lambda c: (-t[c], c))
            t[v] = max(j + 1 + t[c] for j, c in enumerate(ordered))
            headers[v] = [mark, [[_port_to(topology, v, c), headers.pop(c)] for c in ordered]]
    top = headers[root]
    if len(top) == 3:
        return [_chain_send(top[1], top[2])]
    return [(p, h) for p, h in top[1]]


def _chain_send(ports: str, tail: Header) -> Send:
    """The one send of a chain link: its first port, and the rest of the chain (or its tail)."""
    return (ports[:2], tail if len(ports) == 2 else [0, ports[2:], tail])


_PORT_SET = frozenset(PORTS)


def tree_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey an explicit-tree header: deliver if marked, send each subtree on its port.

    Every hop of every tree rule runs this, so a well-formed header (lists, as msgpack decodes
    them) takes a fast path of exact type checks; anything else gets the strict reading below,
    which accepts the same headers and says what is wrong with the others.
    """
    if type(header) is list and len(header) == 3:  # a chain link
        deliver, ports, tail = header
        if (
            type(deliver) is int
            and (deliver == 0 or deliver == 1)
            and type(ports) is str
            and len(ports) % 2 == 0
        ):
            port = ports[:2]
            if port in _PORT_SET and (topology.is_torus or topology.neighbour(here, port) is not None):
                return Forward(deliver == 1, [_chain_send(ports, tail)], False)
    elif type(header) is list and len(header) == 2:
        deliver, branches = header
        if type(deliver) is int and (deliver == 0 or deliver == 1) and type(branches) is list:
            sends: list[Send] = []
            mesh = not topology.is_torus
            for b in branches:
                if not (type(b) is list and len(b) == 2):
                    break
                port = b[0]
                if (
                    type(port) is not str
                    or port not in _PORT_SET
                    or (mesh and topology.neighbour(here, port) is None)
                ):
                    break
                sends.append((port, b[1]))
            else:
                if len(sends) < 2 or len({p for p, _ in sends}) == len(sends):
                    return Forward(deliver == 1, sends, False)
    return _tree_forward_strict(topology, here, header)


def _tree_forward_strict(topology: Topology, here: Coord, header: Header) -> Forward:
    """:func:`tree_forward` for any header: the same sends, or a HeaderError naming the fault."""
    if not (isinstance(header, (list, tuple)) and len(header) in (2, 3)):
        raise HeaderError(
            f"tree header must be [deliver, branches] or [deliver, ports, subtree], got {header!r:.80}"
        )
    deliver, branches = header[0], header[1]
    if deliver not in (0, 1) or type(deliver) not in (int, bool):
        raise HeaderError(f"tree header deliver flag must be 0 or 1, got {deliver!r}")
    if len(header) == 3:
        if not (isinstance(branches, str) and branches and len(branches) % 2 == 0):
            raise HeaderError(f"tree chain ports must be port names strung together, got {branches!r:.80}")
        port = check_port(branches[:2])
        if topology.neighbour(here, port) is None:
            raise HeaderError(f"tree header sends on {port} from {here}, an edge of {topology.spec}")
        return Forward(bool(deliver), [_chain_send(branches, header[2])], False)
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
