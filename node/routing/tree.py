"""Explicit trees carried in headers, and the optimal one-port send order.

A tree algorithm may compute its whole tree at the source and let each branch carry its
subtree. The source writes a node's subtree as one ``bytes`` record (:func:`encode_ids`):

* a head byte: bit 7 the deliver flag, bits 0–2 the number of branches n (0–4);
* n branch entries in send order, 4 bytes each: the port's index in
  :data:`node.topology.PORTS`, then the length of that branch's record (3 bytes, big-endian);
* the n branch records, one after the other.

A node reads its head and entries and passes each branch on as a slice: its work and the
wire's are a few objects per hop whatever the subtree's size, where a subtree of nested lists
costs msgpack and the allocator an object per node below, at every hop
(benchmarks/header_cost.py). :func:`tree_forward` also accepts the readable form
``[deliver, [[port, subheader], ...]]`` (a subheader in either form), and :func:`tree_lists`
turns a record into it.

Sends are ordered by non-increasing subtree completion time t(c), where t(leaf)=0 and
t(v) = max_i(i + 1 + t(c_i)) (Slater–Cockayne–Hedetniemi): optimal under one-port.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

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
    "tree_lists",
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
    ties smaller coordinate: an id's order is its coordinate's) and builds its record. Ids and
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
    records: list[bytes] = [b""] * len(kids)
    rows = topology.rows
    leaf_plain, leaf_marked = _LEAF[0], _LEAF[0x80]
    for j in range(len(order) - 1, -1, -1):
        v = order[j]
        ks = kids[v]
        mark = 0x80 if v in marked else 0
        if not ks:
            records[v] = leaf_marked if mark else leaf_plain
            continue
        if v == root:  # the source sends the branches; its own record is never written
            ordered = sorted(ks, key=lambda c: (-t[c], c)) if len(ks) > 1 else ks
            if len(ordered) > 4:
                raise ValueError(
                    f"node {divmod(v, rows)} has {len(ordered)} children: not a tree of a 2D network"
                )
            return [(_id_port(topology, v, c), records[c]) for c in ordered]
        if len(ks) == 1:  # a path's inner node, most of a tree's: its one branch, written at once
            c = ks[0]
            t[v] = t[c] + 1
            rec = records[c]
            n = len(rec)
            if n > _MAX_RECORD:
                raise ValueError(f"a subtree record of {n} bytes exceeds the tree header's {_MAX_RECORD}")
            # the port by the ids' difference (a torus's sides are 3 or more, so +1 is never -1);
            # _id_port for the rest: wrap-arounds, and what is not a neighbour
            d = c - v
            if d == rows:
                index = 0
            elif d == -rows:
                index = 1
            elif d == 1 and c % rows:
                index = 2
            elif d == -1 and v % rows:
                index = 3
            else:
                index = _PORT_INDEX[_id_port(topology, v, c)]
            records[v] = bytes((mark | 1, index, n >> 16, (n >> 8) & 0xFF, n & 0xFF)) + rec
            continue
        ordered = sorted(ks, key=lambda c: (-t[c], c))
        best = 0
        for n, c in enumerate(ordered):
            if n + 1 + t[c] > best:
                best = n + 1 + t[c]
        t[v] = best
        if len(ordered) > 4:
            raise ValueError(
                f"node {divmod(v, rows)} has {len(ordered)} children: not a tree of a 2D network"
            )
        head = [mark | len(ordered)]
        for c in ordered:
            n = len(records[c])
            if n > _MAX_RECORD:
                raise ValueError(f"a subtree record of {n} bytes exceeds the tree header's {_MAX_RECORD}")
            head += (_PORT_INDEX[_id_port(topology, v, c)], n >> 16, (n >> 8) & 0xFF, n & 0xFF)
        records[v] = bytes(head) + b"".join([records[c] for c in ordered])
    return []


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


_PORT_INDEX = {p: i for i, p in enumerate(PORTS)}
_LEAF = {0: b"\x00", 0x80: b"\x80"}
_MAX_RECORD = (1 << 24) - 1
"""A branch record's length has 3 bytes: 16 MiB, some 10^6 nodes below one branch."""


def tree_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey an explicit-tree header: deliver if marked, send each subtree on its port.

    Every hop of every tree rule runs this, so a well-formed record takes a fast path of
    exact checks; anything else gets the strict reading below, which accepts the same
    headers (and the readable list form) and says what is wrong with the others.
    """
    if type(header) is bytes and header:
        head = header[0]
        n = head & 0x07
        size = len(header)
        if head & 0x78 == 0 and n <= 4 and size >= 1 + 4 * n:
            mesh = topology.kind != "torus"  # is_torus, without its call
            sends: list[Send] = []
            used = 0
            off = 1 + 4 * n
            for i in range(n):
                e = 1 + 4 * i
                index = header[e]
                if index > 3 or used & (1 << index):
                    break
                used |= 1 << index
                port = PORTS[index]
                if mesh and not (  # topology.neighbour(here, port) is not None, inline: +x, -x, +y, -y
                    here[0] + 1 < topology.cols if index == 0
                    else here[0] > 0 if index == 1
                    else here[1] + 1 < topology.rows if index == 2
                    else here[1] > 0
                ):  # fmt: skip
                    break
                end = off + ((header[e + 1] << 16) | (header[e + 2] << 8) | header[e + 3])
                if end > size or end == off:
                    break
                sends.append((port, header[off:end]))
                off = end
            else:
                if off == size:
                    return Forward(head >= 0x80, sends, False)
    return _tree_forward_strict(topology, here, header)


def tree_lists(header: Header) -> Header:
    """A record as the readable form ``[deliver, [[port, subheader], ...]]``, all the way down
    (anything else as it is); for reading and for tests, not for the wire. A malformed record
    is a HeaderError naming the fault."""
    if type(header) is not bytes:
        return header
    out: list[Any] = [0, []]
    stack: list[tuple[bytes, list[Any]]] = [(header, out)]
    while stack:
        rec, into = stack.pop()
        deliver, branches = _record_branches(rec)
        into[0] = deliver
        for port, sub_rec in branches:
            sub: list[Any] = [0, []]
            into[1].append([port, sub])
            stack.append((sub_rec, sub))
    return out


def _tree_forward_strict(topology: Topology, here: Coord, header: Header) -> Forward:
    """:func:`tree_forward` for any header: the same sends, or a HeaderError naming the fault."""
    # Any, not the record's types: the compiled build checks a variable's declared type on
    # every assignment, and a list-form header's parts are lists
    deliver: Any
    branches: Any
    if isinstance(header, bytes):
        deliver, branches = _record_branches(header)
    elif isinstance(header, (list, tuple)) and len(header) == 2:
        deliver, branches = header[0], header[1]
        if deliver not in (0, 1) or type(deliver) not in (int, bool):
            raise HeaderError(f"tree header deliver flag must be 0 or 1, got {deliver!r}")
        if not isinstance(branches, (list, tuple)):
            raise HeaderError("tree header branches must be a list")
    else:
        raise HeaderError(
            f"tree header must be a tree record (bytes) or [deliver, branches], got {header!r:.80}"
        )
    sends: list[Send] = []
    used: set[str] = set()
    b: Any
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


def _record_branches(rec: bytes) -> tuple[int, list[tuple[str, bytes]]]:
    """A record's deliver flag and (port, branch record) pairs, or a HeaderError naming the fault."""
    if not rec:
        raise HeaderError("tree record is empty")
    head = rec[0]
    n = head & 0x07
    if head & 0x78 or n > 4:
        raise HeaderError(f"tree record head byte {head:#04x} is not a deliver flag and 0-4 branches")
    off = 1 + 4 * n
    if len(rec) < off:
        raise HeaderError(f"tree record of {len(rec)} bytes is shorter than its {n} branch entries")
    branches: list[tuple[str, bytes]] = []
    for i in range(n):
        e = 1 + 4 * i
        index = rec[e]
        end = off + int.from_bytes(rec[e + 1 : e + 4], "big")
        if end == off or end > len(rec):
            raise HeaderError(
                f"tree record branch {i + 1} of {n} claims {end - off} bytes, not in the record"
            )
        if index >= len(PORTS):
            raise HeaderError(f"tree record branch {i + 1} of {n} has port index {index}, not 0-3")
        branches.append((PORTS[index], rec[off:end]))
        off = end
    if off != len(rec):
        raise HeaderError(f"tree record has {len(rec) - off} bytes after its branches")
    return 1 if head & 0x80 else 0, branches
