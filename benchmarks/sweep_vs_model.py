"""Issue 48's sweep: 800 tree multicasts emulated, against the centralised model of the same rules.

    .venv/bin/python benchmarks/sweep_vs_model.py [--rounds 3] [--json FILE]

The sweep: ``meshcast sweep`` on a 20×20 mesh and a 20×20 torus, Malani's DIAG, DIST, PAIR and
MIN, 10 to 50 destinations in steps of 10, 20 repetitions each (5 × 20 × 4 = 400 multicasts a
topology, 800 in all), one worker (``--jobs 1``: one core), store-and-forward, lockstep, isolated
contention. The same sweep runs on the embedded default runtime (``in-process``: a trio actor per
node, real msgpack frames) and on ``--runtime model`` (the centralised reference model: the same
rules called in one loop, no actors, no frames), each in a fresh interpreter whose whole CPU time
(start-up included) is this script's child rusage, alternating, the order swapped each round.
The records of the two are the same (``tidy.csv``, checked on the first round). Prints each
run, then the median of each and the ratio in-process ÷ model (issue 48 asks for ≤ 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TOPOLOGIES = ("mesh:20x20", "torus:20x20")
CLI = "import sys; from coordinator.cli import main; sys.exit(main(sys.argv[1:]))"
SWEEP = ["--algorithms", "diag,dist,pair,min", "--dests", "10:50:10", "--repeat", "20", "--jobs", "1"]


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one(runtime: str, out: Path) -> float:
    """CPU seconds of the whole sweep (both topologies) on ``runtime``, each topology a fresh process."""
    cpu = 0.0
    for topo in TOPOLOGIES:
        where = out / topo.replace(":", "-")
        cmd = [sys.executable, "-c", CLI, "sweep", "--topology", topo, *SWEEP, "--runtime", runtime,
               "--out", str(where)]  # fmt: skip
        before = _child_cpu()
        subprocess.run(cmd, check=True, capture_output=True)
        cpu += _child_cpu() - before
    return cpu


def _tidy(out: Path) -> list[str]:
    """The tidy rows of both topologies (logical steps only: no wall-clock column)."""
    rows: list[str] = []
    for topo in TOPOLOGIES:
        lines = (out / topo.replace(":", "-") / "tidy.csv").read_text().splitlines()
        rows += lines
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write the figures here")
    a = p.parse_args()
    started, load0 = datetime.now(UTC).isoformat(timespec="seconds"), os.getloadavg()
    runs: dict[str, list[float]] = {"in-process": [], "model": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.rounds):
            order = ["in-process", "model"] if k % 2 == 0 else ["model", "in-process"]
            for runtime in order:
                out = Path(tmp) / f"{runtime}-{k}"
                cpu = one(runtime, out)
                runs[runtime].append(round(cpu, 3))
                print(f"round {k + 1}/{a.rounds} {runtime}: {cpu:.2f} CPU-s", file=sys.stderr, flush=True)
            if k == 0 and _tidy(Path(tmp) / "in-process-0") != _tidy(Path(tmp) / "model-0"):
                print("the two runtimes' tidy.csv differ", file=sys.stderr)
                return 1
    med = {r: statistics.median(v) for r, v in runs.items()}
    doc: dict[str, Any] = {
        "command": "benchmarks/sweep_vs_model.py", "sweep": SWEEP, "topologies": TOPOLOGIES,
        "started_utc": started, "loadavg_start": load0, "loadavg_end": os.getloadavg(),
        "runs": runs, "median": med, "ratio": round(med["in-process"] / med["model"], 3),
    }  # fmt: skip
    print(json.dumps(doc, indent=1))
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
