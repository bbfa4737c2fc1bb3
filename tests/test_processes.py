"""The processes runtime: one ``python -m node`` per node, TCP links, MQTT control (mosquitto)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.processes import BrokerNotFound, free_ports, local_broker, run_processes
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan, random_plan
from node.topology import Coord, Topology
from node.transport.mqtt import BrokerAddress
from tests._env import need_broker

pytestmark = pytest.mark.slow


def same_plan() -> Plan:
    """4×4 torus, VH and PAIR, 20 multicasts (the issue's comparison plan)."""
    return random_plan(Topology.parse("torus:4x4"), ["vh", "pair"], 5, repeat=10, seed=7)


def long_plan(topo: Topology, every: int, count: int) -> Plan:
    """One small multicast every ``every`` steps: a lockstep run that lasts ``every*count`` steps."""
    far = (topo.cols - 1, topo.rows - 1)
    mcs = tuple(
        Multicast(i, "vh", (0, 0), ((topo.cols // 2, topo.rows // 2), far, (topo.cols - 1, 0)), i * every)
        for i in range(count)
    )
    return Plan(topo, mcs)


async def test_processes_match_in_process(tmp_path: Path) -> None:
    need_broker()
    plan = same_plan()
    settings = RunSettings(wall_budget=120, runtime="processes", run_dir=str(tmp_path))
    raw = await run_processes(plan, settings)
    ref = await run_inprocess(plan, RunSettings())
    assert not raw.incomplete, raw.incomplete
    assert len(raw.arrivals) == sum(len(m.destinations) for m in plan.multicasts)
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.traffic == ref.traffic
    assert raw.last_step == ref.last_step
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert len(logs) == 16 and "node-2-3.log" in logs
    text = (tmp_path / "logs" / "node-2-3.log").read_text()
    for state in (
        "listening on",
        "connected to the broker",
        "assigned in torus:4x4",
        "links up",
        "started",
        "done",
    ):
        assert state in text, text


async def test_processes_with_an_external_broker_and_credentials(tmp_path: Path) -> None:
    """--broker URL: the run uses that broker; credentials travel in the environment."""
    need_broker()
    plan = random_plan(Topology.parse("mesh:3x3"), ["vh"], 3, repeat=2, seed=1)
    async with local_broker(tmp_path / "broker") as broker:
        env = broker.env()
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            settings = RunSettings(wall_budget=60, runtime="processes", broker=broker.url)
            raw = await run_processes(plan, settings)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == (await run_inprocess(plan, RunSettings())).logical_arrivals()


@pytest.mark.parametrize("sync", [None, "alpha"])
async def test_a_killed_node_process_is_named_and_partial_results_kept(
    tmp_path: Path, sync: str | None
) -> None:
    """Default (barrier) sync: the coordinator stops the others; alpha: the dead links stop them."""
    need_broker()
    topo = Topology.parse("mesh:3x3")
    plan = long_plan(topo, every=40, count=400)  # far longer than the test lets it run
    settings = RunSettings(wall_budget=60, runtime="processes", run_dir=str(tmp_path), sync=sync)
    victim = (1, 1)
    raw = await run_killing(plan, settings, tmp_path, victim, after=1.0)
    assert raw.incomplete
    text = "; ".join(raw.incomplete)
    assert "node (1,1) stopped early: lost:" in text, text
    assert raw.arrivals, "the arrivals before the kill are kept"
    # (0,0) is no neighbour of (1,1): under alpha the closed links reach it step by step
    ended = "link" if sync == "alpha" else "stopped by the coordinator"
    assert raw.node_status[(0, 0)].startswith(ended), raw.node_status
    assert raw.node_status[victim].startswith("lost:"), raw.node_status


async def run_killing(
    plan: Plan, settings: RunSettings, run_dir: Path, victim: Coord, after: float
) -> RawRun:
    """Run ``plan`` on processes and SIGKILL ``victim``'s process ``after`` s once its log says started."""
    result: list[RawRun] = []

    async def run() -> None:
        result.append(await run_processes(plan, settings))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        log = run_dir / "logs" / f"node-{victim[0]}-{victim[1]}.log"
        with trio.fail_after(60):
            while not (log.exists() and "started" in log.read_text()):
                await trio.sleep(0.05)
        await trio.sleep(after)
        os.kill(_pid_of(victim), signal.SIGKILL)
    (raw,) = result
    return raw


def _pid_of(node: tuple[int, int]) -> int:
    """The pid of *our* node process at ``node`` (a descendant of this test process).

    Only our own: other runs on the machine may have a node at the same coordinates. A forked
    node is named ``node x,y`` (its comm); an exec'd one has ``--node x,y`` in its command line.
    """
    parents: dict[int, int] = {}
    names: dict[int, tuple[str, str]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            names[int(proc.name)] = ((proc / "comm").read_text().strip(), args)
        except (OSError, ValueError, IndexError):
            continue
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier and p not in mine}
        mine |= frontier
    x, y = node
    for pid in sorted(mine):
        comm, args = names.get(pid, ("", ""))
        if comm == f"node {x},{y}" or ("-m node" in args and f"--node {x},{y} " in args):
            return pid
    raise AssertionError(f"no node process at {node}")


async def test_broker_restart_mid_run_never_hangs(tmp_path: Path) -> None:
    """Restart mosquitto mid-run: the run completes (clients reconnect; under the default barrier
    sync the leader sends the goes a restart lost again) or says why not."""
    exe = need_broker()
    topo = Topology.parse("mesh:3x3")
    plan = long_plan(topo, every=10, count=300)  # under the barrier only steps with work are done
    port = free_ports(1)[0]
    conf = tmp_path / "m.conf"
    # as the runtime's own broker: without set_tcp_nodelay each barrier step waits ~40 ms (Nagle)
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\nmax_queued_messages 100000\n"
    )
    settings = RunSettings(  # a complete run takes ~13 s here, one that stalls its budget
        wall_budget=40, runtime="processes", broker=f"mqtt://127.0.0.1:{port}", run_dir=str(tmp_path)
    )

    async def restart(broker: trio.CancelScope, nursery: trio.Nursery) -> None:
        broker.cancel()  # stop the broker ...
        await trio.sleep(1.0)
        await nursery.start(_mosquitto, exe, conf)  # ... and start it again on the same port

    raw = await _run_beside(plan, settings, exe, conf, restart, limit=90)
    expected = sum(len(m.destinations) for m in plan.multicasts)
    if raw.incomplete:  # allowed (a node's reconnection sometimes never completes), but it must say why
        causes = ("budget", "stopped early", "no final report", "lost in transit")
        assert any(k in s for s in raw.incomplete for k in causes), raw.incomplete
    else:
        assert len({a.logical() for a in raw.arrivals}) == expected
    reconnected = (tmp_path / "logs" / "node-1-1.log").read_text()
    assert "lost the broker" in reconnected


async def test_a_broker_gone_for_good_ends_the_run_named(tmp_path: Path) -> None:
    """Issue 37: the broker killed mid-run and not restarted: the run ends once it has been gone
    BROKER_LOSS_LIMIT seconds (not at the step barrier's 60 s deadline), says so, and keeps what
    arrived with the step it reached."""
    from coordinator.runtimes.session import BROKER_LOSS_LIMIT

    exe = need_broker()
    topo = Topology.parse("mesh:3x3")
    plan = long_plan(topo, every=10, count=3000)  # far longer than the test lets it run
    port = free_ports(1)[0]
    conf = tmp_path / "m.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n")
    settings = RunSettings(
        wall_budget=300, runtime="processes", broker=f"mqtt://127.0.0.1:{port}", run_dir=str(tmp_path)
    )

    async def kill(broker: trio.CancelScope, nursery: trio.Nursery) -> None:
        await trio.sleep(1.0)
        broker.cancel()  # gone, for good

    raw = await _run_beside(plan, settings, exe, conf, kill, limit=120)
    text = "; ".join(raw.incomplete)
    assert f"the broker was gone for {BROKER_LOSS_LIMIT:g} s" in text, text
    assert "no step-done" not in text, text  # not the barrier's own 60 s deadline
    assert raw.arrivals and raw.last_step >= max(a.step for a in raw.arrivals) > 0


async def _run_beside(
    plan: Plan,
    settings: RunSettings,
    exe: str,
    conf: Path,
    then: Callable[[trio.CancelScope, trio.Nursery], Awaitable[None]],
    *,
    limit: float,
) -> RawRun:
    """Run ``plan`` on processes against a mosquitto of the test's own (``conf``); once node (1,1)
    has started, ``then`` acts on the broker (its cancel scope, and the nursery to start another)."""
    assert settings.run_dir is not None
    result: list[RawRun] = []
    with trio.fail_after(limit):
        async with trio.open_nursery() as nursery:
            broker = await nursery.start(_mosquitto, exe, conf)

            async def run() -> None:
                result.append(await run_processes(plan, settings))
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
            log = Path(settings.run_dir) / "logs" / "node-1-1.log"
            while not (log.exists() and "started" in log.read_text()):
                await trio.sleep(0.05)
            await then(broker, nursery)
            await trio.sleep_forever()
    (raw,) = result
    return raw


async def _mosquitto(exe: str, conf: Path, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: trio.run_process(
                    [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
            port = int(conf.read_text().split()[1])
            while True:
                try:
                    await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await trio.sleep(0.05)
            task_status.started(scope)
            await trio.sleep_forever()


def _queued_for(address: BrokerAddress, client_id: str, publish: str) -> list[str]:
    """Publish to ``publish`` as another client, then resume ``client_id``'s session (clean start
    off): the topics of what the broker had queued for it."""
    import paho.mqtt.client as paho
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    def client(cid: str) -> paho.Client:
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=paho.MQTTv5)
        c.username_pw_set(address.username, address.password)
        return c

    sender = client("meshcast-test-sender")
    sender.connect(address.host, address.port)
    sender.loop_start()
    sender.publish(publish, b"report", qos=1).wait_for_publish(5)
    sender.disconnect()
    sender.loop_stop()
    got: list[str] = []
    resumed = client(client_id)
    resumed.on_message = lambda _c, _u, msg: got.append(msg.topic)
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 600
    resumed.connect(address.host, address.port, clean_start=False, properties=props)
    resumed.loop_start()
    time.sleep(1.0)  # queued messages come at once after the CONNACK
    resumed.disconnect()
    resumed.loop_stop()
    return got


async def test_a_gone_coordinator_bus_leaves_no_subscribed_session(tmp_path: Path) -> None:
    """The broker keeps a gone client's session; a coordinator's bus unsubscribes as it goes, so
    nothing a node publishes afterwards is queued for it (every part of a run and every run on a
    deployment opens a bus of its own: left subscribed, they grew mosquitto by gigabytes)."""
    from node.transport.mqtt import open_coordinator_bus

    need_broker()
    async with local_broker(tmp_path) as broker:
        async with open_coordinator_bus(broker.address, "gone") as bus:
            client_id, root = bus.client_id, bus.root
        topic = f"{root}/up/0-0"  # a node report
        got = await trio.to_thread.run_sync(_queued_for, broker.address, client_id, topic)
    assert got == [], f"the broker queued {got} for a coordinator that had gone"


async def test_missing_mosquitto_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("os.access", lambda *a, **k: False)
    with pytest.raises(BrokerNotFound, match="apt-get install mosquitto"):
        async with local_broker(tmp_path):
            pass


def test_python_m_node_rejects_bad_arguments() -> None:
    env = dict(os.environ, MESHCAST_NODE="", MESHCAST_BROKER="", MESHCAST_RUN_ID="")
    for args, cause in (
        ([], "no broker"),
        (["--broker", "mqtt://127.0.0.1:1", "--run-id", "a/b", "--node", "1,1"], "run id"),
        (["--broker", "mqtt://127.0.0.1:1", "--run-id", "r", "--node", "x"], "cannot read coordinate"),
        (
            ["--broker", "mqtt://127.0.0.1:1", "--run-id", "r", "--node", "1,1", "--listen", "nope"],
            "--listen",
        ),
    ):
        p = subprocess.run(
            [sys.executable, "-m", "node", *args], capture_output=True, text=True, env=env, timeout=30
        )
        assert p.returncode == 2, p
        assert cause in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_cli_without_mosquitto_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from coordinator.cli import main

    monkeypatch.setattr("coordinator.runtimes.processes.mosquitto_exe", lambda: None)
    rc = main(
        [
            "run",
            "--topology",
            "mesh:3x3",
            "--algorithm",
            "vh",
            "--random-dests",
            "2",
            "--runtime",
            "processes",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert "apt-get install mosquitto" in err and "--broker" in err
    assert err.count("\n") == 1 and "Traceback" not in err


async def test_shared_contention_with_bounded_buffers_matches_the_model(tmp_path: Path) -> None:
    """Issue 7: lockstep shared-contention results are the same over TCP/MQTT as in the model."""
    need_broker()
    from dataclasses import replace

    from coordinator.runtimes.model import run_model

    plan = random_plan(Topology.parse("torus:4x4"), ["vh", "unicast"], 6, repeat=6, seed=3)
    plan = Plan(plan.topology, tuple(Multicast(m.id, m.algorithm, m.source, m.destinations, m.id % 3)
                                     for m in plan.multicasts))  # fmt: skip
    shared = RunSettings(contention="shared", buffer=1, wall_budget=120)
    raw = await run_processes(plan, replace(shared, runtime="processes", run_dir=str(tmp_path)))
    ref = run_model(plan, shared)
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.link_sends == ref.link_sends


async def test_exec_launch_still_matches_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``MESHCAST_NODE_LAUNCH=exec``: one ``python -m node`` per node, same records as forked nodes."""
    need_broker()
    monkeypatch.setenv("MESHCAST_NODE_LAUNCH", "exec")
    plan = random_plan(Topology.parse("mesh:2x3"), ["vh"], 3, repeat=3, seed=2)
    settings = RunSettings(wall_budget=60, runtime="processes", run_dir=str(tmp_path))
    raw = await run_processes(plan, settings)
    ref = await run_inprocess(plan, RunSettings(wall_budget=60))
    assert not raw.incomplete, raw.incomplete
    assert sorted(a.logical() for a in raw.arrivals) == sorted(a.logical() for a in ref.arrivals)
    assert not (tmp_path / "forkserver.log").exists()


def _forkserver(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    """A fork server with one node forked (it waits for a broker that is not there); the node's pid."""
    server = subprocess.Popen(
        [sys.executable, "-m", "coordinator.runtimes.forkserver"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    assert "ready" in server.stdout.readline()
    port = free_ports(1)[0]
    argv = ["--broker", f"mqtt://127.0.0.1:{port}", "--run-id", "t", "--node", "0,0",
            "--listen", "127.0.0.1:0", "--wait", "60"]  # fmt: skip
    server.stdin.write(
        json.dumps({"id": 7, "argv": argv, "log": str(tmp_path / "n.log"), "name": "node 0,0"})
    )
    server.stdin.write("\n")
    server.stdin.flush()
    reply = json.loads(server.stdout.readline())
    assert reply["id"] == 7 and reply["pid"] > 0
    log, deadline = tmp_path / "n.log", time.monotonic() + 30
    while not (log.exists() and "listening" in log.read_text()):  # the node is up and running
        assert time.monotonic() < deadline, "the forked node did not start"
        time.sleep(0.05)
    return server, int(reply["pid"])


def _gone(pid: int, within: float = 20.0) -> bool:
    """True once ``pid`` is no longer a live process (waits up to ``within`` seconds)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_fork_server_ends_its_nodes_when_the_coordinator_closes_it(tmp_path: Path) -> None:
    server, pid = _forkserver(tmp_path)
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "node 0,0"
    assert server.stdin is not None and server.stdout is not None
    server.stdin.close()  # the coordinator is done (or died)
    exits = [json.loads(line) for line in server.stdout]
    assert server.wait(timeout=30) == 0
    assert exits == [{"id": 7, "exit": -signal.SIGTERM}]
    assert _gone(pid)


def test_a_killed_fork_server_takes_its_nodes_with_it(tmp_path: Path) -> None:
    server, pid = _forkserver(tmp_path)
    server.kill()  # no teardown of its own: the kernel's parent-death signal ends the node
    server.wait(timeout=30)
    assert _gone(pid)


async def test_a_crashed_run_names_the_log_folder_it_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: a coordinator that crashes mid-run keeps the node logs and says where."""
    need_broker()
    from coordinator.runtimes import processes

    async def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the coordinator fell over")

    monkeypatch.setattr(processes, "_run", crash)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    plan = random_plan(Topology.parse("mesh:2x2"), ["vh"], 2, seed=1)
    with pytest.raises(BaseException) as info:  # the crash, in a group or alone
        await run_processes(plan, RunSettings(runtime="processes", wall_budget=30))

    def notes(exc: BaseException) -> list[str]:
        inner = exc.exceptions if isinstance(exc, BaseExceptionGroup) else ()
        return [*getattr(exc, "__notes__", []), *(n for e in inner for n in notes(e))]

    def leaves(exc: BaseException) -> list[BaseException]:
        if isinstance(exc, BaseExceptionGroup):
            return [leaf for e in exc.exceptions for leaf in leaves(e)]
        return [exc]

    assert [str(e) for e in leaves(info.value)] == ["the coordinator fell over"]
    (note,) = [n for n in notes(info.value) if "node logs kept in" in n]
    kept = Path(note.rpartition(" in ")[2])
    assert kept.is_dir() and kept.parent.parent == tmp_path, note
