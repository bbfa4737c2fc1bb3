"""How long a deployment's liveness ping takes at 64 nodes (issue 44, item 4: all nodes within 1 s).

Deploys ``--topology`` (torus:8x8 by default: 64 nodes) as ``--runtime`` under a private state
directory, then times ``--rounds`` pings of every node (``ping_nodes``: one message on the bus,
each node's event loop answers) and the whole ``meshcast deployments`` listing; stops one node
(SIGSTOP: its process, or the container's main process) and times the check that names it;
resumes it and destroys the deployment. Prints one JSON object with the date, the load averages
and the command.

    .venv/bin/python benchmarks/liveness_bench.py --runtime containers [--topology torus:8x8]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import trio

from coordinator.runtimes import deployments
from node.topology import Topology
from node.transport.mqtt import ping_nodes

_MAIN = "import sys; from coordinator.cli import main; sys.exit(main(sys.argv[1:]))"


def node_pid(dep: deployments.Deployment, node: str) -> int:
    """Node ``x,y``'s process id on this host (a container's main process seen from the host)."""
    if dep.runtime == "processes":
        return int(dep.nodes[node]["pid"])
    service = "node-" + node.replace(",", "-")
    (cid,) = [c for c, s in deployments._containers(dep, running=True) if s == service]
    out = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", cid], capture_output=True, text=True)
    return int(out.stdout.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", default="processes")
    ap.add_argument("--topology", default="torus:8x8")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    os.environ["MESHCAST_STATE_DIR"] = tempfile.mkdtemp(prefix="meshcast-live-")
    topo = Topology.parse(args.topology)
    start = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), os.getloadavg())
    t0 = time.monotonic()
    dep = deployments.deploy(args.runtime, f"live-{args.runtime}", topo)
    deploy_s = time.monotonic() - t0
    try:
        address = deployments._address(dep)
        pings: list[float] = []
        answered: list[int] = []
        for _ in range(args.rounds):
            t = time.monotonic()
            got = trio.run(ping_nodes, address, dep.run_id, topo.size, deployments.PING_TIMEOUT)
            pings.append(time.monotonic() - t)
            answered.append(len(got))
        t = time.monotonic()
        listing = subprocess.run(
            [sys.executable, "-c", _MAIN, "deployments"], capture_output=True, text=True, check=True
        ).stdout
        listing_s = time.monotonic() - t
        victim = f"{topo.cols // 2},{topo.rows // 2}"
        pid = node_pid(dep, victim)
        os.kill(pid, signal.SIGSTOP)
        try:
            t = time.monotonic()
            named = deployments.unresponsive(dep)
            stopped_s = time.monotonic() - t
        finally:
            os.kill(pid, signal.SIGCONT)
        after = deployments.unresponsive(dep)
    finally:
        deployments.destroy(dep.name)
    print(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "runtime": args.runtime,
                "topology": args.topology,
                "nodes": topo.size,
                "started": start[0],
                "load_before": start[1],
                "load_after": os.getloadavg(),
                "deploy_s": round(deploy_s, 2),
                "ping_s": {
                    "min": round(min(pings), 4),
                    "median": round(statistics.median(pings), 4),
                    "max": round(max(pings), 4),
                },
                "answered_min": min(answered),
                "listing_s": round(listing_s, 3),
                "listing_row": next((ln for ln in listing.splitlines() if ln.startswith(dep.name)), ""),
                "stopped_node": victim,
                "named_while_stopped": named,
                "stopped_check_s": round(stopped_s, 3),
                "unresponsive_after_sigcont": after,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
