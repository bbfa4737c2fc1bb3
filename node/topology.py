"""2D mesh and torus topologies: coordinates, ports, neighbours, distances.

A topology is written ``mesh:MxN`` or ``torus:MxN`` with M columns (x) and N rows (y).
Everything here is pure and immutable so that routing rules, the actor and the
reference model can share it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "PORTS",
    "PORT_BITS",
    "Coord",
    "Topology",
    "TopologyError",
    "coords_text",
    "parse_coord",
    "parse_coords",
    "port_names",
]

Coord = tuple[int, int]

#: The four ports in their canonical order (also the order simultaneous arrivals are taken in).
PORTS: Final = ("+x", "-x", "+y", "-y")
#: Each port's bit in a port set written as an int (bit i: ``PORTS[i]``), as reports carry them.
PORT_BITS: Final = {p: 1 << i for i, p in enumerate(PORTS)}


def port_names(mask: int) -> tuple[str, ...]:
    """The ports of a port set written as an int (:data:`PORT_BITS`), in canonical order."""
    return tuple(p for i, p in enumerate(PORTS) if mask >> i & 1)


_STEP: Final = {"+x": (1, 0), "-x": (-1, 0), "+y": (0, 1), "-y": (0, -1)}
_OPPOSITE: Final = {"+x": "-x", "-x": "+x", "+y": "-y", "-y": "+y"}
_SPEC = re.compile(r"^\s*(mesh|torus)\s*:\s*([0-9]+)\s*[xX×]\s*([0-9]+)\s*$")
"""(ASCII digits only: ``int`` would read full-width ones, and a spec is written as it is read.)"""
MAX_SIDE: Final = 1024


class TopologyError(ValueError):
    """A topology, coordinate or port that cannot exist; the message names the cause."""


@dataclass(frozen=True, slots=True)
class Topology:
    """A ``kind`` ('mesh' or 'torus') of ``cols`` × ``rows`` nodes."""

    kind: str
    cols: int
    rows: int

    def __reduce__(self) -> tuple[type[Topology], tuple[str, int, int]]:
        """Pickle by its fields: a compiled (mypyc) frozen class cannot be restored field by field."""
        return (Topology, (self.kind, self.cols, self.rows))

    def __post_init__(self) -> None:
        if self.kind not in ("mesh", "torus"):
            raise TopologyError(f"unknown topology kind {self.kind!r}: use 'mesh' or 'torus'")
        for name, side in (("columns", self.cols), ("rows", self.rows)):
            if not isinstance(side, int) or side < 1:
                raise TopologyError(f"{self.kind} needs at least 1 of {name}, got {side!r}")
            if side > MAX_SIDE:
                raise TopologyError(f"{self.kind} {name} {side} exceeds the limit {MAX_SIDE}")
        if self.cols * self.rows < 2:
            raise TopologyError(f"{self.spec} has a single node: nothing to route")
        if self.kind == "torus" and (self.cols < 3 or self.rows < 3):
            raise TopologyError(
                f"{self.spec}: a torus needs at least 3 columns and 3 rows "
                "(smaller rings have parallel or self links)"
            )

    @classmethod
    def parse(cls, spec: str) -> Topology:
        """Parse ``mesh:8x8`` / ``torus:20x20``; raise :class:`TopologyError` naming the fault."""
        m = _SPEC.match(spec) if isinstance(spec, str) else None
        if m is None:
            raise TopologyError(
                f"cannot read topology {spec!r}: expected 'mesh:MxN' or 'torus:MxN' "
                "(M columns, N rows), e.g. 'mesh:8x8'"
            )
        return cls(m.group(1), int(m.group(2)), int(m.group(3)))

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.cols}x{self.rows}"

    @property
    def size(self) -> int:
        return self.cols * self.rows

    @property
    def is_torus(self) -> bool:
        return self.kind == "torus"

    def __str__(self) -> str:
        return self.spec

    # -- coordinates -------------------------------------------------------------------
    def contains(self, c: object) -> bool:
        return (
            isinstance(c, tuple)
            and len(c) == 2
            and all(type(v) is int for v in c)
            and 0 <= c[0] < self.cols
            and 0 <= c[1] < self.rows
        )

    def check(self, c: object, what: str = "node") -> Coord:
        """Return ``c`` as a coordinate tuple or raise naming why it is not in this topology.

        ``c`` is typed ``object``: it is outside input (compiled code would refuse a non-tuple
        with a TypeError at the call instead of this method's message).
        """
        t: Coord | None = None
        if isinstance(c, Sequence) and len(c) == 2 and not any(type(v) is bool for v in c):
            try:
                t = (int(c[0]), int(c[1]))
            except (TypeError, ValueError):
                t = None
        if t is None:
            raise TopologyError(f"{what} {c!r} is not an (x, y) pair of integers")
        if not self.contains(t):
            raise TopologyError(
                f"{what} ({t[0]},{t[1]}) is outside {self.spec} "
                f"(x must be 0..{self.cols - 1}, y 0..{self.rows - 1})"
            )
        return t

    def nodes(self) -> Iterator[Coord]:
        """All nodes, row by row (y outer, x inner)."""
        for y in range(self.rows):
            for x in range(self.cols):
                yield (x, y)

    def index(self, c: Coord) -> int:
        return c[1] * self.cols + c[0]

    # -- ports and links ---------------------------------------------------------------
    def neighbour(self, c: Coord, port: str) -> Coord | None:
        """The node across ``port`` from ``c``, or None at a mesh edge."""
        dx, dy = _STEP[port]
        x, y = c[0] + dx, c[1] + dy
        if self.kind == "torus":
            return (x % self.cols, y % self.rows)
        if 0 <= x < self.cols and 0 <= y < self.rows:
            return (x, y)
        return None

    def ports(self, c: Coord) -> tuple[str, ...]:
        """The ports of ``c`` that lead somewhere, in canonical order."""
        return tuple(p for p in PORTS if self.neighbour(c, p) is not None)

    def neighbours(self, c: Coord) -> dict[str, Coord]:
        out: dict[str, Coord] = {}
        for p in PORTS:
            n = self.neighbour(c, p)
            if n is not None:
                out[p] = n
        return out

    @staticmethod
    def opposite(port: str) -> str:
        return _OPPOSITE[port]

    def links(self) -> Iterator[tuple[Coord, str, Coord]]:
        """Every directed channel (from, port, to)."""
        for c in self.nodes():
            for p, n in self.neighbours(c).items():
                yield c, p, n

    # -- distances ---------------------------------------------------------------------
    def offset(self, a: Coord, b: Coord) -> tuple[int, int]:
        """Signed hop offset from a to b along a shortest route.

        On a torus each dimension goes the shorter way; at exactly half the ring, the +
        direction.
        """
        dx, dy = b[0] - a[0], b[1] - a[1]
        if self.kind == "torus":
            dx, dy = _ring(dx, self.cols), _ring(dy, self.rows)
        return dx, dy

    def distance(self, a: Coord, b: Coord) -> int:
        dx, dy = self.offset(a, b)
        return abs(dx) + abs(dy)

    @property
    def diameter(self) -> int:
        if self.kind == "torus":
            return self.cols // 2 + self.rows // 2
        return self.cols - 1 + self.rows - 1

    def xy_next(self, here: Coord, dest: Coord) -> str | None:
        """The port of the dimension-ordered (x first) shortest route, None when there."""
        dx, dy = self.offset(here, dest)
        if dx:
            return "+x" if dx > 0 else "-x"
        if dy:
            return "+y" if dy > 0 else "-y"
        return None

    def xy_path(self, a: Coord, b: Coord) -> list[Coord]:
        """The nodes of the XY route from a to b, both ends included."""
        path = [a]
        while (p := self.xy_next(path[-1], b)) is not None:
            nxt = self.neighbour(path[-1], p)
            assert nxt is not None
            path.append(nxt)
        return path


def _ring(d: int, n: int) -> int:
    d %= n
    return d - n if 2 * d > n else d


def parse_coord(text: str) -> Coord:
    """Parse ``'3,4'`` (or ``'(3,4)'``) into a coordinate; raise ValueError naming the text."""
    t = text.strip().strip("()[]")
    parts = t.split(",")
    if len(parts) != 2:
        raise TopologyError(f"cannot read coordinate {text!r}: expected 'x,y'")
    try:
        return (int(parts[0]), int(parts[1]))
    except ValueError:
        raise TopologyError(f"cannot read coordinate {text!r}: x and y must be integers") from None


def coords_text(coords: Iterable[Coord]) -> str:
    """``'(3,4), (0,2)'``: coordinates as the run's messages name them."""
    return ", ".join(f"({x},{y})" for x, y in coords)


def parse_coords(text: str) -> list[Coord]:
    """Parse a space- or semicolon-separated list like ``'4,6 6,6 0,2'``."""
    items = [s for s in re.split(r"[\s;]+", text.strip()) if s]
    return [parse_coord(s) for s in items]
