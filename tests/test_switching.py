"""``--switching wormhole`` in every runtime: the same arrival records, deadlocks named, CLI checks.

In-process (trio actors over memory links), the engines runtime (no trio), processes (TCP links,
MQTT control) and containers all build their node engines with :func:`node.switching.factory.make_engine`
and ship flits in msgpack step frames; the wormhole reference model
(``coordinator/runtimes/wormhole_model.py``) shares none of that code. Their records must agree.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import trio

from coordinator.cli import main
from coordinator.experiments.run import result_document
from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.model import run_model
from coordinator.runtimes.processes import run_processes
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node import protocol
from node.routing import registry
from node.switching.factory import LockstepWormhole, make_engine
from node.switching.wormhole import PREP
from node.topology import Topology
from node.transport.wire import Flit, Packet, StepFrame, WireError, decode_link, encode_link
from tests._env import need_broker
from tests.wormhole_helpers import model_run

WORM = {"switching": "wormhole", "contention": "shared", "port_model": "all-port", "flits": 8, "ts": 5}


def shared_plan() -> Plan:
    """Several multicasts from one source and from others, some unicast, some at once, on a 4x4 mesh."""
    topo = Topology.parse("mesh:4x4")
    mcs = (
        Multicast(0, "dp", (1, 1), ((3, 3), (0, 3), (2, 0), (3, 1)), 0),
        Multicast(1, "mp", (1, 1), ((0, 0), (3, 2), (1, 3)), 0),
        Multicast(2, "vh", (2, 2), ((0, 1), (3, 0), (2, 3), (0, 3)), 1),
        Multicast(3, "unicast", (0, 0), ((3, 3),), 2),
        Multicast(4, "unicast", (3, 0), ((0, 2),), 2),
        Multicast(5, "dp", (3, 3), ((0, 0), (1, 2), (3, 0)), 6),
        Multicast(6, "mp", (0, 2), ((3, 3), (2, 1), (0, 0)), 30),
    )
    return Plan(topo, mcs)


def settings(**kw: object) -> RunSettings:
    return RunSettings(**{**WORM, **kw})  # type: ignore[arg-type]


def complete(raw: RawRun, plan: Plan) -> None:
    assert not raw.incomplete, raw.incomplete
    assert not raw.errors, raw.errors[:3]
    want = sorted((m.id, d) for m in plan.multicasts for d in m.destinations)
    assert sorted((a.mc, a.node) for a in raw.arrivals) == want


def test_inprocess_engines_and_model_have_identical_records() -> None:
    plan = shared_plan()
    model = run_model(plan, settings(runtime="model"))
    complete(model, plan)
    direct = model_run(plan, flits=8, ts=5)  # the dispatch passes the settings through
    assert model.logical_arrivals() == direct.logical_arrivals()
    engines = run_engines(plan, settings(runtime="engines"))
    inproc = trio.run(run_inprocess, plan, settings())
    for raw in (engines, inproc):
        complete(raw, plan)
        assert raw.logical_arrivals() == model.logical_arrivals()
        assert raw.traffic == model.traffic
        assert raw.link_sends == model.link_sends
    # the plan does contend: some arrival is later than when its multicast runs alone
    alone = {
        a.logical()[:2]: a.step
        for m in plan.multicasts
        for a in run_model(Plan(plan.topology, (m,)), settings()).arrivals
    }
    assert any(a.step > alone[a.logical()[:2]] for a in model.arrivals)


def test_settings_reach_the_engine_prep_and_buffer() -> None:
    """--prep replaces the per-algorithm table; the engines runtime and the model agree on it."""
    plan = shared_plan()
    base = run_engines(plan, settings(runtime="engines"))
    slow = run_engines(plan, settings(runtime="engines", prep=10, buffer_flits=3))
    assert slow.logical_arrivals() == run_model(plan, settings(prep=10, buffer_flits=3)).logical_arrivals()
    first = {a.mc: a.step for a in sorted(base.arrivals, key=lambda a: a.step, reverse=True)}
    later = {a.mc: a.step for a in sorted(slow.arrivals, key=lambda a: a.step, reverse=True)}
    assert later[3] == first[3] + 10  # unicast: no preparation time by default, 10 with --prep 10


async def test_processes_have_the_same_records(tmp_path: Path) -> None:
    need_broker()
    plan = shared_plan()
    raw = await run_processes(plan, settings(runtime="processes", wall_budget=120, run_dir=str(tmp_path)))
    complete(raw, plan)
    assert raw.logical_arrivals() == run_model(plan, settings()).logical_arrivals()


@pytest.mark.slow
async def test_containers_have_the_same_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coordinator.runtimes.containers import DEFAULT_BROKER_IMAGE, DEFAULT_IMAGE, run_containers
    from tests._env import need_image

    image = os.environ.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
    need_image(image)
    if "MESHCAST_BROKER_IMAGE" not in os.environ:  # as tests/test_containers.py: no registry needed
        have = subprocess.run(["docker", "image", "inspect", DEFAULT_BROKER_IMAGE], capture_output=True)
        monkeypatch.setenv("MESHCAST_BROKER_IMAGE", DEFAULT_BROKER_IMAGE if have.returncode == 0 else image)
    plan = shared_plan()
    raw = await run_containers(plan, settings(runtime="containers", wall_budget=300, run_dir=str(tmp_path)))
    complete(raw, plan)
    assert raw.logical_arrivals() == run_model(plan, settings()).logical_arrivals()


def ring_plan() -> Plan:
    """Five worms on a torus ring, each two hops along +x: a cyclic wait (no virtual channels)."""
    topo = Topology.parse("torus:5x3")
    return Plan(topo, tuple(Multicast(i, "unicast", (i, 0), (((i + 2) % 5, 0),), 0) for i in range(5)))


@pytest.mark.parametrize("runtime", ["engines", "in-process"])
def test_a_deadlock_ends_the_run_early_and_is_named(runtime: str) -> None:
    plan = ring_plan()
    s = settings(runtime=runtime, flits=8, ts=2, max_steps=5000)
    raw = run_engines(plan, s) if runtime == "engines" else trio.run(run_inprocess, plan, s)
    assert raw.arrivals == []
    assert raw.last_step < 100, "ended by the stall rule, not the step budget"
    dead = [e for e in raw.errors if e["kind"] == "deadlock"]
    model = model_run(plan, flits=8, ts=2)
    assert sorted(e["mc"] for e in dead) == sorted(e["mc"] for e in model.errors if e["kind"] == "deadlock")
    assert any("holds ['+x']" in e["cause"] for e in dead)
    doc = result_document(plan, s, raw)
    assert not doc["run"]["complete"]
    assert any("deadlock" in line for line in doc["run"]["incomplete"])


def test_a_step_frame_carries_flits_through_msgpack() -> None:
    head = Flit("H", 3, (1, 2, 0), "dp", [[1, 2], 7], 1, 1)
    body, tail = Flit("B", 3, (1, 2, 0)), Flit("T", 3, (1, 2, 0))
    frame = StepFrame(4, 4, (head, body, tail), 2)
    assert decode_link(encode_link(frame)) == frame
    pkt = StepFrame(4, 4, (Packet(1, "vh", [1], 1, 1, 4),), 0)
    assert decode_link(encode_link(pkt)) == pkt
    bad = decode_link(encode_link(StepFrame(1, 1, (Flit("H", 3, (1, 2, 0)),))))  # a head without a header
    assert isinstance(bad, WireError) and "head flit" in bad.cause


def test_assign_carries_the_switching_settings_and_refuses_bad_ones() -> None:
    msg = protocol.Assign(run="r", topology="mesh:4x4", node=(0, 0), port_model="all-port",
                          contention="shared", max_steps=100, switching="wormhole", flits=16,
                          buffer_flits=3, ts=7, prep=1)  # fmt: skip
    back = protocol.decode(protocol.encode(msg))
    assert back == msg
    engine = make_engine(Topology.parse("mesh:4x4"), (0, 0), registry, back)
    assert isinstance(engine, LockstepWormhole)
    assert (engine.flits, engine.buffer_flits, engine.ts, engine.prep["qg"]) == (16, 3, 7, 1)
    wire = msg.to_wire() | {"flits": -1}
    with pytest.raises(protocol.ProtocolError, match="flits"):
        protocol.decode(protocol.msgpack.packb(wire))
    bads = [({"contention": "isolated"}, "shared"), ({"clock": "free"}, "lockstep"),
            ({"switching": "cut-through"}, "unknown switching"), ({"flits": 0}, "flits")]  # fmt: skip
    for bad, why in bads:
        with pytest.raises(ValueError, match=why):
            make_engine(Topology.parse("mesh:4x4"), (0, 0), registry, replace(msg, **bad))  # type: ignore[arg-type]


def test_cli_wormhole_run_arrives_at_eq7(capsys: pytest.CaptureFixture[str]) -> None:
    """One DP multicast in an idle network: each arrival is prep + Ts + L + hops (one worm per port)."""
    dests = "1,6 2,6 1,7 2,3 5,2 6,1"
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", "dp", "--source", "2,5", "--dests", dests,
            "--port-model", "all-port", "--switching", "wormhole", "--flits", "16", "--ts", "10",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["complete"] and doc["run"]["contention"] == "isolated"
    assert doc["run"]["switching"] == {
        "mode": "wormhole",
        "flits": 16,
        "buffer_flits": 2,
        "ts": 10,
        "prep": None,
    }
    arrivals = doc["multicasts"][0]["arrivals"]
    assert len(arrivals) == 6
    for a in arrivals:
        assert a["startups"] == 1
        assert a["step"] == PREP["dp"] + 10 + 16 + a["hops"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--contention", "shared", "--repeat", "3"], "--contention shared under wormhole switching"),
        (["--clock", "free"], "lockstep clock only"),
        (["--flits", "0"], "--flits must be at least 1"),
        (["--buffer-flits", "0"], "--buffer-flits must be at least 1"),
        (["--prep", "-1"], "--prep must be at least 0"),
        (["--ts", "2.5"], "--ts must be a whole number"),
        (["--vcs", "0"], "--vcs must be at least 1"),
        (["--vcs", "17"], "--vcs must be at most 16"),
        (["--vc-classes", "split"], "needs vcs 2 or more, got 1"),
        (["--vc-classes", "split", "--vcs", "2", "--topology", "torus:4x4"], "needs vcs 4 or more"),
        (["--vcs", "2", "--switching", "store-and-forward"], "apply to wormhole switching only"),
        (["--dateline", "ring", "--topology", "torus:4x4"], "VC half: needs vcs 2 or more, got 1"),
        (
            ["--dateline", "ring", "--vcs", "2"],
            "dateline ring picks a torus ring's VC half: a mesh has no wrap link",
        ),
        (["--dateline", "ring", "--vcs", "2", "--switching", "store-and-forward"], "apply to wormhole"),
        (["--dateline", "both", "--vcs", "2"], "--dateline"),
    ],
)
def test_cli_refuses_bad_wormhole_settings(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--topology", "mesh:4x4", "--algorithm", "dp", "--source", "0,0", "--dests", "3,3",
            "--switching", "wormhole", *extra]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
