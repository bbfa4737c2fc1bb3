"""``python -m node``: one meshcast node as its own process (or container).

It binds its link port, connects to the MQTT broker, waits for the run's coordinator, then
speaks the control protocol of :mod:`node.actor` over MQTT and its links over TCP
(:mod:`node.transport.tcp`). Coordinates come from ``--node x,y`` or ``MESHCAST_NODE``; everything else
has an environment variable too, so a compose file sets a node up with its environment alone.
It logs one line per state change to stderr. Exit status: 0 when the node finished its run
normally, 1 when it aborted or could not take part, 2 for bad arguments.

With ``--serve`` (``MESHCAST_SERVE=1``: a long-lived deployment, ``meshcast deploy``) the node
never exits by itself: after each run it waits for the coordinator of another run (another
epoch), and takes part in run after run on the same link port (a fresh broker
connection and a fresh :class:`node.actor.Node` per run, so every run's conversation starts
from the protocol's first phase).
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import trio

__all__ = ["add_node_arguments", "main", "node_main", "run_node", "serve_node"]

PRESENCE_WAIT = 600.0
"""How long a node waits for its coordinator to show up on the broker."""
SERVE_RETRY = 1.0
"""Serving: seconds before a node reconnects after it lost its broker between runs."""


def add_node_arguments(p: argparse.ArgumentParser) -> None:
    """The node's options (shared by ``python -m node`` and ``meshcast node``)."""
    env = os.environ.get
    p.add_argument("--broker", default=env("MESHCAST_BROKER"), help="mqtt://host:port (env MESHCAST_BROKER)")
    p.add_argument("--run-id", default=env("MESHCAST_RUN_ID"), help="the run's id (env MESHCAST_RUN_ID)")
    p.add_argument(
        "--node", default=env("MESHCAST_NODE"), help="this node's coordinates x,y (env MESHCAST_NODE)"
    )
    p.add_argument(
        "--listen",
        default=env("MESHCAST_LISTEN", "0.0.0.0:7000"),
        help="link listen address host:port (env MESHCAST_LISTEN, default 0.0.0.0:7000)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=env("MESHCAST_WAIT", str(PRESENCE_WAIT)),  # argparse applies type to it
        help="seconds to wait for the broker and the coordinator (env MESHCAST_WAIT)",
    )
    p.add_argument(
        "--linger",
        type=float,
        default=env("MESHCAST_LINGER", "0"),
        help="after its run, stay up to this many seconds until the coordinator has left (env"
        " MESHCAST_LINGER; compose sets it, so that no node exits before the coordinator has"
        " written its results: `up --abort-on-container-exit` stops everything at the first exit)",
    )
    p.add_argument(
        "--clock-host",
        default=env("MESHCAST_CLOCK_HOST") or None,
        metavar="NAME",
        help="the host name this node reports, which says whose clock its wall-clock timestamps are"
        " on (env MESHCAST_CLOCK_HOST; default: its own host name). Containers on one Docker engine"
        " share that machine's clock, so the containers runtime gives them all the engine's name",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        default=env("MESHCAST_SERVE", "") not in ("", "0"),
        help="serve run after run, never exit by itself (a long-lived deployment; env MESHCAST_SERVE=1)",
    )


def _log_line(text: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"{stamp} {text}", file=sys.stderr, flush=True)


def _parse(args: argparse.Namespace) -> tuple[str, str, tuple[int, int], str, int]:
    """Check the arguments; raise ValueError naming the first bad one."""
    from node.topology import parse_coord
    from node.transport.mqtt import parse_broker, topic_root

    if not args.broker:
        raise ValueError("no broker: give --broker mqtt://host:port or set MESHCAST_BROKER")
    parse_broker(args.broker)
    if not args.run_id:
        raise ValueError("no run id: give --run-id or set MESHCAST_RUN_ID")
    topic_root(args.run_id)
    if not args.node:
        raise ValueError("no coordinates: give --node x,y or set MESHCAST_NODE")
    here = parse_coord(args.node)
    if here[0] < 0 or here[1] < 0:
        raise ValueError(f"coordinates {args.node!r} must not be negative")
    host, sep, port_text = str(args.listen).rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise ValueError(f"--listen {args.listen!r}: expected host:port")
    if args.wait <= 0:
        raise ValueError(f"--wait must be positive, got {args.wait}")
    return args.broker, args.run_id, here, host or "0.0.0.0", int(port_text)


async def _one_run(
    broker: str,
    run_id: str,
    here: tuple[int, int],
    links: Any,
    log: Callable[[str], None],
    *,
    wait: float | None,
    linger: float,
    clock_host: str | None = None,
    finished: set[int] | None = None,
) -> int:
    """Take part in one run over a fresh broker connection; 0 if it finished normally.

    ``wait`` bounds the wait for the coordinator (None: a serving node waits as long as it
    takes); ``linger`` is how long to stay for the coordinator to leave afterwards;
    ``clock_host`` is the host the node reports (None: its own host name); ``finished``: the
    epochs of the runs this node took part in (it waits for a coordinator of another; the run's
    epoch is added). Once in a run, the node waits for its coordinator as long as the
    coordinator's lease holds: it leaves the run when the coordinator abandons it or goes silent.
    """
    from node.actor import Node
    from node.protocol import Phase
    from node.transport.mqtt import open_node_control

    seen = finished if finished is not None else set()
    async with open_node_control(
        broker, run_id, here, connect_timeout=wait or PRESENCE_WAIT, log=log, exclude=frozenset(seen)
    ) as control:
        log(f"connected to the broker {broker}, run {run_id}; waiting for the coordinator")
        with trio.move_on_after(math.inf if wait is None else wait) as waited:
            await control.coordinator_present()
        if waited.cancelled_caught:
            log(f"no coordinator for run {run_id} within {wait:g} s")
            return 1
        seen.add(control.epoch)
        node = Node(
            here, control, links.open, log=log, host=clock_host, epoch=control.epoch, patience=math.inf
        )

        def report(kind: str, cause: str) -> None:
            if node.engine is not None:
                node.engine.error(kind, cause)

        links.report = report
        with trio.CancelScope() as in_run:

            async def watch() -> None:
                why = await control.watch_lease()
                if node.phase != Phase.DONE:
                    log(f"leaving the run: {why}")
                    in_run.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                await node.run()
                nursery.cancel_scope.cancel()
        if in_run.cancelled_caught:
            return 1
        aborted = node.engine is not None and any(e.kind == "aborted" for e in node.engine.errors)
        if linger > 0:
            with trio.move_on_after(linger):
                await control.coordinator_gone()
        return 1 if aborted else 0


async def _listen(host: str, port: int, log: Callable[[str], None]) -> Any:
    from node.transport.tcp import TcpLinks

    try:
        # a launcher of many nodes raises this (neighbours may start long after this node)
        from node.actor import handshake_timeout

        links = await TcpLinks.listen(host, port, log=log, connect_timeout=handshake_timeout())
    except OSError as exc:
        log(f"cannot listen on {host}:{port}: {exc}")
        return None
    log(f"listening on {host}:{links.port} ({socket.gethostname()})")
    return links


def _logger(here: tuple[int, int]) -> Callable[[str], None]:
    name = f"node {here[0]},{here[1]}"

    def log(text: str) -> None:
        _log_line(text if text.startswith("node ") else f"{name}: {text}")

    return log


async def serve_node(
    broker: str, run_id: str, here: tuple[int, int], host: str, port: int, clock_host: str | None = None
) -> int:
    """Serve run after run on one link port until killed (``--serve``); 1 if it cannot listen."""
    log = _logger(here)
    links = await _listen(host, port, log)
    if links is None:
        return 1
    try:
        runs = 0
        finished: set[int] = set()
        while True:
            try:
                status = await _one_run(
                    broker, run_id, here, links, log, wait=None, linger=0.0, clock_host=clock_host,
                    finished=finished,
                )  # fmt: skip
                runs += 1
                log(f"run {runs} ended ({'ok' if status == 0 else 'aborted'}); waiting for the next one")
            except ConnectionError as exc:
                log(f"{exc}; retrying in {SERVE_RETRY:g} s")
                await trio.sleep(SERVE_RETRY)
            except Exception as exc:  # a run that could not go on ends that run, not the node
                log(f"run ended by {_describe(exc)}; serving again in {SERVE_RETRY:g} s")
                for line in traceback.format_exception(exc):  # where it came from, in the node's log
                    for part in line.rstrip().splitlines():
                        log(f"  {part}")
                await trio.sleep(SERVE_RETRY)
    finally:
        await links.aclose()


def _describe(exc: BaseException) -> str:
    """An exception (or the first leaf of a group) as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def run_node(
    broker: str,
    run_id: str,
    here: tuple[int, int],
    host: str,
    port: int,
    wait: float = PRESENCE_WAIT,
    linger: float = 0.0,
    clock_host: str | None = None,
) -> int:
    """Run one node to the end of its run; 0 if it finished normally."""
    log = _logger(here)
    links = await _listen(host, port, log)
    if links is None:
        return 1
    try:
        return await _one_run(
            broker, run_id, here, links, log, wait=wait, linger=linger, clock_host=clock_host
        )
    except ConnectionError as exc:
        log(str(exc))
        return 1
    finally:
        await links.aclose()


def node_main(args: argparse.Namespace) -> int:
    """Run a node from parsed arguments (``meshcast node`` calls this too)."""
    try:
        broker, run_id, here, host, port = _parse(args)
    except ValueError as exc:
        print(f"node: error: {exc}", file=sys.stderr)
        return 2
    try:
        clock_host = getattr(args, "clock_host", None) or None
        if getattr(args, "serve", False):
            return trio.run(serve_node, broker, run_id, here, host, port, clock_host)
        return trio.run(
            run_node, broker, run_id, here, host, port, args.wait, max(0.0, args.linger), clock_host
        )
    except KeyboardInterrupt:
        _log_line(f"node {here[0]},{here[1]}: interrupted")
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m node", description=__doc__.split("\n\n")[0], allow_abbrev=False
    )
    add_node_arguments(parser)
    return node_main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
