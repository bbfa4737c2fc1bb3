"""Test helpers for routing rules: a tiny centralised walker, hypothesis cases, shared checks.

The walker follows every packet hop by hop.
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
from hypothesis import strategies as st

from node.routing.base import Algorithm
from node.routing.grouping import box
from node.routing.hamiltonian import lmn_route, path_nodes
from node.routing.paths import dp_split
from node.routing.twolevel import with_leaders
from node.topology import Coord, Topology

__all__ = ["Delivery", "Walk", "cases", "check_two_level", "meshes", "tori", "walk", "wire"]


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
        sts = fwd.startups_of(startups)
        for (p, h), su in reversed(list(zip(fwd.sends, sts, strict=True))):
            stack.append((nxt, p, wire(h), hops + 1, su, trail))
    return out


# -- hypothesis cases ---------------------------------------------------------------------------

meshes = st.builds(Topology, st.just("mesh"), st.integers(2, 12), st.integers(2, 12))
tori = st.builds(Topology, st.just("torus"), st.integers(3, 12), st.integers(3, 12))


@st.composite
def cases(
    draw: st.DrawFn, topologies: st.SearchStrategy[Topology] = meshes
) -> tuple[Topology, Coord, list[Coord]]:
    """A topology, a source and a destination set (distinct, source excluded, maybe empty)."""
    t = draw(topologies)
    nodes = list(t.nodes())
    source = draw(st.sampled_from(nodes))
    others = [n for n in nodes if n != source]
    return t, source, draw(st.lists(st.sampled_from(others), unique=True, max_size=min(len(others), 40)))


# -- two-level checks ---------------------------------------------------------------------------


def _disjoint_boxes(groups: Sequence[Sequence[Coord]]) -> bool:
    """Are the groups' bounding sub-meshes pairwise disjoint?"""
    boxes = [box(g) for g in groups]
    return not any(
        a[0] <= b[1] and b[0] <= a[1] and a[2] <= b[3] and b[2] <= a[3]
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )


def check_two_level(
    t: Topology, source: Coord, dests: list[Coord], groups: list[list[Coord]], w: Walk
) -> None:
    """Shared checks of a two-level multicast: partition, disjoint sub-meshes, deliveries, start-ups."""
    assert sorted(c for g in groups for c in g) == sorted(dests)
    assert all(groups)
    assert _disjoint_boxes(groups)
    assert w.delivered() == Counter(dests)
    leaders = with_leaders(t, source, groups)
    by_node = w.by_node()
    for lead, members in leaders.items():
        group = [lead, *members]
        assert lead == min(group, key=lambda m: (t.distance(source, m), m))
        assert by_node[lead].startups == 1
        # a group's paths stay inside its sub-mesh (R takes shortest paths on the mesh)
        b = box(group)
        for ds in dp_split(t, lead, members):
            for x, y in path_nodes(t, lead, ds, lmn_route):
                assert b[0] <= x <= b[1] and b[2] <= y <= b[3]
        for m in members:
            assert by_node[m].startups == 2
    # a leader last on its level-1 path starts its group with the exact count
    for ds in dp_split(t, source, list(leaders)):
        if ds:
            assert all(by_node[m].startups == 2 for m in leaders[ds[-1]])
