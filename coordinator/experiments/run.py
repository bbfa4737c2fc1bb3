"""Run a plan on a runtime and shape the result (the ``--json`` document)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import trio

from coordinator.analysis.completion import completion
from coordinator.analysis.fidelity import judge_run
from coordinator.analysis.metrics import ci, jitter, multicast_metrics, summarise, telemetry_split
from coordinator.analysis.result_types import (
    LatencySummary,
    MulticastResult,
    Rejected,
    RunInfo,
    RunResult,
    SwitchingInfo,
    TimingInfo,
)
from coordinator.analysis.timing import Timing, apply_timing
from coordinator.errors import UsageError
from coordinator.runtimes import registry
from coordinator.runtimes.hostload import HostLoad, sample_host
from coordinator.runtimes.records import REFUSED, RawRun, RunSettings, dilate
from coordinator.workloads.plan import Multicast, Plan
from node import defaults

__all__ = [
    "RUNTIMES",
    "emulate",
    "emulate_apart",
    "merge_runs",
    "result_document",
    "run_result",
    "runtime_problem",
]

Progress = Callable[[int, int], None]

RUNTIMES = registry.names("reproduce")
"""The runtimes every experiment offers (``meshcast run`` also offers ``engines``: registry)."""


def runtime_problem(runtime: str) -> str | None:
    """Why ``runtime`` cannot run in this installation, or None."""
    try:
        return registry.get(runtime).problem(RunSettings(runtime=runtime))
    except ValueError as exc:
        return str(exc)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a run makes millions of short-lived objects.

    Packets, headers and frames hold no reference cycles; the collector found nothing to free
    but took most of the CPU time of large in-process runs (measured: 92 s → 25 s).
    The young generations are collected first (the last run's cycles are there), not the old one:
    a full collection of a big heap costs ~0.3 s, and a reproduction starts hundreds of runs.
    """
    was = gc.isenabled()
    gc.collect(1)
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def emulate(plan: Plan, settings: RunSettings, progress: Progress | None = None) -> RawRun:
    """Run ``plan`` on ``settings.runtime`` and return its raw records (GC paused meanwhile).

    A run its nodes refused before start-up (a plug-in missing where they run) ran nothing: it is
    the user's to mend, so it is a UsageError (one line, exit 2), not an incomplete result.
    Wormhole switching in isolated contention runs every multicast in an idle network of its own."""
    settings = dilate(settings)
    if settings.switching == "wormhole" and settings.contention == "isolated":
        # each multicast in a network of its own: the flit engines know only shared channels,
        # and one multicast alone in them is isolated (its arrivals are eq. 7's exactly)
        shared = replace(settings, contention="shared")
        if len(plan.multicasts) > 1:
            return await emulate_apart(plan, shared, progress)
        settings = shared
    with paused_gc():
        raw = await _emulate(plan, settings, progress)
    raw.dilation = settings.time_dilation
    if raw.incomplete and raw.incomplete[0].startswith(REFUSED) and not raw.arrivals:
        raise UsageError(raw.incomplete[0])
    return raw


async def measured(
    run: Callable[[Plan, RunSettings, Progress | None], Awaitable[RawRun]],
    plan: Plan,
    settings: RunSettings,
    progress: Progress | None = None,
) -> RawRun:
    """``run(plan, settings, progress)`` with, under the free clock, this machine's CPU idle
    sampled every second meanwhile and its load average at the end (for the fidelity verdict)."""
    if settings.clock != "free":
        return await run(plan, settings, progress)
    load = HostLoad()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sample_host, load)
        raw = await run(plan, settings, progress)
        nursery.cancel_scope.cancel()
    load.finish()
    raw.host_idle, raw.loadavg = load.idle, load.loadavg
    return raw


async def emulate_apart(plan: Plan, settings: RunSettings, progress: Progress | None = None) -> RawRun:
    """Run every multicast of ``plan`` in an emulation of its own, one after another; merged.

    The free clock does not let logical steps pace real time, so repetitions injected into one
    emulation queue behind each other and their wall-clock spread measures that queueing, not
    jitter. Run apart, no repetition overlaps another in real time (each starts the nodes anew).
    """

    settings = dilate(settings)

    def part_settings(m: Multicast) -> RunSettings:
        if settings.link_model is None:
            return settings
        return replace(settings, link_model=settings.link_model.part(m.id))  # each repetition draws afresh

    runtime = registry.get(settings.runtime)
    warm = runtime.parts or (runtime.warm_by_deployment and settings.network is None)
    if warm and settings.deployment is None and len(plan.multicasts) > 1:
        # one set of nodes serves every repetition: warm, as a deployment's nodes are
        with paused_gc():
            parts = [(Plan(plan.topology, (m,)), part_settings(m)) for m in plan.multicasts]
            if runtime.parts:
                raws = await runtime.run_parts(parts, settings, progress)
            else:
                from coordinator.runtimes.warm import run_parts_on_a_deployment

                raws = await run_parts_on_a_deployment(parts, settings, progress)
            merged = merge_runs(raws)
            merged.dilation = settings.time_dilation
            return merged
    total = sum(len(m.destinations) for m in plan.multicasts)
    runs: list[RawRun] = []
    done = 0
    for m in plan.multicasts:
        base = done

        def part_progress(reached: int, _total: int, base: int = base) -> None:
            if progress is not None:
                progress(base + reached, total)

        runs.append(await emulate(Plan(plan.topology, (m,)), part_settings(m), part_progress))
        done += len(m.destinations)
        if progress is not None:
            progress(done, total)
    return merge_runs(runs)


def merge_runs(parts: Sequence[RawRun]) -> RawRun:
    """One RawRun of the records of several runs of disjoint multicasts (ids kept)."""
    out = RawRun()
    for p in parts:
        out.arrivals.extend(p.arrivals)
        out.traffic.update(p.traffic)
        for mc, links in p.links.items():
            out.links.setdefault(mc, set()).update(links)
        out.trace.extend(p.trace)
        out.worms.extend(p.worms)
        out.errors.extend(p.errors)
        out.injected.update(p.injected)
        out.hosts.update(p.hosts)
        out.node_status.update(p.node_status)
        for node, q in p.peak_queue.items():
            out.peak_queue[node] = max(q, out.peak_queue.get(node, 0))
        out.node_stats.update(p.node_stats)
        for key, n in p.link_sends.items():
            out.link_sends[key] = out.link_sends.get(key, 0) + n
        out.dropped += p.dropped
        out.dilation = p.dilation
        out.last_step = max(out.last_step, p.last_step)
        out.wall_s += p.wall_s
        out.incomplete.extend(c for c in p.incomplete if c not in out.incomplete)
        for node, causes in p.rejected.items():
            out.rejected.setdefault(node, []).extend(causes)
    return out


async def _emulate(plan: Plan, settings: RunSettings, progress: Progress | None) -> RawRun:
    if settings.deployment is not None:  # attach to a long-lived deployment (meshcast deploy)
        from coordinator.runtimes.deployments import run_on_deployment

        return await run_on_deployment(plan, settings, progress)
    return await registry.run(plan, settings, progress)


def result_document(
    plan: Plan, settings: RunSettings, raw: RawRun, timing: Timing | None = None
) -> dict[str, Any]:
    """:func:`run_result` as the ``--json`` document."""
    return run_result(plan, settings, raw, timing).to_json()


def run_result(plan: Plan, settings: RunSettings, raw: RawRun, timing: Timing | None = None) -> RunResult:
    """The run's results (the documented ``--json`` shape: run status, multicasts, summaries,
    jitter, latency; see coordinator/analysis/result_types.py).

    ``run.complete`` is true only when every destination was reached exactly once and no rule
    or node error occurred; ``run.incomplete`` then lists one line per kind of cause.
    The plan's warm-up multicasts count there (and in ``errors``) but nowhere else:
    ``multicasts``, summaries, jitter and latency hold the kept ones; ``run.warmup_repeats`` and
    ``run.warmup_discarded`` (multicasts left out) say so.
    """
    every = multicast_metrics(plan, raw, trace=settings.trace, worms=settings.switching == "wormhole")
    records = plan.kept(every)  # the warm-up multicasts' records leave here, errors stay below
    if timing is not None:
        records = apply_timing(records, timing)
    by_alg: dict[str, list[MulticastResult]] = {}
    for r in records:
        by_alg.setdefault(r.algorithm, []).append(r)
    errors: list[Mapping[str, Any]] = list(raw.errors)
    for r in every:
        if r.missing:
            errors.append({"kind": "undelivered", "mc": r.id, "missing": [list(d) for d in r.missing]})
        if r.duplicates:
            errors.append({"kind": "duplicate", "mc": r.id, "count": r.duplicates})
        if r.stray:
            errors.append({"kind": "stray", "mc": r.id, "count": r.stray})
    complete, causes = completion(raw.incomplete, raw.errors, every)
    if settings.switching == "wormhole":  # steps are cycles; the flit-level settings that made them
        one_vc = settings.vcs == defaults.VCS and settings.vc_classes == defaults.VC_CLASSES
        switching = SwitchingInfo(
            mode="wormhole", flits=settings.flits, buffer_flits=settings.buffer_flits, ts=settings.ts,
            prep=settings.prep, vcs=None if one_vc else settings.vcs,
            vc_classes=None if one_vc else settings.vc_classes,
            dateline=None if settings.dateline == defaults.DATELINE else settings.dateline,
        )  # fmt: skip
    else:
        switching = SwitchingInfo(mode=settings.switching)
    info = RunInfo(
        topology=plan.topology.spec,
        port_model=settings.port_model,
        clock=settings.clock,
        contention=settings.contention,
        runtime=settings.runtime,
        seed=settings.seed,
        complete=complete,
        incomplete=tuple(causes),
        steps=raw.last_step,
        wall_s=round(raw.wall_s, 6),
        warmup_repeats=plan.warmup_repeats,
        warmup_discarded=len(every) - len(records),
        # strangers at the nodes' link ports: refused, counted, not the run's errors
        rejected={f"{x},{y}": len(c) for (x, y), c in sorted(raw.rejected.items())} if raw.rejected else None,
        # each link's behaviour (wall-clock arrivals carry it)
        link_model=settings.link_model.describe() if settings.link_model is not None else None,
        sync=settings.sync,  # when asked for: how lockstep was synchronized
        time_dilation=settings.time_dilation if settings.time_dilation != 1 else None,
        placement={f"{x},{y}": {"host": h, "id": i} for (x, y), (h, i) in sorted(raw.placement.items())}
        if raw.placement
        else None,
        switching=switching,
        timing=None
        if timing is None
        else TimingInfo(
            model=timing.model, ts=timing.ts, beta=timing.beta, flits=timing.flits, router=timing.router
        ),
    )
    rejected = None
    if raw.rejected:
        rejected = tuple(
            Rejected(node=node, cause=cause)
            for node, causes in sorted(raw.rejected.items())
            for cause in causes[:5]
        )
    latency = None
    if timing is not None:
        latency = {
            a: LatencySummary(
                max=ci([r.latency.max for r in rs if r.latency is not None and r.latency.max is not None]),
                mean=ci([r.latency.mean for r in rs if r.latency is not None and r.latency.mean is not None]),
                cv=ci([r.latency.cv for r in rs if r.latency is not None and r.latency.cv is not None]),
            )
            for a, rs in by_alg.items()
        }
    return RunResult(
        run=info,
        multicasts=tuple(records),
        summary=summarise(records),
        by_algorithm={a: summarise(rs) for a, rs in by_alg.items()},
        jitter=tuple(jitter(records)),
        errors=tuple(errors),
        rejected=rejected,
        latency=latency,
        telemetry=telemetry_split(records) if settings.clock == "free" else None,
        fidelity=judge_run(records, settings, raw) if settings.clock == "free" else None,
    )
