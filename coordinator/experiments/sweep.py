"""``meshcast sweep``: every point (number of destinations) × repetition × algorithm, emulated together.

A sweep draws ``repeat`` random destination sets for each point ``k`` (seeded), gives the very
same sets to every algorithm (as the seed papers compared them), and runs all the multicasts at
once in *isolated* contention: each multicast sees an idle network, so they do not affect each
other's numbers and a whole sweep costs one emulation instead of one per point. Above
``--chunk`` multicasts (default 2,000) the sweep is dealt into several emulations — the numbers
are the same, the lockstep frames stay under the wire's size limit — which ``--jobs`` worker
processes can run side by side. It writes

* ``tidy.csv``: one row per multicast (topology, algorithm, k, repetition, source, time,
  traffic, additional_traffic, mean_arrival, cv, missing);
* ``summary.csv``: per algorithm × k, the mean and 95% confidence interval of each metric;
* ``sweep.json``: the parameters, run status and errors, for provenance.

Shared contention is refused: multicasts that compete for ports and links would measure the
load of the whole sweep, not each point, so there is no single-emulation equivalent (run such
experiments with ``meshcast run`` one point at a time).
"""

from __future__ import annotations

import json
import multiprocessing
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

import trio

from coordinator.analysis.fidelity import Fidelity, judge_run
from coordinator.analysis.metrics import SUMMARY_FIELDS, ci95, multicast_metrics
from coordinator.analysis.result_types import MulticastResult
from coordinator.experiments.run import emulate, measured, paused_gc
from coordinator.output.results import atomic_write, write_csv
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Plan, PlanError, random_plan
from node.topology import Coord, Topology

__all__ = [
    "DEFAULT_CHUNK",
    "SUMMARY_COLUMNS",
    "TIDY_COLUMNS",
    "SweepResult",
    "SweepSpec",
    "check_settings",
    "parse_dests",
    "run_sweep",
    "summarise_tidy",
    "sweep",
    "sweep_many",
    "sweep_plan",
    "write_sweep",
]

Progress = Callable[[int, int], None]

#: Most multicasts per emulation (see :func:`sweep_many`); 2,000 20×20 tree multicasts keep the
#: largest lockstep frame near 2 MB, a quarter of the wire's 8 MB limit.
DEFAULT_CHUNK = 2000

TIDY_COLUMNS = (
    "topology",
    "algorithm",
    "k",
    "repetition",
    "source",
    "time",
    "traffic",
    "additional_traffic",
    "mean_arrival",
    "cv",
    "missing",
)
SUMMARY_COLUMNS = (
    "topology",
    "algorithm",
    "k",
    "n",
    "complete",
    *(f"{m}_{s}" for m in SUMMARY_FIELDS for s in ("mean", "ci_low", "ci_high")),
)


def parse_dests(text: str) -> list[int]:
    """Destination counts from ``start:stop:step`` (stop included) or a comma list ``5,10,20``."""
    t = text.strip()
    if not t:
        raise PlanError("--dests is empty: give start:stop:step (e.g. 20:380:20) or a list (5,10,20)")
    if ":" in t:
        parts = t.split(":")
        if len(parts) != 3:
            raise PlanError(f"--dests {text!r}: a range is start:stop:step, e.g. 20:380:20")
        try:
            start, stop, step = (int(p) for p in parts)
        except ValueError:
            raise PlanError(f"--dests {text!r}: start, stop and step must be integers") from None
        if step < 1:
            raise PlanError(f"--dests {text!r}: the step must be at least 1, got {step}")
        if start < 1:
            raise PlanError(f"--dests {text!r}: a multicast needs at least 1 destination, got {start}")
        if stop < start:
            raise PlanError(f"--dests {text!r}: stop {stop} is below start {start}")
        return list(range(start, stop + 1, step))
    out: list[int] = []
    for item in t.split(","):
        try:
            k = int(item)
        except ValueError:
            raise PlanError(f"--dests {text!r}: {item.strip()!r} is not an integer") from None
        if k < 1:
            raise PlanError(f"--dests {text!r}: a multicast needs at least 1 destination, got {k}")
        if k in out:
            raise PlanError(f"--dests {text!r}: {k} is listed twice")
        out.append(k)
    return out


def sweep_plan(
    topology: Topology,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    params: Mapping[str, Any] | None = None,
) -> tuple[Plan, list[tuple[int, int]]]:
    """The sweep's plan and, per multicast id, its (k, repetition).

    ``source`` None draws a source per destination set (the same for every algorithm).
    """
    if not algorithms:
        raise PlanError("a sweep needs at least one algorithm")
    if len(set(algorithms)) != len(algorithms):
        raise PlanError(f"an algorithm is listed twice in {','.join(algorithms)}")
    if not ks:
        raise PlanError("a sweep needs at least one number of destinations")
    plan = random_plan(topology, algorithms, list(ks), repeat, seed, source, params)
    sets = len(ks) * repeat
    points: list[tuple[int, int]] = []
    for i, m in enumerate(plan.multicasts):
        j = i % sets
        k, rep = ks[j // repeat], j % repeat
        if m.id != i or len(m.destinations) != k:  # random_plan's documented order, checked
            raise RuntimeError(f"multicast {m.id} does not match sweep point k={k}, repetition {rep}")
        points.append((k, rep))
    return plan, points


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """What one sweep runs: a topology, algorithms, points, repetitions, seed and source."""

    topology: str
    algorithms: tuple[str, ...]
    ks: tuple[int, ...]
    repeat: int
    seed: int = 1
    source: Coord | None = (0, 0)
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SweepResult:
    """A sweep's rows and how its emulations went."""

    tidy: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    incomplete: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    wall_s: float = 0.0  # emulation wall time, summed over the sweep's emulations
    emulations: int = 1
    fidelity: list[Fidelity] = field(default_factory=list)
    """Free clock: each emulation's fidelity verdict (:mod:`coordinator.analysis.fidelity`)."""

    def fidelity_line(self) -> str | None:
        """One line for the whole sweep: the first emulation whose verdict is not ok, else the first."""
        if not self.fidelity:
            return None
        bad = [f for f in self.fidelity if f.ok is False]
        pick = bad[0] if bad else self.fidelity[0]
        line = pick.line()
        n = len(self.fidelity)
        if n > 1:
            line += f" [{len(bad)} of {n} emulations NOT ok]" if bad else " [every emulation]"
        return line

    @property
    def complete(self) -> bool:
        return not self.incomplete and all(r["missing"] == 0 for r in self.tidy)


def _round(v: float | None, digits: int = 6) -> float | None:
    return None if v is None else round(v, digits)


def _tidy(
    plan: Plan, points: Sequence[tuple[int, int]], records: Sequence[MulticastResult]
) -> list[dict[str, Any]]:
    rows = []
    for m, (k, rep), r in zip(plan.multicasts, points, records, strict=True):
        rows.append(
            {
                "topology": plan.topology.spec,
                "algorithm": m.algorithm,
                "k": k,
                "repetition": rep,
                "source": f"{m.source[0]},{m.source[1]}",
                "time": r.time,
                "traffic": r.traffic,
                "additional_traffic": r.additional_traffic,
                "mean_arrival": _round(r.mean_arrival),
                "cv": _round(r.cv),
                "missing": len(r.missing),
            }
        )
    return rows


def summarise_tidy(tidy: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and 95% CI of every metric per topology × algorithm × k, in first-seen order."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in tidy:
        groups[(r["topology"], r["algorithm"], r["k"])].append(r)
    out = []
    for (topo, alg, k), rows in groups.items():
        row: dict[str, Any] = {
            "topology": topo,
            "algorithm": alg,
            "k": k,
            "n": len(rows),
            "complete": sum(1 for r in rows if r["missing"] == 0),
        }
        for m in SUMMARY_FIELDS:
            s = ci95([r[m] for r in rows if r[m] is not None])
            row[f"{m}_mean"] = _round(s["mean"])
            row[f"{m}_ci_low"] = _round(s["ci95"][0])
            row[f"{m}_ci_high"] = _round(s["ci95"][1])
        out.append(row)
    return out


def check_settings(settings: RunSettings) -> None:
    """PlanError unless the settings allow running a sweep's multicasts together (isolated contention)."""
    if settings.contention != "isolated":
        raise PlanError(
            f"a sweep runs its multicasts together in one emulation, which needs --contention isolated "
            f"(got {settings.contention!r}); shared-contention experiments measure the load of "
            "everything injected together, so run them point by point with 'meshcast run'"
        )


# -- running: chunks, GC, processes ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Chunk:
    """One emulation's share of a sweep: a sub-plan and its multicasts' (k, repetition)."""

    sweep: int
    index: int
    of: int
    plan: Plan
    points: tuple[tuple[int, int], ...]

    @property
    def deliveries(self) -> int:
        return sum(len(m.destinations) for m in self.plan.multicasts)


@dataclass(frozen=True, slots=True)
class _ChunkResult:
    sweep: int
    rows: list[tuple[int, dict[str, Any]]]  # (multicast id, tidy row)
    incomplete: list[str]
    errors: list[dict[str, Any]]
    steps: int
    wall_s: float
    fidelity: Fidelity | None = None


def _chunks(sweep_no: int, plan: Plan, points: Sequence[tuple[int, int]], size: int) -> list[_Chunk]:
    """Split ``plan`` into emulations of at most ``size`` multicasts (0: one), dealt round-robin.

    Dealing (multicast i to chunk i mod n) gives every chunk the same mix of algorithms and k,
    so chunks take about the same time and carry about the same packets per link and step.
    """
    n = 1 if size <= 0 else max(1, -(-len(plan.multicasts) // size))
    out = []
    for i in range(n):
        mcs = plan.multicasts[i::n]
        pts = tuple(points[i::n])
        out.append(_Chunk(sweep_no, i, n, Plan(plan.topology, tuple(mcs)), pts))
    return out


_worker_queue: Any = None


def _init_worker(queue: Any) -> None:
    global _worker_queue
    _worker_queue = queue


def _run_chunk(chunk: _Chunk, settings: RunSettings, progress: Progress | None = None) -> _ChunkResult:
    """Emulate one chunk (in this process or a worker) and turn its records into tidy rows."""
    queue = _worker_queue
    if progress is None and queue is not None:
        last = [-1]

        def progress(done: int, total: int) -> None:
            if done == total or done - last[0] >= max(1, total // 100):
                last[0] = done
                queue.put(((chunk.sweep, chunk.index), done))

    with paused_gc():  # metrics too: they build many records
        raw = trio.run(measured, emulate, chunk.plan, settings, progress)
        # the tidy rows need no per-delivery records; the free clock's fidelity verdict does
        records = multicast_metrics(chunk.plan, raw, per_arrival=settings.clock == "free")
        rows = _tidy(chunk.plan, chunk.points, records)
    fidelity = None
    if settings.clock == "free":
        fidelity = judge_run(records, settings, raw)
    label = "" if chunk.of == 1 else f"emulation {chunk.index + 1} of {chunk.of}: "
    return _ChunkResult(
        chunk.sweep,
        [(m.id, r) for m, r in zip(chunk.plan.multicasts, rows, strict=True)],
        [label + why for why in raw.incomplete],
        list(raw.errors),
        raw.last_step,
        raw.wall_s,
        fidelity,
    )


def _execute(
    chunks: Sequence[_Chunk], settings: RunSettings, jobs: int, progress: Progress | None
) -> list[_ChunkResult]:
    """Run ``chunks`` one after the other here, or on ``jobs`` worker processes."""
    total = sum(c.deliveries for c in chunks)
    done: dict[tuple[int, int], int] = {}

    def report(key: tuple[int, int], d: int) -> None:
        done[key] = d
        if progress is not None:
            progress(sum(done.values()), total)

    if jobs <= 1 or len(chunks) == 1:
        results = []
        for c in chunks:

            def local(d: int, _total: int, key: tuple[int, int] = (c.sweep, c.index)) -> None:
                report(key, d)

            results.append(_run_chunk(c, settings, local))
        return results
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    queue = ctx.Queue()
    futures: dict[Future[_ChunkResult], _Chunk] = {}
    out: dict[tuple[int, int], _ChunkResult] = {}
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(chunks)), mp_context=ctx, initializer=_init_worker, initargs=(queue,)
    ) as pool:
        for c in chunks:
            futures[pool.submit(_run_chunk, c, settings)] = c
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            while True:
                try:
                    key, d = queue.get_nowait()
                except Empty:
                    break
                report(key, d)
            for f in finished:
                c = futures[f]
                out[(c.sweep, c.index)] = f.result()
                report((c.sweep, c.index), c.deliveries)
    return [out[(c.sweep, c.index)] for c in chunks]


def sweep_many(
    specs: Sequence[SweepSpec],
    settings: RunSettings,
    progress: Progress | None = None,
    *,
    jobs: int = 1,
    chunk: int = DEFAULT_CHUNK,
) -> list[SweepResult]:
    """Run several sweeps; their emulations share one pool of ``jobs`` processes.

    Each sweep is one emulation unless it has more than ``chunk`` multicasts (0: no limit);
    then it is dealt into several. In isolated contention that changes no number, only the
    size of each emulation: a lockstep frame carries every packet a link passes in one step,
    and a single 20×20 emulation of 9,500 tree multicasts exceeds the wire's frame limit.
    """
    check_settings(settings)
    if jobs < 1:
        raise PlanError(f"--jobs must be at least 1, got {jobs}")
    if chunk < 0:
        raise PlanError(f"--chunk must be 0 (no limit) or positive, got {chunk}")
    plans = []
    chunks: list[_Chunk] = []
    for i, s in enumerate(specs):
        if s.repeat < 1:
            raise PlanError(f"--repeat must be at least 1, got {s.repeat}")
        topo = Topology.parse(s.topology)
        plan, points = sweep_plan(topo, s.algorithms, s.ks, s.repeat, s.seed, s.source, s.params)
        plans.append(plan)
        chunks += _chunks(i, plan, points, chunk)
    results = _execute(chunks, settings, jobs, progress)
    out = []
    for i, plan in enumerate(plans):
        mine = [r for r in results if r.sweep == i]
        by_id = {mc: row for r in mine for mc, row in r.rows}
        tidy = [by_id[m.id] for m in plan.multicasts]
        out.append(
            SweepResult(
                tidy,
                summarise_tidy(tidy),
                [why for r in mine for why in r.incomplete],
                [e for r in mine for e in r.errors],
                max((r.steps for r in mine), default=0),
                sum(r.wall_s for r in mine),
                len(mine),
                [r.fidelity for r in mine if r.fidelity is not None],
            )
        )
    return out


def sweep(
    topology: Topology | str,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    settings: RunSettings,
    progress: Progress | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    jobs: int = 1,
    chunk: int = DEFAULT_CHUNK,
) -> SweepResult:
    """Run one sweep and return its rows and run status (see :func:`sweep_many`)."""
    spec = SweepSpec(
        topology if isinstance(topology, str) else topology.spec,
        tuple(algorithms),
        tuple(ks),
        repeat,
        seed,
        source,
        dict(params or {}),
    )
    return sweep_many([spec], settings, progress, jobs=jobs, chunk=chunk)[0]


def run_sweep(
    topology: Topology | str,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    settings: RunSettings,
    progress: Progress | None = None,
    params: Mapping[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(tidy_rows, summary_rows)`` of a sweep; an incomplete multicast shows as ``missing`` > 0."""
    res = sweep(topology, algorithms, ks, repeat, seed, source, settings, progress, params)
    return res.tidy, res.summary


def write_sweep(out: Path, result: SweepResult, meta: Mapping[str, Any]) -> list[Path]:
    """tidy.csv, summary.csv and sweep.json in ``out``, each written atomically."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "tidy.csv", TIDY_COLUMNS, ([r[c] for c in TIDY_COLUMNS] for r in result.tidy))
    write_csv(out / "summary.csv", SUMMARY_COLUMNS, ([r[c] for c in SUMMARY_COLUMNS] for r in result.summary))
    doc = {
        **meta,
        "complete": result.complete,
        "incomplete": result.incomplete,
        "emulations": result.emulations,
        "steps": result.steps,
        "emulation_wall_s": round(result.wall_s, 3),
        "multicasts": len(result.tidy),
        "errors": result.errors[:100],
        "error_count": len(result.errors),
        **({"fidelity": [f.to_json() for f in result.fidelity]} if result.fidelity else {}),
    }
    atomic_write(out / "sweep.json", json.dumps(doc, indent=1))
    return [out / "tidy.csv", out / "summary.csv", out / "sweep.json"]
