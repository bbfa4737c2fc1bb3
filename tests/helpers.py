"""Shared test helpers: run a plan in the emulation and in the reference model; script a session."""

from __future__ import annotations

from typing import Any

import trio

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
