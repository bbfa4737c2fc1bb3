"""Per-multicast metrics and their aggregates (mean and 95% confidence interval).

time = max arrival step over destinations (counted from the injection step); traffic = link
traversals; additional traffic = traffic − destinations; cv = population SD / mean of the
destinations' arrival steps (seed 004 §4.2.2), cv_wall the same of their wall-clock latencies;
jitter = per node, over repetitions of one multicast, the mean, SD, median, IQR, p95 and p99 of
its arrival latency (steps and wall clock; quantiles as :func:`quantile` computes them).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from coordinator.analysis.result_types import (
    CI,
    ArrivalResult,
    JitterResult,
    LinkUse,
    MulticastResult,
    Spread,
    Summary,
    WormRun,
)
from coordinator.runtimes.records import Arrival, RawRun
from coordinator.workloads.plan import Multicast, Plan

__all__ = [
    "ci",
    "ci95",
    "jitter",
    "multicast_metrics",
    "quantile",
    "spread",
    "summarise",
    "t_critical",
    "worm_runs",
]

# two-sided 95% Student t critical values for df = 1..30
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_critical(df: int) -> float:
    if df < 1:
        return math.nan
    if df <= 30:
        return _T95[df - 1]
    # Cornish-Fisher style expansion around the normal quantile, good to 3 decimals above 30
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def ci95(values: Sequence[float]) -> dict[str, Any]:
    """Mean and the 95% confidence interval of the mean (Student t)."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return {"mean": None, "ci95": [None, None], "n": 0}
    mean = statistics.fmean(vals)
    if len(vals) < 2:
        return {"mean": mean, "ci95": [mean, mean], "n": len(vals)}
    half = t_critical(len(vals) - 1) * statistics.stdev(vals) / math.sqrt(len(vals))
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": len(vals)}


def quantile(values: Sequence[float], p: float) -> float:
    """The ``p`` quantile (0 ≤ p ≤ 1) of ``values`` by linear interpolation between order statistics.

    With the values sorted x[0] ≤ … ≤ x[n−1] and h = (n−1)·p, it is x[⌊h⌋] + (h−⌊h⌋)·(x[⌊h⌋+1] −
    x[⌊h⌋]): Hyndman and Fan's type 7, numpy's default ("linear") and what
    ``statistics.quantiles(values, method="inclusive")`` gives. The median is p = 0.5; one value
    is every quantile of itself. ValueError for no values or p outside [0, 1].
    """
    if not values:
        raise ValueError("the quantile of no values")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a quantile's p is within [0, 1], got {p}")
    xs = sorted(values)
    h = (len(xs) - 1) * p
    lo = math.floor(h)
    if lo + 1 >= len(xs):
        return float(xs[-1])
    return xs[lo] + (h - lo) * (xs[lo + 1] - xs[lo])


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, population SD, median, IQR (p75 − p25), p95 and p99 of ``values`` (see :func:`quantile`)."""
    return {
        "mean": statistics.fmean(values),
        "sd": statistics.pstdev(values),
        "median": quantile(values, 0.5),
        "iqr": quantile(values, 0.75) - quantile(values, 0.25),
        "p95": quantile(values, 0.95),
        "p99": quantile(values, 0.99),
    }


def _cv(values: Sequence[float]) -> float | None:
    """Population SD / mean of the destinations' arrival latencies (seed 004's CV), or None."""
    if not values:
        return None
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean else 0.0


def multicast_metrics(
    plan: Plan, raw: RawRun, trace: bool = False, worms: bool = False
) -> list[MulticastResult]:
    """One record per multicast of ``plan`` (``links`` with ``trace``; ``worms``: with a trace under
    wormhole switching, each multicast's flit runs beside its ``links``)."""
    by_mc: dict[int, list[Arrival]] = defaultdict(list)
    for a in raw.arrivals:
        by_mc[a.mc].append(a)
    links_by_mc: dict[int, list[LinkUse]] = defaultdict(list)
    if trace:
        topo = plan.topology
        for mc, node, port, step in sorted(raw.trace, key=lambda e: (e[0], e[3], e[1], e[2])):
            links_by_mc[mc].append(LinkUse(frm=(node[0], node[1]), to=topo.neighbour(node, port), step=step))
    out = [
        _one(m, by_mc.get(m.id, []), raw, links_by_mc.get(m.id) if trace else None) for m in plan.multicasts
    ]
    if trace and worms:
        runs = worm_runs(plan, raw)
        out = [replace(rec, worms=tuple(runs.get(rec.id, ()))) for rec in out]
    return out


def worm_runs(plan: Plan, raw: RawRun) -> dict[int, list[WormRun]]:
    """Per multicast, its wormhole flit runs ordered by first step, node, ports (:class:`WormRun`)."""
    topo = plan.topology
    out: dict[int, list[WormRun]] = defaultdict(list)
    for mc, node, came, port, worm, first, count in sorted(
        raw.worms, key=lambda e: (e[0], e[5], e[1], e[2], e[3])
    ):
        to = None if port == "ej" else topo.neighbour(node, port)
        out[mc].append(
            WormRun(
                frm=(node[0], node[1]),
                to=to,
                came=came,
                port=port,
                worm=(worm[0], worm[1], worm[2]),
                first=first,
                count=count,
            )
        )
    return out


def _one(m: Multicast, arrivals: list[Arrival], raw: RawRun, links: list[LinkUse] | None) -> MulticastResult:
    dests = set(m.destinations)
    first: dict[tuple[int, int], Arrival] = {}
    duplicates = stray = 0
    for a in sorted(arrivals, key=lambda r: (r.step, r.node)):
        if a.node not in dests:
            stray += 1
        elif a.node in first:
            duplicates += 1
        else:
            first[a.node] = a
    steps = [a.step - m.step for a in first.values()]  # logical latency since injection
    inj = raw.injected.get(m.id)
    recs = []
    walls: list[int] = []  # wall-clock latency of the destinations that have one
    for d in m.destinations:
        hit = first.get(d)
        if hit is None:
            continue
        a = hit
        wall = None
        if inj is not None and a.wall_ns is not None and a.host == inj[1]:
            wall = a.wall_ns - inj[0]
            walls.append(wall)
        recs.append(
            ArrivalResult(
                node=d,
                step=a.step,
                hops=a.hops,
                startups=a.startups,
                wall_ns=wall,
                host=a.host if wall is not None else None,
            )
        )
    traffic = raw.traffic.get(m.id, 0)
    return MulticastResult(
        id=m.id,
        algorithm=m.algorithm,
        source=m.source,
        destinations=tuple(m.destinations),
        injected=m.step,
        time=max(steps) if len(steps) == len(dests) else None,
        traffic=traffic,
        distinct_links=len(raw.links.get(m.id, ())),
        additional_traffic=traffic - len(dests),
        mean_arrival=statistics.fmean(steps) if steps else None,
        cv=_cv(steps),
        # over the same destinations in wall clock; None unless every one has a wall time
        cv_wall=_cv(walls) if len(walls) == len(recs) else None,
        missing=tuple(d for d in m.destinations if d not in first),
        duplicates=duplicates,
        stray=stray,
        arrivals=tuple(recs),
        links=None if links is None else tuple(links),
    )


SUMMARY_FIELDS = ("time", "traffic", "additional_traffic", "mean_arrival", "cv")
"""The logical metrics: a sweep's columns and ``meshcast plot``'s panels."""
WALL_FIELDS = ("cv_wall",)
"""Metrics of the wall clock, summarised by ``run`` beside SUMMARY_FIELDS (a sweep leaves them out)."""


def ci(values: Sequence[float]) -> CI:
    """:func:`ci95` as a record."""
    return CI.from_json(ci95(values))


def summarise(records: Iterable[MulticastResult]) -> Summary:
    """Mean and 95% CI of each metric (SUMMARY_FIELDS and WALL_FIELDS) over ``records``."""
    recs = list(records)
    cis = {}
    for f in (*SUMMARY_FIELDS, *WALL_FIELDS):
        values = [r.metric(f) for r in recs]
        cis[f] = ci([v for v in values if v is not None])
    return Summary(**cis)


def jitter(records: Iterable[MulticastResult]) -> list[JitterResult]:
    """Per node, over repetitions of the same multicast: the :func:`spread` of its arrival latency.

    In steps (``steps``: mean, SD, median, IQR, p95, p99, counted from each repetition's
    injection; ``step_mean``, … in JSON) and in wall-clock ns (``wall_ns``; None without wall
    times, the SD also with a single one). A multicast made once has no row. Hand it the kept
    repetitions only: warm-up ones are the caller's to leave out.
    """
    groups: dict[tuple[Any, ...], list[MulticastResult]] = defaultdict(list)
    for r in records:
        groups[(r.algorithm, r.source, r.destinations)].append(r)
    out = []
    for (alg, src, _), recs in groups.items():
        if len(recs) < 2:
            continue
        per_node: dict[tuple[int, int], list[tuple[int, ArrivalResult]]] = defaultdict(list)
        for r in recs:
            for a in r.arrivals:  # latency in steps counts from the repetition's injection
                per_node[a.node].append((a.step - r.injected, a))
        for node, arr in sorted(per_node.items()):
            steps = spread([lat for lat, _ in arr])
            walls = [a.wall_ns for _, a in arr if a.wall_ns is not None]
            wall: dict[str, float | None] = dict(spread(walls)) if walls else dict.fromkeys(steps)
            if len(walls) < 2:
                wall["sd"] = None
            out.append(
                JitterResult(
                    algorithm=alg,
                    source=src,
                    node=node,
                    repetitions=len(arr),
                    steps=Spread(**steps),
                    wall_ns=Spread(**wall),
                    host=next((a.host for _, a in arr if a.host), None),
                )
            )
    return out
