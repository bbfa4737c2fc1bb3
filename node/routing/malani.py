"""Seed 000 (Malani) tree multicasts, store-and-forward: VH, DIAG, DIST, PAIR and MIN.

VH on the mesh is a local rule: the header is the destination list of the branch; a node
delivers if it is listed, sends the destinations of other columns along x (split by
direction) and those of its own column along y. Its one-port order is the optimal one,
computed from the branch's own destination list. On the torus VH runs in each of the four
zones (node/routing/zones.py); the source computes that tree and the header carries it.

DIAG, DIST, PAIR and MIN are mesh rules ``(width, height, local destinations) -> edges``
rooted at local (0, 0). On the mesh they run in the four quadrants around the source and on
the torus in its four zones (:func:`node.routing.zones.zoned_tree`); the source computes the
whole tree and each packet's header carries its branch's subtree (:mod:`node.routing.tree`),
sent in the optimal one-port order.

Growing a tree by paths: every join is an XY path (x first) from a tree node to its target.
A node already in the tree keeps its parent and the walk goes on from it; for an XY path this
is the same as restarting the XY join from that node, so the union stays a tree (each node has
one parent). Where a join starts from the *nearest* tree node (DIST, MIN, PAIR's intermediate)
its path never meets the tree again, since every node after the start is nearer still.
"Nearest" is the Manhattan distance inside the sub-mesh; ties go to the smallest local (x, y).
A destination that some earlier path already covers is done: it is dropped from the set that
later choices (PAIR's A and B, MIN's minima, DIST's order) are made from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from node.routing.base import Algorithm, Forward, Header, Params, Send, as_coords
from node.routing.tree import encode_ids, tree_forward
from node.routing.zones import MeshRule, zoned_ids
from node.topology import PORTS, Coord, Topology

__all__ = [
    "ALGORITHMS",
    "diag_edges",
    "diag_prepare",
    "dist_edges",
    "dist_prepare",
    "min_edges",
    "min_prepare",
    "pair_construction",
    "pair_edges",
    "pair_prepare",
    "vh_edges",
    "vh_forward",
    "vh_prepare",
]

Edge = tuple[Coord, Coord]


def _chain_time(length: int) -> int:
    """Completion time of a straight chain child whose farthest destination is ``length`` away."""
    return length - 1


def _best(child_times: Iterable[int]) -> int:
    ts = sorted(child_times, reverse=True)
    return max((i + 1 + t for i, t in enumerate(ts)), default=0)


def _vh_split(here: Coord, dests: Iterable[Coord]) -> dict[str, list[Coord]]:
    groups: dict[str, list[Coord]] = {}
    hx, hy = here
    for d in dests:
        if d[0] > hx:
            p = "+x"
        elif d[0] < hx:
            p = "-x"
        elif d[1] > hy:
            p = "+y"
        elif d[1] < hy:
            p = "-y"
        else:
            continue
        groups.setdefault(p, []).append(d)
    return groups


def _branch_time(here: Coord, port: str, dests: Sequence[Coord]) -> int:
    """t of the child across ``port`` whose subtree serves ``dests`` (all on that side)."""
    hx, hy = here
    if port in ("+y", "-y"):
        return _chain_time(max(abs(d[1] - hy) for d in dests))
    return _x_branch_time(hx, hy, dests)


def vh_mesh_sends(here: Coord, dests: Sequence[Coord]) -> list[Send]:
    groups = _vh_split(here, dests)
    times = {p: _branch_time(here, p, g) for p, g in groups.items()}
    ports = sorted(groups, key=lambda p: (-times[p], PORTS.index(p)))
    return [(p, [[d[0], d[1]] for d in sorted(groups[p])]) for p in ports]


def vh_edges(width: int, height: int, dests: Sequence[Coord]) -> list[tuple[Coord, Coord]]:
    """VH in a sub-mesh rooted at (0, 0): the union of XY paths, as tree edges."""
    seen = bytearray(width * height)  # index x * height + y
    edges: list[tuple[Coord, Coord]] = []
    for d in dests:
        dx, dy = d[0], d[1]
        prev = (0, 0)
        for x in range(1, dx + 1):
            cur = (x, 0)
            if not seen[x * height]:
                seen[x * height] = 1
                edges.append((prev, cur))
            prev = cur
        for y in range(1, dy + 1):
            cur = (dx, y)
            if not seen[dx * height + y]:
                seen[dx * height + y] = 1
                edges.append((prev, cur))
            prev = cur
    return edges


def vh_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    if topology.is_torus:
        return _zoned_prepare(topology, source, destinations, vh_edges)
    return vh_mesh_sends(source, destinations)


def vh_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    if topology.is_torus:
        return tree_forward(topology, here, header)
    fast = _vh_mesh_forward(topology, here, header)
    if fast is not None:
        return fast
    dests = as_coords(header, topology, "VH destination list")
    return Forward(here in dests, vh_mesh_sends(here, dests), False)


def _vh_mesh_forward(topology: Topology, here: Coord, header: Header) -> Forward | None:
    """:func:`vh_forward` on the mesh in one pass, for a header as the wire gives it (a list of
    ``[x, y]`` lists inside the mesh); None for anything else, which the strict reading then
    takes (and names what is wrong).

    Every hop of a mesh VH multicast runs this, on a list as long as the branch's destinations
    (hundreds near the source): the split, the branch times and the order come out of one pass,
    with no tuple per destination, and a branch is sorted only if the header was not.
    """
    if type(header) is not list:
        return None
    hx, hy = here
    cols, rows = topology.cols, topology.rows
    px: list[Any] = []
    mx: list[Any] = []
    py: list[Any] = []
    my: list[Any] = []
    deliver = False
    in_order = True
    lx = ly = -1
    for d in header:
        if type(d) is not list or len(d) != 2:
            return None
        x, y = d
        if not (type(x) is int and type(y) is int and 0 <= x < cols and 0 <= y < rows):
            return None
        if x < lx or (x == lx and y < ly):
            in_order = False
        lx, ly = x, y
        if x > hx:
            px.append(d)
        elif x < hx:
            mx.append(d)
        elif y > hy:
            py.append(d)
        elif y < hy:
            my.append(d)
        else:
            deliver = True
    timed: list[tuple[int, int, list[Any]]] = []  # (-time, port index, destinations): the order
    if px:
        timed.append((-_x_branch_time(hx, hy, px), 0, px))
    if mx:
        timed.append((-_x_branch_time(hx, hy, mx), 1, mx))
    if py:
        timed.append((-(max([d[1] for d in py]) - hy - 1), 2, py))
    if my:
        timed.append((-(hy - min([d[1] for d in my]) - 1), 3, my))
    if len(timed) > 1:
        timed.sort()
    if in_order:
        return Forward(deliver, [(PORTS[i], ds) for _, i, ds in timed], False)
    return Forward(deliver, [(PORTS[i], sorted(ds)) for _, i, ds in timed], False)


def _x_branch_time(hx: int, hy: int, dests: Sequence[Any]) -> int:
    """:func:`_branch_time` of a ±x branch (``dests``: coordinates or ``[x, y]`` lists, all on that
    side): per column distance its chains up and down, then the columns from the farthest in."""
    up: dict[int, int] = {}
    down: dict[int, int] = {}
    for d in dests:
        a = d[0] - hx if d[0] > hx else hx - d[0]
        dy = d[1] - hy
        if a not in up:
            up[a] = down[a] = 0
        if dy > 0:
            if dy > up[a]:
                up[a] = dy
        elif dy < 0 and -dy > down[a]:
            down[a] = -dy
    t_node = 0
    nxt = 0
    for a in sorted(up, reverse=True):
        kids = [v - 1 for v in (up[a], down[a]) if v]  # _chain_time of the column's two chains
        if nxt:
            kids.append(t_node + (nxt - a - 1))
        t_node = _best(kids)
        nxt = a
    return t_node + (nxt - 1)


# -- growing a tree in a sub-mesh ------------------------------------------------------------


class _Tree:
    """A tree in a ``width`` × ``height`` sub-mesh rooted at (0, 0), grown by XY paths."""

    __slots__ = ("edges", "height", "mark", "width")

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.mark = bytearray(width * height)  # index x * height + y
        self.mark[0] = 1
        self.edges: list[Edge] = []

    def has(self, c: Coord) -> bool:
        return self.mark[c[0] * self.height + c[1]] == 1

    def grow(self, start: Coord, target: Coord) -> None:
        """Add the XY path (x first) from tree node ``start`` to ``target``.

        A node already in the tree keeps its parent and the walk continues from it (the same
        as restarting the XY join there), so every node has one parent.
        """
        x, y = start
        tx, ty = target
        h, mark, edges = self.height, self.mark, self.edges
        step = 1 if tx > x else -1
        while x != tx:
            i = (x + step) * h + y
            if not mark[i]:
                mark[i] = 1
                edges.append(((x, y), (x + step, y)))
            x += step
        step = 1 if ty > y else -1
        while y != ty:
            i = x * h + y + step
            if not mark[i]:
                mark[i] = 1
                edges.append(((x, y), (x, y + step)))
            y += step

    def nearest(self, target: Coord) -> Coord:
        """The tree node nearest ``target`` (Manhattan), ties smallest (x, y): ring search."""
        tx, ty = target
        w, h, mark = self.width, self.height, self.mark
        if mark[tx * h + ty]:
            return target
        for r in range(1, w + h):
            # x ascending, and for each x the lower y first: the first hit is the smallest (x, y).
            for x in range(max(0, tx - r), min(w - 1, tx + r) + 1):
                rest = r - abs(x - tx)
                y = ty - rest
                if y >= 0 and mark[x * h + y]:
                    return (x, y)
                y = ty + rest
                if rest and y < h and mark[x * h + y]:
                    return (x, y)
        raise AssertionError("the root (0, 0) is always in the tree")

    def nearest_below(self, target: Coord) -> Coord:
        """The nearest tree node on a shortest path from (0, 0) to ``target`` (x, y <= target's).

        Ties: smallest (x, y). The root is always a candidate.
        """
        tx, ty = target
        h, mark = self.height, self.mark
        for r in range(tx + ty + 1):
            for x in range(max(0, tx - r), tx + 1):
                y = ty - r + (tx - x)
                if y >= 0 and mark[x * h + y]:
                    return (x, y)
        raise AssertionError("the root (0, 0) is always in the tree")


class _Remaining:
    """Destinations not yet in the tree, by (x, y) and by (y, x), for PAIR's and MIN's minima."""

    __slots__ = ("by_x", "by_y", "ix", "iy", "tree")

    def __init__(self, tree: _Tree, dests: Iterable[Coord]) -> None:
        self.tree = tree
        self.by_x = sorted(set(dests))
        self.by_y = sorted(self.by_x, key=lambda d: (d[1], d[0]))
        self.ix = self.iy = 0

    def min_x(self) -> Coord | None:
        """The remaining destination with minimum x (ties minimum y), or None when all are in."""
        while self.ix < len(self.by_x) and self.tree.has(self.by_x[self.ix]):
            self.ix += 1
        return self.by_x[self.ix] if self.ix < len(self.by_x) else None

    def min_y(self) -> Coord | None:
        """The remaining destination with minimum y (ties minimum x), or None when all are in."""
        while self.iy < len(self.by_y) and self.tree.has(self.by_y[self.iy]):
            self.iy += 1
        return self.by_y[self.iy] if self.iy < len(self.by_y) else None


def _pair_step(tree: _Tree, a: Coord, b: Coord) -> None:
    """Join I = (x_A, y_B) from the nearest tree node on one of its shortest paths; hang A, B off I."""
    i = (a[0], b[1])
    tree.grow(tree.nearest_below(i), i)
    tree.grow(i, a)
    tree.grow(i, b)


# -- the four mesh rules -----------------------------------------------------------------------


def diag_edges(width: int, height: int, dests: Sequence[Coord]) -> list[Edge]:
    """DIAG (reconstruction: the thesis gives no construction) in a sub-mesh rooted at (0, 0).

    A trunk runs to the farthest destination (ties smallest (x, y)) by alternating unit steps
    x, y, x, y… (x first) while both offsets are non-zero, then straight. Every other
    destination leaves the trunk by one straight segment: upward from the trunk's last node in
    its column if it lies above the trunk, otherwise rightward from the trunk's last node in
    its row. All paths are monotone, hence shortest. The source computes the tree (per
    quadrant or zone) and the headers carry it.
    """
    tree = _Tree(width, height)
    ds = set(dests)
    if not ds:
        return tree.edges
    fx, fy = min(ds, key=lambda d: (-(d[0] + d[1]), d))
    top = [-1] * width  # the trunk's highest y in each column (-1: none)
    right = [-1] * height  # the trunk's largest x in each row
    x = y = 0
    top[0] = right[0] = 0
    while (x, y) != (fx, fy):
        # x first, then alternate (x == y before an x step); straight once one offset is done.
        nxt = (x + 1, y) if x < fx and (y == fy or x == y) else (x, y + 1)
        tree.grow((x, y), nxt)
        x, y = nxt
        top[x] = y
        right[y] = x
    up: dict[int, int] = {}  # column -> highest destination above the trunk
    across: dict[int, int] = {}  # row -> farthest destination right of the trunk
    for dx, dy in ds:
        if tree.has((dx, dy)):
            continue
        if top[dx] >= 0 and dy > top[dx]:
            up[dx] = max(up.get(dx, dy), dy)
        else:
            # Below the trunk or past its end: the trunk crossed this row left of dx.
            assert 0 <= right[dy] < dx
            across[dy] = max(across.get(dy, dx), dx)
    for cx, cy in sorted(up.items()):
        tree.grow((cx, top[cx]), (cx, cy))
    for ry, rx in sorted(across.items()):
        tree.grow((right[ry], ry), (rx, ry))
    return tree.edges


def dist_edges(width: int, height: int, dests: Sequence[Coord]) -> list[Edge]:
    """DIST in a sub-mesh rooted at (0, 0).

    Destinations in increasing distance from the origin (ties smallest (x, y)); each joins the
    tree by an XY path (x first) from the nearest tree node (ties smallest (x, y)). Paths from
    the origin need not be shortest. The source computes the tree and the headers carry it.
    """
    tree = _Tree(width, height)
    for d in sorted(set(dests), key=lambda d: (d[0] + d[1], d)):
        if not tree.has(d):
            tree.grow(tree.nearest(d), d)
    return tree.edges


def pair_edges(width: int, height: int, dests: Sequence[Coord]) -> list[Edge]:
    """PAIR in a sub-mesh rooted at (0, 0).

    Repeatedly A = remaining destination with minimum x (ties min y), B = the one with minimum
    y (ties min x); I = (x_A, y_B) joins by an XY path from the nearest tree node with
    x <= x_I and y <= y_I (ties smallest (x, y)); A and B hang off I by straight paths. Every
    step is +x or +y, so every destination is reached by a shortest path. The source computes
    the tree and the headers carry it.
    """
    return pair_construction(width, height, dests)[0]


def pair_construction(width: int, height: int, dests: Sequence[Coord]) -> tuple[list[Edge], list[Coord]]:
    """PAIR's tree edges (:func:`pair_edges`) and its intermediate nodes I, in the order it joins them."""
    tree = _Tree(width, height)
    rest = _Remaining(tree, dests)
    joined: list[Coord] = []
    while (a := rest.min_x()) is not None:
        b = rest.min_y()
        assert b is not None
        joined.append((a[0], b[1]))
        _pair_step(tree, a, b)
    return tree.edges, joined


def min_edges(width: int, height: int, dests: Sequence[Coord]) -> list[Edge]:
    """MIN in a sub-mesh rooted at (0, 0).

    The first pair as PAIR (I = (x_A, y_B) from the origin, then A and B off I); then
    alternately the remaining destination with minimum x (ties min y) and the one with minimum
    y (ties min x), each joining by an XY path from the nearest tree node (ties smallest (x, y)).
    Paths from the origin need not be shortest. The source computes the tree; headers carry it.
    """
    tree = _Tree(width, height)
    rest = _Remaining(tree, dests)
    a, b = rest.min_x(), rest.min_y()
    if a is None or b is None:
        return tree.edges
    _pair_step(tree, a, b)
    pick_x = True
    while (d := rest.min_x() if pick_x else rest.min_y()) is not None:
        tree.grow(tree.nearest(d), d)
        pick_x = not pick_x
    return tree.edges


# -- prepare: the source computes the zoned tree; headers carry it ----------------------------


def _zoned_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], rule: MeshRule
) -> list[Send]:
    rows = topology.rows
    kids = zoned_ids(topology, source, destinations, rule)
    marked = {d[0] * rows + d[1] for d in destinations}
    return encode_ids(topology, source[0] * rows + source[1], kids, marked)


def diag_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """DIAG (a reconstruction) tree in quadrants (mesh) or zones (torus), carried in headers."""
    return _zoned_prepare(topology, source, destinations, diag_edges)


def dist_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """DIST tree (quadrants on the mesh, zones on the torus), computed here, carried in headers."""
    return _zoned_prepare(topology, source, destinations, dist_edges)


def pair_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """PAIR tree (quadrants on the mesh, zones on the torus), computed here, carried in headers."""
    return _zoned_prepare(topology, source, destinations, pair_edges)


def min_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """MIN tree (quadrants on the mesh, zones on the torus), computed here, carried in headers."""
    return _zoned_prepare(topology, source, destinations, min_edges)


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "vh",
        "malani",
        vh_prepare,
        vh_forward,
        summary="union of XY shortest paths (mesh: local rule; torus: four zones)",
        source="seed 000 §2.2.1",
    ),
    Algorithm(
        "diag",
        "malani",
        diag_prepare,
        tree_forward,
        summary="diagonal trunk to the farthest destination, straight branches off it "
        "(reconstruction; source-computed tree in headers)",
        source="seed 000 §2.2.1",
    ),
    Algorithm(
        "dist",
        "malani",
        dist_prepare,
        tree_forward,
        summary="destinations by distance, each joined from the nearest tree node by XY "
        "(source-computed tree in headers)",
        source="seed 000 §2.2.2",
    ),
    Algorithm(
        "pair",
        "malani",
        pair_prepare,
        tree_forward,
        summary="min-x/min-y pairs through intermediates (x_A, y_B), shortest paths "
        "(source-computed tree in headers)",
        source="seed 000 §3.2",
    ),
    Algorithm(
        "min",
        "malani",
        min_prepare,
        tree_forward,
        summary="first PAIR pair, then alternate min-x/min-y joined from the nearest tree node "
        "(source-computed tree in headers)",
        source="seed 000 §3.3",
    ),
)
