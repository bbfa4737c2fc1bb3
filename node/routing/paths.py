"""Path-based wormhole multicast: dual-path (DP), multipath (MP) and column-path (CP).

DP and MP are Lin, McKinley & Ni's Hamiltonian-path algorithms (cited as [8]/[10] by seeds 003
and 004): destinations are split by snake label into a high-channel and a low-channel network
and every path is routed hop by hop by the routing function R (node/routing/hamiltonian.py), so
labels strictly increase along a high path and strictly decrease along a low one — deadlock-free
by construction. CP is seed 004's comparator [15], with dimension-ordered (XY) base routing.

Every path header is the ordered list of the destinations still to visit, ``[[x, y], ...]``;
each node runs :func:`node.routing.hamiltonian.path_forward`. The source sends its paths longest
first (the one-port priority: independent paths finish at max(l_i + w_i)).

DP and MP also run on the torus: R there looks at all four neighbours' labels, wrap-around
links included, which keeps every path strictly monotone in label (see hamiltonian.py). CP is
mesh-only: seed 004 defines it on the mesh and its "above / below the source" split has no
meaning on a ring.
"""

from __future__ import annotations

from collections.abc import Sequence

from node.routing.base import Algorithm, Forward, Header, Params, Send, check_destinations
from node.routing.hamiltonian import (
    Route,
    encode_path,
    lmn_route,
    path_forward,
    path_hops,
    snake_label,
    xy_route,
)
from node.topology import PORTS, Coord, Topology

__all__ = [
    "ALGORITHMS",
    "cp_forward",
    "cp_prepare",
    "cp_split",
    "dp_forward",
    "dp_prepare",
    "dp_split",
    "mp_forward",
    "mp_prepare",
    "mp_split",
    "order_paths",
]

Path = tuple[str, Coord, list[Coord]]
"""One path of a plan: the source's port, the first node (across that port), the destinations."""


def dp_split(topology: Topology, source: Coord, dests: Sequence[Coord]) -> tuple[list[Coord], list[Coord]]:
    """DP's two sets: D_H = {ℓ(d) > ℓ(s)} ascending and D_L = {ℓ(d) < ℓ(s)} descending."""
    ls = snake_label(topology, source)
    high = sorted((d for d in dests if snake_label(topology, d) > ls), key=lambda d: snake_label(topology, d))
    low = sorted((d for d in dests if snake_label(topology, d) < ls), key=lambda d: -snake_label(topology, d))
    return high, low


def _r_path(topology: Topology, source: Coord, dests: list[Coord], route: Route) -> Path:
    """A path whose first hop is the base routing's own choice toward the first destination."""
    port = route(topology, source, dests[0])
    assert port is not None
    first = topology.neighbour(source, port)
    assert first is not None
    return (port, first, dests)


def order_paths(topology: Topology, source: Coord, paths: Sequence[Path], route: Route) -> list[Send]:
    """The source's sends, longest path first (ties: canonical port order), as headers."""
    hops = [1 + path_hops(topology, first, ds, route) for _, first, ds in paths]
    order = sorted(range(len(paths)), key=lambda i: (-hops[i], PORTS.index(paths[i][0]), i))
    return [(paths[i][0], encode_path(paths[i][2])) for i in order]


def dp_paths(topology: Topology, source: Coord, dests: Sequence[Coord]) -> list[Path]:
    """DP: one R-routed path per non-empty network."""
    return [_r_path(topology, source, ds, lmn_route) for ds in dp_split(topology, source, dests) if ds]


def dp_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Dual-path: the high path and the low path, longest first."""
    dests = check_destinations(topology, source, destinations)
    return order_paths(topology, source, dp_paths(topology, source, dests), lmn_route)


def dp_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Deliver at the head, pop it, route on by R."""
    return path_forward(topology, here, header, lmn_route, "path destination list")


def mp_split(
    topology: Topology, source: Coord, dests: Sequence[Coord]
) -> list[tuple[str | None, list[Coord]]]:
    """MP's sets as (forced first port or None for R's own choice, destinations in DP order).

    Reconstruction (seed 004 §4.1.2 says only that D_u and D_l are each split in two and sent
    through the source's output ports): on an even source row D_H splits into x > x_s (first hop
    +x) and x ≤ x_s (first hop +y), D_L into x < x_s (−x) and x ≥ x_s (−y); an odd row mirrors the
    x-tests (D_H: x < x_s by −x, x ≥ x_s by +y; D_L: x > x_s by +x, x ≤ x_s by −y). When one side
    of a network is empty the other side is that network's whole set, sent as DP's R-routed path
    (no forced hop), as seed 004 eq. 11 (T_MP = T_DP) has it.
    """
    high, low = dp_split(topology, source, dests)
    xs = source[0]
    even = source[1] % 2 == 0

    def ahead(d: Coord) -> bool:
        """Is d on the side the source's row runs toward larger labels (a high path's row side)?"""
        return d[0] > xs if even else d[0] < xs

    def behind(d: Coord) -> bool:
        """Is d on the side the source's row runs toward smaller labels (a low path's row side)?"""
        return d[0] < xs if even else d[0] > xs

    row_up, row_down = ("+x", "-x") if even else ("-x", "+x")
    out: list[tuple[str | None, list[Coord]]] = []
    for ds, along, col, in_row in ((high, row_up, "+y", ahead), (low, row_down, "-y", behind)):
        side = [d for d in ds if in_row(d)]
        rest = [d for d in ds if not in_row(d)]
        if side and rest:
            out += [(along, side), (col, rest)]
        elif ds:
            out.append((None, ds))
    return out


def mp_paths(topology: Topology, source: Coord, dests: Sequence[Coord]) -> list[Path]:
    """MP: up to four paths, each R-routed after its forced first hop."""
    paths: list[Path] = []
    for port, ds in mp_split(topology, source, dests):
        if port is None:
            paths.append(_r_path(topology, source, ds, lmn_route))
            continue
        first = topology.neighbour(source, port)
        # A non-empty side implies the forced neighbour exists and lies on the right side of ℓ(s).
        assert first is not None
        paths.append((port, first, ds))
    return paths


def mp_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Multipath: up to four R-routed paths leaving by distinct ports, longest first."""
    dests = check_destinations(topology, source, destinations)
    return order_paths(topology, source, mp_paths(topology, source, dests), lmn_route)


def mp_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Same as DP's: MP differs only in how the source splits and starts its paths."""
    return path_forward(topology, here, header, lmn_route, "path destination list")


def cp_split(topology: Topology, source: Coord, dests: Sequence[Coord]) -> list[list[Coord]]:
    """CP's messages: per column one for y ≥ y_s and one for y < y_s, nearest-to-the-row first.

    Reconstruction of seed 004 §4.1.3 (after [15]): a destination in the source's row joins the
    "up" message of its column; column by column, up before down.
    """
    ys = source[1]
    cols: dict[int, tuple[list[Coord], list[Coord]]] = {}
    for d in dests:
        up, down = cols.setdefault(d[0], ([], []))
        (up if d[1] >= ys else down).append(d)
    out: list[list[Coord]] = []
    for c in sorted(cols):
        for ds in cols[c]:
            if ds:
                out.append(sorted(ds, key=lambda d: abs(d[1] - ys)))
    return out


def cp_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Column-path: at most two XY-routed messages per column, longest first."""
    dests = check_destinations(topology, source, destinations)
    paths = [_r_path(topology, source, ds, xy_route) for ds in cp_split(topology, source, dests)]
    return order_paths(topology, source, paths, xy_route)


def cp_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Deliver at the head, pop it, route on dimension-ordered (XY)."""
    return path_forward(topology, here, header, xy_route, "column-path destination list")


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "dp",
        "path",
        dp_prepare,
        dp_forward,
        summary="dual-path: high and low Hamiltonian paths routed by R",
        source="Lin–McKinley–Ni, via seeds 003 §2.2 and 004 §4.1.2",
    ),
    Algorithm(
        "mp",
        "path",
        mp_prepare,
        mp_forward,
        summary="multipath: DP's two networks each split in two by the source's ports (reconstruction)",
        source="Lin–McKinley–Ni, via seed 004 §4.1.2",
    ),
    Algorithm(
        "cp",
        "path",
        cp_prepare,
        cp_forward,
        kinds=("mesh",),
        summary="column-path: at most two XY-routed paths per column (reconstruction)",
        source="seed 004 §4.1.3 (after its ref. [15])",
    ),
)
