"""Issue 34's study (``meshcast reproduce variation``): the algorithms and conditions it compares, its
tidy rows, and the statistics made from them (per-node SDs and CVs, their fits against h, the families
compared at equal h). The experiment and command are in :mod:`coordinator.reproduce.variation`, the plots
and report in :mod:`coordinator.reproduce._variation_report`.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, TypeVar, cast

from coordinator.analysis.fits import Fit, fit_loglog, fit_sqrt, iqr_sd, mean_ci
from coordinator.reproduce import framework
from node.topology import Coord

__all__ = [
    "ALGORITHMS",
    "COLOURS",
    "CONDITIONS",
    "DEFAULT_REPEAT",
    "LABELS",
    "TREES",
    "ArrivalRow",
    "CvRow",
    "Equal",
    "Families",
    "MulticastRow",
    "NodeRow",
    "Read",
    "SetRow",
    "Stats",
    "SummaryRow",
    "cv_rows",
    "equal_h",
    "families",
    "node_rows",
    "rounded",
    "sd_by_h",
    "stats",
    "summary_rows",
    "xy",
]

DEFAULT_REPEAT = 20
ALGORITHMS = ("vh", "diag", "dist", "pair", "min", "dp", "mp")
TREES = frozenset({"vh", "diag", "dist", "pair", "min"})
LABELS: Mapping[str, str] = {a: a.upper() for a in ALGORITHMS}
COLOURS: Mapping[str, str] = {
    "vh": "#1f77b4",
    "diag": "#ff7f0e",
    "dist": "#2ca02c",
    "pair": "#9467bd",
    "min": "#8c564b",
    "dp": "#d62728",
    "mp": "#e377c2",
}
CONDITIONS = ("bare", "link")


def _columns(names: str) -> tuple[str, ...]:
    return tuple(names.split())


ARRIVAL_COLUMNS = _columns("condition algorithm set rep warmup node hops step latency_ns link_ns node_ns ok")
MULTICAST_COLUMNS = _columns(
    "condition algorithm set rep warmup id source destinations reached duplicates stray wall_ok complete"
)
SET_COLUMNS = _columns("set source destinations")
NODE_COLUMNS = _columns("condition algorithm set node hops n mean_ms sd_ms iqr_sd_ms")
CV_COLUMNS = _columns("condition algorithm set rep cv cv_hops mean_ms max_ms")
SUMMARY_COLUMNS = _columns(
    "condition algorithm family nodes mean_h max_h sd_ms sd_lo sd_hi a_ms a_lo a_hi k k_lo k_hi "
    "iqr_sd_ms iqr_sd_lo iqr_sd_hi a_iqr_ms a_iqr_lo a_iqr_hi k_iqr k_iqr_lo k_iqr_hi ms_per_link "
    "cv cv_lo cv_hi cv_hops multicasts"
)


McKey = tuple[str, str, int, int]  # condition, algorithm, set, repetition


class ArrivalRow(TypedDict):
    """A row of arrivals.csv: one delivery at a destination, timed (``ok``) on its source's host or not."""

    condition: str
    algorithm: str
    set: int
    rep: int
    warmup: int
    node: str  # "x,y"
    hops: int
    step: int
    latency_ns: int | None
    """In the emulated network's time: wall-clock ns divided by the condition's time dilation."""
    link_ns: int | None
    """Of the latency, the time on links (send at one node to receive at the next), from the
    per-hop telemetry; None without it (an earlier run's files)."""
    node_ns: int | None
    """Of the latency, the time in nodes (receive to send, or to delivery): latency − link_ns."""
    ok: int


class MulticastRow(TypedDict):
    """A row of multicasts.csv: one multicast and how completely its destinations were reached."""

    condition: str
    algorithm: str
    set: int
    rep: int
    warmup: int
    id: int
    source: str
    destinations: int
    reached: int
    duplicates: int
    stray: int
    wall_ok: int
    complete: int


class SetRow(TypedDict):
    """A row of sets.csv: a destination set, its source and destinations as "x,y" separated by spaces."""

    set: int
    source: str
    destinations: str


class NodeRow(TypedDict):
    """A row of nodes.csv: one destination's latency over the kept repetitions (ms)."""

    condition: str
    algorithm: str
    set: int
    node: str
    hops: int
    n: int
    mean_ms: float
    sd_ms: float | None
    iqr_sd_ms: float | None


class CvRow(TypedDict):
    """A row of cv.csv: one kept complete multicast's node-level CV and its latencies (ms)."""

    condition: str
    algorithm: str
    set: int
    rep: int
    cv: float | None
    cv_hops: float
    mean_ms: float
    max_ms: float


class SummaryRow(TypedDict):
    """A row of summary.csv: one algorithm's :class:`Stats` under one condition, each fit with its CI."""

    condition: str
    algorithm: str
    family: str
    nodes: int
    mean_h: float | None
    max_h: int | None
    sd_ms: float | None
    sd_lo: float | None
    sd_hi: float | None
    a_ms: float | None
    a_lo: float | None
    a_hi: float | None
    k: float | None
    k_lo: float | None
    k_hi: float | None
    iqr_sd_ms: float | None
    iqr_sd_lo: float | None
    iqr_sd_hi: float | None
    a_iqr_ms: float | None
    a_iqr_lo: float | None
    a_iqr_hi: float | None
    k_iqr: float | None
    k_iqr_lo: float | None
    k_iqr_hi: float | None
    ms_per_link: float | None
    cv: float | None
    cv_lo: float | None
    cv_hi: float | None
    cv_hops: float | None
    multicasts: int


Spread = Literal["sd_ms", "iqr_sd_ms", "mean_ms"]
"""A column of nodes.csv that says how one destination's latencies spread (ms)."""
Row = TypeVar("Row", ArrivalRow, MulticastRow, SetRow, NodeRow, CvRow, SummaryRow)


def xy(c: Sequence[int]) -> str:
    return f"{c[0]},{c[1]}"


def coord(text: str) -> Coord:
    x, y = text.split(",")
    return (int(x), int(y))


def _ms(r: ArrivalRow) -> float:
    """A kept delivery's latency in ms (every delivery of a complete multicast was timed)."""
    assert r["latency_ns"] is not None, r
    return r["latency_ns"] / 1e6


# -- statistics -----------------------------------------------------------------------------------
def node_rows(arrivals: Iterable[ArrivalRow], complete: set[McKey]) -> list[NodeRow]:
    """Per node per (condition, algorithm, set): its h, and the mean, sample SD and robust SD (ms) of
    its wall-clock latency over the kept repetitions of complete multicasts."""
    groups: dict[tuple[str, str, int, str], list[tuple[int, float]]] = defaultdict(list)
    for r in arrivals:
        if r["warmup"] or (r["condition"], r["algorithm"], r["set"], r["rep"]) not in complete:
            continue
        groups[(r["condition"], r["algorithm"], r["set"], r["node"])].append((r["hops"], _ms(r)))
    out: list[NodeRow] = []
    for (cond, alg, s, node), xs in groups.items():
        lat = [ms for _, ms in xs]
        hops = Counter(h for h, _ in xs).most_common(1)[0][0]  # one value: a rule is deterministic
        out.append(
            {
                "condition": cond,
                "algorithm": alg,
                "set": s,
                "node": node,
                "hops": hops,
                "n": len(lat),
                "mean_ms": statistics.fmean(lat),
                "sd_ms": statistics.stdev(lat) if len(lat) > 1 else None,
                "iqr_sd_ms": iqr_sd(lat),
            }
        )
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    out.sort(
        key=lambda r: (
            CONDITIONS.index(r["condition"]),
            order[r["algorithm"]],
            r["set"],
            r["hops"],
            coord(r["node"]),
        )
    )
    return out


def cv_rows(arrivals: Iterable[ArrivalRow], complete: set[McKey]) -> list[CvRow]:
    """Per kept complete multicast: Al-Dubai et al.'s node-level CV of its wall-clock latencies (population SD
    over mean, over its destinations, as the project's ``cv`` in steps), the same of its destinations'
    hop counts, and its mean and largest latency (ms)."""
    groups: dict[McKey, list[tuple[int, float]]] = defaultdict(list)
    for r in arrivals:
        key = (r["condition"], r["algorithm"], r["set"], r["rep"])
        if not r["warmup"] and key in complete:
            groups[key].append((r["hops"], _ms(r)))
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    out: list[CvRow] = []
    for (cond, alg, s, rep), xs in sorted(
        groups.items(), key=lambda kv: (CONDITIONS.index(kv[0][0]), order[kv[0][1]], *kv[0][2:])
    ):
        lat, hops = [y for _, y in xs], [h for h, _ in xs]
        mean = statistics.fmean(lat)
        out.append(
            {
                "condition": cond,
                "algorithm": alg,
                "set": s,
                "rep": rep,
                "cv": statistics.pstdev(lat) / mean if mean else None,
                "cv_hops": statistics.pstdev(hops) / statistics.fmean(hops),
                "mean_ms": mean,
                "max_ms": max(lat),
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class Stats:
    """What the nodes and multicasts of some algorithms (one, or a family pooled) show under one condition."""

    nodes: int  # (set, destination) pairs with an SD
    mean_h: float | None
    max_h: int | None
    sd: Fit  # per-node SD (ms), mean over the nodes
    a: Fit  # SD ≈ a·√h (ms)
    k: Fit  # SD ∝ h^k
    iqr_sd: Fit  # the same three of the robust SD
    a_iqr: Fit
    k_iqr: Fit
    ms_per_link: float | None  # mean latency / h through the origin
    cv: Fit  # node-level CV, mean over the multicasts
    cv_hops: Fit  # the CV of the destinations' hop counts, the same way
    multicasts: int


def stats(
    nodes: Sequence[NodeRow],
    cvs: Sequence[CvRow],
    condition: str,
    algorithms: Iterable[str],
) -> Stats:
    """The :class:`Stats` of ``algorithms`` (pooled) under ``condition``."""
    algs = set(algorithms)
    mine = [
        (r, sd)
        for r in nodes
        if r["condition"] == condition and r["algorithm"] in algs and (sd := r["sd_ms"]) is not None
    ]
    pts = [(int(r["hops"]), float(sd)) for r, sd in mine]
    robust = [(int(r["hops"]), float(q)) for r, _ in mine if (q := r["iqr_sd_ms"]) is not None]
    means = [(int(r["hops"]), float(r["mean_ms"])) for r, _ in mine]
    cv = [r for r in cvs if r["condition"] == condition and r["algorithm"] in algs]
    hops = [h for h, _ in pts]
    per_link = sum(h * y for h, y in means) / sum(h * h for h, _ in means) if means else None
    return Stats(
        len(mine),
        statistics.fmean(hops) if hops else None,
        max(hops, default=None),
        mean_ci(y for _, y in pts),
        fit_sqrt(pts),
        fit_loglog(pts),
        mean_ci(y for _, y in robust),
        fit_sqrt(robust),
        fit_loglog(robust),
        per_link,
        mean_ci(r["cv"] for r in cv),
        mean_ci(r["cv_hops"] for r in cv),
        len(cv),
    )


def sd_by_h(
    nodes: Iterable[NodeRow], condition: str, algorithms: Iterable[str], column: Spread = "sd_ms"
) -> dict[int, list[float]]:
    """The per-node SDs (ms; ``column``) of ``algorithms`` under ``condition``, grouped by h."""
    algs = set(algorithms)
    out: dict[int, list[float]] = defaultdict(list)
    for r in nodes:
        if r["condition"] == condition and r["algorithm"] in algs and (v := r[column]) is not None:
            out[int(r["hops"])].append(float(v))
    return dict(sorted(out.items()))


@dataclass(frozen=True, slots=True)
class Equal:
    """Paths against trees at equal h: per h both families reach, mean path SD − mean tree SD (ms)."""

    hs: tuple[int, ...]
    diff: Fit  # the mean of those differences with its 95% CI
    above: int  # h values where the paths' mean SD is above the trees'
    sign: int  # −1 significantly below zero, 0 indistinguishable, +1 above


def equal_h(
    nodes: Sequence[NodeRow],
    condition: str,
    trees: Sequence[str],
    paths: Sequence[str],
    column: Spread,
) -> Equal:
    th, ph = sd_by_h(nodes, condition, trees, column), sd_by_h(nodes, condition, paths, column)
    hs = tuple(h for h in th if h in ph)
    diffs = [statistics.fmean(ph[h]) - statistics.fmean(th[h]) for h in hs]
    return Equal(hs, mean_ci(diffs), sum(d > 0 for d in diffs), framework.significance(diffs, single=False))


@dataclass(frozen=True, slots=True)
class Families:
    """Paths against trees under one condition, each family pooled."""

    condition: str
    tree: Stats
    path: Stats
    sd: Equal  # of the SD
    iqr: Equal  # of the robust SD
    cv_diff: Fit  # per set and repetition: mean path CV − mean tree CV
    cv_sign: int


def families(
    nodes: Sequence[NodeRow],
    cvs: Sequence[CvRow],
    condition: str,
    algorithms: Sequence[str],
) -> Families | None:
    """Trees against paths under ``condition``, compared at equal h; None without both families."""
    trees = [a for a in algorithms if a in TREES]
    paths = [a for a in algorithms if a not in TREES]
    if not trees or not paths:
        return None
    by_round: dict[tuple[int, int], dict[bool, list[float]]] = defaultdict(lambda: {True: [], False: []})
    for r in cvs:
        if r["condition"] == condition and r["cv"] is not None and r["algorithm"] in algorithms:
            by_round[(r["set"], r["rep"])][r["algorithm"] in TREES].append(float(r["cv"]))
    cv_diffs = [
        statistics.fmean(v[False]) - statistics.fmean(v[True])
        for v in by_round.values()
        if v[True] and v[False]
    ]
    return Families(
        condition,
        stats(nodes, cvs, condition, trees),
        stats(nodes, cvs, condition, paths),
        equal_h(nodes, condition, trees, paths, "sd_ms"),
        equal_h(nodes, condition, trees, paths, "iqr_sd_ms"),
        mean_ci(cv_diffs),
        framework.significance(cv_diffs, single=False),
    )


def summary_rows(rows: Sequence[tuple[str, str, Stats]]) -> list[SummaryRow]:
    """summary.csv: per (condition, algorithm) its :class:`Stats`, each fit as value, low and high."""
    out = [
        SummaryRow(
            condition=c,
            algorithm=a,
            family="tree" if a in TREES else "path",
            nodes=s.nodes,
            mean_h=s.mean_h,
            max_h=s.max_h,
            sd_ms=s.sd.value,
            sd_lo=s.sd.lo,
            sd_hi=s.sd.hi,
            a_ms=s.a.value,
            a_lo=s.a.lo,
            a_hi=s.a.hi,
            k=s.k.value,
            k_lo=s.k.lo,
            k_hi=s.k.hi,
            iqr_sd_ms=s.iqr_sd.value,
            iqr_sd_lo=s.iqr_sd.lo,
            iqr_sd_hi=s.iqr_sd.hi,
            a_iqr_ms=s.a_iqr.value,
            a_iqr_lo=s.a_iqr.lo,
            a_iqr_hi=s.a_iqr.hi,
            k_iqr=s.k_iqr.value,
            k_iqr_lo=s.k_iqr.lo,
            k_iqr_hi=s.k_iqr.hi,
            ms_per_link=s.ms_per_link,
            cv=s.cv.value,
            cv_lo=s.cv.lo,
            cv_hi=s.cv.hi,
            cv_hops=s.cv_hops.value,
            multicasts=s.multicasts,
        )
        for c, a, s in rows
    ]
    return rounded(out)


def rounded(rows: Iterable[Row], digits: int = 6) -> list[Row]:
    """The rows with every float rounded to ``digits`` places, as the CSVs keep them."""
    return [cast(Row, {k: round(v, digits) if isinstance(v, float) else v for k, v in r.items()})
            for r in rows]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Read:
    """An earlier run's files, and the per-node and per-multicast rows made from them."""

    meta: dict[str, Any]
    arrivals: list[ArrivalRow]
    multicasts: list[MulticastRow]
    sets: list[SetRow]
    nodes: list[NodeRow]
    cvs: list[CvRow]
