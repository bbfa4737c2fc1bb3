"""Liveness under the processes runtime: a lost node ends the run at once; a lost broker is named.

Both runs are planned to last far longer than the tests let them: a run that ended only with
its wall-clock budget would fail them (the budgets are long on purpose).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import trio

from coordinator.runtimes.processes import run_processes
from coordinator.runtimes.records import RawRun, RunSettings
from node.topology import Topology
from tests._env import need_broker
from tests.test_processes import _pid_of, long_plan

pytestmark = pytest.mark.slow


def _child_pid(name: str) -> int:
    """The pid of a child of this test process whose command line contains ``name``."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and name in args:
            return int(proc.name)
    raise AssertionError(f"no child process with {name!r}")


async def test_a_stopped_node_ends_the_run_once_it_is_declared_lost(tmp_path: Path) -> None:
    """SIGSTOP one node mid-run: it is declared lost (missed keepalives) and the run ends then,
    not at its 300 s budget; the arrivals reported before are kept and the node is named."""
    need_broker()
    plan = long_plan(Topology.parse("mesh:3x3"), every=40, count=2000)
    settings = RunSettings(wall_budget=300, max_steps=200_000, runtime="processes", run_dir=str(tmp_path))
    stopped: list[tuple[int, float]] = []

    def progress(reached: int, expected: int) -> None:
        if reached >= 3 and not stopped:
            pid = _pid_of((2, 1))
            os.kill(pid, signal.SIGSTOP)
            stopped.append((pid, time.monotonic()))

    raw = await run_processes(plan, settings, progress)  # kills the stopped child at its end
    assert stopped, "the run never got going"
    elapsed = time.monotonic() - stopped[0][1]
    text = "; ".join(raw.incomplete)
    assert "node (2,1) lost" in text and "node (2,1) stopped early: lost:" in text, text
    assert not any("budget" in s for s in raw.incomplete), text
    # detection takes keepalive (7.5 s) + grace (5 s) = 12.5 s; the run must end (stop, final
    # reports, teardown) within 10 s of it; a few seconds more for a loaded machine
    print(f"the run ended {elapsed:.1f} s after the node stopped")
    assert elapsed < 12.5 + 10 + 5, f"the run went on for {elapsed:.0f} s after the node stopped"
    assert len(raw.arrivals) >= 3, "the arrivals reported before the node stopped are kept"
    assert raw.node_status[(0, 0)] != "ok"  # the others were stopped, and said so


async def test_a_dead_broker_is_named_and_reported_arrivals_are_kept(tmp_path: Path) -> None:
    """Kill the run's own mosquitto mid-run: what arrived before is kept and the broker is named."""
    need_broker()
    plan = long_plan(Topology.parse("mesh:3x3"), every=40, count=2000)
    settings = RunSettings(wall_budget=20, max_steps=200_000, runtime="processes", run_dir=str(tmp_path))
    killed: list[int] = []
    before: list[int] = []

    def progress(reached: int, expected: int) -> None:
        if reached >= 3 and not killed:
            pid = _child_pid("mosquitto")
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            before.append(reached)

    with trio.fail_after(120):
        raw = await run_processes(plan, settings, progress)
    assert isinstance(raw, RawRun)
    assert killed, "the run never got going"
    text = "; ".join(raw.incomplete)
    assert "broker lost: mqtt://127.0.0.1:" in text, text
    assert len({(a.mc, a.node) for a in raw.arrivals}) >= before[0], "reported arrivals are kept"
