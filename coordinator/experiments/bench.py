"""``meshcast bench``: the limit of this design and how close the emulator gets to it.

(a) relay chain: trio tasks in a line, each receiving msgpack bytes from a memory channel,
    decoding, re-encoding and passing them on — the least work one emulated hop can cost;
(b) the emulator on 20×20 and 32×32 tori: packet-hops per second, steps per second and link
    frames per second, lockstep and free clock, and their ratio to (a).
Figures, not assertions: speed targets live here, never in timed tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgpack
import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.topology import Topology

__all__ = ["bench_sizes", "relay_chain", "run_bench"]


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


def _emulator_point(spec: str, clock: str, multicasts: int, dests: int) -> dict[str, Any]:
    topo = Topology.parse(spec)
    plan = random_plan(topo, ["vh"], dests, multicasts, seed=1)
    settings = RunSettings(clock=clock)
    t0 = time.perf_counter()
    raw = trio.run(emulate, plan, settings, None)
    total = time.perf_counter() - t0
    hops = sum(raw.traffic.values())
    frames = (raw.last_step) * sum(len(topo.ports(n)) for n in topo.nodes()) if clock == "lockstep" else hops
    return {
        "topology": spec,
        "clock": clock,
        "multicasts": multicasts,
        "destinations": dests,
        "steps": raw.last_step if clock == "lockstep" else None,
        "packet_hops": hops,
        "run_s": raw.wall_s,
        "total_s": total,
        "hops_per_s": hops / raw.wall_s,
        "steps_per_s": raw.last_step / raw.wall_s if clock == "lockstep" else None,
        "frames_per_s": frames / raw.wall_s,
    }


def bench_sizes(quick: bool = False) -> list[tuple[str, int, int]]:
    """The (topology, multicasts, destinations) points of the emulator benchmark."""
    return [("torus:8x8", 10, 10)] if quick else [("torus:20x20", 100, 50), ("torus:32x32", 100, 50)]


def run_bench(
    quick: bool = False, progress: Callable[[int, int], None] | None = None
) -> tuple[float, list[dict[str, Any]]]:
    """The relay-chain limit (hops/s) and one row per emulator point, with its ratio to the limit.

    ``progress(done, total)`` is called after the relay chain and after each point.
    """
    sizes = list(bench_sizes(quick))
    total = 1 + 2 * len(sizes)
    limit = relay_chain(16, 500) if quick else relay_chain()
    if progress is not None:
        progress(1, total)
    rows = []
    for spec, mcs, k in sizes:
        for clock in ("lockstep", "free"):
            r = _emulator_point(spec, clock, mcs, k)
            r["ratio"] = r["frames_per_s"] / limit
            rows.append(r)
            if progress is not None:
                progress(1 + len(rows), total)
    return limit, rows
