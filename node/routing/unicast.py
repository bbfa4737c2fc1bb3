"""Separate addressing: one unicast copy per destination, dimension-ordered (XY) routing.

Each copy is its own start-up. Under one-port the source sends the farthest destination first
(longest path first minimises max(l_i + w_i) for independent paths).

``unicast`` goes the + way at exactly half a torus ring (:meth:`Topology.offset`), as every rule
here does. ``dor`` is the same route with that tie split as BookSim2's ``dim_order_torus`` splits
it on average (it picks at random): + from an even coordinate in that dimension, − from an odd
one, so each link of a ring carries the same share of half-ring traffic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from node.routing.base import Algorithm, Forward, Header, HeaderError, Params, Send, as_coord
from node.topology import Coord, Topology

__all__ = ["ALGORITHMS", "UNICASTS", "dor_forward", "dor_next", "dor_prepare", "forward", "prepare"]

UNICASTS = frozenset({"unicast", "dor"})
"""The unicast rules: their worms are the unicast class of ``--vc-classes split``."""


def dor_next(topology: Topology, here: Coord, dest: Coord) -> str | None:
    """``dor``'s next port: XY, and at exactly half a torus ring + from an even coordinate, − from an odd."""
    dx, dy = topology.offset(here, dest)
    if dx:
        if dx > 0 and 2 * dx == topology.cols and topology.is_torus and here[0] % 2:
            return "-x"
        return "+x" if dx > 0 else "-x"
    if dy:
        if dy > 0 and 2 * dy == topology.rows and topology.is_torus and here[1] % 2:
            return "-y"
        return "+y" if dy > 0 else "-y"
    return None


def _sends(
    topology: Topology,
    source: Coord,
    destinations: Sequence[Coord],
    step: Callable[[Topology, Coord, Coord], str | None],
) -> list[Send]:
    """One copy per destination, farthest first (one-port: longest path first), on ``step``'s port."""
    sends: list[Send] = []
    for d in sorted(destinations, key=lambda d: (-topology.distance(source, d), d)):
        port = step(topology, source, d)
        assert port is not None  # the source is never a destination
        sends.append((port, [d[0], d[1]]))
    return sends


def prepare(topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params) -> list[Send]:
    return _sends(topology, source, destinations, Topology.xy_next)


def forward(topology: Topology, here: Coord, header: Header) -> Forward:
    return _hop(
        topology, here, header, topology.xy_next(here, as_coord(header, topology, "unicast destination"))
    )


def dor_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    return _sends(topology, source, destinations, dor_next)


def dor_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    return _hop(
        topology, here, header, dor_next(topology, here, as_coord(header, topology, "unicast destination"))
    )


def _hop(topology: Topology, here: Coord, header: Header, port: str | None) -> Forward:
    """Deliver here (no port left), or pass the header on along ``port``."""
    if port is None:
        return Forward(True, [], False)
    if topology.neighbour(here, port) is None:  # pragma: no cover - the route stays inside
        raise HeaderError(f"no {port} link at {here}")
    return Forward(False, [(port, header)], False)


ALGORITHMS = (
    Algorithm(
        "unicast",
        "unicast",
        prepare,
        forward,
        summary="separate addressing: one XY-routed copy per destination",
        source="baseline (seed 000 §2.1)",
    ),
    Algorithm(
        "dor",
        "unicast",
        dor_prepare,
        dor_forward,
        summary="unicast with a torus's half-ring tie split by parity (+ from even, − from odd)",
        source="BookSim2's dim_order_torus (a random pick at the tie; balanced the same on average)",
    ),
)
