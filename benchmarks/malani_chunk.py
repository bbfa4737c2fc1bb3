"""Time one chunk of seed 000's reproduction: the unit of work its worker processes run.

``reproduce malani`` deals each sweep (a topology, its algorithms, k = 20..380, 100 repetitions)
into chunks of at most 2,000 multicasts and emulates them on a pool. This runs the first chunk
of one sweep in this process, as a worker would (emulation, then its tidy rows), and prints its
size, steps, wall and CPU seconds, and the emulation's own ``wall_s``. Run it from two checkouts
in turn (``PYTHONPATH=OTHER .venv/bin/python benchmarks/malani_chunk.py``) to compare code on
this drifting machine.

Usage: ``.venv/bin/python benchmarks/malani_chunk.py [TOPOLOGY] [ALGORITHMS]``
(default ``mesh:20x20 diag,dist,pair,min``).
"""

from __future__ import annotations

import sys
import time

from coordinator.experiments import sweep
from coordinator.reproduce.malani import KS, SOURCE
from coordinator.runtimes.records import RunSettings
from node.topology import Topology


def main(argv: list[str]) -> None:
    topo = argv[0] if argv else "mesh:20x20"
    algs = argv[1].split(",") if len(argv) > 1 else ["diag", "dist", "pair", "min"]
    settings = RunSettings(port_model="one-port", contention="isolated", clock="lockstep")
    plan, points = sweep.sweep_plan(Topology.parse(topo), algs, KS, 100, 1, SOURCE)
    chunks = sweep._chunks(0, plan, points, sweep.DEFAULT_CHUNK)
    wall, cpu = time.perf_counter(), time.process_time()
    result = sweep._run_chunk(chunks[0], settings)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"{topo} {','.join(algs)}: chunk 1 of {len(chunks)}, {len(chunks[0].plan.multicasts)} multicasts, "
        f"{result.steps} steps, {wall:.2f} s wall, {cpu:.2f} CPU-s, emulation wall_s {result.wall_s:.2f}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
