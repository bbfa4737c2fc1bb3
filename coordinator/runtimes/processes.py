"""The ``processes`` runtime: one OS process per node, TCP links on loopback.

Each node is forked from a fork server that imported the node once (:mod:`.forkserver`), or,
with ``MESHCAST_NODE_LAUNCH=exec``, started as its own ``python -m node``.

Control goes over MQTT: the broker given with ``--broker``, or else a ``mosquitto`` started for
the run on a free loopback port, with a password generated for the run. Every child runs in
this coroutine's nursery, so every one of them is reaped on success, on failure and on Ctrl-C
(trio terminates, then kills, a child whose task is cancelled). Each child's log is kept in
the run directory (``settings.run_dir``, or a temporary one that is removed after a clean run).
"""

from __future__ import annotations

import errno
import getpass
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import trio

from coordinator.errors import Interrupted
from coordinator.runtimes.brokerauth import Credentials, write_password_file
from coordinator.runtimes.forkserver import ForkServer
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.session import Session
from coordinator.runtimes.signals import run_interruptible
from coordinator.workloads.plan import Plan
from node.topology import Coord, Topology
from node.transport.mqtt import (
    BrokerAddress,
    CoordinatorBus,
    keepalive_for,
    open_coordinator_bus,
    parse_broker,
)
from node.transport.tcp import peer_entry

__all__ = [
    "BrokerNotFound",
    "LocalBroker",
    "broker_conf",
    "free_port_block",
    "free_ports",
    "local_broker",
    "mosquitto_exe",
    "run_processes",
]

EXIT_GRACE: Final = 10.0
"""How long children may take to exit by themselves after the run before they are killed."""
LOST_EXIT_GRACE: Final = 1.0
"""The same once a node was declared lost: the run ends at once, the fork server reaps the rest."""
LOOPBACK: Final = "127.0.0.1"
REPORT_GRACE: Final = 15.0
"""How long the final report of a node whose process exited normally may take to arrive."""


class BrokerNotFound(RuntimeError):
    """No ``--broker`` was given and no ``mosquitto`` to start one."""


@dataclass(frozen=True, slots=True)
class LocalBroker:
    """A mosquitto started for one run: its address and the credentials the run uses."""

    address: BrokerAddress
    process: trio.Process

    @property
    def url(self) -> str:
        return f"mqtt://{self.address.host}:{self.address.port}"

    def env(self) -> dict[str, str]:
        return {
            "MESHCAST_MQTT_USER": self.address.username or "",
            "MESHCAST_MQTT_PASSWORD": self.address.password or "",
        }


def _ephemeral_low() -> int:
    """The first port the kernel gives outgoing connections (32768 if it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int, host: str = LOOPBACK) -> list[int]:
    """``n`` ports that are free now, below the ephemeral range (so no outgoing connection takes one)."""
    hi = _ephemeral_low() - 1
    lo = 10000
    if hi - lo < 2 * n:
        lo, hi = 1024, hi
    ports: list[int] = []
    tried: set[int] = set()
    rng = random.Random()
    start = rng.randrange(lo, max(lo + 1, hi - n))
    candidate = start
    while len(ports) < n:
        if len(tried) >= hi - lo:
            raise OSError(f"fewer than {n} free TCP ports on {host}")
        if candidate > hi:
            candidate = lo
        tried.add(candidate)
        with socket.socket() as s:
            try:
                s.bind((host, candidate))
                ports.append(candidate)
            except OSError:
                pass
        candidate += 1
    return ports


def free_port_block(n: int, host: str = LOOPBACK, *, tries: int = 50) -> int:
    """A base port such that ``base .. base + n - 1`` are all free now, below the ephemeral range
    (as :func:`free_ports`): for nodes that share one address and find each other's ports by
    arithmetic (the containers runtime's host networking). OSError when none is found."""
    hi = _ephemeral_low() - 1
    lo = 10000 if hi - 10000 > 2 * n else 1024
    if hi - lo < n:
        raise OSError(f"no room for {n} ports on {host} below the ephemeral range (from {hi + 1})")
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(lo, hi - n + 2)
        for port in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError as exc:
                    if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                        break
                    raise
        else:
            return base
    raise OSError(f"no {n} consecutive free TCP ports on {host} in {tries} tries")


_NO_BROKER: Final = (
    "the processes runtime needs an MQTT broker: give --broker mqtt://host:port, "
    "or install mosquitto (apt-get install mosquitto)"
)


def mosquitto_exe() -> str | None:
    """The mosquitto executable (Debian installs it in /usr/sbin, often not on PATH), or None."""
    return shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if os.access(p, os.X_OK)), None
    )


MAX_QUEUED = 100_000
"""QoS-1 messages mosquitto queues for one client (its default, 1,000, is below a run's burst)."""


def broker_conf(port: int, password_file: Path | None) -> str:
    """mosquitto.conf of a meshcast broker on loopback ``port``: password-protected when a
    password file is given, anonymous otherwise (loopback only, so access stays on this machine)."""
    # the coordinator's queue must hold a message from every node at once (1,024 step-dones or
    # final reports): mosquitto's default of 1,000 queued QoS-1 messages drops the rest silently
    lines = [f"listener {port} {LOOPBACK}", f"user {getpass.getuser()}", "persistence false",
             "set_tcp_nodelay true", f"max_queued_messages {MAX_QUEUED}",
             "log_dest stderr", "log_type error", "log_type warning"]  # fmt: skip
    if password_file is None:
        lines.append("allow_anonymous true")
    else:
        lines += ["allow_anonymous false", f"password_file {password_file}"]
    return "\n".join(lines) + "\n"


@asynccontextmanager
async def local_broker(
    workdir: Path, *, log: Callable[[str], None] | None = None
) -> AsyncIterator[LocalBroker]:
    """Start ``mosquitto`` on a free loopback port with a per-run password; stop it afterwards
    and remove its password file and config (also after a failure or a signal)."""
    exe = mosquitto_exe()
    if exe is None:
        raise BrokerNotFound(_NO_BROKER)
    workdir.mkdir(parents=True, exist_ok=True)
    creds = Credentials.generate()
    conf = workdir / "mosquitto.conf"
    pw = write_password_file(workdir / "mosquitto.passwd", creds)
    try:
        async with trio.open_nursery() as nursery:
            for _attempt in range(5):
                port = free_ports(1)[0]
                conf.write_text(broker_conf(port, pw))
                logf = (workdir / "mosquitto.log").open("ab")
                proc: trio.Process = await nursery.start(
                    partial(
                        trio.run_process,
                        [exe, "-c", str(conf)],
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        check=False,
                    )
                )
                if await _wait_listening(LOOPBACK, port, proc):
                    break
                logf.close()
            else:
                raise BrokerNotFound(f"mosquitto did not start; see {workdir / 'mosquitto.log'}")
            address = BrokerAddress(LOOPBACK, port, creds.user, creds.password)
            if log:
                log(f"started mosquitto on {LOOPBACK}:{port}")
            try:
                yield LocalBroker(address, proc)
            finally:
                nursery.cancel_scope.cancel()
                logf.close()
    finally:  # the per-run password must not outlive the run, nor the config naming it
        for name in ("mosquitto.passwd", "mosquitto.conf"):
            (workdir / name).unlink(missing_ok=True)


async def _wait_listening(host: str, port: int, proc: trio.Process, timeout: float = 10.0) -> bool:
    with trio.move_on_after(timeout):
        while proc.returncode is None:
            try:
                stream = await trio.open_tcp_stream(host, port)
            except OSError:
                await trio.sleep(0.05)
                continue
            await stream.aclose()
            return True
    return False


def _peers(topo: Topology, ports: dict[Coord, int]) -> Callable[[Coord], dict[str, Any]]:
    def peers(node: Coord) -> dict[str, Any]:
        return {p: peer_entry(LOOPBACK, ports[n]) for p, n in topo.neighbours(node).items()}

    return peers


Launch = Callable[[list[str], Path, str], Awaitable[int]]
"""Run one node with these ``python -m node`` arguments, its log there, under this name; its status."""


def _exec_launch(env: dict[str, str]) -> Launch:
    """Each node as ``python -m node``: a fresh interpreter per node (``MESHCAST_NODE_LAUNCH=exec``)."""

    async def launch(argv: list[str], logpath: Path, name: str) -> int:
        with logpath.open("wb") as logf:
            proc = await trio.run_process(
                [sys.executable, "-m", "node", *argv], env=env, stdout=logf, stderr=subprocess.STDOUT,
                check=False,
            )  # fmt: skip
        return proc.returncode

    return launch


def _fork_launch(server: ForkServer) -> Launch:
    """Each node forked from the fork server, which imported the node once (the default)."""

    async def launch(argv: list[str], logpath: Path, name: str) -> int:
        return await server.wait(await server.spawn(argv, str(logpath), name))

    return launch


@asynccontextmanager
async def _launcher(env: dict[str, str], workdir: Path) -> AsyncIterator[Launch]:
    """How this run starts its nodes: forked from a fork server unless ``MESHCAST_NODE_LAUNCH=exec``.

    The fork server runs in this context's nursery: it is terminated (and it terminates every
    node it forked) when the context ends, however it ends.
    """
    if os.environ.get("MESHCAST_NODE_LAUNCH", "fork") == "exec" or not hasattr(os, "fork"):
        yield _exec_launch(env)
        return
    async with trio.open_nursery() as nursery:
        with (workdir / "forkserver.log").open("wb") as logf:
            proc: trio.Process = await nursery.start(
                partial(
                    trio.run_process,
                    [sys.executable, "-m", "coordinator.runtimes.forkserver"],
                    env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf, check=False,
                    # its own session, so its own scheduler autogroup: with autogrouping on
                    # (Linux's default on desktops and many servers) CPU is shared between
                    # sessions first, and 1,024 nodes waking at once then cannot starve the
                    # broker and this coordinator into lost keep-alives
                    start_new_session=True,
                )
            )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        server = ForkServer(proc.stdin, proc.stdout)
        nursery.start_soon(server.pump)
        try:
            yield _fork_launch(server)
        finally:
            nursery.cancel_scope.cancel()


async def _child(
    node: Coord,
    argv: list[str],
    launch: Launch,
    logpath: Path,
    buses: list[CoordinatorBus],
    on_early_exit: Callable[[Coord, str], None],
) -> None:
    """Run one node process; if it dies without a final report, tell the session it is lost.

    ``buses``: the parts' coordinator buses so far (the last is the current part's).
    """
    returncode = await launch(argv, logpath, f"node {node[0]},{node[1]}")
    if not buses:  # it died before the first part's bus was up
        on_early_exit(node, f"its process exited with status {returncode} before the run began")
        return
    bus = buses[-1]
    # its final report may still be on its way through the broker (a node flushes before it exits)
    with trio.move_on_after(REPORT_GRACE if returncode == 0 else 2.0):
        await bus.wait_done(node)
    if node not in bus.done:
        tail = _tail(logpath)
        why = f"its process exited with status {returncode} before its final report" + (
            f" (last log line: {tail})" if tail else ""
        )
        bus.report_lost(node, why)
        on_early_exit(node, why)


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


async def run_processes(
    plan: Plan,
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
    *,
    log: Callable[[str], None] | None = None,
    timings: dict[str, float] | None = None,
) -> RawRun:
    """Run ``plan`` with one ``python -m node`` process per node; always reaps every child.

    ``timings``, if given, receives ``startup_s`` (launch to the first step), ``run_s`` and
    ``teardown_s``.
    """
    (raw,) = await run_processes_parts([(plan, settings)], settings, progress, log=log, timings=timings)
    return raw


async def run_processes_parts(
    parts: Sequence[tuple[Plan, RunSettings]],
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
    *,
    log: Callable[[str], None] | None = None,
    timings: dict[str, float] | None = None,
) -> list[RawRun]:
    """Run each plan of ``parts`` (with its settings) as a run of its own, one after another, on
    one set of node processes; their records, in order (up to the first incomplete one).

    With more than one part the nodes serve run after run (``--serve``), as a deployment's do:
    repetitions of a jitter measurement then meet warm nodes, not freshly started ones.
    ``settings`` holds what the parts share (runtime, broker, run directory, wall budget).
    """
    topo = parts[0][0].topology
    nodes = list(topo.nodes())
    run_id = "p" + secrets.token_hex(4)
    keep = settings.run_dir is not None
    workdir = Path(settings.run_dir or tempfile.mkdtemp(prefix="meshcast-processes-"))
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    sessions: list[Session] = []
    raws: list[RawRun] = []

    async def run() -> RawRun:
        async with _broker(settings.broker, workdir, log) as (address, broker_env):
            await _run(
                parts,
                settings,
                progress,
                nodes,
                run_id,
                address,
                broker_env,
                workdir,
                timings,
                sessions,
                raws,
            )
        return raws[-1]

    def partial() -> RawRun:
        return sessions[-1].partial() if sessions else RawRun()

    ok = False
    try:
        if settings.broker is None:
            _check_mosquitto()
        raw = await run_interruptible(run, partial)
        if len(raws) < len(parts) or raws[-1] is not raw:  # interrupted in a part: keep what it has
            raws.append(raw)
        ok = not raw.incomplete
        if not ok and not keep:
            raw.incomplete.append(f"node logs kept in {workdir / 'logs'}")
        return raws
    except Interrupted:
        ok = True  # every child is reaped: nothing in the temporary directory is worth keeping
        raise
    except Exception as exc:  # a crash: the logs stay, and the traceback says where
        exc.add_note(f"meshcast: node logs kept in {workdir / 'logs'}")
        raise
    finally:
        if ok and not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _check_mosquitto() -> None:
    """Fail early, as a one-line CLI error, when no broker can be started."""
    from coordinator.errors import UsageError

    if mosquitto_exe() is None:
        raise UsageError(str(BrokerNotFound(_NO_BROKER)))


@asynccontextmanager
async def _broker(
    url: str | None, workdir: Path, log: Callable[[str], None] | None
) -> AsyncIterator[tuple[BrokerAddress, dict[str, str]]]:
    if url:
        yield parse_broker(url), {}
        return
    async with local_broker(workdir, log=log) as broker:
        yield broker.address, broker.env()


async def _run(
    parts: Sequence[tuple[Plan, RunSettings]],
    settings: RunSettings,
    progress: Callable[[int, int], None] | None,
    nodes: list[Coord],
    run_id: str,
    address: BrokerAddress,
    broker_env: dict[str, str],
    workdir: Path,
    timings: dict[str, float] | None,
    sessions: list[Session],
    raws: list[RawRun],
) -> None:
    """Start the nodes, run each part on them (a coordinator bus and a session each), reap them."""
    topo = parts[0][0].topology
    serve = len(parts) > 1
    t0 = time.perf_counter()
    ports = dict(zip(nodes, free_ports(len(nodes)), strict=True))
    env = dict(os.environ, **broker_env, PYTHONUNBUFFERED="1")
    # the coordinator waits for every node before the next step of the handshake: with
    # hundreds of nodes starting on few cores, the first ones wait longer than a node's default
    env.setdefault("MESHCAST_HANDSHAKE_TIMEOUT", str(max(60.0, settings.wall_budget)))
    # and when all of them wake at once (the run's end), a node may wait seconds for a core:
    # a keep-alive of a second per 64 nodes keeps the broker from cutting off the slow ones
    env.setdefault("MESHCAST_MQTT_KEEPALIVE", str(keepalive_for(len(nodes))))
    url = f"mqtt://{address.host}:{address.port}"
    early: list[str] = []
    buses: list[CoordinatorBus] = []
    """The current part's bus (a node that dies is reported there)."""
    total = sum(len(m.destinations) for plan, _ in parts for m in plan.multicasts)
    done = 0
    with trio.CancelScope() as startup_failed:

        def on_early_exit(node: Coord, why: str) -> None:
            early.append(f"node ({node[0]},{node[1]}): {why}")
            if not buses or (len(buses) == 1 and buses[0].broadcasts == 0):
                startup_failed.cancel()  # before the first plan went out: the run cannot start at all

        async with _launcher(env, workdir) as launch, trio.open_nursery() as children:
            for n in nodes:
                argv = ["--broker", url, "--run-id", run_id, "--node", f"{n[0]},{n[1]}",
                        "--listen", f"{LOOPBACK}:{ports[n]}"]  # fmt: skip
                argv += ["--serve"] if serve else ["--wait", str(settings.wall_budget)]
                logpath = workdir / "logs" / f"node-{n[0]}-{n[1]}.log"
                children.start_soon(_child, n, argv, launch, logpath, buses, on_early_exit)
            for plan, part_settings in parts:
                base = done

                def part_progress(reached: int, _total: int, base: int = base) -> None:
                    if progress is not None:
                        progress(base + reached, total)

                # a lease never shorter than the nodes' keep-alive: hundreds of them share few cores
                lease = max(part_settings.lease, keepalive_for(len(nodes)))
                async with open_coordinator_bus(address, run_id, lease=lease) as bus:
                    buses.append(bus)
                    session = Session(
                        plan, part_settings, bus.send_to, bus.broadcast, bus.inbox,
                        peers=_peers(topo, ports), progress=part_progress, run_id=run_id, epoch=bus.epoch,
                    )  # fmt: skip
                    sessions.append(session)
                    raw = await session.run(set(nodes))
                    raws.append(raw)
                    if session.broker_gone:
                        bus.abandon()  # nothing queued can go now: don't wait on it
                    t1 = time.perf_counter()
                    if not serve:
                        # a node declared lost may hang (SIGSTOP): its fellows had their stop; end now
                        with trio.move_on_after(LOST_EXIT_GRACE if session.lost else EXIT_GRACE):
                            while not all(n in bus.done for n in nodes):
                                await trio.sleep(0.05)
                            await _children_exited(children)
                    else:  # every final report in before the bus goes (the nodes then wait for the next)
                        with trio.move_on_after(LOST_EXIT_GRACE if session.lost else EXIT_GRACE):
                            while not all(n in bus.done for n in nodes):
                                await trio.sleep(0.05)
                done += sum(len(m.destinations) for m in plan.multicasts)
                if raw.incomplete:
                    break
            children.cancel_scope.cancel()
    if timings is not None and not startup_failed.cancelled_caught and raws:
        timings.update(
            startup_s=t1 - t0 - sum(r.wall_s for r in raws), run_s=sum(r.wall_s for r in raws),
            teardown_s=time.perf_counter() - t1,
        )  # fmt: skip
    if startup_failed.cancelled_caught:
        raw = sessions[-1].collector.raw if sessions else RawRun()
        raw.incomplete.append("a node process failed before the run started: " + "; ".join(early[:3]))
        if not raws or raws[-1] is not raw:
            raws.append(raw)


async def _children_exited(children: trio.Nursery) -> None:
    while children.child_tasks:
        await trio.sleep(0.05)
