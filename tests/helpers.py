"""Shared test helpers: run a plan in the emulation and in the reference model; script a session."""

from __future__ import annotations

from typing import Any

import trio

from coordinator.analysis.metrics import summarise
from coordinator.analysis.result_types import (
    ArrivalResult,
    MulticastResult,
    RunInfo,
    RunResult,
    SwitchingInfo,
)
from coordinator.experiments.run import emulate
from coordinator.runtimes.model import run_model
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.session import Session
from coordinator.workloads.plan import Plan
from node import protocol
from node.topology import Coord

Sent = list[tuple[Coord | None, protocol.Event]]


def scripted_session(
    plan: Plan, settings: RunSettings, **kw: Any
) -> tuple[Session, trio.MemorySendChannel[bytes], Sent]:
    """A Session whose nodes are an inbox the test fills, and what it sent (node, or None for a
    broadcast; decoded)."""
    inbox_tx, inbox_rx = trio.open_memory_channel[bytes](100)
    sent: Sent = []

    async def send_to(node: Any, data: bytes) -> None:
        sent.append((node, protocol.decode(data)))

    async def broadcast(data: bytes) -> None:
        sent.append((None, protocol.decode(data)))

    return Session(plan, settings, send_to, broadcast, inbox_rx, **kw), inbox_tx, sent


def emulated(plan: Plan, settings: RunSettings) -> RawRun:
    return trio.run(emulate, plan, settings, None)


def modelled(plan: Plan, settings: RunSettings) -> RawRun:
    return run_model(plan, settings)


def link_sets(raw: RawRun) -> dict[int, set[tuple[tuple[int, int], str]]]:
    return {mc: set(v) for mc, v in raw.links.items()}


def multicast_record(**fields: Any) -> MulticastResult:
    """A MulticastResult of ``fields`` (any field) and neutral values for the rest: for tests of
    what reads records (completion, timing, jitter, plots) without running anything."""
    base: dict[str, Any] = dict(
        id=0, algorithm="vh", source=(0, 0), destinations=(), injected=0, time=None, traffic=0,
        distinct_links=0, additional_traffic=0, mean_arrival=None, cv=None, cv_wall=None, missing=(),
        duplicates=0, stray=0, arrivals=(),
    )  # fmt: skip
    return MulticastResult(**(base | fields))


def arrival_record(node: Coord, step: int, hops: int = 0, startups: int = 0, **fields: Any) -> ArrivalResult:
    """An ArrivalResult (no wall time unless given)."""
    return ArrivalResult(**({"wall_ns": None, "host": None} | fields), node=node, step=step, hops=hops,
                         startups=startups)  # fmt: skip


def run_record(**fields: Any) -> RunResult:
    """A RunResult of ``fields`` (any field) around a complete lockstep run on mesh:4x4 that made
    the given ``multicasts`` (none unless given): summaries computed from them."""
    mcs = tuple(fields.get("multicasts", ()))
    info = RunInfo(
        topology="mesh:4x4", port_model="one-port", clock="lockstep", contention="isolated",
        runtime="in-process", seed=1, complete=True, incomplete=(), steps=0, wall_s=0.0,
        warmup_repeats=0, warmup_discarded=0, switching=SwitchingInfo(mode="store-and-forward"),
    )  # fmt: skip
    base: dict[str, Any] = dict(
        run=info, multicasts=mcs, summary=summarise(mcs), by_algorithm={}, jitter=(), errors=()
    )
    return RunResult(**(base | fields))
