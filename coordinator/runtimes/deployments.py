"""Long-lived deployments: broker and nodes brought up once, then run after run attached to them.

``meshcast deploy`` starts a broker and one serving node (``python -m node --serve``) per node
of a topology, detached from the terminal (their own session), and records what it started in
a deployment directory (``$MESHCAST_STATE_DIR/NAME``, else ``$XDG_STATE_HOME/meshcast/
deployments/NAME``, else ``~/.local/state/meshcast/deployments/NAME``): ``deployment.json``
(runtime, topology, broker address and credentials, pids or compose project), the broker's
configuration and password file, and the node logs. A run with ``RunSettings.deployment``
attaches to it (:func:`run_on_deployment`): it checks the experiment's topology against the
deployed one before anything else, connects to the deployment's broker and drives the usual
:class:`~coordinator.runtimes.session.Session`. ``destroy`` stops everything and removes the
directory; it is idempotent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import trio

from coordinator.errors import UsageError
from coordinator.runtimes import registry
from coordinator.runtimes.brokerauth import Credentials, write_password_file
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.session import Session
from coordinator.runtimes.signals import interrupted_note, run_interruptible
from coordinator.workloads.plan import Plan
from node.topology import Coord, Topology
from node.transport.mqtt import CoordinatorBus, keepalive_for, open_coordinator_bus, parse_broker, ping_nodes
from node.transport.tcp import peer_entry

__all__ = [
    "Deployment",
    "broker_alive",
    "check_topology",
    "deploy",
    "deploy_processes",
    "destroy",
    "list_deployments",
    "load",
    "nodes_alive",
    "nodes_gone",
    "repair",
    "run_on_deployment",
    "state_root",
    "stuck_parts",
    "unresponsive",
]

NAME_RE: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
LOOPBACK: Final = "127.0.0.1"
STATE_FILE: Final = "deployment.json"
STOP_GRACE: Final = 5.0
"""Seconds a stopped process has to exit after SIGTERM before it is killed."""


def state_root() -> Path:
    """Where deployment directories live (``MESHCAST_STATE_DIR`` overrides the XDG default)."""
    if os.environ.get("MESHCAST_STATE_DIR"):
        return Path(os.environ["MESHCAST_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "meshcast" / "deployments"


def check_name(name: str) -> str:
    """``name`` if it is a usable deployment name (lower-case letters, digits, - and _), else UsageError."""
    if not NAME_RE.match(name):
        raise UsageError(f"deployment name {name!r}: use 1-40 lower-case letters, digits, '-' or '_'")
    return name


@dataclass
class Deployment:
    """What ``deployment.json`` records about one deployment."""

    name: str
    runtime: str
    topology: str
    run_id: str
    broker: str  # the URL a coordinator on this host connects to
    user: str = ""
    password: str = ""
    created: float = 0.0
    broker_pid: int | None = None
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # "x,y" -> {"pid", "port"}
    project: str = ""  # containers: the compose project name
    node_port: int = 7000  # containers: every node's link port inside the network

    @property
    def directory(self) -> Path:
        return state_root() / self.name

    def save(self) -> None:
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds credentials
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f, indent=1)
        tmp.replace(path)

    def peers(self, topo: Topology) -> Callable[[Coord], dict[str, Any]]:
        """Each node's neighbours' link addresses, for the assignments."""

        def address(n: Coord) -> dict[str, Any]:
            if on_host(self):
                return peer_entry(LOOPBACK, int(self.nodes[f"{n[0]},{n[1]}"]["port"]))
            return peer_entry(f"node-{n[0]}-{n[1]}", self.node_port)

        return lambda node: {p: address(m) for p, m in topo.neighbours(node).items()}


def lives(dep: Deployment) -> registry.Nodes | None:
    """Where ``dep``'s nodes live, as the registry says of its runtime (None: a runtime it does not know)."""
    r = registry.RUNTIMES.get(dep.runtime)
    return r.nodes if r is not None else None


def on_host(dep: Deployment) -> bool:
    """Whether ``dep``'s nodes and broker are processes on this host, tracked by pid (else they are
    containers of a compose project)."""
    return lives(dep) is registry.Nodes.PROCESSES


def load(name: str) -> Deployment:
    """The recorded deployment ``name``; UsageError (one line) if there is none."""
    path = state_root() / check_name(name) / STATE_FILE
    try:
        data = json.loads(path.read_text())
        return Deployment(**data)
    except FileNotFoundError:
        raise UsageError(
            f"no deployment {name!r} (see 'meshcast deployments'; state in {state_root()})"
        ) from None
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"deployment {name!r}: unreadable {path}: {exc}") from None


def list_deployments() -> list[Deployment]:
    """Every recorded deployment, by name (unreadable directories are skipped)."""
    root = state_root()
    found: list[Deployment] = []
    if root.is_dir():
        for d in sorted(root.iterdir()):
            if (d / STATE_FILE).is_file():
                with contextlib.suppress(UsageError):
                    found.append(load(d.name))
    return found


def check_topology(dep: Deployment, topo: Topology) -> None:
    """UsageError when the experiment's topology is not the deployed one."""
    deployed = Topology.parse(dep.topology)
    if deployed.spec != topo.spec:
        raise UsageError(
            f"deployment {dep.name!r} runs {deployed.spec} ({deployed.size} nodes); the experiment asks"
            f" for {topo.spec} ({topo.size} nodes): deploy that topology under another name"
        )


# -- processes --------------------------------------------------------------------------------------
def _pid_alive(pid: int | None, marker: str) -> bool:
    """Whether ``pid`` is a live (not zombie) process whose command line contains ``marker``."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[0]
    return state not in ("Z", "X") and marker in cmdline


def nodes_alive(dep: Deployment) -> tuple[int, int]:
    """(nodes running, nodes deployed)."""
    total = Topology.parse(dep.topology).size
    if on_host(dep):
        return sum(_pid_alive(n.get("pid"), dep.run_id) for n in dep.nodes.values()), total
    return len(_container_ids(dep, running=True, service_prefix="node-")), total


def broker_alive(dep: Deployment) -> bool:
    """Whether the deployment's broker runs: its process, or its container."""
    if on_host(dep):
        return _pid_alive(dep.broker_pid, str(dep.directory / "mosquitto.conf"))
    return "broker" in _container_services(dep, running=True)


def nodes_gone(dep: Deployment) -> list[str]:
    """The deployed nodes ("x,y") that are not running: their process or container is gone."""
    topo = Topology.parse(dep.topology)
    names = [f"{x},{y}" for x, y in topo.nodes()]
    if on_host(dep):
        return [n for n in names if not _pid_alive(dep.nodes.get(n, {}).get("pid"), dep.run_id)]
    running = set(_container_services(dep, running=True))
    return [n for n in names if "node-" + n.replace(",", "-") not in running]


PING_TIMEOUT: Final = 1.0
"""Seconds every node (and the broker) of a deployment has to answer a liveness ping."""
READY_TIMEOUT: Final = 180.0
"""Seconds a new (or repaired) deployment's nodes have to answer their first ping before deploy
gives up: on a loaded two-core machine a container's interpreter takes tens of seconds to start."""
RECHECK_TIMEOUT: Final = 5.0
"""Seconds the parts that missed the first ping get to answer a second one before a run is refused
or a part is killed as stuck: a loaded machine can delay a live node past one second (a stopped
one never answers)."""


def _address(dep: Deployment) -> Any:
    address = parse_broker(dep.broker)
    return type(address)(address.host, address.port, dep.user or None, dep.password or None)


def stuck_parts(dep: Deployment) -> list[str]:
    """:func:`unresponsive` twice: the parts that missed a ping within :data:`PING_TIMEOUT` s and
    then a second within :data:`RECHECK_TIMEOUT` s (what a run refuses and a repair kills)."""
    return unresponsive(dep) and unresponsive(dep, RECHECK_TIMEOUT)


def unresponsive(dep: Deployment, timeout: float = PING_TIMEOUT) -> list[str]:
    """The parts of ``dep`` that run but do not answer (a stopped process or container: its pid
    lives and its sockets accept): ``["broker"]`` when the broker does not answer, else the nodes
    ("x,y") whose event loop did not answer a ping within ``timeout`` s (gone ones not included)."""
    topo = Topology.parse(dep.topology)
    gone = set(nodes_gone(dep))
    try:
        answered = trio.run(ping_nodes, _address(dep), dep.run_id, topo.size, timeout)
    except ConnectionError:
        return ["broker"]
    return [f"{x},{y}" for x, y in topo.nodes() if (x, y) not in answered and f"{x},{y}" not in gone]


def wait_answering(dep: Deployment, within: float = READY_TIMEOUT) -> None:
    """Return once every node of ``dep`` answers a ping (a deploy is done when its nodes listen on
    the bus, not when their processes exist); UsageError naming the others after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        gone = nodes_gone(dep)
        if gone:
            raise UsageError(
                f"deployment {dep.name!r}: node(s) {', '.join(f'({n})' for n in gone[:8])} exited while "
                f"starting; see the logs in {dep.directory}"
            )
        silent = unresponsive(dep, 2.0)
        if not silent:
            return
        if time.monotonic() > deadline:
            raise UsageError(
                f"deployment {dep.name!r}: {', '.join(silent[:8])} not answering {within:g} s after "
                f"starting; see the logs in {dep.directory}"
            )
        time.sleep(0.5)


def repair(name: str, *, log: Callable[[str], None] | None = None) -> list[str]:
    """Start again the nodes of deployment ``name`` that are gone or stuck, and its broker if it
    is gone; what was restarted ("x,y" of each node, "broker"). It returns once every node answers.

    A processes node gets its old link port if it is free (else a new one: runs read the ports
    from the deployment's state); a containers deployment's compose file is brought ``up -d``
    again, which starts what was killed or stopped."""
    dep = load(name)
    stuck = stuck_parts(dep) if broker_alive(dep) else []
    if stuck:  # stopped: killed here, then started again below as gone ones are
        _kill_stuck(dep, stuck)
    gone = nodes_gone(dep)
    if on_host(dep) and not broker_alive(dep):  # its configuration keeps its port
        from coordinator.runtimes.processes import mosquitto_exe

        conf = dep.directory / "mosquitto.conf"
        dep.broker_pid = _spawn(
            [mosquitto_exe() or "mosquitto", "-c", str(conf)], dep.directory / "mosquitto.log"
        )
        port = int(dep.broker.rpartition(":")[2])
        if not _wait_port(LOOPBACK, port, 10.0):
            raise UsageError(
                f"the broker of {name!r} did not start again; see {dep.directory / 'mosquitto.log'}"
            )
        dep.save()
        gone = ["broker", *gone]
    elif not broker_alive(dep):  # a container: compose up below starts it again
        gone = ["broker", *gone]
    if not gone:
        return gone
    if on_host(dep) and gone == ["broker"]:
        wait_answering(dep)  # the nodes reconnect on their own
        if log:
            log(f"deployment {name}: started the broker again")
        return gone
    if on_host(dep):
        env = dict(
            os.environ, MESHCAST_MQTT_USER=dep.user, MESHCAST_MQTT_PASSWORD=dep.password, PYTHONUNBUFFERED="1"
        )
        for n in gone:
            if n == "broker":
                continue
            old = int(dep.nodes.get(n, {}).get("port", 0))
            port = old if old and _port_free(old) else _free_ports(1)[0]
            cmd = [sys.executable, "-m", "node", "--serve", "--broker", dep.broker, "--run-id", dep.run_id,
                   "--node", n, "--listen", f"{LOOPBACK}:{port}"]  # fmt: skip
            pid = _spawn(cmd, dep.directory / "logs" / f"node-{n.replace(',', '-')}.log", env)
            dep.nodes[n] = {"pid": pid, "port": port}
            if not _wait_port(LOOPBACK, port, 30.0):
                raise UsageError(f"node ({n}) of {name!r} did not listen again within 30 s; see its log")
        dep.save()
    else:
        from coordinator.runtimes.containers import compose_cli

        cli = compose_cli()
        if cli is None:
            raise UsageError("repairing a containers deployment needs 'docker compose' or 'docker-compose'")
        cmd = [*cli, "-p", dep.project, "-f", "compose.yaml", "up", "-d"]
        with (dep.directory / "compose.log").open("ab") as out:
            rc = subprocess.run(
                cmd, cwd=dep.directory, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=600
            )
        if rc.returncode != 0:
            raise UsageError(f"compose up failed; see {dep.directory / 'compose.log'}")
    wait_answering(dep)
    if log:
        log(f"deployment {name}: started again " + ", ".join(n if n == "broker" else f"({n})" for n in gone))
    return gone


def _kill_stuck(dep: Deployment, stuck: list[str]) -> None:
    """SIGKILL the unresponsive parts of ``dep`` (a stopped process dies of it too)."""
    if on_host(dep):
        pids = [dep.broker_pid] if "broker" in stuck else []
        pids += [dep.nodes.get(n, {}).get("pid") for n in stuck if n != "broker"]
        for pid in pids:
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.1)
        _reap([int(p) for p in pids if p])
        return
    services = {"broker" if n == "broker" else "node-" + n.replace(",", "-") for n in stuck}
    ids = [cid for cid, service in _containers(dep, running=True) if service in services]
    if ids:
        subprocess.run(["docker", "kill", *ids], capture_output=True, check=False, timeout=60)


def _port_free(port: int) -> bool:
    """Whether a listener could bind ``port`` on the loopback now."""
    try:
        with socket.socket() as probe:
            probe.bind((LOOPBACK, port))
        return True
    except OSError:
        return False


def _free_ports(n: int) -> list[int]:
    from coordinator.runtimes.processes import free_ports

    return free_ports(n)


def _spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    """Start ``cmd`` in its own session (it outlives the terminal), output to ``log``; its pid."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return proc.pid


def _wait_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        time.sleep(0.05)
    return False


def _start_mosquitto(directory: Path, creds: Credentials) -> tuple[int, int]:
    """A detached mosquitto on a free loopback port with a password file: (pid, port)."""
    from coordinator.runtimes.processes import broker_conf, mosquitto_exe

    exe = mosquitto_exe()
    if exe is None:
        raise UsageError("the processes runtime needs mosquitto (apt-get install mosquitto)")
    passwd = write_password_file(directory / "mosquitto.passwd", creds)
    for _attempt in range(5):
        port = _free_ports(1)[0]
        conf = directory / "mosquitto.conf"
        conf.write_text(broker_conf(port, passwd))
        pid = _spawn([exe, "-c", str(conf)], directory / "mosquitto.log")
        if _wait_port(LOOPBACK, port, 10.0):
            return pid, port
        _stop_pids([pid], str(conf))
    raise UsageError(f"mosquitto did not start; see {directory / 'mosquitto.log'}")


def deploy_processes(name: str, topo: Topology, *, log: Callable[[str], None] | None = None) -> Deployment:
    """Start a broker and one serving node process per node of ``topo``, detached; record them."""
    directory = state_root() / check_name(name)
    if (directory / STATE_FILE).exists():
        raise UsageError(f"deployment {name!r} exists already: 'meshcast destroy {name}' first")
    (directory / "logs").mkdir(parents=True, exist_ok=True)
    creds = Credentials.generate()
    run_id = f"d-{name}-{secrets.token_hex(3)}"
    dep = Deployment(name, "processes", topo.spec, run_id, "", creds.user, creds.password, time.time())
    dep.save()  # from here on, destroy can clean up whatever was started
    broker_pid, port = _start_mosquitto(directory, creds)
    dep.broker_pid, dep.broker = broker_pid, f"mqtt://{LOOPBACK}:{port}"
    dep.save()
    env = dict(os.environ, **creds.env(), PYTHONUNBUFFERED="1")
    nodes = list(topo.nodes())
    for n, p in zip(nodes, _free_ports(len(nodes)), strict=True):
        cmd = [sys.executable, "-m", "node", "--serve", "--broker", dep.broker, "--run-id", run_id,
               "--node", f"{n[0]},{n[1]}", "--listen", f"{LOOPBACK}:{p}"]  # fmt: skip
        pid = _spawn(cmd, directory / "logs" / f"node-{n[0]}-{n[1]}.log", env)
        dep.nodes[f"{n[0]},{n[1]}"] = {"pid": pid, "port": p}
    dep.save()
    if log:
        log(
            f"deployment {name}: mosquitto on {dep.broker}, {len(nodes)} node processes; state in {directory}"
        )
    return dep


def _stop_pids(pids: list[int], marker: str) -> None:
    """SIGTERM every live pid that is still ours, SIGKILL what is left after the grace; reap children."""
    mine = [p for p in pids if _pid_alive(p, marker)]
    for p in mine:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE
    while time.monotonic() < deadline:
        _reap(mine)
        if not any(_pid_alive(p, marker) for p in mine):
            break
        time.sleep(0.05)
    for p in mine:
        if _pid_alive(p, marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    time.sleep(0.05)
    _reap(mine)


def _reap(pids: list[int]) -> None:
    """Collect those that are this process's own children (a deploy from a test process)."""
    for p in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(p, os.WNOHANG)


# -- containers -------------------------------------------------------------------------------------
def _containers(dep: Deployment, *, running: bool) -> list[tuple[str, str]]:
    """(id, compose service) of the deployment's containers (by its compose project label)."""
    if not dep.project or shutil.which("docker") is None:
        return []
    cmd = ["docker", "ps", "--filter", f"label=com.docker.compose.project={dep.project}"]
    cmd += ["--format", '{{.ID}} {{.Label "com.docker.compose.service"}}']
    if not running:
        cmd.insert(2, "-a")
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.split("\n")
    return [(r[0], r[1] if len(r) > 1 else "") for r in (ln.split() for ln in out if ln.strip())]


def _container_services(dep: Deployment, *, running: bool) -> list[str]:
    """The compose services of the deployment's containers (running ones only, or all)."""
    return [service for _, service in _containers(dep, running=running)]


def _container_ids(dep: Deployment, *, running: bool, service_prefix: str = "") -> list[str]:
    """The ids of the deployment's containers (of the services starting ``service_prefix``)."""
    return [cid for cid, service in _containers(dep, running=running) if service.startswith(service_prefix)]


def _compose_down(dep: Deployment) -> None:
    """``compose down -v --remove-orphans`` on the deployment's project (containers, networks)."""
    from coordinator.runtimes.containers import compose_cli

    cli = compose_cli()
    compose_file = dep.directory / "compose.yaml"
    if cli is None or not compose_file.exists():
        return
    cmd = [*cli, "-p", dep.project, "-f", str(compose_file), "down", "-v", "--remove-orphans", "-t", "2"]
    subprocess.run(cmd, capture_output=True, check=False, cwd=dep.directory, timeout=120)


# -- teardown ---------------------------------------------------------------------------------------
def destroy(name: str, *, log: Callable[[str], None] | None = None) -> bool:
    """Stop everything of deployment ``name`` and remove its directory; False if there was none."""
    directory = state_root() / check_name(name)
    if not directory.exists():
        return False
    try:
        dep: Deployment | None = load(name)
    except UsageError:
        dep = None
    if dep is not None and on_host(dep):
        _stop_pids([int(n["pid"]) for n in dep.nodes.values() if n.get("pid")], dep.run_id)
        if dep.broker_pid:
            _stop_pids([dep.broker_pid], str(directory / "mosquitto.conf"))
    elif dep is not None and lives(dep) is registry.Nodes.CONTAINERS:
        _compose_down(dep)
    shutil.rmtree(directory, ignore_errors=True)
    if log:
        log(f"deployment {name} destroyed")
    return True


# -- attaching a run --------------------------------------------------------------------------------
@contextlib.contextmanager
def _exclusive(dep: Deployment) -> Iterator[None]:
    """One run at a time on a deployment: a second coordinator would answer the first's nodes."""
    with (dep.directory / "run.lock").open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"deployment {dep.name!r} is running another experiment; try again after it"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def attach_check(name: str, topo: Topology, *, probe: bool = False) -> Deployment:
    """The deployment ``name`` if an experiment on ``topo`` can run on it now, else UsageError.
    ``probe``: also ping the broker and every node (:func:`unresponsive`; outside trio only)."""
    dep = load(name)
    check_topology(dep, topo)
    if not broker_alive(dep):
        raise UsageError(
            f"deployment {name!r}: its broker is gone; 'meshcast deploy --repair {name}' starts it again"
        )
    alive, total = nodes_alive(dep)
    if alive < total:
        gone = nodes_gone(dep)
        named = ", ".join(f"({n})" for n in gone[:8]) + (
            f" and {len(gone) - 8} more" if len(gone) > 8 else ""
        )
        raise UsageError(
            f"deployment {name!r}: only {alive} of {total} nodes are running ({named} gone); "
            f"'meshcast deploy --repair {name}' starts them again"
        )
    stuck = stuck_parts(dep) if probe and not trio.lowlevel.in_trio_run() else []
    if stuck:
        named = ", ".join(n if n == "broker" else f"({n})" for n in stuck[:8]) + (
            f" and {len(stuck) - 8} more" if len(stuck) > 8 else ""
        )
        raise UsageError(
            f"deployment {name!r}: {named} not answering within {PING_TIMEOUT:g} s, nor again within "
            f"{RECHECK_TIMEOUT:g} s (stopped?); "
            f"'meshcast deploy --repair {name}' restarts them"
        )
    return dep


async def run_on_deployment(
    plan: Plan, settings: RunSettings, progress: Callable[[int, int], None] | None = None
) -> RawRun:
    """Run ``plan`` on the nodes of ``settings.deployment``: same session, their broker, their ports.

    SIGINT and SIGTERM end it as they end a fresh run (:func:`run_interruptible`): what arrived,
    marked interrupted, and the nodes told to abandon the run (the bus's ``abandon``, with its
    epoch), so that the next run starts at once."""
    assert settings.deployment is not None
    topo = plan.topology
    dep = attach_check(settings.deployment, topo)
    address = _address(dep)
    sessions: list[Session] = []
    buses: list[CoordinatorBus] = []

    async def run() -> RawRun:
        async with open_coordinator_bus(
            address, dep.run_id, connect_timeout=10.0, lease=max(settings.lease, keepalive_for(topo.size))
        ) as bus:
            buses.append(bus)
            session = Session(
                plan, settings, bus.send_to, bus.broadcast, bus.inbox,
                peers=dep.peers(topo), progress=progress, run_id=dep.run_id, epoch=bus.epoch,
            )  # fmt: skip
            sessions.append(session)
            raw = await session.run(set(topo.nodes()))
            if session.broker_gone:
                bus.abandon()  # nothing queued can go now: don't wait on it
            return raw

    with _exclusive(dep):
        return await run_interruptible(
            run,
            lambda: sessions[0].partial() if sessions else RawRun(),
            on_signal=lambda signum: buses[0].abandon_now(interrupted_note(signum)) if buses else None,
        )


def _image_present(image: str) -> bool:
    return (
        subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode
        == 0
    )


def deploy_containers(name: str, topo: Topology, *, log: Callable[[str], None] | None = None) -> Deployment:
    """Write a compose file (broker with a published loopback port, one serving node-X-Y service
    per node, no coordinator: runs attach from the host) into the deployment directory; ``up -d``."""
    from coordinator.runtimes.containers import (
        DEFAULT_BROKER_IMAGE,
        DEFAULT_IMAGE,
        AuthFiles,
        authenticated_broker_conf,
        compose_cli,
        compose_document,
        engine_name,
        render_yaml,
        repo_root,
        write_auth_files,
    )

    directory = state_root() / check_name(name)
    cli = compose_cli()
    if shutil.which("docker") is None or cli is None:
        raise UsageError("a containers deployment needs Docker and 'docker compose' or 'docker-compose'")
    image = os.environ.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
    if not _image_present(image):
        raise UsageError(
            f"image {image} is not built: run deploy/build-offline-image.sh (or docker compose build)"
        )
    broker_image = os.environ.get("MESHCAST_BROKER_IMAGE") or (
        DEFAULT_BROKER_IMAGE if _image_present(DEFAULT_BROKER_IMAGE) else image
    )
    if (directory / STATE_FILE).exists():
        raise UsageError(f"deployment {name!r} exists already: 'meshcast destroy {name}' first")
    directory.mkdir(parents=True, exist_ok=True)
    run_id = f"d-{name}-{secrets.token_hex(3)}"
    port = _free_ports(1)[0]
    creds = Credentials.generate()
    dep = Deployment(name, "containers", topo.spec, run_id, f"mqtt://{LOOPBACK}:{port}", creds.user,
                     creds.password, time.time(), project=f"meshcast-d-{name}")  # fmt: skip
    dep.save()  # from here on, destroy can clean up whatever was started
    conf = (repo_root() / "deploy" / "mosquitto.conf").read_text()
    (directory / "mosquitto.conf").write_text(authenticated_broker_conf(conf))
    write_auth_files(directory, creds)  # kept with the deployment: repair and plain compose use them
    # one engine, one clock: every node reports the engine's name, so arrivals get wall-clock latencies
    doc = compose_document(topo, [], run_id=run_id, build_context=str(repo_root()), clock_host=engine_name(),
                           mosquitto_conf="./mosquitto.conf", auth=AuthFiles())  # fmt: skip
    services = doc["services"]
    del services["coordinator"]  # runs attach from the host through the published broker port
    services["broker"]["image"] = broker_image
    # on this host's loopback only (and the broker takes the deployment's credentials only)
    services["broker"]["ports"] = [f"{LOOPBACK}:{port}:1883"]
    for svc_name, svc in services.items():
        if svc_name.startswith("node-"):
            svc["image"] = image
            env = svc["environment"]
            env.pop("MESHCAST_LINGER", None)
            env["MESHCAST_SERVE"] = "1"
    header = (
        f"meshcast deployment {name}: broker (published on {LOOPBACK}:{port}) and one serving node per node"
        f" of {topo.spec}.\nRuns attach from the host: meshcast run --deployment {name} ...\n"
        f"Inspect: docker-compose -p {dep.project} -f compose.yaml ps | logs node-1-1"
    )
    tmp = directory / ".compose.yaml.tmp"  # whole, then renamed: no reader sees half a file
    tmp.write_text(render_yaml(doc, header))
    os.replace(tmp, directory / "compose.yaml")
    cmd = [*cli, "-p", dep.project, "-f", "compose.yaml", "up", "-d"]
    with (directory / "compose.log").open("ab") as out:
        rc = subprocess.run(
            cmd, cwd=directory, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=600
        )
    if rc.returncode != 0 or not _wait_port(LOOPBACK, port, 30.0):
        raise UsageError(
            f"compose up failed; see {directory / 'compose.log'} ('meshcast destroy {name}' cleans up)"
        )
    if log:
        log(f"deployment {name}: compose project {dep.project}, broker on {dep.broker}; state in {directory}")
    return dep


def deploy(
    runtime: str, name: str, topo: Topology, *, log: Callable[[str], None] | None = None
) -> Deployment:
    """Deploy ``topo``'s nodes as ``name`` on ``runtime``, started by where the registry says its
    nodes live (UsageError for a runtime that cannot be deployed)."""
    r = registry.get(runtime)
    starts = {registry.Nodes.PROCESSES: deploy_processes, registry.Nodes.CONTAINERS: deploy_containers}
    if not r.deployable or r.nodes not in starts:
        which = ", ".join(registry.deployable())
        raise UsageError(f"the {runtime} runtime cannot be deployed: use one of {which}")
    dep = starts[r.nodes](name, topo, log=log)
    wait_answering(dep)
    if log:
        log(f"deployment {name}: all {topo.size} nodes answer")
    return dep
