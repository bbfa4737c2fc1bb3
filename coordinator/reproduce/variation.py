"""Issue 34's study: does a tree's depth or a path's length drive the variation of arrival times?

The trees VH, DIAG, DIST, PAIR and MIN against the paths DP and MP on an 8×8 mesh: the same
seeded random destination sets for every algorithm, the free clock, each multicast alone on warm
node processes (``emulate_apart``), repeated, under two conditions: no link model, and links of
delay d with normal jitter σ (``--link-delay``, ``--link-jitter``). Per destination, the SD over
the repetitions of its wall-clock latency against h, the links its copy crossed (its depth in a
tree, its position along a path), with √h·σ, the link model's own share, beside it; per multicast
seed 004's node-level CV (SD / mean of its destinations' latencies, §4.2.2). The first repetition
of each set and algorithm is a warm-up, recorded and left out of every number.
Prose: reports/variation.md.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.metrics import ci95, t_critical
from coordinator.errors import UsageError
from coordinator.experiments.run import emulate_apart, merge_runs, runtime_problem
from coordinator.output.report import fmt, fmt_ci, markdown_table
from coordinator.output.results import atomic_write
from coordinator.reproduce import framework
from coordinator.reproduce.framework import Context, Option, ProgressFn
from coordinator.runtimes.records import Arrival, RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.linkmodel import Jitter, LinkModel, LinkSpec, parse_duration
from node.topology import Coord, Topology

__all__ = [
    "ALGORITHMS",
    "CONDITIONS",
    "Fit",
    "Stats",
    "cv_rows",
    "draw_sets",
    "fit_loglog",
    "fit_sqrt",
    "make_plan",
    "node_rows",
    "records",
    "run_condition",
    "stats",
]

NAME = "variation"
SUMMARY = (
    "issue 34: arrival-time variation of trees (VH, DIAG, DIST, PAIR, MIN) and paths (DP, MP) "
    "against hop count, with and without a link model, 8×8 mesh"
)
DEFAULT_REPEAT = 20

TOPOLOGY = "mesh:8x8"
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
SETS, DESTS, WARMUP, WALL_BUDGET = 4, 10, 1, 120.0
LINK_DELAY, LINK_JITTER = "1ms", "normal:0.25ms"
RUNTIME = "processes"
RETRIES = 2  # times the multicasts a failed processes run never started are run again, on fresh nodes
PORT_MODEL = "all-port"  # the free clock sends on every port at once; the logical steps follow all-port
CLOSE = 0.25  # "the CV follows the CV of h": within this share of it
IQR_PER_SD = 1.349  # the interquartile range of a normal distribution, in SDs
TAIL = 0.6  # robust SD under this share of the SD: rare slow repetitions carry the SD
HOSTS = 10.0  # a/σ above this: the link jitter is under a tenth of the SD, the hosts make the rest


def _columns(names: str) -> tuple[str, ...]:
    return tuple(names.split())


ARRIVAL_COLUMNS = _columns("condition algorithm set rep warmup node hops step latency_ns ok")
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

_text = partial(framework.text, NAME)
Rows = list[dict[str, Any]]
McKey = tuple[str, str, int, int]  # condition, algorithm, set, repetition


# -- the experiment -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DestSet:
    """One destination set: its number, a uniformly random source, destinations uniform over the rest."""

    index: int
    source: Coord
    destinations: tuple[Coord, ...]


@dataclass(frozen=True, slots=True)
class Slot:
    """What one multicast of the plan is: algorithm, set, repetition, and whether it is a warm-up."""

    algorithm: str
    set: int
    rep: int
    warmup: bool


def draw_sets(topology: Topology, sets: int, dests: int, seed: int) -> list[DestSet]:
    """``sets`` destination sets of ``dests`` nodes, each with its own uniformly random source."""
    rng = random.Random(seed)
    nodes = list(topology.nodes())
    out = []
    for i in range(sets):
        src = rng.choice(nodes)
        out.append(DestSet(i, src, tuple(rng.sample([n for n in nodes if n != src], dests))))
    return out


def make_plan(
    topology: Topology, sets: Sequence[DestSet], algorithms: Sequence[str], reps: int, warmup: int
) -> tuple[Plan, dict[int, Slot]]:
    """Every repetition of every set and algorithm, in rounds (a round runs each set × algorithm once).

    Rounds spread a drift of the machine's speed over every algorithm alike; the first ``warmup``
    rounds are the warm-up repetitions.
    """
    mcs: list[Multicast] = []
    slots: dict[int, Slot] = {}
    for rep in range(warmup + reps):
        for s in sets:
            for a in algorithms:
                slots[len(mcs)] = Slot(a, s.index, rep, rep < warmup)
                mcs.append(Multicast(len(mcs), a, s.source, s.destinations, 0))
    return Plan(topology, tuple(mcs)), slots


def run_condition(
    plan: Plan, settings: RunSettings, progress: ProgressFn | None, retries: int = RETRIES
) -> tuple[RawRun, list[str]]:
    """``emulate_apart`` of ``plan``, then again of what a failed run never started (``retries`` times).

    A processes run stops at its first incomplete multicast; the ones after it run anew on fresh
    nodes. Returns the merged records and one line per run that did not complete.
    """
    runs: list[RawRun] = []
    notes: list[str] = []
    todo = plan
    for attempt in range(retries + 1):
        raw = trio.run(emulate_apart, todo, settings, progress)
        runs.append(raw)
        started = set().union(*(r.injected for r in runs))
        left = tuple(m for m in plan.multicasts if m.id not in started)
        if raw.incomplete:
            more = f"; {len(left)} multicasts not started" + (
                ", run again" if left and attempt < retries else ""
            )
            notes.append(
                f"run {attempt + 1} of {len(todo.multicasts)} multicasts incomplete: "
                + "; ".join(raw.incomplete[:3])
                + (more if left else "")
            )
        if not left:
            break
        todo = Plan(plan.topology, left)
    return merge_runs(runs), notes


def _xy(c: Sequence[int]) -> str:
    return f"{c[0]},{c[1]}"


def _coord(text: str) -> Coord:
    x, y = text.split(",")
    return (int(x), int(y))


def records(condition: str, plan: Plan, slots: Mapping[int, Slot], raw: RawRun) -> tuple[Rows, Rows]:
    """The tidy rows of one condition: one per delivery at a destination, one per multicast (its status).

    A delivery is timed (``ok``) when it was read on the host that injected its multicast; a
    multicast is complete when every destination got it once, timed, and no other node got it.
    """
    by_mc: dict[int, list[Arrival]] = defaultdict(list)
    for a in raw.arrivals:
        by_mc[a.mc].append(a)
    arrivals: Rows = []
    mcs: Rows = []
    for m in plan.multicasts:
        slot, dests = slots[m.id], set(m.destinations)
        base = {
            "condition": condition,
            "algorithm": slot.algorithm,
            "set": slot.set,
            "rep": slot.rep,
            "warmup": int(slot.warmup),
        }
        t0, host = raw.injected.get(m.id, (None, None))
        seen: Counter[Coord] = Counter()
        stray = timed = 0
        for a in sorted(by_mc.get(m.id, []), key=lambda a: a.node):
            if a.node not in dests:
                stray += 1
                continue
            seen[a.node] += 1
            lat = a.wall_ns - t0 if t0 is not None and a.wall_ns is not None and a.host == host else None
            timed += lat is not None
            arrivals.append(
                base
                | {
                    "node": _xy(a.node),
                    "hops": a.hops,
                    "step": a.step,
                    "latency_ns": lat,
                    "ok": int(lat is not None),
                }
            )
        dupes = sum(n - 1 for n in seen.values())
        complete = len(seen) == len(dests) and not dupes and not stray and timed == sum(seen.values())
        mcs.append(
            base
            | {
                "id": m.id,
                "source": _xy(m.source),
                "destinations": len(dests),
                "reached": len(seen),
                "duplicates": dupes,
                "stray": stray,
                "wall_ok": timed,
                "complete": int(complete),
            }
        )
    return arrivals, mcs


# -- statistics -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Fit:
    """An estimate with its 95% CI (lo = hi = value from a single point; None without data) and n."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int

    def cell(self, digits: int = 3) -> str:
        return fmt_ci(self.value, self.lo, self.hi, digits)

    @property
    def above_zero(self) -> bool:
        return self.n > 1 and self.lo is not None and self.lo > 0

    def holds(self, x: float) -> bool:
        return self.n > 1 and self.lo is not None and self.hi is not None and self.lo <= x <= self.hi


NO_FIT = Fit(None, None, None, 0)


def mean_ci(values: Iterable[float | None]) -> Fit:
    """Mean and 95% CI (Student t) of the values that are not None."""
    s = ci95([v for v in values if v is not None])
    return Fit(s["mean"], s["ci95"][0], s["ci95"][1], s["n"])


def fit_sqrt(points: Sequence[tuple[int, float]]) -> Fit:
    """SD ≈ a·√h by least squares through the origin over (h, SD) points: a, with its 95% CI (Student t)."""
    pts = [(h, y) for h, y in points if h > 0]
    if not pts:
        return NO_FIT
    sh = sum(h for h, _ in pts)
    a = sum(y * math.sqrt(h) for h, y in pts) / sh
    if len(pts) < 2:
        return Fit(a, a, a, 1)
    s2 = sum((y - a * math.sqrt(h)) ** 2 for h, y in pts) / (len(pts) - 1)
    half = t_critical(len(pts) - 1) * math.sqrt(s2 / sh)
    return Fit(a, a - half, a + half, len(pts))


def fit_loglog(points: Sequence[tuple[int, float]]) -> Fit:
    """The exponent k of SD ∝ h^k: least squares of ln SD on ln h, with its 95% CI (3+ points, 2+ h)."""
    pts = [(math.log(h), math.log(y)) for h, y in points if h > 0 and y > 0]
    if len(pts) < 3 or len({x for x, _ in pts}) < 2:
        return NO_FIT
    mx, my = statistics.fmean(x for x, _ in pts), statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    k = sum((x - mx) * (y - my) for x, y in pts) / sxx
    s2 = sum((y - my - k * (x - mx)) ** 2 for x, y in pts) / (len(pts) - 2)
    half = t_critical(len(pts) - 2) * math.sqrt(s2 / sxx)
    return Fit(k, k - half, k + half, len(pts))


def iqr_sd(xs: Sequence[float]) -> float | None:
    """The robust SD: the interquartile range over 1.349 (a normal distribution's SD), so that a few
    stalled repetitions do not make it; None below two values."""
    if len(xs) < 2:
        return None
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return (q3 - q1) / IQR_PER_SD


def node_rows(arrivals: Iterable[Mapping[str, Any]], complete: set[McKey]) -> Rows:
    """Per node per (condition, algorithm, set): its h, and the mean, sample SD and robust SD (ms) of
    its wall-clock latency over the kept repetitions of complete multicasts."""
    groups: dict[tuple[str, str, int, str], list[tuple[int, float]]] = defaultdict(list)
    for r in arrivals:
        if r["warmup"] or (r["condition"], r["algorithm"], r["set"], r["rep"]) not in complete:
            continue
        groups[(r["condition"], r["algorithm"], r["set"], r["node"])].append(
            (r["hops"], r["latency_ns"] / 1e6)
        )
    out: Rows = []
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
            _coord(r["node"]),
        )
    )
    return out


def cv_rows(arrivals: Iterable[Mapping[str, Any]], complete: set[McKey]) -> Rows:
    """Per kept complete multicast: seed 004's node-level CV of its wall-clock latencies (population SD
    over mean, over its destinations, as the project's ``cv`` in steps), the same of its destinations'
    hop counts, and its mean and largest latency (ms)."""
    groups: dict[McKey, list[tuple[int, float]]] = defaultdict(list)
    for r in arrivals:
        key = (r["condition"], r["algorithm"], r["set"], r["rep"])
        if not r["warmup"] and key in complete:
            groups[key].append((r["hops"], r["latency_ns"] / 1e6))
    order = {a: i for i, a in enumerate(ALGORITHMS)}
    out: Rows = []
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
    nodes: Sequence[Mapping[str, Any]],
    cvs: Sequence[Mapping[str, Any]],
    condition: str,
    algorithms: Iterable[str],
) -> Stats:
    """The :class:`Stats` of ``algorithms`` (pooled) under ``condition``."""
    algs = set(algorithms)
    mine = [
        r for r in nodes if r["condition"] == condition and r["algorithm"] in algs and r["sd_ms"] is not None
    ]
    pts = [(int(r["hops"]), float(r["sd_ms"])) for r in mine]
    robust = [(int(r["hops"]), float(r["iqr_sd_ms"])) for r in mine if r["iqr_sd_ms"] is not None]
    means = [(int(r["hops"]), float(r["mean_ms"])) for r in mine]
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
    nodes: Iterable[Mapping[str, Any]], condition: str, algorithms: Iterable[str], column: str = "sd_ms"
) -> dict[int, list[float]]:
    """The per-node SDs (ms; ``column``) of ``algorithms`` under ``condition``, grouped by h."""
    algs = set(algorithms)
    out: dict[int, list[float]] = defaultdict(list)
    for r in nodes:
        if r["condition"] == condition and r["algorithm"] in algs and r[column] is not None:
            out[int(r["hops"])].append(float(r[column]))
    return dict(sorted(out.items()))


@dataclass(frozen=True, slots=True)
class Equal:
    """Paths against trees at equal h: per h both families reach, mean path SD − mean tree SD (ms)."""

    hs: tuple[int, ...]
    diff: Fit  # the mean of those differences with its 95% CI
    above: int  # h values where the paths' mean SD is above the trees'
    sign: int  # −1 significantly below zero, 0 indistinguishable, +1 above


def equal_h(
    nodes: Sequence[Mapping[str, Any]],
    condition: str,
    trees: Sequence[str],
    paths: Sequence[str],
    column: str,
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
    nodes: Sequence[Mapping[str, Any]],
    cvs: Sequence[Mapping[str, Any]],
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


# -- plots ----------------------------------------------------------------------------------------
def _save(fig: Any, path: Path, dpi: int = 110) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path


def _title(cond: str, meta: Mapping[str, Any]) -> str:
    return _text(f"condition {cond}", meta)


@dataclass(frozen=True, slots=True)
class Curve:
    """One series of a by-h plot: its label and style, and its values grouped by h."""

    label: str
    colour: str
    tree: bool
    groups: Mapping[int, Sequence[float]]


def _curves(
    nodes: Sequence[Mapping[str, Any]],
    cond: str,
    column: str,
    pools: Sequence[tuple[str, str, bool, set[str]]],
) -> list[Curve]:
    out = []
    for label, colour, tree, algs in pools:
        groups: dict[int, list[float]] = defaultdict(list)
        for r in nodes:
            if r["condition"] == cond and r["algorithm"] in algs and r[column] is not None:
                groups[int(r["hops"])].append(float(r[column]))
        if groups:
            out.append(Curve(label, colour, tree, dict(sorted(groups.items()))))
    return out


def _draw(ax: Any, curves: Sequence[Curve], log: bool, bands: bool) -> None:
    """Per curve and h the mean with its 95% CI: error bars (``bands`` False) or a shaded band; the
    axes cut at a third below and thrice above the means (log) or 1.3 × the largest mean, so that a
    CI of two nodes does not set the scale."""
    width = (0.12 if log else 0.5) / max(1, len(curves))
    means: list[float] = []
    for i, c in enumerate(curves):
        hs = list(c.groups)
        cis = [ci95(list(c.groups[h])) for h in hs]
        ys = [float(x["mean"]) for x in cis]
        lo = [x["ci95"][0] for x in cis]
        hi = [x["ci95"][1] for x in cis]
        means += ys
        style = {
            "color": c.colour,
            "marker": "o" if c.tree else "s",
            "markersize": 3.5,
            "linestyle": "-" if c.tree else "--",
            "linewidth": 1.1 if not bands else 1.8,
            "label": c.label,
        }
        if bands:
            ax.plot(hs, ys, **style)
            ax.fill_between(hs, lo, hi, color=c.colour, alpha=0.18, linewidth=0)
        else:
            off = (i - (len(curves) - 1) / 2) * width
            xs = [h * (1 + off) if log else h + off for h in hs]
            err = [[y - a for y, a in zip(ys, lo, strict=True)], [b - y for y, b in zip(ys, hi, strict=True)]]
            ax.errorbar(xs, ys, yerr=err, elinewidth=0.7, capsize=1.5, **style)
    if means:
        positive = [m for m in means if m > 0]
        if log and positive:
            ax.set_ylim(min(positive) / 3, max(positive) * 3)
        elif not log:
            ax.set_ylim(0, max(means) * 1.3)


def _two_five(x: float, _pos: int | None = None) -> str:
    """A log axis's minor tick label at 2 and 5 times a power of ten, none elsewhere."""
    if x <= 0:
        return ""
    lead = round(x / 10 ** math.floor(math.log10(x)))
    return f"{x:g}" if lead in (2, 5) else ""


def plot_by_h(
    path: Path,
    nodes: Sequence[Mapping[str, Any]],
    meta: Mapping[str, Any],
    column: str,
    ylabel: str,
    reference: Callable[[float], float],
    reference_label: str,
    log: bool = False,
) -> Path:
    """Per condition a column of two panels: above, per algorithm and h the mean over the nodes of
    ``column`` with its 95% CI as error bars (none where one node has that h), trees solid, paths
    dashed; below, the same pooled per family, the CI shaded. ``reference`` under the link model,
    dotted. ``log``: both axes logarithmic (a power of h is a straight line)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    algorithms = tuple(meta["algorithms"])
    each = [(LABELS[a] + ("" if a in TREES else " (path)"), COLOURS[a], a in TREES, {a}) for a in algorithms]
    trees, paths = {a for a in algorithms if a in TREES}, {a for a in algorithms if a not in TREES}
    pooled = [("trees, pooled", "#1f77b4", True, trees), ("paths, pooled", "#d62728", False, paths)]
    fig = Figure(figsize=(12.0, 9.0), layout="constrained")
    axes = fig.subplots(2, len(CONDITIONS), squeeze=False)
    for col, cond in enumerate(CONDITIONS):
        for row, pools in enumerate((each, [p for p in pooled if p[3]])):
            ax = axes[row][col]
            curves = _curves(nodes, cond, column, pools)
            _draw(ax, curves, log, bands=row == 1)
            top = max((max(c.groups) for c in curves), default=0)
            if cond == "link" and top:
                hx = [h / 10 for h in range(10, 10 * top + 1)]
                ax.plot(
                    hx,
                    [reference(h) for h in hx],
                    color="black",
                    linestyle=":",
                    linewidth=1.8,
                    label=reference_label,
                )
                lo, hi = ax.get_ylim()  # the reference in view
                ys = [reference(1.0), reference(float(top))]
                ax.set_ylim(min(lo, min(ys) / 2) if log else lo, max(hi, max(ys) * 1.1))
            what = "per algorithm" if row == 0 else "per family"
            ax.set_title(f"{_title(cond, meta)}: {what}", fontsize="medium")
            ax.set_xlabel("h: links crossed to the destination")
            ax.set_ylabel(ylabel)
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log", nonpositive="clip")
                for axis in (ax.xaxis, ax.yaxis):
                    axis.set_major_formatter("{x:g}")
                    axis.set_minor_formatter(FuncFormatter(_two_five))
            ax.grid(True, which="both" if log else "major", alpha=0.3)
            ax.legend(fontsize="x-small", ncol=2)
    fig.suptitle(_text("plot note", meta), fontsize="small")
    return _save(fig, path)


def plot_cv(path: Path, rows: Sequence[tuple[str, str, Stats]], meta: Mapping[str, Any]) -> Path:
    """One panel per condition: each algorithm's mean node-level CV (wall clock) with its 95% CI, paths
    hatched, and the CV of its destinations' hop counts as a white diamond."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 4.4), layout="constrained")
    axes = fig.subplots(1, len(CONDITIONS), squeeze=False)[0]
    for ax, cond in zip(axes, CONDITIONS, strict=True):
        mine = [(a, s) for c, a, s in rows if c == cond and s.cv.value is not None]
        xs = list(range(len(mine)))
        cv = [s.cv for _, s in mine]
        err = [[(f.value or 0) - (f.lo or 0) for f in cv], [(f.hi or 0) - (f.value or 0) for f in cv]]
        bars = ax.bar(
            xs,
            [f.value or 0 for f in cv],
            yerr=err,
            capsize=3,
            alpha=0.85,
            color=[COLOURS[a] for a, _ in mine],
            error_kw={"ecolor": "#444444", "elinewidth": 1.0},
            label="node-level CV (wall clock), 95% CI",
        )
        for bar, (a, _) in zip(bars, mine, strict=True):
            if a not in TREES:
                bar.set_hatch("//")
        ax.plot(
            [x + 0.22 for x in xs],
            [s.cv_hops.value for _, s in mine],
            linestyle="none",
            marker="D",
            markersize=6,
            markerfacecolor="white",
            markeredgecolor="black",
            label="CV of the destinations' h (no clock)",
        )
        ax.set_xticks(xs, [LABELS[a] for a, _ in mine])
        ax.set_title(_title(cond, meta), fontsize="medium")
        ax.set_ylabel("node-level CV (SD / mean over destinations)")
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="x-small", loc="best", framealpha=0.9)
    fig.suptitle(_text("cv plot note", meta), fontsize="small")
    return _save(fig, path)


def write_plots(out: Path, read: Read, rows: Sequence[tuple[str, str, Stats]]) -> list[Path]:
    meta, nodes = read.meta, read.nodes
    sigma, d = float(meta["jitter_sd_ms"]), float(meta["delay_ms"])
    plots = out / "plots"
    return [
        plot_by_h(
            plots / "sd_vs_h.png",
            nodes,
            meta,
            "sd_ms",
            "per-node SD of latency (ms)",
            lambda h: math.sqrt(h) * sigma,
            f"√h·σ (σ = {sigma:g} ms)",
            log=True,
        ),
        plot_by_h(
            plots / "robust_sd_vs_h.png",
            nodes,
            meta,
            "iqr_sd_ms",
            "per-node robust SD: IQR / 1.349 (ms)",
            lambda h: math.sqrt(h) * sigma,
            f"√h·σ (σ = {sigma:g} ms)",
            log=True,
        ),
        plot_by_h(
            plots / "mean_vs_h.png",
            nodes,
            meta,
            "mean_ms",
            "per-node mean latency (ms)",
            lambda h: h * d,
            f"h·d (d = {d:g} ms)",
        ),
        plot_cv(plots / "cv.png", rows, meta),
    ]


# -- the report -----------------------------------------------------------------------------------
_SIGN = {-1: "significantly below", 0: "indistinguishable from", 1: "significantly above"}


def summary_table(rows: Sequence[tuple[str, str, Stats]], cond: str) -> str:
    head = [
        "algorithm",
        "family",
        "nodes",
        "mean h",
        "max h",
        "per-node SD (ms)",
        "a: SD ≈ a·√h (ms)",
        "k: SD ∝ h^k",
        "robust SD (ms)",
        "k of robust SD",
        "ms per link",
        "node-level CV",
        "CV of h",
        "multicasts",
    ]
    body = [
        [
            LABELS[a],
            "tree" if a in TREES else "path",
            s.nodes,
            fmt(s.mean_h, 1),
            fmt(s.max_h, 0),
            s.sd.cell(3),
            s.a.cell(3),
            s.k.cell(2),
            s.iqr_sd.cell(3),
            s.k_iqr.cell(2),
            fmt(s.ms_per_link, 3),
            s.cv.cell(3),
            fmt(s.cv_hops.value, 3),
            s.multicasts,
        ]
        for c, a, s in rows
        if c == cond
    ]
    return markdown_table(head, body, ["l", "l"] + ["r"] * (len(head) - 2))


def h_table(nodes: Sequence[Mapping[str, Any]], cond: str, algorithms: Sequence[str]) -> str:
    """Per h: the trees' and the paths' mean per-node SD and robust SD (ms), with 95% CIs, and their
    numbers of nodes."""
    trees, paths = [a for a in algorithms if a in TREES], [a for a in algorithms if a not in TREES]
    th, ph = sd_by_h(nodes, cond, trees), sd_by_h(nodes, cond, paths)
    tr, pr = sd_by_h(nodes, cond, trees, "iqr_sd_ms"), sd_by_h(nodes, cond, paths, "iqr_sd_ms")
    body = []
    for h in sorted(set(th) | set(ph)):
        t, p = mean_ci(th.get(h, [])), mean_ci(ph.get(h, []))
        body.append(
            [
                h,
                t.cell(3),
                mean_ci(tr.get(h, [])).cell(3),
                t.n,
                p.cell(3),
                mean_ci(pr.get(h, [])).cell(3),
                p.n,
            ]
        )
    head = [
        "h",
        "trees: SD (ms)",
        "trees: robust SD (ms)",
        "tree nodes",
        "paths: SD (ms)",
        "paths: robust SD (ms)",
        "path nodes",
    ]
    return markdown_table(head, body, ["r"] * len(head))


def _ratio(fit: Fit, sigma: float) -> str:
    return fmt(fit.value / sigma, 2) if fit.value is not None and sigma else "—"


def _shape(ks: Sequence[Fit]) -> str:
    """How SD grows with h, from the families' exponents: like √h, faster, or no one law."""
    ks = [k for k in ks if k.value is not None]
    if ks and all(k.holds(0.5) for k in ks):
        return "sqrt"
    if ks and all(k.n > 1 and (k.lo or 0) > 0.5 for k in ks):
        return "faster"
    return "other"


def findings(fam: Families, rows: Sequence[tuple[str, str, Stats]], meta: Mapping[str, Any]) -> str:
    """What one condition's data shows, in words the numbers choose (sections of reports/variation.md)."""
    t, p = fam.tree, fam.path
    ks = [s.k for c, _, s in rows if c == fam.condition and s.k.value is not None]
    sigma = float(meta["jitter_sd_ms"])
    share = [(s.iqr_sd.value or 0) / s.sd.value for s in (t, p) if s.sd.value]
    f = dict(meta) | {
        "grows": sum(k.above_zero for k in ks),
        "algorithms": len(ks),
        "tree_k": t.k.cell(2),
        "path_k": p.k.cell(2),
        "tree_a": t.a.cell(3),
        "path_a": p.a.cell(3),
        "shared": len(fam.sd.hs),
        "h_lo": fmt(min(fam.sd.hs, default=None), 0),
        "h_hi": fmt(max(fam.sd.hs, default=None), 0),
        "diff": fam.sd.diff.cell(3),
        "above": fam.sd.above,
        "sign": _SIGN[fam.sd.sign],
        "rdiff": fam.iqr.diff.cell(3),
        "rabove": fam.iqr.above,
        "rshared": len(fam.iqr.hs),
        "rsign": _SIGN[fam.iqr.sign],
        "tree_h": fmt(t.mean_h, 1),
        "path_h": fmt(p.mean_h, 1),
        "tree_max": fmt(t.max_h, 0),
        "path_max": fmt(p.max_h, 0),
        "tree_sd": t.sd.cell(3),
        "path_sd": p.sd.cell(3),
        "tree_r": t.iqr_sd.cell(3),
        "path_r": p.iqr_sd.cell(3),
        "tree_kr": t.k_iqr.cell(2),
        "path_kr": p.k_iqr.cell(2),
        "tree_ar": t.a_iqr.cell(3),
        "path_ar": p.a_iqr.cell(3),
        "tree_share": f"{share[0]:.0%}" if len(share) == 2 else "—",
        "path_share": f"{share[-1]:.0%}" if len(share) == 2 else "—",
        "tree_cv": t.cv.cell(3),
        "path_cv": p.cv.cell(3),
        "cv_diff": fam.cv_diff.cell(3),
        "cv_sign": _SIGN[fam.cv_sign],
        "tree_cv_h": t.cv_hops.cell(3),
        "path_cv_h": p.cv_hops.cell(3),
        "tree_link": fmt(t.ms_per_link, 3),
        "path_link": fmt(p.ms_per_link, 3),
        "ratio_tree": _ratio(t.a, sigma),
        "ratio_path": _ratio(p.a, sigma),
        "ratio_tree_r": _ratio(t.a_iqr, sigma),
        "ratio_path_r": _ratio(p.a_iqr, sigma),
    }
    growth = [_text("finding h", f), _text(f"finding k {_shape([t.k, p.k])}", f)]
    growth += [_text("finding ratio", f)] if fam.condition == "link" else []
    growth.append(_text(f"finding per link {fam.condition}", f))
    tail = len(share) == 2 and max(share) < TAIL
    robust = [_text("finding robust tail" if tail else "finding robust", f)]
    robust.append(_text(f"finding robust k {_shape([t.k_iqr, p.k_iqr])}", f))
    robust += [_text("finding robust ratio", f)] if fam.condition == "link" else []
    rising = t.k.above_zero or p.k.above_zero or t.k_iqr.above_zero or p.k_iqr.above_zero
    farther = (p.mean_h or 0) > (t.mean_h or 0)
    if not rising:
        key = "verdict flat"
    elif fam.sd.sign != fam.iqr.sign:
        key = "verdict split"
    elif fam.sd.sign > 0:
        key = "verdict paths worse"
    elif fam.sd.sign < 0:
        key = "verdict paths better"
    elif farther and (p.sd.value or 0) > (t.sd.value or 0):
        key = "verdict h"
    else:
        key = "verdict h only"
    equal = [_text("finding equal h", f), _text(key, f)]
    close = all(
        s.cv.value is not None and s.cv_hops.value and abs(s.cv.value / s.cv_hops.value - 1) <= CLOSE
        for s in (t, p)
    )
    cv = _text("finding cv close" if close else "finding cv apart", f, close=f"{CLOSE:.0%}")
    return "\n\n".join([" ".join(growth), " ".join(robust), " ".join(equal), cv]) + "\n"


def across(fams: Mapping[str, Families], meta: Mapping[str, Any]) -> str:
    """Whether the two conditions agree on paths against trees at equal h (reports/variation.md)."""
    bare, link = fams["bare"], fams["link"]
    sigma = float(meta["jitter_sd_ms"])
    ratios = [s.a.value / sigma for s in (link.tree, link.path) if s.a.value is not None and sigma]
    top = max(s.max_h or 0 for s in (link.tree, link.path))
    sds = [s.sd.value for f in (bare, link) for s in (f.tree, f.path) if s.sd.value is not None]
    f = dict(meta) | {
        "bare_sign": _SIGN[bare.sd.sign],
        "link_sign": _SIGN[link.sd.sign],
        "bare_rsign": _SIGN[bare.iqr.sign],
        "link_rsign": _SIGN[link.iqr.sign],
        "ratio": fmt(min(ratios, default=None), 0),
        "reference": fmt(math.sqrt(top) * sigma, 2),
        "top": top,
        "sd_lo": fmt(min(sds, default=None), 1),
        "sd_hi": fmt(max(sds, default=None), 1),
    }
    if bare.sd.sign == link.sd.sign and bare.iqr.sign == link.iqr.sign:
        return _text("across agree", f) + "\n"
    return _text("across hosts" if ratios and min(ratios) > HOSTS else "across disagree", f) + "\n"


def _repeat_note(meta: Mapping[str, Any]) -> str:
    """A sentence when the run kept fewer repetitions than the default, with what the default would cost."""
    repeat, warmup = int(meta["repeat"]), int(meta["warmup"])
    if repeat >= DEFAULT_REPEAT:
        return ""
    minutes = float(meta["wall_s"]) * (DEFAULT_REPEAT + warmup) / (repeat + warmup) / 60
    return " " + _text("repeat note", meta, default=DEFAULT_REPEAT, minutes=minutes)


def _load(avg: Sequence[float] | None) -> str:
    return "unknown" if not avg else ", ".join(f"{x:.2f}" for x in avg)


def _status(mcs: Sequence[Mapping[str, Any]], notes: Sequence[str]) -> str:
    bad = [m for m in mcs if not m["complete"]]
    if not bad:
        text = "complete: every multicast reached each of its destinations once, timed on its source's host"
    else:
        kinds = Counter(
            f"{m['condition']}, {'not started' if not m['reached'] else 'incomplete'}" for m in bad
        )
        text = (
            f"**incomplete**: {len(bad)} of {len(mcs)} multicasts ("
            + "; ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
            + "), left out of every number"
        )
    return text + ("" if not notes else ". Runs that did not complete: " + " | ".join(notes))


def build_report(out: Path, read: Read, rows: Sequence[tuple[str, str, Stats]], plots: Sequence[Path]) -> str:
    meta, mcs = read.meta, read.multicasts
    algorithms = tuple(meta["algorithms"])
    kept = [m for m in mcs if not m["warmup"]]
    f = dict(meta) | {
        "labels": ", ".join(LABELS[a] + ("" if a in TREES else " (path)") for a in algorithms),
        "multicasts": len(mcs),
        "kept": len(kept),
        "kept_complete": sum(m["complete"] for m in kept),
        "arrivals": len(read.arrivals),
        "runtime_note": _text(f"runtime {meta['runtime']}"),
        "status": _status(mcs, meta.get("notes") or []),
        "repeat_note": _repeat_note(meta),
        "load_before": _load(meta.get("loadavg_before")),
        "load_after": _load(meta.get("loadavg_after")),
        "condition_walls": ", ".join(
            f"{_title(c, meta).lower()} {w:.1f} s" for c, w in meta["condition_wall_s"].items()
        ),
        "sets_table": markdown_table(
            ["set", "source", "destinations"],
            [[s["set"], s["source"], s["destinations"]] for s in read.sets],
            ["r", "l", "l"],
        ).rstrip("\n"),
    }
    parts = [_text("head", f) + "\n"]
    fams = {c: fam for c in CONDITIONS if (fam := families(read.nodes, read.cvs, c, algorithms)) is not None}
    for cond, fam in fams.items():
        parts += [f"### {_title(cond, meta)}\n", findings(fam, rows, meta)]
    if len(fams) == len(CONDITIONS):
        parts += ["### Both conditions\n", across(fams, meta)]
    parts.append(_text("tables", f) + "\n")
    for cond in CONDITIONS:
        parts += [f"### {_title(cond, meta)}\n", summary_table(rows, cond)]
    parts.append(_text("h tables", f) + "\n")
    for cond in CONDITIONS:
        parts += [f"### {_title(cond, meta)}: SD at equal h\n", h_table(read.nodes, cond, algorithms)]
    parts += [_text("plots", f) + "\n", *(f"![{p.stem}]({p.relative_to(out).as_posix()})\n" for p in plots)]
    parts += [_text("sets", f) + "\n", _text("files", f)]
    return "\n".join(parts) + "\n"


def summary_rows(rows: Sequence[tuple[str, str, Stats]]) -> Rows:
    out: Rows = []
    for c, a, s in rows:
        r: dict[str, Any] = {"condition": c, "algorithm": a, "family": "tree" if a in TREES else "path"}
        r |= {"nodes": s.nodes, "mean_h": s.mean_h, "max_h": s.max_h, "ms_per_link": s.ms_per_link}
        for name, fit in (
            ("sd_ms", s.sd),
            ("a_ms", s.a),
            ("k", s.k),
            ("iqr_sd_ms", s.iqr_sd),
            ("a_iqr_ms", s.a_iqr),
            ("k_iqr", s.k_iqr),
            ("cv", s.cv),
        ):
            stem = name.removesuffix("_ms")
            r |= {name: fit.value, f"{stem}_lo": fit.lo, f"{stem}_hi": fit.hi}
        out.append(r | {"cv_hops": s.cv_hops.value, "multicasts": s.multicasts})
    return _rounded(out)


def _rounded(rows: Iterable[Mapping[str, Any]], digits: int = 6) -> Rows:
    return [{k: round(v, digits) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


# -- command --------------------------------------------------------------------------------------
OPTIONS = (
    Option("--topology", f"the mesh (default {TOPOLOGY})", default=TOPOLOGY),
    Option("--algorithms", "comma list (default all seven)", default=",".join(ALGORITHMS)),
    Option("--sets", f"destination sets, each from its own random source (default {SETS})", int, SETS),
    Option("--dests", f"destinations per set (default {DESTS})", int, DESTS),
    Option(
        "--warmup",
        f"repetitions per set and algorithm run first and left out (default {WARMUP})",
        int,
        WARMUP,
    ),
    Option("--link-delay", f"the link model's delay per link (default {LINK_DELAY})", default=LINK_DELAY),
    Option(
        "--link-jitter", f"the link model's jitter DIST:VALUE (default {LINK_JITTER})", default=LINK_JITTER
    ),
    framework.runtime_option(
        RUNTIME,
        ("processes", "in-process"),
        "where the nodes run (default processes: one "
        "OS process per node, warm across repetitions; in-process for a quick look)",
    ),
    Option(
        "--wall-budget",
        f"wall-clock budget of each multicast's run, s (default {WALL_BUDGET:g})",
        float,
        WALL_BUDGET,
    ),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """The checked options."""

    topology: Topology
    algorithms: tuple[str, ...]
    model: LinkModel
    extra: tuple[str, ...]  # the non-default options, for the command line in the report


def check(args: Any) -> Settings:
    """The options, checked: one line naming the fault for anything that cannot run."""
    try:
        topo = Topology.parse(args.topology)
    except ValueError as exc:
        raise UsageError(f"--topology: {exc}") from None
    if topo.is_torus:
        raise UsageError(f"--topology {args.topology}: this study runs on a mesh")
    algorithms = framework.names_in(args.algorithms, ALGORITHMS, "--algorithms")
    framework.positive(args.sets, "--sets")
    if not 1 <= args.dests <= topo.size - 1:
        raise UsageError(f"--dests must be between 1 and {topo.size - 1} on {topo.spec}, got {args.dests}")
    framework.positive(args.warmup, "--warmup", strict=False)
    if not (math.isfinite(args.wall_budget) and args.wall_budget > 0):
        raise UsageError(f"--wall-budget must be a positive number of seconds, got {args.wall_budget}")
    try:
        delay = parse_duration(args.link_delay, "--link-delay")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        spec = LinkSpec(delay=delay, jitter=Jitter.parse(args.link_jitter))
    except ValueError as exc:
        raise UsageError(f"--link-jitter: {exc}") from None
    if (problem := runtime_problem(args.runtime)) is not None:
        raise UsageError(problem)
    defaults = (
        ("topology", TOPOLOGY),
        ("algorithms", ",".join(ALGORITHMS)),
        ("sets", SETS),
        ("dests", DESTS),
        ("warmup", WARMUP),
        ("link_delay", LINK_DELAY),
        ("link_jitter", LINK_JITTER),
        ("runtime", RUNTIME),
        ("wall_budget", WALL_BUDGET),
    )
    extra = tuple(
        f"--{k.replace('_', '-')} {getattr(args, k):g}"
        if isinstance(d, float)
        else f"--{k.replace('_', '-')} {getattr(args, k)}"
        for k, d in defaults
        if getattr(args, k) != d
    )
    return Settings(topo, algorithms, LinkModel(spec, seed=args.seed), extra)


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run both conditions; write arrivals.csv, multicasts.csv, sets.csv and reproduction.json."""
    s = check(args)
    watch = framework.Stopwatch()
    load_before = _loadavg()
    sets = draw_sets(s.topology, args.sets, args.dests, args.seed)
    plan, slots = make_plan(s.topology, sets, s.algorithms, args.repeat, args.warmup)
    base = RunSettings(
        port_model=PORT_MODEL,
        contention="isolated",
        clock="free",
        seed=args.seed,
        runtime=args.runtime,
        wall_budget=args.wall_budget,
    )
    per = sum(len(m.destinations) for m in plan.multicasts)
    total = per * len(CONDITIONS)
    arrivals: Rows = []
    mcs: Rows = []
    notes: list[str] = []
    walls: dict[str, float] = {}
    for i, cond in enumerate(CONDITIONS):
        settings = base if cond == "bare" else replace(base, link_model=s.model)

        def progress(done: int, _total: int, offset: int = i * per) -> None:
            if ctx.progress is not None:
                ctx.progress(min(offset + done, total), total)

        t = framework.Stopwatch()
        raw, why = run_condition(plan, settings, progress)
        walls[cond] = round(t.wall(), 1)
        notes += [f"{cond}: {w}" for w in why]
        a, m = records(cond, plan, slots, raw)
        arrivals += a
        mcs += m
    framework.write_tidy(out / "arrivals.csv", ARRIVAL_COLUMNS, arrivals)
    framework.write_tidy(out / "multicasts.csv", MULTICAST_COLUMNS, mcs)
    framework.write_tidy(
        out / "sets.csv",
        SET_COLUMNS,
        (
            {"set": d.index, "source": _xy(d.source), "destinations": " ".join(map(_xy, d.destinations))}
            for d in sets
        ),
    )
    spec = s.model.default
    assert spec.jitter is not None
    facts = {
        "topology": s.topology.spec,
        "algorithms": list(s.algorithms),
        "sets": args.sets,
        "dests": args.dests,
        "warmup": args.warmup,
        "seed": args.seed,
        "runtime": args.runtime,
        "port_model": PORT_MODEL,
        "link_delay": args.link_delay,
        "link_jitter": args.link_jitter,
        "link_model": s.model.describe(),
        "delay_ms": spec.delay * 1e3,
        "jitter_sd_ms": spec.jitter.sd * 1e3,
        "condition_wall_s": walls,
        "notes": notes,
        "loadavg_before": load_before,
        "loadavg_after": _loadavg(),
        "memory_gib": _memory_gib(),
    }
    cmd = framework.command_line(NAME, args, *s.extra)
    framework.write_json(
        out / "reproduction.json", framework.run_facts(cmd, watch, repeat=args.repeat, **facts)
    )


@dataclass(frozen=True, slots=True)
class Read:
    """An earlier run's files, and the per-node and per-multicast rows made from them."""

    meta: dict[str, Any]
    arrivals: Rows
    multicasts: Rows
    sets: Rows
    nodes: Rows
    cvs: Rows


def _read(out: Path) -> Read:
    meta = json.loads((out / "reproduction.json").read_text())
    arrivals = framework.read_tidy(out / "arrivals.csv")
    mcs = framework.read_tidy(out / "multicasts.csv")
    sets = framework.read_tidy(out / "sets.csv")
    complete = {(m["condition"], m["algorithm"], m["set"], m["rep"]) for m in mcs if m["complete"]}
    return Read(meta, arrivals, mcs, sets, node_rows(arrivals, complete), cv_rows(arrivals, complete))


def run(args: Any, ctx: Context) -> int:
    """Emulate (unless ``--report-only``), then rebuild the derived tables, plots and report.md."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    read = framework.read_report_only(NAME, out, _read)
    meta = read.meta
    algorithms = tuple(meta["algorithms"])
    framework.write_tidy(out / "nodes.csv", NODE_COLUMNS, _rounded(read.nodes))
    framework.write_tidy(out / "cv.csv", CV_COLUMNS, _rounded(read.cvs))
    rows = [(c, a, stats(read.nodes, read.cvs, c, [a])) for c in CONDITIONS for a in algorithms]
    framework.write_tidy(out / "summary.csv", SUMMARY_COLUMNS, summary_rows(rows))
    report = build_report(out, read, rows, write_plots(out, read, rows))
    lines = []
    for cond in CONDITIONS:
        fam = families(read.nodes, read.cvs, cond, algorithms)
        if fam is not None:
            lines.append(
                f"{_title(cond, meta)}: at equal h, paths − trees: SD {fam.sd.diff.cell(3)} ms "
                f"({_SIGN[fam.sd.sign]} 0), robust SD {fam.iqr.diff.cell(3)} ms ({_SIGN[fam.iqr.sign]} 0); "
                f"mean h trees {fmt(fam.tree.mean_h, 1)}, paths {fmt(fam.path.mean_h, 1)}; "
                f"node-level CV trees {fam.tree.cv.cell(3)}, paths {fam.path.cv.cell(3)}"
            )
    wall = float(meta["wall_s"])
    said = f"variation: {len(read.multicasts)} multicasts in {wall:.1f} s; wrote {out / 'report.md'}"
    return framework.finish(ctx, out, report, said, lines, all(m["complete"] for m in read.multicasts))
