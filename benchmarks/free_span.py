"""Where a sparse free-clock run's active span goes: the nodes' task steps against trio's own time.

Runs the bench's sparse point (``meshcast bench``: 1 VH multicast × 10 destinations on a 64×64
torus, in-process, free clock) with a trio instrument that stamps every task step and I/O wait,
and splits the active span (first injection to last delivery, as the bench's rate divides by)
into the task steps (the nodes' own code, one per packet-hop), the I/O waits, and the rest (trio
scheduling between steps), with the number of scheduling batches.

Usage: ``.venv/bin/python benchmarks/free_span.py [TOPOLOGY] [RUNS]`` (default torus:64x64 3).
"""

from __future__ import annotations

import sys
import time

import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.topology import Topology


class Stamps(trio.abc.Instrument):
    """Every task step's and I/O wait's start and end (perf_counter ns)."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int]] = []  # (ns, kind): 0/1 task step start/end, 2/3 I/O wait

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.events.append((time.perf_counter_ns(), 0))

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.events.append((time.perf_counter_ns(), 1))

    def before_io_wait(self, timeout: float) -> None:
        self.events.append((time.perf_counter_ns(), 2))

    def after_io_wait(self, timeout: float) -> None:
        self.events.append((time.perf_counter_ns(), 3))


def main(argv: list[str]) -> None:
    spec = argv[0] if argv else "torus:64x64"
    runs = int(argv[1]) if len(argv) > 1 else 3
    plan = random_plan(Topology.parse(spec), ["vh"], 10, 1, seed=1)
    for _ in range(runs):
        stamps = Stamps()
        offset = time.perf_counter_ns() - time.monotonic_ns()  # the nodes stamp monotonic ns
        raw = trio.run(emulate, plan, RunSettings(clock="free"), None, instruments=[stamps])
        start = min(ns for ns, _ in raw.injected.values()) + offset
        end = max(a.wall_ns for a in raw.arrivals if a.wall_ns is not None) + offset
        steps = io = n = batches = 0
        opened = 0
        for ns, kind in stamps.events:
            if not start <= ns <= end:
                continue
            if kind in (0, 2):
                opened = ns
            elif opened:
                if kind == 1:
                    steps += ns - opened
                    n += 1
                else:
                    io += ns - opened
                    batches += 1
                opened = 0
        span = end - start
        hops = sum(raw.traffic.values())
        print(
            f"{spec} free: {hops} packet-hops in {span / 1e3:.0f} µs; {n} task steps take "
            f"{steps / 1e3:.0f} µs ({steps / max(n, 1) / 1e3:.1f} µs each), I/O waits {io / 1e3:.0f} µs, "
            f"trio between steps {(span - steps - io) / 1e3:.0f} µs, {batches} batches"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
