"""Deployment commands of the ``meshcast`` CLI: ``node``, ``compose`` and ``coordinate``.

* ``meshcast node``: one node process (the same as ``python -m node``).
* ``meshcast compose --topology torus:4x4 [experiment options] > compose.yaml``: the compose
  file of a containers deployment (see :mod:`coordinator.runtimes.containers`).
* ``meshcast coordinate``: the coordinator of a deployment whose nodes were started by
  someone else (the compose file's ``coordinator`` service): it runs the experiment over the
  broker and writes run.json, the CSVs and raw.json into ``--out``.
* ``meshcast deploy`` / ``deployments`` / ``destroy``: long-lived deployments that serve run
  after run (``meshcast run --deployment NAME``; :mod:`coordinator.runtimes.deployments`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.result_types import RunResult
from coordinator.cli.options import add_run_options, settings_from, topology_from
from coordinator.cli.run_command import plan_from
from coordinator.errors import Interrupted
from coordinator.runtimes import registry as runtimes
from coordinator.runtimes.containers import SETTINGS_ENV
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.wording import plural
from coordinator.workloads.plan import Plan
from node.topology import Coord, Topology

__all__ = ["COMMANDS", "add_command", "coordinate", "deployment_peers"]


def _experiment_options(p: argparse.ArgumentParser, *, topology_required: bool) -> None:
    p.add_argument("--topology", required=topology_required, help="mesh:MxN or torus:MxN")
    p.add_argument("--algorithm", "--algorithms", default="vh", help="algorithm name(s), comma-separated")
    p.add_argument("--source", default=None, help="x,y")
    p.add_argument("--dests", default=None, help="destinations, e.g. '4,6 6,6 0,2'")
    p.add_argument("--random-dests", type=int, default=None, metavar="K", help="K random destinations")
    p.add_argument("--repeat", type=int, default=1, help="repetitions (new random sets with --random-dests)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="algorithm parameter")
    p.add_argument("--trace", action="store_true", help="record every link traversal")
    add_run_options(p, network=False)  # the file's network is its own (a compose network)


def add_command(sub: Any) -> None:
    """Register ``node``, ``compose`` and ``coordinate`` on the CLI's subparsers."""
    from node.__main__ import add_node_arguments

    node = sub.add_parser("node", help="run one node process (as in a container); same as python -m node")
    add_node_arguments(node)
    comp = sub.add_parser(
        "compose",
        help="print a docker compose file: broker, one node-X-Y service per node, and a coordinator",
    )
    _experiment_options(comp, topology_required=True)
    comp.add_argument("--run-id", default="compose", help="MQTT topic namespace of the deployment")
    comp.add_argument(
        "--swarm",
        action="store_true",
        help="add the deploy keys docker stack deploy needs (see docs/deploy.md)",
    )
    coord = sub.add_parser("coordinate", help="coordinate nodes started elsewhere (the compose coordinator)")
    _experiment_options(coord, topology_required=False)
    coord.add_argument(
        "--plan", default=None, help="a plan.json (instead of --topology and experiment options)"
    )
    coord.add_argument("--run-id", required=True, help="MQTT topic namespace of the deployment")
    coord.add_argument(
        "--settings",
        default=os.environ.get(SETTINGS_ENV),
        metavar="JSON",
        help=f"the run's settings in their wire form (env {SETTINGS_ENV}; a compose file's): they "
        "replace the run options",
    )
    coord.add_argument("--out", default="results", help="directory for run.json, CSVs and raw.json")
    coord.add_argument(
        "--by-run-id",
        action="store_true",
        help="write into OUT/RUN-ID/ (OUT/RUN-ID-2/, ... when that holds earlier results): never clobber",
    )
    coord.add_argument("--node-host", default="node-{x}-{y}", help="host name pattern of the nodes")
    coord.add_argument(
        "--node-port",
        type=int,
        default=7000,
        help="TCP port every node listens on (the first, with --port-per-node)",
    )
    coord.add_argument(
        "--port-per-node",
        action="store_true",
        help="node (x, y) listens on NODE_PORT + x*rows + y (nodes sharing one host's network)",
    )
    dep = sub.add_parser(
        "deploy",
        help="bring up a long-lived deployment (broker and nodes) that serves run after run",
        description="Start a broker and one serving node per node of TOPOLOGY, detached, and return. "
        "Then: meshcast run --deployment NAME ...; meshcast deployments; meshcast destroy NAME.",
    )
    dep.add_argument("--name", default=None, help="the deployment's name (lower-case letters, digits, - _)")
    dep.add_argument("--topology", default=None, help="mesh:MxN or torus:MxN")
    dep.add_argument(
        "--repair",
        default=None,
        metavar="NAME",
        help="start again the nodes of deployment NAME that are gone ('meshcast deployments' names them)",
    )
    dep.add_argument(
        "--runtime",
        choices=runtimes.deployable(),
        default=runtimes.deployable()[0],
        help="; ".join(f"{name}: {runtimes.get(name).summary}" for name in runtimes.deployable()),
    )
    sub.add_parser("deployments", help="list the long-lived deployments: runtime, topology, nodes alive, age")
    des = sub.add_parser("destroy", help="tear a deployment down: processes, containers, networks, state")
    des.add_argument("name", help="the deployment's name")


def _plan(args: argparse.Namespace) -> Plan:
    from coordinator.errors import UsageError

    if getattr(args, "plan", None):
        from coordinator.runtimes.containers import plan_from_json

        try:
            return plan_from_json(Path(args.plan).read_text())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--plan {args.plan}: {exc}") from None
    if not args.topology:
        raise UsageError("give --topology (and experiment options) or --plan FILE")
    return plan_from(args, topology_from(args.topology))


def _experiment_argv(args: argparse.Namespace) -> list[str]:
    """The experiment options as given, for the compose file's coordinator command."""
    out = ["--topology", args.topology, "--algorithm", args.algorithm]
    for flag, value in (("--source", args.source), ("--dests", args.dests)):
        if value is not None:
            out += [flag, value]
    if args.random_dests is not None:
        out += ["--random-dests", str(args.random_dests)]
    out += ["--repeat", str(args.repeat)]
    for p in args.param:
        out += ["--param", p]
    return out


def cmd_compose(args: argparse.Namespace) -> int:
    from coordinator.errors import UsageError
    from coordinator.runtimes.containers import compose_document, render_yaml, repo_root, settings_env
    from node.transport.mqtt import topic_root

    topo = topology_from(args.topology)
    _plan(args)  # validate every experiment option before writing anything
    settings = settings_from(args, topo, probe_broker=False, trace=args.trace)
    try:
        topic_root(args.run_id)
    except ValueError as exc:
        raise UsageError(f"--run-id: {exc}") from None
    # compose reads a relative path from the file's folder: the file is meant to be written where
    # this command runs (the guide's `> my-compose.yaml`), so the source tree is found from there
    root = os.path.relpath(repo_root(), Path.cwd())
    doc = compose_document(
        topo,
        [*_experiment_argv(args), "--by-run-id"],
        run_id=args.run_id,
        swarm=args.swarm,
        coordinator_env=settings_env(settings),
        build_context=root,
        mosquitto_conf=("." if root == "." else root) + "/deploy/mosquitto.conf",
    )
    given = " ".join(_experiment_argv(args))
    header = (
        "meshcast deployment: broker, coordinator, one service per node; generated by\n"
        f"  meshcast compose {given}\n"
        "  (its paths are relative to the folder it was generated in: keep the file there)\n"
        "  (the run's settings: the coordinator's MESHCAST_SETTINGS, what differs from the defaults)\n"
        "Run (FILE: where you wrote this; compose v1: docker-compose for docker compose):\n"
        "  docker compose -f FILE build && \\\n"
        "  docker compose -f FILE up --abort-on-container-exit --exit-code-from coordinator\n"
        "Offline (no registry): deploy/build-offline-image.sh, then run with\n"
        "  MESHCAST_BROKER_IMAGE=meshcast-local/meshcast:latest (it has mosquitto)\n"
        "Results owned by you rather than root: mkdir -p results, and run with\n"
        "  MESHCAST_USER=$(id -u):$(id -g)\n"
        f"Results: ./results/{args.run_id}/ (run.json, multicasts.csv, arrivals.csv, raw.json;\n"
        f"  ./results/{args.run_id}-2/ and so on for later runs: earlier results are kept)\n"
        f"Tear down (else the exited containers and the network stay):\n  {TEARDOWN}"
    )
    sys.stdout.write(render_yaml(doc, header))
    return 0


def deployment_peers(
    topo: Topology, node_host: str, node_port: int, *, port_per_node: bool = False
) -> Callable[[Coord], dict[str, Any]]:
    """Each node's ``peers`` (port → where its neighbour listens) in a deployment whose nodes are
    named by ``node_host`` (``{x}``, ``{y}``) and listen on ``node_port`` (or, ``port_per_node``,
    that plus their id: nodes sharing the host's network)."""
    from coordinator.runtimes.containers import node_port as link_port
    from node.transport.tcp import peer_entry

    def peers(n: Coord) -> dict[str, Any]:
        return {
            p: peer_entry(
                node_host.format(x=m[0], y=m[1]), link_port(node_port, topo, m, per_node=port_per_node)
            )
            for p, m in topo.neighbours(n).items()
        }

    return peers


async def coordinate(
    plan: Plan,
    settings: RunSettings,
    broker: str,
    run_id: str,
    *,
    node_host: str = "node-{x}-{y}",
    node_port: int = 7000,
    port_per_node: bool = False,
    log: Callable[[str], None] | None = None,
    done: Callable[[RawRun], None] | None = None,
) -> RawRun:
    """Run ``plan`` over ``broker`` with nodes that announce themselves there.

    ``port_per_node``: node (x, y) listens on ``node_port + x * rows + y`` (host networking).
    ``done`` (e.g. writing the results) runs before the coordinator leaves the broker: the
    nodes of a compose deployment wait for that, so nothing stops the coordinator first.
    """
    from coordinator.runtimes.session import Session
    from coordinator.runtimes.signals import run_interruptible
    from node.transport.mqtt import keepalive_for, open_coordinator_bus

    topo = plan.topology

    peers = deployment_peers(topo, node_host, node_port, port_per_node=port_per_node)

    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if log is not None and (now - last[0] > 2 or done == total):
            last[0] = now
            log(f"{done}/{total} deliveries")

    sessions: list[Session] = []

    async def body() -> RawRun:
        async with open_coordinator_bus(
            broker,
            run_id,
            connect_timeout=settings.wall_budget,
            log=log,
            lease=max(settings.lease, keepalive_for(topo.size)),
        ) as bus:
            if log:
                log(f"on the broker {broker}, run {run_id}: waiting for {topo.size} nodes")
            session = Session(
                plan,
                settings,
                bus.send_to,
                bus.broadcast,
                bus.inbox,
                peers=peers,
                progress=progress,
                run_id=run_id,
                epoch=bus.epoch,
            )
            sessions.append(session)
            raw = await session.run(set(topo.nodes()))
            if done is not None:
                done(raw)
            return raw

    # SIGTERM (`docker stop`) or SIGINT: what has arrived, marked interrupted, as Interrupted.partial.
    # Needed in a container above all: there the coordinator is PID 1, which ignores a SIGTERM it
    # has no handler for, and `docker stop` would kill it 10 s later with nothing written.
    return await run_interruptible(body, lambda: sessions[0].collector.raw if sessions else RawRun())


def _wire_settings(text: str, broker: str, trace: bool) -> RunSettings:
    """The settings of ``--settings`` (their wire form as JSON), checked as a node checks its
    ``assign``, then as the command line checks its options; a UsageError naming what is wrong."""
    import json

    from coordinator.cli.options import validate_settings
    from coordinator.errors import UsageError
    from node.protocol import ProtocolError

    try:
        settings = RunSettings.from_wire(json.loads(text))
    except (json.JSONDecodeError, ProtocolError) as exc:
        raise UsageError(f"--settings: {exc}") from None
    given = dataclasses.replace(settings, runtime="containers", broker=broker, trace=settings.trace or trace)
    return validate_settings(given)


def cmd_coordinate(args: argparse.Namespace) -> int:
    from coordinator.errors import UsageError
    from coordinator.experiments.run import run_result
    from coordinator.output.results import atomic_write, write_run
    from coordinator.runtimes.containers import raw_to_json

    plan = _plan(args)
    if not args.broker:
        raise UsageError("coordinate needs --broker mqtt://host:port")
    if args.settings is not None:
        settings = _wire_settings(args.settings, args.broker, args.trace)
    else:
        settings = settings_from(args, probe_broker=False, trace=args.trace)
    settings = dataclasses.replace(settings, runtime="containers")

    def log(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} coordinator: {text}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    out = run_dir(Path(args.out), args.run_id) if args.by_run_id else Path(args.out)
    results: list[RunResult] = []

    def write(raw: RawRun) -> None:
        result = run_result(plan, settings, raw)
        # when the first step began: containers share the host's clock, so the host can time start-up
        started = dataclasses.replace(
            result.run,
            started_at_unix=round(time.time() - raw.wall_s, 3),
            coordinator_startup_s=round(time.perf_counter() - t0 - raw.wall_s, 3),
        )
        result = dataclasses.replace(result, run=started)
        write_run(out, result)
        atomic_write(out / "raw.json", raw_to_json(raw))
        results.append(result)

    try:
        run = partial(
            coordinate, node_host=args.node_host, node_port=args.node_port, port_per_node=args.port_per_node,
            log=log, done=write,
        )  # fmt: skip
        raw = trio.run(run, plan, settings, args.broker, args.run_id)
    except ConnectionError as exc:
        log(str(exc))
        return 1
    except Interrupted as exc:
        if isinstance(exc.partial, RawRun):
            write(exc.partial)
        log(f"{exc}: what had arrived is in {out}")
        return 128 + exc.signum
    result = results[0]
    info = result.run
    status = "complete" if info.complete else "INCOMPLETE: " + "; ".join(info.incomplete)
    steps_s = info.steps / raw.wall_s if raw.wall_s > 0 else 0.0
    log(f"{info.steps} steps in {raw.wall_s:.2f} s ({steps_s:.0f} steps/s), {status}; results in {out}")
    log(summary_line(result))
    if args.by_run_id:  # a compose file of `meshcast compose`, run by hand (a run tears its own down)
        log(f"tear down: {TEARDOWN}")
    return 0 if info.complete else 1


TEARDOWN = (
    "docker compose -f FILE down -v --remove-orphans   (FILE: the compose file; compose v1: docker-compose)"
)
"""How a compose experiment is removed once its coordinator has exited."""


def summary_line(result: RunResult) -> str:
    """One line of what a run found: multicasts, destinations reached, mean latency and CV (each
    mean where there is one)."""
    mcs = result.multicasts
    wanted = sum(len(m.destinations) for m in mcs)
    reached = wanted - sum(len(m.missing) for m in mcs)
    parts = [f"{plural(len(mcs), 'multicast')}, {reached} of {wanted} destinations reached"]
    time_mean, cv_mean = result.summary.time.mean, result.summary.cv.mean
    if time_mean is not None and result.run.clock == "lockstep":
        parts.append(f"mean latency {time_mean:.3g} steps")
    if cv_mean is not None:
        parts.append(f"node-level CV {cv_mean:.3g}")
    return "; ".join(parts)


def run_dir(root: Path, run_id: str) -> Path:
    """``root/run_id``, or the first of ``root/run_id-2``, ``-3``, ... that holds no results yet."""
    candidate, n = root / run_id, 1
    while candidate.is_dir() and any(candidate.iterdir()):
        n += 1
        candidate = root / f"{run_id}-{n}"
    return candidate


def cmd_node(args: argparse.Namespace) -> int:
    from node.__main__ import node_main

    return node_main(args)


def _say(text: str) -> None:
    print(f"meshcast: {text}", file=sys.stderr)


def cmd_deploy(args: argparse.Namespace) -> int:
    """``meshcast deploy``: start broker and nodes, detached, record them, return."""
    from coordinator.cli.options import check_nodes
    from coordinator.errors import UsageError
    from coordinator.runtimes import deployments

    if args.repair is not None:
        if args.name is not None or args.topology is not None:
            raise UsageError("--repair NAME takes no --name or --topology: the deployment has them")
        gone = deployments.repair(args.repair, log=_say)
        if not gone:
            _say(f"deployment {args.repair}: every node is running; nothing to repair")
        return 0
    if args.name is None or args.topology is None:
        raise UsageError("deploy needs --name and --topology (or --repair NAME)")
    topo = topology_from(args.topology)
    check_nodes(topo, args.runtime)
    deployments.check_name(args.name)
    dep = deployments.deploy(args.runtime, args.name, topo, log=_say)
    print(f"{dep.name}: {dep.runtime}, {dep.topology}; run with: meshcast run --deployment {dep.name} ...")
    return 0


def _age(seconds: float) -> str:
    s = int(max(0.0, seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def cmd_deployments(args: argparse.Namespace) -> int:
    """``meshcast deployments``: one line per deployment."""
    from coordinator.runtimes import deployments

    rows = [("NAME", "RUNTIME", "TOPOLOGY", "NODES", "AGE", "GONE", "UNRESPONSIVE")]

    def named(parts: list[str]) -> str:
        return " ".join(n if n == "broker" else f"({n})" for n in parts[:8]) + (
            f" +{len(parts) - 8}" if len(parts) > 8 else ""
        )

    for d in deployments.list_deployments():
        alive, total = deployments.nodes_alive(d)
        broker = deployments.broker_alive(d)
        gone = ([] if broker else ["broker"]) + (deployments.nodes_gone(d) if alive < total else [])
        stuck = deployments.unresponsive(d) if broker else []  # (a gone broker is not asked)
        age = _age(time.time() - d.created)
        rows.append((d.name, d.runtime, d.topology, f"{alive}/{total}", age, named(gone), named(stuck)))
    widths = [max(len(r[i]) for r in rows) for i in range(7)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    """``meshcast destroy NAME``: tear it all down; nothing to do is not an error."""
    from coordinator.runtimes import deployments

    if not deployments.destroy(args.name, log=_say):
        _say(f"no deployment {args.name!r}: nothing to destroy")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "deploy": cmd_deploy,
    "deployments": cmd_deployments,
    "destroy": cmd_destroy,
    "node": cmd_node,
    "compose": cmd_compose,
    "coordinate": cmd_coordinate,
}
