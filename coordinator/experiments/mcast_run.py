"""Run an mcast(n, d, c) message set (seed 002) and shape its results (``--json``: with ``mcast``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import trio

from coordinator.analysis.result_types import RunResult
from coordinator.analysis.timing import Timing
from coordinator.experiments.run import emulate, run_result
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.mcast import McastSet, mcast_settings, mcast_stats
from coordinator.workloads.plan import Plan

__all__ = ["run_document"]


def run_document(
    plan: Plan,
    settings: RunSettings,
    timing: Timing | None = None,
    progress: Callable[[int, int], None] | None = None,
    mset: McastSet | None = None,
) -> RunResult:
    """Run ``plan`` (shared contention) and return its results with an ``mcast`` section."""
    settings = mcast_settings(settings)
    raw = trio.run(emulate, plan, settings, progress)
    result = run_result(plan, settings, raw, timing)
    stats = mcast_stats(plan, raw, mset)
    requested = {"set": mset.kind, "d": mset.d, "c": mset.c, "seed": mset.seed} if mset else {}
    return replace(result, mcast={**stats.as_dict(), "requested": requested})
