"""The ``containers`` runtime: one container per node with docker compose, and the compose generator.

:func:`compose_document` writes one service per node (``node-X-Y``, its coordinates in its
environment, so ``docker compose logs node-2-3`` and ``docker compose stop node-2-3`` mean
something), the broker, and a ``coordinator`` service that runs the experiment
(``meshcast coordinate``) and writes its results into ``./results``. Nodes reach each other by
service name on the compose network, port 7000 (``bridge``, the runtime's default: each node
container is a host of its own, with its own namespace and address); or, with
:class:`LoopbackPorts`, every container shares one network namespace and each node listens on a
port of its own on its loopback: the namespace of a ``netns`` container of the run's own
(``pod``) or the host's (``host``). Then the engine makes no network namespace, veth pair, bridge
port or DNS entry per container, which is most of what it does to start one, at the price of the
nodes' own network (docs/deploy.md, "Container networks").

:func:`run_containers` does the same from ``meshcast run --runtime containers``: it writes the
file into a run directory, builds the image if it is not there, starts everything with its own
project name, collects the coordinator's results, and tears down with
``down -v --remove-orphans`` on every exit path. Its broker takes only the run's own credentials
(:class:`AuthFiles`: a password file for the broker, an ``env_file`` for nodes and coordinator),
generated for the run and removed with it, as the processes runtime's mosquitto does. It works
with compose v2 (``docker compose``) and v1 (``docker-compose``), probed once; only features both
have are used.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import Any, Final

import trio

from coordinator.errors import Interrupted
from coordinator.runtimes.brokerauth import Credentials, write_password_file
from coordinator.runtimes.codevolumes import CodeVolume, code_volume_setting, ensure_code_volumes
from coordinator.runtimes.network_modes import DEFAULT_NETWORK, NETWORK_ENV, NETWORK_MODES
from coordinator.runtimes.records import Arrival, RawRun, RunSettings
from coordinator.runtimes.signals import run_interruptible
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Coord, Topology
from node.transport.mqtt import keepalive_for

__all__ = [
    "BROKER_PASSWORD_FILE",
    "DEFAULT_BROKER_IMAGE",
    "DEFAULT_IMAGE",
    "DEFAULT_NETWORK",
    "NETNS_SERVICE",
    "NETWORK_ENV",
    "NETWORK_MODES",
    "NODE_PORT",
    "SETTINGS_ENV",
    "AuthFiles",
    "ContainerRun",
    "LoopbackPorts",
    "authenticated_broker_conf",
    "collected",
    "compose_cli",
    "compose_document",
    "engine_name",
    "host_broker_conf",
    "network_mode",
    "node_port",
    "plan_from_json",
    "plan_to_json",
    "pod_ports",
    "raw_from_json",
    "raw_to_json",
    "render_yaml",
    "repo_root",
    "run_containers",
    "settings_env",
    "write_auth_files",
]

DEFAULT_IMAGE: Final = "meshcast-local/meshcast:latest"
"""The project image; a name no public image has (the offline script builds it too)."""
DEFAULT_BASE_IMAGE: Final = "python:3.11-slim"
DEFAULT_BROKER_IMAGE: Final = "eclipse-mosquitto:2"
NODE_PORT: Final = 7000
BROKER_PASSWORD_FILE: Final = "/mosquitto/config/passwd"
"""Where the broker container reads its password file (mounted read-only)."""
BROKER_URL: Final = "mqtt://broker:1883"
START_MARGIN: Final = 300.0
"""Seconds allowed on top of the wall budget for images to start and the run to be collected."""
NODE_DEATH_GRACE: Final = 30.0
"""Seconds the coordinator may take to end a run by itself after a node container failed.

A node that reached the broker leaves a will, and the coordinator ends the run at once; one that
failed before (a bad setting, a crash at import) leaves nothing, and the coordinator would wait
out the whole wall budget for its hello. After this grace the run stops the coordinator instead.
"""
SIGNALLED: Final = frozenset({137, 143})
"""Exit statuses of containers killed (SIGKILL) or stopped (SIGTERM): faults whose will the
coordinator hears, not failures of the node itself."""
SETTINGS_ENV: Final = "MESHCAST_SETTINGS"
"""The coordinator container's run settings: their wire form as JSON (:func:`settings_env`)."""
NETNS_SERVICE: Final = "netns"
"""The service whose container holds a pod's network namespace (and does nothing else)."""
NETNS_WAIT: Final = (
    "import signal as s; t = {s.SIGTERM, s.SIGINT}; s.pthread_sigmask(s.SIG_BLOCK, t); s.sigwait(t)"
)
"""What the ``netns`` container runs: it waits for the signal ``down`` sends, then exits (the
signals blocked first: as PID 1 it would never see a signal it has no handler for)."""
POD_BROKER_PORT: Final = 1883
POD_EPHEMERAL_FROM: Final = 32768
"""The first ephemeral port in a pod: a new network namespace starts with the kernel's default
range (32768-60999), whatever the host's ``ip_local_port_range`` says."""


@dataclass(frozen=True)
class LoopbackPorts:
    """Every container in one network namespace: the broker on loopback port ``broker``; node
    (x, y) on ``node_base`` + x·rows + y (the nodes share one address, so each needs its own port).

    The namespace is the host's (``pod`` false: ``network_mode: host``) or the one that the run's
    :data:`NETNS_SERVICE` container holds (``network_mode: service:netns``): private to the run,
    like a Kubernetes pod's, so its ports need not be free on the host.
    """

    broker: int
    node_base: int
    pod: bool = False

    @property
    def broker_url(self) -> str:
        """Where nodes and coordinator reach the broker."""
        return f"mqtt://127.0.0.1:{self.broker}"

    @property
    def network_mode(self) -> str:
        """Every service's ``network_mode``."""
        return f"service:{NETNS_SERVICE}" if self.pod else "host"

    def node_port(self, topology: Topology, node: Coord) -> int:
        """Where ``node`` listens (``meshcast coordinate --port-per-node`` computes the same)."""
        return node_port(self.node_base, topology, node, per_node=True)


def pod_ports(topology: Topology, ephemeral_from: int = POD_EPHEMERAL_FROM) -> LoopbackPorts:
    """A pod's ports: the broker on 1883, the nodes from 7000 up, all below ``ephemeral_from``
    (where the kernel's outgoing connections take their ports: a node listening there could find
    its port taken). ValueError when the topology has more nodes than that leaves room for."""
    if NODE_PORT + topology.size > ephemeral_from:
        raise ValueError(
            f"{topology.size} nodes need ports {NODE_PORT}-{NODE_PORT + topology.size - 1} in one"
            f" namespace, which reach the kernel's ephemeral ports (from {ephemeral_from}); use"
            " --network bridge"
        )
    return LoopbackPorts(broker=POD_BROKER_PORT, node_base=NODE_PORT, pod=True)


def node_port(base: int, topology: Topology, node: Coord, *, per_node: bool) -> int:
    """A node's link port: ``base`` for all (a network of their own each), or, nodes sharing one
    address, ``base`` + its id (x·rows + y)."""
    return base + (node[0] * topology.rows + node[1] if per_node else 0)


def host_broker_conf(conf: str, port: int) -> str:
    """``deploy/mosquitto.conf`` with its one listener moved to loopback port ``port``."""
    line = "listener 1883 0.0.0.0"
    if conf.count(line) != 1:
        raise ValueError(f"mosquitto.conf must have exactly one {line!r} line for host networking")
    return conf.replace(line, f"listener {port} 127.0.0.1")


def authenticated_broker_conf(conf: str) -> str:
    """``deploy/mosquitto.conf`` refusing anonymous logins: its one ``allow_anonymous true`` line
    replaced by the password file at :data:`BROKER_PASSWORD_FILE`, and ``user root``.

    ``user root``: mosquitto 2 started as root switches to its ``mosquitto`` user before it reads
    the password file, which then cannot read it (the file is the host user's, mode 0600, mounted
    read-only); root in the container can (and, under rootless Docker, is that host user). Started
    as another user, mosquitto ignores the line."""
    line = "allow_anonymous true"
    if conf.splitlines().count(line) != 1:
        raise ValueError(f"mosquitto.conf must have exactly one {line!r} line to require a password")
    auth = f"allow_anonymous false\npassword_file {BROKER_PASSWORD_FILE}\nuser root"
    return conf.replace(line, auth)


@dataclass(frozen=True)
class AuthFiles:
    """A generated compose file's credentials, in two files beside it (paths relative to it): the
    broker's password file (mosquitto's format, mounted read-only at :data:`BROKER_PASSWORD_FILE`)
    and the ``env_file`` of the nodes and the coordinator (``MESHCAST_MQTT_USER`` and
    ``MESHCAST_MQTT_PASSWORD``). The compose file itself holds no password, and works whatever
    environment compose is started from (``deploy --repair``, a user's own ``docker-compose``)."""

    password_file: str = "./mosquitto.passwd"
    env_file: str = "./mqtt.env"


def write_auth_files(directory: Path, credentials: Credentials, files: AuthFiles = AuthFiles()) -> None:
    """Write ``files`` (relative to ``directory``) for ``credentials``, both readable by their owner
    only (mode 0600)."""
    write_password_file(directory / files.password_file, credentials)
    env = directory / files.env_file
    fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in credentials.env().items())


def remove_auth_files(directory: Path, files: AuthFiles = AuthFiles()) -> None:
    """Remove ``files`` from ``directory`` (those that are there)."""
    for name in (files.password_file, files.env_file):
        (directory / name).unlink(missing_ok=True)


def network_mode(env: Mapping[str, str], given: str | None = None) -> str:
    """The containers' network: ``given`` (``--network``, ``RunSettings.network``), else
    ``MESHCAST_CONTAINER_NETWORK`` in ``env``, else ``bridge``; UsageError for a value that is
    none of :data:`NETWORK_MODES`, naming where it came from."""
    from coordinator.errors import UsageError

    if given is not None:
        if given not in NETWORK_MODES:
            raise UsageError(f"--network {given!r}: use 'bridge' (the default), 'pod' or 'host'")
        return given
    mode = env.get(NETWORK_ENV, "").strip().lower() or DEFAULT_NETWORK
    if mode not in NETWORK_MODES:
        raise UsageError(f"{NETWORK_ENV}={mode!r}: use 'bridge' (the default), 'pod' or 'host'")
    return mode


def repo_root() -> Path:
    """The source tree holding deploy/Dockerfile (the build context)."""
    return Path(__file__).resolve().parents[2]


@cache
def compose_cli() -> tuple[str, ...] | None:
    """``("docker", "compose")`` for v2, ``("docker-compose",)`` for v1, None if neither (probed once)."""
    for cmd in (("docker", "compose"), ("docker-compose",)):
        if shutil.which(cmd[0]) is None:
            continue
        try:
            p = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return cmd
    return None


# -- the compose file -------------------------------------------------------------------------------
def compose_document(
    topology: Topology,
    coordinator_args: Sequence[str],
    *,
    run_id: str = "compose",
    build_context: str = ".",
    mosquitto_conf: str = "./deploy/mosquitto.conf",
    results: str = "./results",
    extra_volumes: Sequence[str] = (),
    swarm: bool = False,
    loopback: LoopbackPorts | None = None,
    code_volumes: Sequence[CodeVolume] = (),
    clock_host: str | None = None,
    coordinator_env: Mapping[str, str] | None = None,
    auth: AuthFiles | None = None,
) -> dict[str, Any]:
    """The compose file as data: broker, coordinator, and one ``node-X-Y`` service per node.

    ``auth``: the broker takes only the credentials in these files (its configuration must refuse
    anonymous logins: :func:`authenticated_broker_conf`), and the nodes and coordinator read them
    from the ``env_file``. Without it the credentials come from the environment compose is run in
    (``MESHCAST_MQTT_USER``, ``MESHCAST_MQTT_PASSWORD``), blank by default: the plain compose file's
    anonymous broker, reachable only on its compose network.

    ``coordinator_env``: more of the coordinator's environment (the run's settings:
    :func:`settings_env`).

    ``loopback``: every service in one network namespace, the host's or a pod's, on those loopback
    ports (see :class:`LoopbackPorts`); the broker's configuration must then listen on its port
    (:func:`host_broker_conf`). Not with ``swarm``: a stack ignores ``network_mode``, and its tasks
    would not share loopback.

    ``code_volumes``: named volumes (made beforehand, :mod:`coordinator.runtimes.codevolumes`)
    mounted read-only into every node container, over the image's own Python code.

    ``clock_host``: the host name every node reports (``MESHCAST_CLOCK_HOST``), for containers
    that share one engine's clock: then their wall-clock timestamps are paired (latencies), as
    in the processes runtime, though each container has a host name of its own. Not with
    ``swarm``, whose tasks run on several machines.

    ``swarm`` adds what ``docker stack deploy`` needs: no restart of finished services, and DNS
    round robin instead of a virtual IP (on a single-node swarm advertised on loopback the
    VIP gave "no route to host"; service names then resolve to the task's address).
    """
    image = f"${{MESHCAST_IMAGE:-{DEFAULT_IMAGE}}}"
    creds = (
        {
            "MESHCAST_MQTT_USER": "${MESHCAST_MQTT_USER:-}",
            "MESHCAST_MQTT_PASSWORD": "${MESHCAST_MQTT_PASSWORD:-}",
        }
        if auth is None
        else {}  # from the env_file: an environment entry would override it
    )
    # hundreds of containers take minutes to create on few cores (a second per 16 of them in
    # keep-alive: the creation storm starves them more than node processes): the first nodes
    # must outwait the last ones' hellos and keep their broker connection meanwhile
    keepalive: dict[str, str] = {}
    scale: dict[str, str] = {}
    if topology.size > 64:
        keepalive = {"MESHCAST_MQTT_KEEPALIVE": str(keepalive_for(topology.size, 16))}
        scale = {"MESHCAST_HANDSHAKE_TIMEOUT": f"{START_MARGIN:g}", **keepalive}
    if clock_host is not None and swarm:
        raise ValueError("one clock host and swarm do not mix: a stack's tasks run on several machines")
    if loopback is not None and swarm:
        raise ValueError(
            "a shared network namespace (host or pod) and swarm do not mix: a stack ignores network_mode"
        )
    broker_url = loopback.broker_url if loopback is not None else BROKER_URL
    where: list[str] = []
    if loopback is not None:
        where = ["--node-host", "127.0.0.1", "--node-port", str(loopback.node_base), "--port-per-node"]
    services: dict[str, Any] = {
        "broker": {
            "image": f"${{MESHCAST_BROKER_IMAGE:-{DEFAULT_BROKER_IMAGE}}}",
            "command": ["mosquitto", "-c", "/mosquitto/config/mosquitto.conf"],
            "volumes": [
                f"{mosquitto_conf}:/mosquitto/config/mosquitto.conf:ro",
                *([f"{auth.password_file}:{BROKER_PASSWORD_FILE}:ro"] if auth is not None else []),
            ],
        },
        "coordinator": {
            "image": image,
            "build": {
                "context": build_context,
                "dockerfile": "deploy/Dockerfile",
                "args": {"BASE_IMAGE": f"${{MESHCAST_BASE_IMAGE:-{DEFAULT_BASE_IMAGE}}}"},
            },
            "command": [
                "meshcast",
                "coordinate",
                *coordinator_args,
                *where,
                "--broker",
                broker_url,
                "--run-id",
                run_id,
                "--out",
                "/results",
            ],
            **({"env_file": [auth.env_file]} if auth is not None else {}),
            "environment": {**(coordinator_env or {}), **keepalive, **creds},
            # the results belong to whoever runs it (a run sets MESHCAST_USER to its own uid:gid)
            "user": "${MESHCAST_USER:-0:0}",
            "volumes": [f"{results}:/results", *extra_volumes],
            "depends_on": ["broker"],
        },
    }
    for x, y in topology.nodes():
        listen = (
            f"0.0.0.0:{NODE_PORT}"
            if loopback is None
            else f"127.0.0.1:{loopback.node_port(topology, (x, y))}"
        )
        services[f"node-{x}-{y}"] = {
            "image": image,
            "pull_policy": "never",
            "command": ["python", "-m", "node"],
            **({"env_file": [auth.env_file]} if auth is not None else {}),
            "environment": {
                "MESHCAST_NODE": f"{x},{y}",
                "MESHCAST_BROKER": broker_url,
                "MESHCAST_RUN_ID": run_id,
                "MESHCAST_LISTEN": listen,
                "MESHCAST_LINGER": "60",
                **scale,
                **({"MESHCAST_CLOCK_HOST": clock_host} if clock_host is not None else {}),
                **creds,
            },
            "depends_on": ["broker"],
        }
        if code_volumes:
            services[f"node-{x}-{y}"]["volumes"] = [v.mount for v in code_volumes]
    if loopback is not None:
        for svc in services.values():
            svc["network_mode"] = loopback.network_mode
            if loopback.pod:
                svc["depends_on"] = [NETNS_SERVICE, *svc.get("depends_on", [])]
    if loopback is not None and loopback.pod:
        # loopback only: the pod talks to nothing outside, so no compose network either
        netns = {"image": image, "pull_policy": "never", "command": ["python", "-c", NETNS_WAIT],
                 "network_mode": "none"}  # fmt: skip
        services = {NETNS_SERVICE: netns, **services}
    if swarm:
        for svc in services.values():
            svc["deploy"] = {"endpoint_mode": "dnsrr", "restart_policy": {"condition": "none"}}
    doc: dict[str, Any] = {"version": "3.8", "services": services}
    if code_volumes:
        doc["volumes"] = {v.name: {"external": True} for v in code_volumes}
    return doc


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    text = str(v)
    if '"' in text and "'" not in text:  # JSON (the run's settings) reads best single-quoted
        return f"'{text}'"
    return json.dumps(text)  # a double-quoted YAML string


def render_yaml(doc: Any, header: str = "") -> str:
    """Block-style YAML for plain dicts, lists (of scalars or flat dicts) and scalars (strings
    quoted: single quotes for one holding double quotes and no single quote, else double)."""
    lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()]

    def emit(v: Any, indent: int) -> None:
        pad = "  " * indent
        if isinstance(v, dict):
            for k, item in v.items():
                if k == "command" and isinstance(item, list):
                    lines.append(f"{pad}{k}: {flow(item)}")
                elif isinstance(item, (dict, list)) and item:
                    lines.append(f"{pad}{k}:")
                    emit(item, indent + 1)
                else:
                    lines.append(f"{pad}{k}: {_scalar(item) if not isinstance(item, (dict, list)) else '{}'}")
        else:
            for item in v:
                if isinstance(item, dict) and not any(isinstance(i, (dict, list)) for i in item.values()):
                    # a flat mapping (a stack's config entry): one flow mapping
                    pairs = ", ".join(f"{k}: {_scalar(i)}" for k, i in item.items())
                    lines.append(f"{pad}- {{{pairs}}}")
                    continue
                if isinstance(item, (dict, list)):
                    raise ValueError("nested collections in lists are not needed here")
                lines.append(f"{pad}- {_scalar(item)}")

    def flow(v: list[Any]) -> str:
        return "[" + ", ".join(_scalar(i) for i in v) + "]"

    emit(doc, 0)
    return "\n".join(lines) + "\n"


# -- plans and raw results as JSON (host <-> coordinator container) ----------------------------
def plan_to_json(plan: Plan) -> str:
    return json.dumps(
        {
            "topology": plan.topology.spec,
            "multicasts": [
                [m.id, m.algorithm, list(m.source), [list(d) for d in m.destinations], m.step, dict(m.params)]
                for m in plan.multicasts
            ],
        }
    )


def plan_from_json(text: str) -> Plan:
    data = json.loads(text)
    topo = Topology.parse(data["topology"])
    mcs = tuple(
        Multicast(
            int(i),
            str(a),
            (int(s[0]), int(s[1])),
            tuple((int(d[0]), int(d[1])) for d in ds),
            int(st),
            dict(p),
        )
        for i, a, s, ds, st, p in data["multicasts"]
    )
    return Plan(topo, mcs)


def _c(v: Sequence[int]) -> Coord:
    return (int(v[0]), int(v[1]))


def raw_to_json(raw: RawRun) -> str:
    return json.dumps(
        {
            "arrivals": [
                [a.mc, list(a.node), a.step, a.hops, a.startups, a.wall_ns, a.host]
                + ([] if a.tel is None else [list(a.tel)])
                for a in raw.arrivals
            ],
            "traffic": [[mc, n] for mc, n in raw.traffic.items()],
            "links": [[mc, [[list(n), p] for n, p in sorted(ls)]] for mc, ls in raw.links.items()],
            "trace": [[mc, list(n), p, s] for mc, n, p, s in raw.trace],
            "errors": raw.errors,
            "injected": [[mc, ns, host] for mc, (ns, host) in raw.injected.items()],
            "hosts": [[list(n), h] for n, h in raw.hosts.items()],
            "node_status": [[list(n), s] for n, s in raw.node_status.items()],
            "peak_queue": [[list(n), q] for n, q in raw.peak_queue.items()],
            "node_stats": [[list(n), st] for n, st in raw.node_stats.items()],
            "link_sends": [[list(n), p, k] for (n, p), k in raw.link_sends.items()],
            "dropped": raw.dropped,
            "last_step": raw.last_step,
            "wall_s": raw.wall_s,
            "incomplete": raw.incomplete,
            # wormhole flit runs, only with a trace (so a record without one keeps its bytes)
            **(
                {"worms": [[mc, list(n), i, p, list(w), s, k] for mc, n, i, p, w, s, k in raw.worms]}
                if raw.worms
                else {}
            ),
        }
    )


def raw_from_json(text: str) -> RawRun:
    d = json.loads(text)
    return RawRun(
        arrivals=[
            Arrival(int(mc), _c(n), int(s), int(h), int(u), w, host, tuple(tel[0]) if tel else None)
            for mc, n, s, h, u, w, host, *tel in d["arrivals"]
        ],
        traffic={int(mc): int(n) for mc, n in d["traffic"]},
        links={int(mc): {(_c(n), str(p)) for n, p in ls} for mc, ls in d["links"]},
        trace=[(int(mc), _c(n), str(p), int(s)) for mc, n, p, s in d["trace"]],
        worms=[
            (int(mc), _c(n), str(i), str(p), (int(w[0]), int(w[1]), int(w[2])), int(s), int(k))
            for mc, n, i, p, w, s, k in d.get("worms", [])
        ],
        errors=list(d["errors"]),
        injected={int(mc): (int(ns), str(h)) for mc, ns, h in d["injected"]},
        hosts={_c(n): str(h) for n, h in d["hosts"]},
        node_status={_c(n): str(s) for n, s in d["node_status"]},
        peak_queue={_c(n): int(q) for n, q in d["peak_queue"]},
        node_stats={_c(n): {str(k): float(v) for k, v in st.items()} for n, st in d.get("node_stats", [])},
        link_sends={(_c(n), str(p)): int(k) for n, p, k in d.get("link_sends", [])},
        dropped=int(d.get("dropped", 0)),
        last_step=int(d["last_step"]),
        wall_s=float(d["wall_s"]),
        incomplete=list(d["incomplete"]),
    )


def settings_env(settings: RunSettings) -> dict[str, str]:
    """The coordinator container's environment that carries ``settings``: their wire form
    (:meth:`RunSettings.to_wire`, what differs from the defaults) as one JSON value, which
    ``meshcast coordinate`` decodes with the checks the nodes' ``assign`` has. The host's own
    places (the runtime, broker and run directory) stay here: the coordinator has its own."""
    here = RunSettings()
    sent = replace(settings, runtime=here.runtime, broker=here.broker, run_dir=here.run_dir)
    return {SETTINGS_ENV: json.dumps(sent.to_wire(changed=True), separators=(", ", ": "))}


# -- running ------------------------------------------------------------------------------------------
@dataclass
class ContainerRun:
    """One compose deployment of a plan: write, build, up, collect, down (always)."""

    plan: Plan
    settings: RunSettings
    workdir: Path
    run_id: str = field(default_factory=lambda: "c" + secrets.token_hex(4))
    log: Callable[[str], None] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    code_volumes: list[CodeVolume] = field(default_factory=list)
    stopped_for: str | None = None
    """Why the run stopped the coordinator itself (a failed node it was still waiting for)."""
    _loopback: LoopbackPorts | None = field(default=None, init=False)
    clock_host: str | None = None
    """The engine's name, which every node reports as its host (see :func:`compose_document`);
    asked of the engine by :meth:`up`."""
    credentials: Credentials = field(default_factory=Credentials.generate)
    """The run's broker login (:class:`AuthFiles` in the run directory until :meth:`down`)."""

    @property
    def project(self) -> str:
        return f"meshcast-{self.run_id}"

    @property
    def compose_file(self) -> Path:
        return self.workdir / "compose.yaml"

    @property
    def results(self) -> Path:
        return self.workdir / "results"

    def say(self, text: str) -> None:
        if self.log is not None:
            self.log(text)

    def write(self) -> Path:
        """The run directory: compose.yaml, plan.json, mosquitto.conf, results/, and the run's
        credentials (:class:`AuthFiles`, removed by :meth:`down`)."""
        # the coordinator container writes results/ as this user, not as root (see compose_document)
        self.env.setdefault("MESHCAST_USER", f"{os.getuid()}:{os.getgid()}")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.results.mkdir(exist_ok=True)
        (self.workdir / "plan.json").write_text(plan_to_json(self.plan))
        conf = (repo_root() / "deploy" / "mosquitto.conf").read_text()
        loopback: LoopbackPorts | None = None
        mode = network_mode(self.env, self.settings.network)
        if mode != "bridge":
            from coordinator.errors import UsageError
            from coordinator.runtimes.processes import free_port_block

            try:
                if mode == "pod":
                    loopback = pod_ports(self.plan.topology)
                else:
                    base = free_port_block(self.plan.topology.size + 1)
                    loopback = LoopbackPorts(broker=base, node_base=base + 1)
            except (OSError, ValueError) as exc:
                raise UsageError(f"{mode} networking: {exc}") from None
            conf = host_broker_conf(conf, loopback.broker)
            if mode == "host":
                self.say(f"host networking: broker on 127.0.0.1:{loopback.broker}, nodes from port"
                         f" {loopback.node_base}")  # fmt: skip
        (self.workdir / "mosquitto.conf").write_text(authenticated_broker_conf(conf))
        self._loopback = loopback
        write_auth_files(self.workdir, self.credentials)
        return self.render()

    def render(self) -> Path:
        """(Re)write compose.yaml from the run's plan, ports and code volumes."""
        doc = compose_document(
            self.plan.topology,
            ["--plan", "/meshcast-run/plan.json"],
            coordinator_env=settings_env(self.settings),
            run_id=self.run_id,
            build_context=str(repo_root()),
            mosquitto_conf="./mosquitto.conf",
            results="./results",
            extra_volumes=["./plan.json:/meshcast-run/plan.json:ro"],
            loopback=self._loopback,
            code_volumes=self.code_volumes,
            clock_host=self.clock_host,
            auth=AuthFiles(),
        )
        # written whole, then renamed: whoever reads it (docker-compose in another shell, a test
        # looking for the project's name) sees no file or the whole file, never half of one
        tmp = self.compose_file.with_name(".compose.yaml.tmp")
        tmp.write_text(render_yaml(doc, f"meshcast run {self.run_id} (generated)"))
        os.replace(tmp, self.compose_file)
        return self.compose_file

    def cmd(self, *args: str) -> list[str]:
        cli = compose_cli()
        if cli is None:
            raise RuntimeError(
                "the containers runtime needs docker compose: neither 'docker compose' (v2) nor"
                " 'docker-compose' (v1) is installed"
            )
        return [*cli, "-p", self.project, "-f", str(self.compose_file), *args]

    async def _image_present(self, image: str) -> bool:
        p = await trio.run_process(
            ["docker", "image", "inspect", image], capture_stdout=True, capture_stderr=True, check=False
        )
        return p.returncode == 0

    async def choose_broker(self) -> None:
        """Use the project image as broker when no broker image is set and the default is absent.

        No registry may be reachable: then ``eclipse-mosquitto:2`` cannot be pulled, and the
        offline image (which has mosquitto) serves as broker.
        """
        if "MESHCAST_BROKER_IMAGE" in self.env or await self._image_present(DEFAULT_BROKER_IMAGE):
            return
        image = self.env.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
        self.env["MESHCAST_BROKER_IMAGE"] = image
        self.say(f"{DEFAULT_BROKER_IMAGE} is not here: using {image} as the broker (it needs mosquitto)")

    async def _run(self, args: list[str], logname: str, timeout: float) -> int:
        with (self.workdir / logname).open("ab") as logf, trio.move_on_after(timeout) as scope:
            p = await trio.run_process(
                args, stdout=logf, stderr=subprocess.STDOUT, check=False, cwd=self.workdir, env=self.env
            )
            return int(p.returncode)
        if scope.cancelled_caught:
            raise TimeoutError(
                f"{' '.join(args[:4])} ... took over {timeout:g} s; see {self.workdir / logname}"
            )
        return 1

    async def build(self) -> None:
        """Build the image unless it is already there (e.g. made by deploy/build-offline-image.sh)."""
        image = self.env.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
        if await self._image_present(image):
            return
        self.say(f"building {image}")
        t0 = time.perf_counter()
        if await self._run(self.cmd("build", "coordinator"), "build.log", 1800) != 0:
            raise RuntimeError(
                f"building {image} failed (see {self.workdir / 'build.log'}); without a registry,"
                " build it with deploy/build-offline-image.sh"
            )
        self.timings["build_s"] = time.perf_counter() - t0

    def parallel_env(self) -> None:
        """Let compose create every node container at once (its default is 64 at a time).

        ``COMPOSE_PARALLEL_LIMIT`` is compose v1's knob (v2 reads it too); a value the user set
        is kept. So many requests at once keep the Docker engine busy for minutes (256 node
        containers here: compose v1's default 60 s ``COMPOSE_HTTP_TIMEOUT`` failed most of them),
        so the HTTP timeout is the run's start-up budget.
        """
        self.env.setdefault("COMPOSE_PARALLEL_LIMIT", str(max(64, self.plan.topology.size + 2)))
        self.env.setdefault("COMPOSE_HTTP_TIMEOUT", str(int(START_MARGIN)))

    async def up(self) -> int:
        """Start everything detached; return the coordinator's exit status once it has finished.

        Detached (``up -d``, then ``docker wait`` on the coordinator) rather than
        ``up --abort-on-container-exit``, which would end the run at the first container that
        stops: a killed node or a restarted broker are faults the run must survive and report.
        The containers' output goes to compose.log.
        """
        budget = self.settings.wall_budget + START_MARGIN
        await self.choose_broker()
        self.parallel_env()
        t0 = time.perf_counter()
        image = self.env.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
        self.code_volumes = await ensure_code_volumes(image, self.env, self.say)
        self.clock_host = await trio.to_thread.run_sync(engine_name, self.env)
        if self.code_volumes or self.clock_host is not None:
            self.render()
        since = int(time.time()) - 1  # `docker events --since`: whole seconds
        try:
            if await self._run(self.cmd("up", "-d"), "compose.log", budget) != 0:
                return -1
            ps = await trio.run_process(
                self.cmd("ps", "-q", "coordinator"),
                capture_stdout=True,
                check=False,
                cwd=self.workdir,
                env=self.env,
            )
            cid = ps.stdout.decode().strip()
            if not cid:
                return -1
            with trio.fail_after(budget):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch_node_failures, since)
                    waited = await trio.run_process(["docker", "wait", cid], capture_stdout=True, check=False)
                    nursery.cancel_scope.cancel()
            try:
                return int(waited.stdout.decode().strip())
            except ValueError:
                return -1
        except trio.TooSlowError:
            raise TimeoutError(f"the coordinator did not finish within {budget:g} s") from None
        finally:
            self.timings["up_s"] = time.perf_counter() - t0
            with trio.CancelScope(shield=True):
                await self._run(self.cmd("logs", "--no-color"), "compose.log", 120)

    async def _watch_node_failures(self, since: int) -> None:
        """Stop the coordinator when a node container fails and the run does not end by itself.

        Reads the project's container ``die`` events (``docker events``, no polling of the
        engine while it is still creating containers). A node that exits with an error status
        (not a kill: :data:`SIGNALLED`) starts the grace; if the coordinator is still running
        :data:`NODE_DEATH_GRACE` s later, it is stopped so that it writes what it has, and the
        results say which node failed (the first). Cancelled when the coordinator exits.
        """
        args = [
            "docker", "events", "--since", str(since),
            "--filter", f"label=com.docker.compose.project={self.project}",
            "--filter", "type=container", "--filter", "event=die",
            "--format", "{{json .Actor.Attributes}}",
        ]  # fmt: skip
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(
                partial(
                    trio.run_process, args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False
                )
            )
            assert proc.stdout is not None
            buffer = b""
            async for chunk in proc.stdout:
                *lines, buffer = (buffer + chunk).split(b"\n")
                failed = next(filter(None, map(_failed_node, lines)), None)
                if failed is not None:  # the first failure is the one named
                    await self._stop_after_grace(failed)
                    nursery.cancel_scope.cancel()
                    return

    async def _stop_after_grace(self, failed: tuple[str, int]) -> None:
        await trio.sleep(NODE_DEATH_GRACE)
        service, status = failed
        self.stopped_for = (
            f"run stopped early: {service}'s container exited with status {status} and the"
            f" coordinator had not ended the run {NODE_DEATH_GRACE:g} s later (the node's output is"
            f" in {self.workdir}/compose.log)"
        )
        self.say(self.stopped_for)
        await self.stop_coordinator()

    async def down(self) -> None:
        """Remove every container, network and volume of the project (also after Ctrl-C), then
        the run's credentials: its password must not outlive it."""
        with trio.CancelScope(shield=True):
            try:
                await self._run(self.cmd("down", "-v", "--remove-orphans", "-t", "2"), "compose.log", 300)
            except (TimeoutError, RuntimeError) as exc:
                self.say(f"teardown: {exc}")
            finally:
                remove_auth_files(self.workdir)

    async def stop_coordinator(self) -> None:
        """Stop the coordinator container (SIGTERM, 10 s) so it writes its partial results."""
        try:
            await self._run(self.cmd("stop", "-t", "10", "coordinator"), "compose.log", 60)
        except (TimeoutError, RuntimeError) as exc:
            self.say(f"stopping the coordinator: {exc}")

    def collect(self, rc: int, *, interrupted: bool = False) -> RawRun:
        """The coordinator container's raw results (partial after a signal), or why there are none."""
        raw_path = self.results / "raw.json"
        if not raw_path.exists():
            if interrupted:
                return RawRun()
            why = f"the coordinator container wrote no results (exit status {rc})"
            raw = RawRun(incomplete=[f"{why}; see {self.workdir}/compose.log"])
        else:
            raw = raw_from_json(raw_path.read_text())
        if self.stopped_for is not None:
            raw.incomplete.append(self.stopped_for)
        return raw


def engine_name(env: Mapping[str, str] | None = None) -> str | None:
    """The Docker engine's host name (``docker info``), None when it cannot be had.

    Every container on one engine reads that machine's monotonic clock, so its nodes report it as
    their host: the runtime then pairs their wall-clock timestamps, as it does for node processes.
    """
    try:
        p = subprocess.run(
            ["docker", "info", "--format", "{{.Name}}"],
            capture_output=True, text=True, timeout=30, check=False, env=env,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = p.stdout.strip()
    return name if p.returncode == 0 and name else None


def _failed_node(event: bytes) -> tuple[str, int] | None:
    """A ``die`` event's (service, exit status) if a node container failed; None otherwise."""
    try:
        attrs = json.loads(event)
        service, status = str(attrs["com.docker.compose.service"]), int(attrs["exitCode"])
    except (ValueError, KeyError, TypeError):
        return None
    if not service.startswith("node-") or status == 0 or status in SIGNALLED:
        return None
    return service, status


async def run_containers(
    plan: Plan,
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> RawRun:
    """Run ``plan`` with one container per node; the deployment is torn down on every exit path.

    SIGINT/SIGTERM stop the coordinator container (it writes what has arrived), take everything
    down, remove a temporary run directory and raise Interrupted with the partial records.
    A temporary run directory is removed after a complete run and kept (for its logs) otherwise.
    """
    from coordinator.errors import UsageError

    if shutil.which("docker") is None:
        raise UsageError("the containers runtime needs Docker: install docker.io (and docker-compose)")
    if compose_cli() is None:
        raise UsageError("the containers runtime needs 'docker compose' (v2) or 'docker-compose' (v1)")
    network_mode(os.environ, settings.network)  # a bad setting is refused before anything is made
    code_volume_setting(os.environ)
    temporary = settings.run_dir is None
    workdir = Path(settings.run_dir or tempfile.mkdtemp(prefix="meshcast-containers-"))
    run = ContainerRun(plan, settings, workdir.resolve(), log=log)
    try:
        run.write()
    except BaseException:
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    rc_box: list[int] = []

    async def up() -> int:
        try:
            await run.build()
        except RuntimeError as exc:
            raise UsageError(str(exc)) from None
        try:
            rc_box.append(await run.up())
        except TimeoutError as exc:
            rc_box.append(-1)
            run.say(str(exc))
        finally:
            with trio.CancelScope(shield=True):
                # a signal: the coordinator container writes what has arrived before it goes
                if not rc_box:
                    await run.stop_coordinator()
                await run.down()
        return rc_box[0]

    return await collected(up, run.collect, plan, workdir, temporary, progress)


async def collected(
    go: Callable[[], Awaitable[int]],
    collect: Callable[..., RawRun],
    plan: Plan,
    workdir: Path,
    temporary: bool,
    progress: Callable[[int, int], None] | None,
) -> RawRun:
    """Run ``go`` (its exit status) under SIGINT/SIGTERM and ``collect`` the raw results; a temporary
    run directory is removed after a complete run or a signal, and kept (for its logs) otherwise.
    The tail of every runtime whose coordinator runs in a container (containers, swarm)."""
    try:
        rc = await run_interruptible(go, lambda: collect(-1, interrupted=True))
        raw = collect(rc)
    except Interrupted:
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    if temporary and not raw.incomplete:
        shutil.rmtree(workdir, ignore_errors=True)
    if progress is not None:
        progress(
            len({(a.mc, a.node) for a in raw.arrivals}), sum(len(m.destinations) for m in plan.multicasts)
        )
    return raw
