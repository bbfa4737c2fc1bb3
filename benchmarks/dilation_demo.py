"""Time dilation on this machine (issue 42, item 3): the physics check at K = 1 and at larger K.

64 node processes (mesh:8x8, the processes runtime), links of d = 2 ms with normal jitter of
σ = 0.5 ms, VH multicasts from (0,0) to a fixed set, ``--repeat N`` kept ones, each in its own
emulation, with ``--busy`` busy-loop processes beside them. For each K it prints the fidelity
verdict and the physics check (per destination at least 2 links away: mean within 15% of h·m,
SD within 35% of √h·s); coordinator/experiments/physics.py runs it. Asserts nothing; prints one
JSON line per K with the date, the load and the command.

    .venv/bin/python benchmarks/dilation_demo.py [--repeat 30] [--k 1 10 20] [--busy 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

from coordinator.experiments.physics import busy_loops, physics_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--k", type=float, nargs="+", default=[1.0, 10.0, 20.0])
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--topology", default="mesh:8x8")
    ap.add_argument("--delay", type=float, default=0.002)
    ap.add_argument("--sigma", type=float, default=0.0005)
    args = ap.parse_args()
    with busy_loops(args.busy):
        for k in args.k:
            start = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            out = physics_run(k, args.repeat, topology=args.topology, delay=args.delay, sigma=args.sigma)
            row = dataclasses.asdict(out) | {
                "physics_holds": out.physics_holds,
                "command": "benchmarks/dilation_demo.py " + " ".join(sys.argv[1:]), "busy_loops": args.busy,
                "topology": args.topology, "repeat": args.repeat, "loadavg_end": os.getloadavg(),
                "started": start, "ended": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            }  # fmt: skip
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
