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

from collections.abc import Callable, Iterable, Mapping, Sequence

from node.routing.base import Forward, Header, HeaderError, Send, check_port
from node.topology import PORTS, Coord, Topology

__all__ = [
    "Children",
    "build_children",
    "completion_times",
    "encode_ids",
    "encode_tree",
    "id_children",
    "order_children",
    "tree_forward",
]

Children = dict[Coord, list[Coord]]


def build_children(edges: Iterable[tuple[Coord, Coord]]) -> Children:
    """Children lists from (parent, child) edges; each child must have one parent.

    The coordinate front end of :func:`id_children`: nodes are numbered as they first appear.
    """
    ids: dict[Coord, int] = {}
    names: list[Coord] = []
    numbered: list[tuple[int, int]] = []
    for edge in edges:
        pair = []
        for v in edge:
            i = ids.get(v)
            if i is None:
                i = ids[v] = len(names)
                names.append(v)
            pair.append(i)
        numbered.append((pair[0], pair[1]))
    kids = id_children(len(names), numbered, names.__getitem__)
    return {names[v]: [names[c] for c in cs] for v, cs in enumerate(kids) if cs is not None}


def id_children(
    size: int, edges: Iterable[tuple[int, int]], name: Callable[[int], object] = str
) -> list[list[int] | None]:
    """Children lists by node id (0 .. ``size - 1``; None: no children) from (parent, child)
    edges, in edge order; each child must have one parent (else ValueError, naming the node
    by ``name``)."""
    children: list[list[int] | None] = [None] * size
    seen = bytearray(size)
    for parent, child in edges:
        if seen[child]:
            raise ValueError(f"node {name(child)} has two parents: not a tree")
        seen[child] = 1
        kids = children[parent]
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


def encode_tree(
    topology: Topology, root: Coord, children: Mapping[Coord, Sequence[Coord]], dests: Iterable[Coord]
) -> list[Send]:
    """The root's ordered sends, each header holding its branch's subtree (see :func:`encode_ids`)."""
    rows = topology.rows
    kids: list[list[int] | None] = [None] * topology.size
    for p, cs in children.items():
        kids[p[0] * rows + p[1]] = [c[0] * rows + c[1] for c in cs]
    return encode_ids(topology, root[0] * rows + root[1], kids, {d[0] * rows + d[1] for d in dests})


def encode_ids(
    topology: Topology, root: int, kids: Sequence[list[int] | None], marked: set[int]
) -> list[Send]:
    """:func:`encode_tree` on node ids (``x * rows + y``; ``kids[id]``: that node's children, or
    None): every multicast's source runs this.

    One bottom-up pass (no recursion: trees can be hundreds deep) computes each node's
    completion time, orders its children as :func:`order_children` does (non-increasing time,
    ties smaller coordinate: an id's order is its coordinate's) and builds its header. Ids and
    lists, not coordinate tuples and dicts: an int indexes a list at a fraction of the cost of
    hashing a tuple.
    """
    # Breadth-first order: reversed, every child comes before its parent.
    order: list[int] = [root]
    i = 0
    while i < len(order):
        ks = kids[order[i]]
        if ks:
            order.extend(ks)
        i += 1
    t = [0] * len(kids)
    headers: list[Header] = [None] * len(kids)
    for j in range(len(order) - 1, -1, -1):
        v = order[j]
        ks = kids[v]
        mark = 1 if v in marked else 0
        if not ks:
            headers[v] = [mark, []]
        elif len(ks) == 1:  # a chain link: [deliver, ports, tail], joined to a chain below
            c = ks[0]
            t[v] = t[c] + 1
            port = _id_port(topology, v, c)
            below = headers[c]
            if below[0] == 0 and len(below) == 3:
                headers[v] = [mark, port + below[1], below[2]]
            else:
                headers[v] = [mark, port, below]
        else:
            ordered = sorted(ks, key=lambda c: (-t[c], c))
            best = 0
            for n, c in enumerate(ordered):
                if n + 1 + t[c] > best:
                    best = n + 1 + t[c]
            t[v] = best
            headers[v] = [mark, [[_id_port(topology, v, c), headers[c]] for c in ordered]]
    top = headers[root]
    if len(top) == 3:
        return [_chain_send(top[1], top[2])]
    return [(p, h) for p, h in top[1]]


def _id_port(topology: Topology, a: int, b: int) -> str:
    """The port from node id ``a`` to its neighbour ``b`` (ids ``x * rows + y``)."""
    rows = topology.rows
    ax, ay = divmod(a, rows)
    bx, by = divmod(b, rows)
    dx, dy = bx - ax, by - ay
    if topology.is_torus:  # wrap-around steps: offsets of ±(side - 1)
        dx = (dx + 1) % topology.cols - 1
        dy = (dy + 1) % rows - 1
    if dy == 0:
        if dx == 1:
            return "+x"
        if dx == -1:
            return "-x"
    elif dx == 0:
        if dy == 1:
            return "+y"
        if dy == -1:
            return "-y"
    raise ValueError(f"{(ax, ay)} and {(bx, by)} are not neighbours in {topology.spec}")


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
