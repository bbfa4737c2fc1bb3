"""Where a sparse in-process lockstep node-step's time goes: timers around its parts.

Runs the bench's sparse point (``meshcast bench``: 1 VH multicast × 10 destinations on a 64×64
torus, in-process, lockstep) N times with :func:`node.sync.polled.polled_step` replaced by a copy
that times its parts (reading the frames, ``Lockstep.work`` and within it the engine's step,
encoding and sending), and prints each part's mean per node-step with the run's active span.
The timers add a few tenths of a µs a part.

Usage: ``.venv/bin/python benchmarks/sparse_split.py [TOPOLOGY] [RUNS]`` (default torus:64x64 5).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from time import perf_counter_ns
from typing import Any

import node.actor as actor
from coordinator.experiments.bench import _timed_run
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.switching.engine import Engine, Packet
from node.switching.lockstep import Lockstep
from node.sync import polled
from node.topology import Topology
from node.transport.links import PolledLink
from node.transport.wire import StepFrame, encode_link

ACC = {"frames": 0, "work": 0, "engine": 0, "send": 0, "n": 0}


def timed_step(t: int, clock: Lockstep, *rest: Any) -> list[Hashable]:
    """:func:`node.sync.polled.polled_step` (links, early frames, bad-frame report, neighbours
    in ``rest``), timed part by part, without its link-down handling."""
    links: dict[str, PolledLink] = rest[0]
    early: dict[str, StepFrame] = rest[1]
    neighbours: dict[str, Hashable] = rest[3]
    a = perf_counter_ns()
    frames = polled.polled_frames(t, clock.ports, links, early, rest[2]) if t > 0 else {}
    b = perf_counter_ns()
    out = clock.work(t, frames)
    c = perf_counter_ns()
    sent = []
    for p, frame in out.items():
        links[p].send_nowait(encode_link(frame))
        sent.append(neighbours[p])
    d = perf_counter_ns()
    ACC["frames"] += b - a
    ACC["work"] += c - b
    ACC["send"] += d - c
    ACC["n"] += 1
    return sent


def main(argv: list[str]) -> None:
    spec = argv[0] if argv else "torus:64x64"
    runs = int(argv[1]) if len(argv) > 1 else 5
    engine_step = Engine.step

    def step(self: Engine, t: int) -> list[tuple[str, Packet]]:
        a = perf_counter_ns()
        out = engine_step(self, t)
        ACC["engine"] += perf_counter_ns() - a
        return out

    actor.polled_step = timed_step  # type: ignore[assignment]
    Engine.step = step  # type: ignore[method-assign]
    plan = random_plan(Topology.parse(spec), ["vh"], 10, 1, seed=1)
    for _ in range(runs):
        for k in ACC:
            ACC[k] = 0
        raw, _, active, _ = _timed_run(plan, RunSettings(clock="lockstep"))
        n = max(ACC["n"], 1)
        hops = sum(raw.traffic.values())
        print(
            f"{spec}: {hops} packet-hops in {active * 1e3:.2f} ms ({active / hops * 1e6:.1f} µs a hop), "
            f"{n} node-steps; per node-step: frames {ACC['frames'] / n / 1e3:.1f} µs, work "
            f"{ACC['work'] / n / 1e3:.1f} (engine step {ACC['engine'] / n / 1e3:.1f}), "
            f"send {ACC['send'] / n / 1e3:.1f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
