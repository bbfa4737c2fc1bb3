"""Seed 001 (TASNEM, ``meshcast reproduce tasnem``): the algorithms, metrics and figures of the study,
its typed tidy rows, their summaries (:class:`Results`) and the plots drawn from them. The experiment,
claims and tables are in :mod:`coordinator.reproduce.tasnem`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.analysis.metrics import ci95
from coordinator.analysis.timing import Timing
from coordinator.output.report import Series, algorithm_colour, plot_series

__all__ = [
    "ALGORITHMS",
    "COLOURS",
    "EXTRA_ALGORITHMS",
    "FIGURES",
    "HOP_NS",
    "LABELS",
    "MEASURES",
    "PAPER_ALGORITHMS",
    "PAPER_TIMING",
    "SUMMARY_COLUMNS",
    "SWEEPS",
    "TIDY_COLUMNS",
    "FigureSpec",
    "Results",
    "size_k",
    "summarise",
    "write_plots",
]


PAPER_ALGORITHMS: tuple[str, ...] = ("tasnem", "hcm", "t2w", "uniform")
EXTRA_ALGORITHMS: tuple[str, ...] = ("pair", "min")
ALGORITHMS: tuple[str, ...] = PAPER_ALGORITHMS + EXTRA_ALGORITHMS
HOP_NS = 25.0
#: The paper's latency: 25 ns per hop along the longest path, nothing per start-up or flit.
PAPER_TIMING = Timing(model="wormhole", ts=0.0, beta=0.0, flits=1, router=HOP_NS)


#: Names in the report, and plot colours (the same as in every plot: output.palette).
LABELS: Mapping[str, str] = dict(
    zip(ALGORITHMS, ("TASNEM", "multipath-HCM", "T2W", "Uniform", "PAIR", "MIN"), strict=True)
)
COLOURS: Mapping[str, str] = {a: algorithm_colour(a) for a in ALGORITHMS}
SWEEPS: Mapping[str, str] = {"dests": "number of destinations", "size": "torus size"}
#: The paper's two metrics: column → (its word in the report, its axis label).
MEASURES: Mapping[str, tuple[str, str]] = {
    "latency_ns": ("latency", "network latency (ns, 25 ns per hop)"),
    "traffic": ("traffic", "network traffic (links)"),
}
_POINT = ("sweep", "topology", "n", "k", "algorithm")
_MEASURED = ("latency_ns", "latency_ts_ns", "hops", "bound_hops", "time", "traffic", "startups", "missing")
TIDY_COLUMNS = (*_POINT, "repetition", "source", *_MEASURED)
_SUMMARISED = ("latency_ns", "latency_ts_ns", "traffic", "hops", "time")
_STATS = ("mean", "ci_low", "ci_high")
_SUMMARY_STATS = tuple(f"{m}_{s}" for m in _SUMMARISED for s in _STATS)
SUMMARY_COLUMNS = (*_POINT, "reps", "complete", *_SUMMARY_STATS, "bound_hops_mean", "startups_max")


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


# -- numbers -----------------------------------------------------------------------------------
def summarise(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per sweep × torus × k × algorithm: mean and 95% CI of each metric, the bound, the start-ups."""
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[c] for c in _POINT), []).append(r)
    out = []
    for key in sorted(groups, key=lambda g: (g[0], g[2], g[3], ALGORITHMS.index(g[4]))):
        rs = groups[key]
        row = dict(zip(_POINT, key, strict=True))
        row.update(reps=len(rs), complete=sum(1 for r in rs if r["missing"] == 0))
        for m in _SUMMARISED:
            s = ci95([float(r[m]) for r in rs if r[m] is not None])
            row.update(zip((f"{m}_{st}" for st in _STATS), (s["mean"], *s["ci95"]), strict=True))
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
        """Index the tidy rows and their summaries."""

        def x(r: Mapping[str, Any]) -> int:
            return int(r["k"] if r["sweep"] == "dests" else r["n"])

        tidy = {(r["sweep"], r["algorithm"], x(r), r["repetition"]): r for r in rows}
        summ = {(r["sweep"], r["algorithm"], x(r)): r for r in summarise(rows)}
        xs = {s: tuple(sorted({p[2] for p in summ if p[0] == s})) for s in SWEEPS}
        return Results(tidy, summ, xs, tuple(algorithms), repeat)

    def mean(self, sweep: str, alg: str, x: int, metric: str) -> float | None:
        return (self.summary.get((sweep, alg, x)) or {}).get(f"{metric}_mean")

    def ci(self, sweep: str, alg: str, x: int, metric: str) -> tuple[float | None, float | None]:
        r = self.summary.get((sweep, alg, x)) or {}
        return r.get(f"{metric}_ci_low"), r.get(f"{metric}_ci_high")

    def diffs(self, sweep: str, a: str, b: str, x: int, metric: str) -> list[float]:
        """Per destination set at point x: a − b (the same sets, so the differences are paired)."""
        t = self.tidy
        pairs = [(t.get((sweep, a, x, rep)), t.get((sweep, b, x, rep))) for rep in range(self.repeat)]
        values = [(ra[metric], rb[metric]) for ra, rb in pairs if ra is not None and rb is not None]
        return [float(va) - float(vb) for va, vb in values if va is not None and vb is not None]

    def at(self, sweep: str, x: int, column: str) -> Any:
        """A column common to every algorithm at point x (torus, k), from the first one run there."""
        return next((r[column] for a in self.algorithms if (r := self.summary.get((sweep, a, x)))), None)

    def bound(self, sweep: str, x: int, metric: str) -> float | None:
        """The lower bound at point x: the farthest destination × 25 ns, or k links."""
        if (r := self.summary.get((sweep, self.algorithms[0], x))) is None:
            return None
        return r["bound_hops_mean"] * HOP_NS if metric.startswith("latency") else float(r["k"])


def write_plots(out: Path, res: Results, percent: float) -> list[Path]:
    """The PNGs of :data:`FIGURES` (those whose sweep has points and whose algorithms were run)."""
    written = []
    for spec in FIGURES:
        xs = res.xs[spec.sweep]
        algs = [a for a in spec.algorithms if a in res.algorithms]
        if not xs or len(algs) < 2:
            continue
        series = []
        for a in algs:
            lo, hi = zip(*(res.ci(spec.sweep, a, x, spec.metric) for x in xs), strict=True)
            means = [res.mean(spec.sweep, a, x, spec.metric) for x in xs]
            series.append(Series(LABELS[a], xs, means, colour=COLOURS[a], band=(list(lo), list(hi))))
        bound = [res.bound(spec.sweep, x, spec.metric) for x in xs]
        series.append(Series("lower bound", xs, bound, paper=True, colour="#999999"))
        what = MEASURES[spec.metric][1]
        fig = f"cf. paper Fig. {spec.paper_figure}" if spec.paper_figure else "TASNEM vs seed-000 trees"
        title, xlabel = {
            "dests": (f"destinations, {res.at('dests', xs[0], 'topology') or '?'}", "number of destinations"),
            "size": (f"torus size, {percent:g}% destinations", "torus size n (Tn = n×n)"),
        }[spec.sweep]
        title = f"{what.split(' (')[0].capitalize()} vs {title}"
        note = f"{fig}; all-port, 25 ns/hop; {res.repeat} sets per point; dashed: lower bound"
        written.append(plot_series(out / "plots" / spec.filename, series, title, xlabel, what, note))
    return written
