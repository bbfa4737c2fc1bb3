"""Seed 004 (Al-Dubai et al.) under load: latency and throughput vs offered load, CV with background load.

Two experiments of the paper, on our store-and-forward, packet-level emulation:

* **Load sweep** (§4.2.3–4.2.4, Figs. 15–20): a 10×10 mesh, every node a Poisson source, DP, MP,
  CP and QG, 10 destinations per multicast; all-multicast traffic (Figs. 15, 17) and 10%
  multicast / 90% unicast (Fig. 19); mean multicast latency and throughput against offered load,
  saturated points marked (``coordinator/experiments/load.py``: warm-up, batch means, 95% CIs).
* **CV with background load** (§4.2.2, Tables 4–5): one source sends a multicast every 250 cycles
  on average, 64-flit messages, to 20, 40, 60 or 80 uniform destinations, on 16×16 and 32×32 meshes;
  the coefficient of variation (SD / mean) of each multicast's arrival latencies at its
  destinations, averaged, beside the paper's Tables 4–5 (``coordinator/data/aldubai_cv.csv``).

**Units.** One step of ours carries one whole packet across one link; at the paper's 1 flit per
cycle a 64-flit message holds a channel for L·β = 64 cycles, so a step stands for 64 cycles and
250 cycles between messages is a mean inter-arrival of 250 / 64 ≈ 3.9 steps (rate 0.256 per
step). Start-ups (Ts = 33 cycles) are not charged by the emulation; the CV is also reported for
seed 004's contention-free wormhole latency (eq. 7, Ts = 33, β = 1, L = 64) of the same deliveries.
All runs: shared contention, all-port (the paper's four injection and four ejection channels),
lockstep, unbounded queues, on the reference model runtime (records identical to the nodes'
emulation, ``tests/test_emulation_vs_model.py``, ``tests/test_buffers.py``) because the 32×32
runs are too slow on the trio runtime for this report.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from coordinator.experiments.load import LoadPoint, Traffic, load_point, plot_load, poisson_plan
from coordinator.output.report import Series, fmt, markdown_table, plot_series
from coordinator.output.results import atomic_write, write_csv
from coordinator.reproduce.framework import (
    Context,
    Option,
    Stopwatch,
    command_line,
    paper_csv,
    read_report_only,
    run_facts,
    run_pool,
    write_json,
)
from node.topology import Topology

__all__ = [
    "ALGORITHMS",
    "INTERARRIVAL_CYCLES",
    "STEP_CYCLES",
    "CvCell",
    "LoadSpec",
    "cv_claims",
    "load_claims",
    "paper_cv",
]

NAME = "load"
SUMMARY = (
    "seed 004 (Al-Dubai): latency/throughput vs offered load (Figs. 15–20) and CV under load (Tables 4–5)"
)
DEFAULT_REPEAT = 3

ALGORITHMS = ("dp", "mp", "cp", "qg")
COLOURS = {"dp": "#1f77b4", "mp": "#ff7f0e", "cp": "#2ca02c", "qg": "#d62728"}
"""One colour per algorithm in every plot (``report.algorithm_colour`` gives some of them the same)."""
STEP_CYCLES = 64  # one step = one 64-flit packet across a link at one flit per cycle
INTERARRIVAL_CYCLES = 250
SATURATION_SHORTFALL = 0.9  # accepted traffic below this share of the offered: saturated
CV_MEASURES = (
    ("cv_steps", "emulated arrival steps", "arrival steps under load"),
    ("cv_wormhole", "eq. 7 wormhole latency", "eq. 7 wormhole latency"),
)
"""Each per-multicast CV we report: its CvCell field, its name in the claims and in the plot titles."""
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


def _evenly(first: float, step: float, n: int = 7) -> tuple[float, ...]:
    """``n`` evenly spaced rates from ``first`` (rounded to 4 decimals, as the paper's axes read)."""
    return tuple(round(first + i * step, 4) for i in range(n))


FULL_SWEEPS = (
    LoadSpec("multicast-10", "all multicast, 10 destinations (Figs. 15a, 17)", 10, 0.0, _evenly(0.005, 0.01)),
    LoadSpec("multicast-20", "all multicast, 20 destinations (Fig. 15b)", 20, 0.0, _evenly(0.0025, 0.005)),
    LoadSpec(
        "mixed-10", "10% multicast to 10 destinations, 90% unicast (Fig. 19)", 10, 0.9, _evenly(0.03, 0.05)
    ),
    LoadSpec(
        "mixed-20", "10% multicast to 20 destinations, 90% unicast (Fig. 20)", 20, 0.9, _evenly(0.02, 0.04)
    ),
)
QUICK_SWEEPS = (
    LoadSpec("multicast-3", "all multicast, 3 destinations", 3, 0.0, (0.01, 0.2)),
    LoadSpec("mixed-3", "10% multicast, 90% unicast", 3, 0.9, (0.02, 0.3)),
)
FULL = Setup("mesh:10x10", FULL_SWEEPS, 500, 100, 10, ("mesh:16x16", "mesh:32x32"), (20, 40, 60, 80), 20, 40)
QUICK = Setup("mesh:4x4", QUICK_SWEEPS, 120, 30, 4, ("mesh:6x6",), (4, 8), 6, 10)


def _settings(max_steps: int) -> Any:
    from coordinator.runtimes.records import RunSettings

    return RunSettings(contention="shared", port_model="all-port", runtime="model", max_steps=max_steps)


def _measured(
    topo: Topology, alg: str, traffic: Traffic, max_steps: int, warmup: int
) -> list[dict[str, Any]]:
    """The multicasts of one run injected from ``warmup`` on, with seed 004's eq. 7 latency added."""
    import trio

    from coordinator.analysis.metrics import multicast_metrics
    from coordinator.analysis.timing import Timing, apply_timing
    from coordinator.experiments.run import emulate

    plan = poisson_plan(topo, alg, traffic)
    raw = trio.run(emulate, plan, _settings(max_steps), None)
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
    worm = _wormhole_latency(topo, alg, traffic, s.warmup) if rate == min(spec.rates) else None
    wall_s = time.perf_counter() - t0
    return dict(sweep=spec.name, point=p, saturated=reason, wormhole_latency=worm, wall_s=wall_s)


def _wormhole_latency(topo: Topology, alg: str, traffic: Traffic, warmup: int) -> float | None:
    """Mean multicast latency (cycles) of seed 004's eq. 7 over the measured multicasts of ``alg``."""
    recs = _measured(topo, alg, traffic, 4 * traffic.duration, warmup)
    vals = [r["latency"]["max"] for r in recs if r["algorithm"] == alg and r["latency"]["max"] is not None]
    return statistics.fmean(vals) if vals else None


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
    runs = [
        _measured(
            topo, alg, Traffic(rate, k, duration, 0.0, seed=seed + i, sources=(src,)), max_steps, s.cv_warmup
        )
        for i, src in enumerate(sources)
    ]
    done = [r for recs in runs for r in recs if not r["missing"]]
    times = [[float(r["time"]) for r in recs if r["time"] is not None] for recs in runs]
    growth = [
        statistics.fmean(ts[-(len(ts) // 3) :]) / max(1e-9, statistics.fmean(ts[: len(ts) // 3]))
        for ts in times
        if len(ts) >= 3
    ]
    cvs = [r["cv"] for r in done if r["cv"] is not None]
    worm = [r["latency"]["cv"] for r in done if r["latency"]["cv"] is not None]
    pooled = [t for ts in times for t in ts]
    return CvCell(
        mesh, k, alg, cvs, worm, pooled, sources, max(growth, default=1.0), time.perf_counter() - t0
    )


def paper_cv() -> dict[Key, float]:
    """seed 004's Tables 4–5 (``mesh:16x16``, k, algorithm) → CV, from the project's package data."""
    _, rows = paper_csv("aldubai_cv.csv")
    return {
        (f"mesh:{r['mesh']}", int(r["destinations"]), r["algorithm"].lower()): float(r["cv"]) for r in rows
    }


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
@dataclass(frozen=True, slots=True)
class Claim:
    """One of the paper's claims, our verdict on it, and the numbers behind the verdict."""

    claim: str
    verdict: str
    evidence: str


def _verdict(ok: bool, partly: bool = False) -> str:
    return "supported" if ok else ("partly supported" if partly else "not supported")


def _listing(values: Mapping[str, float | None], digits: int, order: Sequence[str] = ALGORITHMS) -> str:
    """``DP 1.0, MP 2.0, …``: each algorithm's value in ``order`` (an em dash when missing)."""
    return ", ".join(f"{a.upper()} {fmt(values.get(a), digits)}" for a in order)


def _at_lowest(rows: Rows) -> tuple[float, dict[str, float | None], dict[str, float | None]]:
    """A sweep's lowest rate, and each algorithm's emulated latency and eq. 7 latency there."""
    low = min(r["point"].rate for r in rows)
    at = [r for r in rows if r["point"].rate == low]
    return (
        low,
        {r["point"].algorithm: r["point"].latency for r in at},
        {r["point"].algorithm: r["wormhole_latency"] for r in at},
    )


def _known(d: Mapping[str, float | None]) -> dict[str, float]:
    return {a: v for a, v in d.items() if v is not None}


def _max_throughput(rows: Rows) -> dict[str, float]:
    """Each algorithm's highest throughput over the sweep."""
    return {
        a: max((r["point"].throughput for r in rows if r["point"].algorithm == a), default=0.0)
        for a in ALGORITHMS
    }


def _sat_offered(rows: Rows, alg: str) -> float | None:
    """The highest offered load still unsaturated (None if even the lowest saturated)."""
    ok = [r["point"].offered for r in rows if r["point"].algorithm == alg and r["saturated"] is None]
    return max(ok) if ok else None


def _heavy(rows: Rows, alg: str = "qg") -> tuple[float, dict[str, float]] | None:
    """The highest rate at which ``alg`` is unsaturated, and the latency there of those unsaturated."""
    ok = [r["point"] for r in rows if r["saturated"] is None and r["point"].latency is not None]
    rates = [p.rate for p in ok if p.algorithm == alg]
    if not rates:
        return None
    return max(rates), {p.algorithm: p.latency for p in ok if p.rate == max(rates)}


def _low_load(rows: Rows, k: int) -> Claim:
    low, lat, worm = _at_lowest(rows)

    def beats(d: Mapping[str, float | None]) -> bool:
        known = _known(d)
        if len(known) < len(ALGORITHMS):
            return False
        return max(known["dp"], known["mp"]) < min(known["cp"], known["qg"])

    return Claim(
        f"§4.2.3 ({k} destinations): at low load DP and MP have lower multicast latency than QG and CP "
        "(fewer start-ups)",
        _verdict(beats(lat), beats(worm)),
        f"at the lowest rate ({low} messages/node/step) our emulated latency was {_listing(lat, 1)} steps; "
        f"seed 004's contention-free wormhole latency (eq. 7, Ts = 33, L = 64) of the same deliveries "
        f"{_listing(worm, 0)} cycles (a store-and-forward step charges no start-up; eq. 7 charges no "
        "contention, so a source's copies do not queue)",
    )


def _sensitivity(rows: Rows, k: int) -> Claim:
    thr = _max_throughput(rows)
    sat = {a: _sat_offered(rows, a) for a in ALGORITHMS}
    ok = min(thr["cp"], thr["qg"]) > max(thr["dp"], thr["mp"])
    part = max(thr["cp"], thr["qg"]) > max(thr["dp"], thr["mp"])
    return Claim(
        f"§4.2.3 ({k} destinations): CP and QG are less sensitive to load than DP and MP and reach a "
        "higher throughput (shorter paths)",
        _verdict(ok, part),
        f"highest throughput reached (deliveries/node/step): {_listing(thr, 3)}; highest unsaturated "
        f"offered load: {_listing(sat, 3)}",
    )


def _qg_best(rows: Rows, claim: str, runner_up: str | None = None) -> Claim:
    thr = _max_throughput(rows)
    rank = sorted(ALGORITHMS, key=lambda a: -thr[a])
    heavy = _heavy(rows)
    text = f"highest throughput: {_listing(thr, 3, rank)}"
    lat_rank: list[str] = []
    if heavy is not None:
        rate, lats = heavy
        lat_rank = sorted(lats, key=lambda a: lats[a])
        gone = ", ".join(a.upper() for a in ALGORITHMS if a not in lats)
        text += (
            f"; at {rate} messages/node/step (the highest rate QG does not saturate) latency "
            f"{_listing(lats, 1, lat_rank)} steps" + (f", {gone} saturated" if gone else "")
        )
    thr_ok = rank[0] == "qg" and (runner_up is None or rank[1] == runner_up)
    lat_ok = bool(lat_rank) and lat_rank[0] == "qg" and (runner_up is None or lat_rank[1:2] == [runner_up])
    return Claim(claim, _verdict(thr_ok and lat_ok, rank[0] == "qg" or lat_rank[:1] == ["qg"]), text)


def _light_mixed(rows: Rows, k: int) -> Claim:
    low, lat, _ = _at_lowest(rows)
    known = _known(lat)
    top = max(known, key=lambda a: known[a]) if known else None
    return Claim(
        f"§4.2.4 ({k} destinations, 90% unicast): under light load DP, MP and QG are comparable and CP "
        "is slower",
        _verdict(top == "cp"),
        f"at {low} messages/node/step: {_listing(lat, 1)} steps",
    )


HIGH_TRAFFIC = (
    "§4.2.3 ({k} destinations): under high traffic QG has the lowest latency and the highest throughput of "
    "the four (Figs. 15b, 16b show it for 20 destinations; with 10, Fig. 15a)"
)
HEAVY_MIXED = (
    "§4.2.4 ({k} destinations, 90% unicast; Figs. 19–20): under heavy load QG performs best in latency and "
    "throughput, followed by CP"
)


def load_claims(by_sweep: Mapping[str, Rows], sweeps: Sequence[LoadSpec]) -> list[Claim]:
    """The paper's comparative claims about latency and throughput under load, judged on our points."""
    claims: list[Claim] = []
    for spec in sweeps:
        rows, k = by_sweep.get(spec.name, []), spec.k
        if rows and spec.unicast_fraction == 0:
            claims += [_low_load(rows, k), _sensitivity(rows, k), _qg_best(rows, HIGH_TRAFFIC.format(k=k))]
        elif rows:
            claims += [_qg_best(rows, HEAVY_MIXED.format(k=k), runner_up="cp"), _light_mixed(rows, k)]
    return claims


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _cv_measure_claims(
    cv: Mapping[Key, float], meshes: Sequence[str], ks: Sequence[int], label: str
) -> list[Claim]:
    """Tables 4–5's claims on one CV measure: QG lowest, growth with k, larger mesh higher."""
    complete = [(m, k) for m in meshes for k in ks if all((m, k, a) in cv for a in ALGORITHMS)]
    lowest = [(m, k) for m, k in complete if all(cv[(m, k, "qg")] <= cv[(m, k, a)] for a in ALGORITHMS)]
    total = len(meshes) * len(ks)
    slopes = {
        a: [
            (cv[(m, ks[-1], a)] - cv[(m, ks[0], a)]) / (ks[-1] - ks[0]) * 20
            for m in meshes
            if len(ks) >= 2 and (m, ks[0], a) in cv and (m, ks[-1], a) in cv
        ]
        for a in ALGORITHMS
    }
    grows = {a: statistics.fmean(v) for a, v in slopes.items() if v}
    others_grow = all(grows.get(a, 0.0) > 0 for a in ("dp", "mp", "cp"))
    qg_flat = "qg" in grows and all(abs(grows["qg"]) < g for a, g in grows.items() if a != "qg")
    claims = [
        Claim(
            f"Tables 4–5: QG has the lowest CV of the four in every cell ({label})",
            _verdict(len(lowest) == total, bool(lowest)),
            f"QG lowest in {len(lowest)} of {total} cells",
        ),
        Claim(
            f"Tables 4–5: DP's, MP's and CP's CV grow with the number of destinations, QG's hardly ({label})",
            _verdict(others_grow and qg_flat, others_grow or qg_flat),
            f"change of CV per 20 more destinations (mean over the meshes): {_listing(grows, 3)} "
            "(paper: DP +0.045, MP +0.038, CP +0.027, QG +0.004 on 16×16)",
        ),
    ]
    if len(meshes) >= 2:
        small, large = meshes[0], meshes[-1]
        pairs = [(k, a) for k in ks for a in ALGORITHMS if (small, k, a) in cv and (large, k, a) in cv]
        higher = [(k, a) for k, a in pairs if cv[(large, k, a)] > cv[(small, k, a)]]
        claims.append(
            Claim(
                f"Tables 4–5: every CV is higher on the larger mesh ({label})",
                _verdict(len(higher) == len(pairs) and bool(pairs), bool(higher)),
                f"{large} above {small} in {len(higher)} of {len(pairs)} (k, algorithm) cells",
            )
        )
    return claims


def cv_claims(cells: Mapping[Key, CvCell], paper: Mapping[Key, float]) -> list[Claim]:
    """Tables 4–5's claims, judged on our CVs (store-and-forward under load, and eq. 7 wormhole)."""
    meshes = sorted({m for m, _, _ in cells}, key=lambda m: Topology.parse(m).size)
    ks = sorted({k for _, k, _ in cells})
    claims: list[Claim] = []
    for attr, label, _ in CV_MEASURES:
        cv = {key: statistics.fmean(getattr(c, attr)) for key, c in cells.items() if getattr(c, attr)}
        claims += _cv_measure_claims(cv, meshes, ks, label)
    diffs = [
        abs(statistics.fmean(c.cv_steps) - paper[key])
        for key, c in cells.items()
        if key in paper and c.cv_steps
    ]
    if diffs:
        claims.append(
            Claim(
                "Tables 4–5: the CV values themselves",
                "not comparable",
                f"ours (emulated steps) differ from the paper's by {statistics.fmean(diffs):.3f} on "
                f"average (at most {max(diffs):.3f}); the paper's are wormhole latencies in cycles, "
                "dominated by start-ups, ours store-and-forward hop counts plus queueing",
            )
        )
    return claims


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
    for mesh, (attr, _, label) in itertools.product(s.cv_meshes, CV_MEASURES):
        series = []
        for a in ALGORITHMS:
            got = [cells.get((mesh, k, a)) for k in s.cv_ks]
            ours = [_mean(getattr(c, attr)) if c else None for c in got]
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
    by_steps = " < ".join(a.upper() for a in sorted(steps, key=lambda a: steps[a]))
    by_worm = " < ".join(a.upper() for a in sorted(worm, key=lambda a: worm[a]))
    return (
        "**What drives these results.** A store-and-forward step costs a multicast its path lengths and "
        "its queueing; a start-up costs nothing. At the lowest load of the "
        f"{spec.k}-destination sweep our latencies order the algorithms {by_steps} (shortest paths "
        f"first), seed 004's eq. 7 in cycles, where start-ups dominate, {by_worm}. Claims that rest on "
        "start-ups (DP and MP ahead at low load, CP behind under light mixed traffic) cannot carry over "
        "to our model; claims that rest on path length and the traffic it makes (which algorithms "
        "saturate first) can, and are tested as such.\n"
    )


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
    header = ["k"] + [f"{a.upper()} ours / wormhole / paper" for a in ALGORITHMS] + ["multicasts per cell"]
    rows = []
    for k in ks:
        got = {a: cells[(mesh, k, a)] for a in ALGORITHMS if (mesh, k, a) in cells}
        texts = [_cv_text(got[a], paper) if a in got else "—" for a in ALGORITHMS]
        counts = [len(c.cv_steps) for c in got.values()]
        rows.append([k, *texts, counts[-1] if counts else 0])
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
    rate = STEP_CYCLES / INTERARRIVAL_CYCLES
    slow = max(cells.values(), key=lambda c: c.wall_s, default=None)
    slowest = (
        f"; the slowest CV cell ({slow.mesh}, k = {slow.k}, {slow.algorithm.upper()}) "
        f"took {slow.wall_s:.1f} s"
        if slow
        else ""
    )
    grown = [c for c in cells.values() if c.growth > 1.5]
    parts = [
        "# Reproduction of seed 004 (Al-Dubai et al.) under load: Figs. 15–20 and Tables 4–5\n",
        f"Generated by `{meta['command']}` ({meta['date']}); wall time {meta['wall_s']:.1f} s with "
        f"{meta['jobs']} worker process(es) on {meta['cpus']} CPU(s) ({meta['machine']}), a machine "
        f"shared with other work{slowest}.\n",
        "**Our model and the paper's.** The paper simulates wormhole switching at flit level (one flit "
        "per channel per cycle, single-flit input buffers, start-up Ts = 33 cycles, 64-flit messages, "
        "four injection and four ejection channels, dimension-ordered base routing). We emulate "
        "store-and-forward at packet level: a step moves one whole packet across one link, every node "
        "forwards on all four links at once (all-port), queues are unbounded FIFOs and every multicast "
        "competes with all others (shared contention). **Mapping of time:** a 64-flit message holds a "
        f"channel for L·β = 64 cycles, so one step stands for {STEP_CYCLES} cycles and the paper's 250 "
        f"cycles between messages become a mean inter-arrival of 250/64 ≈ {1 / rate:.2f} steps (Poisson, "
        f"rate {rate:.3f} per step). Start-ups are not charged by the emulation; where the paper's "
        "argument turns on them we also report seed 004's contention-free wormhole latency (eq. 7) of "
        "the same recorded deliveries. Runs use the reference model runtime, whose records equal the "
        "nodes' emulation (tested), because 32×32 is too slow on the trio runtime for this report.\n",
        f"**Load sweep.** {s.load_mesh}, every node a Poisson source, {s.duration} steps of injection, "
        f"the first {s.warmup} left out, {s.batches} batch means (95% CI), seed {meta['seed']}. A point "
        f"is *saturated* when its run does not drain within {2 * s.duration} steps, when its batch-mean "
        "latency keeps growing (`coordinator/experiments/load.py`), or when the accepted traffic falls below "
        f"{SATURATION_SHORTFALL:.0%} of the offered (our addition: `load_point` alone let some "
        "overloaded points through as numbers). Offered load and throughput are in deliveries per node "
        "per step.\n",
        "**CV with background load.** The paper's 250 cycles are per source; with every node a source "
        "the offered traffic would exceed the ejection capacity many times over (256 sources × 20 "
        "destinations × 64 flits per 250 cycles > 4 flits per node per cycle), so we read it as one "
        "source at a time (the "
        'paper: "a source node is randomly chosen"): each stream is one seeded random source sending a '
        f"multicast every {1 / rate:.2f} steps on average to k uniform destinations; {meta['repeat']} "
        f"streams per cell, {s.cv_warmup} warm-up steps, about {s.cv_messages} measured multicasts per "
        "stream (the paper averages ≥ 40 experiments per cell). CV = population SD / mean of a "
        "multicast's arrival latencies at its destinations (steps since injection), averaged over the "
        "multicasts.\n",
    ]
    if grown:
        parts.append(
            "**Note:** at this rate the source itself saturates for "
            + ", ".join(sorted({f"{c.algorithm.upper()} ({c.mesh.split(':')[1]}, k = {c.k})" for c in grown}))
            + ": its later multicasts waited more than 1.5× longer than its first ones (it sends more "
            "copies per multicast than its four links carry in 3.9 steps), so those cells measure a "
            "growing queue at the source, which shifts every arrival alike and lowers the CV.\n"
        )
    parts.append("## The paper's claims, checked against our runs\n")
    parts += [f"- **{c.verdict}** — {c.claim}. *Our runs:* {c.evidence}." for c in claims]
    parts.append("")
    if drive := _drivers(by_sweep, s):
        parts.append(drive)
    parts.append("## Load sweep\n")
    for spec in s.sweeps:
        parts += [f"### {spec.title}\n", _load_table(by_sweep.get(spec.name, []))]
    parts.append("## CV of the multicast latency with background load\n")
    parts.append(
        "Ours (emulated arrival steps) / ours (eq. 7 wormhole latency of the same deliveries) / the "
        "paper's.\n"
    )
    for mesh in s.cv_meshes:
        parts += [f"### {mesh}\n", _cv_table(cells, paper, mesh, s.cv_ks)]
    parts.append("## Plots\n")
    parts += [f"![{p.stem}]({p.relative_to(out).as_posix()})\n" for p in plots]
    parts.append("## What these runs do not test\n")
    parts.append(
        "- Flit-level wormhole effects — a blocked worm holding channels across several routers, "
        "single-flit buffers, the preparation times (2, 2, 4 and 16 cycles) — are outside a "
        "packet-level store-and-forward emulation; so are the paper's absolute numbers (cycles).\n"
        "- The 16×16 load sweeps (Figs. 16, 18) and QG with a 45-cycle preparation time (Figs. 17, 18) "
        "are not run here: the first for time, the second because the emulation has no preparation time.\n"
    )
    return "\n".join(parts)


# -- command ---------------------------------------------------------------------------------------
USES = ("jobs", "quick")
OPTIONS = (
    Option("--no-cv", "skip the CV experiment", None, flag=True),
    Option("--no-sweep", "skip the load sweep", None, flag=True),
)
CV_CSV: dict[str, Callable[[CvCell, float | None], Any]] = {
    "mesh": lambda c, _: c.mesh,
    "k": lambda c, _: c.k,
    "algorithm": lambda c, _: c.algorithm,
    "multicasts": lambda c, _: len(c.cv_steps),
    "cv_steps": lambda c, _: _mean(c.cv_steps),
    "cv_wormhole": lambda c, _: _mean(c.cv_wormhole),
    "mean_time": lambda c, _: _mean(c.times),
    "source_growth": lambda c, _: round(c.growth, 3),
    "paper_cv": lambda _, paper_value: paper_value,
    "wall_s": lambda c, _: round(c.wall_s, 2),
}
"""cv.csv's columns: each one's value from a cell and the paper's CV for it."""


def _load_row(r: Mapping[str, Any]) -> list[Any]:
    """One row of load.csv: the sweep, the point's columns, our saturation reason, eq. 7, wall time."""
    return [r["sweep"], *r["point"].row(), r["saturated"] or "", r["wormhole_latency"], round(r["wall_s"], 2)]


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every load point and CV cell; write results.json (what the report is built from) and
    reproduction.json (the run facts and the Setup), for this run and any later ``--report-only``."""
    s = QUICK if args.quick else FULL
    sweep = [
        ("load", (s.load_mesh, spec, alg, rate, s, args.seed))
        for spec in s.sweeps
        for alg in ALGORITHMS
        for rate in spec.rates
    ]
    cv = [
        ("cv", (mesh, k, alg, s, args.repeat, args.seed))
        for mesh in s.cv_meshes
        for k in s.cv_ks
        if k < Topology.parse(mesh).size
        for alg in ALGORITHMS
    ]
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
    from coordinator.experiments.load import HEADER

    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    meta, s, by_sweep, cells = read_report_only("load", out, _read)
    paper = paper_cv()
    claims = load_claims(by_sweep, s.sweeps) + cv_claims(cells, paper)
    load_columns = ["sweep", *HEADER, "saturated_reason", "wormhole_latency_cycles", "wall_s"]
    write_csv(out / "load.csv", load_columns, [_load_row(r) for rows in by_sweep.values() for r in rows])
    cv_rows = [[f(c, paper.get(key)) for f in CV_CSV.values()] for key, c in sorted(cells.items())]
    write_csv(out / "cv.csv", list(CV_CSV), cv_rows)
    plots = write_plots(out, by_sweep, s, cells, paper)
    atomic_write(out / "report.md", build_report(by_sweep, cells, paper, s, claims, plots, out, meta))
    n_tasks = sum(len(v) for v in by_sweep.values()) + len(cells)
    ctx.say(
        f"load: {n_tasks} tasks in {meta['wall_s']:.1f} s; wrote {out / 'report.md'} and {len(plots)} plots"
    )
    for c in claims:
        ctx.say(f"{c.verdict}: {c.claim}")
    if any(not c.cv_steps for c in cells.values()):
        ctx.warn("meshcast: some CV cells measured no complete multicast, see report.md")
        return 1
    return 0
