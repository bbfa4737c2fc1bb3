"""Seed 004 (Al-Dubai et al.) under load: latency and throughput vs offered load, CV with background load.

The load sweep (§4.2.3–4.2.4, Figs. 15–20) and the CV of Tables 4–5 under a single-source background
load, on a store-and-forward packet emulation; the report's prose is in data/reports/load.md.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.metrics import multicast_metrics
from coordinator.analysis.timing import Timing, apply_timing
from coordinator.analysis.verdicts import COLUMNS, Claim, Verdict, by_points, legend, repeat_warning
from coordinator.experiments.load import HEADER, LoadPoint, Traffic, load_point, plot_load, poisson_plan
from coordinator.experiments.run import emulate
from coordinator.output.report import Series, fmt, markdown_table, plot_series
from coordinator.output.results import atomic_write, write_csv
from coordinator.reproduce._wormhole import plot_links
from coordinator.reproduce.aldubai import ALGORITHMS, COLOURS, paper_data
from coordinator.reproduce.framework import (
    Context,
    Option,
    Stopwatch,
    command_line,
    read_report_only,
    run_facts,
    run_pool,
    texts,
    write_json,
    write_tidy,
)
from coordinator.runtimes.records import RunSettings
from node.topology import Topology

__all__ = ["INTERARRIVAL_CYCLES", "STEP_CYCLES", "CvCell", "LoadSpec", "cv_claims", "load_claims", "paper_cv"]

NAME = "load"
SUMMARY = (
    "seed 004 (Al-Dubai): latency/throughput vs offered load (Figs. 15–20) and CV under load (Tables 4–5)"
)
DEFAULT_REPEAT = 3

STEP_CYCLES = 64  # one step = one 64-flit packet across a link at one flit per cycle
INTERARRIVAL_CYCLES = 250
SATURATION_SHORTFALL = 0.9  # accepted traffic below this share of the offered: saturated
RISE = 0.005  # a CV change per 20 destinations above this is a rise, not noise
#: Each per-multicast CV we report: its CvCell field and its name in the plot titles.
CV_MEASURES = (("cv_steps", "arrival steps under load"), ("cv_wormhole", "eq. 7 latency, no serialisation"))
Key = tuple[str, int, str]  # (mesh, k, algorithm) of a CV cell
Rows = Sequence[Mapping[str, Any]]  # one sweep's load points, as load_task returns them


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """One load sweep: a traffic mix and its rates (messages per node per step)."""

    name: str
    title: str
    k: int
    unicast_fraction: float
    rates: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Setup:
    """The sizes of both experiments."""

    load_mesh: str
    sweeps: tuple[LoadSpec, ...]
    duration: int
    warmup: int
    batches: int
    cv_meshes: tuple[str, ...]
    cv_ks: tuple[int, ...]
    cv_messages: int  # expected measured multicasts per stream
    cv_warmup: int


def _rates(first: float, step: float, n: int = 7) -> tuple[float, ...]:
    """``n`` evenly spaced rates from ``first`` (rounded to 4 decimals, as the paper's axes read)."""
    return tuple(round(first + i * step, 4) for i in range(n))


FULL_SWEEPS = (
    LoadSpec("multicast-10", "all multicast, 10 destinations (Figs. 15a, 17)", 10, 0.0, _rates(0.005, 0.01)),
    LoadSpec("multicast-20", "all multicast, 20 destinations (Fig. 15b)", 20, 0.0, _rates(0.0025, 0.005)),
    LoadSpec(
        "mixed-10", "10% multicast to 10 destinations, 90% unicast (Fig. 19)", 10, 0.9, _rates(0.03, 0.05)
    ),
    LoadSpec(
        "mixed-20", "10% multicast to 20 destinations, 90% unicast (Fig. 20)", 20, 0.9, _rates(0.02, 0.04)
    ),
)
QUICK_SWEEPS = (
    LoadSpec("multicast-3", "all multicast, 3 destinations", 3, 0.0, (0.01, 0.2)),
    LoadSpec("mixed-3", "10% multicast, 90% unicast", 3, 0.9, (0.02, 0.3)),
)
FULL = Setup("mesh:10x10", FULL_SWEEPS, 500, 100, 10, ("mesh:16x16", "mesh:32x32"), (20, 40, 60, 80), 20, 40)
QUICK = Setup("mesh:4x4", QUICK_SWEEPS, 120, 30, 4, ("mesh:6x6",), (4, 8), 6, 10)


def _settings(max_steps: int) -> RunSettings:
    return RunSettings(contention="shared", port_model="all-port", runtime="model", max_steps=max_steps)


def _measured(topo: Topology, alg: str, traffic: Traffic, steps: int, warmup: int) -> list[dict[str, Any]]:
    """The multicasts of one run injected from ``warmup`` on, with seed 004's eq. 7 latency added."""
    plan = poisson_plan(topo, alg, traffic)
    raw = trio.run(emulate, plan, _settings(steps), None)
    recs = [r for r in multicast_metrics(plan, raw) if r["injected"] >= warmup]
    apply_timing(recs, Timing("wormhole", 33.0, 1.0, STEP_CYCLES, 0.0))
    return recs


# -- the load sweep ----------------------------------------------------------------------------------
def load_task(mesh: str, spec: LoadSpec, alg: str, rate: float, s: Setup, seed: int) -> dict[str, Any]:
    """One offered-load point: ``load_point``'s statistics, our saturation test, and at the lowest
    rate the contention-free wormhole latency of the same traffic (for the start-up argument)."""
    topo = Topology.parse(mesh)
    traffic = Traffic(rate, spec.k, s.duration, spec.unicast_fraction, seed=seed)
    t0 = time.perf_counter()
    p = load_point(topo, alg, traffic, _settings(2 * s.duration), s.warmup, s.batches, latency_of=alg)
    reason = p.saturated
    if reason is None and p.throughput < SATURATION_SHORTFALL * p.offered:
        reason = f"accepted {p.throughput:.3f} of {p.offered:.3f} offered"
    worm = None
    if rate == min(spec.rates):  # seed 004's eq. 7 latency (cycles) of the same traffic, without contention
        recs = _measured(topo, alg, traffic, 4 * traffic.duration, s.warmup)
        worm = _mean(
            [r["latency"]["max"] for r in recs if r["algorithm"] == alg and r["latency"]["max"] is not None]
        )
    wall_s = time.perf_counter() - t0
    return dict(sweep=spec.name, point=p, saturated=reason, wormhole_latency=worm, wall_s=wall_s)


# -- CV with background load --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CvCell:
    """One (mesh, k, algorithm) cell: per-multicast CVs pooled over the streams."""

    mesh: str
    k: int
    algorithm: str
    cv_steps: list[float]
    cv_wormhole: list[float]
    times: list[float]
    sources: list[tuple[int, int]]
    growth: float  # mean time of a stream's last third of multicasts over its first third
    wall_s: float

    @property
    def key(self) -> Key:
        """(mesh, k, algorithm), the cell's place in the tables."""
        return self.mesh, self.k, self.algorithm


def cv_cell(mesh: str, k: int, alg: str, s: Setup, streams: int, seed: int) -> CvCell:
    """``streams`` single-source runs (each from a seeded random source) of ``alg`` at 250 cycles."""
    topo = Topology.parse(mesh)
    rate = STEP_CYCLES / INTERARRIVAL_CYCLES
    rng = random.Random(seed * 7919 + k)
    nodes = list(topo.nodes())
    duration = s.cv_warmup + math.ceil(s.cv_messages / rate)
    max_steps = 50 * duration + 20 * topo.size
    t0 = time.perf_counter()
    sources: list[tuple[int, int]] = [rng.choice(nodes) for _ in range(streams)]  # runs draw nothing from rng
    traffic = [
        Traffic(rate, k, duration, 0.0, seed=seed + i, sources=(src,)) for i, src in enumerate(sources)
    ]
    runs = [_measured(topo, alg, t, max_steps, s.cv_warmup) for t in traffic]
    done = [r for recs in runs for r in recs if not r["missing"]]
    times = [[float(r["time"]) for r in recs if r["time"] is not None] for recs in runs]
    growth = [
        statistics.fmean(ts[-(len(ts) // 3) :]) / max(1e-9, statistics.fmean(ts[: len(ts) // 3]))
        for ts in times
        if len(ts) >= 3
    ]
    cvs = [r["cv"] for r in done if r["cv"] is not None]
    worm = [r["latency"]["cv"] for r in done if r["latency"]["cv"] is not None]
    pooled, wall_s = [t for ts in times for t in ts], time.perf_counter() - t0
    return CvCell(mesh, k, alg, cvs, worm, pooled, sources, max(growth, default=1.0), wall_s)


def paper_cv() -> dict[Key, float]:
    """seed 004's Tables 4–5 (``mesh:16x16``, k, algorithm) → CV, from the project's package data."""
    return {(f"mesh:{m}", k, a): cv for (m, k, a), cv in paper_data().cv.items()}


# -- running ----------------------------------------------------------------------------------------
Task = tuple[str, tuple[Any, ...]]


def _do(task: Task) -> Any:
    """A task's result: a load point's row (``load_task``) or a CvCell (``cv_cell``)."""
    kind, a = task
    return load_task(*a) if kind == "load" else cv_cell(*a)


def _cost(t: Task) -> float:
    """The 32×32 CV cells and high rates first."""
    kind, a = t
    return Topology.parse(a[0]).size * a[1] * 0.2 if kind == "cv" else a[3] * 1e5


# -- claims -------------------------------------------------------------------------------------------
Sweeps = Sequence[tuple[int, Rows]]  # (destinations, load points) of each sweep a claim is judged over


def _claim(key: str, verdict: Verdict, numbers: Mapping[str, Any], parts: Rows = (), **fields: Any) -> Claim:
    """A claim from section ``key`` of data/reports/load.md: source, text, evidence (filled from
    ``numbers`` and ``fields``) and a line filled per sweep of ``parts``, listed as ``{parts}``."""
    source, said, evidence, *each = texts(NAME)[key].split("\n")
    listed = "; ".join(each[0].format(**p) for p in parts) if each else ""
    return Claim(source, said, verdict, evidence.format(**{**numbers, **fields}, parts=listed), numbers)


def _held(key: str, hits: int, points: int, parts: Rows = (), **fields: Any) -> Claim:
    """A claim over ``points`` whose direction held at ``hits`` of them."""
    return _claim(key, by_points(hits, points), {"hits": hits, "points": points}, parts, **fields)


def _listing(values: Mapping[str, float | None], digits: int, order: Sequence[str] = ALGORITHMS) -> str:
    """``DP 1.0, MP 2.0, …``: each algorithm's value in ``order`` (an em dash when missing)."""
    return ", ".join(f"{a.upper()} {fmt(values.get(a), digits)}" for a in order)


def _at_lowest(rows: Rows) -> tuple[float, dict[str, float | None], dict[str, float | None]]:
    """A sweep's lowest rate, and each algorithm's emulated latency and eq. 7 latency there."""
    low = min(r["point"].rate for r in rows)
    at = {r["point"].algorithm: r for r in rows if r["point"].rate == low}
    return (
        low,
        {a: r["point"].latency for a, r in at.items()},
        {a: r["wormhole_latency"] for a, r in at.items()},
    )


def _lowest(key: str, sweeps: Sweeps) -> Claim:
    """A claim resting on start-ups, untestable on store-and-forward packets: the lowest rate's numbers."""
    parts = [
        dict(k=k, low=low, lat=_listing(lat, 1), worm=_listing(worm, 0))
        for k, rows in sweeps
        for low, lat, worm in [_at_lowest(rows)]
    ]
    return _claim(key, Verdict.UNTESTABLE, {}, parts)


def _known(d: Mapping[str, float | None]) -> dict[str, float]:
    return {a: v for a, v in d.items() if v is not None}


def _max_throughput(rows: Rows) -> dict[str, float]:
    """Each algorithm's highest throughput over the sweep."""
    thr = [(r["point"].algorithm, r["point"].throughput) for r in rows]
    return {a: max((t for b, t in thr if b == a), default=0.0) for a in ALGORITHMS}


def _sat_offered(rows: Rows, alg: str) -> float | None:
    """The highest offered load still unsaturated (None if even the lowest saturated)."""
    ok = [r["point"].offered for r in rows if r["point"].algorithm == alg and r["saturated"] is None]
    return max(ok) if ok else None


def _heavy(rows: Rows, alg: str = "qg") -> tuple[float, dict[str, float]] | None:
    """The highest rate at which ``alg`` is unsaturated, and the latency there of those unsaturated."""
    ok = [r["point"] for r in rows if r["saturated"] is None and r["point"].latency is not None]
    rate = max((p.rate for p in ok if p.algorithm == alg), default=None)
    return None if rate is None else (rate, {p.algorithm: p.latency for p in ok if p.rate == rate})


def _sensitivity(sweeps: Sweeps) -> Claim:
    """CP's and QG's highest throughput both above DP's and MP's, per sweep."""
    thr = [_max_throughput(rows) for _, rows in sweeps]
    hits = sum(min(t["cp"], t["qg"]) > max(t["dp"], t["mp"]) for t in thr)
    parts = [
        dict(k=k, thr=_listing(t, 3), sat=_listing({a: _sat_offered(rows, a) for a in ALGORITHMS}, 3))
        for (k, rows), t in zip(sweeps, thr, strict=True)
    ]
    return _held("sensitivity", hits, len(parts), parts)


def _qg_best(sweeps: Sweeps, key: str, runner_up: str | None = None) -> Claim:
    """QG first (then ``runner_up``) in throughput and in latency at QG's heaviest unsaturated rate."""
    want, parts, tallies = ["qg", *([runner_up] if runner_up else [])], [], [0, 0, 0]
    for k, rows in sweeps:
        thr = _max_throughput(rows)
        rank = sorted(ALGORITHMS, key=lambda a: -thr[a])
        heavy, lat_rank = "", []
        if (at := _heavy(rows)) is not None:
            rate, lats = at
            lat_rank = sorted(lats, key=lambda a: lats[a])
            gone = ", ".join(a.upper() for a in ALGORITHMS if a not in lats)
            heavy = texts(NAME)["heavy"].format(rate=rate, lats=_listing(lats, 1, lat_rank))
            heavy += f", {gone} saturated" if gone else ""
        ok = rank[: len(want)] == want, lat_rank[: len(want)] == want
        tallies = [tallies[0] + all(ok), tallies[1] + ok[0], tallies[2] + ok[1]]
        parts.append(dict(k=k, thr=_listing(thr, 3, rank), heavy=heavy))
    names = ("hits", "throughput_hits", "latency_hits")
    numbers = {**dict(zip(names, tallies, strict=True)), "points": len(parts)}
    return _claim(key, by_points(tallies[0], len(parts)), numbers, parts)


def load_claims(by_sweep: Mapping[str, Rows], sweeps: Sequence[LoadSpec]) -> list[Claim]:
    """The paper's claims about latency and throughput under load, one point per sweep of their traffic."""
    multi = [(x.k, rows) for x in sweeps if (rows := by_sweep.get(x.name)) and x.unicast_fraction == 0]
    mixed = [(x.k, rows) for x in sweeps if (rows := by_sweep.get(x.name)) and x.unicast_fraction > 0]
    claims = (
        [_lowest("low-load", multi), _sensitivity(multi), _qg_best(multi, "high-traffic")] if multi else []
    )
    return claims + ([_qg_best(mixed, "heavy-mixed", "cp"), _lowest("light-mixed", mixed)] if mixed else [])


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _measure_claims(cv: Mapping[Key, float], meshes: Sequence[str], ks: Sequence[int]) -> list[Claim]:
    """Tables 4–5's claims on one CV measure: QG lowest, growth with k, larger mesh higher."""
    full = [(m, k) for m in meshes for k in ks if all((m, k, a) in cv for a in ALGORITHMS)]
    lowest = [(m, k) for m, k in full if cv[(m, k, "qg")] == min(cv[(m, k, a)] for a in ALGORITHMS)]
    claims = [_held("cv-lowest", len(lowest), len(meshes) * len(ks))]
    slope = {
        (m, a): (cv[(m, ks[-1], a)] - cv[(m, ks[0], a)]) / (ks[-1] - ks[0]) * 20
        for m in meshes
        for a in ALGORITHMS
        if len(ks) >= 2 and (m, ks[0], a) in cv and (m, ks[-1], a) in cv
    }
    if slope:  # DP, MP, CP: a CV rising above noise; QG: a change smaller in size than each of theirs
        others = {m: [abs(v) for (n, a), v in slope.items() if n == m and a != "qg"] for m in meshes}
        hits = sum(
            all(abs(v) < w for w in others[m]) if a == "qg" else v > RISE for (m, a), v in slope.items()
        )
        grown = "; ".join(f"{m}: " + _listing({a: slope.get((m, a)) for a in ALGORITHMS}, 3) for m in meshes)
        claims.append(_held("cv-grow", hits, len(meshes) * len(ALGORITHMS), grows=grown, rise=RISE))
    pairs = [(k, a) for k in ks for a in ALGORITHMS if (meshes[0], k, a) in cv and (meshes[-1], k, a) in cv]
    if len(meshes) >= 2 and pairs:
        higher = sum(cv[(meshes[-1], k, a)] > cv[(meshes[0], k, a)] for k, a in pairs)
        claims.append(_held("cv-larger", higher, len(pairs), small=meshes[0], large=meshes[-1]))
    return claims


def cv_claims(cells: Mapping[Key, CvCell], paper: Mapping[Key, float]) -> list[Claim]:
    """Tables 4–5's claims, judged on store-and-forward CVs under load; on eq. 7 alone untestable."""
    meshes = sorted({m for m, _, _ in cells}, key=lambda m: Topology.parse(m).size)
    ks = sorted({k for _, k, _ in cells})
    claims: list[Claim] = []
    for attr, _ in CV_MEASURES if cells else ():
        cv = {key: statistics.fmean(getattr(c, attr)) for key, c in cells.items() if getattr(c, attr)}
        got, why = _measure_claims(cv, meshes, ks), texts(NAME)["cv-eq7"]  # no serialisation
        untestable = [Claim(c.source, c.text, Verdict.UNTESTABLE, why.format(**c.numbers)) for c in got]
        claims += got if attr == "cv_steps" else untestable
    diffs = [
        abs(statistics.fmean(c.cv_steps) - paper[key])
        for key, c in cells.items()
        if key in paper and c.cv_steps
    ]
    fields: dict[str, Any] = dict(mean=statistics.fmean(diffs), most=max(diffs)) if diffs else {}
    return claims + ([_claim("cv-values", Verdict.UNTESTABLE, {}, **fields)] if diffs else [])


# -- report ---------------------------------------------------------------------------------------
CV_NOTE = "one source, a multicast every 250 cycles ≈ 3.9 steps"


def _as_plotted(r: Mapping[str, Any]) -> LoadPoint:
    """A load point as plotted: marked saturated (no latency) by our test as well as ``load_point``'s."""
    p = r["point"]
    return replace(p, saturated=r["saturated"], latency=None if r["saturated"] else p.latency)


def write_plots(
    out: Path, by_sweep: Mapping[str, Rows], s: Setup, cells: Mapping[Key, CvCell], paper: Mapping[Key, float]
) -> list[Path]:
    """Latency and throughput against offered load per sweep; per CV mesh, each CV measure against k."""
    plots: list[Path] = []
    for spec in s.sweeps:
        if rows := by_sweep.get(spec.name, []):
            plots.append(out / "plots" / f"load_{spec.name}.png")
            title = f"{s.load_mesh}, {spec.title}; all-port, shared contention"
            plot_load([_as_plotted(r) for r in rows], plots[-1], title)
    xs = [float(k) for k in s.cv_ks]
    for mesh, (attr, label) in itertools.product(s.cv_meshes, CV_MEASURES):
        series = []
        for a in ALGORITHMS:
            ours = [_mean(getattr(c, attr)) if (c := cells.get((mesh, k, a))) else None for k in s.cv_ks]
            series.append(Series(f"{a.upper()} (ours)", xs, ours, colour=COLOURS[a]))
            if any((mesh, k, a) in paper for k in s.cv_ks):
                theirs = [paper.get((mesh, k, a)) for k in s.cv_ks]
                series.append(Series(f"{a.upper()} (paper)", xs, theirs, paper=True, colour=COLOURS[a]))
        path = out / "plots" / f"cv_{mesh.split(':')[1]}_{attr.split('_')[1]}.png"
        title = f"{mesh}: CV of the {label}"
        plots.append(
            plot_series(path, series, title, "destinations", "coefficient of variation", note=CV_NOTE)
        )
    return plots


def _drivers(by_sweep: Mapping[str, Rows], s: Setup) -> str:
    """A paragraph: what orders the algorithms in our model and in the paper's, from the data."""
    spec = next((x for x in s.sweeps if x.unicast_fraction == 0 and by_sweep.get(x.name)), None)
    if spec is None:
        return ""
    _, lat, worm_lat = _at_lowest(by_sweep[spec.name])
    steps, worm = _known(lat), _known(worm_lat)
    if len(steps) < len(ALGORITHMS) or len(worm) < len(ALGORITHMS):
        return ""
    by_steps, by_worm = (" < ".join(a.upper() for a in sorted(d, key=lambda a: d[a])) for d in (steps, worm))
    return texts(NAME)["drivers"].format(k=spec.k, by_steps=by_steps, by_worm=by_worm) + "\n\n"


def _load_cell(x: Mapping[str, Any] | None) -> str:
    """``latency / throughput`` of one point (``saturated`` instead of its latency), — if not run."""
    if x is None:
        return "—"
    p = x["point"]
    return f"{'saturated' if x['saturated'] else fmt(p.latency, 1)} / {p.throughput:.3f}"


def _load_table(rows: Rows) -> str:
    """Per rate: the offered load and each algorithm's latency / throughput."""
    header = ["rate (msg/node/step)", "offered (deliveries/node/step)"] + [
        f"{a.upper()} latency (steps) / throughput" for a in ALGORITHMS
    ]
    by: dict[float, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for r in rows:
        by[r["point"].rate][r["point"].algorithm] = r
    table = [
        [f"{rate:g}", f"{statistics.fmean(x['point'].offered for x in d.values()):.3f}"]
        + [_load_cell(d.get(a)) for a in ALGORITHMS]
        for rate, d in sorted(by.items())
    ]
    return markdown_table(header, table, ["r"] * len(header))


def _cv_text(c: CvCell, paper: Mapping[Key, float]) -> str:
    """``ours / eq. 7 / paper's`` CV of one cell."""
    return f"{fmt(_mean(c.cv_steps), 3)} / {fmt(_mean(c.cv_wormhole), 3)} / {fmt(paper.get(c.key), 3)}"


def _cv_table(cells: Mapping[Key, CvCell], paper: Mapping[Key, float], mesh: str, ks: Sequence[int]) -> str:
    """Per k: each algorithm's CV (ours, eq. 7, the paper's) and the multicasts in a cell."""
    header = ["k"] + [f"{a.upper()} ours / eq. 7 alone / paper" for a in ALGORITHMS] + ["multicasts per cell"]
    rows = []
    for k in ks:
        got = {a: cells[(mesh, k, a)] for a in ALGORITHMS if (mesh, k, a) in cells}
        cvs = [_cv_text(got[a], paper) if a in got else "—" for a in ALGORITHMS]
        counts = [len(c.cv_steps) for c in got.values()]
        rows.append([k, *cvs, counts[-1] if counts else 0])
    return markdown_table(header, rows, ["r"] * len(header))


def build_report(
    by_sweep: Mapping[str, Rows],
    cells: Mapping[Key, CvCell],
    paper: Mapping[Key, float],
    s: Setup,
    claims: Sequence[Claim],
    plots: Sequence[Path],
    out: Path,
    meta: Mapping[str, Any],
) -> str:
    """report.md's text."""
    t, rate = texts(NAME), STEP_CYCLES / INTERARRIVAL_CYCLES
    slow = max(cells.values(), key=lambda c: c.wall_s, default=None)
    slowest = t["slowest"].format(c=slow, alg=slow.algorithm.upper()) if slow else ""
    grown = [c for c in cells.values() if c.growth > 1.5]
    grown_cells = ", ".join(
        sorted({f"{c.algorithm.upper()} ({c.mesh.split(':')[1]}, k = {c.k})" for c in grown})
    )
    report = t["report"].format(
        **meta,
        slowest=slowest,
        step_cycles=STEP_CYCLES,
        interval=1 / rate,
        rate=rate,
        s=s,
        drain=2 * s.duration,
        shortfall=SATURATION_SHORTFALL,
        note=t["note"].format(cells=grown_cells) + "\n\n" if grown else "",
        legend=legend(meta["repeat"]),
        claims="".join(c.markdown() + "\n" for c in claims),
        drivers=_drivers(by_sweep, s),
        load_tables="\n".join(f"### {x.title}\n\n{_load_table(by_sweep.get(x.name, []))}" for x in s.sweeps),
        cv_tables="\n".join(f"### {m}\n\n{_cv_table(cells, paper, m, s.cv_ks)}" for m in s.cv_meshes),
        plots="".join(link + "\n" for link in plot_links(plots, out)),
    )
    return report + "\n"


# -- command ---------------------------------------------------------------------------------------
USES = ("jobs", "quick")
OPTIONS = (
    Option("--no-cv", "skip the CV experiment", None, flag=True),
    Option("--no-sweep", "skip the load sweep", None, flag=True),
)
CV_COLUMNS = ("mesh", "k", "algorithm", "multicasts", "cv_steps", "cv_wormhole", "mean_time", "source_growth",
              "paper_cv", "wall_s")  # fmt: skip


def _cv_row(c: CvCell, paper_value: float | None) -> list[Any]:
    """One row of cv.csv (CV_COLUMNS): a cell's counts, mean CVs and time, source growth, the paper's CV."""
    counts = [c.mesh, c.k, c.algorithm, len(c.cv_steps)]
    means = [_mean(c.cv_steps), _mean(c.cv_wormhole), _mean(c.times)]
    return [*counts, *means, round(c.growth, 3), paper_value, round(c.wall_s, 2)]


def _load_row(r: Mapping[str, Any]) -> list[Any]:
    """One row of load.csv: the sweep, the point's columns, our saturation reason, eq. 7, wall time."""
    return [r["sweep"], *r["point"].row(), r["saturated"] or "", r["wormhole_latency"], round(r["wall_s"], 2)]


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every load point and CV cell; write results.json and reproduction.json (facts and Setup)."""
    s, seed = (QUICK if args.quick else FULL), args.seed
    sweep = [("load", (s.load_mesh, x, a, r, s, seed)) for x in s.sweeps for a in ALGORITHMS for r in x.rates]
    cv_points = [(m, k) for m in s.cv_meshes for k in s.cv_ks if k < Topology.parse(m).size]
    cv = [("cv", (m, k, a, s, args.repeat, seed)) for m, k in cv_points for a in ALGORITHMS]
    watch = Stopwatch()
    tasks: list[Task] = ([] if args.no_sweep else sweep) + ([] if args.no_cv else cv)
    results = run_pool(_do, tasks, args.jobs, ctx.progress, _cost)
    load = [{**r, "point": asdict(r["point"])} for r in results if not isinstance(r, CvCell)]
    cells = [asdict(c) for c in results if isinstance(c, CvCell)]
    facts = run_facts(command_line(NAME, args), watch, repeat=args.repeat, seed=args.seed)
    atomic_write(out / "results.json", json.dumps({"load": load, "cv": cells}))
    write_json(out / "reproduction.json", {**facts, "jobs": args.jobs, "setup": asdict(s)})


BySweep = dict[str, list[dict[str, Any]]]


def _read(out: Path) -> tuple[dict[str, Any], Setup, BySweep, dict[Key, CvCell]]:
    """reproduction.json's facts and Setup, and results.json's load points by sweep and CV cells by key."""
    meta = json.loads((out / "reproduction.json").read_text())
    d = meta["setup"]
    sweeps = tuple(LoadSpec(**{**x, "rates": tuple(x["rates"])}) for x in d["sweeps"])
    s = Setup(**{**d, "sweeps": sweeps, "cv_meshes": tuple(d["cv_meshes"]), "cv_ks": tuple(d["cv_ks"])})
    data = json.loads((out / "results.json").read_text())
    by_sweep: BySweep = defaultdict(list)
    for r in data["load"]:
        point = LoadPoint(**{**r["point"], "ci95": tuple(r["point"]["ci95"])})
        by_sweep[r["sweep"]].append({**r, "point": point})
    cells = [CvCell(**{**c, "sources": [tuple(x) for x in c["sources"]]}) for c in data["cv"]]
    return meta, s, by_sweep, {c.key: c for c in cells}


def run(args: Any, ctx: Context) -> int:
    """Run (unless ``--report-only``), then rebuild the CSVs, claims, plots and report from results.json."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    meta, s, by_sweep, cells = read_report_only("load", out, _read)
    paper = paper_cv()
    claims = load_claims(by_sweep, s.sweeps) + cv_claims(cells, paper)
    load_columns = ["sweep", *HEADER, "saturated_reason", "wormhole_latency_cycles", "wall_s"]
    write_csv(out / "load.csv", load_columns, [_load_row(r) for rows in by_sweep.values() for r in rows])
    write_csv(out / "cv.csv", CV_COLUMNS, [_cv_row(c, paper.get(key)) for key, c in sorted(cells.items())])
    write_tidy(out / "claims.csv", COLUMNS, (c.row() for c in claims))
    if (warning := repeat_warning(meta["repeat"])) is not None:
        ctx.warn(f"load: {warning}")
    plots = write_plots(out, by_sweep, s, cells, paper)
    atomic_write(out / "report.md", build_report(by_sweep, cells, paper, s, claims, plots, out, meta))
    n_tasks = sum(len(v) for v in by_sweep.values()) + len(cells)
    ctx.say(
        f"load: {n_tasks} tasks in {meta['wall_s']:.1f} s; wrote {out / 'report.md'} and {len(plots)} plots"
    )
    for c in claims:
        ctx.say(f"{c.verdict}: {c.source}: {c.text}")
    if any(not c.cv_steps for c in cells.values()):
        ctx.warn("meshcast: some CV cells measured no complete multicast, see report.md")
        return 1
    return 0
