"""The containers runtime: one container per node with docker compose (v1 or v2), MQTT, TCP links.

The image is never pulled: these tests use the locally built ``meshcast-local/meshcast`` (made by
deploy/build-offline-image.sh or ``docker compose build``); the broker is ``eclipse-mosquitto:2``
when present locally, else the project image (which has mosquitto).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import trio

from coordinator.cli import main as cli_main
from coordinator.cli.deploy_command import deployment_peers
from coordinator.errors import UsageError
from coordinator.experiments.run import emulate, result_document, run_result
from coordinator.runtimes import containers, processes
from coordinator.runtimes.containers import (
    DEFAULT_BROKER_IMAGE,
    DEFAULT_IMAGE,
    NETNS_SERVICE,
    NETWORK_ENV,
    ContainerRun,
    LoopbackPorts,
    _failed_node,
    compose_cli,
    compose_document,
    engine_name,
    host_broker_conf,
    network_mode,
    plan_from_json,
    plan_to_json,
    pod_ports,
    raw_from_json,
    raw_to_json,
    repo_root,
    run_containers,
)
from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan, explicit, random_plan
from node.topology import Topology
from tests._env import docker_client, need_image
from tests.test_processes import long_plan, same_plan

COMPOSE_ARGS = [
    "--topology", "torus:4x4", "--algorithm", "vh,pair", "--random-dests", "5", "--repeat", "10",
    "--wall-budget", "300",
]  # fmt: skip
"""The small default experiment of the top-level compose.yaml."""


def generated_compose() -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["compose", *COMPOSE_ARGS]) == 0
    return buf.getvalue()


def test_top_level_compose_file_is_the_generators_output() -> None:
    """compose.yaml == `meshcast compose` of the default experiment (regenerate it if this fails)."""
    assert (repo_root() / "compose.yaml").read_text() == generated_compose(), (
        "compose.yaml is stale: meshcast compose " + " ".join(COMPOSE_ARGS) + " > compose.yaml"
    )


def test_the_coordinator_writes_results_as_the_runs_user(tmp_path: Path) -> None:
    """Results are not root-owned: a run passes its own uid:gid; a hand-run compose file root's."""
    doc = compose_document(Topology("mesh", 2, 2), ["--plan", "p.json"])
    assert doc["services"]["coordinator"]["user"] == "${MESHCAST_USER:-0:0}"
    assert not any("user" in svc for name, svc in doc["services"].items() if name != "coordinator")
    run = ContainerRun(Plan(Topology("mesh", 2, 2), ()), RunSettings(), tmp_path, env={})
    run.write()
    assert run.env["MESHCAST_USER"] == f"{os.getuid()}:{os.getgid()}"
    given = ContainerRun(
        Plan(Topology("mesh", 2, 2), ()), RunSettings(), tmp_path, env={"MESHCAST_USER": "7:8"}
    )
    given.write()
    assert given.env["MESHCAST_USER"] == "7:8"


def test_compose_says_how_to_tear_it_down_and_the_coordinator_sums_up() -> None:
    """Issue 35: the compose file's header ends with the teardown; the coordinator's last lines
    sum the run up (multicasts, destinations reached, latency, CV) and repeat it."""
    from coordinator.cli.deploy_command import TEARDOWN, summary_line

    assert f"# Tear down (else the exited containers and the network stay):\n#   {TEARDOWN}" in (
        generated_compose()
    )
    topo = Topology.parse("mesh:4x4")
    plan = explicit(topo, ["vh"], (0, 0), [(1, 1), (2, 2)])
    plan = Plan(topo, (*plan.multicasts, Multicast(1, "vh", (0, 0), ((0, 1),))))
    raw = trio.run(emulate, plan, RunSettings())
    raw.arrivals[:] = [a for a in raw.arrivals if a.mc == 0]  # the second multicast never arrives: steps 3, 4
    result = run_result(plan, RunSettings(), raw)
    line = summary_line(result)
    assert line == "2 multicasts, 2 of 3 destinations reached; mean latency 4 steps; node-level CV 0.143"
    free = dataclasses.replace(result, run=dataclasses.replace(result.run, clock="free"))
    assert summary_line(free) == "2 multicasts, 2 of 3 destinations reached; node-level CV 0.143"


def test_compose_has_one_named_service_per_node() -> None:
    text = generated_compose()
    for x in range(4):
        for y in range(4):
            assert f"  node-{x}-{y}:\n" in text
            assert f'MESHCAST_NODE: "{x},{y}"' in text
    assert "  broker:\n" in text and "  coordinator:\n" in text
    assert 'pull_policy: "never"' in text


def test_compose_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["compose", "--topology", "torus:2x2", "--random-dests", "1"]) == 2
    assert cli_main(["compose", "--topology", "mesh:4x4", "--dests", "9,9"]) == 2
    assert cli_main(["compose", "--topology", "mesh:4x4", "--random-dests", "2", "--run-id", "a/b"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 3


def test_compose_may_start_every_node_at_once_and_wait_for_the_engine(tmp_path: Path) -> None:
    """All node containers created in parallel, and compose's HTTP timeout long enough for an engine
    busy with hundreds of them (its 60 s default failed a 256-node start); a user's values stay."""
    plan = Plan(Topology("torus", 16, 16), ())
    run = ContainerRun(plan, RunSettings(runtime="containers"), tmp_path, env={})
    run.parallel_env()
    assert run.env == {"COMPOSE_PARALLEL_LIMIT": "258", "COMPOSE_HTTP_TIMEOUT": "300"}
    mine = ContainerRun(plan, RunSettings(runtime="containers"), tmp_path, env={"COMPOSE_HTTP_TIMEOUT": "9"})
    mine.parallel_env()
    assert mine.env["COMPOSE_HTTP_TIMEOUT"] == "9"


def test_host_networking_gives_each_node_its_own_loopback_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MESHCAST_CONTAINER_NETWORK=host: every service on the host's network, the broker and each
    node on a port of their own on loopback, below the ephemeral range, and the coordinator told
    where each node listens."""
    monkeypatch.setattr(processes, "_ephemeral_low", lambda: 10100)  # room for one block only
    topo = Topology("torus", 3, 4)
    plan = Plan(topo, ())
    run = ContainerRun(plan, RunSettings(runtime="containers"), tmp_path, env={NETWORK_ENV: "host"})
    text = run.write().read_text()
    assert text.count('network_mode: "host"') == 12 + 2
    listens = {line.split('"')[1] for line in text.splitlines() if "MESHCAST_LISTEN:" in line}
    ports = sorted(int(a.rsplit(":", 1)[1]) for a in listens)
    assert len(listens) == 12 and all(a.startswith("127.0.0.1:") for a in listens)
    assert ports == list(range(ports[0], ports[0] + 12)) and ports[-1] < 10100
    broker = ports[0] - 1
    assert f'MESHCAST_BROKER: "mqtt://127.0.0.1:{broker}"' in text and "broker:1883" not in text
    assert f"listener {broker} 127.0.0.1" in (tmp_path / "mosquitto.conf").read_text()
    coordinator = text.split("  coordinator:")[1].split("  node-")[0]
    assert f'"--node-port", "{ports[0]}", "--port-per-node"' in coordinator
    option = ContainerRun(plan, RunSettings(runtime="containers", network="host"), tmp_path / "o", env={})
    assert option.write().read_text().count('network_mode: "host"') == 12 + 2  # --network host
    bridge = ContainerRun(plan, RunSettings(), tmp_path / "b", env={})  # the default
    assert "network_mode" not in bridge.write().read_text()


def test_a_pod_puts_every_container_into_one_private_namespace(tmp_path: Path) -> None:
    """``--network pod``: a ``netns`` container holds the run's namespace, every other service
    joins it, and broker and nodes listen on fixed loopback ports there (not the host's ports)."""
    topo = Topology("torus", 3, 4)
    plan = Plan(topo, ())
    run = ContainerRun(plan, RunSettings(runtime="containers", network="pod"), tmp_path, env={})
    text = run.write().read_text()
    assert text.count('network_mode: "service:netns"') == 12 + 2
    netns = text.split(f"  {NETNS_SERVICE}:")[1].split("  broker:")[0]
    assert "sigwait" in netns  # it holds the namespace, no more
    listens = sorted(
        int(line.split('"')[1].rsplit(":", 1)[1]) for line in text.splitlines() if "MESHCAST_LISTEN:" in line
    )
    assert listens == list(range(7000, 7012))
    assert text.count('MESHCAST_BROKER: "mqtt://127.0.0.1:1883"') == 12
    assert "listener 1883 127.0.0.1" in (tmp_path / "mosquitto.conf").read_text()
    coordinator = text.split("  coordinator:")[1].split("  node-")[0]
    assert '"--node-host", "127.0.0.1", "--node-port", "7000", "--port-per-node"' in coordinator
    assert coordinator.count('- "netns"') == 1  # joins after the namespace is there
    for service in ("broker", "node-2-3"):
        part = text.split(f"  {service}:")[1].split("\n  node-")[0]
        assert 'depends_on:\n      - "netns"' in part, service
    assert 'network_mode: "none"' in netns and "depends_on" not in netns  # loopback only, first up
    assert text.count("network_mode") == 12 + 3
    with pytest.raises(ValueError, match="swarm"):
        compose_document(topo, [], loopback=pod_ports(topo), swarm=True)


def test_a_pod_refuses_more_nodes_than_ports_below_the_ephemeral_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod's namespace starts with the kernel's default ephemeral range (from 32768), whatever
    the host's is: the host's setting neither refuses a small pod nor admits a big one."""
    assert pod_ports(Topology("torus", 5, 5), 7025).node_base == 7000
    with pytest.raises(ValueError, match=r"7000-7025 in one namespace.*\(from 7025\).*--network bridge"):
        pod_ports(Topology("mesh", 2, 13), 7025)
    pod = RunSettings(network="pod")
    monkeypatch.setattr(processes, "_ephemeral_low", lambda: 7010)
    small = ContainerRun(Plan(Topology("torus", 3, 4), ()), pod, tmp_path / "small", env={})
    assert "service:netns" in small.write().read_text()
    monkeypatch.setattr(processes, "_ephemeral_low", lambda: 60000)
    big = ContainerRun(Plan(Topology("mesh", 161, 161), ()), pod, tmp_path / "big", env={})
    with pytest.raises(UsageError, match=r"pod networking: 25921 nodes need ports 7000-32920 .*from 32768"):
        big.write()


def test_host_networking_coordinator_and_nodes_agree_on_ports() -> None:
    """The port the coordinator gives a node's neighbours is the one that node listens on."""
    topo = Topology("torus", 3, 4)  # 3 columns, 4 rows: x·rows + y and y·cols + x differ
    host = LoopbackPorts(broker=20000, node_base=20001)
    doc = compose_document(topo, [], loopback=host)
    listen: dict[str, int] = {
        svc["environment"]["MESHCAST_NODE"]: int(svc["environment"]["MESHCAST_LISTEN"].rsplit(":", 1)[1])
        for name, svc in doc["services"].items()
        if name.startswith("node-")
    }
    assert len(set(listen.values())) == topo.size
    peers = deployment_peers(topo, "127.0.0.1", host.node_base, port_per_node=True)
    for node in topo.nodes():
        for port, (x, y) in topo.neighbours(node).items():
            assert peers(node)[port] == {"host": "127.0.0.1", "port": listen[f"{x},{y}"]}
    with pytest.raises(ValueError, match="swarm"):
        compose_document(topo, [], loopback=host, swarm=True)


def test_nodes_on_one_engine_report_its_name_as_their_host(tmp_path: Path) -> None:
    """The containers of a run (or a deployment) share one engine's clock: every node reports the
    engine's name (MESHCAST_CLOCK_HOST), so their wall-clock timestamps are paired; a hand-run or
    swarm file has no such name (a stack spans machines)."""
    topo = Topology("mesh", 2, 3)
    doc = compose_document(topo, [], clock_host="engine-1")
    env = {name: svc.get("environment", {}) for name, svc in doc["services"].items()}
    assert {n: e.get("MESHCAST_CLOCK_HOST") for n, e in env.items() if n.startswith("node-")} == {
        f"node-{x}-{y}": "engine-1" for x, y in topo.nodes()
    }
    assert "MESHCAST_CLOCK_HOST" not in env["broker"] and "MESHCAST_CLOCK_HOST" not in env["coordinator"]
    assert "MESHCAST_CLOCK_HOST" not in generated_compose()
    with pytest.raises(ValueError, match="swarm"):
        compose_document(topo, [], clock_host="engine-1", swarm=True)
    run = ContainerRun(Plan(topo, ()), RunSettings(), tmp_path, env={})
    run.write()
    run.clock_host = "engine-1"  # what up() asks of the engine
    assert run.render().read_text().count('MESHCAST_CLOCK_HOST: "engine-1"') == topo.size


def test_a_node_takes_its_clock_host_from_the_option_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    from node.__main__ import add_node_arguments

    def parsed(*argv: str) -> argparse.Namespace:
        p = argparse.ArgumentParser()
        add_node_arguments(p)
        return p.parse_args(argv)

    monkeypatch.delenv("MESHCAST_CLOCK_HOST", raising=False)
    assert parsed().clock_host is None  # the node's own host name
    monkeypatch.setenv("MESHCAST_CLOCK_HOST", "engine-1")
    assert parsed().clock_host == "engine-1"
    assert parsed("--clock-host", "other").clock_host == "other"
    monkeypatch.setenv("MESHCAST_CLOCK_HOST", "")
    assert parsed().clock_host is None


def test_host_broker_conf_moves_the_one_listener() -> None:
    conf = (repo_root() / "deploy" / "mosquitto.conf").read_text()
    moved = host_broker_conf(conf, 12345)
    assert "listener 12345 127.0.0.1" in moved and "listener 1883" not in moved
    with pytest.raises(ValueError, match="exactly one"):
        host_broker_conf(conf.replace("listener 1883 0.0.0.0", "listener 1884 0.0.0.0"), 1)


def test_no_room_for_host_ports_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "_ephemeral_low", lambda: 1030)
    run = ContainerRun(Plan(Topology("torus", 3, 4), ()), RunSettings(), tmp_path, env={NETWORK_ENV: "host"})
    with pytest.raises(UsageError, match="host networking: no room for 13 ports"):
        run.write()


def test_container_network_setting_is_checked() -> None:
    """--network (RunSettings.network) > MESHCAST_CONTAINER_NETWORK > bridge; a bad value of
    either is refused, naming where it came from."""
    assert network_mode({}) == "bridge" and network_mode({NETWORK_ENV: " host "}) == "host"
    assert network_mode({NETWORK_ENV: "Pod"}) == "pod"
    assert network_mode({NETWORK_ENV: "host"}, "pod") == "pod"  # the option wins
    assert network_mode({NETWORK_ENV: "overlay"}, "bridge") == "bridge"  # the fallback is not read
    assert network_mode({}, "host") == "host"
    with pytest.raises(UsageError, match=f"{NETWORK_ENV}='overlay'"):
        network_mode({NETWORK_ENV: "overlay"})
    with pytest.raises(UsageError, match="--network 'overlay'"):
        network_mode({}, "overlay")


NETWORK_RUN = [
    "run",
    "--topology",
    "mesh:3x3",
    "--algorithm",
    "vh",
    "--random-dests",
    "2",
    "--port-model",
    "one-port",
]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--runtime", "containers", "--network", "overlay"], "invalid choice: 'overlay'"),
        (["--network", "pod"], "--network applies to --runtime containers only, not in-process"),
        (["--runtime", "processes", "--network", "bridge"], "not processes"),
        (["--runtime", "model", "--network", "host"], "not model"),
    ],
)
def test_the_network_option_is_refused_in_one_line_where_it_cannot_apply(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main([*NETWORK_RUN, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "Traceback" not in err, err


def test_the_network_option_reaches_the_runs_settings() -> None:
    """--network on every command that can start a containers run; not on compose and coordinate,
    whose files keep the compose network (an option they ignored would mislead)."""
    from coordinator.cli import build_parser, settings_from
    from coordinator.cli.options import validate_settings

    parser = build_parser()
    for command in ("run", "sweep", "show", "load"):
        buf = io.StringIO()
        with redirect_stdout(buf), pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        assert "--network {bridge,pod,host}" in buf.getvalue(), command
    args = parser.parse_args([*NETWORK_RUN, "--runtime", "containers", "--network", "pod"])
    assert settings_from(args, probe_broker=False).network == "pod"
    args = parser.parse_args([*NETWORK_RUN, "--runtime", "containers"])
    assert settings_from(args, probe_broker=False).network is None  # the runtime decides: env, else bridge
    with pytest.raises(UsageError, match="not deployment 'lab'"):
        validate_settings(RunSettings(runtime="containers", deployment="lab", network="pod"))
    for command in ("compose", "coordinate"):
        with pytest.raises(UsageError, match="unrecognized arguments: --network"):
            parser.parse_args([command, "--topology", "mesh:3x3", "--run-id", "r", "--network", "pod"])


def test_plan_and_raw_round_trip_through_json() -> None:
    plan = same_plan()
    assert plan_from_json(plan_to_json(plan)) == plan
    raw = trio.run(run_inprocess, plan, RunSettings(trace=True))
    back = raw_from_json(raw_to_json(raw))
    assert back.logical_arrivals() == raw.logical_arrivals()
    assert back == raw


# -- with an engine ----------------------------------------------------------------------------------
@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local image and a broker image that needs no registry."""
    image = os.environ.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
    need_image(image)
    if "MESHCAST_BROKER_IMAGE" not in os.environ:
        have = subprocess.run(["docker", "image", "inspect", DEFAULT_BROKER_IMAGE], capture_output=True)
        monkeypatch.setenv("MESHCAST_BROKER_IMAGE", DEFAULT_BROKER_IMAGE if have.returncode == 0 else image)
    monkeypatch.delenv(NETWORK_ENV, raising=False)  # the runtime's default network unless a test picks one
    yield


@pytest.mark.slow
def test_compose_up_on_the_top_level_file_writes_results(engine: None, tmp_path: Path) -> None:
    """`compose up --abort-on-container-exit --exit-code-from coordinator`: results in ./results/compose/."""
    shutil.copyfile(repo_root() / "compose.yaml", tmp_path / "compose.yaml")
    (tmp_path / "deploy").mkdir()
    shutil.copyfile(repo_root() / "deploy" / "mosquitto.conf", tmp_path / "deploy" / "mosquitto.conf")
    cli = compose_cli()
    assert cli is not None
    project = ["-p", f"meshcast-test-{os.getpid()}"]
    try:
        up = subprocess.run(
            [*cli, *project, "up", "--abort-on-container-exit", "--exit-code-from", "coordinator"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        subprocess.run(
            [*cli, *project, "down", "-v", "--remove-orphans", "-t", "2"], cwd=tmp_path, capture_output=True
        )
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    said = up.stdout + up.stderr  # the coordinator's summary and how to tear the experiment down
    assert "coordinator: 20 multicasts, 100 of 100 destinations reached" in said, said[-3000:]
    assert "tear down: docker compose -f FILE down -v --remove-orphans" in said, said[-3000:]
    for name in ("run.json", "multicasts.csv", "arrivals.csv", "raw.json"):
        assert (tmp_path / "results" / "compose" / name).stat().st_size > 0  # results/<run-id>/
    raw = raw_from_json((tmp_path / "results" / "compose" / "raw.json").read_text())
    assert not raw.incomplete
    assert len({a.logical()[:2] for a in raw.arrivals}) == 100  # 20 multicasts x 5 destinations
    assert len(raw.hosts) == 16 and len(set(raw.hosts.values())) == 16  # one container each


@pytest.mark.slow
async def test_containers_match_in_process(engine: None, tmp_path: Path) -> None:
    plan = same_plan()
    raw = await run_containers(
        plan, RunSettings(wall_budget=120, runtime="containers", run_dir=str(tmp_path))
    )
    ref = await run_inprocess(plan, RunSettings())
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.traffic == ref.traffic
    compose = (tmp_path / "compose.yaml").read_text()
    # the default: a compose network, each node container a host with its own address
    assert "network_mode" not in compose and "mqtt://broker:1883" in compose
    # ... on one engine, whose clock they share: all report its name (wall-clock latencies paired)
    assert set(raw.hosts.values()) == {engine_name()}
    project = "meshcast-" + compose.split("meshcast run ")[1].split()[0]
    assert _project_gone(project) is None, "torn down after the run"


@pytest.mark.slow
@pytest.mark.parametrize("network", ["pod", "host"])
async def test_containers_on_the_other_networks_match_in_process(
    engine: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, network: str
) -> None:
    """``--network pod`` (RunSettings.network) and ``host`` (through the environment's fallback)."""
    plan = same_plan()
    settings = RunSettings(wall_budget=120, runtime="containers", run_dir=str(tmp_path))
    if network == "pod":
        settings = dataclasses.replace(settings, network="pod")
    else:
        monkeypatch.setenv(NETWORK_ENV, network)
    raw = await run_containers(plan, settings)
    ref = await run_inprocess(plan, RunSettings())
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.traffic == ref.traffic
    compose = (tmp_path / "compose.yaml").read_text()
    if network == "host":
        assert compose.count('network_mode: "host"') == 16 + 2 and "netns" not in compose
    else:
        assert compose.count('network_mode: "service:netns"') == 16 + 2
    assert len(set(raw.hosts.values())) == 1  # one namespace: every node reports one host name


@pytest.mark.slow
async def test_the_free_clock_on_containers_ends_cleanly(engine: None, tmp_path: Path) -> None:
    """``--clock free`` on node containers (the default network): the run's own end is no link
    error (each node says bye on its links before closing them), so the run is complete, with no
    error, and every destination is reached exactly once."""
    plan = random_plan(Topology.parse("mesh:3x3"), ["vh"], 3, repeat=2, seed=5)
    settings = RunSettings(clock="free", wall_budget=120, runtime="containers", run_dir=str(tmp_path))
    raw = await run_containers(plan, settings)
    assert not raw.incomplete, raw.incomplete
    assert raw.errors == [], raw.errors
    reached = sorted((a.mc, a.node) for a in raw.arrivals)
    assert reached == sorted((m.id, d) for m in plan.multicasts for d in m.destinations)  # each once
    doc = result_document(plan, settings, raw)
    assert doc["run"]["complete"] and doc["errors"] == []
    # one engine, one clock: every arrival's wall-clock latency is there, on the engine's name
    walls = [a for m in doc["multicasts"] for a in m["arrivals"]]
    assert walls and all(a["wall_ns"] is not None and a["host"] == engine_name() for a in walls), walls


@pytest.mark.slow
async def test_repetitions_on_containers_meet_warm_nodes(
    engine: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--repeat`` under the free clock runs every repetition apart (emulate_apart) on one set of
    node containers: a deployment made once for the condition, destroyed at its end (none is left,
    nor any of its containers), the nodes' logs kept in the run directory; each repetition is
    complete and reaches each destination once."""
    from coordinator.experiments.run import emulate_apart
    from coordinator.runtimes import deployments, warm

    monkeypatch.setenv("MESHCAST_STATE_DIR", str(tmp_path / "state"))
    made: list[str] = []
    real_deploy = deployments.deploy

    def spy(runtime: str, name: str, topo: Topology, **kw: Any) -> deployments.Deployment:
        made.append(name)
        return real_deploy(runtime, name, topo, **kw)

    monkeypatch.setattr(deployments, "deploy", spy)
    plan = random_plan(Topology.parse("mesh:3x3"), ["vh"], 3, repeat=3, seed=5)
    settings = RunSettings(clock="free", wall_budget=120, runtime="containers", run_dir=str(tmp_path / "run"))
    raw = await emulate_apart(plan, settings)
    assert not raw.incomplete, raw.incomplete
    reached = sorted((a.mc, a.node) for a in raw.arrivals)
    assert reached == sorted((m.id, d) for m in plan.multicasts for d in m.destinations)
    assert len(made) == 1 and made[0].startswith(warm.WARM_PREFIX), made  # one cold start
    assert deployments.list_deployments() == []
    assert _containers(f"meshcast-d-{made[0]}") == []
    assert b"node-" in (tmp_path / "run" / "containers.log").read_bytes()


def _logs_say(project: str, service: str, text: bytes) -> bool:
    """Whether the service's container has logged ``text``; False while it is not there (yet or
    any more: a container removed between the listing and the read is not an error)."""
    import docker

    for c in _containers(project, service):
        try:
            if text in c.logs():  # type: ignore[attr-defined]
                return True
        except docker.errors.NotFound:
            continue
    return False


def _containers(project: str, service: str | None = None) -> list[object]:
    """The project's containers (of one service), listed without inspecting each one.

    ``containers.list`` without ``sparse`` inspects every container it lists, and one removed
    in between (compose tearing down, a node exiting) raised ``docker.errors.NotFound``: the
    sparse list is one API call, and its objects act by id (``logs``, ``kill``, ``restart``).
    """
    labels = [f"com.docker.compose.project={project}"]
    if service:
        labels.append(f"com.docker.compose.service={service}")
    return list(docker_client().containers.list(all=True, sparse=True, filters={"label": labels}))


def _networks(project: str) -> list[object]:
    """The project's networks, listed in one API call (no per-network inspect)."""
    return list(docker_client().networks.list(filters={"label": [f"com.docker.compose.project={project}"]}))


def _project_gone(project: str) -> str | None:
    left, nets = _containers(project), _networks(project)
    if not left and not nets:
        return None
    return f"{len(left)} containers and {len(nets)} networks of {project} left"


async def _act(container: object, action: str) -> bool:
    """``kill`` or ``restart`` a listed container; False if it is gone (removed or recreated
    between the listing and the call: the caller lists again, as :func:`_logs_say` does)."""
    import docker.errors

    act = container.kill if action == "kill" else lambda: container.restart(timeout=2)  # type: ignore[attr-defined]
    try:
        await trio.to_thread.run_sync(act)
    except docker.errors.NotFound:
        return False
    return True


async def _run_with(run: ContainerRun, action: str, victim: str) -> tuple[RawRun, float]:
    """Start ``run``; once node-1-1 has started stepping, kill ``victim`` or restart it."""
    run.write()
    await run.build()
    rc_box: list[int] = []
    t_action = 0.0
    try:
        with trio.fail_after(run.settings.wall_budget + 240):
            async with trio.open_nursery() as nursery:

                async def up() -> None:
                    rc_box.append(await run.up())

                nursery.start_soon(up)
                while not rc_box:  # until node-1-1 steps (or the run has already ended)
                    if await trio.to_thread.run_sync(_logs_say, run.project, "node-1-1", b"started"):
                        break
                    await trio.sleep(0.5)
                await trio.sleep(2.0)
                t_action = trio.current_time()
                for _attempt in range(10):  # a container listed may be gone (recreated) by the call
                    (target,) = _containers(run.project, victim)
                    if await _act(target, action):
                        break
                    await trio.sleep(0.5)
    finally:
        await run.down()
    assert _project_gone(run.project) is None
    return run.collect(rc_box[0] if rc_box else -1), trio.current_time() - t_action


@pytest.mark.slow
async def test_a_killed_node_container_is_named_and_partial_results_kept(
    engine: None, tmp_path: Path
) -> None:
    topo = Topology.parse("mesh:3x3")
    # 40,000 steps, ~1,000 multicasts: far longer than the kill lets it run, also under the
    # default barrier sync, which does only the steps with work
    plan = long_plan(topo, every=40, count=1000)
    settings = RunSettings(wall_budget=120, max_steps=60_000, runtime="containers")
    run = ContainerRun(plan, settings, tmp_path)
    raw, after = await _run_with(run, "kill", "node-1-1")
    assert after < 60, f"the run went on {after:.0f} s after the kill"
    text = "; ".join(raw.incomplete)
    assert "node (1,1) stopped early: lost:" in text, text
    assert raw.arrivals, "arrivals before the kill are kept"
    doc = result_document(plan, settings, raw)
    assert not doc["run"]["complete"]
    missing = [e for e in doc["errors"] if e["kind"] == "undelivered"]
    assert missing and any([1, 1] in e["missing"] for e in missing)
    assert (tmp_path / "results" / "run.json").exists()


def test_only_a_node_container_failing_by_itself_counts_as_failed() -> None:
    def event(service: str, status: object) -> bytes:
        return json.dumps({"com.docker.compose.service": service, "exitCode": status}).encode()

    assert _failed_node(event("node-1-2", "2")) == ("node-1-2", 2)
    assert _failed_node(event("node-1-2", "1")) == ("node-1-2", 1)
    for ok in (event("node-1-2", "0"), event("node-1-2", "137"), event("node-1-2", "143")):
        assert _failed_node(ok) is None  # finished, or killed/stopped: the coordinator hears its will
    assert _failed_node(event("coordinator", "1")) is None and _failed_node(event("broker", "3")) is None
    for junk in (b"", b"{", b"[]", b'{"exitCode": "2"}', event("node-0-0", "x")):
        assert _failed_node(junk) is None


@pytest.mark.slow
async def test_a_node_failing_before_its_hello_ends_the_run_soon_and_is_named(
    engine: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node container that fails before it reaches the broker leaves no will: the coordinator
    would wait out its whole budget for the hello; the run stops it after a grace instead."""
    real = containers.compose_document

    def one_bad_node(*args: Any, **kwargs: Any) -> dict[str, Any]:
        doc = real(*args, **kwargs)
        doc["services"]["node-1-1"]["environment"]["MESHCAST_NODE"] = "-1,1"  # refused: exit 2
        return doc

    monkeypatch.setattr(containers, "compose_document", one_bad_node)
    monkeypatch.setattr(containers, "NODE_DEATH_GRACE", 5.0)
    topo = Topology.parse("mesh:3x3")
    settings = RunSettings(wall_budget=240, max_steps=2_000, runtime="containers")
    run = ContainerRun(long_plan(topo, every=40, count=10), settings, tmp_path)
    run.write()
    await run.build()
    t0 = trio.current_time()
    try:
        rc = await run.up()
    finally:
        await run.down()
    took = trio.current_time() - t0
    assert _project_gone(run.project) is None
    assert took < 150, f"the run took {took:.0f} s: it waited out the budget for the failed node"
    raw = run.collect(rc)
    text = "; ".join(raw.incomplete)
    assert "node-1-1's container exited with status 2" in text, text
    # stopped, the coordinator (PID 1 of its container) wrote what it had rather than being killed
    assert "interrupted by SIGTERM" in text, text
    assert "must not be negative" in (tmp_path / "compose.log").read_text(errors="replace")


@pytest.mark.slow
async def test_broker_restart_mid_run_completes_or_says_why(engine: None, tmp_path: Path) -> None:
    topo = Topology.parse("mesh:3x3")
    # long enough (16,000 steps, 800 multicasts: the default barrier sync does only the ~3,200
    # steps with work) that the restart lands mid-run even on an idle machine
    plan = long_plan(topo, every=20, count=800)
    settings = RunSettings(wall_budget=120, max_steps=20_000, runtime="containers")
    run = ContainerRun(plan, settings, tmp_path)
    raw, _ = await _run_with(run, "restart", "broker")
    expected = sum(len(m.destinations) for m in plan.multicasts)
    if raw.incomplete:
        causes = ("budget", "stopped early", "no final report", "lost in transit")
        assert any(k in s for s in raw.incomplete for k in causes), raw.incomplete
    else:
        assert len({a.logical()[:2] for a in raw.arrivals}) == expected
    logs = (tmp_path / "compose.log").read_text(errors="replace")
    assert "lost the broker" in logs


def test_swarm_variant_has_the_stack_deploy_keys() -> None:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["compose", "--topology", "mesh:2x2", "--random-dests", "2", "--swarm"]) == 0
    text = buf.getvalue()
    assert text.count('endpoint_mode: "dnsrr"') == 6  # broker, coordinator, 4 nodes
    assert text.count('condition: "none"') == 6


@pytest.mark.slow
async def test_containers_shared_contention_with_bounded_buffers_matches_the_model(
    engine: None, tmp_path: Path
) -> None:
    """Issue 7: lockstep shared-contention results are the same across containers and the model."""
    from dataclasses import replace

    from coordinator.runtimes.model import run_model
    from coordinator.workloads.plan import Multicast, Plan

    base = same_plan()
    plan = Plan(base.topology, tuple(Multicast(m.id, m.algorithm, m.source, m.destinations, m.id % 3)
                                     for m in base.multicasts))  # fmt: skip
    shared = RunSettings(contention="shared", buffer=1, wall_budget=120)
    raw = await run_containers(plan, replace(shared, runtime="containers", run_dir=str(tmp_path)))
    ref = run_model(plan, shared)
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.link_sends == ref.link_sends


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_containers_run_leaves_nothing_behind(engine: None, tmp_path: Path, signum: int) -> None:
    """SIGTERM/SIGINT mid-run: no container or network of the run left, no temporary directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # shared contention, one-port: ~4,500 steps, far longer than the wait for the signal (an
    # isolated plan finished in 2 s, before the signal, on an idle machine)
    run_args = ["--topology", "mesh:3x3", "--algorithm", "vh", "--random-dests", "4", "--repeat", "10000",
                "--contention", "shared", "--max-steps", "100000", "--wall-budget", "120"]  # fmt: skip
    cmd = [str(Path(sys.executable).parent / "meshcast"), "run", "--runtime", "containers", *run_args,
           "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen(cmd, env=dict(os.environ, TMPDIR=str(tmp)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    project = ""
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not project:
            assert proc.poll() is None, proc.communicate()
            for d in tmp.glob("meshcast-containers-*/compose.yaml"):
                text = d.read_text()
                assert "meshcast run " in text, f"compose.yaml seen incomplete:\n{text}"
                project = "meshcast-" + text.split("meshcast run ")[1].split()[0]
            time.sleep(0.5)
        assert project, "the run did not start"
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()  # the run must still be going
            if _logs_say(project, "node-1-1", b"started"):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("node-1-1 did not start")
        time.sleep(2.0)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert _project_gone(project) is None
    assert not list(tmp.iterdir()), f"left in TMPDIR: {list(tmp.iterdir())}"
    assert proc.returncode == 128 + signum, err[-2000:]
