"""The in-process runtime split into shards (``--shards N``) gives the unsharded records.

Random plans on 3..6 meshes and tori, both port models, isolated and shared contention, bounded
buffers: 1, 2 and 3 shards agree record for record (node statistics too). The command line
gives the same JSON with and without ``--shards 2``, refuses bad values in one line (exit 2),
and a shard killed mid-run ends the run with an error naming it, leaving no process behind.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings

from coordinator.cli import main
from coordinator.errors import Interrupted, RunFailed
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.shards import run_shards
from coordinator.workloads.plan import Multicast, Plan
from node.shard import blocks
from node.topology import Topology
from tests import test_inprocess as base


def _run(plan: Plan, s: RunSettings) -> RawRun:
    return trio.run(run_inprocess, plan, s)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=base.plans(), s=base.run_settings())
def test_one_two_and_three_shards_give_the_same_records(plan: Plan, s: RunSettings) -> None:
    runs = [_run(plan, RunSettings(**{**_fields(s), "shards": n})) for n in (1, 2, 3)]
    assert not runs[0].incomplete, runs[0].incomplete
    for raw in runs[1:]:
        assert raw.incomplete == runs[0].incomplete
        assert base._records(raw) == base._records(runs[0])
        assert base._stats(raw) == base._stats(runs[0])
        assert raw.node_status == runs[0].node_status


def _fields(s: RunSettings) -> dict[str, Any]:
    return {f: getattr(s, f) for f in s.__dataclass_fields__}


def test_blocks_are_contiguous_and_cover_every_node() -> None:
    topo = Topology("torus", 5, 3)
    got = blocks(topo, 4)
    assert [len(b) for b in got] == [4, 4, 4, 3]
    assert [n for b in got for n in b] == list(topo.nodes())


def _scrub(obj: Any) -> Any:
    """The document without what the wall clock decides (times, jitter)."""
    if isinstance(obj, dict):
        return {k: _scrub(v) for k, v in obj.items() if "wall" not in k and k != "jitter"}
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    return obj


EX = ["--topology", "torus:6x5", "--algorithm", "vh", "--source", "1,1", "--dests", "4,4 5,0 0,3 2,2"]


def test_cli_shards_gives_the_same_json(capsys: pytest.CaptureFixture[str]) -> None:
    docs = []
    for extra in ([], ["--shards", "2"]):
        assert main(["run", *EX, "--json", *extra]) == 0
        docs.append(_scrub(json.loads(capsys.readouterr().out)))
    assert docs[0] == docs[1]
    assert docs[0]["run"]["complete"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--shards", "0"], "--shards must be at least 1"),
        (["--shards", "31"], "--shards 31 is more than the 30 nodes of torus:6x5"),
        (["--shards", "2", "--runtime", "processes"], "--shards applies to the in-process runtime only"),
        (["--shards", "2", "--runtime", "model"], "--shards applies to the in-process runtime only"),
    ],
)
def test_bad_shard_counts_are_one_line_errors(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *EX, *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_killed_shard_ends_the_run_naming_it_and_nothing_is_left() -> None:
    topo = Topology("torus", 6, 6)
    # a multicast every 5 steps for 20,000 steps: the run is still going when a shard is killed
    # (2,000 steps once ended before the first progress report on a fast machine)
    plan = Plan(topo, tuple(Multicast(i, "vh", (i % 6, 0), ((3, 3),), 5 * i) for i in range(4000)))
    pids: dict[int, int] = {}
    killed: list[bool] = []
    every: list[int] = []

    def started(index: int, pid: int) -> None:
        pids[index] = pid
        every.append(pid)

    def progress(reached: int, expected: int) -> None:
        if reached < expected and 1 in pids:  # the first arrivals are in: now kill shard 1
            os.kill(pids.pop(1), signal.SIGKILL)
            killed.append(True)

    async def go() -> RawRun:
        return await run_shards(plan, RunSettings(shards=3, max_steps=25_000), progress, started=started)

    with pytest.raises(
        RunFailed, match=r"shard 1 \(nodes \(0,2\)\.\.\(5,3\), pid \d+\) was killed by signal 9"
    ):
        trio.run(go)
    assert killed and len(every) == 3
    for pid in every:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_a_signal_ends_a_sharded_run_and_reaps_every_shard() -> None:
    topo = Topology("torus", 6, 6)
    # 20,000 steps: far longer than the signal's 1 s grace (see the test above)
    plan = Plan(topo, tuple(Multicast(i, "vh", (i % 6, 0), ((3, 3),), 5 * i) for i in range(4000)))
    pids: list[int] = []
    signalled: list[bool] = []

    def progress(reached: int, expected: int) -> None:
        if not signalled:  # the first arrivals are in: now signal this process
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Interrupted) as info:
        with trio.fail_after(60):
            await run_shards(
                plan,
                RunSettings(shards=2, max_steps=25_000),
                progress,
                started=lambda i, pid: pids.append(pid),
            )
    assert info.value.signum == signal.SIGTERM
    assert "interrupted by SIGTERM" in info.value.partial.incomplete  # type: ignore[attr-defined]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_alpha_synchronized_shards_give_the_same_records() -> None:
    topo = Topology("torus", 5, 4)
    plan = Plan(
        topo,
        (
            Multicast(0, "vh", (0, 0), ((3, 3), (2, 1), (4, 0)), 0),
            Multicast(1, "unicast", (4, 3), ((0, 1),), 2),
        ),
    )
    s = RunSettings(contention="shared", shards=2)

    async def alpha() -> RawRun:
        return await run_shards(plan, s, sparse=False)

    one = _run(plan, RunSettings(contention="shared"))
    raw = trio.run(alpha)
    assert not raw.incomplete
    assert base._records(raw) == base._records(one)
    assert base._stats(raw) == base._stats(one)


@pytest.mark.parametrize("max_steps", [4, 9])
def test_shards_stop_at_the_same_step_budget(max_steps: int) -> None:
    topo = Topology("mesh", 4, 5)
    plan = Plan(
        topo, (Multicast(0, "vh", (0, 0), ((3, 4), (1, 3)), 0), Multicast(1, "vh", (3, 0), ((0, 4),), 6))
    )
    one = _run(plan, RunSettings(max_steps=max_steps))
    two = _run(plan, RunSettings(max_steps=max_steps, shards=2))
    assert base._records(two) == base._records(one)
    assert two.incomplete == one.incomplete
    assert f"step budget of {max_steps} steps ran out" in one.incomplete


def test_the_free_clock_runs_on_shards_too() -> None:
    topo = Topology("torus", 5, 4)
    plan = Plan(
        topo,
        (Multicast(0, "vh", (0, 0), ((3, 3), (2, 1), (4, 0)), 0), Multicast(1, "vh", (4, 3), ((0, 1),), 0)),
    )
    raw = _run(plan, RunSettings(clock="free", shards=3))
    assert not raw.incomplete and not raw.errors
    assert sorted((a.mc, a.node, a.hops) for a in raw.arrivals) == sorted(
        (a.mc, a.node, a.hops) for a in _run(plan, RunSettings(clock="free")).arrivals
    )
