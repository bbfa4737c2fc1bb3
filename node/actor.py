"""The node actor: one trio task per router, the I/O shell around :class:`node.engine.Engine`.

Protocol with the coordinator (messages of node/wire.py over a :class:`node.links.Control`):
hello → assign → (links opened) → ready → plan → start → report* → done, and in the free
clock probe/counters until stop. In lockstep a node runs an α-synchronizer: it does step t
only after it has every neighbour's frame for t-1, and it stops by itself once no node can
be busy any more (see :func:`quiescent`), so every node stops at the same step.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import trio

from node.engine import Engine, Injection
from node.links import Control, Link
from node.routing import Registry
from node.routing import registry as default_registry
from node.topology import PORTS, Coord, Topology
from node.wire import (
    LinkFrame,
    PacketFrame,
    StepFrame,
    WireError,
    decode_control,
    decode_link,
    encode_control,
    encode_link,
)

__all__ = ["Assignment", "LinkOpener", "Node", "NodeAborted", "quiescent"]

REPORT_BATCH = 512
HANDSHAKE_TIMEOUT = 60.0


class NodeAborted(Exception):
    """The run cannot go on at this node (a link died, a protocol step never came)."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the coordinator tells a node before it opens its links."""

    run_id: str
    topology: Topology
    here: Coord
    port_model: str
    contention: str
    clock: str
    hop_limit: int | None
    max_steps: int
    trace: bool
    token: str
    in_capacity: int | None
    out_capacity: int | None
    policy: str
    peers: dict[str, Any]

    @classmethod
    def from_message(cls, msg: dict[str, Any]) -> Assignment:
        try:
            topo = Topology.parse(msg["topology"])
            here = topo.check(tuple(msg["node"]), "assigned node")
            hl = msg.get("hop_limit")
            return cls(
                str(msg["run"]),
                topo,
                here,
                str(msg["port_model"]),
                str(msg["contention"]),
                str(msg["clock"]),
                int(hl) if hl is not None else None,
                int(msg["max_steps"]),
                bool(msg.get("trace", False)),
                str(msg.get("token", "")),
                _opt_int(msg.get("buffer")),
                _opt_int(msg.get("out_buffer")),
                str(msg.get("policy", "block")),
                dict(msg.get("peers", {})),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NodeAborted(f"bad assignment: {type(exc).__name__}: {exc}") from None


LinkOpener = Callable[[Assignment], AbstractAsyncContextManager[dict[str, Link]]]


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def quiescent(step: int, last_busy: int, diameter: int) -> bool:
    """True once nothing can happen any more anywhere.

    ``last_busy`` is the latest step at which this node knows any node was busy (its own
    busy steps and its neighbours' values, one step old). Information travels one hop per
    step, so once ``step - last_busy > diameter`` every busy step would have reached us:
    the network has been idle since ``last_busy``, and every node concludes so at the same
    step.
    """
    return step - last_busy > diameter


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out


def _packets_by_port(sends: list[tuple[str, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for port, pkt in sends:
        out.setdefault(port, []).append(pkt)
    return out


class Node:
    """One router: its control channel, its link opener and, once assigned, its engine."""

    def __init__(
        self,
        here: Coord,
        control: Control,
        open_links: LinkOpener,
        *,
        registry: Registry = default_registry,
        host: str | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.here = here
        self.control = control
        self.open_links = open_links
        self.registry = registry
        self.host = host or socket.gethostname()
        self._log = log
        self.engine: Engine | None = None
        self._inbox_tx, self._inbox_rx = trio.open_memory_channel[tuple[str, LinkFrame | WireError | None]](
            math.inf
        )
        self._pending_reports: list[list[Any]] = []
        self._pending_errors = 0
        self._step = -1
        self._stopped = False

    # -- control -----------------------------------------------------------------------
    def log(self, text: str) -> None:
        if self._log is not None:
            self._log(f"node {self.here[0]},{self.here[1]}: {text}")

    async def _send(self, msg: dict[str, Any]) -> None:
        await self.control.send(encode_control(msg))

    async def _expect(self, kind: str) -> dict[str, Any]:
        """Wait for control message ``kind``; bad or unexpected messages are reported, skipped."""
        with trio.fail_after(HANDSHAKE_TIMEOUT):
            while True:
                msg = decode_control(await self.control.receive())
                if isinstance(msg, WireError):
                    await self._send({"type": "error", "node": list(self.here), "cause": msg.cause})
                    continue
                if msg["type"] == kind:
                    return msg
                if msg["type"] == "stop":
                    raise NodeAborted(f"stopped while waiting for {kind!r}")

    # -- main --------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Do the whole protocol; ``started()`` once links are up and the node is ready."""
        await self._send({"type": "hello", "node": list(self.here), "host": self.host})
        assign = await self._assignment()
        self.log(f"assigned in {assign.topology.spec}, {assign.port_model}, {assign.clock}")
        last_step = -1
        status = "ok"
        try:
            async with self.open_links(assign) as links, trio.open_nursery() as nursery:
                if assign.clock != "lockstep":  # lockstep reads each link in step order itself
                    for port, link in links.items():
                        nursery.start_soon(self._reader, port, link)
                await self._send({"type": "ready", "node": list(self.here)})
                task_status.started()
                self.log("links up, ready")
                plan = await self._expect("plan")
                injections = self._my_injections(assign, plan)
                last_inj = int(plan.get("last_step", 0))
                await self._expect("start")
                self.log("started")
                if assign.clock == "lockstep":
                    async with trio.open_nursery() as steps:
                        steps.start_soon(self._watch_stop, steps.cancel_scope)
                        await self._lockstep(assign, links, injections, last_inj)
                        steps.cancel_scope.cancel()
                    last_step = self._step
                    if self._stopped:
                        raise NodeAborted(f"stopped by the coordinator at step {self._step}")
                else:
                    nursery.start_soon(self._free, assign, links, injections)
                    await self._until_stop()
                nursery.cancel_scope.cancel()
        except* NodeAborted as group:
            status = "; ".join(str(e) for e in _leaves(group))
            last_step = self._step
            if self.engine is not None:
                self.engine.error("aborted", status)
            self.log(f"aborted: {status}")
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await self._done(last_step, status)
        self.log("done")

    async def _assignment(self) -> Assignment:
        """Wait for a usable assignment; a bad one is reported and the node waits for the next."""
        while True:
            msg = await self._expect("assign")
            try:
                assign = Assignment.from_message(msg)
                self.engine = Engine(
                    assign.topology,
                    assign.here,
                    self.registry,
                    port_model=assign.port_model,
                    contention=assign.contention,
                    hop_limit=assign.hop_limit,
                    trace=assign.trace,
                    in_capacity=assign.in_capacity,
                    out_capacity=assign.out_capacity,
                    policy=assign.policy,
                    clock_ns=time.monotonic_ns,
                )
                return assign
            except (NodeAborted, ValueError) as exc:
                await self._send(
                    {"type": "error", "node": list(self.here), "cause": f"bad assignment: {exc}"}
                )

    def _my_injections(self, assign: Assignment, plan: dict[str, Any]) -> dict[int, list[Injection]]:
        out: dict[int, list[Injection]] = {}
        assert self.engine is not None
        for entry in plan.get("multicasts", []):
            try:
                mc, alg, src, dests, step, params = entry
                if tuple(src) != self.here:
                    continue
                inj = Injection(int(mc), str(alg), [tuple(d) for d in dests], dict(params or {}), int(step))
            except (TypeError, ValueError) as exc:
                self.engine.error("bad-plan", f"{type(exc).__name__}: {exc}")
                continue
            out.setdefault(inj.step, []).append(inj)
        return out

    async def _reader(self, port: str, link: Link) -> None:
        """One reader per link: decode each frame and queue it (or its error) for the node."""
        try:
            while True:
                data = await link.receive()
                self._inbox_tx.send_nowait((port, decode_link(data)))
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            self._inbox_tx.send_nowait((port, None))

    async def _watch_stop(self, scope: trio.CancelScope) -> None:
        """Lockstep: the only control message that matters while stepping is stop."""
        while True:
            msg = decode_control(await self.control.receive())
            if not isinstance(msg, WireError) and msg["type"] == "stop":
                self._stopped = True
                scope.cancel()
                return

    async def _until_stop(self) -> None:
        """Free clock: answer probes with counters until the coordinator says stop."""
        assert self.engine is not None
        while True:
            msg = decode_control(await self.control.receive())
            if isinstance(msg, WireError):
                continue
            if msg["type"] == "probe":
                await self._flush()
                e = self.engine
                await self._send(
                    {
                        "type": "counters",
                        "node": list(self.here),
                        "probe": msg.get("probe"),
                        "sent": e.sent,
                        "received": e.received,
                        "errors": len(e.errors),
                    }
                )
            elif msg["type"] == "stop":
                return

    # -- frames ------------------------------------------------------------------------
    def _bad_frame(self, port: str, cause: str) -> None:
        assert self.engine is not None
        self.engine.error("bad-frame", f"on {port}: {cause}")

    async def _transmit(self, links: dict[str, Link], port: str, frame: LinkFrame) -> None:
        try:
            await links[port].send(encode_link(frame))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise NodeAborted(f"link {port} is down ({type(exc).__name__})") from None

    async def _lockstep(
        self,
        assign: Assignment,
        links: dict[str, Link],
        injections: dict[int, list[Injection]],
        last_inj: int,
    ) -> None:
        """Run steps until global quiescence or the step budget (the last step is ``_step``)."""
        engine = self.engine
        assert engine is not None
        ports = [p for p in PORTS if p in links]
        diameter = assign.topology.diameter
        last_busy = last_inj
        t = 0
        while True:
            self._step = t
            if t > 0:
                for p in ports:
                    frame = await self._step_frame(links, p, t - 1)
                    last_busy = max(last_busy, frame.last_busy)
                    engine.credit_back(p, frame.freed)
                    for pkt in frame.packets:
                        engine.receive(pkt, p)
            for inj in injections.pop(t, ()):
                engine.inject(inj)
            was_busy = engine.busy()
            sends = engine.step(t)
            if was_busy or sends:
                last_busy = max(last_busy, t)
            if quiescent(t, last_busy, diameter) or t >= assign.max_steps:
                return  # every node stops at this same step: nobody needs our frame for it
            by_port = _packets_by_port(sends)
            freed = engine.take_freed()
            for p in ports:
                await self._transmit(
                    links, p, StepFrame(t, last_busy, tuple(by_port.get(p, ())), freed.get(p, 0))
                )
            if len(engine.deliveries) >= REPORT_BATCH or len(engine.errors) > self._pending_errors:
                await self._flush()
            t += 1

    async def _step_frame(self, links: dict[str, Link], port: str, step: int) -> StepFrame:
        """The frame ``port``'s neighbour sent at ``step``: the next good frame on that link.

        A link is FIFO, so lockstep reads it directly, in step order; anything else that
        arrives on it is reported and skipped.
        """
        while True:
            try:
                data = await links[port].receive()
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
                raise NodeAborted(f"link {port} closed before step {step + 1}") from None
            frame = decode_link(data)
            if isinstance(frame, WireError):
                self._bad_frame(port, frame.cause)
            elif not isinstance(frame, StepFrame):
                self._bad_frame(port, f"{type(frame).__name__} in a lockstep run")
            elif frame.step != step:
                self._bad_frame(port, f"frame for step {frame.step} where step {step} was due")
                if frame.step > step:
                    raise NodeAborted(f"link {port} skipped step {step}")
            else:
                return frame

    async def _free(
        self, assign: Assignment, links: dict[str, Link], injections: dict[int, list[Injection]]
    ) -> None:
        """Free clock: inject, then forward every packet as soon as it arrives."""
        engine = self.engine
        assert engine is not None
        for step in sorted(injections):
            for inj in injections[step]:
                for port, pkt in engine.inject_free(inj):
                    await self._transmit(links, port, PacketFrame(pkt))
        while True:
            port, frame = await self._inbox_rx.receive()
            if frame is None:
                engine.error("link-down", f"link {port} closed")
                continue
            if isinstance(frame, WireError):
                self._bad_frame(port, frame.cause)
                continue
            if not isinstance(frame, PacketFrame):
                self._bad_frame(port, f"{type(frame).__name__} in a free-clock run")
                continue
            for out_port, pkt in engine.receive_free(frame.packet):
                await self._transmit(links, out_port, PacketFrame(pkt))
            if len(engine.deliveries) >= REPORT_BATCH:
                await self._flush()

    # -- reports -----------------------------------------------------------------------
    async def _flush(self) -> None:
        """Send the deliveries and errors gathered since the last report."""
        e = self.engine
        assert e is not None
        arrivals = [[d.mc, d.step, d.hops, d.startups, d.wall_ns] for d in e.deliveries]
        errors = [[x.kind, x.cause, x.mc] for x in e.errors[self._pending_errors :]]
        e.deliveries.clear()
        self._pending_errors = len(e.errors)
        if arrivals or errors:
            await self._send(
                {"type": "report", "node": list(self.here), "arrivals": arrivals, "errors": errors}
            )

    async def _done(self, last_step: int, status: str) -> None:
        e = self.engine
        if e is None:
            await self._send({"type": "done", "node": list(self.here), "status": status, "host": self.host})
            return
        await self._flush()
        await self._send(
            {
                "type": "done",
                "node": list(self.here),
                "host": self.host,
                "status": status,
                "last_step": last_step,
                "traffic": [[mc, n, sorted(e.links_used.get(mc, ()))] for mc, n in e.traffic.items()],
                "trace": [list(x) for x in e.link_trace],
                "injected": [[mc, ns] for mc, ns in e.injected.items()],
                "sent": e.sent,
                "received": e.received,
                "peak_queue": e.peak_queue,
                "peak_in": e.peak_in,
                "peak_out": e.peak_out,
                "mean_occupancy": e.occupancy_sum / e.steps if e.steps else 0.0,
                "dropped": e.dropped,
                "link_sends": e.link_sends,
            }
        )
