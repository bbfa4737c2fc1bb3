"""Run an mcast(n, d, c) message set (seed 002) and shape its ``--json`` document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from coordinator.analysis.timing import Timing
from coordinator.experiments.run import emulate, result_document
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
) -> dict[str, Any]:
    """Run ``plan`` (shared contention) and return the ``--json`` document with an ``mcast`` section."""
    settings = mcast_settings(settings)
    raw = trio.run(emulate, plan, settings, progress)
    doc = result_document(plan, settings, raw, timing)
    stats = mcast_stats(plan, raw, mset)
    requested = {"set": mset.kind, "d": mset.d, "c": mset.c, "seed": mset.seed} if mset else {}
    doc["mcast"] = {**stats.as_dict(), "requested": requested}
    return doc
