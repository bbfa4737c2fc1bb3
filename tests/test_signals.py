"""SIGINT and SIGTERM end a run the same way in every runtime: teardown, then Interrupted.

With real child processes: ``meshcast run --runtime processes`` is signalled mid-run, and every
node process and the run's mosquitto must be gone afterwards, the temporary run directory too
(with the per-run mosquitto.passwd in it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from coordinator.errors import Interrupted
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.signals import run_interruptible
from node.topology import Topology
from tests._env import need_broker
from tests.test_processes import long_plan

RUN = [
    "--topology", "torus:6x6", "--algorithm", "vh", "--random-dests", "20", "--repeat", "1000",
    "--contention", "shared", "--wall-budget", "60",
]  # fmt: skip


async def test_a_signal_ends_an_in_process_run_with_its_partial_records() -> None:
    # 200,000 steps: far longer than the signal's 1 s grace on any machine (the sparse driver does
    # 20,000 of them in under a second here, so a plan of that length once ended within the grace)
    plan = long_plan(Topology.parse("mesh:3x3"), every=5, count=40_000)
    reached: list[int] = []

    def progress(done: int, total: int) -> None:
        if not reached:  # some arrivals are in: now signal this process
            os.kill(os.getpid(), signal.SIGTERM)
        reached.append(done)

    with pytest.raises(Interrupted) as info:
        with trio.fail_after(60):
            await run_inprocess(plan, RunSettings(wall_budget=60, max_steps=300_000), progress)
    assert info.value.signum == signal.SIGTERM
    raw = info.value.partial
    assert raw is not None and raw.arrivals  # type: ignore[attr-defined]
    assert "interrupted by SIGTERM" in raw.incomplete  # type: ignore[attr-defined]
    expected = sum(len(m.destinations) for m in plan.multicasts)
    assert len({a.logical()[:2] for a in raw.arrivals}) < expected  # type: ignore[attr-defined]
    assert raw.last_step >= max(a.step for a in raw.arrivals) > 0  # type: ignore[attr-defined]


async def test_the_runs_own_errors_come_out_unwrapped() -> None:
    async def fails() -> int:
        raise ValueError("the run's own error")

    with pytest.raises(ValueError, match="the run's own error"):
        await run_interruptible(fails, RawRun)

    async def works() -> int:
        return 7

    assert await run_interruptible(works, RawRun) == 7


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        kids = {p for p, pp in parents.items() if pp in frontier and p not in found}
        found |= kids
        frontier = kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_processes_run_leaves_nothing_behind(tmp_path: Path, signum: int) -> None:
    need_broker()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out"
    env = dict(os.environ, TMPDIR=str(tmp))
    cmd = [
        str(Path(sys.executable).parent / "meshcast"),
        "run",
        "--runtime",
        "processes",
        *RUN,
        "--out",
        str(out),
    ]
    # its own session, so SIGINT can go to the whole group as a terminal's Ctrl-C does
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        children: set[int] = set()
        while time.monotonic() < deadline:  # wait until all 36 nodes and the broker run
            assert proc.poll() is None, proc.communicate()
            children |= _descendants(proc.pid)
            logs = list(tmp.glob("meshcast-processes-*/logs/node-*.log"))
            # every node started the run (on a loaded machine the last node can start seconds
            # after the first one logs, and then nothing would have arrived yet)
            if (
                len(logs) == 36
                and len(children) >= 37
                and all(": started" in f.read_text(errors="replace") for f in logs)
            ):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the run did not start within 120 s")
        time.sleep(2.0)
        children |= _descendants(proc.pid)
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)  # Ctrl-C: meshcast, its nodes and mosquitto all get it
        else:
            proc.send_signal(signum)  # SIGTERM to meshcast alone: it must end its children itself
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    time.sleep(0.5)
    left = sorted(p for p in children if _alive(p))
    assert not left, f"processes left after the signal: {left}"
    assert not list(tmp.iterdir()), f"left in TMPDIR: {list(tmp.iterdir())}"
    assert proc.returncode == 128 + signum, err[-2000:]
    assert "Traceback" not in err, err[-3000:]
    assert len([line for line in err.splitlines() if line.startswith("meshcast:")]) == 1, err[-2000:]
    # what arrived before the signal is kept, marked incomplete with the cause
    doc = json.loads((out / "run.json").read_text())
    assert doc["run"]["complete"] is False
    assert any("interrupted" in cause for cause in doc["run"]["incomplete"]), doc["run"]["incomplete"]
    # steps: the last step the run reached (the leader's barrier), not 0 for want of final reports
    steps = [a["step"] for m in doc["multicasts"] for a in m["arrivals"]]
    assert steps and doc["run"]["steps"] >= max(steps) > 0, (doc["run"]["steps"], max(steps, default=None))
