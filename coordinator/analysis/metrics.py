"""Per-multicast metrics and their aggregates (mean and 95% confidence interval).

time = max arrival step over destinations (counted from the injection step); traffic = link
traversals; additional traffic = traffic − destinations; cv = population SD / mean of the
destinations' arrival steps (seed 004 §4.2.2), cv_wall the same of their wall-clock latencies;
jitter = per node, over repetitions of one multicast, the mean, sample SD, median, IQR, p95 and p99
of its arrival latency (steps and wall clock; quantiles as :func:`quantile` computes them), with
95% CIs for the median (:func:`median_ci`) and the SD (:func:`sd_ci`); p95 only from
P95_MIN_REPETITIONS kept repetitions and p99 from P99_MIN_REPETITIONS (below, the tail quantile is
the largest value under another name).
"""

from __future__ import annotations

import functools
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
    TelemetrySplit,
    WormRun,
)
from coordinator.analysis.telemetry import Split, split, variance_split
from coordinator.runtimes.records import Arrival, RawRun
from coordinator.workloads.plan import Multicast, Plan

__all__ = [
    "P95_MIN_REPETITIONS",
    "P99_MIN_REPETITIONS",
    "chi2_quantile",
    "ci",
    "ci95",
    "jitter",
    "median_ci",
    "multicast_metrics",
    "pstdev",
    "quantile",
    "sample_sd",
    "sd_ci",
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


def sample_sd(values: Sequence[float]) -> float | None:
    """The sample standard deviation √(Σ(x − x̄)² / (n − 1)) (Bessel's n − 1), None below two
    values: the one SD of every table over repetitions (jitter, --predict, the CIs)."""
    return statistics.stdev(values) if len(values) >= 2 else None


def ci95(values: Sequence[float]) -> dict[str, Any]:
    """Mean and the 95% confidence interval of the mean (Student t)."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return {"mean": None, "ci95": [None, None], "n": 0}
    mean = statistics.fmean(vals)
    if len(vals) < 2:
        return {"mean": mean, "ci95": [mean, mean], "n": len(vals)}
    sd = sample_sd(vals)
    assert sd is not None
    half = t_critical(len(vals) - 1) * sd / math.sqrt(len(vals))
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


P95_MIN_REPETITIONS = 20
"""p95 is reported from this many kept repetitions on; with fewer it is "—" (from 20 values the
type-7 p95 interpolates between the two largest: below that it is the maximum, renamed)."""
P99_MIN_REPETITIONS = 100
"""p99 is reported from this many kept repetitions on; with fewer it is "—"."""


def median_ci(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% CI of the median by exact order statistics: [x₍ₗ₎, x₍ₙ₋ₗ₊₁₎] (1-based, sorted),
    ``l`` the largest with P(B ≤ l − 1) ≤ 0.025 for B ~ Binomial(n, ½). It covers the median with
    probability 1 − 2·P(B ≤ l − 1) ≥ 95% whatever the (continuous) distribution; n = 20 gives
    [x₍₆₎, x₍₁₅₎], n = 100 [x₍₄₀₎, x₍₆₁₎]. None below 6 values (even [min, max] covers less)."""
    n = len(values)
    total, cum, term, low = 2**n, 0, 1, 0  # term = C(n, k), cum = Σ C(n, j) for j ≤ k
    for k in range(n):
        cum += term
        if 40 * cum > total:  # P(B ≤ k) > 0.025
            break
        low = k + 1
        term = term * (n - k) // (k + 1)
    if low == 0:
        return None
    xs = sorted(values)
    return (float(xs[low - 1]), float(xs[n - low]))


def _gamma_p(a: float, x: float) -> float:
    """The regularised lower incomplete gamma function P(a, x) (a series below a + 1, a
    continued fraction above; Numerical Recipes §6.2), to about 1e-14."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(10_000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return total * math.exp(log_front)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return 1.0 - math.exp(log_front) * h


@functools.lru_cache(maxsize=256)
def chi2_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of the chi-square distribution with ``df`` degrees of freedom (bisection
    on :func:`_gamma_p` to a relative 1e-12; cached: a run's rows share their df)."""
    if not 0 < p < 1 or df < 1:
        raise ValueError(f"chi-square quantile of p = {p} with {df} degrees of freedom")
    lo, hi = 0.0, max(1.0, df + 20 * math.sqrt(2 * df))
    while _gamma_p(df / 2, hi / 2) < p:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if _gamma_p(df / 2, mid / 2) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2


def sd_ci(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95% CI of the SD: s·√((n − 1)/χ²₀.₉₇₅), s·√((n − 1)/χ²₀.₀₂₅) with n − 1 degrees of
    freedom, s the :func:`sample_sd`. Exact for normal data; heavy tails (a host's stalls) make it
    too narrow, which the median's CI, free of any distribution, is not. None below 2 values."""
    s = sample_sd(values)
    if s is None:
        return None
    df = len(values) - 1
    return (s * math.sqrt(df / chi2_quantile(0.975, df)), s * math.sqrt(df / chi2_quantile(0.025, df)))


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample SD (:func:`sample_sd`; None for one value), median, IQR (p75 − p25), p95 and
    p99 of ``values`` (see :func:`quantile`; each tail None below its minimum of values,
    P95_MIN_REPETITIONS and P99_MIN_REPETITIONS), and the 95% CIs of the median and the SD."""
    n = len(values)
    return {
        "mean": statistics.fmean(values),
        "sd": sample_sd(values),
        "median": quantile(values, 0.5),
        "iqr": quantile(values, 0.75) - quantile(values, 0.25),
        "p95": quantile(values, 0.95) if n >= P95_MIN_REPETITIONS else None,
        "p99": quantile(values, 0.99) if n >= P99_MIN_REPETITIONS else None,
        "median_ci": median_ci(values),
        "sd_ci": sd_ci(values),
    }


_SQRT_OF_FRACTION = getattr(statistics, "_float_sqrt_of_frac", None)
"""The correctly rounded square root of n / m that :func:`statistics.pstdev` ends with (CPython 3.11+)."""


def pstdev(values: Sequence[float]) -> float:
    """:func:`statistics.pstdev`, the same float: of integers (steps, nanoseconds) computed with
    integers, where the standard library's exact fractions took a tenth of a reproduction's metrics."""
    if _SQRT_OF_FRACTION is None or not all(type(v) is int for v in values):
        return statistics.pstdev(values)
    n = len(values)
    total = sum(values)
    squares = sum([v * v for v in values])  # ints, checked above
    return float(_SQRT_OF_FRACTION(n * squares - total * total, n * n))


def _cv(values: Sequence[float]) -> float | None:
    """Population SD / mean of the destinations' arrival latencies (seed 004's CV), or None."""
    if not values:
        return None
    mean = statistics.fmean(values)
    return pstdev(values) / mean if mean else 0.0


def multicast_metrics(
    plan: Plan, raw: RawRun, trace: bool = False, worms: bool = False, per_arrival: bool = True
) -> list[MulticastResult]:
    """One record per multicast of ``plan`` (``links`` with ``trace``; ``worms``: with a trace under
    wormhole switching, each multicast's flit runs beside its ``links``). Without ``per_arrival``
    the records have no ``arrivals`` and no ``cv_wall``: a sweep's tidy rows use neither, and one
    record per delivery was a sixth of its metrics' time."""
    by_mc: dict[int, list[Arrival]] = defaultdict(list)
    for a in raw.arrivals:
        by_mc[a.mc].append(a)
    links_by_mc: dict[int, list[LinkUse]] = defaultdict(list)
    if trace:
        topo = plan.topology
        for mc, node, port, step in sorted(raw.trace, key=lambda e: (e[0], e[3], e[1], e[2])):
            links_by_mc[mc].append(LinkUse(frm=(node[0], node[1]), to=topo.neighbour(node, port), step=step))
    out = [
        _one(m, by_mc.get(m.id, []), raw, links_by_mc.get(m.id) if trace else None, per_arrival)
        for m in plan.multicasts
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


def _first_arrivals(
    dests: set[tuple[int, int]], arrivals: list[Arrival]
) -> tuple[dict[tuple[int, int], Arrival], int, int]:
    """Each destination's first arrival (by step, then node), and the duplicate and stray counts.

    Most multicasts reach each destination once: then no order is needed, and none is made.
    """
    first: dict[tuple[int, int], Arrival] = {}
    stray = 0
    for a in arrivals:
        node = a.node
        if node not in dests:
            stray += 1
        elif node in first:
            break  # a duplicate: which one came first needs the order
        else:
            first[node] = a
    else:
        return first, 0, stray
    return _ordered_first_arrivals(dests, arrivals)


def _ordered_first_arrivals(
    dests: set[tuple[int, int]], arrivals: list[Arrival]
) -> tuple[dict[tuple[int, int], Arrival], int, int]:
    """:func:`_first_arrivals` by the arrivals' order (step, then node): what decides a duplicate."""
    first: dict[tuple[int, int], Arrival] = {}
    duplicates = stray = 0
    for a in sorted(arrivals, key=lambda r: (r.step, r.node)):
        if a.node not in dests:
            stray += 1
        elif a.node in first:
            duplicates += 1
        else:
            first[a.node] = a
    return first, duplicates, stray


def _one(
    m: Multicast, arrivals: list[Arrival], raw: RawRun, links: list[LinkUse] | None, per_arrival: bool = True
) -> MulticastResult:
    dests = set(m.destinations)
    first, duplicates, stray = _first_arrivals(dests, arrivals)
    steps = [a.step - m.step for a in first.values()]  # logical latency since injection
    inj = raw.injected.get(m.id)
    k = raw.dilation
    recs = []
    walls: list[int] = []  # wall-clock latency of the destinations that have one
    for d in m.destinations if per_arrival else ():
        hit = first.get(d)
        if hit is None:
            continue
        a = hit
        wall = None
        parts = None
        if inj is not None and a.wall_ns is not None and a.host == inj[1]:
            wall = round((a.wall_ns - inj[0]) / k)  # --time-dilation: the emulated network's time
            walls.append(wall)
            if a.tel is not None and a.tel[1] == inj[0]:  # the path starts at this injection
                parts = split(a.tel, a.wall_ns)
                parts = Split(round(parts.link / k), wall - round(parts.link / k), parts.hops)
        recs.append(
            ArrivalResult(
                node=d,
                step=a.step,
                hops=a.hops,
                startups=a.startups,
                wall_ns=wall,
                host=a.host if wall is not None else None,
                link_ns=None if parts is None else parts.link,
                node_ns=None if parts is None else parts.residence,
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
        cv_wall=_cv(walls) if len(walls) == len(recs) and per_arrival else None,
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

    In steps (``steps``: mean, SD, median, IQR, p95, p99 and the CIs, counted from each
    repetition's injection; ``step_mean``, … in JSON) and in wall-clock ns (``wall_ns``; None
    without wall times, the SD also with a single one; the tails by the rule of :func:`spread`).
    A multicast made once has no row. Hand it the kept repetitions only: warm-up ones are the
    caller's to leave out.
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
            wall = spread(walls) if walls else dict.fromkeys(steps)
            links = [a.link_ns for _, a in arr if a.link_ns is not None]
            nodes = [a.node_ns for _, a in arr if a.node_ns is not None]
            told = len(links) >= 2 and len(links) == len(walls)  # every wall time split, two or more
            out.append(
                JitterResult(
                    algorithm=alg,
                    source=src,
                    node=node,
                    repetitions=len(arr),
                    steps=Spread(**steps),
                    wall_ns=Spread(**wall),
                    host=next((a.host for _, a in arr if a.host), None),
                    link_ns=Spread(**spread(links)) if told else None,
                    node_ns=Spread(**spread(nodes)) if told else None,
                )
            )
    return out


def telemetry_split(records: Iterable[MulticastResult]) -> TelemetrySplit | None:
    """The kept repetitions' per-node variance of latency in parts (:func:`variance_split`), per
    destination of each repeated multicast; None when no delivery carried telemetry."""
    groups: dict[tuple[Any, ...], list[Split]] = defaultdict(list)
    for r in records:
        for a in r.arrivals:
            if a.link_ns is not None and a.node_ns is not None:
                key = (r.algorithm, r.source, r.destinations, a.node)
                groups[key].append(Split(a.link_ns, a.node_ns, a.hops))
    if not groups:
        return None
    return variance_split(groups.values())
