"""Seed 002 (Herley, Pietracaprina, Pucci): mcast(n, d, c) — completion time against √(cn), buffers against c.

The paper proves bounds, not tables: Ω(√(cn)) steps for some mcast(n, d, c) set (Theorem 1),
O(√(cn)) with O(c)-packet buffers (Theorem 2, ``herley-tiles``) and with constant buffers
(Theorem 3, randomized, ``herley-random``), and says that replicating every message into unicast
copies at its source (``replicate``) is not optimal. One tree multicast per message (``tree``,
VH trees) runs beside them. We sweep c and n and d, and check each claim on our runs:

* random sets (d = c, so every node receives close to c) on a 16×16 mesh for c = 1 … 64, and on
  8×8, 16×16 and 32×32 meshes for c = 4 and c = 16;
* Theorem 1's worst-case sets on the 16×16 mesh for the same c (d = c), and for c = 16 with
  d = 1 … 16.

Every run: shared contention, all-port (the paper's machine: every link carries one packet per
direction per step), lockstep, unbounded queues so that the peak occupancy shows what each
schedule needs. A flat time/√(cn) against c and n is the paper's claim for the optimal
algorithms. Output in ``--out``: ``report.md``, ``plots/*.png``, ``points.csv`` (one row per run),
``summary.csv`` (means over the ``--repeat`` seeds) and ``reproduction.json``.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.output.report import Series, fmt, markdown_table, plot_series
from coordinator.output.results import write_csv
from coordinator.reproduce.framework import (
    Context,
    Option,
    Stopwatch,
    command_line,
    finish,
    read_report_only,
    read_tidy,
    run_facts,
    run_pool,
    write_json,
    write_tidy,
)

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


def setup(quick: bool) -> Setup:
    return QUICK if quick else FULL


def setup_from(d: Mapping[str, Any]) -> Setup:
    """A :class:`Setup` from its JSON form in reproduction.json."""
    return Setup(
        int(d["side"]), tuple(d["cs"]), tuple(d["sides"]), tuple(d["n_cs"]), int(d["d_c"]), tuple(d["ds"])
    )


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


# -- running ---------------------------------------------------------------------------------------
def run_point(p: Point, runtime: str = "engines", max_steps: int = 50_000) -> dict[str, Any]:
    """Build the message set and plan, run it, and return one row of ``points.csv``."""
    import trio

    from coordinator.experiments.run import emulate
    from coordinator.runtimes.engines import run_engines
    from coordinator.runtimes.records import RunSettings
    from coordinator.workloads.mcast import mcast_plan, mcast_stats, message_set
    from node.topology import Topology

    topo = Topology("mesh", p.side, p.side)
    mset = message_set(topo, p.kind, p.d, p.c, p.seed)
    plan = mcast_plan(mset, p.algorithm)
    rt = "in-process" if runtime == "engines" else runtime
    s = RunSettings(
        contention="shared", port_model="all-port", max_steps=max_steps, runtime=rt, wall_budget=7200
    )
    t0 = time.perf_counter()
    raw = run_engines(plan, s) if runtime == "engines" else trio.run(emulate, plan, s, None)
    wall = time.perf_counter() - t0
    st = mcast_stats(plan, raw, mset)
    return {
        **asdict(p),
        "n": st.n,
        "actual_d": st.d,
        "actual_c": st.c,
        "messages": st.messages,
        "deliveries": st.deliveries,
        "time": st.time,
        "sqrt_cn": round(st.sqrt_cn, 4),
        "time_over_sqrt_cn": None if st.time_ratio is None else round(st.time_ratio, 4),
        "lower_bound": st.lower_bound,
        "peak_buffer": st.peak_buffer,
        "peak_held": st.peak_held,
        "busiest_mean_occupancy": None if st.mean_occupancy is None else round(st.mean_occupancy, 4),
        "traffic": st.traffic,
        "missing": st.missing,
        "duplicates": st.duplicates,
        "dropped": st.dropped,
        "steps": raw.last_step,
        "incomplete": "; ".join(raw.incomplete),
        "wall_s": round(wall, 3),
    }


def _row_key(r: Mapping[str, Any]) -> tuple[Any, ...]:
    return (r["side"], r["kind"], r["d"], r["c"], r["seed"], r["algorithm"])


POINT_FIELDS = (
    "side",
    "kind",
    "d",
    "c",
    "seed",
    "algorithm",
    "n",
    "actual_d",
    "actual_c",
    "messages",
    "deliveries",
    "time",
    "sqrt_cn",
    "time_over_sqrt_cn",
    "lower_bound",
    "peak_buffer",
    "peak_held",
    "busiest_mean_occupancy",
    "traffic",
    "missing",
    "duplicates",
    "dropped",
    "steps",
    "incomplete",
    "wall_s",
)


def read_points(path: Path) -> list[dict[str, Any]]:
    """``points.csv`` back into rows (for ``--report-only``)."""
    return read_tidy(path)


# -- summaries -------------------------------------------------------------------------------------
Key = tuple[int, str, int, int, str]  # side, kind, d, c, algorithm
MEASURES = (
    "time",
    "time_over_sqrt_cn",
    "lower_bound",
    "sqrt_cn",
    "peak_buffer",
    "busiest_mean_occupancy",
    "traffic",
    "actual_c",
)


def summarise(rows: Iterable[Mapping[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Per (side, kind, d, c, algorithm): mean, min and max over the seeds of each measure."""
    groups: dict[Key, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["side"], r["kind"], r["d"], r["c"], r["algorithm"])].append(r)
    out: dict[Key, dict[str, Any]] = {}
    for key, rs in groups.items():
        rec: dict[str, Any] = {
            "runs": len(rs),
            "complete": all(r["time"] is not None for r in rs),
            "under_bound": sum(
                1
                for r in rs
                if r["time"] is not None and r["lower_bound"] is not None and r["time"] < r["lower_bound"]
            ),
        }
        for m in MEASURES:
            vals = [float(r[m]) for r in rs if r[m] is not None]
            complete = len(vals) == len(rs)
            rec[m] = statistics.fmean(vals) if vals and complete else None
            rec[m + "_min"] = min(vals) if vals and complete else None
            rec[m + "_max"] = max(vals) if vals and complete else None
        out[key] = rec
    return out


def exponent(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log y against log x (y ∝ x^slope); None with fewer than two points."""
    pts = [
        (math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if y is not None and y > 0 and x > 0
    ]
    if len({p[0] for p in pts}) < 2:
        return None
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


@dataclass(frozen=True, slots=True)
class Claim:
    """One of the paper's claims, our verdict and the numbers behind it."""

    claim: str
    verdict: str  # "supported", "not supported", "partly supported", "not tested"
    evidence: str


def _series(
    summ: Mapping[Key, Mapping[str, Any]], side: int, kind: str, alg: str, cs: Sequence[int], measure: str
) -> list[float | None]:
    return [summ.get((side, kind, c, c, alg), {}).get(measure) for c in cs]


def _exp_text(e: float | None) -> str:
    return "—" if e is None else f"{e:+.2f}"


def check_claims(summ: Mapping[Key, Mapping[str, Any]], s: Setup) -> list[Claim]:
    """Each claim of the paper, judged on our data by the criteria stated in the report."""
    claims: list[Claim] = []
    cs = [c for c in s.cs if c >= MIN_C_FOR_SLOPES and (s.side, "random", c, c, "replicate") in summ]
    if len(cs) < 2:
        cs = [c for c in s.cs if (s.side, "random", c, c, "replicate") in summ]
    n_of = s.side * s.side

    def c_exp(
        alg: str, kind: str = "random", measure: str = "time_over_sqrt_cn", at: Sequence[int] = cs
    ) -> float | None:
        return exponent([float(c) for c in at], _series(summ, s.side, kind, alg, at, measure))

    def n_exp(alg: str, c: int) -> float | None:
        sides = [x for x in s.sides if (x, "random", c, c, alg) in summ]
        ys = [summ[(x, "random", c, c, alg)]["time_over_sqrt_cn"] for x in sides]
        return exponent([float(x * x) for x in sides], ys)

    # Theorem 1: a lower bound of Ω(√(cn)) on the worst-case sets.
    worst = [(c, a) for c in s.cs for a in ALGORITHMS if (s.side, "worst", c, c, a) in summ]
    if worst:
        lbs = {c: summ[(s.side, "worst", c, c, ALGORITHMS[0])] for c, _ in worst}
        lb_ratio = [r["lower_bound"] / r["sqrt_cn"] for r in lbs.values() if r["lower_bound"] is not None]
        ratios = [summ[(s.side, "worst", c, c, a)]["time_over_sqrt_cn"] for c, a in worst]
        known = [r for r in ratios if r is not None]
        below = [(c, a) for c, a in worst if summ[(s.side, "worst", c, c, a)].get("under_bound", 0)]
        claims.append(
            Claim(
                "Theorem 1: some mcast(n, d, c) set needs Ω(√(cn)) steps (the corner square A of side "
                "⌊√(n/2c)⌋ must take in c·|A| messages through its boundary)",
                "supported" if known and not below and min(lb_ratio) >= WORST_BOUND else "not supported",
                f"on our worst-case sets ({n_of} nodes, c = {min(lbs)}…{max(lbs)}) the lower bound "
                "(boundary crossings, or the farthest distance) stays at "
                f"{min(lb_ratio):.2f}–{max(lb_ratio):.2f} × √(cn) (criterion: at least {WORST_BOUND:.2f} "
                f"for every c), and the algorithms took {min(known):.2f}–{max(known):.2f} × √(cn)",
            )
        )
    # Theorems 2 and 3: O(√(cn)) time, against c and against n.
    for alg, thm in (("herley-tiles", "Theorem 2"), ("herley-random", "Theorem 3")):
        ec = c_exp(alg)
        ens = {c: n_exp(alg, c) for c in s.n_cs}
        ratios = [r for r in _series(summ, s.side, "random", alg, cs, "time_over_sqrt_cn") if r is not None]
        ok_c = ec is not None and ec <= FLAT
        ok_n = all(e is not None and e <= FLAT for e in ens.values())
        verdict = "supported" if ok_c and ok_n else ("partly supported" if ok_c or ok_n else "not supported")
        n_text = "; ".join(f"c = {c}: {_exp_text(e)}" for c, e in ens.items())
        claims.append(
            Claim(
                f"{thm}: `{alg}` routes any mcast(n, d, c) set with d ≤ c in O(√(cn)) time",
                verdict,
                f"time/√(cn) on random sets was {min(ratios):.2f}–{max(ratios):.2f} for c = "
                f"{cs[0]}…{cs[-1]} ({n_of} nodes); it scales as c^{_exp_text(ec)} and as n^({n_text}) "
                f"(criterion: exponent ≤ {FLAT:+.2f})",
            )
        )
    # Replication at the source is not optimal.
    er = c_exp("replicate")
    rr = _series(summ, s.side, "random", "replicate", cs, "time_over_sqrt_cn")
    claims.append(
        Claim(
            "§1: replicating each message into unicast copies at its source is not optimal (its time "
            "grows faster than √(cn))",
            "supported" if er is not None and er >= GROWS else "not supported",
            f"`replicate`'s time/√(cn) went {fmt(rr[0])} → {fmt(rr[-1])} for c = {cs[0]} → {cs[-1]}: "
            f"c^{_exp_text(er)} (criterion: exponent ≥ {GROWS:+.2f}); the optimal rules' exponents were "
            + ", ".join(f"`{a}` {_exp_text(c_exp(a))}" for a in OPTIMAL),
        )
    )
    # Buffers.
    small = [c for c in cs if c <= max(1, n_of // 16)]
    bt = c_exp("herley-tiles", measure="peak_buffer")
    bt_vals = _series(summ, s.side, "random", "herley-tiles", cs, "peak_buffer")
    over_c = [v / c for v, c in zip(bt_vals, cs, strict=True) if v is not None]
    claims.append(
        Claim(
            "Theorem 2: `herley-tiles` needs buffers of O(c) packets (and, the paper warns, large ones)",
            "supported" if bt is not None and bt <= LINEAR_BUFFER else "not supported",
            f"its peak node occupancy went {fmt(bt_vals[0], 0)} → {fmt(bt_vals[-1], 0)} packets for c = "
            f"{cs[0]} → {cs[-1]}: c^{_exp_text(bt)}, {min(over_c):.2f}–{max(over_c):.2f} × c (criterion: "
            f"exponent ≤ {LINEAR_BUFFER:.2f})"
            if over_c
            else "no buffer measurements",
        )
    )
    at = small if len(small) >= 2 else cs
    br = c_exp("herley-random", measure="peak_buffer", at=at)
    br_vals = _series(summ, s.side, "random", "herley-random", at, "peak_buffer")
    bt_at = _series(summ, s.side, "random", "herley-tiles", at, "peak_buffer")
    past = [c for c in cs if c not in at]
    beyond = (
        "; beyond that regime (c > n/16, where we use n/16 tiles with larger blocks) it reached "
        + ", ".join(
            f"{fmt(v, 1)} at c = {c}"
            for c, v in zip(
                past, _series(summ, s.side, "random", "herley-random", past, "peak_buffer"), strict=True
            )
        )
        if past
        else ""
    )
    claims.append(
        Claim(
            "Theorem 3: `herley-random` needs buffers of O(1) packets (independent of c)",
            "supported" if br is not None and br <= CONSTANT_BUFFER else "not supported",
            f"its peak node occupancy went {fmt(br_vals[0], 0)} → {fmt(br_vals[-1], 0)} packets for c = "
            f"{at[0]} → {at[-1]} (the paper's regime c ≤ n/16 where possible): c^{_exp_text(br)} "
            f"(criterion: exponent ≤ {CONSTANT_BUFFER:.2f}); `herley-tiles` went {fmt(bt_at[0], 0)} → "
            f"{fmt(bt_at[-1], 0)} over the same c" + beyond,
        )
    )
    # Independence of d.
    ds = [d for d in s.ds if (s.side, "worst", d, s.d_c, "replicate") in summ]
    if len(ds) >= 2:

        def d_exp(alg: str) -> float | None:
            ys = [summ[(s.side, "worst", d, s.d_c, alg)]["time"] for d in ds]
            return exponent([float(d) for d in ds], ys)

        eds = {a: d_exp(a) for a in ALGORITHMS}
        worst_ratio = {
            a: max(summ[(s.side, "worst", d, s.d_c, a)]["time_over_sqrt_cn"] or math.inf for d in ds)
            for a in ALGORITHMS
        }
        sweep_ratio = {
            a: max(
                (r for r in _series(summ, s.side, "random", a, cs, "time_over_sqrt_cn") if r),
                default=math.inf,
            )
            for a in ALGORITHMS
        }
        bounded = all(worst_ratio[a] <= 1.1 * sweep_ratio[a] for a in OPTIMAL)
        flat = all(eds[a] is not None and eds[a] <= FLAT for a in OPTIMAL)  # type: ignore[operator]
        claims.append(
            Claim(
                "§1.2: the routing time of an mcast(n, d, c) set is independent of d (O(√(cn)) for "
                "every d ≤ c, where (d, c)-routing needs O(√(dcn)))",
                "supported" if bounded and flat else ("partly supported" if bounded else "not supported"),
                f"worst-case sets, {n_of} nodes, c = {s.d_c}, d = {ds[0]}…{ds[-1]}: the optimal rules "
                "stayed within their random-set bound ("
                + ", ".join(f"`{a}` ≤ {worst_ratio[a]:.2f} vs {sweep_ratio[a]:.2f} × √(cn)" for a in OPTIMAL)
                + "; criterion: at most 10% above), while time ∝ d^e with e = "
                + ", ".join(f"`{a}` {_exp_text(e)}" for a, e in eds.items())
                + f" (no growth would be e ≤ {FLAT:+.2f}; a smaller d also means fewer deliveries, so some "
                "growth is expected of any algorithm)",
            )
        )
    return claims


def observations(summ: Mapping[Key, Mapping[str, Any]], s: Setup) -> list[str]:
    """What else the data shows, computed from it: constant factors, trees, worst vs random, traffic."""
    out: list[str] = []
    cs = [c for c in s.cs if c >= MIN_C_FOR_SLOPES]
    rt = [
        summ[(s.side, "random", c, c, "herley-random")]["time"]
        / summ[(s.side, "random", c, c, "herley-tiles")]["time"]
        for c in cs
        if (s.side, "random", c, c, "herley-random") in summ
        and summ[(s.side, "random", c, c, "herley-random")]["time"]
        and summ[(s.side, "random", c, c, "herley-tiles")]["time"]
    ]
    if rt:
        out.append(
            f"`herley-random` took {min(rt):.1f}–{max(rt):.1f}× as long as `herley-tiles` on the random "
            f"sets (c ≥ {MIN_C_FOR_SLOPES}): its groups tour all c_i tiles one after another, a constant "
            "factor the bound hides; it is the price of its small buffers."
        )
    et = exponent([float(c) for c in cs], _series(summ, s.side, "random", "tree", cs, "time_over_sqrt_cn"))
    tr = [r for r in _series(summ, s.side, "random", "tree", cs, "time_over_sqrt_cn") if r is not None]
    vs = [
        t / h
        for t, h in zip(
            _series(summ, s.side, "random", "tree", cs, "time"),
            _series(summ, s.side, "random", "herley-tiles", cs, "time"),
            strict=True,
        )
        if t and h
    ]
    if tr and vs:
        top = cs[-1]
        peaks = {a: summ.get((s.side, "random", top, top, a), {}).get("peak_buffer") for a in ALGORITHMS}
        peak_text = ", ".join(f"`{a}` {fmt(v, 1)}" for a, v in peaks.items())
        out.append(
            f"One VH tree per message (`tree`, not in the paper) took {min(tr):.2f}–{max(tr):.2f} × "
            f"√(cn) (c^{_exp_text(et)}), {min(vs):.2f}–{max(vs):.2f}× the time of `herley-tiles`; peak "
            f"buffers at c = {top}: {peak_text}."
        )
    pairs = []
    for c in cs:
        for a in ALGORITHMS:
            w, r = summ.get((s.side, "worst", c, c, a)), summ.get((s.side, "random", c, c, a))
            if w and r and w["time"] and r["time"]:
                pairs.append(w["time"] / r["time"])
    if pairs:
        out.append(
            "Theorem 1's worst-case sets were no harder than random sets of the same d and c: "
            f"worst/random time {min(pairs):.2f}–{max(pairs):.2f} over the algorithms and c ≥ "
            f"{MIN_C_FOR_SLOPES}. Their corner bottleneck forces c·|A| / (2·side) ≈ √(cn) / (2√2) steps, "
            "less than what a d = c load costs."
        )
    top = max(s.cs)
    tv = {a: summ.get((s.side, "random", top, top, a), {}).get("traffic") for a in ALGORITHMS}
    if all(v for v in tv.values()):
        out.append(
            f"Link traversals at c = {top}: "
            + ", ".join(f"`{a}` {tv[a]:,.0f}" for a in ALGORITHMS)
            + " — replication at the source moves every copy the whole way."
        )
    return out


# -- report ----------------------------------------------------------------------------------------
def _x_log2(cs: Sequence[int]) -> list[float]:
    return [math.log2(c) for c in cs]


def write_plots(out: Path, summ: Mapping[Key, Mapping[str, Any]], s: Setup) -> list[Path]:
    """The report's plots: time/√(cn) and peak buffers against c, n and d."""
    plots: list[Path] = []
    pdir = out / "plots"

    def by_c(kind: str, measure: str, title: str, ylabel: str, name: str, bound: bool = False) -> None:
        cs = [c for c in s.cs if any((s.side, kind, c, c, a) in summ for a in ALGORITHMS)]
        if not cs:
            return
        series = []
        for a in ALGORITHMS:
            ys = _series(summ, s.side, kind, a, cs, measure)
            lo = _series(summ, s.side, kind, a, cs, measure + "_min")
            hi = _series(summ, s.side, kind, a, cs, measure + "_max")
            series.append(Series(a, _x_log2(cs), ys, colour=COLOURS[a], band=(lo, hi)))
        if bound:
            ref = [summ.get((s.side, kind, c, c, ALGORITHMS[0]), {}) for c in cs]
            lb = [r["lower_bound"] / r["sqrt_cn"] if r.get("lower_bound") else None for r in ref]
            series.append(Series("lower bound / √(cn)", _x_log2(cs), lb, paper=True, colour="#444444"))
        plots.append(
            plot_series(
                pdir / name,
                series,
                title,
                "log₂ c  (c = 1, 2, 4, …)",
                ylabel,
                note="band: min–max over the seeds; all-port, shared contention, unbounded queues",
            )
        )

    n = s.side * s.side
    by_c(
        "random",
        "time_over_sqrt_cn",
        f"random sets, {s.side}×{s.side} mesh, d = c: time / √(cn)",
        "completion time / √(cn)",
        "time_vs_c_random.png",
        bound=True,
    )
    by_c(
        "random",
        "peak_buffer",
        f"random sets, {s.side}×{s.side} mesh, d = c: peak buffer",
        "peak node occupancy (packets)",
        "buffer_vs_c_random.png",
    )
    by_c(
        "worst",
        "time_over_sqrt_cn",
        f"Theorem 1's worst-case sets, {s.side}×{s.side}, d = c: time / √(cn)",
        "completion time / √(cn)",
        "time_vs_c_worst.png",
        bound=True,
    )
    by_c(
        "worst",
        "peak_buffer",
        f"worst-case sets, {s.side}×{s.side}, d = c: peak buffer",
        "peak node occupancy (packets)",
        "buffer_vs_c_worst.png",
    )
    for c in s.n_cs:
        sides = [x for x in s.sides if any((x, "random", c, c, a) in summ for a in ALGORITHMS)]
        if not sides:
            continue
        series = [
            Series(
                a,
                [float(x * x) for x in sides],
                [summ.get((x, "random", c, c, a), {}).get("time_over_sqrt_cn") for x in sides],
                colour=COLOURS[a],
                band=(
                    [summ.get((x, "random", c, c, a), {}).get("time_over_sqrt_cn_min") for x in sides],
                    [summ.get((x, "random", c, c, a), {}).get("time_over_sqrt_cn_max") for x in sides],
                ),
            )
            for a in ALGORITHMS
        ]
        plots.append(
            plot_series(
                pdir / f"time_vs_n_c{c}.png",
                series,
                f"random sets, c = d = {c}: time / √(cn) against n",
                "n (nodes)",
                "completion time / √(cn)",
                note="meshes " + ", ".join(f"{x}×{x}" for x in sides),
            )
        )
    ds = [d for d in s.ds if any((s.side, "worst", d, s.d_c, a) in summ for a in ALGORITHMS)]
    if ds:
        series = [
            Series(
                a,
                [float(d) for d in ds],
                [summ.get((s.side, "worst", d, s.d_c, a), {}).get("time") for d in ds],
                colour=COLOURS[a],
            )
            for a in ALGORITHMS
        ]
        sq = math.sqrt(s.d_c * n)
        series.append(Series("√(cn)", [float(d) for d in ds], [sq] * len(ds), paper=True, colour="#444444"))
        plots.append(
            plot_series(
                pdir / "time_vs_d_worst.png",
                series,
                f"worst-case sets, {s.side}×{s.side}, c = {s.d_c}: time against d",
                "d (destinations per message)",
                "completion time (steps)",
            )
        )
    return plots


def _table(
    summ: Mapping[Key, Mapping[str, Any]], keys: Sequence[tuple[int, str, int, int]], label: str
) -> str:
    header = (
        [label, "√(cn)", "lower bound"]
        + [f"{a} time (÷√(cn))" for a in ALGORITHMS]
        + [f"{a} peak" for a in ALGORITHMS]
    )
    rows = []
    for side, kind, d, c in keys:
        base = summ.get((side, kind, d, c, ALGORITHMS[0]))
        if base is None:
            continue
        name = {"c": f"c = {c}", "n": f"{side}×{side} (n = {side * side}), c = {c}", "d": f"d = {d}"}[
            label[0]
        ]
        row: list[object] = [name, fmt(base["sqrt_cn"], 1), fmt(base["lower_bound"], 0)]
        for a in ALGORITHMS:
            r = summ.get((side, kind, d, c, a), {})
            t, q = r.get("time"), r.get("time_over_sqrt_cn")
            row.append("incomplete" if t is None else f"{t:.0f} ({q:.2f})")
        for a in ALGORITHMS:
            row.append(fmt(summ.get((side, kind, d, c, a), {}).get("peak_buffer"), 1))
        rows.append(row)
    return markdown_table(header, rows, ["l"] + ["r"] * (len(header) - 1))


def build_report(
    rows: Sequence[Mapping[str, Any]],
    summ: Mapping[Key, Mapping[str, Any]],
    s: Setup,
    claims: Sequence[Claim],
    plots: Sequence[Path],
    out: Path,
    meta: Mapping[str, Any],
) -> str:
    """report.md's text."""
    incomplete = [r for r in rows if r["time"] is None or r["incomplete"]]
    bad = [r for r in rows if r["duplicates"] or r["dropped"]]
    side = f"{s.side}×{s.side}"
    parts = [
        "# Reproduction of seed 002 (Herley, Pietracaprina, Pucci): multicast routing on the mesh\n",
        f"Generated by `{meta['command']}` ({meta['date']}). {len(rows)} runs ({meta['repeat']} seed(s) "
        f"per point: {', '.join(map(str, meta['seeds']))}), runtime `{meta['runtime']}`, wall time "
        f"{meta['wall_s']:.1f} s with {meta['jobs']} worker process(es) on {meta['cpus']} CPU(s) "
        f"({meta['machine']}); the longest run took {max((r['wall_s'] for r in rows), default=0):.1f} "
        "s.\n",
        "**Setting.** mcast(n, d, c): every node of an n-node mesh sources one message to at most d "
        "nodes, no node receives more than c. Store-and-forward, shared contention (all messages "
        "compete for links and queues), all-port (each link carries one packet per direction per step — "
        "the paper's machine), lockstep, queues unbounded so that the *peak node occupancy* (packets in "
        "a node's input buffers and output queues at once, the engine's `peak_queue`, maximum over the "
        "nodes) shows what each schedule needs. *Time* = the step of the last delivery (all messages "
        "start at step 0); √(cn) uses the set's actual congestion c. Random sets draw destinations with "
        "probability proportional to the capacity a node has left, so with d = c nearly every node "
        "receives exactly c; worst-case sets are Theorem 1's: c·|A| messages from outside the corner "
        "square A (side max(1, ⌊√(n/2c)⌋)) each have one destination in A, and every message gets up to "
        "d destinations elsewhere (`coordinator/workloads/mcast.py`).\n",
        "**Algorithms** (`node/routing/herley.py`): `replicate` — one XY unicast copy per destination, "
        "made at the source; `tree` — one VH tree per message; `herley-tiles` — Theorem 2; "
        "`herley-random` — Theorem 3 (migration cap r = 2 copies per block node and round, group seed "
        "1). The ranks, classes, groups and migration selections of the paper's sorting and prefix "
        "primitives are computed by the coordinator when it builds the plan; every packet move, copy "
        "and clone is emulated hop by hop.\n",
        "**Where we simplify the paper** (stated in full in `node/routing/herley.py`): no barriers "
        "between phases, levels or rounds — a packet starts its next phase when it reaches its "
        "waypoint, so phases overlap and contention is resolved by FIFO queues (the paper runs them one "
        "after the other); the paper's sorting, prefix and (k, k)-routing primitives are not run as "
        "packet algorithms (their results come from the coordinator, their O(√n) time is not spent) and "
        "its routings are greedy XY; `herley-tiles` sends no copy into a quadrant without destinations; "
        "in `herley-random` a packet-copy walks from one destination to the next in Hamiltonian-cycle "
        "order instead of round the whole block, a master copy stops after its last selection, the "
        "constant r is 2 (the proof takes r ≥ 150) and c > n/16 uses n/16 tiles; in-tile geometry uses "
        "power-of-two tessellations.\n",
    ]
    status = (
        "every run delivered every message exactly once"
        if not incomplete and not bad
        else (f"{len(incomplete)} run(s) incomplete, {len(bad)} with duplicates or drops — see points.csv")
    )
    parts.append(f"**Run status:** {status}.\n")
    parts.append("## The paper's claims, checked against our runs\n")
    parts.append(
        f"Criteria: we fit time ∝ x^e (least squares on logarithms) over c ≥ {MIN_C_FOR_SLOPES} (below, "
        "the diameter ≈ 2√n exceeds √(cn) and bounds every algorithm). *O(√(cn)) time*: the exponent of "
        f"time/√(cn) against c and against n is at most {FLAT:+.2f} (no upward trend); *grows faster*: "
        f"at least {GROWS:+.2f}; *O(1) buffers*: the peak occupancy's exponent against c is at most "
        f"{CONSTANT_BUFFER:.2f}; *O(c) buffers*: at most {LINEAR_BUFFER:.2f}. Finite sizes cannot prove "
        "an asymptotic bound; they can show a trend or its absence.\n"
    )
    for cl in claims:
        parts.append(f"- **{cl.verdict}** — {cl.claim}. *Our runs:* {cl.evidence}.")
    parts.append("")
    notes = observations(summ, s)
    if notes:
        parts.append("### Other observations (not claims of the paper)\n")
        parts += [f"- {n}" for n in notes]
        parts.append("")
    parts.append("## Results\n")
    parts.append(
        "Means over the seeds; time in steps with time/√(cn) in brackets; peak = peak node occupancy.\n"
    )
    parts.append(f"### Random sets, {side} mesh, d = c\n")
    parts.append(_table(summ, [(s.side, "random", c, c) for c in s.cs], "c"))
    parts.append("### Random sets against n (d = c)\n")
    parts.append(_table(summ, [(x, "random", c, c) for c in s.n_cs for x in s.sides], "n"))
    parts.append(f"### Theorem 1's worst-case sets, {side} mesh, d = c\n")
    parts.append(_table(summ, [(s.side, "worst", c, c) for c in s.cs], "c"))
    parts.append(f"### Worst-case sets, {side} mesh, c = {s.d_c}, against d\n")
    parts.append(_table(summ, [(s.side, "worst", d, s.d_c) for d in s.ds], "d"))
    parts.append("## Plots\n")
    for p in plots:
        parts.append(f"![{p.stem}]({p.relative_to(out).as_posix()})\n")
    parts.append("## What these runs do not test\n")
    parts.append(
        "- The paper's time bounds include its sorting and prefix primitives (O(√n) each); ours are "
        "computed by the coordinator, so our times leave them out (they would add a constant number of "
        "√n terms).\n- Bounded buffers: the runs use unbounded queues and report what they held. With "
        "the engine's bounded buffers, a one-packet input buffer halves a link's rate (a credit returns "
        "two steps after the send), and a bounded *output* buffer shared by a node's four ports can "
        "deadlock under blocking (a full output queue waiting for a neighbour whose input is full "
        "because its own output queue is full of packets coming "
        'back) — for every algorithm here, XY unicast included — so "constant buffers suffice" is judged '
        "from the occupancy the schedules reached, not by running with constant-size buffers.\n- "
        "Theorem 4 (the deterministic constant-buffer algorithm with expanders) is not implemented.\n"
    )
    return "\n".join(parts)


# -- command -----------------------------------------------------------------------------------------
USES = ("jobs", "quick")
OPTIONS = (
    Option(
        "--runtime",
        "'engines' (default): the nodes' engines in one lockstep loop, records equal to in-process; "
        "'model' is faster on nothing here and keeps no buffer statistics",
        default="engines",
        choices=("engines", "in-process", "model"),
    ),
)


def _write(out: Path, rows: Sequence[Mapping[str, Any]], summ: Mapping[Key, Mapping[str, Any]]) -> None:
    write_tidy(out / "points.csv", POINT_FIELDS, rows)
    fields = ["side", "kind", "d", "c", "algorithm", "runs", "complete"] + [
        f"{m}{suffix}" for m in MEASURES for suffix in ("", "_min", "_max")
    ]
    write_csv(
        out / "summary.csv",
        fields,
        (
            [*k[:4], k[4], v["runs"], v["complete"], *(v[f] for f in fields[7:])]
            for k, v in sorted(summ.items())
        ),
    )


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every point; write points.csv, summary.csv and reproduction.json."""
    s = setup(args.quick)
    seeds = [args.seed + i for i in range(args.repeat)]
    todo = points(s, seeds, ALGORITHMS)
    watch = Stopwatch()
    rows = sorted(
        run_pool(partial(run_point, runtime=args.runtime), todo, args.jobs, ctx.progress, _cost), key=_row_key
    )
    _write(out, rows, summarise(rows))
    facts = run_facts(command_line(NAME, args), watch, repeat=args.repeat, seeds=seeds, runtime=args.runtime)
    write_json(out / "reproduction.json", {**facts, "jobs": args.jobs, "setup": asdict(s)})


def _read(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return json.loads((out / "reproduction.json").read_text()), read_points(out / "points.csv")


def run(args: Any, ctx: Context) -> int:
    """Run (unless ``--report-only``), then rebuild claims, plots and report.md from points.csv."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    meta, rows = read_report_only("herley", out, _read)
    s = setup_from(meta["setup"])
    summ = summarise(rows)
    claims = check_claims(summ, s)
    plots = write_plots(out, summ, s)
    report = build_report(rows, summ, s, claims, plots, out, meta)
    said = (
        f"herley: {len(rows)} runs in {meta['wall_s']:.1f} s; wrote {out / 'report.md'}, {len(plots)} plots"
    )
    lines = [f"{cl.verdict}: {cl.claim}" for cl in claims]
    return finish(
        ctx, out, report, said, lines, all(r["time"] is not None and not r["incomplete"] for r in rows)
    )
