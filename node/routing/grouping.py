"""Proximity grouping (seed 003, Chen, Chang & Sheu): two-level path multicast over disjoint sub-meshes.

Destinations are grouped so that each group's bounding sub-mesh is disjoint from the others';
the source reaches the group leaders (the member nearest the source) by dual-path routing, then
every leader reaches its group by dual-path routing in parallel, a second start-up
(Algorithm 1; node/routing/twolevel.py). Mesh only, as in the paper (its groups are sub-meshes).

* ``group-graph`` (§3.1, Algorithm 2): recursive hyperplane bisection of the complete
  Manhattan-weighted proximity graph, each cut maximising the weight of the crossing edges;
  stop when |D'| / (nodes of D''s bounding sub-mesh) ≥ T (param ``"T"``, default 1/2). The
  paper's formula writes a sum of side lengths in the denominator, but its own example (3/4 for
  a 2×2 box) divides by the node count, which is what we do.
* ``group-pattern`` (§3.2, Algorithm 3): maximin-distance cluster seeking (Euclidean), then the
  other destinations join in lexicographic order, opening a new cluster where joining would make
  two sub-meshes overlap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from node.routing.base import Algorithm, Forward, Header, Params, PlanError, Send
from node.routing.hamiltonian import check_destinations
from node.routing.twolevel import two_level_forward, two_level_prepare
from node.topology import Coord, Topology

__all__ = [
    "ALGORITHMS",
    "DEFAULT_T",
    "box",
    "graph_groups",
    "graph_split",
    "group_forward",
    "group_graph_prepare",
    "group_pattern_prepare",
    "maximin_representatives",
    "pattern_groups",
    "read_fraction",
]

DEFAULT_T = 0.5
Box = tuple[int, int, int, int]
"""A sub-mesh as (x_lo, x_hi, y_lo, y_hi), inclusive."""


def box(nodes: Sequence[Coord]) -> Box:
    """The bounding sub-mesh of some nodes."""
    xs, ys = [n[0] for n in nodes], [n[1] for n in nodes]
    return (min(xs), max(xs), min(ys), max(ys))


def _box_nodes(b: Box) -> int:
    """How many mesh nodes a sub-mesh holds."""
    return (b[1] - b[0] + 1) * (b[3] - b[2] + 1)


def _overlap(a: Box, b: Box) -> bool:
    """Do two sub-meshes share a node?"""
    return a[0] <= b[1] and b[0] <= a[1] and a[2] <= b[3] and b[2] <= a[3]


def read_fraction(params: Params, key: str, default: float, *, hi_inclusive: bool, what: str) -> float:
    """Read a threshold in (0, 1] (or (0, 1)) from params; a bad value is a PlanError naming it."""
    raw = params.get(key, default)
    value: float | None = None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw)
        except ValueError:
            value = None
    ok = (
        value is not None
        and math.isfinite(value)
        and value > 0
        and (value <= 1 if hi_inclusive else value < 1)
    )
    if not ok or value is None:
        bound = "0 < {k} ≤ 1" if hi_inclusive else "0 < {k} < 1"
        raise PlanError(f"{what} {key}={raw!r} is invalid: it must be a number with {bound.format(k=key)}")
    return value


# -- graph-based (Algorithm 2) ------------------------------------------------------------------


def graph_split(nodes: Sequence[Coord]) -> tuple[int, int, list[Coord], list[Coord]]:
    """The hyperplane x_dim = H with the heaviest crossing edges: (weight, dim, D1 ≥ H, D2 < H).

    Ties go to the lower dimension, then the smaller H. Weights are updated as nodes move across
    the sweeping hyperplane, O(|D|²) per dimension. Needs two distinct nodes.
    """
    n = len(nodes)
    dist = [[abs(a[0] - b[0]) + abs(a[1] - b[1]) for b in nodes] for a in nodes]
    best: tuple[int, int, int] | None = None  # (weight, dim, H)
    for dim in (0, 1):
        order = sorted(range(n), key=lambda i: nodes[i][dim])
        upper, lower = set(order), set[int]()  # D1 (≥ H) and D2 (< H)
        weight, k = 0, 0
        while k < n:
            v = nodes[order[k]][dim]
            if lower and (best is None or weight > best[0]):  # a cut at H = v
                best = (weight, dim, v)
            while k < n and nodes[order[k]][dim] == v:
                i = order[k]
                upper.discard(i)
                weight += sum(dist[i][j] for j in upper) - sum(dist[i][j] for j in lower)
                lower.add(i)
                k += 1
    if best is None:
        raise ValueError("graph_split needs at least two distinct nodes")
    weight, dim, h = best
    return weight, dim, [c for c in nodes if c[dim] >= h], [c for c in nodes if c[dim] < h]


def graph_groups(dests: Sequence[Coord], threshold: float = DEFAULT_T) -> list[list[Coord]]:
    """Algorithm 2: split recursively until |D'| / nodes(SM_D') ≥ T; groups in depth-first order."""
    out: list[list[Coord]] = []
    stack: list[list[Coord]] = [sorted(dests)] if dests else []
    while stack:
        group = stack.pop()
        if len(group) == 1 or len(group) / _box_nodes(box(group)) >= threshold:
            out.append(group)
            continue
        _, _, d1, d2 = graph_split(group)
        stack += [d2, d1]  # D1 (the ≥ side) first
    return out


# -- pattern-based (Algorithm 3) ----------------------------------------------------------------


def maximin_representatives(dests: Sequence[Coord]) -> list[Coord]:
    """Maximin-distance cluster seeking (Batchelor–Wilkins; Tou–Gonzalez), Euclidean.

    c1 = the lexicographically smallest destination (the paper picks one "arbitrarily"); c2 = the
    farthest from c1; then the destination whose distance to its nearest representative is largest
    becomes one too while that distance is at least half the mean distance between representatives.
    (Seed 003's worked example adds the distances to c1 and c2 instead of taking the minimum, which
    contradicts the maximin rule it cites; we follow the rule.) Ties: lexicographically smallest.
    """
    pts = sorted(dests)
    if not pts:
        return []
    reps = [pts[0]]
    rest = pts[1:]
    if not rest:
        return reps
    far = max(rest, key=lambda d: (math.dist(d, reps[0]), _neg(d)))
    reps.append(far)
    rest.remove(far)
    pair_sum = math.dist(reps[0], reps[1])
    while rest:
        cand = max(rest, key=lambda d: (min(math.dist(d, c) for c in reps), _neg(d)))
        gap = min(math.dist(cand, c) for c in reps)
        pairs = len(reps) * (len(reps) - 1) // 2
        if gap < (pair_sum / pairs) / 2:
            break
        pair_sum += sum(math.dist(cand, c) for c in reps)
        reps.append(cand)
        rest.remove(cand)
    return reps


def _neg(c: Coord) -> tuple[int, int]:
    """A key that makes max() prefer the lexicographically smallest node on ties."""
    return (-c[0], -c[1])


def pattern_groups(dests: Sequence[Coord]) -> list[list[Coord]]:
    """Algorithm 3: maximin clusters grown in lexicographic order into disjoint sub-meshes.

    Each remaining destination p (in (x, y) order) joins its nearest representative's group
    (Euclidean; ties: earlier representative) if the grown sub-mesh overlaps no other group's;
    otherwise p opens a new group (the paper's C ∪ {p}) — except when p already lies inside
    another group's sub-mesh, where a new group could not be disjoint: p then joins that group,
    whose sub-mesh does not change (our addition; the paper does not consider the case).
    """
    reps = maximin_representatives(dests)
    groups: list[list[Coord]] = [[r] for r in reps]
    boxes: list[Box] = [box(g) for g in groups]
    centres: list[Coord] = list(reps)
    for p in sorted(set(dests) - set(reps)):
        i = min(range(len(centres)), key=lambda k: (math.dist(p, centres[k]), k))
        grown = box([*groups[i], p])
        if not any(_overlap(grown, boxes[k]) for k in range(len(boxes)) if k != i):
            groups[i].append(p)
            boxes[i] = grown
            continue
        home = next((k for k, b in enumerate(boxes) if _overlap((p[0], p[0], p[1], p[1]), b)), None)
        if home is not None:
            groups[home].append(p)
        else:
            groups.append([p])
            boxes.append(box([p]))
            centres.append(p)
    return [sorted(g) for g in groups]


# -- the rules ----------------------------------------------------------------------------------


def _mesh_only(topology: Topology, name: str) -> None:
    """Refuse a torus (the registry does too; this guards direct calls)."""
    if topology.is_torus:
        raise PlanError(f"{name} groups destinations into sub-meshes: it runs on a mesh only")


def group_graph_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Graph-based proximity grouping (threshold T), then two-level DP."""
    _mesh_only(topology, "group-graph")
    threshold = read_fraction(params, "T", DEFAULT_T, hi_inclusive=True, what="group-graph threshold")
    dests = check_destinations(topology, source, destinations)
    return two_level_prepare(topology, source, graph_groups(dests, threshold))


def group_pattern_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """Pattern-based (maximin) proximity grouping, then two-level DP."""
    _mesh_only(topology, "group-pattern")
    dests = check_destinations(topology, source, destinations)
    return two_level_prepare(topology, source, pattern_groups(dests))


def group_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Leader headers and group paths (node/routing/twolevel.py)."""
    return two_level_forward(topology, here, header)


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "group-graph",
        "grouping",
        group_graph_prepare,
        group_forward,
        kinds=("mesh",),
        summary="graph-based proximity grouping (threshold T), two-level dual-path",
        source="seed 003 §3.1, Algorithms 1–2",
    ),
    Algorithm(
        "group-pattern",
        "grouping",
        group_pattern_prepare,
        group_forward,
        kinds=("mesh",),
        summary="pattern-based (maximin) proximity grouping, two-level dual-path",
        source="seed 003 §3.2, Algorithms 1 and 3",
    ),
)
