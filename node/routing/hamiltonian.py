"""The snake (Hamiltonian-path) labelling, the Lin–McKinley–Ni routing function R, and path forwarding.

Shared by the path-based wormhole rules (seeds 003 and 004): a path header is the ordered list of
the destinations still to visit; the node at its head delivers, pops it and routes on toward the
next head. This module registers no algorithm.

On a torus the labelling is the mesh's and R looks at all four neighbours' labels, wrap-around
links included. That stays sound: a node's snake successor and predecessor are always mesh
neighbours, so R's step toward a larger label is strictly increasing (toward a smaller one,
strictly decreasing) on the torus as on the mesh; every path terminates at its target and uses
one subnetwork (high or low channels) in label order, whose channel-dependency graph is acyclic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from node.routing.base import Forward, Header, HeaderError, PlanError, Send, as_coords
from node.topology import Coord, Topology

__all__ = [
    "Route",
    "encode_path",
    "first_send",
    "lmn_route",
    "path_forward",
    "path_hops",
    "path_nodes",
    "snake_label",
    "snake_node",
    "xy_route",
]

Route = Callable[[Topology, Coord, Coord], str | None]
"""A unicast routing function: the port from ``here`` toward ``target``, None when there."""


def snake_label(topology: Topology, c: Coord) -> int:
    """ℓ(x, y) = y·M + x on even rows, y·M + M−1−x on odd rows (M columns): the snake position."""
    x, y = c
    m = topology.cols
    return y * m + (x if y % 2 == 0 else m - 1 - x)


def snake_node(topology: Topology, label: int) -> Coord:
    """The node whose snake label is ``label`` (the inverse of :func:`snake_label`)."""
    if not 0 <= label < topology.size:
        raise ValueError(f"label {label} is outside 0..{topology.size - 1} on {topology.spec}")
    y, r = divmod(label, topology.cols)
    return (r if y % 2 == 0 else topology.cols - 1 - r, y)


def lmn_route(topology: Topology, u: Coord, v: Coord) -> str | None:
    """Lin–McKinley–Ni R: toward a larger label, the neighbour with the largest label ≤ ℓ(v);
    toward a smaller one, the neighbour with the smallest label ≥ ℓ(v); None when u = v."""
    lu, lv = snake_label(topology, u), snake_label(topology, v)
    if lu == lv:
        return None
    up = lu < lv
    fits = [
        (snake_label(topology, n), port)
        for port, n in topology.neighbours(u).items()
        if (snake_label(topology, n) <= lv if up else snake_label(topology, n) >= lv)
    ]
    # The snake neighbour ℓ(u)±1 always fits, so a step exists and is strictly monotone.
    return (max(fits) if up else min(fits))[1]


def xy_route(topology: Topology, u: Coord, v: Coord) -> str | None:
    """Dimension-ordered (x first) base routing, as R-compatible function (seed 004's CP)."""
    return topology.xy_next(u, v)


def path_nodes(topology: Topology, start: Coord, dests: Iterable[Coord], route: Route) -> list[Coord]:
    """Every node a path visits from ``start`` through ``dests`` in order (``start`` included)."""
    nodes = [start]
    for d in dests:
        while (port := route(topology, nodes[-1], d)) is not None:
            nxt = topology.neighbour(nodes[-1], port)
            assert nxt is not None
            nodes.append(nxt)
    return nodes


def path_hops(topology: Topology, start: Coord, dests: Iterable[Coord], route: Route) -> int:
    """Channels a path from ``start`` through ``dests`` crosses (for one-port send ordering)."""
    return len(path_nodes(topology, start, dests, route)) - 1


def encode_path(dests: Sequence[Coord]) -> list[list[int]]:
    """A destination list as header data: ``[[x, y], ...]``."""
    return [[d[0], d[1]] for d in dests]


def first_send(topology: Topology, source: Coord, dests: Sequence[Coord], route: Route) -> Send:
    """The source's send of a path through ``dests``: the port toward the head, the whole list."""
    port = route(topology, source, dests[0])
    if port is None:
        raise PlanError(f"the source {source} cannot be its own path destination")
    return (port, encode_path(dests))


def path_forward(topology: Topology, here: Coord, header: Header, route: Route, what: str) -> Forward:
    """Obey a path header: deliver and pop if ``here`` is its head, then route toward the next head."""
    dests = as_coords(header, topology, what)
    if not dests:
        raise HeaderError(f"empty {what}: a path packet must name its next destination")
    deliver = dests[0] == here
    rest = dests[1:] if deliver else dests
    if not rest:
        return Forward(deliver, [], False)
    if rest[0] == here:
        raise HeaderError(f"{what} names {here} twice in a row")
    port = route(topology, here, rest[0])
    assert port is not None
    return Forward(deliver, [(port, encode_path(rest))], False)
