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

__all__ = ["ALGORITHMS", "UNICASTS", "dor_next", "forward", "prepare"]

UNICASTS = frozenset({"unicast", "dor"})
"""The unicast rules: their worms are the unicast class of ``--vc-classes split``."""

Next = Callable[[Topology, Coord, Coord], str | None]


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


def _prepare_with(step: Next) -> Callable[[Topology, Coord, Sequence[Coord], Params], list[Send]]:
    def prepare(
        topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
    ) -> list[Send]:
        order = sorted(destinations, key=lambda d: (-topology.distance(source, d), d))
        sends: list[Send] = []
        for d in order:
            port = step(topology, source, d)
            assert port is not None  # the source is never a destination
            sends.append((port, [d[0], d[1]]))
        return sends

    return prepare


def _forward_with(step: Next) -> Callable[[Topology, Coord, Header], Forward]:
    def forward(topology: Topology, here: Coord, header: Header) -> Forward:
        dest = as_coord(header, topology, "unicast destination")
        port = step(topology, here, dest)
        if port is None:
            return Forward(True, [], False)
        if topology.neighbour(here, port) is None:  # pragma: no cover - the route stays inside
            raise HeaderError(f"no {port} link at {here}")
        return Forward(False, [(port, header)], False)

    return forward


prepare = _prepare_with(Topology.xy_next)  # the topology's XY route (+ at half a ring)
forward = _forward_with(Topology.xy_next)

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
        _prepare_with(dor_next),
        _forward_with(dor_next),
        summary="unicast with a torus's half-ring tie split by parity (+ from even, − from odd)",
        source="BookSim2's dim_order_torus (a random pick at the tie; balanced the same on average)",
    ),
)
