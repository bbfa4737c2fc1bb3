"""Deadlocks per algorithm and topology with and without virtual channels (docs/wormhole.md).

Random shared plans on the wormhole reference model: 16 multicasts of 1 to 10 random
destinations from random sources, injected in cycles 0 to 10, L = 16, Ts = 10, B = 2, 25 seeded
plans per cell ("+ unicast": 32 messages, three in four a one-destination unicast, the rest
multicasts of the named algorithm). Counts the plans that end as deadlocked. From the checkout:

    .venv/bin/python benchmarks/vc_deadlocks.py
"""

from __future__ import annotations

import random
import sys
import time

from coordinator.runtimes.wormhole_model import run_wormhole_model
from coordinator.workloads.plan import Multicast, Plan
from node.settings import NodeSettings
from node.topology import Topology

PLANS = 25
CONFIGS = (
    ("--vcs 1", 1, "shared"),
    ("--vcs 2", 2, "shared"),
    ("--vcs 2 split", 2, "split"),
    ("--vcs 4 split", 4, "split"),
)
CELLS = (
    ("mesh:8x8", ("dp", "mp", "qg", "cp", "unicast", "tree", "dp + unicast")),
    ("torus:6x6", ("dp", "mp", "tasnem", "unicast", "tree", "dp + unicast")),
)


def plan(topo: Topology, alg: str, seed: int) -> Plan:
    """One seeded random plan of ``alg`` (``X + unicast``: mixed with one-destination unicasts)."""
    rnd = random.Random(seed)
    nodes = sorted(topo.nodes())
    mixed = alg.endswith(" + unicast")
    mcs = []
    for i in range(32 if mixed else 16):
        src = rnd.choice(nodes)
        others = [n for n in nodes if n != src]
        if mixed and rnd.random() < 0.75:
            a, dests = "unicast", (rnd.choice(others),)
        else:
            a, dests = alg.split()[0], tuple(rnd.sample(others, rnd.randint(1, 10)))
        mcs.append(Multicast(i, a, src, dests, rnd.randint(0, 10)))
    return Plan(topo, tuple(mcs))


def main() -> None:
    start = time.time()
    print("| topology | algorithm | port model | " + " | ".join(c[0] for c in CONFIGS) + " |")
    print("|---|---|---|" + "---|" * len(CONFIGS))
    for spec, algs in CELLS:
        topo = Topology.parse(spec)
        for alg in algs:
            for port_model in ("all-port", "one-port"):
                row = []
                for _, vcs, classes in CONFIGS:
                    if classes == "split" and topo.is_torus and vcs < 4:
                        row.append("n/a")
                        continue
                    dead = 0
                    for seed in range(PLANS):
                        raw = run_wormhole_model(
                            plan(topo, alg, seed),
                            NodeSettings(
                                switching="wormhole", contention="shared", port_model=port_model,
                                flits=16, ts=10, vcs=vcs, vc_classes=classes, max_steps=100_000,
                            ),
                        )  # fmt: skip
                        dead += any("deadlock" in x for x in raw.incomplete)
                    row.append(str(dead))
                print(f"| {spec} | {alg} | {port_model} | " + " | ".join(row) + " |", flush=True)
    print(f"{PLANS} plans per cell, {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
