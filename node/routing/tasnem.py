"""Seed 001 (Abd El-Baky, TASNEM): tree-based all-port wormhole multicast on the 2D torus.

The source runs ``Dest_Prep`` (Fig. 2): the label function Q (eq. 1) and ``Divide_Dest1`` split
the destinations into D1 and D2, one per "mesh subnetwork" (one goes up, d_y = 1, the other
down, d_y = -1, through the vertical wrap-around). Each packet then runs ``Mess_Forward``
(Fig. 3) at every node it reaches, the source included: deliver if listed; with R (eq. 2) find
the vertical neighbour v; D1 = the destinations between the current node and v (``Divide_Dest1``,
or ``Divide_Dest2`` across the vertical wrap-around); go vertical with everything if D1 is empty,
horizontal with everything if v is not a destination, else split: D1 horizontal, the rest
vertical. The header is ``[D, d_x, d_y]`` with D a list of ``[x, y]``. A node sends to at most two
neighbours per packet; every delivery is one injection away from the source (the two packets
leave it together, all-port), so at most two start-ups in the paper's sense.

Where the pseudo-code had to be read one way or the other:

1. Eq. (1) writes ``y·n + x`` with n the number of rows; the row length is the number of
   columns M, so Q(x, y) = y·M + x on even rows and y·M + M-1-x on odd rows (non-square tori).
2. Step 2 of ``Dest_Prep`` prints the second ``Divide_Dest1`` call without its ``else`` and
   without ``d_y = -1``: it is the prose's Case 2 (y_s >= floor(N/2)), with d_y = -1.
3. ``Dest_Prep`` sends both packets with the same d_x (the label-increasing direction of the
   source row). The packet with d_y = -1 moves in label-decreasing order (its destinations in
   the source row lie on the -d_x side, and ``Divide_Dest2`` on row 0 tests x < x_c, which
   assumes d_x = -1 there), so it leaves with -d_x. Otherwise its first horizontal step walks
   away from every destination it holds.
4. ``Divide_Dest1`` is inclusive (Q(b) <= Q(d) <= Q(e)) as printed in ``Dest_Prep`` (source
   excluded anyway; the end node (M-1, y_s+ceil(N/2)) or (0, y_s-ceil(N/2)) included). In
   ``Mess_Forward`` it is read strictly, as the prose says: "the horizontal destination nodes
   which are *between* the current node and its vertical neighboring node". With the printed
   <=, a destination v would go into D1 and step 5 would send it horizontally, where no node
   ever reaches it again (and with D1 = {v}, off the end of the row). So v goes with D2,
   vertically, which is what the prose's last sentence describes.
5. ``Divide_Dest2`` prints x_D <= x_c; the prose says "less than". Read strictly, for the same
   reason as 4 (the vertical neighbour across the wrap-around).
6. Odd number of rows N: rows N-1 and 0 then have the same parity, so the snake Q is not closed by
   the vertical wrap-around, and a packet crossing it has d_x opposite to Q's direction in the
   new row. We keep the rule's geometry: ``Divide_Dest2`` takes the boundary-row destinations
   strictly on the d_x side of x_c (for an even N, d_x = -1 at every crossing, which is exactly
   the printed x < x_c), and ``Divide_Dest1`` uses Q when d_x is Q's direction of travel in the
   current row (label-increasing for d_y = 1, decreasing for d_y = -1) and the mirrored labels
   Q'(x, y) = Q(M-1-x, y) otherwise. The choice is made from the header alone; on an even N it is
   always Q, i.e. the paper's rule unchanged.
7. Case 2 with y_s - ceil(N/2) = -1 (N odd, y_s = floor(N/2)): the label interval starts at 0
   (there is no row -1; evaluating eq. 1 at y = -1 gives -1, the same set). Case 1's end row
   y_s + ceil(N/2) is always <= N-1.
8. ``Mess_Forward`` "is executed at the router of the source node at most twice": ``prepare``
   runs it at the source on D1 then on D2 and returns both results' sends in that order
   (within one call: horizontal first, then vertical, as in step 5).
9. Start-ups: the paper's "at most two start-up times, one for each mesh subnetwork" are the two
   ``SendS`` of the source, sent at once on separate injection channels (§3.1); no node
   re-injects, so every delivery here counts one start-up (the engine's injection).
10. "x_c + d_x" is never a wrap-around move: D1 non-empty means a destination lies strictly on
    the d_x side of x_c in the current or next row, so the neighbour column exists in the mesh.
    Destination lists keep the order they were given in (``add`` appends).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from node.routing.base import (
    Algorithm,
    Forward,
    Header,
    HeaderError,
    Params,
    PlanError,
    Send,
    as_coords,
    check_destinations,
)
from node.topology import Coord, Topology

__all__ = [
    "ALGORITHMS",
    "Label",
    "Packet",
    "check_plan",
    "dest_prep",
    "divide_dest1",
    "divide_dest2",
    "forward",
    "mess_forward",
    "mirrored_label",
    "prepare",
    "q_label",
    "r_row",
]

Label = Callable[[Coord], int]
"""A node labelling: Q or its mirror Q'."""
Packet = tuple[list[Coord], int, int]
"""What the source's ``SendS`` hands its router: (D, d_x, d_y)."""


def q_label(topology: Topology, c: Coord) -> int:
    """Eq. (1) with the row length M = number of columns: the snake position of ``c``."""
    x, y = c
    m = topology.cols
    return y * m + x if y % 2 == 0 else y * m + m - 1 - x


def mirrored_label(topology: Topology, c: Coord) -> int:
    """Q'(x, y) = Q(M-1-x, y): the snake run from the other side (odd row counts, item 6)."""
    return q_label(topology, (topology.cols - 1 - c[0], c[1]))


def r_row(y_c: int, d_y: int, rows: int) -> int:
    """Eq. (2): the row of the vertical neighbour of a node in row ``y_c`` going ``d_y``."""
    if d_y == 1:
        return 0 if y_c == rows - 1 else y_c + 1
    return rows - 1 if y_c == 0 else y_c - 1


def divide_dest1(
    dests: Sequence[Coord], b: Coord, e: Coord, label: Label, *, strict: bool = False
) -> tuple[list[Coord], list[Coord]]:
    """``Divide_Dest1``: D1 = destinations labelled between b and e, D2 = the rest (order kept).

    Inclusive as printed (Dest_Prep); ``strict`` for Mess_Forward (items 4 and 6)."""
    lo, hi = label(b), label(e)
    d1: list[Coord] = []
    d2: list[Coord] = []
    for d in dests:
        ld = label(d)
        inside = lo < ld < hi if strict else lo <= ld <= hi
        (d1 if inside else d2).append(d)
    return d1, d2


def divide_dest2(dests: Sequence[Coord], x_c: int, rows: int, d_x: int) -> tuple[list[Coord], list[Coord]]:
    """``Divide_Dest2``: D1 = boundary-row (y = 0 or N-1) destinations strictly on the d_x side of x_c.

    The paper's x_D <= x_c is this test with d_x = -1, the value at every crossing of an even N."""
    d1: list[Coord] = []
    d2: list[Coord] = []
    for d in dests:
        boundary = d[1] in (0, rows - 1)
        (d1 if boundary and (d[0] - x_c) * d_x > 0 else d2).append(d)
    return d1, d2


def _labelling(topology: Topology, y_c: int, d_x: int, d_y: int) -> Label:
    """Q if d_x is Q's direction of travel in row ``y_c`` for this d_y, else the mirror Q' (item 6)."""
    q_dir = 1 if y_c % 2 == 0 else -1  # Q's label-increasing direction in row y_c
    if d_x == q_dir * d_y:
        return lambda c: q_label(topology, c)
    return lambda c: mirrored_label(topology, c)


def check_plan(topology: Topology, source: Coord, destinations: Sequence[Coord], name: str) -> list[Coord]:
    """Validate a torus multicast (PlanError naming the fault); return the destinations as tuples."""
    if not topology.is_torus:
        raise PlanError(f"{name} runs on tori only, not on {topology.spec}")
    return check_destinations(topology, source, destinations)


def dest_prep(topology: Topology, source: Coord, dests: Sequence[Coord]) -> list[Packet]:
    """Fig. 2: the source's (D, d_x, d_y) packets, D1's first; empty lists are not sent."""
    m, n = topology.cols, topology.rows
    x_s, y_s = source
    q: Label = lambda c: q_label(topology, c)  # noqa: E731
    d_x = 1 if y_s % 2 == 0 else -1  # step 1
    half = -(-n // 2)  # ceil(n/2)
    if y_s < n // 2:  # step 2, Case 1
        d_y = 1
        d1, d2 = divide_dest1(dests, (x_s, y_s), (m - 1, y_s + half), q)
    else:  # Case 2 (item 2); row -1 is read as the start of the labels (item 7)
        d_y = -1
        d1, d2 = divide_dest1(dests, (0, max(y_s - half, 0)), (x_s, y_s), q)  # Q(0, 0) = 0
    packets: list[Packet] = []
    for group, dy in ((d1, d_y), (d2, -d_y)):  # steps 3 and 4
        if group:
            packets.append((group, d_x * dy, dy))  # a d_y = -1 packet leaves with -d_x (item 3)
    return packets


def _port(axis: str, sign: int) -> str:
    """The port for moving ``sign`` (±1) along ``axis`` ('x' or 'y')."""
    return ("+" if sign > 0 else "-") + axis


def _header(dests: Sequence[Coord], d_x: int, d_y: int) -> list[object]:
    """The wire form ``[D, d_x, d_y]`` with D a list of ``[x, y]``."""
    return [[[d[0], d[1]] for d in dests], d_x, d_y]


def mess_forward(topology: Topology, here: Coord, dests: Sequence[Coord], d_x: int, d_y: int) -> Forward:
    """Fig. 3 at node ``here`` for a packet holding ``dests``, d_x, d_y: deliver?, at most two sends."""
    x_c, y_c = here
    n = topology.rows
    deliver = here in dests  # step 1
    rest = [d for d in dests if d != here]
    if not rest:  # step 2
        return Forward(deliver, [], False)
    y_v = r_row(y_c, d_y, n)  # step 3
    v = (x_c, y_v)
    if (d_y == 1 and y_c == n - 1) or (d_y == -1 and y_c == 0):  # step 4, across the wrap-around
        d1, d2 = divide_dest2(rest, x_c, n, d_x)
    else:
        label = _labelling(topology, y_c, d_x, d_y)
        if d_y == 1:
            d1, d2 = divide_dest1(rest, here, v, label, strict=True)
        else:
            d1, d2 = divide_dest1(rest, v, here, label, strict=True)
    vertical = _port("y", d_y)
    if not d1:  # step 5
        return Forward(deliver, [(vertical, _header(rest, -d_x, d_y))], False)
    if not 0 <= x_c + d_x < topology.cols:  # pragma: no cover - D1 lies strictly on the d_x side
        raise HeaderError(f"tasnem at {here}: no column {x_c + d_x} to go to")
    horizontal = _port("x", d_x)
    if v not in rest:
        return Forward(deliver, [(horizontal, _header(rest, d_x, d_y))], False)
    sends: list[Send] = [(horizontal, _header(d1, d_x, d_y))]
    if d2:  # always: v is in D2 (item 4)
        sends.append((vertical, _header(d2, -d_x, d_y)))
    return Forward(deliver, sends, False)


def prepare(topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params) -> list[Send]:
    """Dest_Prep, then Mess_Forward at the source on each packet (item 8)."""
    dests = check_plan(topology, source, destinations, "tasnem")
    src: Coord = (source[0], source[1])
    sends: list[Send] = []
    for group, d_x, d_y in dest_prep(topology, src, dests):
        sends.extend(mess_forward(topology, src, group, d_x, d_y).sends)
    return sends


def _direction(value: object, what: str) -> int:
    """A header direction: the int 1 or -1."""
    if type(value) is not int or value not in (1, -1):
        raise HeaderError(f"tasnem header: {what} must be 1 or -1, got {value!r}")
    return value


def forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Read ``[D, d_x, d_y]`` strictly (HeaderError naming the fault) and run Mess_Forward."""
    if not topology.is_torus:
        raise HeaderError(f"tasnem runs on tori only, not on {topology.spec}")
    if not isinstance(header, (list, tuple)) or len(header) != 3:
        raise HeaderError(f"tasnem header must be [D, d_x, d_y], got {header!r}")
    dests = as_coords(header[0], topology, "tasnem destination list")
    if not dests:
        raise HeaderError("tasnem header: empty destination list (nothing to deliver)")
    if len(set(dests)) != len(dests):
        raise HeaderError(f"tasnem header: a destination is listed twice in {header[0]!r}")
    return mess_forward(topology, here, dests, _direction(header[1], "d_x"), _direction(header[2], "d_y"))


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "tasnem",
        "tasnem",
        prepare,
        forward,
        kinds=("torus",),
        summary="two meshes split by the vertical wrap-around; main path plus horizontal branches (tree)",
        source="seed 001 §3.2–3.3 (Figs. 2–3)",
    ),
)
