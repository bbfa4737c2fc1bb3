"""Signal-to-exit of a run on a deployment (issue 44): the figures in docs/deploy.md.

Usage: ``python benchmarks/deploy_signal_exit.py NAME SIGTERM|SIGINT [OUT_DIR|-]`` with
``MESHCAST_STATE_DIR`` as for ``meshcast deploy`` and a deployment ``NAME`` of ``mesh:4x4``
(processes or containers). It starts a long ``meshcast run --deployment NAME``, waits until node (1,1) logs
its start and 2 s more, sends the signal and prints the exit status and the seconds from the
signal to the exit (``-``: no ``--out``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def node_log(name: str) -> str:
    """What node (1,1) of deployment ``name`` has logged: its log file, or its container's output."""
    log = Path(os.environ["MESHCAST_STATE_DIR"]) / name / "logs" / "node-1-1.log"
    if log.exists():
        return log.read_text()
    from coordinator.runtimes import deployments

    dep = deployments.load(name)
    (cid,) = [c for c, service in deployments._containers(dep, running=True) if service == "node-1-1"]
    out = subprocess.run(["docker", "logs", cid], capture_output=True, text=True, check=False)
    return out.stdout + out.stderr


def main() -> int:
    name, sig_name = sys.argv[1], sys.argv[2]
    out = sys.argv[3] if len(sys.argv) > 3 else "-"
    before = node_log(name).count(": started")
    cmd = [shutil.which("meshcast") or "meshcast", "run", "--deployment", name, "--topology", "mesh:4x4",
           "--algorithm", "vh", "--source", "0,0", "--dests", "3,3 0,3 3,0 2,2", "--repeat", "4000",
           "--inject-every", "4", *([] if out == "-" else ["--out", out])]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while node_log(name).count(": started") <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2)
    t0 = time.monotonic()
    proc.send_signal(getattr(signal, sig_name))
    _, err = proc.communicate(timeout=120)
    took = time.monotonic() - t0
    print(f"{sig_name}: rc={proc.returncode} signal-to-exit={took:.2f} s; stderr: {err.strip().splitlines()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
