"""Seed 000 (Malani): DIAG, PAIR and MIN on a 20×20 mesh and torus — Tables 1–6, Figs. 27–38.

One sweep per topology (the same destination sets for every algorithm, VH and DIST as extra columns);
report.md sets the paper's tables beside ours and checks its comparative claims (prose: reports/malani.md).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

from coordinator.experiments import sweep
from coordinator.output.report import (
    DataTable,
    Series,
    algorithm_colour,
    fmt,
    fmt_ci,
    fmt_delta,
    markdown_table,
    plot_series,
    read_data_table,
)
from coordinator.reproduce import framework
from coordinator.reproduce.framework import Context, Option
from node.topology import Topology

__all__ = ["FIGURES", "KS", "TABLES", "TableSpec"]

NAME = "malani"
SUMMARY = "seed 000 (Malani): DIAG/PAIR/MIN on 20×20 mesh and torus — Tables 1–6, Figs. 27–38"
DEFAULT_REPEAT = 100

TOPOLOGIES: Mapping[str, str] = {"mesh": "mesh:20x20", "torus": "torus:20x20"}
SOURCE = (0, 0)
KS: tuple[int, ...] = tuple(range(20, 381, 20))
PAPER_ALGORITHMS = ("diag", "pair", "min")
ALL_ALGORITHMS = (*PAPER_ALGORITHMS, "vh", "dist")
#: The thesis's two comparisons, (a, b) for "a against b": Figs. 27–32, then Figs. 33–38.
COMPARISONS: tuple[tuple[str, str], ...] = (("pair", "diag"), ("min", "pair"))
SPANNING_TREE_EDGES = 20 * 20 - 1
#: Our criteria for the paper's words, stated in the report.
EQUAL_TIME_TOLERANCE = 0.01  # "at equal time": mean time at most 1% above
SLIGHTLY_HIGHER_LIMIT = 0.05  # "slightly higher time": mean time 0–5% above

METRIC_NAMES = {
    "time": "multicast time (steps)",
    "traffic": "multicast traffic (links)",
    "additional_traffic": "additional traffic (links)",
}

Tables = Mapping[tuple[str, str], DataTable]
"""The paper's Tables 1–6 by (topology, metric)."""


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One of the paper's Tables 1–6."""

    number: int
    kind: str
    metric: str
    file: str
    title: str


#: Per metric: its table file's suffix and the table's title (Tables 1–3 mesh, 4–6 torus).
TABLE_NAMES = {"time": ("time", "Multicast time"), "traffic": ("traffic", "Multicast traffic")}
TABLE_NAMES |= {"additional_traffic": ("aat", "AAT")}
TABLES = tuple(
    TableSpec(
        n, kind, m, f"malani_table{n}_{kind}_{TABLE_NAMES[m][0]}.csv", f"{TABLE_NAMES[m][1]} in 2D {kind}"
    )
    for n, (kind, m) in enumerate(product(TOPOLOGIES, METRIC_NAMES), start=1)
)


@dataclass(frozen=True, slots=True)
class FigureSpec:
    """One of the paper's Figs. 27–38: two algorithms, one metric, one topology."""

    number: int
    kind: str
    metric: str
    algorithms: tuple[str, str]

    @property
    def filename(self) -> str:
        return f"fig{self.number}_{self.kind}_{self.metric}_{'_vs_'.join(self.algorithms)}.png"


FIGURES = tuple(
    FigureSpec(number, kind, metric, algs)
    for number, (algs, kind, metric) in enumerate(product(COMPARISONS, TOPOLOGIES, METRIC_NAMES), start=27)
)


_text = partial(framework.text, NAME)


# -- numbers from the runs -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ours:
    """Our summary and tidy rows, indexed for the report, and the run's facts."""

    summary: Mapping[str, Mapping[tuple[str, int], Mapping[str, Any]]]  # kind → (alg, k) → row
    tidy: Mapping[str, Mapping[tuple[str, int, int], Mapping[str, Any]]]  # kind → (alg, k, rep) → row
    bound: Mapping[str, Mapping[int, float]]  # kind → k → mean distance to the farthest destination
    algorithms: tuple[str, ...]
    repeat: int
    meta: Mapping[str, Any]

    @classmethod
    def of(cls, results: Mapping[str, sweep.SweepResult], meta: Mapping[str, Any]) -> Ours:
        """The sweeps indexed, with the farthest-destination bounds of their sets."""
        summary = {kind: {(r["algorithm"], r["k"]): r for r in res.summary} for kind, res in results.items()}
        tidy = {
            kind: {(r["algorithm"], r["k"], r["repetition"]): r for r in res.tidy}
            for kind, res in results.items()
        }
        bound, repeat = _farthest_bounds(int(meta["repeat"]), int(meta["seed"])), int(meta["repeat"])
        return cls(summary, tidy, bound, tuple(meta["algorithms"]), repeat, meta)

    def mean(self, kind: str, alg: str, k: int, metric: str) -> float | None:
        r = self.summary[kind].get((alg, k))
        return None if r is None else r[f"{metric}_mean"]

    def ci(self, kind: str, alg: str, k: int, metric: str) -> tuple[float | None, float | None]:
        r = self.summary[kind].get((alg, k))
        return (None, None) if r is None else (r[f"{metric}_ci_low"], r[f"{metric}_ci_high"])

    def overall(self, kind: str, alg: str, metric: str) -> float | None:
        """Mean over the 19 points of the per-point means (as the paper averages its tables)."""
        vals = [self.mean(kind, alg, k, metric) for k in KS]
        known = [v for v in vals if v is not None]
        return statistics.fmean(known) if len(known) == len(vals) else None

    def points_below(self, alg: str, metric: str, kind: str, other: str) -> int:
        """At how many points ``alg``'s mean on ``kind`` lies below its mean on ``other``."""
        return sum(
            1 for k in KS if (self.mean(kind, alg, k, metric) or 0) < (self.mean(other, alg, k, metric) or 0)
        )

    def diffs(self, kind: str, a: str, b: str, metric: str, ks: Sequence[int] = KS) -> list[float]:
        """a − b per multicast (the same destination sets) at the points ``ks``, where both have one."""
        return [
            float(ra[metric] - rb[metric])
            for k in ks
            for rep in range(self.repeat)
            if (ra := self.tidy[kind].get((a, k, rep))) is not None
            and (rb := self.tidy[kind].get((b, k, rep))) is not None
            and ra[metric] is not None
            and rb[metric] is not None
        ]

    def classes(self, kind: str, a: str, b: str, metric: str) -> tuple[int, int, int]:
        """At how many points a is significantly below b, indistinguishable, significantly above
        (per point, the 95% CI of the paired differences; one repetition: nothing significant)."""
        counts = [0, 0, 0]
        for k in KS:
            if diffs := self.diffs(kind, a, b, metric, (k,)):
                counts[framework.significance(diffs, single=False) + 1] += 1
        return counts[0], counts[1], counts[2]


def _farthest_bounds(repeat: int, seed: int) -> dict[str, dict[int, float]]:
    """Per topology and k, the mean over the sets of the distance to the farthest destination."""
    out: dict[str, dict[int, float]] = {}
    for kind, spec in TOPOLOGIES.items():
        topo = Topology.parse(spec)
        plan, points = sweep.sweep_plan(topo, ["vh"], KS, repeat, seed, SOURCE)
        per_k: dict[int, list[int]] = defaultdict(list)
        for m, (k, _) in zip(plan.multicasts, points, strict=True):
            per_k[k].append(max(topo.distance(m.source, d) for d in m.destinations))
        out[kind] = {k: statistics.fmean(v) for k, v in per_k.items()}
    return out


def _paper(table: DataTable, k: int, col: str) -> float | None:
    row = table.by("destinations").get(float(k))
    return None if row is None or col not in row else row[col]


def _paper_overall(table: DataTable, alg: str) -> float:
    return statistics.fmean(table.column(alg))


def _pct(a: float, b: float) -> float:
    return (a - b) / b * 100 if b else float("nan")


def _signed(v: float, digits: int = 1, unit: str = "%") -> str:
    return f"{'+' if v >= 0 else '−'}{abs(v):.{digits}f}{unit}"


_diff = partial(_signed, digits=2, unit="")  # a signed difference in the metric's unit


def _upper(algs: Sequence[str], sep: str = "/") -> str:
    return sep.join(a.upper() for a in algs)


def _each(algs: Sequence[str], value: Callable[[str], object]) -> str:
    """``DIAG v, PAIR v, …``: one value per algorithm, as the report lists them."""
    return ", ".join(f"{a.upper()} {value(a)}" for a in algs)


def _span(vals: Sequence[float]) -> str:
    return f"{min(vals):.2f}–{max(vals):.2f}"


def _paper_gap(tables: Tables, kind: str, metric: str, a: str, b: str) -> float:
    """The paper's a against b over the sweep, in %."""
    return _pct(_paper_overall(tables[(kind, metric)], a), _paper_overall(tables[(kind, metric)], b))


# -- the report --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class View:
    """One of Tables 1–6 beside our runs, as its section, differences and reasons read it."""

    spec: TableSpec
    tables: Tables
    ours: Ours

    @property
    def algs(self) -> list[str]:
        """The paper's algorithms that we ran."""
        return [a for a in PAPER_ALGORITHMS if a in self.ours.algorithms]

    def table(self, kind: str = "", metric: str = "") -> DataTable:
        return self.tables[(kind or self.spec.kind, metric or self.spec.metric)]

    def paper(self, k: int, col: str) -> float | None:
        return _paper(self.table(), k, col)

    def mine(self, a: str, k: int, kind: str = "") -> float | None:
        return self.ours.mean(kind or self.spec.kind, a, k, self.spec.metric)

    def shift(self, a: str) -> str:
        """Ours − the paper's, averaged over the points."""
        return _diff(statistics.fmean((self.mine(a, k) or 0) - (self.paper(k, a) or 0) for k in KS))


def _table_section(v: View) -> str:
    """One of Tables 1–6: the paper's numbers, ours, their differences and the likely reasons."""
    kind, metric, timed, ours = v.spec.kind, v.spec.metric, v.spec.metric == "time", v.ours
    extras = [a for a in ours.algorithms if a not in PAPER_ALGORITHMS]
    header = ["k", *(["farthest (bound)"] if timed else [])]
    header += [h for a in v.algs for h in (f"{a.upper()} paper", f"{a.upper()} ours", f"Δ {a.upper()}")]
    header += [f"{a.upper()} ours" for a in extras]

    def ours_cell(a: str, k: int) -> str:
        return fmt_ci(v.mine(a, k), *ours.ci(kind, a, k, metric))

    def row(k: int) -> list[str]:
        cells = [str(k), *([fmt(ours.bound[kind].get(k))] if timed else [])]
        for a in v.algs:
            p, lo, hi = v.paper(k, a), v.paper(k, f"{a}_ci_low"), v.paper(k, f"{a}_ci_high")
            cells += [fmt_ci(p, lo, hi), ours_cell(a, k), fmt_delta(v.mine(a, k), p)]
        return cells + [ours_cell(a, k) for a in extras]

    mean_row = ["**mean**", *([fmt(statistics.fmean(ours.bound[kind].values()))] if timed else [])]
    for a in v.algs:
        p, m = _paper_overall(v.table(), a), ours.overall(kind, a, metric)
        mean_row += [f"**{cell}**" for cell in (fmt(p), fmt(m), fmt_delta(m, p))]
    mean_row += [f"**{fmt(ours.overall(kind, a, metric))}**" for a in extras]
    farthest = " " + _text("farthest") if timed else ""
    reasons = (_time_reasons if timed else _traffic_reasons)(v)
    return "\n".join(
        [
            f"### Table {v.spec.number}: {v.spec.title}\n",
            _text("caption", source=v.table().source, repeat=ours.repeat, farthest=farthest) + "\n",
            markdown_table(header, [*map(row, KS), mean_row]),
            "\n".join(["**Differences.**", *_differences(v), "", "*Likely reasons.* " + " ".join(reasons)])
            + "\n",
        ]
    )


def _differences(v: View) -> list[str]:
    """How far ours are from the paper's, per algorithm."""
    lines = []
    for a in v.algs:
        deltas = [
            (k, m - p, p) for k in KS if (p := v.paper(k, a)) is not None and (m := v.mine(a, k)) is not None
        ]
        if not deltas:
            continue
        ds, ps = [d for _, d, _ in deltas], [p for *_, p in deltas]
        cis = [v.ours.ci(v.spec.kind, a, k, v.spec.metric) for k, *_ in deltas]
        inside = sum(
            1
            for p, (lo, hi) in zip(ps, cis, strict=True)
            if lo is not None and hi is not None and lo <= p <= hi
        )
        rel = _pct(statistics.fmean(p + d for _, d, p in deltas), statistics.fmean(ps))
        k, d, p = max(deltas, key=lambda t: abs(t[1]))
        lines.append(
            _text(
                "difference",
                {"alg": a.upper(), "mean": _diff(statistics.fmean(ds)), "rel": _signed(rel), "k": k},
                {"lo": _diff(min(ds)), "hi": _diff(max(ds)), "largest": _diff(d), "inside": inside},
                largest_pct=_signed(d / p * 100 if p else 0),
                points=len(ds),
            )
        )
    return lines


def _time_reasons(v: View) -> list[str]:
    """The reasons we know for a time table's differences, with the numbers that support them."""
    kind, ours = v.spec.kind, v.ours
    bound = statistics.fmean(ours.bound[kind].values())
    _, wa, wk = max((abs((v.mine(a, k) or 0) - (v.paper(k, a) or 0)), a, k) for a in v.algs for k in KS)
    out = [
        _text(
            "time",
            bound=fmt(bound),
            over_paper=_each(v.algs, lambda a: _diff(_paper_overall(v.table(), a) - bound)),
            over_ours=_each(v.algs, lambda a: _diff((ours.overall(kind, a, "time") or 0) - bound)),
            **{"alg": wa.upper(), "k": wk, "bound_k": fmt(ours.bound[kind][wk]), "ours": fmt(v.mine(wa, wk))},
            paper=fmt(v.paper(wk, wa)),
        )
    ]
    if kind == "torus":
        topo, cols = Topology.parse(TOPOLOGIES[kind]), [v.table().column(a) for a in v.algs]

        def between(a: str) -> str:
            mesh, paper = ours.overall("mesh", a, "time"), _paper_overall(v.table(), a)
            return f"{fmt(ours.overall('torus', a, 'time'))} < {fmt(paper)} < {fmt(mesh)}"

        above, top = sum(1 for c in cols for x in c if x > topo.diameter), fmt(max(map(max, cols)))
        fields = {"above": above, "means": len(v.algs) * len(KS), "top": top, "spec": topo.spec}
        out.append(_text("table 4", fields, diameter=topo.diameter, between=_each(v.algs, between)))
    return out


def _traffic_reasons(v: View) -> list[str]:
    """The reasons we know for a (additional) traffic table's differences, with their numbers."""
    kind, metric, n = v.spec.kind, v.spec.metric, v.spec.number
    out: list[str] = []
    for a in v.algs if kind == "mesh" else ():
        at20 = f"at k = 20 ours {fmt(v.mine(a, 20))}, the paper's {fmt(v.paper(20, a))}"
        out.append(_text(f"reading {a}", where=f"{at20}; over the sweep {v.shift(a)}"))
    if kind == "torus":
        out.append(_torus_above_mesh(v))
        over = [(a, x) for a in v.algs for x in v.table().column(a) if x > SPANNING_TREE_EDGES]
        if metric == "traffic" and over:
            listed = ", ".join(f"{a.upper()} {fmt(x)}" for a, x in over)
            out.append(
                _text("table 5", over=listed, s="s" if len(over) == 1 else "", edges=SPANNING_TREE_EDGES)
            )
    if metric == "additional_traffic":
        traffic = v.table(metric="traffic")
        gap, alg, k = max(
            (abs((v.paper(k, a) or 0) - ((_paper(traffic, k, a) or 0) - k)), a, k) for a in v.algs for k in KS
        )
        out.append(_text("additional", n=n, prev=n - 1, gap=fmt(gap), alg=alg.upper(), k=k))
    return out


def _torus_above_mesh(v: View) -> str:
    """Where the torus needs more (additional) traffic than the mesh, in the paper and in ours."""
    algs, mesh, metric = v.algs, v.table("mesh"), v.spec.metric
    ours_higher = {a: v.ours.points_below(a, metric, "mesh", "torus") for a in algs}
    shortest = [a for a in algs if a in ("diag", "pair") and ours_higher[a] == 0]
    others = [a for a in algs if ours_higher[a]]
    higher = sum(1 for a in algs for k in KS if (v.paper(k, a) or 0) > (_paper(mesh, k, a) or 0))
    word = "traffic" if metric == "traffic" else "additional traffic"
    fields = {"deltas": _each(algs, v.shift), "word": word, "higher": higher, "points": len(algs) * len(KS)}
    parts = [_text("torus above", fields, ours=sum(ours_higher.values()), each=_each(algs, ours_higher.get))]
    parts += [_text("torus shortest", algs=_upper(shortest))] if shortest else []
    parts += [_text("torus others", algs=_upper(others))] if others else []
    return " ".join([*parts, _text("torus runs")])


def _equal_time(ours: Ours, kind: str, below: bool, strong: bool, dt: float) -> tuple[str, str]:
    """PAIR against DIAG "at equal time": the verdict and how the times compare per multicast."""
    diffs = ours.diffs(kind, "pair", "diag", "time")
    lower, equal, higher = framework.sign_counts(diffs)
    split = f"; per multicast PAIR's time is lower in {lower}, equal in {equal} and higher in {higher} of "
    split = f"{split}{len(diffs)}" if diffs else ""
    if not (below and dt <= EQUAL_TIME_TOLERANCE * 100):
        return "does not hold", split
    return ("holds" if strong else "holds, but by a much smaller margin than the paper's"), split


def _slightly_higher(ours: Ours, kind: str, below: bool, strong: bool, dt: float) -> tuple[str, str]:
    """MIN against PAIR "with slightly higher time": the verdict and how the times compare per point."""
    t_lower, t_same, t_higher = ours.classes(kind, "min", "pair", "time")
    tail = f", significantly higher at {t_higher} of {len(KS)} points, indistinguishable at {t_same}, "
    tail += f"lower at {t_lower}"
    if not below:
        return "does not hold", tail
    if dt <= 0:
        return "holds for traffic; MIN's time is not even higher", tail
    if dt <= SLIGHTLY_HIGHER_LIMIT * 100:
        return ("holds" if strong else "holds, but by a much smaller traffic margin than the paper's"), tail
    return "holds for traffic, but MIN's time is more than slightly higher", tail


#: The paper's claim for each comparison: its words for the times and how we judge them.
CLAIMS = {
    ("pair", "diag"): ("at equal time", _equal_time),
    ("min", "pair"): ("with slightly higher time", _slightly_higher),
}


def _claim(tables: Tables, ours: Ours, kind: str, a: str, b: str) -> str:
    """One comparative claim (``a``'s traffic below ``b``'s, and how the times compare), checked."""
    words, judge = CLAIMS[(a, b)]
    ta, tb = ours.overall(kind, a, "traffic") or 0, ours.overall(kind, b, "traffic") or 0
    sa, sb = ours.overall(kind, a, "time") or 0, ours.overall(kind, b, "time") or 0
    lower, same, higher = ours.classes(kind, a, b, "traffic")
    below, pct, paper_pct = ta < tb and higher == 0, _pct(ta, tb), _paper_gap(tables, kind, "traffic", a, b)
    verdict, tail = judge(ours, kind, below, below and abs(pct) >= abs(paper_pct) / 2, _pct(sa, sb))
    return _text(
        "claim",
        {"A": a.upper(), "B": b.upper(), "words": words, "kind": kind, "verdict": verdict, "tail": tail},
        {"ta": fmt(ta), "tb": fmt(tb), "pct": _signed(pct), "paper_pct": _signed(paper_pct)},
        {"lower": lower, "same": same, "higher": higher, "points": len(KS), "sa": fmt(sa), "sb": fmt(sb)},
        time_pct=_signed(_pct(sa, sb), 2),
        paper_time_pct=_signed(_paper_gap(tables, kind, "time", a, b), 2),
    )


def _claims(tables: Tables, ours: Ours) -> list[str]:
    """The paper's comparative claims, each checked against our data in a sentence or two."""
    have, algs = set(ours.algorithms), ours.algorithms
    out = [_claim(tables, ours, kind, a, b) for a, b in COMPARISONS if {a, b} <= have for kind in TOPOLOGIES]
    points, below = len(algs) * len(KS), sum(ours.points_below(a, "time", "torus", "mesh") for a in algs)
    ratios = [(ours.overall("torus", a, "time") or 0) / (ours.overall("mesh", a, "time") or 1) for a in algs]
    torus, mesh = tables[("torus", "time")], tables[("mesh", "time")]
    paper = [_paper_overall(torus, a) / _paper_overall(mesh, a) for a in PAPER_ALGORITHMS]
    fields = {"below": below, "points": points, "ratios": _span(ratios), "paper_ratios": _span(paper)}
    return [*out, _text("torus claim", fields, verdict="holds" if below == points else "does not hold")]


def _headline(tables: Tables, ours: Ours) -> str:
    """The percentages the thesis quotes in §4.3, from its tables and from ours."""
    rows = []
    for kind, (a, b), metric in product(TOPOLOGIES, COMPARISONS, METRIC_NAMES):
        if {a, b} <= set(ours.algorithms):
            mine = _pct(ours.overall(kind, a, metric) or 0, ours.overall(kind, b, metric) or 0)
            paper = _signed(_paper_gap(tables, kind, metric, a, b))
            rows.append([kind, f"{a.upper()} vs {b.upper()}", METRIC_NAMES[metric], paper, _signed(mine)])
    header = ["topology", "comparison", "metric (mean over the 19 points)", "paper", "ours"]
    return markdown_table(header, rows, ["l", "l", "l", "r", "r"])


_MARKERS = {"diag": "o", "pair": "s", "min": "^", "vh": "D", "dist": "v"}


def write_plots(out: Path, tables: Tables, ours: Ours) -> list[Path]:
    """Figs. 27–38 (two algorithms each) and one overview per topology × metric (all algorithms)."""
    short = {m: name.split(" (")[0] for m, name in METRIC_NAMES.items()}
    note = f"ours: mean of {ours.repeat} runs per point, 95% CI shaded; paper: seed 000 Tables 1–6"

    def plot(name: str, kind: str, metric: str, algs: Sequence[str], title: str) -> Path:
        """Ours and the paper's per algorithm; earlier curves wider, so that equal ones stay visible."""
        curves: list[Series] = []
        for i, a in enumerate(algs):
            colour, label = algorithm_colour(a), a.upper()
            if a in ours.algorithms:
                mean = [ours.mean(kind, a, k, metric) for k in KS]
                lo, hi = zip(*(ours.ci(kind, a, k, metric) for k in KS), strict=True)
                width = 1.6 + 0.9 * (len(algs) - 1 - i)
                curves.append(
                    Series(f"{label} (ours)", KS, mean, False, colour, (lo, hi), _MARKERS[a], width)
                )
            if a in PAPER_ALGORITHMS:
                paper = [_paper(tables[(kind, metric)], k, a) for k in KS]
                curves.append(Series(f"{label} (paper)", KS, paper, True, colour))
        ylabel = METRIC_NAMES[metric]
        return plot_series(out / "plots" / name, curves, title, "number of destinations", ylabel, note)

    written = []
    for f in FIGURES:
        if set(f.algorithms) <= set(ours.algorithms):
            title = f"Fig. {f.number}: {short[f.metric]} of {_upper(f.algorithms, ' vs ')}, 20×20 {f.kind}"
            written.append(plot(f.filename, f.kind, f.metric, f.algorithms, title))
    for kind, metric in product(TOPOLOGIES, METRIC_NAMES):
        title = f"{short[metric]}, all algorithms, 20×20 {kind}"
        written.append(plot(f"{kind}_{metric}_all.png", kind, metric, ours.algorithms, title))
    return written


def build_report(
    results: Mapping[str, sweep.SweepResult], ours: Ours, tables: Tables, plots: Sequence[Path], out: Path
) -> str:
    """report.md's text."""
    meta = ours.meta
    status = "; ".join(
        f"{kind}: {'complete' if r.complete else 'INCOMPLETE — ' + '; '.join(r.incomplete)}"
        f" ({r.steps} lockstep steps, {len(r.errors)} node errors)"
        for kind, r in results.items()
    )
    fields = {"cpu": f" ({meta['cpu_s']:.0f} s of CPU)" if "cpu_s" in meta else "", "status": status}
    counts = {"emulations": sum(r.emulations for r in results.values()), "repeat": ours.repeat}
    criteria = {"equal": EQUAL_TIME_TOLERANCE, "slightly": SLIGHTLY_HIGHER_LIMIT}
    return "\n".join(
        [
            _text("head", meta, fields, counts, criteria, algorithms=_upper(ours.algorithms, ", ")) + "\n",
            *_claims(tables, ours),
            "",
            "### The thesis's headline percentages (§4.3), from its tables and from ours\n",
            _headline(tables, ours),
            "## Tables\n",
            *(_table_section(View(spec, tables, ours)) for spec in TABLES),
            _text("plots") + "\n",
            *(f"![{p.stem}]({p.relative_to(out).as_posix()})\n" for p in plots),
        ]
    )


# -- command -----------------------------------------------------------------------------------
USES = ("jobs",)
OPTIONS = (
    Option(
        "--algorithms",
        f"comma-separated subset of {','.join(ALL_ALGORITHMS)} (default: all; the paper's are "
        "diag,pair,min, VH and DIST are extra columns)",
        default=",".join(ALL_ALGORITHMS),
    ),
    framework.runtime_option(),
    Option(
        "--chunk",
        f"most multicasts per emulation, 0 for no limit (default {sweep.DEFAULT_CHUNK})",
        int,
        sweep.DEFAULT_CHUNK,
    ),
    Option("--wall-budget", "wall-clock budget per emulation (s)", float, 3600.0),
)
#: What SweepResult takes from sweep.json after its rows, in order, with the value when absent.
SWEEP_FACTS = {"incomplete": [], "errors": [], "steps": 0, "emulation_wall_s": 0.0, "emulations": 1}


def load_results(out: Path) -> tuple[dict[str, sweep.SweepResult], dict[str, Any]]:
    """The sweeps and run facts an earlier run wrote into ``out`` (for ``--report-only``)."""
    results: dict[str, sweep.SweepResult] = {}
    for kind in TOPOLOGIES:
        info = json.loads((out / kind / "sweep.json").read_text())
        tidy = framework.read_tidy(out / kind / "tidy.csv")
        facts = (info.get(key, default) for key, default in SWEEP_FACTS.items())
        results[kind] = sweep.SweepResult(tidy, sweep.summarise_tidy(tidy), *facts)
    return results, json.loads((out / "reproduction.json").read_text())


def run(args: Any, ctx: Context) -> int:
    """Emulate (unless ``--report-only``), then rebuild claims, plots and report.md from the CSVs."""
    framework.positive(args.chunk, "--chunk", strict=False)
    framework.positive(args.wall_budget, "--wall-budget")
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    results, meta = framework.read_report_only("malani", out, load_results)
    ours = Ours.of(results, meta)
    tables = {(t.kind, t.metric): read_data_table(t.file) for t in TABLES}
    plots = write_plots(out, tables, ours)
    said = f"malani: {meta['multicasts']} multicasts, emulated in {meta['wall_s']:.1f} s; "
    said += f"wrote {out / 'report.md'} and {len(plots)} plots"
    report, complete = (
        build_report(results, ours, tables, plots, out),
        all(r.complete for r in results.values()),
    )
    return framework.finish(ctx, out, report, said, _claims(tables, ours), complete)


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run both sweeps, write their CSVs and reproduction.json."""
    algorithms = framework.names_in(args.algorithms, ALL_ALGORITHMS, "--algorithms")
    settings, watch = framework.lockstep_settings(args, "one-port"), framework.Stopwatch()
    specs = [sweep.SweepSpec(t, algorithms, KS, args.repeat, args.seed, SOURCE) for t in TOPOLOGIES.values()]
    results = dict(
        zip(
            TOPOLOGIES,
            sweep.sweep_many(specs, settings, ctx.progress, jobs=args.jobs, chunk=args.chunk),
            strict=True,
        )
    )
    chosen = [] if algorithms == ALL_ALGORITHMS else [f"--algorithms {','.join(algorithms)}"]
    cmd = framework.command_line(NAME, args, *chosen)
    same = {"algorithms": list(algorithms), "repeat": args.repeat, "seed": args.seed}
    multicasts = sum(len(r.tidy) for r in results.values())
    meta = framework.run_facts(
        cmd, watch, **same, runtime=args.runtime, jobs=args.jobs, chunk=args.chunk, multicasts=multicasts
    )
    about = {**same, "ks": list(KS), "source": list(SOURCE), "settings": asdict(settings)}
    for kind, res in results.items():
        sweep.write_sweep(out / kind, res, {"command": cmd, "topology": TOPOLOGIES[kind], **about})
    framework.write_json(out / "reproduction.json", meta)
