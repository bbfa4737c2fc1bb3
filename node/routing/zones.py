"""Quadrants (mesh) and zones (torus) around a source, each a mirrored sub-mesh.

Seed 000 runs its mesh rules from a corner source. For any other source the network is cut
into four disjoint sub-meshes, each mirrored so that its origin is its local (0, 0), and the
mesh rule runs in each (ALGORITHMS.md, "Tree-based"). On the torus the same scheme uses the
four zones of offsets x' <= floor((M-1)/2), y' <= floor((N-1)/2) reached over wrap-around links.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from node.routing.tree import Children, id_children
from node.topology import Coord, Topology

__all__ = ["Frame", "MeshRule", "Zone", "zone_of", "zoned_ids", "zoned_tree", "zones"]

MeshRule = Callable[[int, int, Sequence[Coord]], Iterable[tuple[Coord, Coord]]]
"""(width, height, local destinations) -> tree edges (parent, child) rooted at local (0, 0)."""


@dataclass(frozen=True, slots=True)
class Frame:
    """A mirrored sub-mesh: local (u, v) is global (ox + sx*u, oy + sy*v), wrapped on a torus."""

    origin: Coord
    sx: int
    sy: int
    width: int
    height: int

    def to_global(self, topology: Topology, local: Coord) -> Coord:
        x = self.origin[0] + self.sx * local[0]
        y = self.origin[1] + self.sy * local[1]
        return (x % topology.cols, y % topology.rows)

    def to_local(self, topology: Topology, c: Coord) -> Coord | None:
        u = ((c[0] - self.origin[0]) * self.sx) % topology.cols
        v = ((c[1] - self.origin[1]) * self.sy) % topology.rows
        if u < self.width and v < self.height:
            return (u, v)
        return None


@dataclass(frozen=True, slots=True)
class Zone:
    """One of the four zones: its frame and the node its origin is entered from (None: source)."""

    number: int
    frame: Frame
    entry: Coord | None


def zones(topology: Topology, source: Coord) -> list[Zone]:
    """The four zones (quadrants on a mesh) around ``source``; empty ones have width or height 0."""
    xs, ys = source
    m, n = topology.cols, topology.rows
    if topology.is_torus:
        w1, h1 = (m - 1) // 2 + 1, (n - 1) // 2 + 1
        w2, h3 = m - w1, n - h1
    else:
        w1, h1, w2, h3 = m - xs, n - ys, xs, ys
    o2 = ((xs - 1) % m, ys)
    o3 = (xs, (ys - 1) % n)
    o4 = ((xs - 1) % m, (ys - 1) % n)
    return [
        Zone(1, Frame(source, 1, 1, w1, h1), None),
        Zone(2, Frame(o2, -1, 1, w2, h1), source),
        Zone(3, Frame(o3, 1, -1, w1, h3), source),
        Zone(4, Frame(o4, -1, -1, w2, h3), o2),
    ]


def zone_of(topology: Topology, source: Coord, c: Coord) -> tuple[Zone, Coord]:
    for z in zones(topology, source):
        local = z.frame.to_local(topology, c)
        if local is not None:
            return z, local
    raise AssertionError(f"{c} lies in no zone of {source}")  # the zones partition the network


def zoned_tree(topology: Topology, source: Coord, destinations: Sequence[Coord], rule: MeshRule) -> Children:
    """Run ``rule`` in each zone with destinations and join the zone trees at their origins."""
    rows = topology.rows
    return {
        divmod(p, rows): [divmod(c, rows) for c in kids]
        for p, kids in enumerate(zoned_ids(topology, source, destinations, rule))
        if kids is not None
    }


def zoned_ids(
    topology: Topology, source: Coord, destinations: Sequence[Coord], rule: MeshRule
) -> list[list[int] | None]:
    """:func:`zoned_tree` as children lists by node id (``x * rows + y``; None: no children),
    what :func:`node.routing.tree.encode_ids` takes: each multicast's source runs this."""
    zs = zones(topology, source)
    cols, rows = topology.cols, topology.rows
    local: dict[int, list[Coord]] = {z.number: [] for z in zs}
    frames = [(z.number, z.frame.origin[0], z.frame.origin[1], z.frame.sx, z.frame.sy, z.frame.width,
               z.frame.height) for z in zs]  # fmt: skip
    for d in destinations:  # Frame.to_local, inlined: every destination of every multicast
        for number, ox, oy, sx, sy, w, h in frames:
            u = ((d[0] - ox) * sx) % cols
            v = ((d[1] - oy) * sy) % rows
            if u < w and v < h:
                local[number].append((u, v))
                break
    edges: list[tuple[int, int]] = []
    needed = {1: bool(local[1]), 2: bool(local[2] or local[4]), 3: bool(local[3]), 4: bool(local[4])}
    for z in zs:
        if not needed[z.number]:
            continue
        f = z.frame
        ox, oy, sx, sy = f.origin[0], f.origin[1], f.sx, f.sy
        if z.entry is not None:
            edges.append((z.entry[0] * rows + z.entry[1], ox * rows + oy))
        dests = [d for d in local[z.number] if d != (0, 0)]
        if dests:
            # Frame.to_global as an id, by table: a local column's x * rows, a local row's y
            gx = [((ox + sx * u) % cols) * rows for u in range(f.width)]
            gy = [(oy + sy * v) % rows for v in range(f.height)]
            edges += [(gx[a[0]] + gy[a[1]], gx[b[0]] + gy[b[1]]) for a, b in rule(f.width, f.height, dests)]
    return id_children(topology.size, edges, lambda i: divmod(i, rows))
