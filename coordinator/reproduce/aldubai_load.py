"""Al-Dubai et al. (2009) under load, flit-level wormhole: latency and throughput against offered
load (Figs. 15–20) and the CV of Tables 4–5 with a message every 250 cycles from one source.

Every run is the flit-level wormhole reference model (coordinator/runtimes/wormhole_model.py, whose
records equal the nodes' engines): one step is one cycle; the report's prose is in data/reports/load.md.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from coordinator.analysis.metrics import multicast_metrics
from coordinator.analysis.verdicts import COLUMNS, Claim, Verdict, by_points, legend, repeat_warning
from coordinator.errors import UsageError
from coordinator.experiments.load import (
    HEADER,
    LoadPoint,
    Traffic,
    load_point,
    plot_load,
    poisson_plan,
    run_plan,
)
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
from node import defaults
from node.topology import Topology

__all__ = ["INTERARRIVAL_CYCLES", "CvCell", "LoadSpec", "cv_claims", "load_claims", "paper_cv"]

NAME = "load"
SUMMARY = (
    "Al-Dubai et al. (2009) under load, flit-level wormhole: latency/throughput (Figs. 15–20), "
    "CV (Tables 4–5)"
)
DEFAULT_REPEAT = 10  # CV streams per cell

FLITS, TS = (
    defaults.FLITS,
    defaults.TS,
)  # §4.2: 64-flit messages under load, start-up 33 cycles; the prep table is the nodes' default
QG_PREP_HIGH = 45  # Figs. 17–18
INTERARRIVAL_CYCLES = 250
DRAIN = 4000  # cycles after the last injection a run may take to deliver everything
SATURATION_SHORTFALL = 0.9  # accepted traffic below this share of the offered: saturated
RISE = 0.005  # a CV change per 20 destinations above this is a rise, not noise
CLOSE = 0.25  # a CV within this share of the paper's value counts as matching it
Key = tuple[str, int, str]  # (mesh, k, algorithm) of a CV cell
Rows = Sequence[Mapping[str, Any]]  # one sweep's load points, as load_task returns them


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """One load sweep: mesh, traffic mix, rates (messages per node per cycle), and which algorithms
    run; ``qg_prep`` overrides QG's preparation time, ``base`` names the sweep the others come from."""

    name: str
    title: str
    mesh: str
    k: int
    unicast_fraction: float
    rates: tuple[float, ...]
    algorithms: tuple[str, ...] = ALGORITHMS
    qg_prep: int | None = None
    base: str | None = None
    vcs: int = defaults.VCS  # virtual channels per physical channel (1: the paper's network as described)
    vc_classes: str = defaults.VC_CLASSES  # split: unicast and multicast worms on disjoint VCs


@dataclass(frozen=True, slots=True)
class Setup:
    """The sizes of both experiments (cycles)."""

    sweeps: tuple[LoadSpec, ...]
    duration: int
    warmup: int
    batches: int
    cv_meshes: tuple[str, ...]
    cv_ks: tuple[int, ...]
    cv_messages: int  # expected measured multicasts per stream
    cv_warmup: int  # multicasts per stream left out before measuring


def _rates(first: float, step: float, n: int = 7) -> tuple[float, ...]:
    """``n`` evenly spaced rates from ``first``."""
    return tuple(round(first + i * step, 6) for i in range(n))


def _sweeps(mesh: str, fig: str, k: int, first: float, step: float, mixed: bool = False) -> list[LoadSpec]:
    """The sweep of ``k``-destination traffic on ``mesh`` that the paper's ``fig`` plots."""
    size = mesh.split(":")[1]
    kind = f"mixed-{k}" if mixed else f"multicast-{k}"
    what = f"10% multicast to {k} destinations, 90% unicast" if mixed else f"all multicast, {k} destinations"
    return [LoadSpec(f"{size}-{kind}", f"{size.replace('x', '×')}, {what} ({fig})", mesh, k,
                     0.9 if mixed else 0.0, _rates(first, step))]  # fmt: skip


FULL_SWEEPS = (  # rates from light load to past saturation, as probed on these meshes
    *_sweeps("mesh:10x10", "Figs. 15a, 17", 10, 0.00004, 0.00008),
    *_sweeps("mesh:10x10", "Fig. 15b", 20, 0.00002, 0.00004),
    *_sweeps("mesh:16x16", "Figs. 16a, 18", 10, 0.00002, 0.00003),
    *_sweeps("mesh:16x16", "Fig. 16b", 20, 0.00001, 0.00002),
    *_sweeps("mesh:10x10", "Fig. 19", 10, 0.0001, 0.0004, mixed=True),
    *_sweeps("mesh:10x10", "Fig. 20", 20, 0.0001, 0.0003, mixed=True),
)
FULL_SWEEPS += tuple(
    replace(
        x,
        name=f"{x.name}-qg45",
        title=f"{x.title.split(' (')[0]}, QG preparation {QG_PREP_HIGH} cycles "
        f"({'Fig. 17' if '10x10' in x.mesh else 'Fig. 18'})",
        algorithms=("qg",),
        qg_prep=QG_PREP_HIGH,
        base=x.name,
    )
    for x in FULL_SWEEPS
    if x.k == 10 and x.unicast_fraction == 0
)
VCS, VC_CLASSES = 2, "split"  # the mixed sweeps again with unicast and multicast worms on VCs of their own


def _with_vcs(x: LoadSpec) -> LoadSpec:
    """A mixed sweep again with two virtual channels: unicast worms on one, multicast worms on the other."""
    head, fig = x.title.rsplit(" (", 1) if " (" in x.title else (x.title, "")
    title = f"{head}, {VCS} virtual channels, {VC_CLASSES} classes" + (f" ({fig}" if fig else "")
    return replace(x, name=f"{x.name}-vc{VCS}{VC_CLASSES}", title=title,
                   vcs=VCS, vc_classes=VC_CLASSES)  # fmt: skip


FULL_SWEEPS += tuple(_with_vcs(x) for x in FULL_SWEEPS if x.unicast_fraction > 0)
QUICK_SWEEPS: tuple[LoadSpec, ...] = (
    LoadSpec("4x4-multicast-3", "4×4, all multicast, 3 destinations", "mesh:4x4", 3, 0.0, (0.0005, 0.02)),
    LoadSpec("4x4-mixed-3", "4×4, 10% multicast, 90% unicast", "mesh:4x4", 3, 0.9, (0.001, 0.05)),
)
QUICK_SWEEPS += (_with_vcs(QUICK_SWEEPS[-1]),)
FULL = Setup(FULL_SWEEPS, 16_000, 2_000, 10, ("mesh:16x16", "mesh:32x32"), (20, 40, 60, 80), 30, 10)
QUICK = Setup(QUICK_SWEEPS, 1_500, 300, 4, ("mesh:6x6",), (4, 8), 6, 2)


def _settings(
    max_steps: int, prep: int | None = None, vcs: int = defaults.VCS, vc_classes: str = defaults.VC_CLASSES
) -> RunSettings:
    """Flit-level wormhole on the reference model: shared contention, all-port, four injection channels."""
    return RunSettings(contention="shared", port_model="all-port", runtime="model", max_steps=max_steps,
                       switching="wormhole", flits=FLITS, ts=TS, prep=prep, vcs=vcs,
                       vc_classes=vc_classes)  # fmt: skip


# -- the load sweep ----------------------------------------------------------------------------------
def load_task(spec: LoadSpec, alg: str, rate: float, s: Setup, seed: int) -> dict[str, Any]:
    """One offered-load point: ``load_point``'s batch-means statistics and our saturation test."""
    topo = Topology.parse(spec.mesh)
    traffic = Traffic(rate, spec.k, s.duration, spec.unicast_fraction, seed=seed)
    prep = spec.qg_prep if alg == "qg" else None
    t0 = time.perf_counter()
    settings = _settings(s.duration + DRAIN, prep, spec.vcs, spec.vc_classes)
    p = load_point(topo, alg, traffic, settings, s.warmup, s.batches, latency_of=alg)
    reason = p.saturated
    if reason is None and p.throughput < SATURATION_SHORTFALL * p.offered:
        reason = f"accepted {p.throughput:.4f} of {p.offered:.4f} offered"
    return dict(sweep=spec.name, point=p, saturated=reason, wall_s=time.perf_counter() - t0)


# -- CV with background load --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CvCell:
    """One (mesh, k, algorithm) cell: per-multicast CVs of arrival latency (cycles) pooled over streams."""

    mesh: str
    k: int
    algorithm: str
    cvs: list[float]
    times: list[float]
    sources: list[tuple[int, int]]
    growth: float  # mean time of a stream's last third of multicasts over its first third
    wall_s: float
    incomplete: list[str] = field(default_factory=list)

    @property
    def key(self) -> Key:
        """(mesh, k, algorithm), the cell's place in the tables."""
        return self.mesh, self.k, self.algorithm


def cv_cell(mesh: str, k: int, alg: str, s: Setup, streams: int, seed: int) -> CvCell:
    """``streams`` single-source runs (each from a seeded random source) of ``alg``, a multicast every
    250 cycles on average (Poisson); multicasts injected in the warm-up are left out."""
    topo = Topology.parse(mesh)
    rate = 1 / INTERARRIVAL_CYCLES
    rng = random.Random(seed * 7919 + k)
    nodes = list(topo.nodes())
    duration = math.ceil((s.cv_warmup + s.cv_messages) / rate)
    t0 = time.perf_counter()
    sources: list[tuple[int, int]] = [rng.choice(nodes) for _ in range(streams)]  # runs draw nothing from rng
    cvs: list[float] = []
    times: list[list[float]] = []
    incomplete: list[str] = []
    for i, src in enumerate(sources):
        plan = poisson_plan(topo, alg, Traffic(rate, k, duration, 0.0, seed=seed + i, sources=(src,)))
        raw = run_plan(plan, _settings(50 * duration + 20 * topo.size))
        incomplete += raw.incomplete
        recs = [r for r in multicast_metrics(plan, raw) if r.injected >= s.cv_warmup * INTERARRIVAL_CYCLES]
        cvs += [r.cv for r in recs if not r.missing and r.cv is not None]
        times.append([float(r.time) for r in recs if r.time is not None])
    growth = [
        statistics.fmean(ts[-(len(ts) // 3) :]) / max(1e-9, statistics.fmean(ts[: len(ts) // 3]))
        for ts in times
        if len(ts) >= 3
    ]
    pooled = [t for ts in times for t in ts]
    return CvCell(
        mesh, k, alg, cvs, pooled, sources, max(growth, default=1.0), time.perf_counter() - t0, incomplete
    )


def paper_cv() -> dict[Key, float]:
    """Al-Dubai et al.'s Tables 4–5 (``mesh:16x16``, k, algorithm) → CV, from the project's package data."""
    return {(f"mesh:{m}", k, a): cv for (m, k, a), cv in paper_data().cv.items()}


# -- running ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LoadTask:
    """One offered-load point of a sweep (:func:`load_task`)."""

    spec: LoadSpec
    algorithm: str
    rate: float
    setup: Setup
    seed: int

    def run(self) -> dict[str, Any]:
        return load_task(self.spec, self.algorithm, self.rate, self.setup, self.seed)

    def cost(self) -> float:
        """The larger meshes' high rates first."""
        return Topology.parse(self.spec.mesh).size * self.spec.k * self.rate / max(self.spec.rates)


@dataclass(frozen=True, slots=True)
class CvTask:
    """One CV cell: ``streams`` single-source runs of ``algorithm`` on ``mesh`` (:func:`cv_cell`)."""

    mesh: str
    k: int
    algorithm: str
    setup: Setup
    streams: int
    seed: int

    def run(self) -> CvCell:
        return cv_cell(self.mesh, self.k, self.algorithm, self.setup, self.streams, self.seed)

    def cost(self) -> float:
        """The 32×32 cells first."""
        return Topology.parse(self.mesh).size * self.k * 0.01


Task = LoadTask | CvTask


def _do(task: Task) -> Any:
    """A task's result: a load point's row (``load_task``) or a CvCell (``cv_cell``)."""
    return task.run()


def _cost(t: Task) -> float:
    """The 32×32 CV cells and the larger meshes' high rates first."""
    return t.cost()


# -- claims -------------------------------------------------------------------------------------------
Sweeps = Sequence[tuple[str, int, Rows]]  # (mesh, destinations, load points) of each sweep judged


def _claim(key: str, verdict: Verdict, numbers: Mapping[str, Any], parts: Sequence[Mapping[str, Any]] = (),
           **fields: Any) -> Claim:  # fmt: skip
    """A claim from section ``key`` of data/reports/load.md: source, text, evidence (filled from
    ``numbers`` and ``fields``) and a line filled per sweep of ``parts``, listed as ``{parts}``."""
    source, said, evidence, *each = texts(NAME)[key].split("\n")
    listed = "; ".join(each[0].format(**p) for p in parts) if each else ""
    return Claim(source, said, verdict, evidence.format(**{**numbers, **fields}, parts=listed), numbers)


def _held(key: str, hits: int, points: int, parts: Sequence[Mapping[str, Any]] = (), **fields: Any) -> Claim:
    """A claim over ``points`` whose direction held at ``hits`` of them."""
    return _claim(key, by_points(hits, points), {"hits": hits, "points": points}, parts, **fields)


def _listing(values: Mapping[str, float | None], digits: int, order: Sequence[str] = ALGORITHMS) -> str:
    """``DP 1.0, MP 2.0, …``: each algorithm's value in ``order`` (an em dash when missing)."""
    return ", ".join(f"{a.upper()} {fmt(values.get(a), digits)}" for a in order)


def _at_lowest(rows: Rows) -> tuple[float, dict[str, float | None]]:
    """A sweep's lowest rate and each algorithm's latency there (None: saturated)."""
    low = min(r["point"].rate for r in rows)
    return low, {r["point"].algorithm: r["point"].latency for r in rows if r["point"].rate == low}


def _name(mesh: str, k: int) -> str:
    return f"{mesh.split(':')[1].replace('x', '×')}, {k} destinations"


def _lowest(key: str, sweeps: Sweeps, fast: Sequence[str], slow: Sequence[str]) -> Claim:
    """At each sweep's lowest rate, every one of ``fast`` below every one of ``slow``."""
    hits, parts = 0, []
    for mesh, k, rows in sweeps:
        low, lat = _at_lowest(rows)
        known = {a: v for a, v in lat.items() if v is not None}
        ok = set(fast) | set(slow) <= set(known) and max(known[a] for a in fast) < min(known[a] for a in slow)
        hits += ok
        order = sorted(known, key=lambda a: known[a])
        parts.append(dict(sweep=_name(mesh, k), low=low, lat=_listing(lat, 1, order)))
    return _held(key, hits, len(parts), parts)


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
    thr = [_max_throughput(rows) for _, _, rows in sweeps]
    hits = sum(min(t["cp"], t["qg"]) > max(t["dp"], t["mp"]) for t in thr)
    parts = [
        dict(
            sweep=_name(m, k),
            thr=_listing(t, 4),
            sat=_listing({a: _sat_offered(rows, a) for a in ALGORITHMS}, 4),
        )
        for (m, k, rows), t in zip(sweeps, thr, strict=True)
    ]
    return _held("sensitivity", hits, len(parts), parts)


def _qg_best(sweeps: Sweeps, key: str, runner_up: str | None = None) -> Claim:
    """QG first (then ``runner_up``) in throughput and in latency at QG's heaviest unsaturated rate."""
    want, parts, tallies = ["qg", *([runner_up] if runner_up else [])], [], [0, 0, 0]
    for mesh, k, rows in sweeps:
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
        parts.append(dict(sweep=_name(mesh, k), thr=_listing(thr, 4, rank), heavy=heavy))
    names = ("hits", "throughput_hits", "latency_hits")
    numbers = {**dict(zip(names, tallies, strict=True)), "points": len(parts)}
    return _claim(key, by_points(tallies[0], len(parts)), numbers, parts)


def _merged(by_sweep: Mapping[str, Rows], x: LoadSpec) -> list[Mapping[str, Any]]:
    """A sweep's rows, with the algorithms it does not run taken from its ``base`` sweep."""
    own = list(by_sweep.get(x.name, []))
    base = [r for r in by_sweep.get(x.base or "", []) if r["point"].algorithm not in x.algorithms]
    return base + own if own else []


def load_claims(by_sweep: Mapping[str, Rows], sweeps: Sequence[LoadSpec]) -> list[Claim]:
    """The paper's claims about latency and throughput under load, one point per sweep of their traffic."""

    def judged(mixed: bool, qg45: bool, vcs: bool = False) -> list[tuple[str, int, Rows]]:
        return [(x.mesh, x.k, rows) for x in sweeps
                if (x.unicast_fraction > 0) == mixed and (x.qg_prep is not None) == qg45
                and (x.vcs > 1) == vcs and (rows := _merged(by_sweep, x))]  # fmt: skip

    multi, prep, mixed = judged(False, False), judged(False, True), judged(True, False)
    mixed_vcs = judged(True, False, vcs=True)
    claims = []
    if multi:
        claims += [_lowest("low-load", multi, ("dp", "mp"), ("qg", "cp")), _sensitivity(multi)]
        claims += [_qg_best(multi, "high-traffic")]
    claims += [_qg_best(prep, "qg-prep")] if prep else []
    if mixed:
        claims += [
            _qg_best(mixed, "heavy-mixed", "cp"),
            _lowest("light-mixed", mixed, ("dp", "mp", "qg"), ("cp",)),
        ]
    if mixed_vcs:  # the same claims with unicast and multicast worms on virtual channels of their own
        claims += [
            _qg_best(mixed_vcs, "heavy-mixed-vcs", "cp"),
            _lowest("light-mixed-vcs", mixed_vcs, ("dp", "mp", "qg"), ("cp",)),
        ]
    return claims


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def cv_claims(cells: Mapping[Key, CvCell], paper: Mapping[Key, float]) -> list[Claim]:
    """Tables 4–5's claims on the flit-level CVs: QG lowest, growth with k, larger mesh higher, values."""
    meshes = sorted({m for m, _, _ in cells}, key=lambda m: Topology.parse(m).size)
    ks = sorted({k for _, k, _ in cells})
    cv = {key: statistics.fmean(c.cvs) for key, c in cells.items() if c.cvs}
    if not cv:
        return []
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
        claims.append(_held("cv-grow", hits, len(slope), grows=grown, rise=RISE))
    pairs = [(k, a) for k in ks for a in ALGORITHMS if (meshes[0], k, a) in cv and (meshes[-1], k, a) in cv]
    if len(meshes) >= 2 and pairs:
        higher = sum(cv[(meshes[-1], k, a)] > cv[(meshes[0], k, a)] for k, a in pairs)
        claims.append(_held("cv-larger", higher, len(pairs), small=meshes[0], large=meshes[-1]))
    both = [key for key in cv if key in paper]
    if both:
        close = sum(abs(cv[key] - paper[key]) <= CLOSE * paper[key] for key in both)
        diffs = [cv[key] - paper[key] for key in both]
        fields: dict[str, Any] = dict(
            mean=statistics.fmean(map(abs, diffs)), bias=statistics.fmean(diffs), close=CLOSE
        )
        claims.append(_held("cv-values", close, len(both), **fields))
    return claims


# -- report ---------------------------------------------------------------------------------------
CV_NOTE = "one source, a multicast every 250 cycles on average; paper dashed"


def _as_plotted(r: Mapping[str, Any]) -> LoadPoint:
    """A load point as plotted: marked saturated (no latency) by our test as well as ``load_point``'s."""
    p = r["point"]
    name = f"{p.algorithm} (prep {QG_PREP_HIGH})" if r["sweep"].endswith("-qg45") else p.algorithm
    return replace(p, algorithm=name, saturated=r["saturated"], latency=None if r["saturated"] else p.latency)


def write_plots(
    out: Path, by_sweep: Mapping[str, Rows], s: Setup, cells: Mapping[Key, CvCell], paper: Mapping[Key, float]
) -> list[Path]:
    """Latency and throughput against offered load per sweep; per CV mesh, the CV against k."""
    plots: list[Path] = []
    for spec in s.sweeps:
        if rows := _merged(by_sweep, spec):
            plots.append(out / "plots" / f"load_{spec.name}.png")
            title = f"{spec.title}; flit-level wormhole, L = {FLITS}, Ts = {TS}, cycles"
            plot_load([_as_plotted(r) for r in rows], plots[-1], title)
    xs = [float(k) for k in s.cv_ks]
    for mesh in s.cv_meshes:
        series = []
        for a in ALGORITHMS:
            ours = [_mean(c.cvs) if (c := cells.get((mesh, k, a))) else None for k in s.cv_ks]
            series.append(Series(f"{a.upper()} (ours)", xs, ours, colour=COLOURS[a]))
            if any((mesh, k, a) in paper for k in s.cv_ks):
                theirs = [paper.get((mesh, k, a)) for k in s.cv_ks]
                series.append(Series(f"{a.upper()} (paper)", xs, theirs, paper=True, colour=COLOURS[a]))
        path = out / "plots" / f"cv_{mesh.split(':')[1]}.png"
        title = f"{mesh}: CV of the multicast latency, flit-level wormhole"
        plots.append(
            plot_series(path, series, title, "destinations", "coefficient of variation", note=CV_NOTE)
        )
    return plots


def _load_cell(x: Mapping[str, Any] | None) -> str:
    """``latency / throughput`` of one point (``saturated`` instead of its latency), — if not run."""
    if x is None:
        return "—"
    p, why = x["point"], x["saturated"] or ""
    return f"{'deadlock' if _stuck(x) else 'saturated' if why else fmt(p.latency, 1)} / {p.throughput:.4f}"


def _stuck(x: Mapping[str, Any]) -> bool:
    """Did this point's run end in a deadlock (rather than not draining in time)?"""
    return (x["saturated"] or "").startswith("deadlock")


def _deadlocks(by_sweep: Mapping[str, Rows], s: Setup) -> str:
    """The paragraph naming, per sweep and algorithm, the lowest rate whose run deadlocked (one VC)."""
    first: dict[tuple[str, str], float] = {}
    for x in (x for x in s.sweeps if x.vcs == 1):
        for r in by_sweep.get(x.name, []):
            key = (x.title.split(" (")[0], r["point"].algorithm.upper())
            if _stuck(r):
                first[key] = min(first.get(key, r["point"].rate), r["point"].rate)
    if not first:
        return ""
    where = "; ".join(f"{t}: {a} from {rate:g}" for (t, a), rate in first.items())
    return texts(NAME)["deadlocks"].format(where=where) + "\n\n"


def _base(x: LoadSpec) -> str:
    """The one-channel sweep a sweep with virtual channels repeats."""
    return x.name.removesuffix(f"-vc{x.vcs}{x.vc_classes}")


def _vcs_text(by_sweep: Mapping[str, Rows], s: Setup) -> str:
    """The paragraph on the sweeps run again with virtual channels: deadlocked points beside one VC's."""
    runs = [x for x in s.sweeps if x.vcs > 1 and by_sweep.get(x.name)]
    if not runs:
        return ""

    def dead(name: str) -> tuple[int, int]:
        rows = by_sweep.get(name, [])
        return sum(map(_stuck, rows)), len(rows)

    t = texts(NAME)
    where = "; ".join(
        t["vcs-sweep"].format(title=x.title, dead=d[0], points=d[1], dead1=d1[0], points1=d1[1])
        for x in runs
        for d, d1 in [(dead(x.name), dead(_base(x)))]
    )
    x = runs[0]
    fields = dict(vcs=x.vcs, classes=x.vc_classes, buffer=defaults.BUFFER_FLITS, where=where)
    return t["vcs"].format(**fields) + "\n\n"


def _load_table(rows: Rows) -> str:
    """Per rate: the offered load and each algorithm's latency / throughput."""
    algs = [a for a in ALGORITHMS if any(r["point"].algorithm == a for r in rows)]
    header = ["rate (msg/node/cycle)", "offered (deliveries/node/cycle)"] + [
        f"{a.upper()} latency (cycles) / throughput" for a in algs
    ]
    by: dict[float, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for r in rows:
        by[r["point"].rate][r["point"].algorithm] = r
    table = [
        [f"{rate:g}", f"{statistics.fmean(x['point'].offered for x in d.values()):.4f}"]
        + [_load_cell(d.get(a)) for a in algs]
        for rate, d in sorted(by.items())
    ]
    return markdown_table(header, table, ["r"] * len(header))


def _cv_table(cells: Mapping[Key, CvCell], paper: Mapping[Key, float], mesh: str, ks: Sequence[int]) -> str:
    """Per k: each algorithm's CV (ours / the paper's), its mean latency and the multicasts in a cell."""
    header = ["k"] + [f"{a.upper()} CV ours / paper" for a in ALGORITHMS]
    header += [f"{a.upper()} latency" for a in ALGORITHMS] + ["multicasts per cell"]
    rows = []
    for k in ks:
        got = {a: cells[(mesh, k, a)] for a in ALGORITHMS if (mesh, k, a) in cells}
        cvs = [
            f"{fmt(_mean(c.cvs), 3)} / {fmt(paper.get(c.key), 3)}" if (c := got.get(a)) else "—"
            for a in ALGORITHMS
        ]
        lats = [fmt(_mean(c.times), 1) if (c := got.get(a)) else "—" for a in ALGORITHMS]
        rows.append([k, *cvs, *lats, min((len(c.cvs) for c in got.values()), default=0)])
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
    t = texts(NAME)
    slow = max(cells.values(), key=lambda c: c.wall_s, default=None)
    slowest = t["slowest"].format(c=slow, alg=slow.algorithm.upper()) if slow else ""
    grown = sorted({f"{c.algorithm.upper()} ({c.mesh.split(':')[1]}, k = {c.k})" for c in cells.values()
                    if c.growth > 1.5})  # fmt: skip
    cut = sorted(
        {f"{c.algorithm.upper()} ({c.mesh.split(':')[1]}, k = {c.k})" for c in cells.values() if c.incomplete}
    )
    added = "".join(
        t["added"].format(**a, names=", ".join(a["sweeps"]), n=len(a["sweeps"]))
        for a in meta.get("added", [])
    )
    report = t["report"].format(
        **{**meta, "added": added},
        slowest=slowest,
        s=s,
        flits=FLITS,
        ts=TS,
        qg_prep=QG_PREP_HIGH,
        drain=DRAIN,
        shortfall=SATURATION_SHORTFALL,
        interval=INTERARRIVAL_CYCLES,
        note=t["note"].format(cells=", ".join(grown)) + "\n\n" if grown else "",
        cut=t["cut"].format(cells=", ".join(cut)) + "\n\n" if cut else "",
        deadlocks=_deadlocks(by_sweep, s),
        vcs=_vcs_text(by_sweep, s),
        legend=legend(meta["repeat"]),
        claims="".join(c.markdown() + "\n" for c in claims),
        load_tables="\n".join(f"### {x.title}\n\n{_load_table(_merged(by_sweep, x))}" for x in s.sweeps),
        cv_tables="\n".join(f"### {m}\n\n{_cv_table(cells, paper, m, s.cv_ks)}" for m in s.cv_meshes),
        plots="".join(link + "\n" for link in plot_links(plots, out)),
    )
    return report + "\n"


# -- command ---------------------------------------------------------------------------------------
USES = ("jobs", "quick")
OPTIONS = (
    Option("--no-cv", "skip the CV experiment", None, flag=True),
    Option("--no-sweep", "skip the load sweep", None, flag=True),
    Option("--sweeps", "run only these load sweeps (a comma list of names, e.g. 10x10-mixed-10-vc2split) "
           "into an earlier run's --out, replacing their points and keeping everything else", None),
)  # fmt: skip
CV_COLUMNS = (
    "mesh",
    "k",
    "algorithm",
    "multicasts",
    "cv",
    "mean_time",
    "source_growth",
    "paper_cv",
    "wall_s",
)


def _cv_row(c: CvCell, paper_value: float | None) -> list[Any]:
    """One row of cv.csv (CV_COLUMNS): a cell's count, mean CV and latency, source growth, the paper's CV."""
    return [c.mesh, c.k, c.algorithm, len(c.cvs), _mean(c.cvs), _mean(c.times), round(c.growth, 3),
            paper_value, round(c.wall_s, 2)]  # fmt: skip


def _load_row(r: Mapping[str, Any]) -> list[Any]:
    """One row of load.csv: the sweep, the point's columns, our saturation reason, wall time."""
    return [r["sweep"], *r["point"].row(), r["saturated"] or "", round(r["wall_s"], 2)]


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every load point and CV cell; write results.json and reproduction.json (facts and Setup)."""
    s, seed = (QUICK if args.quick else FULL), args.seed
    sweep: list[Task] = [LoadTask(x, a, r, s, seed) for x in s.sweeps for a in x.algorithms for r in x.rates]
    cv_points = [(m, k) for m in s.cv_meshes for k in s.cv_ks if k < Topology.parse(m).size]
    cv: list[Task] = [CvTask(m, k, a, s, args.repeat, seed) for m, k in cv_points for a in ALGORITHMS]
    watch = Stopwatch()
    tasks: list[Task] = ([] if args.no_sweep else sweep) + ([] if args.no_cv else cv)
    results = run_pool(_do, tasks, args.jobs, ctx.progress, _cost)
    load = [{**r, "point": asdict(r["point"])} for r in results if not isinstance(r, CvCell)]
    cells = [asdict(c) for c in results if isinstance(c, CvCell)]
    facts = run_facts(command_line(NAME, args), watch, repeat=args.repeat, seed=args.seed)
    atomic_write(out / "results.json", json.dumps({"load": load, "cv": cells}))
    write_json(out / "reproduction.json", {**facts, "jobs": args.jobs, "setup": asdict(s)})


def _add_sweeps(args: Any, ctx: Context, out: Path) -> None:
    """Run only the sweeps named by ``--sweeps`` (with the earlier run's sizes and seed) into ``out``: their
    points replace any of the same name in results.json; reproduction.json lists the addition."""
    meta, old, _, _ = read_report_only(NAME, out, _read)
    known = {x.name: x for x in (QUICK if args.quick else FULL).sweeps}
    names = [n.strip() for n in args.sweeps.split(",") if n.strip()]
    if not names or (bad := [n for n in names if n not in known]):
        raise UsageError(f"--sweeps: unknown sweep {(bad or [''])[0]!r} (known: {', '.join(known)})")
    order = [x.name for x in old.sweeps] + [n for n in known if n not in {x.name for x in old.sweeps}]
    specs = {**{x.name: x for x in old.sweeps}, **{n: known[n] for n in names}}
    s = replace(old, sweeps=tuple(specs[n] for n in order if n in specs))
    tasks: list[Task] = [LoadTask(known[n], a, r, s, meta["seed"]) for n in names
                         for a in known[n].algorithms for r in known[n].rates]  # fmt: skip
    watch = Stopwatch()
    results = run_pool(_do, tasks, args.jobs, ctx.progress, _cost)
    data = json.loads((out / "results.json").read_text())
    data["load"] = [r for r in data["load"] if r["sweep"] not in names]
    data["load"] += [{**r, "point": asdict(r["point"])} for r in results]
    if args.seed != meta["seed"]:
        raise UsageError(f"--sweeps: the run in {out} has seed {meta['seed']}, not {args.seed}")
    same = SimpleNamespace(repeat=meta["repeat"], seed=meta["seed"], quick=args.quick)
    facts = run_facts(command_line(NAME, same, f"--sweeps {','.join(names)}"), watch, jobs=args.jobs)
    added = [a for a in meta.get("added", []) if not set(a["sweeps"]) <= set(names)]
    meta |= {"setup": asdict(s), "added": [*added, {**facts, "sweeps": names}]}
    atomic_write(out / "results.json", json.dumps(data))
    write_json(out / "reproduction.json", meta)


BySweep = dict[str, list[dict[str, Any]]]


def _read(out: Path) -> tuple[dict[str, Any], Setup, BySweep, dict[Key, CvCell]]:
    """reproduction.json's facts and Setup, and results.json's load points by sweep and CV cells by key."""
    meta = json.loads((out / "reproduction.json").read_text())
    d = meta["setup"]
    sweeps = tuple(
        LoadSpec(**{**x, "rates": tuple(x["rates"]), "algorithms": tuple(x["algorithms"])})
        for x in d["sweeps"]
    )
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
    if args.sweeps and not args.report_only:
        _add_sweeps(args, ctx, out)
    elif not args.report_only:
        _emulate(args, ctx, out)
    meta, s, by_sweep, cells = read_report_only("load", out, _read)
    paper = paper_cv()
    claims = load_claims(by_sweep, s.sweeps) + cv_claims(cells, paper)
    load_columns = ["sweep", *HEADER, "saturated_reason", "wall_s"]
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
    if any(not c.cvs for c in cells.values()):
        ctx.warn("meshcast: some CV cells measured no complete multicast, see report.md")
        return 1
    return 0
