"""A tiny centralised walker for routing rules (tests only): follows every packet hop by hop.

It mirrors the engine's bookkeeping: a packet leaves the source with hops = 1 and start-ups = 1;
a delivery records the packet's hops and start-ups; the sends of a ``forward`` with
``startup=True`` carry one more start-up. Headers cross a msgpack round trip, as on the wire.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from node.routing.base import Algorithm
from node.topology import Coord, Topology

__all__ = ["Delivery", "Walk", "walk", "wire"]


@dataclass(frozen=True)
class Delivery:
    """One delivery: where, after how many hops, through how many start-ups."""

    node: Coord
    hops: int
    startups: int


@dataclass
class Walk:
    """Everything a multicast did: deliveries, channel traversals, and every worm's trail."""

    deliveries: list[Delivery] = field(default_factory=list)
    channels: int = 0
    links: Counter[tuple[Coord, Coord]] = field(default_factory=Counter)
    trails: list[list[Coord]] = field(default_factory=list)
    first_sends: list[tuple[str, Any]] = field(default_factory=list)

    def delivered(self) -> Counter[Coord]:
        """How many times each node delivered."""
        return Counter(d.node for d in self.deliveries)

    def by_node(self) -> dict[Coord, Delivery]:
        """The (single) delivery at each node."""
        return {d.node: d for d in self.deliveries}


def wire(header: Any) -> Any:
    """The header as a neighbour decodes it (tuples become lists)."""
    return msgpack.unpackb(msgpack.packb(header))


def walk(
    algorithm: Algorithm,
    topology: Topology,
    source: Coord,
    destinations: Sequence[Coord],
    params: Mapping[str, Any] | None = None,
    hop_limit: int | None = None,
) -> Walk:
    """Run ``prepare`` at the source and ``forward`` at every hop until no packet is left."""
    limit = hop_limit if hop_limit is not None else 4 * topology.size + 16
    out = Walk()
    sends = algorithm.prepare(topology, source, list(destinations), params or {})
    out.first_sends = list(sends)
    # a packet: (sender, port, header, hops, startups, trail so far)
    stack: list[tuple[Coord, str, Any, int, int, list[Coord]]] = [
        (source, port, wire(h), 1, 1, [source]) for port, h in reversed(sends)
    ]
    while stack:
        here, port, header, hops, startups, trail = stack.pop()
        assert hops <= limit, f"hop limit exceeded on {trail}"
        nxt = topology.neighbour(here, port)
        assert nxt is not None, f"{here} sent on {port}, which leads nowhere"
        out.channels += 1
        out.links[(here, nxt)] += 1
        trail = [*trail, nxt]
        fwd = algorithm.forward(topology, nxt, header)
        if fwd.deliver:
            out.deliveries.append(Delivery(nxt, hops, startups))
        if not fwd.sends:
            out.trails.append(trail)
        st = startups + (1 if fwd.startup else 0)
        for p, h in reversed(fwd.sends):
            stack.append((nxt, p, wire(h), hops + 1, st, trail))
    return out
