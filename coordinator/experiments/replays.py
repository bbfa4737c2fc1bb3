"""``sweep --replay`` and ``load --replay``: which of their multicasts the replay page plays.

A sweep or a load run holds far more multicasts than a page can show, so neither is traced as a
whole. After it has run, the multicasts the page will play are emulated again with ``trace`` on,
with the same settings (a trace changes no record: ``tests/test_worm_trace.py``), and written as
one ``replay.html`` into ``--out``:

- **sweep**: the first repetition of every point, for every algorithm — the same destination
  set under each algorithm, chosen in the page's multicast list. In isolated contention (a
  sweep's default) each multicast runs as if alone, so these are exactly the sweep's own
  multicasts. More than :data:`SWEEP_MAX` of them keep evenly spaced points (the first and the
  last among them), and the command says which. Shared contention is refused: a few of its
  multicasts replayed alone would not be what the sweep measured.
- **load**: one point of the first algorithm, the whole run of it (every message, so the worms
  that block each other are all drawn): the highest rate that did not saturate, or the lowest
  rate if all did, among those whose run has at most :data:`LOAD_MAX` messages; if none is that
  small, no page, and a line saying to shorten ``--duration`` or lower ``--rates``.

The reference model has no flit trace, so a wormhole replay under ``--runtime model`` is
emulated on the runtime the registry names for its trace (``traced_by``: the nodes' engines,
whose records are the model's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from coordinator.runtimes import registry
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Plan

__all__ = ["LOAD_MAX", "SWEEP_MAX", "load_replay_choice", "sweep_replay_plan", "traced_document"]

SWEEP_MAX = 60
"""The most multicasts a sweep's replay page holds (the page's list stays readable)."""
LOAD_MAX = 400
"""The most messages of a load point's run a replay page holds (a few hundred kB to a few MB)."""


def sweep_replay_plan(
    plan: Plan, points: Sequence[tuple[int, int]], ks: Sequence[int], algorithms: Sequence[str]
) -> tuple[Plan, str]:
    """The multicasts of a sweep (``plan`` with each one's (k, repetition) in ``points``) its page
    replays, and one line saying which."""
    per_k = max(1, SWEEP_MAX // max(1, len(algorithms)))
    keep = list(ks)
    if len(keep) > per_k:
        step = (len(keep) - 1) / max(1, per_k - 1)
        keep = sorted({keep[round(i * step)] for i in range(per_k)})
    chosen = tuple(m for m, (k, rep) in zip(plan.multicasts, points, strict=True) if rep == 0 and k in keep)
    shown = ", ".join(str(k) for k in keep)
    note = f"replay.html: repetition 1 of k = {shown}, {len(chosen)} multicasts"
    if len(keep) < len(ks):
        note += f" ({len(keep)} of {len(ks)} points: a page holds at most {SWEEP_MAX} multicasts)"
    return Plan(plan.topology, chosen), note


def load_replay_choice(candidates: Sequence[tuple[float, bool, Plan]]) -> tuple[Plan | None, str]:
    """Of the first algorithm's points as (rate, saturated, plan), the one its page replays (or
    None) and one line saying which (or why none)."""
    small = [c for c in candidates if len(c[2].multicasts) <= LOAD_MAX]
    if not small:
        fewest = min((len(c[2].multicasts) for c in candidates), default=0)
        return None, (
            f"no replay.html: the smallest point's run has {fewest:,} messages, a page holds at most "
            f"{LOAD_MAX}; shorten --duration or lower --rates for one"
        )
    calm = [c for c in small if not c[1]]
    rate, saturated, plan = max(calm, key=lambda c: c[0]) if calm else min(small, key=lambda c: c[0])
    state = "saturated" if saturated else "the highest rate that did not saturate"
    return plan, f"replay.html: rate {rate:g} ({state}), all {len(plan.multicasts)} messages"


def traced_document(plan: Plan, settings: RunSettings) -> dict[str, Any]:
    """Emulate ``plan`` with ``settings`` and a trace; its result document (as ``run.json``)."""
    import trio  # here, not at the top: ``load --help`` reads this module's LOAD_MAX only

    from coordinator.experiments.run import emulate, result_document

    traced = replace(settings, trace=True)
    runtime = registry.get(traced.runtime)
    if traced.switching not in runtime.trace_switchings and runtime.traced_by:
        traced = replace(traced, runtime=runtime.traced_by)  # the same records, with their trace
    raw = trio.run(emulate, plan, traced, None)
    return result_document(plan, traced, raw)
