"""Profile helper (h12): engines runtime and in-process points."""

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


def digest(raw):
    arr = sorted((a.mc, tuple(a.node), a.step, a.hops, a.startups) for a in raw.arrivals)
    return hashlib.sha256(repr((arr, sorted(raw.traffic.items()))).encode()).hexdigest()[:16]


spec, mode, clock = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "lockstep"
m, k = (100, 50)
topo = Topology.parse(spec)
plan = random_plan(topo, ["vh"], k, m, seed=1)
settings = RunSettings(clock=clock)


def go():
    if mode.startswith("engines"):
        return run_engines(plan, settings)
    return trio.run(emulate, plan, settings, None)


if mode.endswith("prof"):
    pr = cProfile.Profile(time.process_time)
    pr.enable()
    c0 = time.process_time()
    t0 = time.perf_counter()
    raw = go()
    t = time.perf_counter() - t0
    c = time.process_time() - c0
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(30)
else:
    c0 = time.process_time()
    t0 = time.perf_counter()
    raw = go()
    t = time.perf_counter() - t0
    c = time.process_time() - c0
hops = sum(raw.traffic.values())
print(
    f"{spec} {mode} {clock}: wall {t:.2f}s cpu {c:.2f}s ({hops / c:.0f} hops/cpu-s)"
    f" hops={hops} {hops / t:.0f} hops/s digest={digest(raw)}"
)
if mode.endswith("prof") and len(sys.argv) > 4:
    pstats.Stats(pr).print_callers(sys.argv[4])
