"""Seed 001's torus comparators (§2): multipath-HCM, T2W and Uniform, path-based, wormhole.

The paper describes these three only in prose and no public description or code exists: each rule
here is a **reconstruction** from that prose, quoted below with every choice it leaves open. All
run on tori only and are deterministic. Path headers carry absolute destination coordinates in
visiting order; a node delivers only when it heads the list (intermediate reception), pops
itself, and routes on toward the next head (passing over a later destination does not deliver).

**Uniform** (ref. [21], Wang, Yen & Chu 2005). Prose: "The message preparation for the uniform
routing easily balances two routing paths on which the two messages are routed. The destination
nodes are partitioned into two subsets containing a near equal number of destination nodes
according to their positions in the Hamiltonian cycle."

1. The cycle: on an even number of rows, the snake Q of eq. (1) (M columns), closed by the
   wrap-around (0, N-1)-(0, 0); on an odd number the snake is not closed, so the comb of
   :func:`cycle_label` (also a Hamiltonian cycle of every torus).
2. The split: destinations in cycle order from the source; the first ceil(k/2) go "up" in that
   order, the other floor(k/2) "down" in reverse order.
3. The routing function ("the same underlying routing function", not described) is
   Lin–McKinley–Ni's R on the cycle: the neighbour farthest along the cycle in the message's
   direction that does not pass the next destination (wrap-around links included).
4. One-port priority at the source: the longer path first (ties: up).

**multipath-HCM** (ref. [22], Wang & Hung 2009). Prose: "divides the torus network into two
subnetworks. The high-channel network (low-channel network) contains all of the directional common
channels with nodes labeled from low to high (from high to low) and the directional boundary
channels with nodes labeled from high to low (from low to high). The algorithm generates four
outgoing messages ... the destination nodes are partitioned into four destination subsets ... Two
messages are assigned to route along the high-channel network (to up) and the other two ... along
the low-channel network (to down). ... The algorithm uses a routing function in terms of the
(x, y)-coordinates of the current node and destination node, rather than in terms of node labels."

5. Labels are the snake Q; "boundary channels" are the wrap-around links. The high network is
   then every row as a ring in the snake's direction plus every column as an upward ring; the low
   network is its reverse. The (x, y) routing function (:func:`hcm_route`) moves along the row when
   this row's direction is a shortest way round to x_v (or v is in this row), else to the next row.
6. High = the destinations at most floor(K/2) labels ahead of the source (wrapping past K-1 to 0),
   visited in label order; low = the rest, in reverse label order. The case study (source (7,8),
   paths of 9 + 34 channels up and 36 + 11 down) needs both halves to reach far beyond the two
   rows that labels above Q(7,8) = 87 cover, so a plain Q(d) > Q(s) split cannot be meant.
7. Each half splits like Lin–McKinley–Ni's mesh multipath (the scheme HCM extends): h1 holds the
   high destinations strictly on the snake's forward side of the source column (forced first hop
   along the row), h2 the others (first hop up); l1 the low ones strictly on the backward side
   (first hop back along the row), l2 the others (first hop down).
8. The header carries coordinates rather than the offset/count flits (the same information);
   one-port priority at the source is the longest path first (ties h1, h2, l1, l2).

**T2W** (ref. [20], Radwan et al. 2010). Prose: "defines a path called the horizontal main path
starts from the source node to the last node such that the nodes on the horizontal main path can
cover all destination nodes on columns of the torus network. In the first startup step, the
horizontal main path is selected such that it may use the horizontal wraparound channels to cover
as many destinations as possible. The message is sent from the source node to the last node of the
horizontal main path according to a deterministic routing function which supplies a unique minimal
path. In the second startup step, some intermediate nodes along the horizontal main path (HMP)
retransmit the message to the remaining destination nodes through vertical paths." Case study: from
(7,8) "the message is sent from the source node to the last node of the horizontal main path (6,8)".

9. The HMP goes one way round the source row, the way whose arc reaches every destination column
   sooner (ties: +x, which is what (7,8) → (6,8) on 10 columns shows); it delivers to the source
   row's destinations on the way. The header holds the destinations not yet served; each HMP node
   takes its column's, and the path goes on while others remain.
10. Each column is served by one vertical path, a one-way sweep over the vertical wrap-around in
    the shorter direction (ties: up). The case study's latency 18 on 10×10 is 9 (HMP) + 9, which
    only a one-way sweep gives: up-and-down sweeps would stay within 9 + 5.
11. The source sweeps its own column itself, at the first start-up, beside the HMP.
12. Start-ups: HMP deliveries count one, vertical ones two. An HMP node that both continues the
    HMP and starts a vertical path returns the HMP first and marks it ``carried``, so only the
    vertical path counts the new start-up. One-port priority: the HMP first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from node.routing.base import (
    Algorithm,
    Forward,
    Header,
    HeaderError,
    Params,
    Send,
    as_coords,
)
from node.routing.tasnem import check_plan, q_label
from node.topology import Coord, Topology

__all__ = [
    "ALGORITHMS",
    "cycle_label",
    "cycle_route",
    "hcm_forward",
    "hcm_prepare",
    "hcm_route",
    "hcm_split",
    "route_hops",
    "t2w_forward",
    "t2w_prepare",
    "uniform_forward",
    "uniform_prepare",
    "uniform_split",
    "vertical_direction",
]

Route = Callable[[Topology, Coord, Coord], "str | None"]
"""A unicast routing function: the port from ``u`` toward ``v``, None when there."""


# -- shared path machinery -------------------------------------------------------------------------


def _port(axis: str, sign: int) -> str:
    """The port for moving ``sign`` (±1) along ``axis`` ('x' or 'y')."""
    return ("+" if sign > 0 else "-") + axis


def _coords(dests: Sequence[Coord]) -> list[list[int]]:
    """A destination list as header data."""
    return [[d[0], d[1]] for d in dests]


def route_hops(topology: Topology, start: Coord, dests: Sequence[Coord], route: Route) -> int:
    """Channels a path from ``start`` through ``dests`` (in order) crosses under ``route``."""
    hops, here = 0, start
    for d in dests:
        while (port := route(topology, here, d)) is not None:
            nxt = topology.neighbour(here, port)
            assert nxt is not None
            here, hops = nxt, hops + 1
    return hops


def _path_list(topology: Topology, value: object, what: str) -> list[Coord]:
    """A path's destination list from a header: non-empty, coordinates of this torus, no repeats."""
    dests = as_coords(value, topology, what)
    if not dests:
        raise HeaderError(f"empty {what}: a path packet must name its next destination")
    if len(set(dests)) != len(dests):
        raise HeaderError(f"{what} names a destination twice")
    return dests


def _path_step(
    topology: Topology, here: Coord, dests: list[Coord], route: Route
) -> tuple[bool, list[Coord], str | None]:
    """Deliver and pop if ``here`` heads the list; the port toward the next head (None: done)."""
    deliver = dests[0] == here
    rest = dests[1:] if deliver else dests
    if not rest:
        return deliver, rest, None
    return deliver, rest, route(topology, here, rest[0])


def _torus_only(topology: Topology, name: str) -> None:
    """Refuse a packet of a torus rule on a mesh (HeaderError)."""
    if not topology.is_torus:
        raise HeaderError(f"{name} runs on tori only, not on {topology.spec}")


def _mode(header: Header, modes: Sequence[str], name: str) -> tuple[str, object]:
    """Split a ``[mode, dests]`` header, checking the mode."""
    if not isinstance(header, (list, tuple)) or len(header) != 2 or header[0] not in modes:
        raise HeaderError(f"{name} header must be [mode, D] with mode in {list(modes)}, got {header!r}")
    return str(header[0]), header[1]


# -- Uniform (Wang, Yen & Chu 2005, ref. [21]) ------------------------------------------------------


def cycle_label(topology: Topology, c: Coord) -> int:
    """Position of ``c`` on a Hamiltonian cycle of the torus.

    An even number of rows: the snake Q of eq. (1), closed by the wrap-around (0, N-1)-(0, 0).
    An odd number: the comb (0,0), then the snake over columns 1..M-1 ending at (M-1, N-1), the
    wrap-around to (0, N-1), and column 0 down to (0, 1)."""
    m, n = topology.cols, topology.rows
    x, y = c
    if n % 2 == 0:
        return q_label(topology, c)
    if x == 0:
        return 0 if y == 0 else n * (m - 1) + n - y
    return 1 + y * (m - 1) + (x - 1 if y % 2 == 0 else m - 1 - x)


def cycle_route(topology: Topology, u: Coord, v: Coord, up: bool) -> str | None:
    """Lin–McKinley–Ni R on the cycle: the neighbour farthest along the cycle (up or down) from u
    that does not pass v; None when u = v. The cycle neighbour always qualifies, so it ends."""
    k = topology.size
    cu, cv = cycle_label(topology, u), cycle_label(topology, v)
    sign = 1 if up else -1
    target = ((cv - cu) * sign) % k
    if target == 0:
        return None
    best: tuple[int, str] | None = None
    for port, w in topology.neighbours(u).items():
        step = ((cycle_label(topology, w) - cu) * sign) % k
        if step <= target and (best is None or step > best[0]):
            best = (step, port)
    assert best is not None
    return best[1]


def _up(topology: Topology, u: Coord, v: Coord) -> str | None:
    """:func:`cycle_route` upward."""
    return cycle_route(topology, u, v, True)


def _down(topology: Topology, u: Coord, v: Coord) -> str | None:
    """:func:`cycle_route` downward."""
    return cycle_route(topology, u, v, False)


_CYCLE_ROUTES: dict[str, Route] = {"up": _up, "down": _down}


def uniform_split(
    topology: Topology, source: Coord, dests: Sequence[Coord]
) -> tuple[list[Coord], list[Coord]]:
    """The two lists: the first ceil(k/2) destinations along the cycle from the source, in
    cycle order (up), and the other floor(k/2) in reverse cycle order (down)."""
    k = topology.size
    cs = cycle_label(topology, source)
    order = sorted(dests, key=lambda d: (cycle_label(topology, d) - cs) % k)
    half = -(-len(order) // 2)
    return order[:half], order[half:][::-1]


def uniform_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Two messages (up, down) on the cycle; the longer path is sent first (one-port priority)."""
    dests = check_plan(topology, source, destinations, "uniform")
    src: Coord = (source[0], source[1])
    paths = []
    for mode, group in zip(("up", "down"), uniform_split(topology, src, dests), strict=True):
        if group:
            route = _CYCLE_ROUTES[mode]
            port = route(topology, src, group[0])
            assert port is not None
            paths.append((-route_hops(topology, src, group, route), port, [mode, _coords(group)]))
    return [(port, header) for _, port, header in sorted(paths, key=lambda p: p[0])]


def uniform_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey a ``[mode, D]`` cycle path header (mode 'up' or 'down')."""
    _torus_only(topology, "uniform")
    mode, raw = _mode(header, ("up", "down"), "uniform")
    dests = _path_list(topology, raw, "uniform destination list")
    deliver, rest, port = _path_step(topology, here, dests, _CYCLE_ROUTES[mode])
    return Forward(deliver, [] if port is None else [(port, [mode, _coords(rest)])], False)


# -- multipath-HCM (Wang & Hung 2009, ref. [22]) ----------------------------------------------------


def hcm_route(topology: Topology, u: Coord, v: Coord, high: bool) -> str | None:
    """The (x, y) routing function inside the high (or low) channel network; None when u = v.

    With the snake labels, the high network's channels are: along each row in the snake's
    direction (the wrap-around closing the row ring), and up each column (wrap-around N-1 → 0);
    the low network is their reverse. Move along the row if this row's direction is a shortest
    way round to x_v (or v is in this row), else go to the next row, whose direction is opposite."""
    if u == v:
        return None
    m, n = topology.cols, topology.rows
    s = 1 if high else -1
    row_dir = (1 if u[1] % 2 == 0 else -1) * s
    dy = ((v[1] - u[1]) * s) % n
    along = ((v[0] - u[0]) * row_dir) % m
    if along and (dy == 0 or 2 * along <= m):
        return _port("x", row_dir)
    return _port("y", s)


def _high(topology: Topology, u: Coord, v: Coord) -> str | None:
    """:func:`hcm_route` in the high-channel network."""
    return hcm_route(topology, u, v, True)


def _low(topology: Topology, u: Coord, v: Coord) -> str | None:
    """:func:`hcm_route` in the low-channel network."""
    return hcm_route(topology, u, v, False)


_HCM_ROUTES: dict[str, Route] = {"h1": _high, "h2": _high, "l1": _low, "l2": _low}


def hcm_split(topology: Topology, source: Coord, dests: Sequence[Coord]) -> dict[str, list[Coord]]:
    """D^h1, D^h2, D^l1, D^l2, each in visiting order.

    High = the destinations at most ⌊K/2⌋ snake steps ahead of the source (labels wrapping past
    K-1 to 0), in label order; low = the others, in reverse label order. Each is split by the
    source column as Lin–McKinley–Ni's multipath: h1 on the snake's forward side of x_s (first hop
    along the row), h2 the rest (first hop up); l1 on the backward side, l2 the rest (first hop down)."""
    k = topology.size
    ls = q_label(topology, source)
    x_s = source[0]
    forward_dir = 1 if source[1] % 2 == 0 else -1

    def ahead(d: Coord) -> int:
        """Snake steps from the source up to ``d``, wrapping past K-1 to 0."""
        return (q_label(topology, d) - ls) % k

    high = sorted((d for d in dests if ahead(d) <= k // 2), key=ahead)
    low = sorted((d for d in dests if ahead(d) > k // 2), key=ahead, reverse=True)
    return {
        "h1": [d for d in high if (d[0] - x_s) * forward_dir > 0],
        "h2": [d for d in high if (d[0] - x_s) * forward_dir <= 0],
        "l1": [d for d in low if (d[0] - x_s) * forward_dir < 0],
        "l2": [d for d in low if (d[0] - x_s) * forward_dir >= 0],
    }


def hcm_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Up to four messages, each with its forced first hop; longest path first (ties h1, h2, l1, l2)."""
    dests = check_plan(topology, source, destinations, "hcm")
    src: Coord = (source[0], source[1])
    forward_dir = 1 if src[1] % 2 == 0 else -1
    first = {"h1": _port("x", forward_dir), "h2": "+y", "l1": _port("x", -forward_dir), "l2": "-y"}
    paths = []
    for i, (mode, group) in enumerate(hcm_split(topology, src, dests).items()):
        if not group:
            continue
        hop = topology.neighbour(src, first[mode])
        assert hop is not None
        length = 1 + route_hops(topology, hop, group, _HCM_ROUTES[mode])
        paths.append((-length, i, first[mode], [mode, _coords(group)]))
    return [(port, header) for _, _, port, header in sorted(paths, key=lambda p: (p[0], p[1]))]


def hcm_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey a ``[mode, D]`` HCM path header (mode h1, h2: high network; l1, l2: low network)."""
    _torus_only(topology, "hcm")
    mode, raw = _mode(header, tuple(_HCM_ROUTES), "hcm")
    dests = _path_list(topology, raw, "hcm destination list")
    deliver, rest, port = _path_step(topology, here, dests, _HCM_ROUTES[mode])
    return Forward(deliver, [] if port is None else [(port, [mode, _coords(rest)])], False)


# -- T2W (Radwan, Hamed, Darwish & Abd El-Baky 2010, ref. [20]) -------------------------------------


def vertical_direction(topology: Topology, here: Coord, column: Sequence[Coord]) -> tuple[int, list[Coord]]:
    """The direction (±1) of the shorter one-way sweep of a column from ``here`` through all of
    ``column`` (ties: up), and the destinations in the order it meets them."""
    n = topology.rows
    up = max((d[1] - here[1]) % n for d in column)
    down = max((here[1] - d[1]) % n for d in column)
    dy = 1 if up <= down else -1
    return dy, sorted(column, key=lambda d: ((d[1] - here[1]) * dy) % n)


def _hmp_direction(topology: Topology, source: Coord, dests: Sequence[Coord]) -> int:
    """+1 or -1: the way round the source row whose arc covers every destination column sooner
    (ties: +x)."""
    m = topology.cols
    cols = {d[0] for d in dests if d[0] != source[0]}
    plus = max((x - source[0]) % m for x in cols)
    minus = max((source[0] - x) % m for x in cols)
    return 1 if plus <= minus else -1


def _vertical_send(topology: Topology, here: Coord, column: Sequence[Coord]) -> Send:
    """The first send of a vertical path through ``column`` (header ``['v', dy, D]``)."""
    dy, order = vertical_direction(topology, here, column)
    return (_port("y", dy), ["v", dy, _coords(order)])


def _hmp_step(topology: Topology, here: Coord, dests: Sequence[Coord], dx: int) -> Forward:
    """At a node of the horizontal main path: the HMP goes on (carried), the column's sweep starts."""
    deliver = here in dests
    column = [d for d in dests if d[0] == here[0] and d != here]
    rest = [d for d in dests if d[0] != here[0]]
    sends: list[Send] = []
    if rest:
        sends.append((_port("x", dx), ["hmp", dx, _coords(rest)]))
    if not column:
        return Forward(deliver, sends, False)
    sends.append(_vertical_send(topology, here, column))
    return Forward(deliver, sends, True, carried=len(sends) - 1)


def t2w_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """The horizontal main path (first start-up) and the source column's own vertical path."""
    dests = check_plan(topology, source, destinations, "t2w")
    src: Coord = (source[0], source[1])
    column = [d for d in dests if d[0] == src[0]]
    rest = [d for d in dests if d[0] != src[0]]
    sends: list[Send] = []
    if rest:
        dx = _hmp_direction(topology, src, rest)
        sends.append((_port("x", dx), ["hmp", dx, _coords(rest)]))
    if column:
        sends.append(_vertical_send(topology, src, column))
    return sends


def _sign(value: object, what: str) -> int:
    """A header direction: the int 1 or -1."""
    if type(value) is not int or value not in (1, -1):
        raise HeaderError(f"t2w header: {what} must be 1 or -1, got {value!r}")
    return value


def t2w_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Obey ``['hmp', dx, D]`` (main path) or ``['v', dy, D]`` (a vertical path)."""
    _torus_only(topology, "t2w")
    if isinstance(header, (list, tuple)) and len(header) == 3 and header[0] == "hmp":
        dx = _sign(header[1], "dx")
        dests = _path_list(topology, header[2], "t2w main-path destination list")
        return _hmp_step(topology, here, dests, dx)
    if not (isinstance(header, (list, tuple)) and len(header) == 3 and header[0] == "v"):
        raise HeaderError(f"t2w header must be ['hmp', dx, D] or ['v', dy, D], got {header!r}")
    dy = _sign(header[1], "dy")
    dests = _path_list(topology, header[2], "t2w vertical destination list")
    if any(d[0] != here[0] for d in dests):
        raise HeaderError(f"t2w vertical path at {here} names a destination outside column {here[0]}")
    deliver = dests[0] == here
    rest = dests[1:] if deliver else dests
    if not rest:
        return Forward(deliver, [], False)
    return Forward(deliver, [(_port("y", dy), ["v", dy, _coords(rest)])], False)


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "hcm",
        "torus-paths",
        hcm_prepare,
        hcm_forward,
        kinds=("torus",),
        summary="multipath-HCM: four paths, two in the high and two in the low channel network",
        source="reconstruction of seed 001 §2 (Wang & Hung 2009)",
    ),
    Algorithm(
        "t2w",
        "torus-paths",
        t2w_prepare,
        t2w_forward,
        kinds=("torus",),
        summary="horizontal main path round the source row, then vertical paths (two start-ups)",
        source="reconstruction of seed 001 §2 (Radwan et al. 2010)",
    ),
    Algorithm(
        "uniform",
        "torus-paths",
        uniform_prepare,
        uniform_forward,
        kinds=("torus",),
        summary="two paths on a Hamiltonian cycle, destinations split into equal halves",
        source="reconstruction of seed 001 §2 (Wang, Yen & Chu 2005)",
    ),
)
