"""Profile helper (h12): a malani-like plan (source (0,0), k=20..380, diag/dist/pair/min)."""

import cProfile
import hashlib
import pstats
import sys
import time

import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.topology import Topology

spec, mode = sys.argv[1], sys.argv[2]
rep = int(sys.argv[3]) if len(sys.argv) > 3 else 2
topo = Topology.parse(spec)
plan = random_plan(
    topo, ["diag", "dist", "pair", "min"], list(range(20, 400, 20)), rep, seed=1, source=(0, 0)
)
settings = RunSettings(port_model="one-port", contention="isolated", clock="lockstep")


def go():
    if mode.startswith("engines"):
        return run_engines(plan, settings)
    return trio.run(emulate, plan, settings, None)


pr = cProfile.Profile(time.process_time)
if mode.endswith("prof"):
    pr.enable()
c0 = time.process_time()
t0 = time.perf_counter()
raw = go()
t = time.perf_counter() - t0
c = time.process_time() - c0
if mode.endswith("prof"):
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(35)
arr = sorted((a.mc, tuple(a.node), a.step, a.hops, a.startups) for a in raw.arrivals)
d = hashlib.sha256(repr((arr, sorted(raw.traffic.items()))).encode()).hexdigest()[:16]
hops = sum(raw.traffic.values())
print(
    f"{spec} {mode} mcs={len(plan.multicasts)}: wall {t:.2f}s cpu {c:.2f}s"
    f" hops={hops} {hops / c:.0f} hops/cpu-s digest={d}"
)
