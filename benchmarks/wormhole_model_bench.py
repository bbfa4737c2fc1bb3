"""Flit-hops/s and cycles/s of the wormhole reference model under Poisson multicast load.

    .venv/bin/python benchmarks/wormhole_model_bench.py mesh:10x10 0.0005 4000 dp
    .venv/bin/python benchmarks/wormhole_model_bench.py mesh:10x10 0.001 4000 dp 0.9   # 90% unicast
    .venv/bin/python benchmarks/wormhole_model_bench.py mesh:16x16 0.0005 2000 qg 0 --profile

Arguments: topology, rate per node per cycle, duration (cycles of injections), algorithm,
unicast fraction (default 0). 64-flit worms, seed 004's Ts and preparation times, a budget of
ten times the duration. ``--profile`` prints the top of a cProfile.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

from coordinator.experiments.load import Traffic, poisson_plan
from coordinator.runtimes.records import RawRun
from coordinator.runtimes.wormhole_model import run_wormhole_model
from node.settings import NodeSettings
from node.topology import Topology


def main(argv: list[str]) -> None:
    profile = "--profile" in argv
    args = [a for a in argv if a != "--profile"]
    topo = Topology.parse(args[0])
    rate, duration, alg = float(args[1]), int(args[2]), args[3]
    unicast = float(args[4]) if len(args) > 4 else 0.0
    plan = poisson_plan(topo, alg, Traffic(rate, 10, duration, unicast, seed=1))
    prof = cProfile.Profile() if profile else None
    start = time.perf_counter()
    if prof is not None:
        prof.enable()
    raw: RawRun = run_wormhole_model(
        plan,
        NodeSettings(
            switching="wormhole", contention="shared", port_model="all-port", max_steps=10 * duration
        ),
    )
    if prof is not None:
        prof.disable()
    wall = time.perf_counter() - start
    hops = sum(raw.link_sends.values())
    print(
        f"{len(plan.multicasts)} multicasts, {raw.last_step} cycles, {hops} flit-hops, {wall:.1f} s, "
        f"{hops / wall:.0f} flit-hops/s, {raw.last_step / wall:.0f} cycles/s {raw.incomplete[:1]}"
    )
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main(sys.argv[1:])
