"""The routing-rule interface shared by every algorithm family (sans-IO: no trio, no sockets).

A rule is two pure functions::

    prepare(topology, source, destinations, params) -> [(port, header), ...]
    forward(topology, here, header) -> Forward(deliver, [(port, header), ...], startup)

The order of the sends is their transmission priority under the one-port model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from node.topology import PORTS, Coord, Topology

__all__ = [
    "HEADER_ERRORS",
    "Algorithm",
    "Forward",
    "Header",
    "HeaderError",
    "Param",
    "Params",
    "PlanError",
    "Send",
    "as_coord",
    "as_coords",
    "check_destinations",
    "check_params",
    "check_port",
]

Header = Any
"""Plain msgpack-able data: ints, strings, bytes, lists, dicts."""
Params = Mapping[str, Any]
Send = tuple[str, Header]


class HeaderError(ValueError):
    """A header that this rule cannot obey (malformed, or from a foreign peer): a remote error."""


HEADER_ERRORS: Final = (HeaderError, ValueError, TypeError, KeyError, IndexError, AttributeError)
"""What running a rule on a header it cannot obey may raise: the packet's error (``bad-header``),
never the node's."""


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


PARAM_TYPES = ("int", "float", "str", "list", "algorithm")


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter an algorithm reads from ``params``: its name, type, default, range and meaning.

    ``type`` is int, float, str, list (JSON data a workload computes) or algorithm (the name of
    another rule, whose own parameters are then accepted too). ``low``/``high`` bound a number
    (``open_low``/``open_high`` exclude the bound); ``choices`` restrict a string.
    """

    name: str
    type: str
    default: Any = None
    help: str = ""
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()

    def allowed(self) -> str:
        """What values are allowed, in words (for messages and ``meshcast algorithms``)."""
        if self.type in ("int", "float"):
            lo = "" if self.low is None else f"{self.low:g} {'<' if self.open_low else '≤'} "
            hi = "" if self.high is None else f" {'<' if self.open_high else '≤'} {self.high:g}"
            what = "an integer" if self.type == "int" else "a number"
            return f"{what} with {lo}{self.name}{hi}" if lo or hi else what
        if self.choices:
            return "one of " + ", ".join(self.choices)
        return {"str": "a string", "list": "a JSON list", "algorithm": "an algorithm name"}[self.type]

    def check(self, raw: object) -> Any:
        """The value read as this parameter's type, or PlanError naming it and what is allowed."""
        value: Any = None
        if self.type == "int":
            if type(raw) is int:
                value = raw
            elif isinstance(raw, str):
                try:
                    value = int(raw.strip())
                except ValueError:
                    value = None
        elif self.type == "float":
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                value = float(raw)
            elif isinstance(raw, str):
                try:
                    value = float(raw)
                except ValueError:
                    value = None
            if value is not None and not math.isfinite(value):
                value = None
        elif self.type in ("str", "algorithm"):
            value = raw if isinstance(raw, str) and raw else None
            if value is not None and self.choices and value not in self.choices:
                value = None
        elif self.type == "list":
            value = raw if isinstance(raw, (list, tuple)) else None
        if value is not None and self.type in ("int", "float"):
            lo, hi = self.low, self.high
            if (lo is not None and (value < lo or (self.open_low and value == lo))) or (
                hi is not None and (value > hi or (self.open_high and value == hi))
            ):
                value = None
        if value is None:
            raise PlanError(f"parameter {self.name}={raw!r} is invalid: it must be {self.allowed()}")
        return value


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
    params: tuple[Param, ...] = ()

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
        and 0 <= value[0] < topology.cols  # Topology.contains, inlined: every hop reads its header
        and 0 <= value[1] < topology.rows
    ):
        return (value[0], value[1])
    raise HeaderError(f"bad {what} {value!r} for {topology.spec}")


def as_coords(value: object, topology: Topology, what: str = "destination list") -> list[Coord]:
    if not isinstance(value, (list, tuple)):
        raise HeaderError(f"{what} must be a list, got {type(value).__name__}")
    return [as_coord(v, topology, what) for v in value]


def check_destinations(topology: Topology, source: Coord, destinations: Sequence[object]) -> list[Coord]:
    """Validate a multicast set (in the topology, no duplicates, source excluded) as PlanError.

    The destinations are ``object``: outside input, checked here (not at the call, as compiled
    code would check a ``Coord`` annotation).
    """
    if not topology.contains(tuple(source)):
        raise PlanError(f"source {source!r} is not a node of {topology.spec}")
    out: list[Coord] = []
    seen: set[Coord] = set()
    for d in destinations:
        t = tuple(d) if isinstance(d, (list, tuple)) else None
        if t is None or not topology.contains(t):
            raise PlanError(f"destination {d!r} is not a node of {topology.spec}")
        c: Coord = (t[0], t[1])
        if c == tuple(source):
            raise PlanError(f"the source {c} cannot also be a destination")
        if c in seen:
            raise PlanError(f"destination {c} is listed twice")
        seen.add(c)
        out.append(c)
    return out


def check_params(
    algorithm: Algorithm, values: Params, others: Mapping[str, Algorithm] | None = None
) -> dict[str, Any]:
    """``values`` checked against ``algorithm``'s declared parameters, or PlanError naming the bad one.

    An ``algorithm``-typed parameter (e.g. tree's ``base``) lets the named rule's own parameters
    through, checked against that rule's declaration (looked up in ``others``).
    """
    declared = {p.name: p for p in algorithm.params}
    out: dict[str, Any] = {}
    for p in algorithm.params:
        if p.name in values:
            out[p.name] = p.check(values[p.name])
    rest = {k: v for k, v in values.items() if k not in declared}
    base = next((p for p in algorithm.params if p.type == "algorithm"), None)
    if rest and base is not None and others is not None:
        name = out.get(base.name, base.default)
        inner = others.get(name)
        if inner is None:
            raise PlanError(f"parameter {base.name}={name!r} is not a known algorithm")
        out.update(check_params(inner, rest, others))
        return out
    for k in rest:
        known = ", ".join(sorted(declared)) or "none"
        raise PlanError(f"algorithm {algorithm.name!r} has no parameter {k!r} (its parameters: {known})")
    return out
