"""A small, fixed malani-like chunk: deterministic work to count instructions of, before and after.

``sweep._run_chunk`` on one chunk of a reproduction-like sweep (DIAG, DIST, PAIR and MIN from
(0, 0), every k of seed 000's reproduction, ``REPS`` repetitions), in this process; it prints
its size and CPU seconds. Under ``valgrind --tool=callgrind`` the instruction count does not
depend on what else the machine does, where CPU seconds do::

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind --callgrind-out-file=OUT \\
        .venv/bin/python benchmarks/malani_small.py mesh:20x20 2

(minus an import-only run of the same modules, ``-c "import coordinator.experiments.sweep"``).

Usage: ``.venv/bin/python benchmarks/malani_small.py [TOPOLOGY] [REPS]`` (default mesh:20x20 2).
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
    reps = int(argv[1]) if len(argv) > 1 else 2
    settings = RunSettings(port_model="one-port", contention="isolated", clock="lockstep")
    plan, points = sweep.sweep_plan(
        Topology.parse(topo), ["diag", "dist", "pair", "min"], KS, reps, 1, SOURCE
    )
    chunk = sweep._chunks(0, plan, points, 0)[0]
    cpu = time.process_time()
    result = sweep._run_chunk(chunk, settings)
    cpu = time.process_time() - cpu
    print(f"{topo}: {len(chunk.plan.multicasts)} multicasts, {result.steps} steps, {cpu:.2f} CPU-s")


if __name__ == "__main__":
    main(sys.argv[1:])
