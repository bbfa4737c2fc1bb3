"""Shared test helpers: run a plan in the emulation and in the reference model."""

from __future__ import annotations

import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes.model import run_model
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan


def emulated(plan: Plan, settings: RunSettings) -> RawRun:
    return trio.run(emulate, plan, settings, None)


def modelled(plan: Plan, settings: RunSettings) -> RawRun:
    return run_model(plan, settings)


def link_sets(raw: RawRun) -> dict[int, set[tuple[tuple[int, int], str]]]:
    return {mc: set(v) for mc, v in raw.links.items()}
