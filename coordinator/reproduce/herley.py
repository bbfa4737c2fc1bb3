"""Herley, Pietracaprina & Pucci: mcast(n, d, c) — completion time against √(cn), buffers against c.

Sweeps c, n and d on random sets and on Theorem 1's worst-case sets and checks Theorems 1–3 and §1's
claims on the runs; report.md states the setting, our criteria and where we simplify the paper.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.analysis import verdicts
from coordinator.analysis.verdicts import Claim, Verdict, by_points
from coordinator.output.report import Series, algorithm_colour, fmt, fmt_delta, markdown_table, plot_series
from coordinator.output.results import write_csv
from coordinator.reproduce import framework
from coordinator.reproduce.framework import Context

__all__ = ["ALGORITHMS", "Setup", "check_claims", "exponent", "summarise"]

NAME = "herley"
SUMMARY = "Herley, Pietracaprina & Pucci: mcast(n,d,c) time/√(cn) and peak buffers vs c, n, d"
DEFAULT_REPEAT = 2

ALGORITHMS = ("replicate", "tree", "herley-tiles", "herley-random")
COLOURS: Mapping[str, str] = {a: algorithm_colour(a) for a in ALGORITHMS}
"""One colour per algorithm, the same as in every other plot (``output.palette``)."""
OPTIMAL = ("herley-tiles", "herley-random")
#: Our criteria for the paper's words (stated in the report).
FLAT = 0.15  # |exponent of time/√(cn)| at most this: no trend (time ∝ √(cn))
GROWS = 0.15  # exponent of time/√(cn) at least this: grows faster than √(cn)
CONSTANT_BUFFER = 0.25  # exponent of the peak buffer against c at most this: O(1)
LINEAR_BUFFER = 1.15  # exponent of the peak buffer against c at most this: O(c)
WORST_BOUND = 0.2  # the worst-case sets' lower bound / √(cn) at least this for every c: Ω(√(cn))
MIN_C_FOR_SLOPES = 4  # below, the diameter (≈ 2√n) exceeds √(cn) and dominates every algorithm
CRITERIA = {"flat": FLAT, "grows": GROWS, "constant": CONSTANT_BUFFER, "linear": LINEAR_BUFFER}
PRIM = 3  # steps per √m charged for one sort or prefix on an m-node (sub)mesh (Proposition 1's O(√n))
R = 2  # herley-random's migration cap r (coordinator.workloads.mcast.DEFAULT_R)
CRITERIA |= {"bound": WORST_BOUND, "min_c": MIN_C_FOR_SLOPES, "prim": PRIM, "r": R}
#: The paper's results no run here checks, and why (the texts are the report's).
UNCHECKED = {"lemma 1": Verdict.UNTESTABLE, "theorem 4": Verdict.NOT_REPRODUCIBLE}
THEOREM = {"herley-tiles": "Theorem 2", "herley-random": "Theorem 3"}
#: Claims over the sweeps: (algorithm, report key, measure, the largest exponent of a step's rise).
CHECKS = [(a, key, f"{key}_over_sqrt_cn", FLAT) for key in ("time", "charged") for a in THEOREM]
CHECKS += [("herley-tiles", "tiles buffer", "peak_buffer", LINEAR_BUFFER)]
CHECKS += [("herley-random", "random buffer", "peak_buffer", CONSTANT_BUFFER)]


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
    keys.update((s.side, kind, c, c) for c in s.cs for kind in ("random", "worst"))
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
_exp_text = partial(fmt_delta, paper=0.0)  # a fitted exponent, signed ("+0.24", "−0.18")


# -- running ---------------------------------------------------------------------------------------
#: points.csv's measurements of a run, in column order: the set's size, time, buffers and traffic, losses.
STAT_COLUMNS = (
    *("n", "actual_d", "actual_c", "messages", "deliveries"),
    *("time", "sqrt_cn", "time_over_sqrt_cn", "lower_bound"),
    *("peak_buffer", "peak_held", "busiest_mean_occupancy", "busiest_copies", "traffic"),
    *("missing", "duplicates", "dropped"),
)
#: The columns named apart from their McastStats field.
_STAT_FIELD = {"actual_d": "d", "actual_c": "c", "busiest_mean_occupancy": "mean_occupancy"}
POINT_FIELDS = (*(f.name for f in fields(Point)), *STAT_COLUMNS, "steps", "incomplete", "wall_s")


def run_point(p: Point, runtime: str = "engines", max_steps: int = 50_000) -> dict[str, Any]:
    """Build the message set and plan, run it, and return one row of ``points.csv``."""
    import trio

    from coordinator.experiments.run import emulate
    from coordinator.runtimes.records import RunSettings
    from coordinator.workloads.mcast import mcast_plan, mcast_stats, message_set
    from node.topology import Topology

    mset = message_set(Topology("mesh", p.side, p.side), p.kind, p.d, p.c, p.seed)
    plan = mcast_plan(mset, p.algorithm)
    s = RunSettings(
        contention="shared", port_model="all-port", max_steps=max_steps, runtime=runtime, wall_budget=7200
    )
    t0 = time.perf_counter()
    raw = trio.run(emulate, plan, s, None)
    wall = time.perf_counter() - t0
    st = mcast_stats(plan, raw, mset)
    stats = st.as_dict() | {col: getattr(st, field) for col, field in _STAT_FIELD.items()}
    stats = {k: round(v, 4) if isinstance(v := stats[k], float) else v for k in STAT_COLUMNS}  # points.csv's
    run = {"steps": raw.last_step, "incomplete": "; ".join(raw.incomplete), "wall_s": round(wall, 3)}
    return {**asdict(p), **stats, **run}


# -- summaries -------------------------------------------------------------------------------------
Key = tuple[int, str, int, int, str]  # side, kind, d, c, algorithm
Spot = tuple[int, str, int, int]  # side, kind, d, c: one message set's parameters
Summary = Mapping[Key, Mapping[str, Any]]
MEASURES = (
    *("time", "time_over_sqrt_cn", "lower_bound", "sqrt_cn"),
    *("peak_buffer", "busiest_mean_occupancy", "busiest_copies", "traffic", "actual_c"),
    "charged_over_sqrt_cn",
)
SPREAD = ("", "_min", "_max")  # summary.csv's suffixes: mean, min and max over the seeds


def primitive_steps(alg: str, n: int, d: int, c: int) -> float:
    """The steps the paper's model charges the sorts and prefixes our coordinator computes, PRIM·√m each
    on m nodes, counted per rule as report.md's *Charged time* states (phases as ``random_params`` plans)."""
    if alg == "herley-tiles":
        return PRIM * math.sqrt(n / 4 ** int(math.log(c, 4) + 1e-9)) + int(math.log2(d))
    ratio = math.ceil(c * math.log2(n) ** 2 / n)
    phases = int(math.log(ratio, 16) + 1e-9) + 1 if ratio > 1 else 1
    tiles = [max(1, min(c // 16**i, n // 16)) for i in range(phases)]
    each = [5 * PRIM * math.sqrt(n) + ci * R * (1 + 5 * PRIM) * math.sqrt(n / ci) for ci in tiles]
    return sum(each) if alg == "herley-random" else 0.0


def charged(r: Mapping[str, Any]) -> float | None:
    """A run's time as the paper counts it: plus its primitives and a step per copy the busiest node made."""
    if r["time"] is None or r["busiest_copies"] is None:
        return None
    prims = primitive_steps(r["algorithm"], r["side"] ** 2, r["d"], r["c"])
    return (r["time"] + prims + r["busiest_copies"]) / r["sqrt_cn"]


def _summary(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One point's runs over the seeds: each measure's mean, min and max (None unless every run has it)."""
    rs = [{**r, "charged_over_sqrt_cn": charged(r)} for r in rs]
    timed = [r for r in rs if r["time"] is not None]
    under = sum(1 for r in timed if r["lower_bound"] is not None and r["time"] < r["lower_bound"])
    rec: dict[str, Any] = {"runs": len(rs), "complete": len(timed) == len(rs), "under_bound": under}
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
def _doublings(xs: Sequence[int], ys: Sequence[float | None], lim: float) -> tuple[int, int]:
    """Of the steps x→x′ between points with y known: how many have y′/y ≤ (x′/x)^lim, and how many."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y]
    steps = [y2 / y1 <= (x2 / x1) ** lim for (x1, y1), (x2, y2) in itertools.pairwise(pts)]
    return sum(steps), len(steps)


def _round(e: float | None) -> float | None:
    return None if e is None else round(e, 3)


def _span(vals: Sequence[float], digits: int = 2) -> str:
    """``lo–hi`` of some numbers."""
    return f"{min(vals):.{digits}f}–{max(vals):.{digits}f}" if vals else "—"


def _by_alg(texts: Iterable[tuple[str, str]]) -> str:
    """```alg` text, ...`` for (algorithm, text) pairs."""
    return ", ".join(f"`{a}` {text}" for a, text in texts)


def check_claims(summ: Summary, s: Setup) -> list[Claim]:
    """Each claim of the paper, judged by counts over points on the criteria stated in the report."""
    n_of = s.side * s.side
    ran = [c for c in s.cs if (s.side, "random", c, c, "replicate") in summ]
    cs = big if len(big := [c for c in ran if c >= MIN_C_FOR_SLOPES]) >= 2 else ran  # a quick run: all c
    regime = [c for c in cs if c <= n_of // 16]  # Theorem 3's c ≤ n/16 (above, the paper circulates all)
    base = {"n": n_of, "c0": cs[0], "c1": cs[-1], **CRITERIA}
    claims: list[Claim] = []

    def add(key: str, verdict: Verdict, num: Mapping[str, Any], *parts: Mapping[str, Any], **f: Any) -> None:
        """One claim (source and text from the report's ``claim KEY``), its verdict, evidence and numbers."""
        source, text = _text(f"claim {key}", base, *parts, f).split(": ", 1)
        claims.append(Claim(source, text, verdict, _text(f"evidence {key}", base, num, *parts, f), num))

    def sweeps(alg: str, measure: str, lim: float, at: Sequence[int]) -> tuple[int, int]:
        """Steps where ``measure`` rises at most (x′/x)^lim: c sweeps (c in ``at``), n sweeps (in regime)."""
        got = [_doublings(at, _col(summ, _cc(s.side, k, at), alg, measure), lim) for k in ("random", "worst")]
        for c in s.n_cs:
            spots = [(x, "random", c, c) for x in s.sides if alg != "herley-random" or c <= x * x // 16]
            got.append(_doublings([x * x for x, *_ in spots], _col(summ, spots, alg, measure), lim))
        return sum(h for h, _ in got), sum(p for _, p in got)

    def rnd(alg: str, measure: str = "time_over_sqrt_cn", at: Sequence[int] = cs) -> list[Any]:
        return _col(summ, _cc(s.side, "random", at), alg, measure)

    def c_exp(alg: str, measure: str = "time_over_sqrt_cn", at: Sequence[int] = cs) -> float | None:
        return exponent([float(c) for c in at], rnd(alg, measure, at))

    # Theorem 1 is a lower bound: runs can only fail to contradict it.
    worst = [r for k, r in summ.items() if k[0] == s.side and k[1] == "worst"]
    lb = [r["lower_bound"] / r["sqrt_cn"] for r in worst if r["lower_bound"] is not None]
    runs, under = sum(r["runs"] for r in worst), sum(r["under_bound"] for r in worst)
    num = {"hits": runs - under, "points": runs, "bound_min": round(min(lb), 3)}
    took = _span([r["time_over_sqrt_cn"] for r in worst if r["time_over_sqrt_cn"] is not None])
    verdict = by_points(runs - under, runs, size_ok=min(lb) >= WORST_BOUND)
    add("lower bound", verdict, num, ratio=_span(lb), took=took, c_lo=min(s.cs), c_hi=max(s.cs))
    # Theorems 2 and 3: O(√(cn)) time (copies and primitives free, then charged) and their buffers.
    for alg, key, measure, lim in CHECKS:
        at = cs if alg == "herley-tiles" else regime
        (hits, pts), e = sweeps(alg, measure, lim, at), c_exp(alg, measure, at)
        vals = rnd(alg, measure)
        past = ", ".join(f"{fmt(v, 1)} at c = {c}" for c, v in zip(cs, vals, strict=True) if c not in at)
        info: dict[str, Any] = {"span": _span([v for v in rnd(alg, measure, at) if v]), "e": _exp_text(e)}
        info |= {"first": fmt(vals[0], 1), "last": fmt(vals[len(at) - 1], 1), "a0": at[0], "a1": at[-1]}
        info |= {"beyond": _text("beyond", reached=past) if past else "", "theorem": THEOREM[alg], "alg": alg}
        add(key, by_points(hits, pts), {"hits": hits, "points": pts, "exponent_c": _round(e)}, info)
    # Replication at the source is not optimal: its time/√(cn) grows with c.
    er, rr = c_exp("replicate"), rnd("replicate")
    flat, pts = _doublings(cs, rr, 0.0)
    hits = pts - flat  # the steps where it rose
    ends = {"first": fmt(rr[0]), "last": fmt(rr[-1]), "e": _exp_text(er)}
    optimal = _by_alg((a, _exp_text(c_exp(a))) for a in OPTIMAL)
    num = {"hits": hits, "points": pts, "exponent_c": _round(er)}
    add("replicate", by_points(hits, pts, size_ok=er is not None and er >= GROWS), num, ends, optimal=optimal)
    # §1.2: the optimal rules stay within their random-set bound for every d ≤ c; then independence of d.
    ds = [d for d in s.ds if (s.side, "worst", d, s.d_c, "replicate") in summ]
    by_d, dd = [(s.side, "worst", d, s.d_c) for d in ds], {"c": s.d_c, "d0": ds[0], "d1": ds[-1]}
    bound = {a: max(v for v in rnd(a) if v) for a in OPTIMAL}
    ratios = {a: [v or math.inf for v in _col(summ, by_d, a, "time_over_sqrt_cn")] for a in OPTIMAL}
    hits = sum(v <= 1.1 * bound[a] for a in OPTIMAL for v in ratios[a])
    num = {"hits": hits, "points": len(OPTIMAL) * len(ds)}
    within = _by_alg((a, f"≤ {max(ratios[a]):.2f} vs {bound[a]:.2f} × √(cn)") for a in OPTIMAL)
    add("d", by_points(hits, num["points"]), num, dd, within=within)
    e_d = {a: exponent(ds, _col(summ, by_d, a, "time")) for a in ALGORITHMS}  # time against d
    steps = [_doublings(ds, _col(summ, by_d, a, "time"), 0.5) for a in OPTIMAL]  # vs √(dcn)'s √d
    hits, pts = map(sum, zip(*steps, strict=True))
    num = {"hits": hits, "points": pts} | {f"exponent_d {a}": _round(e_d[a]) for a in OPTIMAL}
    flat = all(e is not None and abs(e) <= FLAT for e in map(e_d.get, OPTIMAL))
    eds = _by_alg((a, _exp_text(e)) for a, e in e_d.items())
    add("independent", by_points(hits, pts, size_ok=flat), num, dd, e_d=eds)
    for key, verdict in UNCHECKED.items():  # what the runs cannot check
        add(key, verdict, {})
    return claims


def observations(summ: Summary, s: Setup) -> list[str]:
    """What else the data shows, computed from it: constant factors, trees, worst vs random, traffic."""
    out: list[str] = []
    cs = [c for c in s.cs if c >= MIN_C_FOR_SLOPES]
    random_, worst = _cc(s.side, "random", cs), _cc(s.side, "worst", cs)
    times = partial(_col, summ, measure="time")
    if rt := _ratios(times(random_, "herley-random"), times(random_, "herley-tiles")):
        out.append(_text("random vs tiles", span=_span(rt, 1), min_c=MIN_C_FOR_SLOPES))
    tree = _col(summ, random_, "tree", "time_over_sqrt_cn")
    tr = [r for r in tree if r is not None]
    vs = _ratios(times(random_, "tree"), times(random_, "herley-tiles"))
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
    """A results cell: time in steps, time/√(cn) and the charged time/√(cn), or "incomplete"."""
    if r.get("time") is None:
        return "incomplete"
    return f"{r['time']:.0f} ({r['time_over_sqrt_cn']:.2f}; {r['charged_over_sqrt_cn']:.1f})"


def _table(summ: Summary, spots: Sequence[Spot], label: str) -> str:
    """One results table: a row per spot, with each algorithm's time (÷√(cn)) and peak buffer."""
    header = [label, "√(cn)", "lower bound"]
    header += [f"{a} time (÷√(cn); charged)" for a in ALGORITHMS] + [f"{a} peak" for a in ALGORITHMS]
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
    status = f"{len(incomplete)} run(s) incomplete, {len(bad)} with duplicates or drops — see points.csv"
    status = status if incomplete or bad else "every run delivered every message exactly once"
    notes = observations(summ, s)
    side, by_d = f"{s.side}×{s.side}", [(s.side, "worst", d, s.d_c) for d in s.ds]
    tables = (
        (f"Random sets, {side} mesh, d = c", _cc(s.side, "random", s.cs), "c"),
        ("Random sets against n (d = c)", [(x, "random", c, c) for c in s.n_cs for x in s.sides], "n"),
        (f"Theorem 1's worst-case sets, {side} mesh, d = c", _cc(s.side, "worst", s.cs), "c"),
        (f"Worst-case sets, {side} mesh, c = {s.d_c}, against d", by_d, "d"),
    )
    run = {"runs": len(rows), "seed_list": ", ".join(map(str, meta["seeds"])), "status": status}
    longest = max((r["wall_s"] for r in rows), default=0)
    wall: dict[int, float] = defaultdict(float)  # one seed's run time of the n sweep, per mesh side
    for r in rows:
        wall[r["side"]] += r["wall_s"] / meta["repeat"] if r["kind"] == "random" and r["c"] in s.n_cs else 0
    top, below = (wall[x] for x in sorted(wall)[-1:-3:-1])
    cost = {"seed_s": sum(r["wall_s"] for r in rows) / meta["repeat"], "top": max(wall), "top_s": top}
    cost |= {"next": 2 * max(wall), "next_s": top * top / below, "min_repeat": verdicts.MIN_REPEAT}
    cost |= {"ten_min": cost["seed_s"] * verdicts.MIN_REPEAT / 60, "next_min": cost["next_s"] / 60}
    parts = [
        _text("head", meta, run, CRITERIA, longest=longest) + "\n",
        _text("thin", meta, cost, CRITERIA, n=max(wall) ** 2) + "\n",
        "## The paper's claims, checked against our runs\n",
        verdicts.legend(meta["repeat"]) + "\n",
        _text("criteria", CRITERIA) + "\n",
        *(c.markdown() for c in claims),
        "",
        *(["### Other observations (not claims of the paper)\n"] if notes else []),
        *(f"- {n}" for n in notes),
        *([""] if notes else []),
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
    said = f"herley: {len(rows)} runs in {meta['wall_s']:.1f} s; wrote {out}/report.md, {len(plots)} plots"
    framework.write_tidy(out / "claims.csv", verdicts.COLUMNS, (c.row() for c in claims))
    if warning := verdicts.repeat_warning(meta["repeat"]):
        ctx.warn(f"herley: {warning}")
    lines = [f"{c.verdict}: {c.source}: {c.text}" for c in claims]
    complete = all(r["time"] is not None and not r["incomplete"] for r in rows)
    return framework.finish(ctx, out, report, said, lines, complete)
