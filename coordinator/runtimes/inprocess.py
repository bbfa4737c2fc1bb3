"""The in-process runtime: every node a trio task, links carry msgpack bytes in memory.

The coordinator side of the control protocol lives in :mod:`coordinator.runtimes.session`; this module
only wires nodes and channels together. In lockstep the nodes share a
:class:`node.transport.links.StepBarrier` by default (sparse: only nodes with work do a step, no null
frames, the same records) over plain-queue link ends (:class:`node.transport.links.QueueLink`: nobody
waits on a link there); ``sparse=False`` (or ``--sync alpha``) runs the α-synchronizer (null
frames on every link every step, as the other runtimes do under ``--sync alpha``) over trio
memory channels.
In the free clock a link end hands its frames straight to the peer's inbox
(:class:`node.transport.links.DirectLink`: no reader task, no task switch per frame).
"""

from __future__ import annotations

import functools
import math
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.session import Session
from coordinator.runtimes.signals import run_interruptible
from coordinator.workloads.plan import Plan
from node.actor import Assignment, Node
from node.topology import Coord
from node.transport.links import (
    DirectLink,
    Link,
    MemoryControl,
    QueueLink,
    StepBarrier,
    memory_link_pair,
    queue_link_pair,
)

__all__ = ["run_inprocess", "wire_links"]


def wire_links(plan: Plan, capacity: int = 16, *, polled: bool = False) -> dict[Coord, dict[str, Link]]:
    """One bidirectional link per pair of neighbours, as each node's port → end.

    ``polled``: plain-queue ends for the sparse step barrier (:class:`QueueLink`), else trio
    memory channels of ``capacity`` frames (the α-synchronizer awaits frames on them).
    """
    topo = plan.topology
    ends: dict[Coord, dict[str, Link]] = {n: {} for n in topo.nodes()}
    for a, port, b in topo.links():
        if port in ends[a]:
            continue
        ea, eb = queue_link_pair() if polled else memory_link_pair(capacity)
        ends[a][port] = ea
        ends[b][topo.opposite(port)] = eb
    return ends


def _direct(plan: Plan, nodes: dict[Coord, Node]) -> Callable[[Assignment], object]:
    """Free clock in one process: each port's frames go straight into the neighbour's inbox."""
    topo = plan.topology

    @asynccontextmanager
    async def open_links(assign: Assignment) -> AsyncIterator[dict[str, Link]]:
        links: dict[str, Link] = {}
        for port in topo.ports(assign.here):
            nb = topo.neighbour(assign.here, port)
            assert nb is not None
            links[port] = DirectLink(functools.partial(nodes[nb].deliver, topo.opposite(port)))
        yield links

    return open_links


def _opener(links: dict[str, Link]) -> Callable[[Assignment], object]:
    @asynccontextmanager
    async def open_links(assign: Assignment) -> AsyncIterator[dict[str, Link]]:
        try:
            yield dict(links)
        finally:
            for link in links.values():
                if isinstance(link, QueueLink):
                    link.close()  # nobody waits on these: no checkpoint each
                else:
                    await link.aclose()

    return open_links


async def run_inprocess(
    plan: Plan,
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
    *,
    sparse: bool | None = None,
    codec: bool = False,
) -> RawRun:
    """Run ``plan`` with one trio task per node in this process (lockstep: sparse unless told not).

    ``sparse`` None: as ``settings.sync`` says (``alpha``: the α-synchronizer; else sparse).
    ``codec``: control messages as msgpack bytes, as across processes (by default they go between
    the tasks as :func:`node.protocol.stamp` tuples: the same frozen events, no round trip; the
    tests check both give the same records).

    SIGINT/SIGTERM end it with :class:`~coordinator.errors.Interrupted` and the partial records.
    ``settings.shards`` > 1 splits the nodes over that many OS processes (α-synchronized).
    """
    if sparse is None:
        sparse = settings.sync != "alpha"
    if settings.shards > 1:  # one OS process per shard (coordinator/runtimes/shards.py)
        from coordinator.runtimes.shards import run_shards

        return await run_shards(plan, settings, progress, sparse=sparse)
    topo = plan.topology
    barrier = StepBarrier(topo.nodes()) if sparse and settings.clock == "lockstep" else None
    # bytes, or (event, epoch) tuples without the codec
    to_coord_tx, to_coord_rx = trio.open_memory_channel[Any](math.inf)
    to_nodes: dict[Coord, trio.MemorySendChannel[Any]] = {}
    by_coord: dict[Coord, Node] = {}
    direct = settings.clock != "lockstep"
    wired = {} if direct else wire_links(plan, polled=barrier is not None)
    host = socket.gethostname()  # one string for every node, not a system call each
    for here in topo.nodes():
        tx, rx = trio.open_memory_channel[Any](math.inf)
        to_nodes[here] = tx
        control = MemoryControl(to_coord_tx.clone(), rx)
        opener = _direct(plan, by_coord) if direct else _opener(wired[here])
        by_coord[here] = Node(
            here,
            control,
            opener,  # type: ignore[arg-type]
            barrier=barrier,
            patience=math.inf,  # the session's wall budget bounds every wait (its end cancels the nodes)
            codec=codec,
            host=host,
        )
    nodes = list(by_coord.values())

    async def send_to(node: Coord, data: Any) -> None:
        to_nodes[node].send_nowait(data)

    async def broadcast(data: Any) -> None:
        for tx in to_nodes.values():
            tx.send_nowait(data)

    session = Session(
        plan,
        settings,
        send_to,
        broadcast,
        to_coord_rx,
        progress=progress,
        lead=False,
        codec=codec,
        wired=True,
    )

    async def run() -> RawRun:
        async with trio.open_nursery() as nursery:
            for node in nodes:
                nursery.start_soon(node.run, name=f"node-{node.here[0]}-{node.here[1]}")
            raw = await session.run(set(topo.nodes()))  # within the wall budget, nodes stopped or not
            nursery.cancel_scope.cancel()  # so no node waits longer than the session's budget
        by_coord.clear()  # free clock: each node's link opener refers to this map (a cycle otherwise)
        return raw

    return await run_interruptible(run, session.partial)
