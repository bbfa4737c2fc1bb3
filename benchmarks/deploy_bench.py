"""Start-up time and lockstep steps/s of the processes and containers runtimes.

    .venv/bin/python benchmarks/deploy_bench.py processes torus:8x8 [steps]
    .venv/bin/python benchmarks/deploy_bench.py containers torus:4x4 [steps]

The plan injects one VH multicast (source (0,0), three destinations) every 50 steps, so the
lockstep run lasts about ``steps`` steps whatever the network's size. Start-up is everything
before the run's first step (processes or containers started, broker, hello, links, plan);
steps/s is the lockstep rate of the run itself.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from functools import partial

import trio

from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology


def plan_for(topo: Topology, steps: int) -> Plan:
    dests = ((topo.cols // 2, topo.rows // 2), (topo.cols - 1, topo.rows - 1), (topo.cols - 1, 0))
    return Plan(topo, tuple(Multicast(i, "vh", (0, 0), dests, i * 50) for i in range(max(1, steps // 50))))


def main() -> None:
    runtime, spec = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    topo = Topology.parse(spec)
    plan = plan_for(topo, steps)
    settings = RunSettings(
        wall_budget=900, max_steps=steps + 100, runtime=runtime, run_dir=tempfile.mkdtemp()
    )
    t0 = time.perf_counter()
    if runtime == "processes":
        from coordinator.runtimes.processes import run_processes

        timings: dict[str, float] = {}
        raw = trio.run(partial(run_processes, timings=timings), plan, settings)
        total = time.perf_counter() - t0
        startup = timings.get("startup_s", float("nan"))
    else:
        from coordinator.runtimes.containers import ContainerRun

        run = ContainerRun(plan, settings, __import__("pathlib").Path(settings.run_dir or "."))

        async def go() -> tuple[object, float]:
            run.write()
            await run.build()
            t1 = time.time()
            try:
                rc = await run.up()
            finally:
                await run.down()
            doc = json.loads((run.results / "run.json").read_text())
            return run.collect(rc), doc["run"]["started_at_unix"] - t1

        raw, startup = trio.run(go)  # type: ignore[assignment]
        total = time.perf_counter() - t0
    r: RawRun = raw
    status = "complete" if not r.incomplete else f"INCOMPLETE {r.incomplete[:2]}"
    rate = r.last_step / max(r.wall_s, 1e-9)
    print(
        f"{runtime} {spec} ({topo.size} nodes): start-up {startup:.1f} s, {r.last_step} steps in"
        f" {r.wall_s:.1f} s = {rate:.0f} steps/s, total {total:.1f} s, {status}"
    )


if __name__ == "__main__":
    main()
