"""Whole-process speed beside BookSim2's on its m10b8 workload (issue 45, item 6).

    .venv/bin/python benchmarks/booksim_speed.py [--repeat N] [--cycles 60856] \
        [--booksim PATH/booksim --config PATH/m10b8.cfg] > benchmarks/booksim/speed-<date>-plain.json

BookSim2's ``m10b8.cfg`` (10×10 mesh, XY, 1 VC, B = 8, L = 64, uniform, 0.002 packets/node/cycle)
ran 60,856 cycles in about 6.2 CPU-seconds on this machine kind. Here the same workload
(``coordinator.experiments.bench.FLIT_LOAD``: 0.128 flits/node/cycle, ``meshcast load``'s plan)
runs for that many cycles of injection on the engines runtime and on the reference model, each in
a fresh interpreter whose whole CPU time (start-up, imports, building the plan and the tables, the
run) is what this script's child rusage says. With ``--booksim`` BookSim2 itself runs the same way,
alternating with the others, and its flit-hops are estimated as packets × L × its average links
per packet (its "hops average" counts routers: links + 1).

Prints one line per run to stderr, then one JSON object to stdout: per tool, every run's CPU
seconds, wall seconds, flit-hops and flit-hops per CPU-second, the best and the median, and
each meshcast runtime's best over BookSim2's (measured here, else its recorded figure,
:data:`coordinator.experiments.bench.BOOKSIM_FLIT_HOPS_PER_CPU_S`). The load average at the start
and the end says whether the machine was quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from coordinator.experiments.bench import BOOKSIM_FLIT_HOPS_PER_CPU_S, FLIT_LOAD

CHILD = """
import json, sys
from coordinator.experiments.bench import FLIT_LOAD
from coordinator.experiments.load import Traffic, poisson_plan, run_plan
from coordinator.runtimes.records import RunSettings
from node.topology import Topology
runtime, cycles = sys.argv[1], int(sys.argv[2])
w = FLIT_LOAD
traffic = Traffic(w.flits_per_node / w.flits, 1, cycles, seed=1)
plan = poisson_plan(Topology.parse(w.topology), "unicast", traffic)
settings = RunSettings(contention="shared", switching="wormhole", flits=w.flits, buffer_flits=w.buffer_flits,
                       max_steps=4 * cycles, runtime=runtime)
raw = run_plan(plan, settings)
print(json.dumps({"flit_hops": sum(raw.link_sends.values()), "cycles": raw.last_step,
                  "packets": len(plan.multicasts), "complete": not raw.incomplete}))
"""


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], check: bool = True) -> tuple[float, float, str]:
    """Run ``cmd`` to its end: its CPU seconds (user + system, whole process), wall seconds, stdout
    (``check``: a non-zero exit status is an error; BookSim2 ends a finished run with 255)."""
    cpu0, t0 = _child_cpu(), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=check).stdout
    return _child_cpu() - cpu0, time.perf_counter() - t0, out


def meshcast_run(runtime: str, cycles: int) -> dict[str, Any]:
    """One fresh interpreter running the workload on ``runtime``."""
    cpu, wall, out = timed([sys.executable, "-c", CHILD, runtime, str(cycles)])
    got = json.loads(out.strip().splitlines()[-1])
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), **got}


def booksim_run(binary: str, config: str) -> dict[str, Any]:
    """One BookSim2 run of ``config``; flit-hops estimated from its own counts."""
    cpu, wall, out = timed([binary, config], check=False)
    taken = re.findall(r"Time taken is (\d+) cycles", out)
    if not taken:
        raise SystemExit(f"{binary} {config}: no 'Time taken' in its output: {out.strip()[-300:]!r}")
    cycles = int(taken[-1])
    hops = float(re.findall(r"Hops average = ([0-9.]+)", out)[-1])
    text = open(config).read()  # noqa: SIM115 - a small config, read once
    rate = float(re.search(r"injection_rate\s*=\s*([0-9.]+)", text).group(1))  # type: ignore[union-attr]
    size = int(re.search(r"packet_size\s*=\s*(\d+)", text).group(1))  # type: ignore[union-attr]
    k = int(re.search(r"\bk\s*=\s*(\d+)", text).group(1))  # type: ignore[union-attr]
    packets = rate * k * k * cycles
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "cycles": cycles, "packets": round(packets),
            "flit_hops": round(packets * size * (hops - 1)), "hops_average_routers": hops}  # fmt: skip


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each run's flit-hops per CPU-second, the best and the median."""
    for r in runs:
        r["flit_hops_per_cpu_s"] = round(r["flit_hops"] / max(r["cpu_s"], 1e-9))
    rates = [r["flit_hops_per_cpu_s"] for r in runs]
    return {"runs": runs, "best": max(rates), "median": statistics.median(rates)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tool, alternating")
    ap.add_argument("--cycles", type=int, default=60_856, help="cycles of injection (BookSim2's run)")
    ap.add_argument("--runtimes", default="engines,model", help="meshcast runtimes, comma-separated")
    ap.add_argument("--booksim", default=None, help="a built BookSim2 binary, to measure it here too")
    ap.add_argument("--config", default=None, help="its m10b8.cfg (with --booksim)")
    args = ap.parse_args(argv)
    if (args.booksim is None) != (args.config is None):
        ap.error("give --booksim and --config together")
    tools = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    if args.booksim:
        tools.append("booksim2")
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
    load_before = os.getloadavg()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    for i in range(args.repeat):
        for tool in tools:
            r = (
                booksim_run(args.booksim, args.config)
                if tool == "booksim2"
                else meshcast_run(tool, args.cycles)
            )
            runs[tool].append(r)
            rate = r["flit_hops"] / max(r["cpu_s"], 1e-9)
            line = f"run {i + 1}/{args.repeat} {tool}: {r['flit_hops']:,} flit-hops in {r['cpu_s']} CPU-s"
            print(f"{line} ({r['wall_s']} s wall): {rate:,.0f} flit-hops per CPU-second", file=sys.stderr)
    doc: dict[str, Any] = {tool: summary(rs) for tool, rs in runs.items()}
    booksim = doc["booksim2"]["best"] if "booksim2" in doc else BOOKSIM_FLIT_HOPS_PER_CPU_S
    source = "measured here" if "booksim2" in doc else "recorded figure"
    doc["booksim_reference"] = {"flit_hops_per_cpu_s": booksim, "source": source}
    for tool in tools:
        if tool != "booksim2":
            doc[tool]["best_over_booksim"] = round(doc[tool]["best"] / booksim, 3)
    w = FLIT_LOAD
    doc["workload"] = {"topology": w.topology, "flits": w.flits, "buffer_flits": w.buffer_flits,
                       "flits_per_node_cycle": w.flits_per_node, "cycles": args.cycles}  # fmt: skip
    doc["started_utc"], doc["loadavg_start"], doc["loadavg_end"] = started, load_before, os.getloadavg()
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
