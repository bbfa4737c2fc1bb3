"""Seed 001 (Abd El-Baky, TASNEM): latency and traffic on tori — Figs. 8–11, plus PAIR and MIN.

The paper's §4: TASNEM against multipath-HCM, T2W and Uniform (our reconstructions, see
``node/routing/torus_paths.py``) on tori with all-port wormhole switching, 25 ns between adjacent
nodes, uniformly random destinations. Two sweeps, with the same destination sets for every
algorithm:

* **destinations** (Figs. 8–9): one torus (default T40 = 40×40, the largest in the paper) and
  k = 100, 200, …, 1500 and 1599 destinations (the paper's "100 to 1600"; a 1600-node torus has
  1599 nodes besides the source);
* **size** (Figs. 10–11): tori T5, T10, …, T40 with 20% of the nodes as destinations.

Latency is the paper's "longest message transmission path" at 25 ns per hop: the wormhole model of
:class:`coordinator.analysis.timing.Timing` with Ts = 0, β = 0, router delay 25 (ns) and L = 1, i.e.
Σ start-ups·(Ts + L·β) + hops·(β + router) = 25 ns × hops, maximised over the destinations. The
report also gives it with a start-up cost (``--ts``, default 1 µs) as a sensitivity check, and
the lockstep steps. Traffic is the number of link traversals. PAIR and MIN (seed 000, tree rules
that run on tori in four zones) run on the same sets with the same all-port model.

Each torus of a sweep is one isolated-contention plan. Tori up to ``--emulate-up-to`` columns
run in the emulation (``--runtime``, one emulation per plan); larger ones through the reference
model (``coordinator.runtimes.model.run_model``, which gives the emulation's records: tested equal), there
split by algorithm so that ``--jobs`` worker processes share the work. Output in ``--out``:
``report.md``, ``plots/*.png``, ``tidy.csv`` (one row per multicast), ``summary.csv`` (per
point, mean and 95% CI) and ``run.json`` (parameters and run status).
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.analysis.timing import Timing
from coordinator.errors import UsageError
from coordinator.experiments.run import RUNTIMES
from coordinator.output.report import Series, fmt, fmt_ci, markdown_table, plot_series
from coordinator.output.results import write_csv
from coordinator.reproduce.framework import (
    Context,
    Option,
    Stopwatch,
    finish,
    lockstep_settings,
    read_report_only,
    read_tidy,
    run_facts,
    run_pool,
    sign_counts,
    significance,
    write_json,
    write_tidy,
)
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Plan, PlanError

__all__ = [
    "ALGORITHMS",
    "DEFAULT_DESTS",
    "FIGURES",
    "HOP_NS",
    "PAPER_ALGORITHMS",
    "PAPER_TIMING",
    "Results",
    "make_jobs",
    "ordering",
    "size_k",
]

NAME = "tasnem"
SUMMARY = "seed 001 (TASNEM): latency/traffic vs destinations and torus size (Figs. 8–11), plus PAIR/MIN"
DEFAULT_REPEAT = 20  # the paper does not say how many runs per point ("various numbers of random networks")

PAPER_ALGORITHMS: tuple[str, ...] = ("tasnem", "hcm", "t2w", "uniform")
EXTRA_ALGORITHMS: tuple[str, ...] = ("pair", "min")
ALGORITHMS: tuple[str, ...] = PAPER_ALGORITHMS + EXTRA_ALGORITHMS
DEFAULT_SIZES: tuple[int, ...] = (5, 10, 15, 20, 25, 30, 35, 40)
DEFAULT_DEST_TORUS = 40
DEFAULT_DESTS: tuple[int, ...] = (*range(100, 1501, 100), 1599)
DEFAULT_PERCENT = 20.0
#: Tori with more columns than this go through the reference model (in-process lockstep runs
#: about 12 steps/s on 30×30 and slower beyond; a 40×40 size point alone takes ~5 min there).
DEFAULT_EMULATE_UP_TO = 30
HOP_NS = 25.0
#: The paper's latency: 25 ns per hop along the longest path, nothing per start-up or flit.
PAPER_TIMING = Timing(model="wormhole", ts=0.0, beta=0.0, flits=1, router=HOP_NS)
DEFAULT_TS_NS = 1000.0

#: Our colours (report.algorithm_colour maps all four seed-001 names to one colour).
COLOURS: Mapping[str, str] = {
    "tasnem": "#000000",
    "hcm": "#8c564b",
    "t2w": "#17becf",
    "uniform": "#bcbd22",
    "pair": "#ff7f0e",
    "min": "#2ca02c",
}
LABELS: Mapping[str, str] = {
    "tasnem": "TASNEM",
    "hcm": "multipath-HCM",
    "t2w": "T2W",
    "uniform": "Uniform",
    "pair": "PAIR",
    "min": "MIN",
}
SWEEPS: Mapping[str, str] = {"dests": "number of destinations", "size": "torus size"}
METRICS: Mapping[str, str] = {
    "latency_ns": "network latency (ns, 25 ns per hop)",
    "traffic": "network traffic (links)",
    "latency_ts_ns": "latency with start-up cost (ns)",
    "hops": "longest path (hops)",
    "time": "lockstep time (steps)",
}
TIDY_COLUMNS = (
    "sweep",
    "topology",
    "n",
    "k",
    "algorithm",
    "repetition",
    "source",
    "latency_ns",
    "latency_ts_ns",
    "hops",
    "bound_hops",
    "time",
    "traffic",
    "startups",
    "missing",
)
_SUMMARISED = ("latency_ns", "latency_ts_ns", "traffic", "hops", "time")
SUMMARY_COLUMNS = (
    "sweep",
    "topology",
    "n",
    "k",
    "algorithm",
    "reps",
    "complete",
    *(f"{m}_{s}" for m in _SUMMARISED for s in ("mean", "ci_low", "ci_high")),
    "bound_hops_mean",
    "startups_max",
)


@dataclass(frozen=True, slots=True)
class FigureSpec:
    """One plot: a sweep, a metric, the algorithms drawn, and the paper's figure it follows (if any)."""

    name: str
    sweep: str
    metric: str
    algorithms: tuple[str, ...]
    paper_figure: int | None

    @property
    def filename(self) -> str:
        return f"{self.name}.png"


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec("fig8_latency_vs_destinations", "dests", "latency_ns", PAPER_ALGORITHMS, 8),
    FigureSpec("fig9_traffic_vs_destinations", "dests", "traffic", PAPER_ALGORITHMS, 9),
    FigureSpec("fig10_latency_vs_size", "size", "latency_ns", PAPER_ALGORITHMS, 10),
    FigureSpec("fig11_traffic_vs_size", "size", "traffic", PAPER_ALGORITHMS, 11),
    FigureSpec("trees_latency_vs_destinations", "dests", "latency_ns", ("tasnem", *EXTRA_ALGORITHMS), None),
    FigureSpec("trees_traffic_vs_destinations", "dests", "traffic", ("tasnem", *EXTRA_ALGORITHMS), None),
    FigureSpec("trees_latency_vs_size", "size", "latency_ns", ("tasnem", *EXTRA_ALGORITHMS), None),
    FigureSpec("trees_traffic_vs_size", "size", "traffic", ("tasnem", *EXTRA_ALGORITHMS), None),
)


def size_k(n: int, percent: float) -> int:
    """Destinations on Tn at ``percent`` % of its n² nodes (rounded, at least 1, at most n² − 1)."""
    return min(n * n - 1, max(1, round(n * n * percent / 100)))


# -- jobs --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Job:
    """One run: the plan of one torus (``algorithms`` × ``ks`` × repeat) or its ``subset`` of algorithms.

    The plan is always drawn for all ``algorithms`` (so every job of a torus has the same
    destination sets); a job runs the multicasts of its ``subset``.
    """

    sweep: str
    topology: str
    ks: tuple[int, ...]
    algorithms: tuple[str, ...]
    subset: tuple[str, ...]
    runtime: str
    cost: float = 0.0

    @property
    def label(self) -> str:
        what = "all algorithms" if self.subset == self.algorithms else ",".join(self.subset)
        return f"{self.sweep} sweep {self.topology} ({what}; {self.runtime})"


@dataclass(slots=True)
class JobResult:
    """A job's rows and how its run went."""

    job: Job
    rows: list[dict[str, Any]]
    incomplete: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.incomplete and all(r["missing"] == 0 for r in self.rows)


def _estimate(sweep_ks: Sequence[int], subset: Sequence[str], side: int, repeat: int, runtime: str) -> float:
    """A rough relative cost, to start the longest jobs first (path rules carry O(k) headers O(k) hops)."""
    per = sum(k * k if a in ("hcm", "uniform") else k * side for a in subset for k in sweep_ks)
    return per * repeat * (1.0 if runtime == "model" else 30.0)


def make_jobs(
    dest_torus: int,
    dests: Sequence[int],
    sizes: Sequence[int],
    percent: float,
    algorithms: Sequence[str],
    repeat: int,
    runtime: str,
    emulate_up_to: int,
) -> list[Job]:
    """Every job of both sweeps, longest first; model runs split by algorithm, emulations whole."""
    algs = tuple(algorithms)
    jobs: list[Job] = []

    def add(sweep: str, side: int, ks: tuple[int, ...]) -> None:
        rt = runtime if side <= emulate_up_to else "model"
        topo = f"torus:{side}x{side}"
        subsets = [(a,) for a in algs] if rt == "model" and sweep == "dests" else [algs]
        for sub in subsets:
            jobs.append(Job(sweep, topo, ks, algs, sub, rt, _estimate(ks, sub, side, repeat, rt)))

    add("dests", dest_torus, tuple(dests))
    for n in sizes:
        add("size", n, (size_k(n, percent),))
    return sorted(jobs, key=lambda j: -j.cost)


def _sub_plan(plan: Plan, subset: Sequence[str]) -> tuple[Plan, list[int]]:
    """The multicasts of ``subset``, renumbered 0.., and each one's index in ``plan``."""
    keep = [i for i, m in enumerate(plan.multicasts) if m.algorithm in subset]
    mcs = tuple(replace(plan.multicasts[i], id=j) for j, i in enumerate(keep))
    return Plan(plan.topology, mcs), keep


def run_job(job: Job, repeat: int, seed: int, settings: RunSettings, ts_ns: float) -> JobResult:
    """Run one job (in a worker process or here) and return one row per multicast."""
    import trio

    from coordinator.analysis.metrics import multicast_metrics
    from coordinator.analysis.timing import apply_timing
    from coordinator.experiments.run import emulate
    from coordinator.experiments.sweep import sweep_plan
    from node.topology import Topology

    topo = Topology.parse(job.topology)
    full, points = sweep_plan(topo, list(job.algorithms), list(job.ks), repeat, seed, None)
    plan, index = _sub_plan(full, job.subset)
    st = replace(settings, runtime=job.runtime)
    t0, c0 = time.perf_counter(), time.process_time()
    raw = trio.run(emulate, plan, st, None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    records = multicast_metrics(plan, raw)
    apply_timing(records, PAPER_TIMING)
    with_ts = replace(PAPER_TIMING, ts=ts_ns)
    rows = []
    for m, rec, i in zip(plan.multicasts, records, index, strict=True):
        k, rep = points[i]
        arr = rec["arrivals"]
        complete = not rec["missing"]
        rows.append(
            {
                "sweep": job.sweep,
                "topology": job.topology,
                "n": topo.cols,
                "k": k,
                "algorithm": m.algorithm,
                "repetition": rep,
                "source": f"{m.source[0]},{m.source[1]}",
                "latency_ns": rec["latency"]["max"],
                "latency_ts_ns": (
                    max(with_ts.latency(a["step"], a["hops"], a["startups"]) for a in arr)
                    if complete
                    else None
                ),
                "hops": max(a["hops"] for a in arr) if complete else None,
                "bound_hops": max(topo.distance(m.source, d) for d in m.destinations),
                "time": rec["time"],
                "traffic": rec["traffic"],
                "startups": max((a["startups"] for a in arr), default=0),
                "missing": len(rec["missing"]),
            }
        )
    return JobResult(job, rows, list(raw.incomplete), list(raw.errors)[:20], raw.last_step, wall, cpu)


# -- numbers -----------------------------------------------------------------------------------
def summarise(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per sweep × torus × k × algorithm: mean and 95% CI of each metric, the bound, the start-ups."""
    from coordinator.analysis.metrics import ci95

    groups: dict[tuple[str, str, int, int, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["sweep"], r["topology"], r["n"], r["k"], r["algorithm"]), []).append(r)
    out = []
    for (sweep, topo, n, k, alg), rs in sorted(
        groups.items(), key=lambda e: (e[0][0], e[0][2], e[0][3], ALGORITHMS.index(e[0][4]))
    ):
        row: dict[str, Any] = {
            "sweep": sweep,
            "topology": topo,
            "n": n,
            "k": k,
            "algorithm": alg,
            "reps": len(rs),
            "complete": sum(1 for r in rs if r["missing"] == 0),
        }
        for m in _SUMMARISED:
            s = ci95([float(r[m]) for r in rs if r[m] is not None])
            row[f"{m}_mean"] = s["mean"]
            row[f"{m}_ci_low"], row[f"{m}_ci_high"] = s["ci95"]
        row["bound_hops_mean"] = statistics.fmean(r["bound_hops"] for r in rs)
        row["startups_max"] = max(r["startups"] for r in rs)
        out.append(row)
    return out


@dataclass(frozen=True, slots=True)
class Results:
    """Rows and summaries indexed by sweep and point (x = k for the destinations sweep, n for size)."""

    tidy: Mapping[tuple[str, str, int, int], Mapping[str, Any]]  # (sweep, alg, x, rep) → row
    summary: Mapping[tuple[str, str, int], Mapping[str, Any]]  # (sweep, alg, x) → row
    xs: Mapping[str, tuple[int, ...]]
    algorithms: tuple[str, ...]
    repeat: int

    @staticmethod
    def build(rows: Sequence[Mapping[str, Any]], algorithms: Sequence[str], repeat: int) -> Results:
        def x(r: Mapping[str, Any]) -> int:
            return int(r["k"] if r["sweep"] == "dests" else r["n"])

        tidy = {(r["sweep"], r["algorithm"], x(r), r["repetition"]): r for r in rows}
        summ = {(r["sweep"], r["algorithm"], x(r)): r for r in summarise(rows)}
        xs = {s: tuple(sorted({p[2] for p in summ if p[0] == s})) for s in SWEEPS}
        return Results(tidy, summ, xs, tuple(algorithms), repeat)

    def mean(self, sweep: str, alg: str, x: int, metric: str) -> float | None:
        r = self.summary.get((sweep, alg, x))
        return None if r is None else r[f"{metric}_mean"]

    def ci(self, sweep: str, alg: str, x: int, metric: str) -> tuple[float | None, float | None]:
        r = self.summary.get((sweep, alg, x))
        return (None, None) if r is None else (r[f"{metric}_ci_low"], r[f"{metric}_ci_high"])

    def diffs(self, sweep: str, a: str, b: str, x: int, metric: str) -> list[float]:
        """Per destination set at point x: a − b (the same sets, so the differences are paired)."""
        out = []
        for rep in range(self.repeat):
            ra, rb = self.tidy.get((sweep, a, x, rep)), self.tidy.get((sweep, b, x, rep))
            if ra is not None and rb is not None and ra[metric] is not None and rb[metric] is not None:
                out.append(float(ra[metric]) - float(rb[metric]))
        return out

    def topology(self, sweep: str, x: int) -> str:
        for alg in self.algorithms:
            r = self.summary.get((sweep, alg, x))
            if r is not None:
                return str(r["topology"])
        return "?"


@dataclass(frozen=True, slots=True)
class OrderCheck:
    """The paper's ordering on one sweep and metric: TASNEM lowest and Uniform highest, point by point."""

    sweep: str
    metric: str
    points: int
    tasnem_lowest: int
    tasnem_significant: int
    uniform_highest: int
    uniform_significant: int
    lowest_elsewhere: tuple[tuple[int, str], ...]  # (point, the lowest algorithm(s), "A = B" when tied)
    highest_elsewhere: tuple[tuple[int, str], ...]

    @property
    def holds(self) -> bool:
        return self.tasnem_lowest == self.points and self.uniform_highest == self.points


def ordering(res: Results, sweep: str, metric: str) -> OrderCheck:
    """Check the paper's ordering among its four algorithms at every point of a sweep."""
    algs = [a for a in PAPER_ALGORITHMS if a in res.algorithms]
    low = low_sig = high = high_sig = 0
    low_else: list[tuple[int, str]] = []
    high_else: list[tuple[int, str]] = []
    xs = res.xs[sweep]
    for x in xs:
        means = {a: res.mean(sweep, a, x, metric) for a in algs}
        known = {a: v for a, v in means.items() if v is not None}
        if len(known) < len(algs):
            continue
        others = [a for a in algs if a != "tasnem"]
        if all(known["tasnem"] < known[a] for a in others):
            low += 1
            if all(significance(res.diffs(sweep, "tasnem", a, x, metric)) < 0 for a in others):
                low_sig += 1
        else:
            best = min(known.values())
            low_else.append((x, " = ".join(LABELS[a] for a in algs if known[a] == best)))
        others = [a for a in algs if a != "uniform"]
        if all(known["uniform"] > known[a] for a in others):
            high += 1
            if all(significance(res.diffs(sweep, "uniform", a, x, metric)) > 0 for a in others):
                high_sig += 1
        else:
            worst = max(known.values())
            high_else.append((x, " = ".join(LABELS[a] for a in algs if known[a] == worst)))
    return OrderCheck(sweep, metric, len(xs), low, low_sig, high, high_sig, tuple(low_else), tuple(high_else))


def _x_name(sweep: str, x: int) -> str:
    return f"k = {x}" if sweep == "dests" else f"T{x}"


def _xs_text(sweep: str, pts: Sequence[tuple[int, str]]) -> str:
    return ", ".join(f"{_x_name(sweep, x)} ({names})" for x, names in pts)


def _order_lines(res: Results) -> tuple[bool, list[str]]:
    """(does the ordering hold everywhere?, one bullet per sweep × metric, then the verdict)."""
    lines = []
    checks = [ordering(res, sweep, metric) for sweep in SWEEPS for metric in ("latency_ns", "traffic")]
    for c in checks:
        what = "latency" if c.metric == "latency_ns" else "traffic"
        s = (
            f"- **{SWEEPS[c.sweep]}, {what}**: TASNEM lowest of the four at {c.tasnem_lowest} of "
            f"{c.points} points (significantly below each of the other three, paired 95% CI, at "
            f"{c.tasnem_significant})"
        )
        if c.lowest_elsewhere:
            s += f"; lowest instead: {_xs_text(c.sweep, c.lowest_elsewhere)}"
        s += (
            f". Uniform highest at {c.uniform_highest} of {c.points} (significantly above each other at "
            f"{c.uniform_significant})"
        )
        if c.highest_elsewhere:
            s += f"; highest instead: {_xs_text(c.sweep, c.highest_elsewhere)}"
        lines.append(s + ".")
    points = sum(c.points for c in checks)
    low = sum(c.tasnem_lowest for c in checks)
    high = sum(c.uniform_highest for c in checks)
    holds = points > 0 and low == points and high == points
    if holds:
        verdict = (
            f"**Verdict: the paper's ordering holds** in our runs at every one of the {points} points "
            "(sweep × metric): TASNEM has the lowest mean latency and traffic, Uniform the highest."
        )
    else:
        verdict = (
            f"**Verdict: the paper's ordering does not hold** in our runs. Of the {points} points (both "
            f"sweeps × latency and traffic), TASNEM has the lowest mean at {low} "
            f"({'that half holds' if low == points else 'it fails at ' + str(points - low)}) and "
            f"Uniform the highest at {high} "
            f"({'that half holds' if high == points else 'it fails at ' + str(points - high)})."
        )
    ties = [(c.sweep, x) for c in checks for x, names in c.lowest_elsewhere if "TASNEM" in names.split(" = ")]
    if ties:
        verdict += (
            f" {len(ties)} of the failures {'is a tie' if len(ties) == 1 else 'are ties'} for the lowest ("
            + ", ".join(_x_name(sw, x) for sw, x in ties)
            + "; with every other node a destination, every scheme's traffic is the k links of a spanning "
            "tree)."
        )
    beaters = sorted(
        {
            n
            for c in checks
            for _, names in c.lowest_elsewhere
            if "TASNEM" not in names
            for n in names.split(" = ")
        }
    )
    if beaters:
        verdict += (
            f" Where TASNEM is beaten, the lowest is {' or '.join(beaters)}. HCM, T2W and Uniform "
            "are our reconstructions from the paper's prose, so an exception involving them may be a "
            "difference between our reading and the authors' implementations as much as a property of TASNEM."
        )
    lines += ["", verdict]
    return holds, lines


def _trend(res: Results, sweep: str, alg: str, metric: str) -> tuple[float | None, float | None, int, int]:
    """(first mean, last mean, rises, falls) between consecutive points of a sweep."""
    vals = [res.mean(sweep, alg, x, metric) for x in res.xs[sweep]]
    known = [v for v in vals if v is not None]
    if len(known) < 2:
        return (known[0] if known else None), None, 0, 0
    rises = sum(1 for a, b in itertools.pairwise(known) if b > a)
    falls = sum(1 for a, b in itertools.pairwise(known) if b < a)
    return known[0], known[-1], rises, falls


def _trend_text(res: Results, sweep: str, alg: str, metric: str) -> str:
    """``NAME first → last UNIT (r rises, f falls)``."""
    f0, f1, r, f = _trend(res, sweep, alg, metric)
    unit = "ns" if metric.startswith("latency") else "links"
    return f"{LABELS[alg]} {fmt(f0, 0)} → {fmt(f1, 0)} {unit} ({r} rises, {f} falls)"


def _trend_claim(res: Results, quote: str, sweep: str, algs: Sequence[str], metric: str, up: bool) -> str:
    """A bullet checking "these curves rise" (or fall).

    Yes when the last point's mean is above (below) the first's for every algorithm; monotone when
    no step between consecutive points goes the other way."""
    trends = [_trend(res, sweep, a, metric) for a in algs]
    ok = all(f0 is not None and f1 is not None and (f1 > f0 if up else f1 < f0) for f0, f1, _, _ in trends)
    monotone = all((f if up else r) == 0 for _, _, r, f in trends)
    xs = res.xs[sweep]
    span = f"{_x_name(sweep, xs[0])} → {_x_name(sweep, xs[-1])}"
    return (
        f'- *"{quote}"*: **{"yes" if ok else "no"}**'
        + (f" ({'monotonically' if monotone else 'not monotonically'})" if ok else "")
        + f" — {span}: "
        + "; ".join(_trend_text(res, sweep, a, metric) for a in algs)
        + "."
    )


def _trend_lines(res: Results) -> list[str]:
    """The paper's statements about how the curves move (§4.1–4.2), each checked."""
    out = []
    algs = [a for a in PAPER_ALGORITHMS if a in res.algorithms]
    others = [a for a in algs if a != "tasnem"]
    if len(res.xs["dests"]) >= 2:
        claims = (
            ("The network latency obtained by TASNEM algorithm decreases when the number of destinations "
             "nodes increases", ["tasnem"], "latency_ns", False),
            ("The network latency obtained by the other algorithms increases when the number of "
             "destination nodes increases", others, "latency_ns", True),
            ("As the number of destination nodes increases, the network traffic obtained by all "
             "algorithms increases", algs, "traffic", True),
        )  # fmt: skip
        for quote, these, metric, up in claims:
            out.append(_trend_claim(res, quote, "dests", these, metric, up))
    ns = res.xs["size"]
    if len(ns) >= 2:
        for metric, what in (("latency_ns", "latency"), ("traffic", "traffic")):
            quote = f"As the torus size increases, the network {what} obtained by all algorithms increases"
            out.append(_trend_claim(res, quote, "size", algs, metric, True))
        growth = {}
        for a in algs:
            f0, f1, _, _ = _trend(res, "size", a, "traffic")
            if f0 and f1 is not None:
                growth[a] = f1 / f0
        if "tasnem" in growth and len(growth) > 1:
            slowest = min(growth, key=lambda a: growth[a])
            out.append(
                '- *"The increasing rate of the traffic curve obtained by TASNEM algorithm is very less than '
                f'[those of] the other algorithms"*: **{"yes" if slowest == "tasnem" else "no"}** — '
                f"from T{ns[0]} to T{ns[-1]} the traffic grows ×{growth['tasnem']:.1f} with TASNEM, "
                + ", ".join(f"×{g:.1f} with {LABELS[a]}" for a, g in growth.items() if a != "tasnem")
                + "."
            )
    return out


@dataclass(frozen=True, slots=True)
class Versus:
    """An algorithm against TASNEM over one sweep and metric, on the same destination sets."""

    points_lower: int
    points_same: int
    points_higher: int
    sets_lower: int
    sets_equal: int
    sets_higher: int
    mean_pct: float | None  # mean over the points of (alg − TASNEM) / TASNEM, in %
    pct_range: tuple[float, float] | None


def versus(res: Results, sweep: str, alg: str, metric: str) -> Versus:
    """Compare ``alg`` with TASNEM at each point (paired CI) and over every destination set."""
    pl = ps = ph = sl = se = sh = 0
    pcts: list[float] = []
    for x in res.xs[sweep]:
        d = res.diffs(sweep, alg, "tasnem", x, metric)
        sig = significance(d)
        pl += sig < 0
        ps += sig == 0 and bool(d)
        ph += sig > 0
        lo, eq, hi = sign_counts(d)
        sl, se, sh = sl + lo, se + eq, sh + hi
        ma, mt = res.mean(sweep, alg, x, metric), res.mean(sweep, "tasnem", x, metric)
        if ma is not None and mt:
            pcts.append((ma - mt) / mt * 100)
    return Versus(
        pl, ps, ph, sl, se, sh,
        statistics.fmean(pcts) if pcts else None,
        (min(pcts), max(pcts)) if pcts else None,
    )  # fmt: skip


def _pct_text(v: Versus) -> str:
    if v.mean_pct is None or v.pct_range is None:
        return "—"
    lo, hi = v.pct_range
    return f"{v.mean_pct:+.1f}% on average ({lo:+.1f}% to {hi:+.1f}%)"


def _bound_share(res: Results, sweeps: Sequence[str], alg: str) -> tuple[int, int, float]:
    """Of ``alg``'s multicasts: how many reach their farthest destination in the shortest distance,
    how many there are, and by how many hops their longest path exceeds that distance on average."""
    at = n = 0
    excess = 0
    for (s, a, _, _), r in res.tidy.items():
        if s in sweeps and a == alg and r["hops"] is not None:
            n += 1
            at += r["hops"] == r["bound_hops"]
            excess += r["hops"] - r["bound_hops"]
    return at, n, excess / n if n else 0.0


def _trees_lines(res: Results) -> list[str]:
    """TASNEM against PAIR and MIN: a table per sweep and a computed statement."""
    extras = [a for a in EXTRA_ALGORITHMS if a in res.algorithms]
    if not extras or "tasnem" not in res.algorithms:
        return ["(PAIR and MIN were not run: `--no-extras`.)\n"]
    out = [
        "PAIR and MIN (seed 000) build the multicast tree at the source, in the four zones of the "
        "torus around it, from shortest (XY) paths, and carry each branch's subtree in its header; "
        "TASNEM carries a destination list and decides at every node. Both run here all-port with "
        "the same timing on the same destination sets. Differences are per destination set "
        "(alg − TASNEM); a point counts as lower or higher when the paired 95% CI excludes 0.\n"
    ]
    rows = []
    verdicts: dict[tuple[str, str], Versus] = {}
    for sweep in SWEEPS:
        if not res.xs[sweep]:
            continue
        for alg in extras:
            for metric in ("latency_ns", "traffic"):
                v = versus(res, sweep, alg, metric)
                verdicts[(alg, f"{sweep}:{metric}")] = v
                n_sets = v.sets_lower + v.sets_equal + v.sets_higher
                rows.append(
                    [
                        SWEEPS[sweep],
                        LABELS[alg],
                        "latency" if metric == "latency_ns" else "traffic",
                        f"{v.points_lower} / {v.points_same} / {v.points_higher}",
                        f"{v.sets_lower} / {v.sets_equal} / {v.sets_higher} of {n_sets}",
                        _pct_text(v),
                    ]
                )
    header = [
        "sweep",
        "vs TASNEM",
        "metric",
        "points lower / same / higher",
        "sets lower / equal / higher",
        "mean difference",
    ]
    out.append(markdown_table(header, rows, ["l", "l", "l", "r", "r", "r"]))
    bound_rows = []
    for sweep in SWEEPS:
        if not res.xs[sweep]:
            continue
        cells = []
        for a in res.algorithms:
            at, n, excess = _bound_share(res, [sweep], a)
            cells.append(f"{at / n * 100:.0f}% (+{excess:.1f})" if n else "—")
        bound_rows.append([SWEEPS[sweep], *cells])
    out.append(
        "Share of multicasts whose longest path equals the distance to the farthest destination "
        "(the lower bound of any scheme's latency), and in brackets the mean excess of the longest "
        "path over that distance, in hops:\n"
    )
    labels = [LABELS[a] for a in res.algorithms]
    out.append(markdown_table(["sweep", *labels], bound_rows, ["l"] + ["r"] * len(labels)))
    sentences = []
    for alg in extras:
        for metric, what in (("latency_ns", "latency"), ("traffic", "traffic")):
            vs = [verdicts[(alg, f"{s}:{metric}")] for s in SWEEPS if (alg, f"{s}:{metric}") in verdicts]
            pts = sum(v.points_lower + v.points_same + v.points_higher for v in vs)
            lower = sum(v.points_lower for v in vs)
            higher = sum(v.points_higher for v in vs)
            pcts = [v.mean_pct for v in vs if v.mean_pct is not None]
            avg = f"{statistics.fmean(pcts):+.0f}%" if pcts else "—"
            name = f"{LABELS[alg]}'s {what}"
            if lower == pts:
                sentences.append(f"{name} is significantly below TASNEM's at every point ({avg} on average)")
            elif higher == pts:
                sentences.append(f"{name} is significantly above TASNEM's at every point ({avg} on average)")
            else:
                sentences.append(
                    f"{name} is significantly below TASNEM's at {lower}, above at {higher} and "
                    f"indistinguishable at {pts - lower - higher} of {pts} points ({avg} on average)"
                )
    never_slower = all(
        verdicts[(a, f"{s}:latency_ns")].points_higher == 0
        for a in extras
        for s in SWEEPS
        if (a, f"{s}:latency_ns") in verdicts
    )
    stats = {a: _bound_share(res, list(SWEEPS), a) for a in ("tasnem", *extras)}

    def share(a: str) -> str:
        at, n, excess = stats[a]
        pct = at / n * 100 if n else 0.0
        return f"{LABELS[a]} at the bound in {pct:.0f}% of the sets, {excess:.1f} hops above it on average"

    out.append(
        "**What it shows.** "
        + "; ".join(sentences)
        + ". Why: all-port, a tree's latency is its deepest root-to-destination path, and the seed-000 "
        "trees are grown from XY paths inside the four zones around the source, so that path is at or "
        "near the distance to the farthest destination ("
        + "; ".join(share(a) for a in extras)
        + "), while TASNEM's reaches a destination only after a main path snaking over the rows of its "
        f"half ({share('tasnem')})"
        + (
            "; neither tree is significantly slower than TASNEM at any point."
            if never_slower
            else "; but at some points a seed-000 tree is the slower one (table above)."
        )
        + " Their price is at the source (it computes the whole tree) and in the headers (a subtree "
        "rather than a destination list); like TASNEM they need one start-up per delivery here.\n"
    )
    return out


# -- report ------------------------------------------------------------------------------------
def _point_table(res: Results, sweep: str, metric: str, digits: int) -> str:
    algs = list(res.algorithms)
    rows = []
    for x in res.xs[sweep]:
        first = [f"{x}", res.topology(sweep, x)] if sweep == "dests" else [f"T{x}", str(_k_of(res, x))]
        cells = [fmt_ci(res.mean(sweep, a, x, metric), *res.ci(sweep, a, x, metric), digits) for a in algs]
        r = res.summary.get((sweep, algs[0], x))
        b = None
        if r is not None:
            b = r["bound_hops_mean"] * HOP_NS if metric.startswith("latency") else float(r["k"])
        rows.append([*first, *cells, fmt(b, digits)])
    head = ["k", "torus"] if sweep == "dests" else ["torus", "k"]
    return markdown_table([*head, *(LABELS[a] for a in algs), "bound"], rows, ["r"] * (len(algs) + 3))


def _k_of(res: Results, n: int) -> int:
    for a in res.algorithms:
        r = res.summary.get(("size", a, n))
        if r is not None:
            return int(r["k"])
    return 0


def _consistency_lines(res: Results) -> list[str]:
    """Start-ups per algorithm and whether the lockstep time equals the longest path."""
    out = []
    cells = []
    for a in res.algorithms:
        ups = [r["startups"] for (_, alg, _, _), r in res.tidy.items() if alg == a]
        cells.append(f"{LABELS[a]} {max(ups, default=0)}")
    out.append(
        "Start-ups (the most any delivery needed): " + ", ".join(cells) + ". TASNEM's two packets (one per "
        'mesh half: the paper\'s "at most two start-up times") leave the source at once on separate '
        "injection channels (§3.1), so each delivery is one start-up away."
    )
    diff = [
        (a, r) for (_, a, _, _), r in res.tidy.items() if r["hops"] is not None and r["time"] != r["hops"]
    ]
    total = sum(1 for r in res.tidy.values() if r["hops"] is not None)
    if diff:
        algs = sorted({a for a, _ in diff}, key=ALGORITHMS.index)
        out.append(
            f"Lockstep time ≠ longest path in {len(diff)} of {total} multicasts "
            f"({', '.join(LABELS[a] for a in algs)}): packets of one multicast queued behind each other "
            "on a port. The latency above is the paper's (hops, contention-free, as with its two virtual "
            "channels per link); the steps are in `tidy.csv`."
        )
    else:
        out.append(
            f"In all {total} multicasts the lockstep time (steps) equals the longest path (hops): no "
            "multicast's packets ever waited for each other, so the contention-free latency is exact here."
        )
    return out


def _ts_lines(res: Results, ts_ns: float) -> list[str]:
    """Does the ordering survive a start-up cost?"""
    out = []
    for sweep in SWEEPS:
        if not res.xs[sweep]:
            continue
        c = ordering(res, sweep, "latency_ts_ns")
        out.append(
            f"- {SWEEPS[sweep]}: TASNEM lowest at {c.tasnem_lowest} of {c.points} points, Uniform highest at "
            f"{c.uniform_highest}"
            + (f"; lowest instead: {_xs_text(sweep, c.lowest_elsewhere)}" if c.lowest_elsewhere else "")
            + (f"; highest instead: {_xs_text(sweep, c.highest_elsewhere)}" if c.highest_elsewhere else "")
            + "."
        )
    return [
        f"Sensitivity: with a start-up cost Ts = {ts_ns:g} ns (latency = start-ups·Ts + 25 ns·hops; T2W's "
        "vertical paths need a second start-up, every other scheme one), the latency ordering becomes:\n",
        *out,
        "",
    ]


@dataclass(frozen=True, slots=True)
class Config:
    """The parameters of one reproduction run (echoed in the report and run.json)."""

    repeat: int
    seed: int
    dest_torus: int
    dests: tuple[int, ...]
    sizes: tuple[int, ...]
    percent: float
    algorithms: tuple[str, ...]
    runtime: str
    emulate_up_to: int
    ts_ns: float
    jobs: int

    @property
    def command(self) -> str:
        """The command line of this run: the non-default options only."""
        opts = (
            (self.dest_torus != DEFAULT_DEST_TORUS, f"--dest-torus {self.dest_torus}"),
            (self.dests != DEFAULT_DESTS, f"--dests {','.join(map(str, self.dests))}"),
            (self.sizes != DEFAULT_SIZES, f"--sizes {','.join(map(str, self.sizes))}"),
            (self.percent != DEFAULT_PERCENT, f"--percent {self.percent:g}"),
            (self.algorithms != ALGORITHMS, "--no-extras"),
            (self.runtime != "in-process", f"--runtime {self.runtime}"),
            (self.emulate_up_to != DEFAULT_EMULATE_UP_TO, f"--emulate-up-to {self.emulate_up_to}"),
            (self.ts_ns != DEFAULT_TS_NS, f"--ts {self.ts_ns:g}"),
        )
        return " ".join(
            [f"meshcast reproduce tasnem --repeat {self.repeat} --seed {self.seed}"]
            + [o for on, o in opts if on]
        )


def _runs_text(results: Sequence[JobResult], cfg: Config) -> str:
    emu = sorted({int(r.job.topology.split("x")[1]) for r in results if r.job.runtime != "model"})
    mod = sorted({int(r.job.topology.split("x")[1]) for r in results if r.job.runtime == "model"})
    parts = []
    if emu:
        parts.append(
            f"{', '.join(f'T{n}' for n in emu)} in the emulation ({cfg.runtime}, one emulation per torus)"
        )
    if mod:
        parts.append(
            f"{', '.join(f'T{n}' for n in mod)} through the reference model "
            "(`coordinator.runtimes.model.run_model`, "
            "which gives the emulation's records exactly — `tests/test_emulation_vs_model.py`; tori above "
            f"{cfg.emulate_up_to}×{cfg.emulate_up_to} are too slow for the in-process lockstep emulation "
            "within this run's budget, a 40×40 size point alone taking about 5 minutes; the model's runs "
            "of the destinations sweep are split by algorithm over the worker processes)"
        )
    return "; ".join(parts)


def _idle_estimate(results: Sequence[JobResult], workers: int) -> float:
    """Seconds the runs would take on idle CPUs: their CPU time shared by the workers, or the longest run."""
    cpu = [r.cpu_s for r in results]
    return max(sum(cpu) / max(1, workers), max(cpu, default=0.0))


def build_report(
    results: Sequence[JobResult],
    res: Results,
    plots: Sequence[Path],
    out: Path,
    cfg: Config,
    meta: Mapping[str, Any],
) -> str:
    """report.md's text."""
    complete = all(r.complete for r in results)
    _, order = _order_lines(res)
    n_mc = sum(len(r.rows) for r in results)
    parts = [
        "# Reproduction of seed 001 (TASNEM): Figs. 8–11, and TASNEM against PAIR and MIN\n",
        f"Generated by `{cfg.command}` ({meta['date']}). {n_mc} multicasts in {len(results)} runs, wall time "
        f"**{meta['wall_s']:.1f} s** with {cfg.jobs} worker process(es) on {meta['cpus']} CPU(s) "
        f"({meta['machine']}); the runs took {sum(r.cpu_s for r in results):.0f} CPU-seconds, the "
        f"machine's load average was {meta['load'][0]:.1f} at the start and {meta['load'][1]:.1f} at the "
        "end (other work on it slows the run); on an idle machine the runs need about "
        f"{_idle_estimate(results, cfg.jobs):.0f} s "
        "(their CPU time over the workers, or the longest run if that is longer)."
        + (
            f" Report rebuilt from the CSVs on {meta['rebuilt']} (`--report-only`)."
            if "rebuilt" in meta
            else ""
        )
        + "\n",
        "## Setting\n",
        f"- Tori, all-port, isolated contention (every multicast sees an idle network), lockstep clock; the "
        f"source drawn uniformly for each destination set; {cfg.repeat} random destination sets per point "
        f"(seed {cfg.seed}), the same sets for every algorithm: "
        + ", ".join(LABELS[a] for a in cfg.algorithms)
        + ".",
        f"- Destinations sweep (Figs. 8–9): T{cfg.dest_torus}, k = {', '.join(map(str, cfg.dests))}. "
        'The paper says "100 to 1600" without naming the torus; T40 is its largest (1600 nodes, so at '
        "most 1599 destinations besides the source).",
        f"- Size sweep (Figs. 10–11): {', '.join(f'T{n}' for n in cfg.sizes)} at {cfg.percent:g}% "
        f"destinations (k = {', '.join(str(size_k(n, cfg.percent)) for n in cfg.sizes)}).",
        f"- Runs: {_runs_text(results, cfg)}.",
        "- HCM, T2W and Uniform are reconstructions from the paper's §2 prose (`node/routing/torus_paths.py` "
        "says where each choice was made); TASNEM follows its Figs. 2–3 (`node/routing/tasnem.py`).",
        "",
        "Run status: "
        + ("complete" if complete else "**INCOMPLETE**")
        + ". "
        + "; ".join(
            f"{r.job.label}: {'ok' if r.complete else 'INCOMPLETE — ' + '; '.join(r.incomplete)}, "
            f"{r.steps} steps, {r.wall_s:.1f} s ({r.cpu_s:.1f} s CPU)"
            + (f", {len(r.errors)} node errors" if r.errors else "")
            for r in sorted(results, key=lambda r: (r.job.sweep, r.job.topology, r.job.subset))
        )
        + ".\n",
        "## Timing model\n",
        'The paper (§3.4, §4): *"The network latency is equal to the longest message transmission path '
        'involved"* and *"the network latency time between any two adjacent nodes has been set at 25 ns"*; '
        'traffic is *"the number of channels used to deliver all messages"*. So a multicast\'s latency is '
        "25 ns × the hops of its longest path (source to the last-reached destination, across "
        "re-injections), and its traffic the link traversals of all its packets. In "
        "`coordinator.analysis.timing.Timing` this is the contention-free wormhole model with "
        f'`Timing(model="wormhole", ts=0, beta=0, flits=1, router={HOP_NS:g})`: Σ start-ups·(Ts + L·β) + '
        "hops·(β + router) = 25 ns·hops per delivery, maximised over the destinations "
        "(`apply_timing`'s `latency.max`). The paper gives no start-up time, message length or flit time; "
        "its latencies leave them out, and so do ours. A sensitivity check with a start-up cost follows "
        "the ordering below. The **bound** columns are the mean distance to the farthest destination × "
        "25 ns (no scheme can do better) and k links (each destination needs a link into it).\n",
        "## The paper's ordering, checked\n",
        '*"In all tested cases, the network latency and the network traffic obtained by TASNEM algorithm '
        "are less than [those of] the other algorithms. Also, [those of] Uniform algorithm are more than "
        "[those of] the other algorithms.\"* (§4.2) — among the paper's four, by the means at each point:\n",
        *order,
        "",
        "The paper's statements about the curves:\n",
        *_trend_lines(res),
        "",
        *_ts_lines(res, cfg.ts_ns),
        "\n\n".join(_consistency_lines(res)),
        "",
        "## TASNEM against the seed-000 torus trees (PAIR, MIN)\n",
        *_trees_lines(res),
        "## Tables\n",
        "Mean [95% CI] over the destination sets.\n",
    ]
    for sweep in SWEEPS:
        if not res.xs[sweep]:
            continue
        for metric, digits in (("latency_ns", 0), ("traffic", 1)):
            parts.append(f"### {METRICS[metric]} vs {SWEEPS[sweep]}\n")
            parts.append(_point_table(res, sweep, metric, digits))
    parts.append("## Plots\n")
    parts.append(
        "Figs. 8–11 as in the paper (its four algorithms); the `trees_*` plots put TASNEM beside PAIR and "
        "MIN. Solid lines are ours with the 95% CI shaded; the paper gives its results only as figures "
        "(no numbers), so the dashed grey line is not the paper's but the lower bound.\n"
    )
    for p in plots:
        parts.append(f"![{p.stem}]({p.relative_to(out).as_posix()})\n")
    parts.append("## Files\n")
    parts.append(
        "`tidy.csv`: one row per multicast (latency_ns, latency_ts_ns with the start-up cost, hops of the "
        "longest path, bound_hops, lockstep time, traffic, start-ups, missing); `summary.csv`: per point "
        "mean and 95% CI; `run.json`: parameters and run status.\n"
    )
    return "\n".join(parts)


def write_plots(out: Path, res: Results, percent: float = DEFAULT_PERCENT) -> list[Path]:
    """The PNGs of :data:`FIGURES` (those whose sweep has points and whose algorithms were run)."""
    written = []
    for spec in FIGURES:
        xs = res.xs[spec.sweep]
        algs = [a for a in spec.algorithms if a in res.algorithms]
        if not xs or len(algs) < 2:
            continue
        series = []
        for a in algs:
            cis = [res.ci(spec.sweep, a, x, spec.metric) for x in xs]
            series.append(
                Series(
                    LABELS[a],
                    xs,
                    [res.mean(spec.sweep, a, x, spec.metric) for x in xs],
                    colour=COLOURS[a],
                    band=([c[0] for c in cis], [c[1] for c in cis]),
                )
            )
        first = [res.summary.get((spec.sweep, algs[0], x)) for x in xs]
        if spec.metric == "latency_ns":
            bound = [None if r is None else r["bound_hops_mean"] * HOP_NS for r in first]
        else:
            bound = [None if r is None else float(r["k"]) for r in first]
        series.append(Series("lower bound", xs, bound, paper=True, colour="#999999"))
        what = METRICS[spec.metric]
        fig = f"cf. paper Fig. {spec.paper_figure}" if spec.paper_figure else "TASNEM vs seed-000 trees"
        if spec.sweep == "dests":
            title = f"{what.split(' (')[0].capitalize()} vs destinations, {res.topology('dests', xs[0])}"
            xlabel = "number of destinations"
        else:
            title = f"{what.split(' (')[0].capitalize()} vs torus size, {percent:g}% destinations"
            xlabel = "torus size n (Tn = n×n)"
        note = f"{fig}; all-port, 25 ns/hop; {res.repeat} sets per point; dashed: lower bound"
        written.append(plot_series(out / "plots" / spec.filename, series, title, xlabel, what, note))
    return written


# -- reading a finished run back (--report-only) ----------------------------------------------------


def load_run(out: Path) -> tuple[list[JobResult], Config, dict[str, Any]]:
    """The runs, configuration and metadata of a finished reproduction from its run.json and tidy.csv.

    So that the report and plots can be rebuilt (``--report-only``) without re-running for minutes."""
    doc = json.loads((out / "run.json").read_text(encoding="utf-8"))
    conf: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["config"].items()}
    cfg = Config(**conf)
    rows = read_tidy(out / "tidy.csv")
    results = []
    for r in doc["runs"]:
        subset = tuple(r["algorithms"])
        mine = [x for x in rows if x["sweep"] == r["sweep"] and x["topology"] == r["topology"]]
        mine = [x for x in mine if x["algorithm"] in subset]
        ks = tuple(r.get("ks") or sorted({x["k"] for x in mine}))
        job = Job(r["sweep"], r["topology"], ks, cfg.algorithms, subset, r["runtime"])
        results.append(
            JobResult(
                job,
                mine,
                list(r["incomplete"]),
                list(r["errors"]),
                int(r["steps"]),
                float(r["wall_s"]),
                float(r.get("cpu_s", 0.0)),
            )
        )
    meta = {k: doc[k] for k in ("date", "cpus", "machine", "wall_s", "load")}
    return results, cfg, meta


# -- command -----------------------------------------------------------------------------------
def _int_list(text: str, what: str) -> tuple[int, ...]:
    from coordinator.experiments.sweep import parse_dests

    try:
        return tuple(parse_dests(text))
    except PlanError as exc:
        raise UsageError(str(exc).replace("--dests", what)) from None


USES = ("jobs",)
OPTIONS = (
    Option("--dest-torus", f"side n of the Tn torus of the destinations sweep (default {DEFAULT_DEST_TORUS})",
           int, DEFAULT_DEST_TORUS),
    Option("--dests", "numbers of destinations of that sweep: start:stop:step or a comma list "
           "(default 100:1500:100 and 1599)"),
    Option("--sizes", "torus sides of the size sweep: start:stop:step or a comma list (default 5:40:5)"),
    Option("--percent", f"destinations of the size sweep, in %% of the nodes (default {DEFAULT_PERCENT:g})",
           float, DEFAULT_PERCENT),
    Option("--extras", "also run seed 000's PAIR and MIN on the same sets (default: yes)", None, True,
           negatable=True),
    Option("--runtime", "where the nodes of the emulated tori run (default in-process; 'model' for all)",
           default="in-process", choices=RUNTIMES),
    Option("--emulate-up-to", "largest torus side run in the emulation; larger ones go through the "
           f"reference model (default {DEFAULT_EMULATE_UP_TO})", int, DEFAULT_EMULATE_UP_TO),
    Option("--ts", f"start-up time (ns) of the sensitivity check (default {DEFAULT_TS_NS:g})", float,
           DEFAULT_TS_NS),
    Option("--wall-budget", "wall-clock budget per emulation (s)", float, 1800.0),
)  # fmt: skip


def _config(args: Any) -> Config:

    dests = DEFAULT_DESTS if args.dests is None else _int_list(args.dests, "--dests")
    sizes = DEFAULT_SIZES if args.sizes is None else _int_list(args.sizes, "--sizes")
    if args.dest_torus < 3:
        raise UsageError(f"--dest-torus must be at least 3 (a torus needs 3×3), got {args.dest_torus}")
    bad = [n for n in sizes if n < 3]
    if bad:
        raise UsageError(f"--sizes: a torus needs at least 3×3, got {bad[0]}")
    nodes = args.dest_torus**2
    over = [k for k in dests if k > nodes - 1]
    if over:
        raise UsageError(
            f"--dests: T{args.dest_torus} has {nodes - 1} nodes besides the source, asked for {over[0]}"
        )
    if not 0 < args.percent < 100:
        raise UsageError(f"--percent must be between 0 and 100, got {args.percent:g}")
    if args.wall_budget <= 0:
        raise UsageError(f"--wall-budget must be positive, got {args.wall_budget}")
    if args.ts < 0:
        raise UsageError(f"--ts must not be negative, got {args.ts:g}")
    algs = ALGORITHMS if args.extras else PAPER_ALGORITHMS
    return Config(
        args.repeat, args.seed, args.dest_torus, tuple(sorted(dests)), tuple(sorted(sizes)), args.percent,
        algs, args.runtime, args.emulate_up_to, args.ts, args.jobs,
    )  # fmt: skip


def _load() -> float:
    """The one-minute load average (0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def run(args: Any, ctx: Context) -> int:
    """Run the sweeps (unless ``--report-only``); rebuild plots and report.md from tidy.csv and run.json."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    done, saved, old = read_report_only("tasnem", out, load_run)
    if args.report_only:
        old = {**old, "rebuilt": time.strftime("%Y-%m-%d")}
    return _finish(out, done, saved, old, ctx)


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every job; write tidy.csv, summary.csv and run.json."""
    from coordinator.experiments.run import runtime_problem

    cfg = _config(args)
    problem = runtime_problem(cfg.runtime)
    if problem:
        raise UsageError(problem)
    settings = lockstep_settings(args, "all-port", seed=cfg.seed, runtime=cfg.runtime)
    jobs = make_jobs(
        cfg.dest_torus, cfg.dests, cfg.sizes, cfg.percent, cfg.algorithms, cfg.repeat, cfg.runtime,
        cfg.emulate_up_to,
    )  # fmt: skip
    watch = Stopwatch()
    load0 = _load()
    try:
        one = partial(run_job, repeat=cfg.repeat, seed=cfg.seed, settings=settings, ts_ns=cfg.ts_ns)
        results = run_pool(one, jobs, cfg.jobs, ctx.progress)
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    rows = [r for res in results for r in res.rows]
    meta = run_facts(cfg.command, watch, load=(load0, _load()))
    meta["wall_s"] = watch.wall()
    out.mkdir(parents=True, exist_ok=True)
    rows.sort(key=lambda r: (r["sweep"], r["n"], r["k"], ALGORITHMS.index(r["algorithm"]), r["repetition"]))
    write_tidy(out / "tidy.csv", TIDY_COLUMNS, rows)
    summ = summarise(rows)
    write_csv(
        out / "summary.csv",
        SUMMARY_COLUMNS,
        ([round(v, 6) if isinstance(v, float) else v for v in (r[c] for c in SUMMARY_COLUMNS)] for r in summ),
    )
    doc = {
        "config": asdict(cfg),
        "settings": asdict(settings),
        "timing": asdict(PAPER_TIMING),
        **meta,
        "complete": all(r.complete for r in results),
        "runs": [
            {
                "label": r.job.label,
                "topology": r.job.topology,
                "sweep": r.job.sweep,
                "algorithms": list(r.job.subset),
                "ks": list(r.job.ks),
                "runtime": r.job.runtime,
                "multicasts": len(r.rows),
                "complete": r.complete,
                "incomplete": r.incomplete,
                "steps": r.steps,
                "wall_s": round(r.wall_s, 3),
                "cpu_s": round(r.cpu_s, 3),
                "errors": r.errors,
            }
            for r in results
        ],
    }
    write_json(out / "run.json", doc)


def _finish(
    out: Path, results: Sequence[JobResult], cfg: Config, meta: Mapping[str, Any], ctx: Context
) -> int:
    """Plots and report.md from the runs' rows; a summary on the terminal; the exit status."""
    rows = [r for res in results for r in res.rows]
    res = Results.build(rows, cfg.algorithms, cfg.repeat)
    plots = write_plots(out, res, cfg.percent)
    holds, order = _order_lines(res)
    said = (
        f"tasnem: {len(rows)} multicasts in {meta['wall_s']:.1f} s; wrote {out / 'report.md'} and "
        f"{len(plots)} plots; the paper's ordering {'holds' if holds else 'does not hold'}"
    )
    report = build_report(results, res, plots, out, cfg, meta)
    return finish(ctx, out, report, said, order, all(r.complete for r in results))
