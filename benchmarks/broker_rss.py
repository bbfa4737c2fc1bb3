"""The broker's memory over many runs on one deployment (issue 44, item 9: flat broker memory).

Deploys torus:3x3 as ``--runtime`` (processes or containers) under a private state directory,
runs ``--runs`` small lockstep runs on it one after another (each its own epoch), and reads the
broker's resident set (``VmRSS`` of its process: the container's main process for containers)
after every tenth run; prints one JSON object with the date, the load averages and the command.

    .venv/bin/python benchmarks/broker_rss.py --runtime containers [--runs 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes import deployments
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.topology import Topology


def broker_pid(dep: deployments.Deployment) -> int:
    """The broker's process id on this host (a container's main process seen from the host)."""
    if dep.runtime == "processes":
        return int(dep.broker_pid or 0)
    (cid,) = [c for c, service in deployments._containers(dep, running=True) if service == "broker"]
    out = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", cid], capture_output=True, text=True)
    return int(out.stdout.strip())


def rss_kb(pid: int) -> int:
    """The resident set of process ``pid``, in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="processes")
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    os.environ["MESHCAST_STATE_DIR"] = tempfile.mkdtemp(prefix="meshcast-rss-")
    topo = Topology.parse("torus:3x3")
    start = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), os.getloadavg())
    name = f"rss-{args.runtime}"
    dep = deployments.deploy(args.runtime, name, topo)
    samples: list[tuple[int, int]] = []
    try:
        pid = broker_pid(dep)
        samples.append((0, rss_kb(pid)))
        for i in range(1, args.runs + 1):
            plan = random_plan(topo, ["vh"], 4, repeat=2, seed=i)
            raw = trio.run(emulate, plan, RunSettings(wall_budget=60, runtime=args.runtime, deployment=name))
            if raw.incomplete:
                raise SystemExit(f"run {i} incomplete: {raw.incomplete[:2]}")
            if i % 10 == 0:
                samples.append((i, rss_kb(pid)))
                print(f"run {i}: broker RSS {samples[-1][1]} kB", file=sys.stderr)
    finally:
        deployments.destroy(name)
    n = len(samples)
    mx = sum(s[0] for s in samples) / n
    my = sum(s[1] for s in samples) / n
    slope = sum((x - mx) * (y - my) for x, y in samples) / sum((x - mx) ** 2 for x, _ in samples)
    print(json.dumps({
        "command": "benchmarks/broker_rss.py " + " ".join(sys.argv[1:]), "runtime": args.runtime,
        "runs": args.runs, "samples_kb": samples, "slope_kb_per_run": round(slope, 3),
        "growth_kb": samples[-1][1] - samples[0][1], "started": start[0], "loadavg_start": start[1],
        "ended": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "loadavg_end": os.getloadavg(),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
