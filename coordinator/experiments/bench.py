"""``meshcast bench``: the limit of this design and how close the emulator gets to it.

(a) relay chain: trio tasks in a line, each receiving msgpack bytes from a memory channel,
    decoding, re-encoding and passing them on — the least work one emulated hop can cost;
(b) the in-process emulator, lockstep and free clock: 100 VH multicasts × 50 destinations on
    20×20 and 32×32 tori, and a sparse one (1 multicast × 10 destinations on a 64×64 torus):
    packet-hops and steps per second, their ratio to (a), start-up time and peak memory.
Each point runs in a fresh process (so its peak RSS is its own). Rates are over the active span
(the first injection to the last delivery, from the nodes' own wall clocks); the whole run
(start → every node done, which adds a fan-out to and from every node) is reported beside them.
Figures, not assertions: speed targets live here, never in timed tests.
"""

from __future__ import annotations

import multiprocessing
import resource
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import msgpack
import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.topology import Topology

__all__ = ["SWITCHING", "Point", "bench_points", "relay_chain", "run_bench"]

SWITCHING = "store-and-forward"
Point = tuple[str, str, int, int]
"""(topology, clock, multicasts, destinations per multicast)."""


async def _relay_chain(length: int, packets: int) -> float:
    """Seconds to push ``packets`` msgpack packets through ``length`` relay tasks."""
    payload = msgpack.packb([1, "vh", [[3, 4], [5, 6], [7, 8]], 1, 1, 0])
    chans = [trio.open_memory_channel[bytes](16) for _ in range(length + 1)]

    async def relay(rx: trio.MemoryReceiveChannel[bytes], tx: trio.MemorySendChannel[bytes]) -> None:
        async with rx, tx:
            async for data in rx:
                pkt = msgpack.unpackb(data)
                pkt[3] += 1
                await tx.send(msgpack.packb(pkt))

    async def sink(rx: trio.MemoryReceiveChannel[bytes]) -> None:
        async with rx:
            async for _ in rx:
                pass

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(length):
            nursery.start_soon(relay, chans[i][1], chans[i + 1][0])
        nursery.start_soon(sink, chans[length][1])
        async with chans[0][0] as tx:
            for _ in range(packets):
                await tx.send(payload)
    return time.perf_counter() - t0


def relay_chain(length: int = 64, packets: int = 5000) -> float:
    """Hops per second of the relay chain."""
    secs = trio.run(_relay_chain, length, packets)
    return length * packets / secs


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def emulator_point(spec: str, clock: str, multicasts: int, dests: int) -> dict[str, Any]:
    """One in-process run of ``multicasts`` random VH multicasts of ``dests`` destinations, measured."""
    topo = Topology.parse(spec)
    plan = random_plan(topo, ["vh"], dests, multicasts, seed=1)
    settings = RunSettings(clock=clock)
    t0 = time.perf_counter()
    raw = trio.run(emulate, plan, settings, None)
    total = time.perf_counter() - t0
    hops = sum(raw.traffic.values())
    walls = [a.wall_ns for a in raw.arrivals if a.wall_ns is not None]
    starts = [ns for ns, _ in raw.injected.values()]
    active = (max(walls) - min(starts)) / 1e9 if walls and starts else raw.wall_s
    active = max(active, 1e-9)
    steps = raw.last_step if clock == "lockstep" else None
    return {
        "topology": spec,
        "runtime": "in-process",
        "clock": clock,
        "switching": SWITCHING,
        "nodes": topo.size,
        "multicasts": multicasts,
        "destinations": dests,
        "complete": not raw.incomplete and len(raw.arrivals) == multicasts * dests,
        "steps": steps,
        "packet_hops": hops,
        "start_s": round(total - raw.wall_s, 3),
        "run_s": round(raw.wall_s, 3),
        "active_s": round(active, 3),
        "packet_hops_per_s": hops / active,
        "steps_per_s": steps / active if steps is not None else None,
        "run_packet_hops_per_s": hops / raw.wall_s if raw.wall_s > 0 else None,
        "peak_rss_mb": round(_peak_rss_mb(), 1),
    }


def bench_points(quick: bool = False, large: bool = False) -> list[Point]:
    """The emulator points: dense 20×20 and 32×32 (lockstep, free), sparse 64×64; quick: smaller."""
    if quick:
        dense, sparse = [("torus:8x8", 10, 10)], ("torus:16x16", 1, 10)
    else:
        dense, sparse = [("torus:20x20", 100, 50), ("torus:32x32", 100, 50)], ("torus:64x64", 1, 10)
    if large:
        dense.append(("torus:128x128", 100, 50))
    points = [(spec, clock, m, k) for spec, m, k in dense for clock in ("lockstep", "free")]
    return points + [(sparse[0], clock, sparse[1], sparse[2]) for clock in ("lockstep", "free")]


def run_bench(
    quick: bool = False, large: bool = False, progress: Callable[[int, int], None] | None = None
) -> tuple[float, list[dict[str, Any]]]:
    """The relay-chain limit (hops/s) and one row per emulator point, with its ratio to the limit."""
    limit = relay_chain(16, 500) if quick else relay_chain()
    points = bench_points(quick, large)
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for i, point in enumerate(points):
        if progress is not None:
            progress(i, len(points))
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            row = pool.submit(emulator_point, *point).result()
        row["ratio"] = round(row["packet_hops_per_s"] / limit, 3)
        rows.append(row)
    if progress is not None:
        progress(len(points), len(points))
    return limit, rows
