"""Many multicasts at once, mcast(n, d, c) (seed 002, Herley–Pietracaprina–Pucci), as header-driven rules.

Four rules, all for the mesh (the paper's network), all meant for shared contention:

* ``replicate`` — the baseline the paper improves on: the source makes one unicast copy per
  destination and each copy goes its own XY way (the ``unicast`` rule under another name).
* ``tree`` — one tree multicast per message with any registered rule, named by the parameter
  ``base`` (default ``vh``); the header is ``[base, base's header]`` and every hop runs the base
  rule's ``forward``.
* ``herley-tiles`` — Theorem 2, the O(c)-buffer deterministic algorithm.
* ``herley-random`` — Theorem 3, the constant-buffer randomized algorithm.

**Itineraries.** Both Herley rules carry an itinerary in the header: a list of *stops*
``[x, y, deliver, spawns]``. A packet travels XY to its first stop; there it is delivered if
``deliver`` is 1, every route in ``spawns`` becomes a new packet (a copy, made here, in the
emulation), and the packet itself goes on to its next stop, or ends if there is none. A route
whose first stop is the node itself is acted on at once. The phases of the paper are therefore
waypoints and copy instructions in headers; every move, copy and clone happens hop by hop in the
emulation. What needs global knowledge — the ranks, prefixes, group and tile assignments and the
seeded random choices of the paper's sorting and prefix primitives — is computed by the
coordinator when it builds the plan (``coordinator/workloads/mcast.py``) and given to ``prepare`` as
parameters; ``prepare`` turns them, with the geometry below, into the source's itinerary.

**Geometry.** A rectangle is split into a power-of-two number of equal tiles by halving its
longer side while it is even (:func:`tiles`); tiles, and the nodes of a block, are listed along a
Hamiltonian cycle of the grid where one exists (an even side), else along a snake
(:func:`cycle_order`, Fact 1 of the paper).

**herley-tiles** (Theorem 2). Parameters ``level`` L (the mesh is cut into 4^L "c-tiles",
4^L ≤ c) and ``im``, the intermediate node (a row-major slot) of each c-tile holding destinations
of this message, from the coordinator's per-class ranking (Step 2(b)). Step 1: a holder at level
i sends a copy to its 4^i-sibling in each other quadrant of its 4^i-tile, which does the same at
level i + 1; after L levels each holder relays its copy to the intermediate node of its c-tile
(Step 2(c)), which makes one clone per destination in the tile (Step 2(d)), each routed XY to
its destination (Step 2(e)). Simplifications: (1) no copy is sent into a quadrant that holds
none of the message's destinations (the paper copies every packet everywhere and strips the
addresses in Step 2(a), so such a copy would be discarded unused); (2) the levels are not
separated by barriers: a copy starts its next level on arrival, so levels and steps overlap in
time instead of running one after another; (3) the (O(c), O(c))-routings of Proposition 2 are
plain greedy XY routing with FIFO queues.

**herley-random** (Theorem 3). Parameter ``phases``: per phase the message takes part in,
``[tiles, blocks, group, slot, selections]`` — the number of c_i-tiles, of b_i-blocks per tile,
the message's group G_j, its intermediate node (a row-major slot of the tile, Step 1(e)) and the
selections made for it by the t-migration primitive (Step 2(a)), ``[round, block, slot]``: in
``round`` k the master copy, then in tile T_{(j+k) mod c_i}, sends a packet-copy to node ``slot``
(in cycle order) of block ``block``, and that copy visits the message's not yet visited
destinations in the block in Hamiltonian-cycle order (Step 2(b)). The master moves from tile to
tile along the cycle of tiles, to the same relative position (Step 2(c)). Simplifications: (1)
no barriers: rounds and phases overlap in time, as above; (2) a packet-copy walks XY from one
destination to the next in cycle order and stops after its last one (the paper circulates every
copy once round the whole block and then discards it); (3) a master copy stops once it has no
selections left (in the paper it circulates with its group to the end of the phase, carrying
nothing for anyone); (4) sorting, ranking and the seeded random group choices are the
coordinator's, and the constant r of Step 2(a) is a parameter there (the proof needs r ≥ 150;
any r ≥ 1 is correct).

Without the coordinator's parameters (a lone multicast, ``meshcast run --dests``) the rules still
deliver: ``herley-tiles`` becomes level 0 with the source as its own intermediate node (clones
from the source), ``herley-random`` one copy from the source touring the destinations in the
mesh's cycle order. Only ``coordinator/workloads/mcast.py``'s plans make them the paper's algorithms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from node.routing import unicast
from node.routing.base import Algorithm, Forward, Header, HeaderError, Param, Params, PlanError, Send
from node.topology import Coord, Topology

__all__ = [
    "ALGORITHMS",
    "MAX_ROUTES",
    "Rect",
    "cells",
    "cycle_order",
    "grid_shape",
    "itinerary_forward",
    "quadrants",
    "random_prepare",
    "slot_node",
    "tile_index",
    "tiles",
    "tiles_prepare",
    "tree_forward",
    "tree_prepare",
]

Rect = tuple[int, int, int, int]
"""x0, y0, width, height."""

MAX_ROUTES = 1 << 16
"""At most this many routes are acted on at one node for one packet (a bad header's guard)."""


# -- geometry ------------------------------------------------------------------------------------
def grid_shape(width: int, height: int, count: int) -> tuple[int, int]:
    """(gx, gy), gx·gy the largest power of two ≤ ``count`` reachable by halving the longer even side."""
    gx = gy = 1
    while gx * gy * 2 <= count:
        tw, th = width // gx, height // gy
        if tw >= th and tw % 2 == 0:
            gx *= 2
        elif th % 2 == 0:
            gy *= 2
        elif tw % 2 == 0:
            gx *= 2
        else:
            break
    return gx, gy


def cycle_order(gx: int, gy: int) -> list[tuple[int, int]]:
    """The cells of a gx × gy grid along a Hamiltonian cycle (one side even), else a snake path."""
    if gx >= 2 and gy >= 2 and gy % 2 == 0:
        order = [(x, 0) for x in range(gx)]
        for y in range(1, gy):
            xs = range(gx - 1, 0, -1) if y % 2 == 1 else range(1, gx)
            order.extend((x, y) for x in xs)
        order.extend((0, y) for y in range(gy - 1, 0, -1))
        return order
    if gx >= 2 and gy >= 2 and gx % 2 == 0:
        return [(x, y) for y, x in cycle_order(gy, gx)]
    snake: list[tuple[int, int]] = []
    for y in range(gy):
        snake.extend((x, y) for x in (range(gx) if y % 2 == 0 else range(gx - 1, -1, -1)))
    return snake


def tiles(rect: Rect, count: int) -> list[Rect]:
    """``rect`` cut into equal tiles (see :func:`grid_shape`), listed along the cycle of tiles."""
    x0, y0, w, h = rect
    gx, gy = grid_shape(w, h, count)
    tw, th = w // gx, h // gy
    return [(x0 + i * tw, y0 + j * th, tw, th) for i, j in cycle_order(gx, gy)]


def quadrants(rect: Rect) -> list[Rect]:
    """The four quadrants of a rectangle with even sides (row-major)."""
    x0, y0, w, h = rect
    hw, hh = w // 2, h // 2
    return [(x0, y0, hw, hh), (x0 + hw, y0, hw, hh), (x0, y0 + hh, hw, hh), (x0 + hw, y0 + hh, hw, hh)]


def cells(rect: Rect) -> list[Coord]:
    """The nodes of ``rect`` along its Hamiltonian cycle (or snake)."""
    x0, y0, w, h = rect
    return [(x0 + i, y0 + j) for i, j in cycle_order(w, h)]


def slot_node(rect: Rect, slot: int) -> Coord:
    """Node number ``slot`` of ``rect`` in row-major order (modulo its size)."""
    x0, y0, w, h = rect
    s = slot % (w * h)
    return (x0 + s % w, y0 + s // w)


def _inside(c: Coord, rect: Rect) -> bool:
    x0, y0, w, h = rect
    return x0 <= c[0] < x0 + w and y0 <= c[1] < y0 + h


def tile_index(c: Coord, side: tuple[int, int], per_row: int) -> int:
    """Row-major index of the tile of size ``side`` holding ``c`` (``per_row`` tiles a row)."""
    return (c[1] // side[1]) * per_row + c[0] // side[0]


# -- itineraries ---------------------------------------------------------------------------------
def _stop(value: object, topology: Topology) -> tuple[Coord, bool, list[Any]]:
    if not (isinstance(value, (list, tuple)) and len(value) == 4):
        raise HeaderError(f"itinerary stop must be [x, y, deliver, spawns], got {value!r:.80}")
    x, y, deliver, spawns = value
    if type(x) is not int or type(y) is not int or not topology.contains((x, y)):
        raise HeaderError(f"itinerary stop ({x!r}, {y!r}) is not a node of {topology.spec}")
    if deliver not in (0, 1) or type(deliver) not in (int, bool):
        raise HeaderError(f"itinerary deliver flag must be 0 or 1, got {deliver!r}")
    if not isinstance(spawns, (list, tuple)):
        raise HeaderError("itinerary spawns must be a list of routes")
    return (x, y), bool(deliver), list(spawns)


def _act(topology: Topology, here: Coord, routes: Sequence[Any]) -> tuple[bool, list[Send]]:
    """Act on ``routes`` at ``here``: deliver?, and the ordered sends (spawns before the continuation)."""
    deliver = False
    sends: list[Send] = []
    work = list(routes)
    i = 0
    while i < len(work):
        route = work[i]
        i += 1
        if not isinstance(route, (list, tuple)) or not route:
            raise HeaderError(f"itinerary route must be a non-empty list of stops, got {route!r:.80}")
        target, flag, spawns = _stop(route[0], topology)
        if target != here:
            port = topology.xy_next(here, target)
            assert port is not None
            sends.append((port, list(route)))
            continue
        deliver = deliver or flag
        work.extend(spawns)
        if len(route) > 1:
            work.append(list(route[1:]))
        if len(work) > MAX_ROUTES:
            raise HeaderError(f"itinerary spawns more than {MAX_ROUTES} routes at one node")
    return deliver, sends


def itinerary_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Travel XY to the first stop; there deliver, spawn the copies and go on to the next stop."""
    deliver, sends = _act(topology, here, [header])
    return Forward(deliver, sends, False)


def _dests(topology: Topology, source: Coord, destinations: Sequence[Coord]) -> list[Coord]:
    dests = [(int(d[0]), int(d[1])) for d in destinations]
    if source in dests:
        raise PlanError("the source is one of its own destinations")
    if len(set(dests)) != len(dests):
        raise PlanError("a destination is listed twice")
    return dests


def _int(params: Params, name: str) -> int:
    v = params.get(name)
    if type(v) is not int or v < 0:
        raise PlanError(f"parameter {name!r} must be a non-negative integer, got {v!r}")
    return v


def _far_first(origin: Coord, nodes: Sequence[Coord]) -> list[Coord]:
    return sorted(nodes, key=lambda d: (-(abs(d[0] - origin[0]) + abs(d[1] - origin[1])), d))


def _leaf(d: Coord) -> list[Any]:
    return [[d[0], d[1], 1, []]]


# -- herley-tiles (Theorem 2) --------------------------------------------------------------------
def tiles_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """The source's sends for Theorem 2: sibling replication over L levels, relay, clones."""
    dests = _dests(topology, source, destinations)
    level = _int(params, "level") if "level" in params else 0
    k = 1 << level
    if topology.cols % k or topology.rows % k:
        raise PlanError(f"level {level}: {topology.spec} does not split into {k}×{k} equal tiles")
    side = (topology.cols // k, topology.rows // k)
    im: dict[int, int] = {}
    for entry in params.get("im", []):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and all(type(v) is int for v in entry)):
            raise PlanError(f"parameter 'im' entries must be [tile, slot], got {entry!r}")
        im[entry[0]] = entry[1]

    def holder(pos: Coord, rect: Rect, here_dests: list[Coord], levels: int) -> list[Any]:
        spawns: list[Any] = []
        cur, cur_dests = rect, here_dests
        for lv in range(levels):
            quads = quadrants(cur)
            mine = next(q for q in quads if _inside(pos, q))
            for q in sorted(quads, key=lambda q: -(abs(q[0] - mine[0]) + abs(q[1] - mine[1]))):
                qd = [d for d in cur_dests if _inside(d, q)]
                if q == mine or not qd:
                    continue  # simplification (1): no copy where nothing is to be delivered
                sib = (q[0] + pos[0] - mine[0], q[1] + pos[1] - mine[1])
                spawns.append([[sib[0], sib[1], 0, holder(sib, q, qd, levels - lv - 1)]])
            cur, cur_dests = mine, [d for d in cur_dests if _inside(d, mine)]
        if cur_dests:
            t = tile_index((cur[0], cur[1]), side, k)
            node = slot_node(cur, im[t]) if t in im else pos
            clones = [_leaf(d) for d in _far_first(node, [d for d in cur_dests if d != node])]
            spawns.append([[node[0], node[1], int(node in cur_dests), clones]])
        return spawns

    whole = (0, 0, topology.cols, topology.rows)
    deliver, sends = _act(topology, source, holder(source, whole, dests, level))
    assert not deliver
    return sends


# -- herley-random (Theorem 3) -------------------------------------------------------------------
def random_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """The source's sends for Theorem 3: the master copy's tour of tiles and its packet-copies."""
    dests = _dests(topology, source, destinations)
    todo = set(dests)
    whole = (0, 0, topology.cols, topology.rows)
    stops: list[Any] = []
    phases = params.get("phases")
    if phases is None:  # no plan: one copy from the source tours the whole mesh's cycle
        phases = [[1, 1, 0, topology.index(source), [[0, 0, cells(whole).index(source)]]]]
    if not isinstance(phases, (list, tuple)):
        raise PlanError("parameter 'phases' must be a list of [tiles, blocks, group, slot, selections]")
    for ph in phases:
        if not (isinstance(ph, (list, tuple)) and len(ph) == 5 and isinstance(ph[4], (list, tuple))):
            raise PlanError(f"bad phase {ph!r:.80}")
        n_tiles, n_blocks, group, slot, selections = ph
        tl = tiles(whole, int(n_tiles))
        if len(tl) != n_tiles:
            raise PlanError(f"{topology.spec} does not split into {n_tiles} equal tiles")
        by_round: dict[int, list[tuple[int, int]]] = {}
        for sel in selections:
            if not (isinstance(sel, (list, tuple)) and len(sel) == 3 and all(type(v) is int for v in sel)):
                raise PlanError(f"selection must be [round, block, slot], got {sel!r}")
            by_round.setdefault(sel[0], []).append((sel[1], sel[2]))
        for rnd in range(max(by_round, default=-1) + 1):
            tile = tl[(int(group) + rnd) % len(tl)]
            pos = slot_node(tile, int(slot))
            blocks = tiles(tile, int(n_blocks))
            spawns: list[Any] = []
            for b, s in by_round.get(rnd, ()):
                ring = cells(blocks[b % len(blocks)])
                start = ring[s % len(ring)]
                at = ring.index(start)
                visit = [d for d in ring[at:] + ring[:at] if d in todo]
                if not visit:
                    raise PlanError(f"selection [{rnd}, {b}, {s}] has nothing left to visit")
                todo.difference_update(visit)
                copy = [[start[0], start[1], int(visit[0] == start), []]]
                copy.extend([d[0], d[1], 1, []] for d in visit if d != start)
                spawns.append(copy)
            stops.append([pos[0], pos[1], 0, spawns])
    if todo:
        raise PlanError(f"{len(todo)} destination(s) are never selected, e.g. {sorted(todo)[0]}")
    deliver, sends = _act(topology, source, [stops] if stops else [])
    assert not deliver
    return sends


# -- tree: one tree multicast per message with a registered rule --------------------------------
_WRAPPERS = frozenset({"tree", "replicate", "herley-tiles", "herley-random"})


_lookup: list[Callable[[str], Algorithm]] = []


def bind_registry(lookup: Callable[[str], Algorithm]) -> None:
    """Called by the registry once it holds every rule: how ``tree`` finds its base rule.

    (Importing the registry from here would make an import cycle with the package.)
    """
    _lookup[:] = [lookup]


def _base(name: object) -> Algorithm:
    if not isinstance(name, str) or name in _WRAPPERS:
        raise HeaderError(f"tree: base must name a registered tree rule, got {name!r}")
    return _lookup[0](name)


def tree_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """The base rule's sends (``params['base']``, default vh), each header tagged with its name."""
    name = params.get("base", "vh")
    try:
        base = _base(name)
    except (HeaderError, KeyError) as exc:
        raise PlanError(str(exc)) from None
    why = base.unsupported(topology)
    if why:
        raise PlanError(why)
    inner = {k: v for k, v in params.items() if k != "base"}
    return [(p, [name, h]) for p, h in base.prepare(topology, source, destinations, inner)]


def tree_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Run the named base rule on the inner header and keep the tag on what it sends."""
    if not (isinstance(header, (list, tuple)) and len(header) == 2):
        raise HeaderError(f"tree header must be [base, header], got {header!r:.80}")
    name, inner = header
    fwd = _base(name).forward(topology, here, inner)
    return Forward(fwd.deliver, [(p, [name, h]) for p, h in fwd.sends], fwd.startup, fwd.carried)


SOURCE = "seed 002 (Herley, Pietracaprina, Pucci)"
ALGORITHMS = (
    Algorithm(
        "replicate",
        "mcast",
        unicast.prepare,
        unicast.forward,
        kinds=("mesh",),
        summary="mcast(n,d,c) baseline: one XY unicast copy per destination, made at the source",
        source=SOURCE + " §1",
    ),
    Algorithm(
        "tree",
        "mcast",
        tree_prepare,
        tree_forward,
        kinds=("mesh", "torus"),
        summary="one tree multicast per message with the rule named by --param base=NAME (default vh)",
        source=SOURCE + " (baseline)",
        params=(
            Param("base", "algorithm", "vh", "the tree rule each message uses (its parameters pass on)"),
        ),
    ),
    Algorithm(
        "herley-tiles",
        "mcast",
        tiles_prepare,
        itinerary_forward,
        kinds=("mesh",),
        summary="Theorem 2: replicate into every c-tile by siblings, clone at ranked intermediates",
        source=SOURCE + " Thm 2",
        params=(
            Param("level", "int", 0, "tile levels L (2^L × 2^L tiles)", 0, 30),
            Param("im", "list", [], "[tile, slot] intermediate of each tile (computed by the workload)"),
        ),
    ),
    Algorithm(
        "herley-random",
        "mcast",
        random_prepare,
        itinerary_forward,
        kinds=("mesh",),
        summary="Theorem 3: random groups tour the tiles; migrated copies sweep their blocks",
        source=SOURCE + " Thm 3",
        params=(
            Param("phases", "list", None, "the tour's phases (computed by the workload)"),
            Param("r", "int", 2, "migration cap per block node and round (workload)", 1, 1_000_000),
            Param("seed", "int", 1, "seed of the random groups (workload)", 0, 2**63 - 1),
        ),
    ),
)
