"""Start-up time and lockstep steps/s of the processes and containers runtimes.

    .venv/bin/python benchmarks/deploy_bench.py processes torus:8x8 [steps]
    MESHCAST_NODE_LAUNCH=exec .venv/bin/python benchmarks/deploy_bench.py processes torus:8x8
    .venv/bin/python benchmarks/deploy_bench.py containers torus:4x4 [steps]
    MESHCAST_BENCH_SYNC=barrier .venv/bin/python benchmarks/deploy_bench.py processes torus:16x16 300

``MESHCAST_BENCH_SYNC`` (``alpha`` or ``barrier``; unset: the run's default, ``barrier``) is the
run's ``--sync``: the α-synchronizer's null frames, or the coordinator-led step barrier (only
nodes with work step).

The plan injects one VH multicast (source (0,0), three destinations) every 50 steps, so the
lockstep run lasts about ``steps`` steps whatever the network's size. Start-up is everything
before the run's first step (processes or containers started, broker, hello, links, plan);
steps/s is the lockstep rate of the run itself. Memory: for processes, the peak over the run
of the RSS and of the PSS (shared pages divided among their sharers: what the nodes really
cost together) summed over the node processes, sampled every half second from /proc; for
containers, the peak of the node containers' summed cgroup memory: what ``docker stats`` shows
(usage less inactive file cache), read from the cgroup files every half second.

Since 24 Nov 2026 the containers' memory is read from the cgroup files themselves rather than
with ``docker stats`` once a second: each ``docker stats`` call made the engine gather 64
containers' statistics while it was still creating the others, and added ~2 s to the start-up
it measured. The figure is the same cgroup quantity; where the cgroup files cannot be read
(another cgroup layout, a remote engine) the bench falls back to ``docker stats``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import trio

from coordinator.errors import Interrupted
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology


def plan_for(topo: Topology, steps: int) -> Plan:
    dests = ((topo.cols // 2, topo.rows // 2), (topo.cols - 1, topo.rows - 1), (topo.cols - 1, 0))
    return Plan(topo, tuple(Multicast(i, "vh", (0, 0), dests, i * 50) for i in range(max(1, steps // 50))))


def _node_pids() -> list[int]:
    """The node processes below this one: every descendant but the broker and the fork server."""
    parents: dict[int, int] = {}
    comms: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            comms[int(entry)] = stat[stat.index("(") + 1 : stat.rindex(")")]
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier and p not in found}
        found |= frontier
    return [p for p in found if not comms[p].startswith(("mosquitto", "meshcast-fork"))]


def _memory(pids: list[int]) -> tuple[int, int]:
    """Summed RSS and PSS of ``pids`` in bytes (from /proc/<pid>/smaps_rollup)."""
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            continue
    return rss, pss


async def _sample_processes(peak: dict[str, float]) -> None:
    while True:
        pids = await trio.to_thread.run_sync(_node_pids)
        rss, pss = await trio.to_thread.run_sync(_memory, pids)
        if rss > peak.get("rss", 0):
            peak.update(rss=rss, pss=max(pss, peak.get("pss", 0)), nodes=len(pids))
        peak["pss"] = max(pss, peak.get("pss", 0))
        # reading 1,024 smaps_rollup files costs the kernel and this process's GIL real time:
        # every half second per 64 nodes keeps the sampler's share small at any size
        await trio.sleep(0.5 * max(1, len(pids) / 64))


def _container_memory(project: str) -> int:
    """Summed memory of this project's node containers now (``docker stats``), in bytes."""
    out = subprocess.run(
        ["docker", "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    units = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "kB": 1000, "MB": 1000**2, "GB": 1000**3}
    total = 0
    for line in out.splitlines():
        name, _, usage = line.partition(" ")
        if project not in name or "node" not in name:
            continue
        amount = usage.split("/")[0].strip()
        for unit in sorted(units, key=len, reverse=True):
            if amount.endswith(unit):
                total += int(float(amount[: -len(unit)]) * units[unit])
                break
    return total


CGROUP_DIRS = (
    "/sys/fs/cgroup/memory/docker/{id}",  # cgroup v1, cgroupfs driver
    "/sys/fs/cgroup/memory/system.slice/docker-{id}.scope",  # cgroup v1, systemd driver
    "/sys/fs/cgroup/system.slice/docker-{id}.scope",  # cgroup v2, systemd driver
    "/sys/fs/cgroup/docker/{id}",  # cgroup v2, cgroupfs driver
)


def _node_container_ids(project: str) -> list[str]:
    """Full ids of ``project``'s node containers (one ``docker ps``: a list, no statistics)."""
    out = subprocess.run(
        ["docker", "ps", "--no-trunc", "--filter", f"label=com.docker.compose.project={project}",
         "--format", "{{.ID}} {{.Names}}"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    return [cid for cid, _, name in (ln.partition(" ") for ln in out.splitlines()) if "node" in name]


def _cgroup_memory(cid: str) -> int | None:
    """A container's memory as ``docker stats`` counts it (usage less inactive file cache), or None."""
    for pattern in CGROUP_DIRS:
        base = pattern.format(id=cid)
        v1 = "/memory/" in base
        try:
            with open(f"{base}/memory.usage_in_bytes" if v1 else f"{base}/memory.current") as f:
                usage = int(f.read())
            inactive = 0
            with open(f"{base}/memory.stat") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == ("total_inactive_file" if v1 else "inactive_file"):
                        inactive = int(value)
            return max(0, usage - inactive)
        except (OSError, ValueError):
            continue
    return None


def main() -> None:
    runtime, spec = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    topo = Topology.parse(spec)
    plan = plan_for(topo, steps)
    sync = os.environ.get("MESHCAST_BENCH_SYNC") or None  # unset: the runtime's default (barrier)
    if sync not in (None, "alpha", "barrier"):
        sys.exit(f"MESHCAST_BENCH_SYNC must be alpha or barrier, got {sync!r}")
    settings = RunSettings(
        wall_budget=900, max_steps=steps + 100, runtime=runtime, run_dir=tempfile.mkdtemp(), sync=sync
    )
    t0 = time.perf_counter()
    if runtime == "processes":
        from coordinator.runtimes.processes import run_processes

        timings: dict[str, float] = {}
        peak: dict[str, float] = {}

        async def go_processes() -> RawRun:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_sample_processes, peak)
                raw = await run_processes(plan, settings, timings=timings)
                nursery.cancel_scope.cancel()
            return raw

        raw = trio.run(go_processes)
        total = time.perf_counter() - t0
        startup = timings.get("startup_s", float("nan"))
        rss_mib, pss_mib = peak.get("rss", 0) / 2**20, peak.get("pss", 0) / 2**20
        memory = (
            f", peak memory of {peak.get('nodes', 0):.0f} node processes: RSS {rss_mib:.0f}"
            f" MiB summed, PSS {pss_mib:.0f} MiB summed ({pss_mib / max(1, topo.size):.1f} MiB a node)"
        )
    else:
        from coordinator.runtimes.containers import ContainerRun
        from coordinator.runtimes.signals import run_interruptible

        run = ContainerRun(plan, settings, __import__("pathlib").Path(settings.run_dir or "."))

        cpeak: list[int] = [0]
        source = [""]

        async def sample_containers() -> None:
            ids: list[str] = []
            while True:
                if len(ids) < topo.size:  # until every node container exists
                    ids = await trio.to_thread.run_sync(_node_container_ids, run.project)
                used = [m for m in map(_cgroup_memory, ids) if m is not None]
                if used:
                    source[0] = "cgroup files"
                elif ids and source[0] != "cgroup files":  # none readable here: ask the engine
                    source[0] = "docker stats"
                    cpeak[0] = max(cpeak[0], await trio.to_thread.run_sync(_container_memory, run.project))
                    await trio.sleep(1.0)
                    continue
                cpeak[0] = max(cpeak[0], sum(used))
                await trio.sleep(0.5)

        async def go() -> tuple[object, float]:
            run.write()
            await run.build()
            t1 = time.time()
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(sample_containers)
                    # SIGINT/SIGTERM: a short grace, then the containers go (the finally below)
                    rc = await run_interruptible(run.up, lambda: run.collect(-1, interrupted=True))
                    nursery.cancel_scope.cancel()
            finally:
                await run.down()
            doc = json.loads((run.results / "run.json").read_text())
            return run.collect(rc), doc["run"]["started_at_unix"] - t1

        raw, startup = trio.run(go)  # type: ignore[assignment]
        total = time.perf_counter() - t0
        memory = f", peak memory of the node containers {cpeak[0] / 2**20:.0f} MiB summed ({source[0]})"
    r: RawRun = raw
    status = "complete" if not r.incomplete else f"INCOMPLETE {r.incomplete[:2]}"
    rate = r.last_step / max(r.wall_s, 1e-9)
    if runtime == "containers":
        from coordinator.runtimes.containers import network_mode

        spec += f" on the {network_mode(os.environ)} network"
    print(
        f"{runtime} {spec} ({topo.size} nodes, sync {sync or 'barrier (default)'}): "
        f"start-up {startup:.1f} s, {r.last_step} steps in"
        f" {r.wall_s:.1f} s = {rate:.0f} steps/s, total {total:.1f} s{memory}, {status}"
    )


if __name__ == "__main__":
    try:
        main()
    except* Interrupted as group:  # the runtime tore its nodes, broker and containers down first
        sys.exit(f"deploy_bench: {group.exceptions[0]}; nothing of the run is left running")
