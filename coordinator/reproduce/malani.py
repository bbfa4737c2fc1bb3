"""Malani: DIAG, PAIR and MIN on a 20×20 mesh and torus — Tables 1–6, Figs. 27–38.

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

from coordinator.analysis.verdicts import COLUMNS, HOLD_SHARE, Claim, by_points, legend, repeat_warning
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
from coordinator.wording import plural
from node.topology import Topology

__all__ = ["FIGURES", "KS", "TABLES", "TableSpec"]

NAME = "malani"
SUMMARY = "Malani: DIAG/PAIR/MIN on 20×20 mesh and torus — Tables 1–6, Figs. 27–38"
DEFAULT_REPEAT = 100

TOPOLOGIES: Mapping[str, str] = {"mesh": "mesh:20x20", "torus": "torus:20x20"}
SOURCE = (0, 0)
KS: tuple[int, ...] = tuple(range(20, 381, 20))
PAPER_ALGORITHMS = ("diag", "pair", "min")
ALL_ALGORITHMS = (*PAPER_ALGORITHMS, "vh", "dist")
#: The thesis's two comparisons, (a, b) for "a against b": Figs. 27–32, then Figs. 33–38.
COMPARISONS: tuple[tuple[str, str], ...] = (("pair", "diag"), ("min", "pair"))
NODES = 20 * 20
SPANNING_TREE_EDGES = NODES - 1
#: Our criteria for the paper's words, stated in the report.
EQUAL_TIME_TOLERANCE = 0.01  # "at equal time": at a point, mean time at most 1% above
SIZE_FACTOR = 2.0  # a size (a relative gap) holds when ours is within a factor 2 of the paper's
PEAK_TOLERANCE = 20  # an additional-traffic peak within one step (20 destinations) of the stated share
#: Where the thesis says additional traffic peaks, in % of the nodes (§4.3.1–4.3.4), by (kind, algorithm).
PEAK_SHARES = {(kind, a): (30, 30 if kind == "mesh" else 35) for kind in TOPOLOGIES for a in ("diag", "pair")}
PEAK_SHARES |= {(kind, "min"): (35, 45) for kind in TOPOLOGIES}
EXAMPLE_2 = ((3, 2), (9, 3), (8, 5), (4, 7), (7, 7), (2, 8), (5, 8), (9, 8))  # §3.2.2: PAIR, 34 links

METRIC_NAMES = {"time": "multicast time (steps)", "traffic": "multicast traffic (links)"}
METRIC_NAMES |= {"additional_traffic": "additional traffic (links)"}

Tables = Mapping[tuple[str, str], DataTable]
"""The paper's Tables 1–6 by (topology, metric)."""
Noted = tuple[Claim, str]
"""A checked claim and a note to print under its bullet (or "")."""


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
    rule: Sequence[int]  # PAIR's links by the thesis's own rule on the mesh's sets at k = 20
    algorithms: tuple[str, ...]
    repeat: int
    meta: Mapping[str, Any]

    @classmethod
    def of(cls, results: Mapping[str, sweep.SweepResult], meta: Mapping[str, Any]) -> Ours:
        """The sweeps indexed, with the farthest-destination bounds of their sets."""
        summary = {kind: {(r["algorithm"], r["k"]): r for r in res.summary} for kind, res in results.items()}
        key = ("algorithm", "k", "repetition")
        tidy = {kind: {tuple(r[c] for c in key): r for r in v.tidy} for kind, v in results.items()}
        (bound, rule), repeat = _set_facts(int(meta["repeat"]), int(meta["seed"])), int(meta["repeat"])
        return cls(summary, tidy, bound, rule, tuple(meta["algorithms"]), repeat, meta)

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
        means = [(self.mean(kind, alg, k, metric) or 0, self.mean(other, alg, k, metric) or 0) for k in KS]
        return sum(x < y for x, y in means)

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

    def significant(self, kind: str, a: str, b: str, metric: str, sign: int) -> int:
        """At how many points a − b is significantly of ``sign`` (−1 below 0, +1 above; per point the
        95% CI of the paired differences; one repetition: nothing significant)."""
        ds = (self.diffs(kind, a, b, metric, (k,)) for k in KS)
        return sum(framework.significance(d, single=False) == sign for d in ds if d)


def _set_facts(repeat: int, seed: int) -> tuple[dict[str, dict[int, float]], list[int]]:
    """Per topology and k, the mean over the sets of the distance to the farthest destination; and
    PAIR's links by the thesis's own rule (:func:`_rule_pair_traffic`) on the mesh's sets at k = 20."""
    out: dict[str, dict[int, float]] = {}
    rule: list[int] = []
    for kind, spec in TOPOLOGIES.items():
        topo = Topology.parse(spec)
        plan, points = sweep.sweep_plan(topo, ["vh"], KS, repeat, seed, SOURCE)
        per_k: dict[int, list[int]] = defaultdict(list)
        for m, (k, _) in zip(plan.multicasts, points, strict=True):
            per_k[k].append(max(topo.distance(m.source, d) for d in m.destinations))
            rule += [_rule_pair_traffic(m.destinations)] if (kind, k) == ("mesh", KS[0]) else []
        out[kind] = {k: statistics.fmean(v) for k, v in per_k.items()}
    return out, rule


def _rule_pair_traffic(dests: Sequence[tuple[int, int]]) -> int:
    """PAIR's links on a mesh from (0, 0) by the rule as the thesis states it (Fig. 11, Prop. 4), written
    apart from node.routing: A = min x, B = min y of the rest; I = (x_A, y_B) joins from the last I
    (the new source) by an XY path; A and B hang off I by straight paths. The distinct links."""
    rest, (hx, hy), links = set(dests), (0, 0), set[tuple[tuple[int, int], tuple[int, int]]]()
    while rest:
        (ax, ay), (bx, by) = min(rest), min(rest, key=lambda d: (d[1], d[0]))
        for (ux, uy), (vx, vy) in (((hx, hy), (ax, by)), ((ax, by), (ax, ay)), ((ax, by), (bx, by))):
            links |= {((x, uy), (x + 1, uy)) for x in range(ux, vx)}
            links |= {((vx, y), (vx, y + 1)) for y in range(uy, vy)}
        rest -= {(ax, ay), (bx, by)}
        hx, hy = ax, by
    return len(links)


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
    lo, hi = f"{min(vals):.2f}", f"{max(vals):.2f}"
    return lo if lo == hi else f"{lo}–{hi}"


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
    caption = _text("caption", source=v.table().source, repeat=ours.repeat, farthest=farthest)
    diffs = "\n".join(["**Differences.**", *_differences(v), "", "*Likely reasons.* " + " ".join(reasons)])
    table = markdown_table(header, [*map(row, KS), mean_row])
    return f"### Table {v.spec.number}: {v.spec.title}\n\n{caption}\n\n{table}\n{diffs}\n"


def _differences(v: View) -> list[str]:
    """How far ours are from the paper's, per algorithm."""
    lines = []
    for a in v.algs:
        known = [(k, v.paper(k, a), v.mine(a, k)) for k in KS]
        if not (deltas := [(k, m - p, p) for k, p, m in known if p is not None and m is not None]):
            continue
        ds, ps = [d for _, d, _ in deltas], [p for *_, p in deltas]
        cis = [(p, *v.ours.ci(v.spec.kind, a, k, v.spec.metric)) for k, _, p in deltas]
        inside = sum(lo <= p <= hi for p, lo, hi in cis if lo is not None and hi is not None)
        rel = _pct(statistics.fmean(p + d for _, d, p in deltas), statistics.fmean(ps))
        k, d, p = max(deltas, key=lambda t: abs(t[1]))
        f = {"alg": a.upper(), "mean": _diff(statistics.fmean(ds)), "rel": _signed(rel), "k": k}
        f |= {"lo": _diff(min(ds)), "hi": _diff(max(ds)), "largest": _diff(d), "inside": inside}
        lines.append(_text("difference", f, largest_pct=_signed(d / p * 100 if p else 0), points=len(ds)))
    return lines


def _time_reasons(v: View) -> list[str]:
    """The reasons we know for a time table's differences, with the numbers that support them."""
    kind, ours = v.spec.kind, v.ours
    bound = statistics.fmean(ours.bound[kind].values())
    _, wa, wk = max((abs((v.mine(a, k) or 0) - (v.paper(k, a) or 0)), a, k) for a in v.algs for k in KS)
    f = {"alg": wa.upper(), "k": wk, "bound_k": fmt(ours.bound[kind][wk]), "ours": fmt(v.mine(wa, wk))}
    f |= {"paper": fmt(v.paper(wk, wa)), "bound": fmt(bound)}
    f["over_paper"] = _each(v.algs, lambda a: _diff(_paper_overall(v.table(), a) - bound))
    f["over_ours"] = _each(v.algs, lambda a: _diff((ours.overall(kind, a, "time") or 0) - bound))
    return [_text("time", f), *([_text("table 4")] if kind == "torus" else [])]


def _traffic_reasons(v: View) -> list[str]:
    """The reasons we know for a (additional) traffic table's differences, with their numbers."""
    kind, metric, n = v.spec.kind, v.spec.metric, v.spec.number
    out: list[str] = []
    for a in v.algs if kind == "mesh" else ():
        at20 = f"at k = 20 ours {fmt(v.mine(a, 20))}, the paper's {fmt(v.paper(20, a))}"
        out.append(_text(f"reading {a}", where=f"{at20}; over the sweep {v.shift(a)}"))
    if kind == "torus":
        out.append(_torus_above_mesh(v))
        out += [_text("table 5", edges=SPANNING_TREE_EDGES)] if metric == "traffic" else []
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


def _within(ratio: float) -> bool:
    """A size within the stated factor of the paper's (``ratio`` = ours ÷ the paper's)."""
    return 1 / SIZE_FACTOR <= ratio <= SIZE_FACTOR


def _claim(where: str, key: str, f: Mapping[str, Any], size_ok: bool | None = None, **sizes: float) -> Claim:
    """A claim from its texts ``KEY claim``, ``KEY evidence`` filled from ``f``; f's hits, points decide."""
    verdict = by_points(f["hits"], f["points"], size_ok=size_ok)
    numbers = {"hits": f["hits"], "points": f["points"], **sizes}
    return Claim(where, _text(f"{key} claim", f), verdict, _text(f"{key} evidence", f), numbers)


def _comparison(tables: Tables, ours: Ours, kind: str, a: str, b: str) -> list[Noted]:
    """§4.3's claims for ``a`` against ``b`` on ``kind``: a's traffic below b's, and their times."""

    def per_k(metric: str) -> list[tuple[float, float]]:
        return [(ours.mean(kind, a, k, metric) or 0, ours.mean(kind, b, k, metric) or 0) for k in KS]

    def gap(m: str) -> tuple[float, float]:
        mine = _pct(ours.overall(kind, a, m) or 0, ours.overall(kind, b, m) or 0)
        return mine, _paper_gap(tables, kind, m, a, b)

    (t, pt), (x, px), (s, ps) = map(gap, ("traffic", "additional_traffic", "time"))
    n, rt, rx = 1 if kind == "mesh" else 4, round(t / pt, 3), round(x / px, 3)  # n: the time table
    sec = f"§4.3.{1 + 2 * COMPARISONS.index((a, b)) + list(TOPOLOGIES).index(kind)}, Table"
    sizes = {"ratio": rt, "ratio_additional": rx}
    f: dict[str, Any] = {"A": a.upper(), "B": b.upper(), "kind": kind, "points": len(KS), **sizes}
    f |= {"ours": _signed(t), "paper": _signed(pt), "aat": _signed(x), "paper_aat": _signed(px)}
    f |= {"hits": sum(p < q for p, q in per_k("traffic")), "sig": ours.significant(kind, a, b, "traffic", -1)}
    traffic = _claim(f"{sec} {n + 1}", "traffic", f, all(map(_within, sizes.values())), **sizes)
    diag = fmt(ours.overall(kind, "diag", "traffic")), fmt(_paper_overall(tables[(kind, "traffic")], "diag"))
    note = _text("diag note", ours=diag[0], paper=diag[1]) if (a, b, kind) == ("pair", "diag", "mesh") else ""
    f |= {"ours": _signed(s, 2), "paper": _signed(ps, 2), "ratio": round(s / ps, 3)}
    f["sig"] = ours.significant(kind, a, b, "time", 1)
    if b == "diag":  # "without increasing the optimal multicast time": at most the tolerance above at a point
        f["hits"] = sum(p <= q * (1 + EQUAL_TIME_TOLERANCE) for p, q in per_k("time"))
        lower, same, higher = framework.sign_counts(diffs := ours.diffs(kind, a, b, "time"))
        f |= {"lower": lower, "same": same, "higher": higher, "n": len(diffs), "equal": EQUAL_TIME_TOLERANCE}
        return [(traffic, note), (_claim(f"{sec} {n}", "time pair", f, tolerance=EQUAL_TIME_TOLERANCE), "")]
    f["hits"] = sum(p > q for p, q in per_k("time"))  # "slightly higher": above, by about the paper's gap
    return [(traffic, note), (_claim(f"{sec} {n}", "time min", f, _within(f["ratio"]), ratio=f["ratio"]), "")]


def _torus_claim(tables: Tables, ours: Ours) -> Claim:
    """§4.3.2: torus times below mesh times at every algorithm × k; the size is the reduction."""
    algs, (torus, mesh) = ours.algorithms, (tables[("torus", "time")], tables[("mesh", "time")])
    mine = [(ours.overall("torus", a, "time") or 0) / (ours.overall("mesh", a, "time") or 1) for a in algs]
    paper = [_paper_overall(torus, a) / _paper_overall(mesh, a) for a in PAPER_ALGORITHMS]
    r = round((1 - statistics.fmean(mine)) / (1 - statistics.fmean(paper)), 3)
    f: dict[str, Any] = {"hits": sum(ours.points_below(a, "time", "torus", "mesh") for a in algs)}
    f["points"] = len(algs) * len(KS)
    f |= {"ratios": _span(mine), "paper_ratios": _span(paper), "ratio": r}
    return _claim("§4.3.2, Tables 1 and 4", "torus", f, _within(r), ratio=r)


def _peak_claim(tables: Tables, ours: Ours, algs: Sequence[str], where: str) -> list[Noted]:
    """§4.3.1–4.3.4: additional traffic peaks inside the sweep (direction), near the stated share (size)."""
    curves = [(kind, a) for kind in TOPOLOGIES for a in algs if a in ours.algorithms]

    def peak(kind: str, a: str, paper: bool = False) -> int:
        t, m = tables[(kind, "additional_traffic")], "additional_traffic"
        return max(KS, key=lambda k: (_paper(t, k, a) if paper else ours.mean(kind, a, k, m)) or 0)

    def each(value: Callable[[str, str], object]) -> str:
        return ", ".join(f"{a.upper()} {kind} {value(kind, a)}" for kind, a in curves)

    at = {c: peak(*c) for c in curves}
    mid = {c: statistics.fmean(PEAK_SHARES[c]) * NODES / 100 for c in curves}
    half = {c: (PEAK_SHARES[c][1] - PEAK_SHARES[c][0]) * NODES / 200 + PEAK_TOLERANCE for c in curves}
    f: dict[str, Any] = {"hits": sum(KS[0] < k < KS[-1] for k in at.values()), "points": len(curves)}
    f |= {
        "near": sum(abs(at[c] - mid[c]) <= half[c] for c in curves),
        "algs": _upper([*dict.fromkeys(a for _, a in curves)]),
    }
    f |= {"peak": PEAK_TOLERANCE, "paper_peaks": each(partial(peak, paper=True))}
    f["peaks"] = each(lambda k, a: f"{at[k, a]} ({at[k, a] / NODES:.0%})")
    f["ratios"] = each(lambda k, a: f"{at[k, a] / mid[k, a]:.2f}×")
    ratios = {f"{kind}_{a}_ratio": round(at[(kind, a)] / mid[(kind, a)], 3) for kind, a in curves}
    if not curves:
        return []
    size_ok = f["near"] >= HOLD_SHARE * len(curves)
    return [(_claim(f"{where}, Tables 3 and 6", f"peak {algs[-1]}", f, size_ok, **ratios), "")]


def _claims(tables: Tables, ours: Ours) -> list[Noted]:
    """The paper's claims, each checked: the claim and a note to print under its bullet (or "")."""
    pairs = [(a, b) for a, b in COMPARISONS if {a, b} <= set(ours.algorithms)]
    out = [c for a, b in pairs for kind in TOPOLOGIES for c in _comparison(tables, ours, kind, a, b)]
    out += [(_torus_claim(tables, ours), ""), *_peak_claim(tables, ours, ("diag", "pair"), "§4.3.1–4.3.2")]
    return out + _peak_claim(tables, ours, ("min",), "§4.3.3–4.3.4")


def _contradictions(tables: Tables, ours: Ours) -> str:
    """Where the thesis's tables contradict its own rules and network, with our numbers."""
    algs, parts = [a for a in PAPER_ALGORITHMS if a in ours.algorithms], [_text("contradictions")]
    mesh, torus, topo = tables[("mesh", "traffic")], tables[("torus", "time")], Topology.parse("torus:20x20")
    if "pair" in algs and ours.rule:
        d = [(ours.mean("mesh", "pair", k, "traffic") or 0) - (_paper(mesh, k, "pair") or 0) for k in KS]
        f = {"above": sum(x > 0 for x in d), "points": len(KS), "lo": fmt(min(d)), "hi": fmt(max(d))}
        f |= {"sets": len(ours.rule), "rule": fmt(statistics.fmean(ours.rule))}
        f |= {"example": _rule_pair_traffic(EXAMPLE_2), "paper": fmt(_paper(mesh, 20, "pair"))}
        f["ours"] = fmt(ours.mean("mesh", "pair", 20, "traffic"))
        parts.append(_text("contra pair", f))

    def between(a: str) -> str:
        m, t = (fmt(ours.overall(kind, a, "time")) for kind in TOPOLOGIES)
        return f"{t} < {fmt(_paper_overall(torus, a))} < {m}"

    cols = [torus.column(a) for a in PAPER_ALGORITHMS]
    f = {"above": sum(x > topo.diameter for c in cols for x in c), "means": len(cols) * len(KS)}
    f |= {"d": topo.diameter, "top": fmt(max(map(max, cols))), "between": _each(algs, between)}
    parts.append(_text("contra table 4", f))
    t5, edges = tables[("torus", "traffic")], SPANNING_TREE_EDGES
    over = [f"{a.upper()} {fmt(x)}" for a in PAPER_ALGORITHMS for x in t5.column(a) if x > edges]
    top = fmt(max(r["traffic_mean"] for r in ours.summary["torus"].values()))
    f = {"over": ", ".join(over), "s": "s" * (len(over) == 1), "top": top, "edges": edges}
    return "\n\n".join([*parts, _text("contra table 5", f)]) + "\n"


_MARKERS = {"diag": "o", "pair": "s", "min": "^", "vh": "D", "dist": "v"}


def write_plots(out: Path, tables: Tables, ours: Ours) -> list[Path]:
    """Figs. 27–38 (two algorithms each) and one overview per topology × metric (all algorithms)."""
    short = {m: name.split(" (")[0] for m, name in METRIC_NAMES.items()}
    note = f"ours: mean of {ours.repeat} runs per point, 95% CI shaded; paper: Malani, Tables 1–6"

    def plot(name: str, kind: str, metric: str, algs: Sequence[str], title: str) -> Path:
        """Ours and the paper's per algorithm; earlier curves wider, so that equal ones stay visible."""
        curves: list[Series] = []
        for i, a in enumerate(algs):
            colour, label = algorithm_colour(a), a.upper()
            if a in ours.algorithms:
                mean = [ours.mean(kind, a, k, metric) for k in KS]
                lo, hi = zip(*(ours.ci(kind, a, k, metric) for k in KS), strict=True)
                w = 1.6 + 0.9 * (len(algs) - 1 - i)
                curves.append(Series(f"{label} (ours)", KS, mean, False, colour, (lo, hi), _MARKERS[a], w))
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


def build_report(ours: Ours, tables: Tables, plots: Sequence[Path], claims: Sequence[Noted]) -> str:
    """report.md's text (``ours.meta`` carries the run's status and its number of emulations)."""
    meta = ours.meta
    fields = {"cpu": f" ({meta['cpu_s']:.0f} s of CPU)" if "cpu_s" in meta else "", "repeat": ours.repeat}
    criteria: dict[str, Any] = {"equal": EQUAL_TIME_TOLERANCE, "factor": SIZE_FACTOR, "low": 1 / SIZE_FACTOR}
    criteria |= {"peak": PEAK_TOLERANCE, "peak_pct": PEAK_TOLERANCE / NODES, "legend": legend(ours.repeat)}
    head = _text("head", meta, fields, algorithms=_upper(ours.algorithms, ", "))
    bullets = (c.markdown() + (f"\n{note}" if note else "") for c, note in claims)
    parts = [head + "\n", _text("claims", criteria) + "\n", *bullets, "", _contradictions(tables, ours)]
    parts += ["## Tables\n", *(_table_section(View(spec, tables, ours)) for spec in TABLES)]
    return "\n".join([*parts, _text("plots") + "\n", *(f"![{p.stem}](plots/{p.name})\n" for p in plots)])


# -- command -----------------------------------------------------------------------------------
USES, CHUNK, ALGS = ("jobs",), sweep.DEFAULT_CHUNK, ",".join(ALL_ALGORITHMS)
OPTIONS = (
    Option("--algorithms", f"comma-separated subset of {ALGS} (default: all)", default=ALGS),
    framework.runtime_option(),
    Option("--chunk", f"most multicasts per emulation, 0: no limit (default {CHUNK})", int, CHUNK),
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
    meta["status"] = "; ".join(
        f"{kind}: {'complete' if r.complete else 'INCOMPLETE — ' + '; '.join(r.incomplete)}"
        f" ({r.steps} lockstep steps, {len(r.errors)} node errors)"
        for kind, r in results.items()
    )
    ours = Ours.of(results, meta | {"emulations": sum(r.emulations for r in results.values())})
    tables = {(t.kind, t.metric): read_data_table(t.file) for t in TABLES}
    plots = write_plots(out, tables, ours)
    said = f"malani: {plural(meta['multicasts'], 'multicast')}, emulated in {meta['wall_s']:.1f} s; "
    said += f"wrote {out / 'report.md'} and {plural(len(plots), 'plot')}"
    claims, complete = _claims(tables, ours), all(r.complete for r in results.values())
    report = build_report(ours, tables, plots, claims)
    framework.write_tidy(out / "claims.csv", COLUMNS, (c.row() for c, _ in claims))
    if (warning := repeat_warning(ours.repeat)) is not None:
        ctx.warn(f"malani: {warning}")
    return framework.finish(ctx, out, report, said, [c.markdown() for c, _ in claims], complete)


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run both sweeps, write their CSVs and reproduction.json."""
    algorithms = framework.names_in(args.algorithms, ALL_ALGORITHMS, "--algorithms")
    settings, watch = framework.lockstep_settings(args, "one-port"), framework.Stopwatch()
    specs = [sweep.SweepSpec(t, algorithms, KS, args.repeat, args.seed, SOURCE) for t in TOPOLOGIES.values()]
    runs = sweep.sweep_many(specs, settings, ctx.progress, jobs=args.jobs, chunk=args.chunk)
    results = dict(zip(TOPOLOGIES, runs, strict=True))
    chosen = [] if algorithms == ALL_ALGORITHMS else [f"--algorithms {','.join(algorithms)}"]
    cmd = framework.command_line(NAME, args, *chosen)
    same = {"algorithms": list(algorithms), "repeat": args.repeat, "seed": args.seed}
    facts = {"runtime": args.runtime, "jobs": args.jobs, "chunk": args.chunk}
    facts["multicasts"] = sum(len(r.tidy) for r in results.values())
    meta = framework.run_facts(cmd, watch, **same, **facts)
    about = {**same, "ks": list(KS), "source": list(SOURCE), "settings": asdict(settings)}
    for kind, res in results.items():
        sweep.write_sweep(out / kind, res, {"command": cmd, "topology": TOPOLOGIES[kind], **about})
    framework.write_json(out / "reproduction.json", meta)
