"""Bench points on whichever build of the node this checkout has: an A/B of ``make compiled``
(mypyc) against ``make plain`` (README, "the compiled build"). From the checkout:

    for i in 1 2 3; do make -s compiled && .venv/bin/python benchmarks/compiled_ab.py
                       make -s plain && .venv/bin/python benchmarks/compiled_ab.py; done

Prints the build (``.so``: compiled), then packet-hops/s of the 20×20 and 32×32 lockstep points
(engines runtime, in-process), of the sparse 64×64 point, and the relay chain.
"""

import node.switching.engine
import node.transport.wire
from coordinator.experiments.bench import emulator_point, relay_chain

print("engine from", node.switching.engine.__file__.rsplit("/", 2)[-2:], end=" ")
out = []
for spec in ("torus:20x20", "torus:32x32"):
    for rt in ("engines", "in-process"):
        r = emulator_point(spec, "lockstep", 100, 50, 1, rt)
        out.append(f"{spec[6:]} {rt[:3]} {r.packet_hops_per_s:,.0f}")
r = emulator_point("torus:64x64", "lockstep", 1, 10)
out.append(f"64sparse {r.packet_hops_per_s:,.0f}")
print(" | ".join(out), "| relay", f"{relay_chain():,.0f}")
