"""Per-hop latency of links with the delay alone against links with jitter, runs interleaved.

The physics test's reference (tests/test_link_runs.py, ``interleaved``): 8 repetitions of each,
alternating, VH from (0,0) to five destinations of a 4×4 mesh, d = 2 ms. Prints, for each side,
the median and the least latency a hop over destinations at least two links away. With
``--base-jitter`` the reference side draws from the same jitter with another seed instead of the
delay alone (what the test now does). Figures, not assertions:

    .venv/bin/python benchmarks/delay_only_vs_jitter.py [--runtime processes] [--sigma-us 500]
        [--approach-us 150] [--base-jitter]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator.runtimes.records import RawRun, RunSettings
from node.transport.linkmodel import Jitter, LinkModel, LinkSpec
from tests.test_link_runs import interleaved, latencies


def per_hop_ms(raw: RawRun) -> tuple[float, float]:
    """Median and least latency a hop (ms) over the destinations at least two links away."""
    per = [s / h for rows in latencies(raw).values() for h, s in rows if h >= 2]
    return round(statistics.median(per) * 1e3, 2), round(min(per) * 1e3, 2)


async def main(args: argparse.Namespace) -> None:
    d, sigma = 0.002, args.sigma_us / 1e6
    jittered = LinkSpec(delay=d, jitter=Jitter("normal", sigma))
    base = LinkModel(jittered, seed=2) if args.base_jitter else LinkModel(LinkSpec(delay=d))
    settings = RunSettings(clock="free", runtime=args.runtime, run_dir=tempfile.mkdtemp(),
                           wall_budget=120, shaper_approach_us=args.approach_us)  # fmt: skip
    load = os.getloadavg()[0]
    b, m = await interleaved(8, settings, base, LinkModel(jittered, seed=1))
    print(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_at_start": round(load, 2),
        "command": " ".join(sys.argv), "base": "jitter, seed 2" if args.base_jitter else "delay alone",
        "base_per_hop_ms": per_hop_ms(b), "jittered_per_hop_ms": per_hop_ms(m),
    }))  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="processes")
    ap.add_argument("--sigma-us", type=float, default=500.0)
    ap.add_argument("--approach-us", type=int, default=150)
    ap.add_argument("--base-jitter", action="store_true")
    trio.run(main, ap.parse_args())
