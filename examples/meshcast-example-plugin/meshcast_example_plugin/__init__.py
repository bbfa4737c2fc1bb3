"""An example meshcast plug-in: separate addressing with YX routing (rows first, then columns).

A routing rule is two pure functions (sans-IO: no trio, sockets or msgpack here):
``prepare`` at the source returns the ordered sends, ``forward`` at every node that takes the
packet in says whether to deliver it here and where to send it on. Every parameter the rule
reads is declared with :class:`~node.routing.Param`, so ``meshcast run --param`` is checked
and ``meshcast algorithms`` lists it. Check the rule with ``meshcast check-algorithm yx``.
"""

from __future__ import annotations

from collections.abc import Sequence

from node.routing import Algorithm, Forward, Header, Param, Send
from node.routing.base import HeaderError, Params, as_coord
from node.topology import Coord, Topology

__all__ = ["ALGORITHMS", "forward", "prepare"]

ORDERS = ("far-first", "near-first")


def _next(here: Coord, dest: Coord) -> str | None:
    """The YX port from ``here`` toward ``dest`` on a mesh (None when arrived)."""
    if here[1] != dest[1]:
        return "+y" if dest[1] > here[1] else "-y"
    if here[0] != dest[0]:
        return "+x" if dest[0] > here[0] else "-x"
    return None


def prepare(topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params) -> list[Send]:
    """One copy per destination, farthest (or nearest) first; the header is the destination."""
    far_first = params.get("order", "far-first") == "far-first"
    order = sorted(destinations, key=lambda d: (topology.distance(source, d) * (-1 if far_first else 1), d))
    sends: list[Send] = []
    for d in order:
        port = _next(source, d)
        assert port is not None  # the source is never a destination
        sends.append((port, [d[0], d[1]]))
    return sends


def forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Deliver at the destination, else one hop on along the row, then the column."""
    dest = as_coord(header, topology, "yx destination")
    port = _next(here, dest)
    if port is None:
        return Forward(True, [], False)
    if topology.neighbour(here, port) is None:
        raise HeaderError(f"no {port} link at {here}")
    return Forward(False, [(port, header)], False)


ALGORITHMS = (
    Algorithm(
        "yx",
        "example-plugin",
        prepare,
        forward,
        kinds=("mesh",),
        summary="example plug-in: one YX-routed unicast copy per destination",
        source="examples/meshcast-example-plugin",
        params=(
            Param("order", "str", "far-first", "which destinations the source sends first", choices=ORDERS),
        ),
    ),
)
