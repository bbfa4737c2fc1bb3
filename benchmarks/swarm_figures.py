"""Start-up and one run's figures of the swarm runtime on 1, 2 and 3 lab hosts (docs/guide/swarm.md).

For each host count: ``deploy/swarm-lab.sh up N --image IMAGE`` (timed), then a lockstep and a
free-clock run of the same plan (a 4×4 torus, 10 VH multicasts of 6 destinations) with
``--runtime swarm``, each timed from the command's start to its end, beside the emulation's own
``wall_s`` from run.json and the nodes each host ran; then ``down`` (timed) and ``check``.
Prints one line per step and writes the figures, the machine's load average around each step,
the commit and the date as JSON (``--json FILE``).

    .venv/bin/python benchmarks/swarm_figures.py --json benchmarks/swarm/DATE.json

Needs root, Docker and the image (make image); nothing else should run on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "deploy" / "swarm-lab.sh"
MESHCAST = str(Path(sys.executable).with_name("meshcast"))
PLAN = [
    "--topology",
    "torus:4x4",
    "--algorithm",
    "vh",
    "--random-dests",
    "6",
    "--repeat",
    "10",
    "--seed",
    "5",
]


def _load() -> float:
    return os.getloadavg()[0]


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1200, check=False)
    return time.perf_counter() - t0, p


def measure(hosts: int, image: str, lab_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "MESHCAST_SWARM_LAB_DIR": str(lab_dir), "MESHCAST_SWARM_LAB_NAME": "meshcast-bench"}
    row: dict[str, Any] = {"hosts": hosts, "load_before": _load()}
    up_s, up = _timed([str(LAB), "up", str(hosts), "--image", image], env)
    if up.returncode != 0:
        raise SystemExit(f"lab up {hosts} failed:\n{up.stderr[-2000:]}")
    row["up_s"] = round(up_s, 1)
    print(f"{hosts} host(s): up in {up_s:.1f} s", flush=True)
    lab = json.loads((lab_dir / "hosts.json").read_text())
    run_env = {**env, "DOCKER_HOST": lab["manager"], "MESHCAST_IMAGE": image,
               "MESHCAST_SWARM_HOSTS": ",".join(h["docker_host"] for h in lab["hosts"])}  # fmt: skip
    try:
        for clock in ("lockstep", "free"):
            with tempfile.TemporaryDirectory() as out:
                args = [MESHCAST, "run", *PLAN, "--clock", clock, "--runtime", "swarm", "--out", out]
                took, p = _timed(args, run_env)
                if p.returncode not in (0, 1):
                    raise SystemExit(f"{clock} run on {hosts} host(s) failed:\n{p.stderr[-2000:]}")
                run = json.loads((Path(out) / "run.json").read_text())["run"]
            per_host: dict[str, int] = {}
            for where in run["placement"].values():
                per_host[where["host"]] = per_host.get(where["host"], 0) + 1
            spread = dict(sorted(per_host.items()))
            row[clock] = {
                "command_s": round(took, 1), "wall_s": round(run["wall_s"], 3), "steps": run["steps"],
                "complete": run["complete"], "nodes_per_host": spread, "load_after": _load(),
            }  # fmt: skip
            print(f"  {clock}: {took:.1f} s in all, emulation {run['wall_s']:.2f} s,"
                  f" complete {run['complete']}, nodes per host {spread}", flush=True)  # fmt: skip
    finally:
        down_s, down = _timed([str(LAB), "down"], env)
        check = subprocess.run([str(LAB), "check"], env=env, capture_output=True, text=True, check=False)
    row["down_s"] = round(down_s, 1)
    row["left_nothing"] = down.returncode == 0 and check.returncode == 0
    print(
        f"  down in {down_s:.1f} s; check: {'nothing left' if row['left_nothing'] else check.stdout}",
        flush=True,
    )
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="1,2,3", help="host counts (default 1,2,3)")
    ap.add_argument("--image", default=os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest"))
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=False).stdout.strip()  # fmt: skip
    doc: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit,
        "machine": f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}",
        "plan": " ".join(PLAN),
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="swarm-bench-") as d:
        for n in (int(v) for v in args.hosts.split(",")):
            doc["rows"].append(measure(n, args.image, Path(d) / f"lab{n}"))
    doc["ended"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
