"""Barrier sync (``--sync barrier``): the coordinator-led step barrier gives the α-synchronizer's records.

The leader (coordinator/runtimes/leader.py) and the node's end (node/sync/barrier.py) on their own,
then the processes runtime over TCP and MQTT: a few small random plans (mesh and torus, several
algorithms, isolated and shared contention, a step budget that cuts the run) give record for
record what ``--sync alpha`` and the in-process runtime give.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import trio

from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.leader import Leader
from coordinator.runtimes.processes import run_processes
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan, random_plan
from node import protocol
from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine, Injection
from node.switching.lockstep import Lockstep
from node.sync.barrier import NoGo, RemoteBarrier
from node.topology import Topology
from tests._env import need_broker
from tests.helpers import link_sets, scripted_session


def test_the_leader_wakes_receivers_with_their_ports_and_ends_after_the_diameter() -> None:
    topo = Topology("mesh", 3, 1)
    leader = Leader(topo, max_steps=100, last_injection=2)
    assert leader.step_done(protocol.StepDone((0, 0), None, False, 2)) is None
    assert "not due" in str(leader.step_done(protocol.StepDone((0, 0), None, False, 2)))
    for n in ((1, 0), (2, 0)):
        assert leader.step_done(protocol.StepDone(n)) is None
    assert leader.release() == {(0, 0): protocol.Go(2, ())}
    assert "being done" in str(leader.step_done(protocol.StepDone((0, 0), 1, True, None, ("+x",))))
    assert "lacks" in str(leader.step_done(protocol.StepDone((0, 0), 2, True, None, ("-x",))))
    assert leader.step_done(protocol.StepDone((0, 0), 2, True, None, ("+x",))) is None
    assert leader.release() == {(1, 0): protocol.Go(3, ("-x",))}
    assert leader.step_done(protocol.StepDone((1, 0), 3, True, None, ())) is None
    assert leader.release() == protocol.Go(None, (), 3 + topo.diameter + 1)


def test_a_step_budget_ends_the_leaders_run() -> None:
    leader = Leader(Topology("torus", 3, 3), max_steps=4, last_injection=9)
    for n in Topology("torus", 3, 3).nodes():
        assert leader.step_done(protocol.StepDone(n, None, False, 9 if n == (0, 0) else None)) is None
    assert leader.release() == protocol.Go(None, (), 4)


def _node_end(
    timeout: float,
) -> tuple[Lockstep, RemoteBarrier, trio.MemorySendChannel[protocol.Go], list[protocol.Event], list[str]]:
    """Node (0,0) of a 3×3 torus with one injection at step 0, at its end of the barrier: its clock,
    the barrier, where gos go in, and what it sent and reported."""
    topo = Topology("torus", 3, 3)
    engine = Engine(topo, (0, 0), registry, NodeSettings())
    clock = Lockstep(engine, topo.ports((0, 0)), diameter=topo.diameter,
                     max_steps=50, injections=[Injection(0, "unicast", [(1, 1)], {}, 0)])  # fmt: skip
    sent: list[protocol.Event] = []
    bad: list[str] = []

    async def send(event: protocol.Event) -> None:
        sent.append(event)

    tx, rx = trio.open_memory_channel[protocol.Go](10)
    return (
        clock,
        RemoteBarrier(send, rx, ports=clock.ports, timeout=timeout, report=bad.append),
        tx,
        sent,
        bad,
    )


async def test_the_node_end_reports_a_bad_go_and_gives_up_without_one() -> None:
    clock, barrier, tx, sent, bad = _node_end(0.2)
    tx.send_nowait(protocol.Go(0, ("+x",)))  # no frames before step 0
    tx.send_nowait(protocol.Go(None, (), None))  # no step, no end: say the step-done again
    tx.send_nowait(protocol.Go(0, ()))
    assert await barrier.done((0, 0), clock) == 0
    join = protocol.StepDone((0, 0), None, False, 0, ())
    assert sent == [join, join] and len(bad) == 1
    clock.work(0, {})
    tx.send_nowait(protocol.Go(1, ()))
    assert await barrier.done((0, 0), clock, {"+x": (1, 0)}) == 1
    clock.work(1, {})
    tx.send_nowait(protocol.Go(0, ()))  # already done, and not the step just done
    tx.send_nowait(protocol.Go(None, (), 7))
    assert await barrier.done((0, 0), clock) is None and barrier.end == 7
    assert sent[-1] == protocol.StepDone((0, 0), 1, False, None, ()) and "already done" in bad[-1]
    with pytest.raises(NoGo, match=r"no go from the coordinator within 0\.2 s after step 1"):
        await barrier.done((0, 0), clock)


async def test_a_go_again_for_the_step_just_done_sends_its_step_done_again() -> None:
    """After a broker restart the leader sends a step's goes again to the nodes it did not hear
    from: a node that did the step (its step-done was lost) says it again, and is not in error."""
    clock, barrier, tx, sent, bad = _node_end(1)
    tx.send_nowait(protocol.Go(0, ()))
    assert await barrier.done((0, 0), clock) == 0
    clock.work(0, {})
    tx.send_nowait(protocol.Go(0, ()))  # the go of step 0 again
    tx.send_nowait(protocol.Go(3, ()))
    assert await barrier.done((0, 0), clock, {"+x": (1, 0)}) == 3
    done0 = protocol.StepDone((0, 0), 0, True, None, ("+x",))
    assert sent[1:] == [done0, done0] and not bad


def test_the_leader_takes_a_step_done_sent_again_once() -> None:
    topo = Topology("mesh", 3, 1)
    leader = Leader(topo, max_steps=100, last_injection=0)
    assert leader.pending() == {n: protocol.Go(None, (), None) for n in topo.nodes()}  # joining: again
    for n in topo.nodes():
        assert leader.step_done(protocol.StepDone(n, None, False, 0 if n == (0, 0) else None)) is None
    assert leader.release() == {(0, 0): protocol.Go(0, ())}
    assert leader.pending() == {(0, 0): protocol.Go(0, ())}  # what a broker restart may have lost
    done = protocol.StepDone((0, 0), 0, True, None, ("+x",))
    assert leader.step_done(done) is None and leader.pending() == {}
    assert leader.step_done(done) is None  # again: taken once, no error
    assert leader.release() == {(1, 0): protocol.Go(1, ("-x",))}
    assert leader.step_done(done) is None  # a late repeat, while the next step is done: still none
    assert "being done" in str(leader.step_done(protocol.StepDone((1, 0), 0, True, None, ())))
    assert leader.step_done(protocol.StepDone((1, 0), 1, False, None, ())) is None
    assert leader.release() == protocol.Go(None, (), 0 + topo.diameter + 1)  # busy last at step 0


async def test_the_session_leads_records_a_bad_step_done_and_ends_when_a_node_is_silent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step-done that does not fit is a protocol error; a node that never joins ends the run
    incomplete at the barrier's deadline, named, instead of a hang."""
    from coordinator.runtimes import session as session_module

    monkeypatch.setattr(session_module, "BARRIER_WAIT", 0.3)
    monkeypatch.setattr(session_module, "STOP_GRACE", 0.2)
    plan = Plan(Topology.parse("mesh:2x1"), (Multicast(1, "vh", (0, 0), ((1, 0),), 0),))
    s = RunSettings(wall_budget=20, runtime="processes", sync="barrier")
    session, inbox_tx, sent = scripted_session(plan, s)
    for n in ((0, 0), (1, 0)):  # (0,0) is assigned once (1,0), which it dials, said hello
        inbox_tx.send_nowait(protocol.encode(protocol.Hello(n, "h")))
    for n in ((0, 0), (1, 0)):
        inbox_tx.send_nowait(protocol.encode(protocol.Ready(n)))
    inbox_tx.send_nowait(protocol.encode(protocol.StepDone((0, 0), None, False, 0)))
    inbox_tx.send_nowait(protocol.encode(protocol.StepDone((1, 0), 4)))  # not joining: does not fit
    with trio.fail_after(10):
        raw = await session.run({(0, 0), (1, 0)})
    assert all(e.sync == "barrier" for _, e in sent if isinstance(e, protocol.Assign))
    causes = [e["cause"] for e in raw.errors if e["kind"] == "protocol"]
    assert any("step-done for step 4" in c for c in causes), causes
    assert "step barrier: no step-done for step None within 0.3 s from (1,0)" in raw.incomplete
    assert not any(isinstance(e, protocol.Go) for _, e in sent)


def _records(raw: RawRun) -> dict[str, Any]:
    return {
        "arrivals": raw.logical_arrivals(),
        "traffic": raw.traffic,
        "links": link_sets(raw),
        "link_sends": raw.link_sends,
        "peak_queue": raw.peak_queue,
        "node_stats": raw.node_stats,
        "last_step": raw.last_step,
        "errors": sorted((e["kind"], str(e.get("node"))) for e in raw.errors),
        "incomplete": raw.incomplete,
    }


def _plan(spec: str, algorithms: list[str], k: int, seed: int) -> Plan:
    """Random sets, injected at staggered steps (so that the barrier skips idle steps)."""
    plan = random_plan(Topology.parse(spec), algorithms, k, repeat=2, seed=seed)
    return Plan(plan.topology, tuple(Multicast(m.id, m.algorithm, m.source, m.destinations, (m.id * 5) % 9)
                                     for m in plan.multicasts))  # fmt: skip


CASES = [
    ("torus:3x3", ["vh", "unicast"], 3, RunSettings()),
    ("mesh:4x4", ["dp", "tree"], 4, RunSettings(contention="shared", buffer=1)),
    ("torus:4x4", ["pair", "mp"], 5, RunSettings(port_model="all-port", contention="shared", out_buffer=2)),
    ("mesh:3x4", ["vh"], 4, RunSettings(max_steps=6)),  # the budget cuts the run
]


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "algorithms", "k", "base"), CASES, ids=[c[0] for c in CASES])
async def test_barrier_sync_over_processes_gives_the_alpha_records(
    tmp_path: Path, spec: str, algorithms: list[str], k: int, base: RunSettings
) -> None:
    need_broker()
    plan = _plan(spec, algorithms, k, seed=len(spec) + k)
    s = replace(base, wall_budget=60, runtime="processes")
    barrier = await run_processes(plan, replace(s, sync="barrier", run_dir=str(tmp_path / "barrier")))
    alpha = await run_processes(plan, replace(s, sync="alpha", run_dir=str(tmp_path / "alpha")))
    inproc = await run_inprocess(plan, base)
    assert _records(barrier) == _records(alpha) == _records(inproc)
    assert bool(barrier.incomplete) == (base.max_steps == 6)
    assert "step barrier" in (tmp_path / "barrier" / "logs" / "node-0-0.log").read_text()
