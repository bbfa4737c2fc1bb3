"""mcast(n, d, c) message sets and plans (seed 002, Herley–Pietracaprina–Pucci).

An mcast(n, d, c) message set: every node of the n-node mesh sources one message with at most d
destinations, and no node is the destination of more than c messages (the congestion). This
module makes such sets — seeded random ones and Theorem 1's worst case — and turns one into a
:class:`~coordinator.workloads.plan.Plan` for one of the four rules of :mod:`node.routing.herley`,
computing what the paper's sorting and prefix primitives would compute (ranks, classes,
intermediate nodes, seeded random groups, migration selections) and handing it to each message
as parameters. Every packet move, copy and clone then happens in the emulation.

It also measures a run of such a set (:func:`mcast_stats`): completion time (the last
delivery's step) against √(cn), and peak buffer occupancy against c. Runs are forced into shared
contention (the messages compete for links and buffers, as in the paper); the paper's machine
is all-port (every link carries one packet per direction per step), which ``meshcast run
--mcast-set`` uses unless ``--port-model`` says otherwise.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from coordinator.workloads.plan import Multicast, Plan, PlanError, check_algorithm
from node.routing.herley import Rect, cells, tile_index, tiles
from node.topology import Coord, Topology

if TYPE_CHECKING:  # types only: the workloads layer sits below the runtimes that run them
    from coordinator.runtimes.records import RawRun, RunSettings

__all__ = [
    "ALGORITHMS",
    "KINDS",
    "McastSet",
    "McastStats",
    "lower_bound",
    "mcast_plan",
    "mcast_settings",
    "mcast_stats",
    "message_set",
    "random_params",
    "random_set",
    "tiles_params",
    "worst_set",
]

ALGORITHMS = ("replicate", "tree", "herley-tiles", "herley-random")
KINDS = ("random", "worst")
DEFAULT_R = 2
"""Migration cap per block and round, in copies per block node (the paper's r; its proof uses ≥ 150)."""


@dataclass(frozen=True, slots=True)
class McastSet:
    """A message set: one (source, destinations) per message; the requested d and c; A for 'worst'."""

    topology: Topology
    kind: str
    d: int
    c: int
    seed: int
    messages: tuple[tuple[Coord, tuple[Coord, ...]], ...]
    region: Rect | None = None

    @property
    def congestion(self) -> int:
        """The largest number of messages any node receives (the set's actual c)."""
        count: dict[Coord, int] = defaultdict(int)
        for _, ds in self.messages:
            for t in ds:
                count[t] += 1
        return max(count.values(), default=0)

    @property
    def degree(self) -> int:
        """The largest number of destinations of any message (the set's actual d)."""
        return max((len(ds) for _, ds in self.messages), default=0)

    @property
    def deliveries(self) -> int:
        return sum(len(ds) for _, ds in self.messages)


def _check(topology: Topology, d: int, c: int) -> None:
    if topology.kind != "mesh":
        raise PlanError(f"mcast(n, d, c) sets are defined on the mesh, not on {topology.spec}")
    n = topology.size
    if not 1 <= d < n or not 1 <= c < n:
        raise PlanError(f"mcast(n, d, c) needs 1 ≤ d, c < n = {n}; got d = {d}, c = {c}")


def _pick(rng: random.Random, pool: Sequence[Coord], left: Mapping[Coord, int], k: int) -> list[Coord]:
    """``k`` nodes of ``pool`` without replacement, each with weight = the capacity it has left."""
    keyed = [(rng.random() ** (1.0 / left[p]), p) for p in pool if left[p] > 0]
    keyed.sort(reverse=True)
    return [p for _, p in keyed[:k]]


def random_set(topology: Topology, d: int, c: int, seed: int = 1) -> McastSet:
    """Every node sources one message to at most ``d`` nodes; no node receives more than ``c``.

    Sources are taken in a seeded random order; each draws its destinations without
    replacement among the other nodes, with probability proportional to the capacity a node
    has left (c minus the messages it already receives): close to uniform while d ≪ c, and it
    fills every node up to c when d = c. A source may get fewer than d destinations only when
    fewer than d other nodes have capacity left; a message with none is left out.
    """
    _check(topology, d, c)
    rng = random.Random(seed)
    nodes = list(topology.nodes())
    left = dict.fromkeys(nodes, c)
    order = nodes[:]
    rng.shuffle(order)
    chosen: dict[Coord, tuple[Coord, ...]] = {}
    for src in order:
        ds = _pick(rng, [p for p in nodes if p != src], left, d)
        for t in ds:
            left[t] -= 1
        if ds:
            chosen[src] = tuple(sorted(ds))
    msgs = tuple((s, chosen[s]) for s in nodes if s in chosen)
    return McastSet(topology, "random", d, c, seed, msgs)


def worst_set(topology: Topology, d: int, c: int, seed: int = 1) -> McastSet:
    """Theorem 1's instance: c·|A| messages from outside a corner square A each have one destination in A.

    A is the square of side max(1, ⌊√(n / 2c)⌋) at the corner (0, 0) (a corner: only two of its
    sides can be entered), so that c·|A| ≤ n/2 ≤ |B|; every node of A receives exactly c
    messages, all of which must cross A's boundary: at least c·|A| / (2·side) steps. Those
    messages are sent by seeded random nodes of B; to make it an mcast(n, d, c) set of degree
    d, each also gets up to d − 1 destinations in B and every other node up to d destinations
    in B, drawn as in :func:`random_set` (no node receives more than c).
    """
    _check(topology, d, c)
    n = topology.size
    side = max(1, min(math.isqrt(n // (2 * c)), topology.cols, topology.rows))
    region: Rect = (0, 0, side, side)
    rng = random.Random(seed)
    nodes = list(topology.nodes())
    a_nodes = [p for p in nodes if p[0] < side and p[1] < side]
    b_nodes = [p for p in nodes if not (p[0] < side and p[1] < side)]
    need = c * len(a_nodes)
    if need > len(b_nodes):
        raise PlanError(f"{topology.spec}: c·|A| = {need} exceeds the {len(b_nodes)} nodes outside A")
    senders = rng.sample(b_nodes, need)
    into_a = {s: a_nodes[i % len(a_nodes)] for i, s in enumerate(senders)}
    left = {p: (0 if p in a_nodes else c) for p in nodes}
    order = nodes[:]
    rng.shuffle(order)
    chosen: dict[Coord, tuple[Coord, ...]] = {}
    for src in order:
        first = [into_a[src]] if src in into_a else []
        rest = _pick(rng, [p for p in b_nodes if p != src], left, d - len(first))
        for t in rest:
            left[t] -= 1
        if first or rest:
            chosen[src] = tuple(sorted(first + rest))
    msgs = tuple((s, chosen[s]) for s in nodes if s in chosen)
    return McastSet(topology, "worst", d, c, seed, msgs, region)


def message_set(topology: Topology, kind: str, d: int, c: int, seed: int = 1) -> McastSet:
    """``random_set`` or ``worst_set`` by name."""
    if kind == "random":
        return random_set(topology, d, c, seed)
    if kind == "worst":
        return worst_set(topology, d, c, seed)
    raise PlanError(f"unknown mcast set {kind!r}: use one of {', '.join(KINDS)}")


def lower_bound(mset: McastSet) -> int:
    """A lower bound on the completion time (steps) of any algorithm on this set.

    The largest source–destination distance; a node takes in at most 4 packets per step, so
    ⌈c / 4⌉; and, for the worst-case set, every message with a destination in A crosses one of
    the links entering A (Theorem 1's argument): ⌈(messages into A) / (links into A)⌉.
    """
    topo = mset.topology
    bound = max((topo.distance(s, t) for s, ds in mset.messages for t in ds), default=0)
    bound = max(bound, math.ceil(mset.congestion / 4))
    if mset.region is not None:
        x0, y0, w, h = mset.region

        def inside(p: Coord) -> bool:
            return x0 <= p[0] < x0 + w and y0 <= p[1] < y0 + h

        entering = sum(1 for a, _, b in topo.links() if inside(b) and not inside(a))
        crossing = sum(1 for s, ds in mset.messages if not inside(s) and any(inside(t) for t in ds))
        if entering:
            bound = max(bound, math.ceil(crossing / entering))
    return bound


# -- per-algorithm parameters (what the paper's sorting and prefix primitives compute) ------------
def _v2(x: int) -> int:
    """How many times 2 divides ``x``."""
    k = 0
    while x % 2 == 0 and x > 0:
        x //= 2
        k += 1
    return k


def tiles_params(mset: McastSet) -> list[dict[str, Any]]:
    """Theorem 2's level L and each message's intermediate node per c-tile (Step 2(b)).

    L = ⌊log₄ c⌋ (4^L ≤ c c-tiles), lowered until both sides split into 2^L equal parts. In each
    c-tile the messages with destinations there are put into classes C_j (2^j ≤ destinations in
    the tile < 2^(j+1)); a message of rank r in its class (by message number, the prefix order)
    gets the tile's node (r mod tile size), row-major, as its intermediate node.
    """
    topo = mset.topology
    c = max(1, mset.congestion)
    level = min(int(math.log(c, 4) + 1e-9), _v2(topo.cols), _v2(topo.rows))
    k = 1 << level
    side = (topo.cols // k, topo.rows // k)
    size = side[0] * side[1]
    per_tile: dict[int, list[tuple[int, int]]] = defaultdict(list)  # tile -> (message, count)
    for i, (_, ds) in enumerate(mset.messages):
        counts: dict[int, int] = defaultdict(int)
        for t in ds:
            counts[tile_index(t, side, k)] += 1
        for tile, cnt in counts.items():
            per_tile[tile].append((i, cnt))
    im: list[list[list[int]]] = [[] for _ in mset.messages]
    for tile, entries in per_tile.items():
        rank: dict[int, int] = defaultdict(int)
        for i, cnt in sorted(entries):
            cls = cnt.bit_length() - 1
            im[i].append([tile, rank[cls] % size])
            rank[cls] += 1
    return [{"level": level, "im": sorted(x)} for x in im]


def _blocks_per_tile(size: int) -> int:
    """b = √(tile size), as a power of two (the number of b-blocks in a tile)."""
    return 1 << max(0, round(math.log2(math.sqrt(size))))


def random_params(mset: McastSet, r: int = DEFAULT_R, seed: int = 1) -> list[dict[str, Any]]:
    """Theorem 3's phases for every message: seeded groups, intermediate slots, migration selections.

    Phase i uses c_i tiles, c_i the largest power of two ≤ min(c / 16^i, n / 16) that splits the mesh
    evenly (the paper assumes c ≤ n/16, larger c costing no more than circulating everything),
    K = ⌊log₁₆⌈c log²n / n⌉⌋ being the last phase;
    each tile is cut into b_i ≈ √(tile size) blocks. Step 1: every message still with unvisited
    destinations draws a tentative group uniformly (seeded); within each tentative group the
    messages, in message order, are cut into segments of one tile's size, numbered globally, and
    segments j and j + c_i form group G_j; a message's rank in its group gives its intermediate
    node (rank mod tile size, so at most two per node). Step 2, round k: group G_j is in tile
    T_(j+k) mod c_i; for each block the first r·(block size) members (by intermediate slot, then
    message number: the prefix order) with unvisited destinations in the block are selected,
    their copies placed on the block's nodes in turn, and those destinations marked visited.
    A phase has c_i rounds; the last one goes on until every destination is visited (Step 3).
    """
    if r < 1:
        raise PlanError(f"herley-random: r must be at least 1, got {r}")
    topo = mset.topology
    n = topo.size
    whole: Rect = (0, 0, topo.cols, topo.rows)
    c = max(1, mset.congestion)
    rng = random.Random(seed)
    ratio = math.ceil(c * math.log2(n) ** 2 / n)
    last = int(math.log(ratio, 16) + 1e-9) if ratio > 1 else 0
    unvisited = [set(ds) for _, ds in mset.messages]
    phases: list[list[list[Any]]] = [[] for _ in mset.messages]
    for i in range(last + 1):
        tl = tiles(whole, max(1, min(c // 16**i, n // 16)))
        nt = len(tl)
        tw, th = tl[0][2], tl[0][3]
        size = tw * th
        nb = len(tiles(tl[0], _blocks_per_tile(size)))
        alive = [m for m in range(len(mset.messages)) if unvisited[m]]
        if not alive:
            break
        tentative = {m: rng.randrange(nt) for m in alive}
        group: dict[int, int] = {}
        segment = 0
        for g in range(nt):
            members = [m for m in alive if tentative[m] == g]
            for pos, m in enumerate(members):
                group[m] = (segment + pos // size) % nt
            segment += -(-len(members) // size)
        slot: dict[int, int] = {}
        by_group: dict[int, list[int]] = defaultdict(list)
        for m in alive:
            slot[m] = len(by_group[group[m]]) % size
            by_group[group[m]].append(m)
        for g in by_group:
            by_group[g].sort(key=lambda m: (slot[m], m))
        # where each destination lies: relative tile grid position and block, per message
        block_rects = [tiles(t, nb) for t in tl]
        where: dict[Coord, tuple[int, int]] = {}
        for ti, bl in enumerate(block_rects):
            for bi, b in enumerate(bl):
                for p in cells(b):
                    where[p] = (ti, bi)
        todo: list[dict[int, dict[int, set[Coord]]]] = [
            defaultdict(lambda: defaultdict(set)) for _ in mset.messages
        ]
        for m in alive:
            for p in unvisited[m]:
                ti, bi = where[p]
                todo[m][ti][bi].add(p)
        selections: dict[int, list[list[int]]] = defaultdict(list)
        final = i == last
        rnd = 0
        while any(unvisited[m] for m in alive) if final else rnd < nt:
            if rnd > 64 * nt + 64:  # pragma: no cover - every round makes progress somewhere
                raise PlanError("herley-random: selection did not finish")
            for g, members in by_group.items():
                ti = (g + rnd) % nt
                taken: dict[int, int] = defaultdict(int)
                bsize = (block_rects[ti][0][2] * block_rects[ti][0][3]) if block_rects[ti] else 1
                for m in members:
                    blocks_here = todo[m].get(ti)
                    if not blocks_here:
                        continue
                    for bi in sorted(blocks_here):
                        if taken[bi] >= r * bsize:
                            continue
                        selections[m].append([rnd, bi, taken[bi] % bsize])
                        taken[bi] += 1
                        unvisited[m] -= blocks_here[bi]
                    for bi in [b for b in blocks_here if not unvisited[m] & blocks_here[b]]:
                        del blocks_here[bi]
                    if not blocks_here:
                        del todo[m][ti]
            rnd += 1
        for m in alive:
            if selections[m]:
                phases[m].append([nt, nb, group[m], slot[m], selections[m]])
    return [{"phases": p} for p in phases]


def mcast_plan(mset: McastSet, algorithm: str, params: Mapping[str, Any] | None = None) -> Plan:
    """One multicast per message (ids in source order, all injected at step 0) for ``algorithm``.

    ``params``: for ``tree`` the base rule (``base``, default vh) and its own parameters; for
    ``herley-random`` the migration cap ``r`` (default 2) and the ``seed`` of its random groups
    (default 1, fixed); other rules take none.
    """
    topo = mset.topology
    check_algorithm(algorithm, topo)
    extra = dict(params or {})
    per: list[dict[str, Any]]
    if algorithm == "herley-tiles":
        per = tiles_params(mset)
    elif algorithm == "herley-random":
        per = random_params(mset, int(extra.get("r", DEFAULT_R)), int(extra.get("seed", 1)))
    elif algorithm == "tree":
        base = {"base": "vh", **extra}
        check_algorithm(str(base["base"]), topo)
        per = [base] * len(mset.messages)
    else:
        per = [extra] * len(mset.messages)
    mcs = tuple(
        Multicast(i, algorithm, s, ds, 0, p)
        for i, ((s, ds), p) in enumerate(zip(mset.messages, per, strict=True))
    )
    return Plan(topo, mcs)


def mcast_settings(settings: RunSettings) -> RunSettings:
    """The run's settings with shared contention (every message competes for links and buffers)."""
    return replace(settings, contention="shared")


# -- results -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class McastStats:
    """What an mcast run is judged by: completion time vs √(cn), peak buffer vs c."""

    n: int
    messages: int
    deliveries: int
    d: int
    c: int
    time: int | None
    sqrt_cn: float
    lower_bound: int
    peak_buffer: int | None  # None: the runtime keeps no node statistics (the reference model)
    peak_held: int | None
    mean_occupancy: float | None
    busiest_copies: int | None  # the most packet copies one node made (the paper charges a step each)
    traffic: int
    delivered: int
    missing: int
    duplicates: int
    dropped: int

    @property
    def time_ratio(self) -> float | None:
        return None if self.time is None else self.time / self.sqrt_cn

    @property
    def buffer_ratio(self) -> float | None:
        if self.peak_buffer is None:
            return None
        return self.peak_buffer / self.c if self.c else math.nan

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["time_over_sqrt_cn"] = self.time_ratio
        out["peak_buffer_over_c"] = self.buffer_ratio
        return out


def _plan_set(plan: Plan) -> McastSet:
    msgs = tuple((m.source, tuple(m.destinations)) for m in plan.multicasts)
    return McastSet(plan.topology, "plan", 0, 0, 0, msgs)


def mcast_stats(plan: Plan, raw: RawRun, mset: McastSet | None = None) -> McastStats:
    """Completion time (last first delivery, all injected at 0), √(cn) with the set's actual c, buffers."""
    s = mset or _plan_set(plan)
    dests = {m.id: set(m.destinations) for m in plan.multicasts}
    first: dict[tuple[int, Coord], int] = {}
    duplicates = 0
    for a in raw.arrivals:
        if a.node not in dests.get(a.mc, ()):
            continue
        key = (a.mc, a.node)
        if key in first:
            duplicates += 1
            first[key] = min(first[key], a.step)
        else:
            first[key] = a.step
    total = s.deliveries
    n = plan.topology.size
    c = s.congestion
    complete = len(first) == total
    stats = raw.node_stats.values()
    measured = bool(raw.peak_queue) and bool(raw.node_stats)
    return McastStats(
        n=n,
        messages=len(plan.multicasts),
        deliveries=total,
        d=s.degree,
        c=c,
        time=max(first.values(), default=0) if complete else None,
        sqrt_cn=math.sqrt(c * n),
        lower_bound=lower_bound(s),
        peak_buffer=max(raw.peak_queue.values()) if measured else None,
        peak_held=int(max(st.get("peak_out", 0) for st in stats)) if measured else None,
        mean_occupancy=max(st.get("mean_occupancy", 0.0) for st in stats) if measured else None,
        busiest_copies=int(max(st.get("copies", 0) for st in stats)) if measured else None,
        traffic=sum(raw.traffic.values()),
        delivered=len(first),
        missing=total - len(first),
        duplicates=duplicates,
        dropped=raw.dropped,
    )
