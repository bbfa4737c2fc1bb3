"""The routing-rule interface shared by every algorithm family (sans-IO: no trio, no sockets).

A rule is two pure functions::

    prepare(topology, source, destinations, params) -> [(port, header), ...]
    forward(topology, here, header) -> Forward(deliver, [(port, header), ...], startup)

The order of the sends is their transmission priority under the one-port model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from node.topology import PORTS, Coord, Topology

__all__ = [
    "Algorithm",
    "Forward",
    "Header",
    "HeaderError",
    "Params",
    "PlanError",
    "Send",
    "as_coord",
    "as_coords",
    "check_destinations",
    "check_port",
]

Header = Any
"""Plain msgpack-able data: ints, strings, lists, dicts."""
Params = Mapping[str, Any]
Send = tuple[str, Header]


class HeaderError(ValueError):
    """A header that this rule cannot obey (malformed, or from a foreign peer): a remote error."""


class PlanError(ValueError):
    """A multicast this rule cannot start (bad destinations, unsupported topology): a local error."""


class Forward(NamedTuple):
    """What a node does with a packet: deliver it here?, ordered sends, is this a new start-up?

    ``startup`` marks the sends as a new start-up, except the first ``carried`` of them, which
    continue the incoming message (a leader that passes the level-1 worm on and starts its
    group's paths in the same step).
    """

    deliver: bool
    sends: list[Send]
    startup: bool = False
    carried: int = 0

    def startups_of(self, incoming: int) -> list[int]:
        """The start-up count each send carries, given the incoming packet's."""
        bump = 1 if self.startup else 0
        return [incoming + (bump if i >= self.carried else 0) for i in range(len(self.sends))]


Prepare = Callable[[Topology, Coord, Sequence[Coord], Params], list[Send]]
ForwardFn = Callable[[Topology, Coord, Header], Forward]


@dataclass(frozen=True, slots=True)
class Algorithm:
    """A registered rule: its name, family, the topology kinds it supports, and its two functions."""

    name: str
    family: str
    prepare: Prepare
    forward: ForwardFn
    kinds: tuple[str, ...] = ("mesh", "torus")
    summary: str = ""
    source: str = ""
    constraint: Callable[[Topology], str | None] | None = field(default=None, compare=False)

    def unsupported(self, topology: Topology) -> str | None:
        """Why this algorithm cannot run on ``topology``, or None if it can."""
        if topology.kind not in self.kinds:
            return (
                f"algorithm {self.name!r} does not support {topology.kind} topologies "
                f"(it runs on: {', '.join(self.kinds)})"
            )
        if self.constraint is not None:
            return self.constraint(topology)
        return None


def check_port(port: object) -> str:
    if port not in PORTS:
        raise HeaderError(f"unknown port {port!r} in header")
    return str(port)


def as_coord(value: object, topology: Topology, what: str = "coordinate") -> Coord:
    """Read a header coordinate strictly: a 2-list of ints inside the topology."""
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and type(value[0]) is int
        and type(value[1]) is int
        and topology.contains((value[0], value[1]))
    ):
        return (value[0], value[1])
    raise HeaderError(f"bad {what} {value!r} for {topology.spec}")


def as_coords(value: object, topology: Topology, what: str = "destination list") -> list[Coord]:
    if not isinstance(value, (list, tuple)):
        raise HeaderError(f"{what} must be a list, got {type(value).__name__}")
    return [as_coord(v, topology, what) for v in value]


def check_destinations(topology: Topology, source: Coord, destinations: Sequence[Coord]) -> list[Coord]:
    """Validate a multicast set (in the topology, no duplicates, source excluded) as PlanError."""
    if not topology.contains(tuple(source)):
        raise PlanError(f"source {source!r} is not a node of {topology.spec}")
    out: list[Coord] = []
    seen: set[Coord] = set()
    for d in destinations:
        t = tuple(d)
        if not topology.contains(t):
            raise PlanError(f"destination {d!r} is not a node of {topology.spec}")
        c: Coord = (t[0], t[1])
        if c == tuple(source):
            raise PlanError(f"the source {c} cannot also be a destination")
        if c in seen:
            raise PlanError(f"destination {c} is listed twice")
        seen.add(c)
        out.append(c)
    return out
