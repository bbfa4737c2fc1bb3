"""Seed 002 (Herley, Pietracaprina, Pucci): mcast(n, d, c) — completion time against √(cn), buffers against c.

Sweeps c, n and d on random sets and on Theorem 1's worst-case sets and checks Theorems 1–3 and §1's
claims on the runs; report.md states the setting, our criteria and where we simplify the paper.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.output.report import Series, fmt, markdown_table, plot_series
from coordinator.output.results import write_csv
from coordinator.reproduce import framework
from coordinator.reproduce.framework import Context

__all__ = ["ALGORITHMS", "Setup", "check_claims", "exponent", "summarise"]

NAME = "herley"
SUMMARY = "seed 002 (Herley–Pietracaprina–Pucci): mcast(n,d,c) time/√(cn) and peak buffers vs c, n, d"
DEFAULT_REPEAT = 2

ALGORITHMS = ("replicate", "tree", "herley-tiles", "herley-random")
COLOURS = {"replicate": "#7f7f7f", "tree": "#1f77b4", "herley-tiles": "#2ca02c", "herley-random": "#d62728"}
"""One colour per algorithm in every plot (``report.algorithm_colour`` gives three of them the same)."""
OPTIMAL = ("herley-tiles", "herley-random")
#: Our criteria for the paper's words (stated in the report).
FLAT = 0.15  # |exponent of time/√(cn)| at most this: no trend (time ∝ √(cn))
GROWS = 0.15  # exponent of time/√(cn) at least this: grows faster than √(cn)
CONSTANT_BUFFER = 0.25  # exponent of the peak buffer against c at most this: O(1)
LINEAR_BUFFER = 1.15  # exponent of the peak buffer against c at most this: O(c)
WORST_BOUND = 0.2  # the worst-case sets' lower bound / √(cn) at least this for every c: Ω(√(cn))
MIN_C_FOR_SLOPES = 4  # below, the diameter (≈ 2√n) exceeds √(cn) and dominates every algorithm
CRITERIA = {"flat": FLAT, "grows": GROWS, "constant": CONSTANT_BUFFER, "linear": LINEAR_BUFFER}
CRITERIA |= {"bound": WORST_BOUND, "min_c": MIN_C_FOR_SLOPES}


@dataclass(frozen=True, slots=True)
class Setup:
    """What is swept: a c sweep, an n sweep, a worst-case c sweep and a worst-case d sweep."""

    side: int  # mesh side of the c and d sweeps
    cs: tuple[int, ...]
    sides: tuple[int, ...]  # n sweep
    n_cs: tuple[int, ...]  # the c of each n sweep
    d_c: int  # c of the d sweep
    ds: tuple[int, ...]


FULL = Setup(16, (1, 2, 4, 8, 16, 32, 64), (8, 16, 32), (4, 16), 16, (1, 2, 4, 8, 16))
QUICK = Setup(8, (1, 2, 4), (4, 8), (2,), 4, (1, 4))


def setup_from(d: Mapping[str, Any]) -> Setup:
    """A :class:`Setup` from its JSON form in reproduction.json."""
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else int(v) for k, v in d.items()}
    return Setup(**values)


@dataclass(frozen=True, slots=True, order=True)
class Point:
    """One run: a mesh side, a message set (kind, d, c, seed) and an algorithm."""

    side: int
    kind: str
    d: int
    c: int
    seed: int
    algorithm: str


def points(s: Setup, seeds: Sequence[int], algorithms: Sequence[str]) -> list[Point]:
    """Every distinct run of the four sweeps (a point shared by two sweeps runs once)."""
    keys: set[tuple[int, str, int, int]] = set()
    keys.update((s.side, "random", c, c) for c in s.cs)
    keys.update((s.side, "worst", c, c) for c in s.cs)
    keys.update((side, "random", c, c) for side in s.sides for c in s.n_cs)
    keys.update((s.side, "worst", d, s.d_c) for d in s.ds)
    ok = [(side, kind, d, c) for side, kind, d, c in keys if c < side * side and d < side * side]
    return sorted(
        Point(side, kind, d, c, seed, a) for side, kind, d, c in ok for seed in seeds for a in algorithms
    )


def _cost(p: Point) -> float:
    """A rough guess of a run's cost, to start the long ones first."""
    n = p.side * p.side
    return n * p.d * math.sqrt(p.c * n) * (3 if p.algorithm == "herley-random" else 1)


_text = partial(framework.text, NAME)


# -- running ---------------------------------------------------------------------------------------
#: points.csv's measurements of a run, in column order: the set's size, time, buffers and traffic, losses.
STAT_COLUMNS = (
    *("n", "actual_d", "actual_c", "messages", "deliveries"),
    *("time", "sqrt_cn", "time_over_sqrt_cn", "lower_bound"),
    *("peak_buffer", "peak_held", "busiest_mean_occupancy", "traffic"),
    *("missing", "duplicates", "dropped"),
)
#: The columns named apart from their McastStats field.
_STAT_FIELD = {"actual_d": "d", "actual_c": "c", "busiest_mean_occupancy": "mean_occupancy"}
POINT_FIELDS = (*(f.name for f in fields(Point)), *STAT_COLUMNS, "steps", "incomplete", "wall_s")


def _rounded(v: Any) -> Any:
    """A float to four decimals (points.csv's precision); anything else as it is."""
    return round(v, 4) if isinstance(v, float) else v


def run_point(p: Point, runtime: str = "engines", max_steps: int = 50_000) -> dict[str, Any]:
    """Build the message set and plan, run it, and return one row of ``points.csv``."""
    import trio

    from coordinator.experiments.run import emulate
    from coordinator.runtimes.engines import run_engines
    from coordinator.runtimes.records import RunSettings
    from coordinator.workloads.mcast import mcast_plan, mcast_stats, message_set
    from node.topology import Topology

    mset = message_set(Topology("mesh", p.side, p.side), p.kind, p.d, p.c, p.seed)
    plan = mcast_plan(mset, p.algorithm)
    rt = "in-process" if runtime == "engines" else runtime
    s = RunSettings(
        contention="shared", port_model="all-port", max_steps=max_steps, runtime=rt, wall_budget=7200
    )
    t0 = time.perf_counter()
    raw = run_engines(plan, s) if runtime == "engines" else trio.run(emulate, plan, s, None)
    wall = time.perf_counter() - t0
    st = mcast_stats(plan, raw, mset)
    stats = st.as_dict() | {col: getattr(st, field) for col, field in _STAT_FIELD.items()}
    stats = {col: _rounded(stats[col]) for col in STAT_COLUMNS}
    return {
        **asdict(p),
        **stats,
        "steps": raw.last_step,
        "incomplete": "; ".join(raw.incomplete),
        "wall_s": round(wall, 3),
    }


# -- summaries -------------------------------------------------------------------------------------
Key = tuple[int, str, int, int, str]  # side, kind, d, c, algorithm
Spot = tuple[int, str, int, int]  # side, kind, d, c: one message set's parameters
Summary = Mapping[Key, Mapping[str, Any]]
MEASURES = (
    *("time", "time_over_sqrt_cn", "lower_bound", "sqrt_cn"),
    *("peak_buffer", "busiest_mean_occupancy", "traffic", "actual_c"),
)
SPREAD = ("", "_min", "_max")  # summary.csv's suffixes: mean, min and max over the seeds


def _summary(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One point's runs over the seeds: each measure's mean, min and max (None unless every run has it)."""
    timed = [r for r in rs if r["time"] is not None]
    rec: dict[str, Any] = {
        "runs": len(rs),
        "complete": len(timed) == len(rs),
        "under_bound": sum(1 for r in timed if r["lower_bound"] is not None and r["time"] < r["lower_bound"]),
    }
    for m in MEASURES:
        vals = [float(r[m]) for r in rs if r[m] is not None]
        whole = bool(vals) and len(vals) == len(rs)
        spread = (statistics.fmean(vals), min(vals), max(vals)) if whole else (None, None, None)
        rec.update(zip((m + suffix for suffix in SPREAD), spread, strict=True))
    return rec


def summarise(rows: Iterable[Mapping[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Per (side, kind, d, c, algorithm): mean, min and max over the seeds of each measure."""
    groups: dict[Key, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["side"], r["kind"], r["d"], r["c"], r["algorithm"])].append(r)
    return {key: _summary(rs) for key, rs in groups.items()}


def exponent(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log y against log x (y ∝ x^slope); None with fewer than two points."""
    pts = [
        (math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if y is not None and y > 0 and x > 0
    ]
    if len({x for x, _ in pts}) < 2:
        return None
    return statistics.linear_regression([x for x, _ in pts], [y for _, y in pts]).slope


def _cc(side: int, kind: str, cs: Iterable[int]) -> list[Spot]:
    """The spots of a c sweep with d = c."""
    return [(side, kind, c, c) for c in cs]


def _at(summ: Summary, spot: Spot, alg: str, measure: str) -> Any:
    """One algorithm's measure at one spot; None where it was not run or not measured."""
    return summ.get((*spot, alg), {}).get(measure)


def _col(summ: Summary, spots: Iterable[Spot], alg: str, measure: str) -> list[Any]:
    """One algorithm's measure at each spot."""
    return [_at(summ, spot, alg, measure) for spot in spots]


def _ratios(tops: Iterable[float | None], bottoms: Iterable[float | None]) -> list[float]:
    """top / bottom for each pair where both are known and non-zero."""
    return [t / b for t, b in zip(tops, bottoms, strict=True) if t and b]


# -- claims ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Claim:
    """One of the paper's claims, our verdict and the numbers behind it."""

    claim: str
    verdict: str  # "supported", "not supported", "partly supported", "not tested"
    evidence: str


def _verdict(full: bool, part: bool = False) -> str:
    """A claim's verdict: supported if ``full``, else partly supported if ``part``."""
    return "supported" if full else ("partly supported" if part else "not supported")


def _flat(e: float | None) -> bool:
    """Whether an exponent of time/√(cn) shows no upward trend."""
    return e is not None and e <= FLAT


def _exp_text(e: float | None) -> str:
    return "—" if e is None else f"{e:+.2f}"


def _span(vals: Sequence[float], digits: int = 2) -> str:
    """``lo–hi`` of some numbers."""
    return f"{min(vals):.{digits}f}–{max(vals):.{digits}f}"


def _by_alg(texts: Iterable[tuple[str, str]]) -> str:
    """```alg` text, ...`` for (algorithm, text) pairs."""
    return ", ".join(f"`{a}` {text}" for a, text in texts)


def check_claims(summ: Summary, s: Setup) -> list[Claim]:
    """Each claim of the paper, judged on our data by the criteria stated in the report."""
    ran = [c for c in s.cs if (s.side, "random", c, c, "replicate") in summ]
    cs = [c for c in ran if c >= MIN_C_FOR_SLOPES]
    cs = cs if len(cs) >= 2 else ran
    n_of = s.side * s.side
    base = {"n": n_of, "c0": cs[0] if cs else None, "c1": cs[-1] if cs else None, **CRITERIA}
    claims: list[Claim] = []

    def add(key: str, verdict: str, *parts: Mapping[str, Any], **fields: Any) -> None:
        """One claim, its verdict and its evidence, both texts filled in from ``parts`` and ``fields``."""
        evidence = _text(f"evidence {key}", base, *parts, fields)
        claims.append(Claim(_text(f"claim {key}", *parts, fields), verdict, evidence))

    def col(alg: str, measure: str = "time_over_sqrt_cn", at: Sequence[int] = cs) -> list[Any]:
        return _col(summ, _cc(s.side, "random", at), alg, measure)

    def c_exp(alg: str, measure: str = "time_over_sqrt_cn", at: Sequence[int] = cs) -> float | None:
        return exponent([float(c) for c in at], col(alg, measure, at))

    def n_exp(alg: str, c: int) -> float | None:
        sides = [x for x in s.sides if (x, "random", c, c, alg) in summ]
        ys = _col(summ, [(x, "random", c, c) for x in sides], alg, "time_over_sqrt_cn")
        return exponent([float(x * x) for x in sides], ys)

    # Theorem 1: a lower bound of Ω(√(cn)) on the worst-case sets.
    if worst := [(c, a) for c in s.cs for a in ALGORITHMS if (s.side, "worst", c, c, a) in summ]:
        lbs = {c: summ[(s.side, "worst", c, c, ALGORITHMS[0])] for c, _ in worst}
        lb_ratio = [r["lower_bound"] / r["sqrt_cn"] for r in lbs.values() if r["lower_bound"] is not None]
        runs = [summ[(s.side, "worst", c, c, a)] for c, a in worst]
        known = [r["time_over_sqrt_cn"] for r in runs if r["time_over_sqrt_cn"] is not None]
        ok = bool(known) and not any(r.get("under_bound", 0) for r in runs) and min(lb_ratio) >= WORST_BOUND
        spans = {"ratio": _span(lb_ratio), "took": _span(known)}
        add("lower bound", _verdict(ok), spans, c_lo=min(lbs), c_hi=max(lbs))
    # Theorems 2 and 3: O(√(cn)) time, against c and against n.
    for alg, theorem in (("herley-tiles", "Theorem 2"), ("herley-random", "Theorem 3")):
        ec, ens = c_exp(alg), {c: n_exp(alg, c) for c in s.n_cs}
        ok_c, ok_n = _flat(ec), all(_flat(e) for e in ens.values())
        e_n = "; ".join(f"c = {c}: {_exp_text(e)}" for c, e in ens.items())
        exps = {"e_c": _exp_text(ec), "e_n": e_n, "span": _span([r for r in col(alg) if r is not None])}
        add("time", _verdict(ok_c and ok_n, ok_c or ok_n), exps, theorem=theorem, alg=alg)
    # Replication at the source is not optimal.
    er, rr = c_exp("replicate"), col("replicate")
    optimal = _by_alg((a, _exp_text(c_exp(a))) for a in OPTIMAL)
    ends = {"first": fmt(rr[0]), "last": fmt(rr[-1]), "e": _exp_text(er)}
    add("replicate", _verdict(er is not None and er >= GROWS), ends, optimal=optimal)
    # Buffers.
    bt, bt_vals = c_exp("herley-tiles", "peak_buffer"), col("herley-tiles", "peak_buffer")
    over_c = [v / c for v, c in zip(bt_vals, cs, strict=True) if v is not None]
    tiles = {"first": fmt(bt_vals[0], 0), "last": fmt(bt_vals[-1], 0), "e": _exp_text(bt)}
    tiles |= {"over_c": _span(over_c) if over_c else ""}
    add("tiles buffer", _verdict(bt is not None and bt <= LINEAR_BUFFER), tiles)
    if not over_c:
        claims[-1] = replace(claims[-1], evidence="no buffer measurements")
    small = [c for c in cs if c <= max(1, n_of // 16)]
    at = small if len(small) >= 2 else cs
    past = [c for c in cs if c not in at]
    br, br_vals = c_exp("herley-random", "peak_buffer", at), col("herley-random", "peak_buffer", at)
    bt_at, br_past = col("herley-tiles", "peak_buffer", at), col("herley-random", "peak_buffer", past)
    reached = ", ".join(f"{fmt(v, 1)} at c = {c}" for c, v in zip(past, br_past, strict=True))
    ends = {"first": fmt(br_vals[0], 0), "last": fmt(br_vals[-1], 0), "e": _exp_text(br)}
    beyond = _text("beyond", reached=reached) if past else ""
    tiles_at = {"tiles_first": fmt(bt_at[0], 0), "tiles_last": fmt(bt_at[-1], 0), "beyond": beyond}
    add(
        "random buffer",
        _verdict(br is not None and br <= CONSTANT_BUFFER),
        ends,
        tiles_at,
        c0=at[0],
        c1=at[-1],
    )
    # Independence of d.
    ds = [d for d in s.ds if (s.side, "worst", d, s.d_c, "replicate") in summ]
    if len(ds) >= 2:
        by_d = [(s.side, "worst", d, s.d_c) for d in ds]
        eds = {a: exponent([float(d) for d in ds], _col(summ, by_d, a, "time")) for a in ALGORITHMS}
        worst_ratio = {
            a: max(r or math.inf for r in _col(summ, by_d, a, "time_over_sqrt_cn")) for a in OPTIMAL
        }
        sweep_ratio = {a: max((r for r in col(a) if r), default=math.inf) for a in OPTIMAL}
        bounded = all(worst_ratio[a] <= 1.1 * sweep_ratio[a] for a in OPTIMAL)
        within = _by_alg((a, f"≤ {worst_ratio[a]:.2f} vs {sweep_ratio[a]:.2f} × √(cn)") for a in OPTIMAL)
        e_d = _by_alg((a, _exp_text(e)) for a, e in eds.items())
        verdict = _verdict(bounded and all(_flat(eds[a]) for a in OPTIMAL), bounded)
        add("d", verdict, c=s.d_c, d0=ds[0], d1=ds[-1], within=within, e_d=e_d)
    return claims


def observations(summ: Summary, s: Setup) -> list[str]:
    """What else the data shows, computed from it: constant factors, trees, worst vs random, traffic."""
    out: list[str] = []
    cs = [c for c in s.cs if c >= MIN_C_FOR_SLOPES]
    random_, worst = _cc(s.side, "random", cs), _cc(s.side, "worst", cs)

    def times(spots: Sequence[Spot], a: str) -> list[Any]:
        return _col(summ, spots, a, "time")

    if rt := _ratios(times(random_, "herley-random"), times(random_, "herley-tiles")):
        out.append(_text("random vs tiles", span=_span(rt, 1), min_c=MIN_C_FOR_SLOPES))
    tree = _col(summ, random_, "tree", "time_over_sqrt_cn")
    tr, vs = (
        [r for r in tree if r is not None],
        _ratios(times(random_, "tree"), times(random_, "herley-tiles")),
    )
    if tr and vs:
        top, e = random_[-1], _exp_text(exponent([float(c) for c in cs], tree))
        peaks = _by_alg((a, fmt(_at(summ, top, a, "peak_buffer"), 1)) for a in ALGORITHMS)
        out.append(_text("tree", span=_span(tr), e=e, vs=_span(vs), c=top[3], peaks=peaks))
    if pairs := [p for a in ALGORITHMS for p in _ratios(times(worst, a), times(random_, a))]:
        out.append(_text("worst vs random", span=_span(pairs), min_c=MIN_C_FOR_SLOPES))
    top_c = max(s.cs)
    traffic = {a: _at(summ, (s.side, "random", top_c, top_c), a, "traffic") for a in ALGORITHMS}
    if all(traffic.values()):
        out.append(_text("traffic", c=top_c, traffic=_by_alg((a, f"{v:,.0f}") for a, v in traffic.items())))
    return out


# -- report ----------------------------------------------------------------------------------------
#: The plots against c: (kind of set, measure) -> the title's start ({side}: the mesh, e.g. 16×16).
BY_C_PLOTS = {
    ("random", "time_over_sqrt_cn"): "random sets, {side} mesh",
    ("random", "peak_buffer"): "random sets, {side} mesh",
    ("worst", "time_over_sqrt_cn"): "Theorem 1's worst-case sets, {side}",
    ("worst", "peak_buffer"): "worst-case sets, {side}",
}
#: Per plotted measure: its file name's start, its title's end and its y axis label.
AXES = {
    "time_over_sqrt_cn": ("time", "time / √(cn)", "completion time / √(cn)"),
    "peak_buffer": ("buffer", "peak buffer", "peak node occupancy (packets)"),
}
BAND_NOTE = "band: min–max over the seeds; all-port, shared contention, unbounded queues"
GREY = "#444444"  # the paper's reference curves


def _curves(
    summ: Summary, spots: Sequence[Spot], xs: Sequence[float], measure: str, band: bool = True
) -> list[Series]:
    """One curve per algorithm over some spots, with (``band``) its min–max band over the seeds."""

    def ys(alg: str, suffix: str = "") -> list[Any]:
        return _col(summ, spots, alg, measure + suffix)

    return [
        Series(a, xs, ys(a), colour=COLOURS[a], band=(ys(a, "_min"), ys(a, "_max")) if band else None)
        for a in ALGORITHMS
    ]


def write_plots(out: Path, summ: Summary, s: Setup) -> list[Path]:
    """The report's plots: time/√(cn) and peak buffers against c, n and d."""
    plots: list[Path] = []
    side = f"{s.side}×{s.side}"

    def ran(spots: Iterable[Spot]) -> list[Spot]:
        return [spot for spot in spots if any((*spot, a) in summ for a in ALGORITHMS)]

    def plot(
        name: str, series: list[Series], title: str, axes: tuple[str, str], note: str | None = None
    ) -> None:
        plots.append(plot_series(out / "plots" / name, series, title, *axes, note=note))

    for (kind, measure), start in BY_C_PLOTS.items():
        if spots := ran(_cc(s.side, kind, s.cs)):
            name, what, ylabel = AXES[measure]
            xs = [math.log2(c) for *_, c in spots]
            series = _curves(summ, spots, xs, measure)
            if measure == "time_over_sqrt_cn":
                ref = [summ.get((*spot, ALGORITHMS[0]), {}) for spot in spots]
                lb = [r["lower_bound"] / r["sqrt_cn"] if r.get("lower_bound") else None for r in ref]
                series.append(Series("lower bound / √(cn)", xs, lb, paper=True, colour=GREY))
            title = f"{start.format(side=side)}, d = c: {what}"
            plot(f"{name}_vs_c_{kind}.png", series, title, ("log₂ c  (c = 1, 2, 4, …)", ylabel), BAND_NOTE)
    for c in s.n_cs:
        if spots := ran((x, "random", c, c) for x in s.sides):
            series = _curves(summ, spots, [float(x * x) for x, *_ in spots], "time_over_sqrt_cn")
            title = f"random sets, c = d = {c}: time / √(cn) against n"
            meshes = "meshes " + ", ".join(f"{x}×{x}" for x, *_ in spots)
            plot(f"time_vs_n_c{c}.png", series, title, ("n (nodes)", "completion time / √(cn)"), meshes)
    if spots := ran((s.side, "worst", d, s.d_c) for d in s.ds):
        xs = [float(d) for _, _, d, _ in spots]
        sq = Series("√(cn)", xs, [math.sqrt(s.d_c * s.side * s.side)] * len(xs), paper=True, colour=GREY)
        title = f"worst-case sets, {side}, c = {s.d_c}: time against d"
        axes = ("d (destinations per message)", "completion time (steps)")
        plot("time_vs_d_worst.png", [*_curves(summ, spots, xs, "time", band=False), sq], title, axes)
    return plots


#: Each results table's first column, by the table's label.
ROW_NAME = {"c": "c = {c}", "n": "{side}×{side} (n = {n}), c = {c}", "d": "d = {d}"}


def _time_cell(r: Mapping[str, Any]) -> str:
    """A results cell: time in steps and time/√(cn), or "incomplete"."""
    return "incomplete" if r.get("time") is None else f"{r['time']:.0f} ({r['time_over_sqrt_cn']:.2f})"


def _table(summ: Summary, spots: Sequence[Spot], label: str) -> str:
    """One results table: a row per spot, with each algorithm's time (÷√(cn)) and peak buffer."""
    header = [label, "√(cn)", "lower bound"]
    header += [f"{a} time (÷√(cn))" for a in ALGORITHMS] + [f"{a} peak" for a in ALGORITHMS]
    rows: list[list[object]] = []
    for side, kind, d, c in spots:
        if (base := summ.get((side, kind, d, c, ALGORITHMS[0]))) is None:
            continue
        runs = [summ.get((side, kind, d, c, a), {}) for a in ALGORITHMS]
        name = ROW_NAME[label].format(side=side, n=side * side, c=c, d=d)
        peaks = [fmt(r.get("peak_buffer"), 1) for r in runs]
        rows.append(
            [name, fmt(base["sqrt_cn"], 1), fmt(base["lower_bound"], 0), *map(_time_cell, runs), *peaks]
        )
    return markdown_table(header, rows, ["l"] + ["r"] * (len(header) - 1))


def build_report(
    rows: Sequence[Mapping[str, Any]],
    summ: Summary,
    s: Setup,
    claims: Sequence[Claim],
    plots: Sequence[Path],
    out: Path,
    meta: Mapping[str, Any],
) -> str:
    """report.md's text."""
    incomplete = [r for r in rows if r["time"] is None or r["incomplete"]]
    bad = [r for r in rows if r["duplicates"] or r["dropped"]]
    status = (
        "every run delivered every message exactly once"
        if not incomplete and not bad
        else f"{len(incomplete)} run(s) incomplete, {len(bad)} with duplicates or drops — see points.csv"
    )
    notes = observations(summ, s)
    side = f"{s.side}×{s.side}"
    tables = (
        (f"Random sets, {side} mesh, d = c", _cc(s.side, "random", s.cs), "c"),
        ("Random sets against n (d = c)", [(x, "random", c, c) for c in s.n_cs for x in s.sides], "n"),
        (f"Theorem 1's worst-case sets, {side} mesh, d = c", _cc(s.side, "worst", s.cs), "c"),
        (
            f"Worst-case sets, {side} mesh, c = {s.d_c}, against d",
            [(s.side, "worst", d, s.d_c) for d in s.ds],
            "d",
        ),
    )
    run = {"runs": len(rows), "seed_list": ", ".join(map(str, meta["seeds"])), "status": status}
    longest = max((r["wall_s"] for r in rows), default=0)
    parts = [
        _text("head", meta, run, CRITERIA, longest=longest) + "\n",
        *(f"- **{cl.verdict}** — {cl.claim}. *Our runs:* {cl.evidence}." for cl in claims),
        "",
        *(
            ["### Other observations (not claims of the paper)\n", *(f"- {n}" for n in notes), ""]
            if notes
            else []
        ),
        _text("results") + "\n",
        *(text for title, spots, label in tables for text in (f"### {title}\n", _table(summ, spots, label))),
        "## Plots\n",
        *(f"![{p.stem}]({p.relative_to(out).as_posix()})\n" for p in plots),
        _text("untested") + "\n",
    ]
    return "\n".join(parts)


# -- command -----------------------------------------------------------------------------------------
USES = ("jobs", "quick")
OPTIONS = (
    framework.runtime_option(
        "engines",
        ("engines", "in-process", "model"),
        "'engines' (default): the nodes' engines in one lockstep loop, records equal to in-process; "
        "'model' is faster on nothing here and keeps no buffer statistics",
    ),
)


def _write(out: Path, rows: Sequence[Mapping[str, Any]], summ: Summary) -> None:
    """points.csv (one row per run) and summary.csv (one row per point, over the seeds)."""
    framework.write_tidy(out / "points.csv", POINT_FIELDS, rows)
    stats = [m + suffix for m in MEASURES for suffix in SPREAD]
    write_csv(
        out / "summary.csv",
        ["side", "kind", "d", "c", "algorithm", "runs", "complete", *stats],
        ([*k, v["runs"], v["complete"], *(v[f] for f in stats)] for k, v in sorted(summ.items())),
    )


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every point; write points.csv, summary.csv and reproduction.json."""
    s = QUICK if args.quick else FULL
    seeds = [args.seed + i for i in range(args.repeat)]
    todo = points(s, seeds, ALGORITHMS)
    watch = framework.Stopwatch()
    # run_pool keeps the task order: the rows come out sorted like the points
    rows = framework.run_pool(partial(run_point, runtime=args.runtime), todo, args.jobs, ctx.progress, _cost)
    _write(out, rows, summarise(rows))
    facts = framework.run_facts(
        framework.command_line(NAME, args), watch, repeat=args.repeat, seeds=seeds, runtime=args.runtime
    )
    framework.write_json(out / "reproduction.json", {**facts, "jobs": args.jobs, "setup": asdict(s)})


def _read(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return json.loads((out / "reproduction.json").read_text()), framework.read_tidy(out / "points.csv")


def run(args: Any, ctx: Context) -> int:
    """Run (unless ``--report-only``), then rebuild claims, plots and report.md from points.csv."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    meta, rows = framework.read_report_only("herley", out, _read)
    s = setup_from(meta["setup"])
    summ = summarise(rows)
    claims = check_claims(summ, s)
    plots = write_plots(out, summ, s)
    report = build_report(rows, summ, s, claims, plots, out, meta)
    said = (
        f"herley: {len(rows)} runs in {meta['wall_s']:.1f} s; wrote {out / 'report.md'}, {len(plots)} plots"
    )
    lines = [f"{cl.verdict}: {cl.claim}" for cl in claims]
    complete = all(r["time"] is not None and not r["incomplete"] for r in rows)
    return framework.finish(ctx, out, report, said, lines, complete)
