"""The ``swarm`` runtime: one node per service of a ``docker stack``, spread over a swarm's hosts.

A run deploys the compose document of :func:`coordinator.runtimes.containers.compose_document`
as a stack (``docker stack deploy``) on the swarm that the Docker CLI's engine (``DOCKER_HOST``)
manages:

* every node a service of one task, on an attachable overlay network of the run's own
  (``<stack>_mesh``), placed by :func:`place`: ``blocks`` (the default: the nodes in row-major
  order, cut into one block of rows per Ready host, each task pinned by ``node.id``), ``spread``
  (the swarm's own scheduler) or ``label:KEY`` (one block per value of the hosts' label KEY);
* the broker a service on a manager, taking only the run's credentials (its configuration and
  password file are swarm configs: they reach whichever host runs it);
* the coordinator where the user runs it: a container on this engine joined to the overlay
  (``docker run --network <stack>_mesh``), writing its results into the run directory.

Each node reports its swarm node's host name as its clock host (``{{.Node.Hostname}}``): nodes on
one host share a clock, nodes on two do not, and run.json records which swarm node (name and ID)
ran each node. Before a run the image is checked on every host named in ``MESHCAST_SWARM_HOSTS``
(Docker endpoints, e.g. ``unix:///…/docker.sock`` or ``ssh://user@host``): its id (the digest of
its configuration) must equal the coordinator's. There is no registry: an image reaches a host
by ``docker save | docker -H … load`` (``deploy/swarm-lab.sh`` does so on its hosts).

A host lost mid-run (its daemon stopped) takes its nodes with it: the broker's wills end the
run, and the result names the lost nodes and the swarm node they ran on. The next run places its
nodes on the hosts that are Ready then (the swarm's own rescheduling is off: a finished node
must not restart).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import trio

from coordinator.errors import UsageError
from coordinator.runtimes.brokerauth import Credentials
from coordinator.runtimes.containers import (
    BROKER_PASSWORD_FILE,
    DEFAULT_IMAGE,
    AuthFiles,
    authenticated_broker_conf,
    collected,
    compose_document,
    plan_to_json,
    raw_from_json,
    remove_auth_files,
    render_yaml,
    repo_root,
    settings_env,
    write_auth_files,
)
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.topology import Coord, Topology, coords_text

__all__ = [
    "HOSTS_ENV",
    "PLACEMENTS",
    "PLACEMENT_ENV",
    "SwarmHost",
    "SwarmRun",
    "lost_by_host",
    "place",
    "run_swarm",
    "stack_document",
    "swarm_hosts",
]

HOSTS_ENV: Final = "MESHCAST_SWARM_HOSTS"
"""Comma-separated Docker endpoints of the swarm's hosts, whose images are checked before a run."""
PLACEMENT_ENV: Final = "MESHCAST_SWARM_PLACEMENT"
"""``blocks`` (default), ``spread`` or ``label:KEY``: how the nodes are placed (:func:`place`)."""
PLACEMENTS: Final = ("blocks", "spread", "label:KEY")
NETWORK: Final = "mesh"
START_BUDGET: Final = 300.0
"""Seconds the stack's tasks may take to be running, and the teardown to finish."""
POLL: Final = 0.5


@dataclass(frozen=True, slots=True)
class SwarmHost:
    """One swarm node (a host): its ID, host name, state, availability, role and labels."""

    id: str
    hostname: str
    state: str = "ready"
    availability: str = "active"
    role: str = "worker"
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def usable(self) -> bool:
        """Ready and active: the swarm schedules tasks on it."""
        return self.state == "ready" and self.availability == "active"

    def name(self) -> str:
        return f"{self.hostname} ({self.id[:12]})"


def _docker(
    args: Sequence[str], env: Mapping[str, str], timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """``docker ARGS`` on the CLI's engine; the completed process (never raises on a status)."""
    try:
        return subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False, env=dict(env)
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            ["docker", *args], 124, "", f"docker {args[0]} took over {timeout:g} s"
        )


def _check_manager(env: Mapping[str, str]) -> None:
    """UsageError unless the CLI's engine is a manager of an active swarm."""
    p = _docker(["info", "--format", "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}"], env)
    where = env.get("DOCKER_HOST", "the local engine")
    if p.returncode != 0:
        raise UsageError(f"the swarm runtime cannot reach Docker at {where}: {p.stderr.strip()[:200]}")
    state = p.stdout.split()
    if state != ["active", "true"]:
        raise UsageError(
            f"the swarm runtime needs a swarm manager, and Docker at {where} is not one ({' '.join(state)}):"
            " run 'docker swarm init' there, or point DOCKER_HOST at a manager"
            " (deploy/swarm-lab.sh up 3 makes a swarm of three hosts on this machine)"
        )


def swarm_hosts(env: Mapping[str, str]) -> list[SwarmHost]:
    """The swarm's nodes, by host name then ID (``docker node inspect``)."""
    ids = _docker(["node", "ls", "-q"], env)
    if ids.returncode != 0:
        raise UsageError(f"docker node ls failed: {ids.stderr.strip()[:200]}")
    p = _docker(["node", "inspect", *ids.stdout.split()], env)
    if p.returncode != 0:
        raise UsageError(f"docker node inspect failed: {p.stderr.strip()[:200]}")
    hosts = [
        SwarmHost(
            id=n["ID"],
            hostname=n["Description"]["Hostname"],
            state=n["Status"]["State"],
            availability=n["Spec"]["Availability"],
            role=n["Spec"]["Role"],
            labels=dict(n["Spec"].get("Labels") or {}),
        )
        for n in json.loads(p.stdout)
    ]
    return sorted(hosts, key=lambda h: (h.hostname, h.id))


def place(topology: Topology, hosts: Sequence[SwarmHost], placement: str) -> dict[Coord, str] | None:
    """Each node's placement constraint (None: ``spread``, the swarm's scheduler places them).

    ``blocks``: the usable hosts in name order, the nodes in row-major order (x, then y) cut into
    as many contiguous blocks of near-equal size, block k on host k by ``node.id`` (few links
    cross hosts). ``label:KEY``: the same over the distinct values of the usable hosts' label KEY,
    by ``node.labels.KEY``. ValueError names what is wrong (an unknown placement, no usable host,
    no host with the label).
    """
    if placement == "spread":
        return None
    usable = [h for h in hosts if h.usable]
    if placement == "blocks":
        targets = [f"node.id == {h.id}" for h in usable]
        what = "usable (ready and active) swarm node"
    elif placement.startswith("label:") and placement[6:]:
        key = placement[6:]
        values = sorted({h.labels[key] for h in usable if key in h.labels})
        targets = [f"node.labels.{key} == {v}" for v in values]
        what = f"usable swarm node with the label {key!r}"
    else:
        raise ValueError(f"unknown swarm placement {placement!r}: use one of {', '.join(PLACEMENTS)}")
    if not targets:
        raise ValueError(f"no {what}")
    nodes = sorted(topology.nodes())
    k = len(targets)
    return {n: targets[i * k // len(nodes)] for i, n in enumerate(nodes)}


def stack_document(
    topology: Topology,
    run_id: str,
    *,
    constraints: Mapping[Coord, str] | None,
    directory: Path,
) -> dict[str, Any]:
    """The stack file as data: the compose document's broker and nodes (no coordinator: it runs
    where the user is), on the run's attachable overlay, the broker's files as swarm configs,
    each node pinned by ``constraints`` (None: the swarm's scheduler, spreading each node's one
    task) and reporting its swarm node's host name as its clock host."""
    auth = AuthFiles()
    doc = compose_document(topology, [], run_id=run_id, swarm=True, auth=auth)
    services: dict[str, Any] = doc["services"]
    del services["coordinator"]
    env_file = str(directory / auth.env_file)
    for name, svc in services.items():
        svc.pop("depends_on", None)
        svc.pop("pull_policy", None)
        svc["networks"] = [NETWORK]
        if "env_file" in svc:
            svc["env_file"] = [env_file]
        if name.startswith("node-"):
            x, y = (int(v) for v in name[5:].split("-"))
            svc["environment"]["MESHCAST_CLOCK_HOST"] = "{{.Node.Hostname}}"
            if constraints is not None:
                svc["deploy"]["placement"] = {"constraints": [constraints[(x, y)]]}
    broker = services["broker"]
    del broker["volumes"]
    broker["configs"] = [
        {"source": "mosquitto_conf", "target": "/mosquitto/config/mosquitto.conf"},
        {"source": "mosquitto_passwd", "target": BROKER_PASSWORD_FILE},
    ]
    broker["deploy"]["placement"] = {"constraints": ["node.role == manager"]}
    doc["networks"] = {NETWORK: {"driver": "overlay", "attachable": True}}
    doc["configs"] = {
        "mosquitto_conf": {"file": str(directory / "mosquitto.conf")},
        "mosquitto_passwd": {"file": str(directory / auth.password_file)},
    }
    return doc


def lost_by_host(raw: RawRun) -> list[str]:
    """One line per swarm node whose nodes were lost (their final status ``lost: …``, or a stop
    that a host going down gives its containers: ``signal``): the host, those nodes, and the
    others it ran.

    A node with no final report at all, on a host that lost others, is lost with them: the first
    loss ends the run, and a node whose connection died without a word is declared lost only once
    the broker's keepalive runs out, which can be after the run's end (CI on 7 Dec: lab3 lost five
    nodes, three declared in time, two silent). A node of that host that did report (it answered
    the run's stop before its host went, for one) is named too, as one the host also ran: whoever
    reads the line learns every node the lost host held, and which of them the run lost."""
    held: dict[tuple[str, str], list[Coord]] = {}
    for node, where in sorted(raw.placement.items()):
        held.setdefault(where, []).append(node)
    lines = []
    for (name, hid), nodes in sorted(held.items()):
        status = [raw.node_status.get(n) for n in nodes]
        if not any(s is not None and _gone(s) for s in status):
            continue
        lost = [n for n, s in zip(nodes, status, strict=True) if s is None or _gone(s)]
        also = [n for n in nodes if n not in lost]
        line = f"swarm node {name} ({hid[:12]}) lost {len(lost)} node(s): " + coords_text(lost)
        lines.append(line + (f"; it also ran {coords_text(also)}" if also else ""))
    return lines


def _gone(status: str) -> bool:
    """A final status that says the node went with its host."""
    return status.startswith("lost") or "signal" in status


@dataclass
class SwarmRun:
    """One stack of a plan: write, check, deploy, coordinate, collect, remove (always)."""

    plan: Plan
    settings: RunSettings
    workdir: Path
    run_id: str = field(default_factory=lambda: "s" + secrets.token_hex(4))
    log: Callable[[str], None] | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    credentials: Credentials = field(default_factory=Credentials.generate)
    timings: dict[str, float] = field(default_factory=dict)
    placement: dict[Coord, tuple[str, str]] = field(default_factory=dict)
    """Where each node's task ran: (swarm node host name, swarm node ID)."""
    failure: str | None = None
    """Why the stack never ran its coordinator to the end (a deploy that failed or timed out)."""
    host_names: dict[str, str] = field(default_factory=dict)
    """Swarm node ID → host name, as :meth:`check` found them (IDs and names do not change)."""

    @property
    def stack(self) -> str:
        return f"meshcast-{self.run_id}"

    @property
    def image(self) -> str:
        return self.env.get("MESHCAST_IMAGE", DEFAULT_IMAGE)

    @property
    def coordinator(self) -> str:
        return f"{self.stack}-coordinator"

    def say(self, text: str) -> None:
        if self.log is not None:
            self.log(text)

    # -- before ------------------------------------------------------------------------------
    def check(self) -> list[SwarmHost]:
        """The swarm's hosts, once the engine is a manager and the image is the same everywhere
        it can be checked (UsageError naming the host and both ids otherwise)."""
        _check_manager(self.env)
        self.env.setdefault("MESHCAST_BROKER_IMAGE", self.image)  # no registry: the image has mosquitto
        mine = _docker(["image", "inspect", "--format", "{{.Id}}", self.image], self.env)
        if mine.returncode != 0:
            raise UsageError(f"image {self.image} is not on the manager's engine: build it (make image)")
        want = mine.stdout.strip()
        hosts = swarm_hosts(self.env)
        self.host_names = {h.id: h.hostname for h in hosts}
        checked: set[str] = set()
        for endpoint in filter(None, (e.strip() for e in self.env.get(HOSTS_ENV, "").split(","))):
            env = {**self.env, "DOCKER_HOST": endpoint}
            who = _docker(["info", "--format", "{{.Swarm.NodeID}} {{.Name}}"], env)
            if who.returncode != 0:
                raise UsageError(f"{HOSTS_ENV}: cannot reach {endpoint}: {who.stderr.strip()[:200]}")
            node_id, _, name = who.stdout.strip().partition(" ")
            got = _docker(["image", "inspect", "--format", "{{.Id}}", self.image], env)
            have = got.stdout.strip() if got.returncode == 0 else "absent"
            if have != want:
                raise UsageError(
                    f"image {self.image} on swarm node {name} ({node_id[:12]}, {endpoint}) is {have[:19]},"
                    f" the coordinator's is {want[:19]}: docker save {self.image} | docker -H {endpoint} load"
                )
            checked.add(node_id)
        unchecked = [h.name() for h in hosts if h.usable and h.id not in checked]
        if unchecked:
            self.say(
                f"image not checked on {', '.join(unchecked)} (name their Docker endpoints in {HOSTS_ENV});"
                " a host without it fails its nodes' tasks"
            )
        return hosts

    def write(self, hosts: Sequence[SwarmHost]) -> Path:
        """The run directory: stack.yaml, plan.json, mosquitto.conf, results/ and the credentials."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "results").mkdir(exist_ok=True)
        (self.workdir / "plan.json").write_text(plan_to_json(self.plan))
        conf = (repo_root() / "deploy" / "mosquitto.conf").read_text()
        (self.workdir / "mosquitto.conf").write_text(authenticated_broker_conf(conf))
        write_auth_files(self.workdir, self.credentials)
        placement = self.env.get(PLACEMENT_ENV, "blocks")
        try:
            constraints = place(self.plan.topology, hosts, placement)
        except ValueError as exc:
            raise UsageError(f"{PLACEMENT_ENV}: {exc}") from None
        doc = stack_document(self.plan.topology, self.run_id, constraints=constraints, directory=self.workdir)
        path = self.workdir / "stack.yaml"
        path.write_text(render_yaml(doc, f"meshcast swarm run {self.run_id} (generated)"))
        broker = {**doc, "services": {"broker": doc["services"]["broker"]}}  # deployed first
        (self.workdir / "broker.yaml").write_text(
            render_yaml(broker, f"meshcast swarm run {self.run_id}: its broker")
        )
        return path

    # -- running -----------------------------------------------------------------------------
    async def _run(self, args: list[str], logname: str, timeout: float) -> int:
        with (self.workdir / logname).open("ab") as logf, trio.move_on_after(timeout) as scope:
            p = await trio.run_process(args, stdout=logf, stderr=subprocess.STDOUT, check=False, env=self.env)
            return int(p.returncode)
        if scope.cancelled_caught:
            raise TimeoutError(
                f"{' '.join(args[:4])} ... took over {timeout:g} s; see {self.workdir / logname}"
            )
        return 1

    async def deploy(self) -> None:
        """``docker stack deploy`` the broker, wait until it runs, then the nodes, and wait until every
        task runs; records the placement. The broker goes first, as compose's ``depends_on`` has it
        (a stack ignores that): nodes that reached for it while its container was starting had their
        first sessions taken over, and the coordinator heard their wills as losses."""
        t0 = time.perf_counter()
        for name, tasks in (("broker.yaml", 1), ("stack.yaml", self.plan.topology.size + 1)):
            args = ["docker", "stack", "deploy", "--resolve-image", "never", "-c", str(self.workdir / name),
                    self.stack]  # fmt: skip
            if await self._run(args, "stack.log", START_BUDGET) != 0:
                raise RuntimeError(f"docker stack deploy failed; see {self.workdir / 'stack.log'}")
            await self._wait_running(tasks, START_BUDGET - (time.perf_counter() - t0))
        self.timings["deploy_s"] = time.perf_counter() - t0
        self.say(f"stack {self.stack}: running in {self.timings['deploy_s']:.1f} s")

    async def _wait_running(self, expected: int, budget: float) -> None:
        """Until ``expected`` tasks of the stack run; RuntimeError on a task that failed, TimeoutError
        after ``budget`` s."""
        with trio.move_on_after(max(budget, 1.0)):
            while True:
                tasks = await trio.to_thread.run_sync(self._tasks)
                failed = [t for t in tasks if t["state"] in ("failed", "rejected", "orphaned")]
                if failed:
                    t = failed[0]
                    raise RuntimeError(f"task of {t['service']} {t['state']} on {t['host']}: {t['error']}")
                if len(tasks) == expected and all(t["state"] == "running" for t in tasks):
                    return
                await trio.sleep(POLL)
        raise TimeoutError(f"the stack's tasks were not all running within {START_BUDGET:g} s")

    def _tasks(self) -> list[dict[str, str]]:
        """The stack's tasks: service, state, host name and ID, error; fills :attr:`placement`."""
        ids = _docker(
            ["stack", "ps", "-q", "--no-trunc", "--filter", "desired-state=running", self.stack], self.env
        )
        if ids.returncode != 0 or not ids.stdout.split():
            return []
        p = _docker(["inspect", "--type", "task", *ids.stdout.split()], self.env)
        if p.returncode != 0:
            return []
        names = self.host_names
        services = {s["ID"]: s["Spec"]["Name"] for s in self._services()}
        out = []
        for t in json.loads(p.stdout):
            service = services.get(t.get("ServiceID", ""), "?").removeprefix(self.stack + "_")
            node_id = t.get("NodeID", "")
            host = names.get(node_id, "?")
            out.append({"service": service, "state": t["Status"]["State"], "host": host,
                        "error": t["Status"].get("Err", "")})  # fmt: skip
            if service.startswith("node-") and node_id:
                x, y = (int(v) for v in service[5:].split("-"))
                self.placement[(x, y)] = (host, node_id)
        return out

    def _services(self) -> list[dict[str, Any]]:
        ids = _docker(
            ["service", "ls", "-q", "--filter", f"label=com.docker.stack.namespace={self.stack}"], self.env
        )
        if ids.returncode != 0 or not ids.stdout.split():
            return []
        p = _docker(["service", "inspect", *ids.stdout.split()], self.env)
        return list(json.loads(p.stdout)) if p.returncode == 0 else []

    async def coordinate(self) -> int:
        """Run the coordinator on this engine, joined to the overlay; its exit status."""
        budget = self.settings.wall_budget + START_BUDGET
        env_args = [a for k, v in settings_env(self.settings).items() for a in ("-e", f"{k}={v}")]
        args = [
            "docker", "run", "-d", "--name", self.coordinator, "--network", f"{self.stack}_{NETWORK}",
            "--env-file", str(self.workdir / AuthFiles().env_file), *env_args,
            "-u", f"{os.getuid()}:{os.getgid()}",
            "-v", f"{self.workdir / 'results'}:/results",
            "-v", f"{self.workdir / 'plan.json'}:/meshcast-run/plan.json:ro",
            self.image, "meshcast", "coordinate", "--plan", "/meshcast-run/plan.json",
            "--broker", "mqtt://broker:1883", "--run-id", self.run_id, "--out", "/results",
        ]  # fmt: skip
        if await self._run(args, "coordinator.log", 120) != 0:
            raise RuntimeError(
                f"the coordinator container did not start; see {self.workdir / 'coordinator.log'}"
            )
        t0 = time.perf_counter()
        try:
            with trio.fail_after(budget):
                waited = await trio.run_process(["docker", "wait", self.coordinator], capture_stdout=True,
                                                check=False, env=self.env)  # fmt: skip
        except trio.TooSlowError:
            raise TimeoutError(f"the coordinator did not finish within {budget:g} s") from None
        finally:
            self.timings["coordinate_s"] = time.perf_counter() - t0
            with trio.CancelScope(shield=True):
                await self._run(["docker", "logs", self.coordinator], "coordinator.log", 60)
        try:
            return int(waited.stdout.decode().strip())
        except ValueError:
            return -1

    async def stop_coordinator(self) -> None:
        """SIGTERM the coordinator (10 s), so that it writes what it has."""
        try:
            await self._run(["docker", "stop", "-t", "10", self.coordinator], "coordinator.log", 60)
        except TimeoutError as exc:
            self.say(f"stopping the coordinator: {exc}")

    async def down(self) -> None:
        """Remove the coordinator, the stack and its network (also after Ctrl-C), then the credentials."""
        with trio.CancelScope(shield=True):
            try:
                await self._run(["docker", "rm", "-f", self.coordinator], "stack.log", 60)
                await self._run(["docker", "stack", "rm", self.stack], "stack.log", 120)
                with trio.move_on_after(60):  # the network goes once the tasks are gone
                    while await trio.to_thread.run_sync(self._network_left):
                        await trio.sleep(POLL)
            except TimeoutError as exc:
                self.say(f"teardown: {exc}")
            finally:
                remove_auth_files(self.workdir)

    def _network_left(self) -> bool:
        p = _docker(["network", "ls", "-q", "--filter", f"name={self.stack}_{NETWORK}"], self.env)
        return p.returncode == 0 and bool(p.stdout.strip())

    def collect(self, rc: int, *, interrupted: bool = False) -> RawRun:
        """The coordinator's raw results with the placement, the lost hosts named."""
        raw_path = self.workdir / "results" / "raw.json"
        if raw_path.exists():
            raw = raw_from_json(raw_path.read_text())
        elif self.failure is not None:
            raw = RawRun(incomplete=[self.failure])
        elif interrupted:
            raw = RawRun()
        else:
            raw = RawRun(incomplete=[f"the coordinator wrote no results (exit status {rc});"
                                     f" see {self.workdir}/coordinator.log"])  # fmt: skip
        raw.placement = dict(self.placement)
        if raw.incomplete:
            raw.incomplete.extend(lost_by_host(raw))
        return raw


async def run_swarm(
    plan: Plan,
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> RawRun:
    """Run ``plan`` as a stack on the swarm; the stack is removed on every exit path.

    A temporary run directory is removed after a complete run and kept (for its logs) otherwise.
    """
    if shutil.which("docker") is None:
        raise UsageError("the swarm runtime needs Docker: install docker.io")
    temporary = settings.run_dir is None
    workdir = Path(settings.run_dir or tempfile.mkdtemp(prefix="meshcast-swarm-"))
    run = SwarmRun(plan, settings, workdir.resolve(), log=log)
    hosts = await trio.to_thread.run_sync(run.check)
    run.write(hosts)
    rc_box: list[int] = []

    async def go() -> int:
        try:
            await run.deploy()
            rc_box.append(await run.coordinate())
        except (RuntimeError, TimeoutError) as exc:
            rc_box.append(-1)
            run.say(str(exc))
            run.failure = str(exc)
        finally:
            with trio.CancelScope(shield=True):
                if not rc_box:
                    await run.stop_coordinator()
                await run.down()
        return rc_box[0]

    return await collected(go, run.collect, plan, workdir, temporary, progress)
