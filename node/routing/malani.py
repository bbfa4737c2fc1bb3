"""Seed 000 (Malani) tree multicasts, store-and-forward: VH (and DIAG, DIST, PAIR, MIN).

VH on the mesh is a local rule: the header is the destination list of the branch; a node
delivers if it is listed, sends the destinations of other columns along x (split by
direction) and those of its own column along y. Its one-port order is the optimal one,
computed from the branch's own destination list. On the torus VH runs in each of the four
zones (node/routing/zones.py); the source computes that tree and the header carries it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from node.routing.base import Algorithm, Forward, Header, Params, Send, as_coords
from node.routing.tree import encode_tree, tree_forward
from node.routing.zones import zoned_tree
from node.topology import PORTS, Coord, Topology

__all__ = ["ALGORITHMS", "vh_edges", "vh_forward", "vh_prepare"]


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
    up: dict[int, int] = {}
    down: dict[int, int] = {}
    for d in dests:
        a = abs(d[0] - hx)
        dy = d[1] - hy
        up.setdefault(a, 0)
        down.setdefault(a, 0)
        if dy > 0:
            up[a] = max(up[a], dy)
        elif dy < 0:
            down[a] = max(down[a], -dy)
    t_node = 0
    nxt: int | None = None
    for a in sorted(up, reverse=True):
        kids = [_chain_time(v) for v in (up[a], down[a]) if v]
        if nxt is not None:
            kids.append(t_node + (nxt - a - 1))
        t_node = _best(kids)
        nxt = a
    assert nxt is not None
    return t_node + (nxt - 1)


def vh_mesh_sends(here: Coord, dests: Sequence[Coord]) -> list[Send]:
    groups = _vh_split(here, dests)
    times = {p: _branch_time(here, p, g) for p, g in groups.items()}
    ports = sorted(groups, key=lambda p: (-times[p], PORTS.index(p)))
    return [(p, [[d[0], d[1]] for d in sorted(groups[p])]) for p in ports]


def vh_edges(width: int, height: int, dests: Sequence[Coord]) -> list[tuple[Coord, Coord]]:
    """VH in a sub-mesh rooted at (0, 0): the union of XY paths, as tree edges."""
    seen: set[Coord] = set()
    edges: list[tuple[Coord, Coord]] = []
    for d in dests:
        prev = (0, 0)
        for x in range(1, d[0] + 1):
            cur = (x, 0)
            if cur not in seen:
                seen.add(cur)
                edges.append((prev, cur))
            prev = cur
        for y in range(1, d[1] + 1):
            cur = (d[0], y)
            if cur not in seen:
                seen.add(cur)
                edges.append((prev, cur))
            prev = cur
    return edges


def vh_prepare(topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params) -> list[Send]:
    if topology.is_torus:
        return encode_tree(topology, source, zoned_tree(topology, source, destinations, vh_edges), destinations)
    return vh_mesh_sends(source, destinations)


def vh_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    if topology.is_torus:
        return tree_forward(topology, here, header)
    dests = as_coords(header, topology, "VH destination list")
    return Forward(here in dests, vh_mesh_sends(here, dests), False)


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "vh",
        "malani",
        vh_prepare,
        vh_forward,
        summary="union of XY shortest paths (mesh: local rule; torus: four zones)",
        source="seed 000 §2.2.1",
    ),
)
