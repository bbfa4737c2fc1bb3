"""Two-level (leader-based) path multicast, shared by the grouping rules (seed 003) and QG (seed 004).

Level 1: the source sends DP paths (high and low, R-routed) through the group leaders; the
header carries, for each leader, the rest of its group. Level 2: a leader at the head of that
list delivers, pops it, routes the level-1 path on, and sends its group's DP paths as a new
start-up. Two header kinds (a table, not nested guesses)::

    {"leaders": [[[x, y], [[x, y], ...]], ...]}  level 1, leaders in path order (members may be [])
    [[x, y], ...]                                 a level-2 group path (as DP's)

Start-ups. A leader in the middle of a level-1 path sends both the level-1 continuation (no new
start-up) and its group's paths (a new one): it returns the continuation first and marks it
``carried`` in :class:`Forward`, so only the group paths count a new start-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from node.routing.base import Forward, Header, HeaderError, Send, as_coord, as_coords
from node.routing.hamiltonian import lmn_route, path_forward, path_hops
from node.routing.paths import dp_paths, dp_split, order_paths
from node.topology import PORTS, Coord, Topology

__all__ = [
    "leader_of",
    "two_level_forward",
    "two_level_prepare",
    "with_leaders",
]

_KEY = "leaders"


def leader_of(topology: Topology, source: Coord, members: Sequence[Coord]) -> Coord:
    """The member nearest the source (Manhattan; ties: smallest (x, y)) — seeds 003 and 004."""
    return min(members, key=lambda m: (topology.distance(source, m), m))


def with_leaders(
    topology: Topology, source: Coord, groups: Sequence[Sequence[Coord]]
) -> dict[Coord, list[Coord]]:
    """Each non-empty group keyed by its leader, the leader's other members sorted."""
    out: dict[Coord, list[Coord]] = {}
    for g in groups:
        if g:
            lead = leader_of(topology, source, g)
            out[lead] = sorted(m for m in g if m != lead)
    return out


def _group_finish(topology: Topology, leader: Coord, members: Sequence[Coord]) -> int:
    """Hops of the leader's longest level-2 path (0 for a lone leader)."""
    return max(
        (path_hops(topology, leader, ds, lmn_route) for ds in dp_split(topology, leader, members)), default=0
    )


def two_level_prepare(topology: Topology, source: Coord, groups: Sequence[Sequence[Coord]]) -> list[Send]:
    """The source's level-1 DP sends through the leaders; the path reaching its last group last goes first."""
    by_leader = with_leaders(topology, source, groups)
    sends: list[tuple[int, int, Send]] = []
    for leaders in dp_split(topology, source, list(by_leader)):
        if not leaders:
            continue
        port = lmn_route(topology, source, leaders[0])
        assert port is not None
        # completion estimate: hops to each leader plus its own group's longest path
        finish, prefix, here = 0, 0, source
        for lead in leaders:
            prefix += path_hops(topology, here, [lead], lmn_route)
            finish = max(finish, prefix + _group_finish(topology, lead, by_leader[lead]))
            here = lead
        header = {_KEY: [[[ld[0], ld[1]], [[m[0], m[1]] for m in by_leader[ld]]] for ld in leaders]}
        sends.append((finish, PORTS.index(port), (port, header)))
    return [s for _, _, s in sorted(sends, key=lambda e: (-e[0], e[1]))]


def _entries(topology: Topology, header: Mapping[object, object]) -> list[tuple[Coord, list[Coord]]]:
    """Read a level-1 header strictly: leaders with their members, no repeats."""
    raw = header.get(_KEY)
    if set(header) != {_KEY} or not isinstance(raw, list) or not raw:
        raise HeaderError(
            f"a leader header must be {{'{_KEY}': [[leader, members], ...]}} with at least one leader"
        )
    out: list[tuple[Coord, list[Coord]]] = []
    seen: set[Coord] = set()
    for e in raw:
        if not isinstance(e, list) or len(e) != 2:
            raise HeaderError(f"leader entry {e!r} is not a [leader, members] pair")
        lead = as_coord(e[0], topology, "leader")
        members = as_coords(e[1], topology, "group member list")
        for c in (lead, *members):
            if c in seen:
                raise HeaderError(f"node {c} appears twice in the leader header")
            seen.add(c)
        out.append((lead, members))
    return out


def _encode(entries: Sequence[tuple[Coord, Sequence[Coord]]]) -> dict[str, list[list[object]]]:
    """Level-1 entries back into header data."""
    return {_KEY: [[[ld[0], ld[1]], [[m[0], m[1]] for m in ms]] for ld, ms in entries]}


def two_level_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey any of the three header kinds (see the module docstring)."""
    if isinstance(header, list):
        return path_forward(topology, here, header, lmn_route, "group path destination list")
    if not isinstance(header, dict):
        raise HeaderError(
            f"expected a leader header (dict) or a group path (list), got {type(header).__name__}"
        )
    entries = _entries(topology, header)
    lead, members = entries[0]
    if lead != here:
        port = lmn_route(topology, here, lead)
        assert port is not None
        return Forward(False, [(port, _encode(entries))], False)
    rest = entries[1:]
    group = order_paths(topology, here, dp_paths(topology, here, members), lmn_route)
    if not rest:
        return Forward(True, group, bool(group))
    port = lmn_route(topology, here, rest[0][0])
    assert port is not None  # rest[0][0] != here: repeats were refused above
    # The level-1 worm flows on first (carried); the group's paths are a new start-up.
    return Forward(True, [(port, _encode(rest)), *group], bool(group), carried=1)
