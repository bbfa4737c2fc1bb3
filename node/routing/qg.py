"""Qualified Groups (QG, seed 004 §3, Al-Dubai, Ould-Khaoua & Mackenzie): a reconstruction.

The paper gives Phases 1–4 in prose, Definitions 2–7 and the pseudo-code of Figs. 4–5, which
disagree in places; the readings chosen here (each marked *choice*) keep the text's definitions:

* Phase 1 — multicast area G_MA: per dimension l = min and u = max over the source and the
  destinations, mid = ⌊(l + u) / 2⌋ (Definition 2).
* Phase 2 — divisor dimension (Definition 3): N_j = |#{d : d_j > mid_j} − #{d : d_j ≤ mid_j}|, the
  imbalance of destination counts between the halves l..mid and mid+1..u (*choice*: D[d_j↑] read
  as a count of destinations; Fig. 4's ⌈(D↑ − D↓)/mid⌉ over l..mid−1 / mid..u is not used); the
  smallest N_j wins, ties to x. Primary groups: G_MA cut at mid in every dimension — 2^n = 4 in
  2D, the empty ones dropped (eq. 1); numbered with the divisor dimension as the major axis.
* Phase 3 — weights: Int(G) = Dist(p_f, p_n) + N_G (eq. 2), Ext(G) = Dist(p_n, p) (eq. 3; Fig. 5
  writes p_f, *choice*: the equation), W_m = Ext + Int (eq. 4), p_n / p_f the member nearest /
  farthest from the source (ties: smallest (x, y)). W_av = mean W_m over the primary groups
  (eq. 5); QP = (W_m − W_av)/W_av (eq. 6); qualified iff W_m ≤ W_av or QP ≤ TD (Definition 7).
  An unqualified primary group is bisected (*choice*, reading Fig. 5's "G_i = G_i / sub" as
  successive halving): its worst unqualified part is cut at the mid of its own area (its members'
  bounding box) along its own divisor dimension, until every part qualifies or the group has
  2^n = 4 parts (the paper's bound); a single destination is indivisible and so qualified.
  Parts are compared with the primary groups' W_av.
* Phase 4 — representatives: the member nearest the source. The source reaches them by two
  disjoint paths (Fig. 8: *choice*, the dual-path high/low paths, R-routed), then each
  representative reaches its group by dual-path in parallel: two start-ups
  (node/routing/twolevel.py). The paper illustrates with dimension-ordered base routing and
  says any base routing works; R keeps every path deadlock-free.

Mesh only, as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from node.routing.base import Algorithm, Forward, Header, Param, Params, PlanError, Send, check_destinations
from node.routing.twolevel import two_level_forward, two_level_prepare
from node.topology import Coord, Topology

__all__ = [
    "ALGORITHMS",
    "DEFAULT_TD",
    "Area",
    "QGPlan",
    "divisor_dimension",
    "multicast_area",
    "primary_groups",
    "qg_forward",
    "qg_groups",
    "qg_plan",
    "qg_prepare",
    "weight",
]

DEFAULT_TD = 0.5
TD_PARAM: Final = Param(
    "TD", "float", DEFAULT_TD, "qualified-group threshold", 0, 1, open_low=True, open_high=True
)
DIMS = 2
MAX_PARTS = 2**DIMS


@dataclass(frozen=True, slots=True)
class Area:
    """A multicast area: per dimension the lower corner l, upper corner u and mid."""

    lo: tuple[int, int]
    hi: tuple[int, int]
    mid: tuple[int, int]


@dataclass(frozen=True, slots=True)
class QGPlan:
    """Every intermediate result of the grouping, for inspection and tests."""

    area: Area
    divisor: int
    primary: list[list[Coord]]
    w_av: float
    groups: list[list[Coord]]


def multicast_area(nodes: Sequence[Coord]) -> Area:
    """Definition 2: the smallest box holding ``nodes``, with mid = ⌊(l + u)/2⌋ per dimension."""
    lo = (min(n[0] for n in nodes), min(n[1] for n in nodes))
    hi = (max(n[0] for n in nodes), max(n[1] for n in nodes))
    return Area(lo, hi, ((lo[0] + hi[0]) // 2, (lo[1] + hi[1]) // 2))


def divisor_dimension(area: Area, dests: Sequence[Coord]) -> int | None:
    """Definition 3: the dimension whose halves hold the most even destination counts.

    Only dimensions the area spans (l < u) can divide; None if it spans none. Ties: lower one.
    """
    best: tuple[int, int] | None = None
    for j in range(DIMS):
        if area.lo[j] == area.hi[j]:
            continue
        upper = sum(1 for d in dests if d[j] > area.mid[j])
        n_j = abs(upper - (len(dests) - upper))
        if best is None or n_j < best[0]:
            best = (n_j, j)
    return None if best is None else best[1]


def primary_groups(source: Coord, dests: Sequence[Coord]) -> tuple[Area, int, list[list[Coord]]]:
    """Phases 1–2: G_MA, its divisor dimension (x if it spans none) and the non-empty quadrants."""
    area = multicast_area([source, *dests])
    div = divisor_dimension(area, dests)
    major = 0 if div is None else div
    minor = 1 - major
    quads: dict[tuple[bool, bool], list[Coord]] = {}
    for d in sorted(dests):
        key = (d[major] > area.mid[major], d[minor] > area.mid[minor])
        quads.setdefault(key, []).append(d)
    return area, major, [quads[k] for k in sorted(quads)]


def _nearest(topology: Topology, source: Coord, group: Sequence[Coord]) -> Coord:
    """p_n: the member nearest the source (ties: smallest (x, y))."""
    return min(group, key=lambda m: (topology.distance(source, m), m))


def _farthest(topology: Topology, source: Coord, group: Sequence[Coord]) -> Coord:
    """p_f: the member farthest from the source (ties: smallest (x, y))."""
    return min(group, key=lambda m: (-topology.distance(source, m), m))


def weight(topology: Topology, source: Coord, group: Sequence[Coord]) -> int:
    """W_m = Ext + Int = Dist(p_n, p) + Dist(p_f, p_n) + N_G (eqs. 2–4)."""
    pn, pf = _nearest(topology, source, group), _farthest(topology, source, group)
    return topology.distance(pn, source) + topology.distance(pf, pn) + len(group)


def _qualified(w: int, w_av: float, td: float) -> bool:
    """Definition 7: W_m ≤ W_av, or QP = (W_m − W_av)/W_av ≤ TD."""
    return w <= w_av or (w - w_av) / w_av <= td


def _bisect(group: list[Coord]) -> tuple[list[Coord], list[Coord]] | None:
    """Cut a group at the mid of its own area along its own divisor dimension (None: one node)."""
    area = multicast_area(group)
    j = divisor_dimension(area, group)
    if j is None:
        return None
    return [d for d in group if d[j] <= area.mid[j]], [d for d in group if d[j] > area.mid[j]]


def qg_plan(topology: Topology, source: Coord, dests: Sequence[Coord], td: float = DEFAULT_TD) -> QGPlan:
    """Phases 1–3: the qualified groups (disjoint, covering ``dests``), with the steps that led there."""
    if not dests:
        return QGPlan(Area(source, source, source), 0, [], 0.0, [])
    area, div, primary = primary_groups(source, dests)
    w_av = sum(weight(topology, source, g) for g in primary) / len(primary)
    groups: list[list[Coord]] = []
    for g in primary:
        parts = [g]
        while len(parts) < MAX_PARTS:
            weights = [weight(topology, source, p) for p in parts]
            open_ = [i for i, p in enumerate(parts) if len(p) > 1 and not _qualified(weights[i], w_av, td)]
            if not open_:
                break
            i = max(open_, key=lambda k: (weights[k], -k))  # the worst part; ties: the first
            halves = _bisect(parts[i])
            assert halves is not None  # two distinct nodes always span a dimension
            parts[i : i + 1] = list(halves)
        groups += parts
    return QGPlan(area, div, primary, w_av, groups)


def qg_groups(
    topology: Topology, source: Coord, dests: Sequence[Coord], td: float = DEFAULT_TD
) -> list[list[Coord]]:
    """The qualified groups alone (see :func:`qg_plan`)."""
    return qg_plan(topology, source, dests, td).groups


def qg_prepare(
    topology: Topology, source: Coord, destinations: Sequence[Coord], params: Params
) -> list[Send]:
    """QG: qualified groups with threshold TD, then two-level dual-path (two start-ups)."""
    if topology.is_torus:
        raise PlanError("qg groups destinations within a mesh's multicast area: it runs on a mesh only")
    td = float(TD_PARAM.check(params.get("TD", DEFAULT_TD)))
    dests = check_destinations(topology, source, destinations)
    return two_level_prepare(topology, source, qg_groups(topology, source, dests, td))


def qg_forward(topology: Topology, here: Coord, header: Header) -> Forward:
    """Representative headers and group paths (node/routing/twolevel.py)."""
    return two_level_forward(topology, here, header)


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm(
        "qg",
        "qg",
        qg_prepare,
        qg_forward,
        kinds=("mesh",),
        summary="Qualified Groups (threshold TD): balanced groups, two-level dual-path (reconstruction)",
        source="seed 004 §3, Phases 1–4, Figs. 4–5",
        params=(TD_PARAM,),
    ),
)
