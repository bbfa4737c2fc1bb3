"""Separate addressing: one unicast copy per destination, dimension-ordered (XY) routing.

Each copy is its own start-up. Under one-port the source sends the farthest destination first
(longest path first minimises max(l_i + w_i) for independent paths).
"""

from __future__ import annotations

from collections.abc import Sequence

from node.routing.base import Algorithm, Forward, Header, HeaderError, Params, Send, as_coord
from node.topology import Coord, Topology

__all__ = ["ALGORITHMS", "forward", "prepare"]


def prepare(topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params) -> list[Send]:
    order = sorted(destinations, key=lambda d: (-topology.distance(source, d), d))
    sends: list[Send] = []
    for d in order:
        port = topology.xy_next(source, d)
        assert port is not None  # the source is never a destination
        sends.append((port, [d[0], d[1]]))
    return sends


def forward(topology: Topology, here: Coord, header: Header) -> Forward:
    dest = as_coord(header, topology, "unicast destination")
    port = topology.xy_next(here, dest)
    if port is None:
        return Forward(True, [], False)
    if topology.neighbour(here, port) is None:  # pragma: no cover - xy_next stays inside
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
)
