"""The node actor: one trio task per router, the I/O shell around :class:`node.switching.engine.Engine`.

It speaks the control protocol of :mod:`node.protocol` over a :class:`node.transport.links.Control`
(hello → assign → (links opened) → ready → plan → start → report* → done, and in the free clock
probe/counters until stop), following its phase table: a message out of order is counted and
reported, never silently dropped. In lockstep it drives :class:`node.switching.lockstep.Lockstep` (the
sans-IO α-synchronizer) with the frames it reads from its links; given a
:class:`node.transport.links.StepBarrier` (nodes in one process), or assigned ``sync: barrier`` (then a
:class:`node.sync.barrier.RemoteBarrier`: step-done to the coordinator, go back), it runs the same
driver in its sparse mode instead: it works only at the steps where it has work and sends only
non-empty frames. In one process the barrier calls the node's step (a plain function: nothing in
it awaits) from the task that drives the run, so a node-step costs no task switch.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import time
from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from node import defaults, protocol
from node.protocol import PROTOCOL_VERSION, Assignment, NodeAborted, Phase, ProtocolError
from node.routing import Registry
from node.routing import registry as default_registry
from node.switching.engine import Engine, Injection
from node.switching.factory import AnyEngine, make_engine
from node.switching.lockstep import Lockstep, quiescent
from node.sync.barrier import LockstepDriver, NoGo, RemoteBarrier
from node.sync.polled import LinkDown, polled_step, usable
from node.topology import PORTS, Coord
from node.transport.links import Control, DirectLink, Link, PolledLink, StepBarrier, Stepper
from node.transport.shaping import ShapedLink
from node.transport.wire import (
    ByeFrame,
    FreePacket,
    LinkFrame,
    PacketFrame,
    StepFrame,
    WireError,
    decode_link,
    encode_free,
    encode_link,
    encode_packet,
    free_packet,
)

SYNCS = defaults.SYNCS

__all__ = ["SYNCS", "Assignment", "LinkOpener", "Node", "NodeAborted", "done_report", "quiescent"]

BYE_TIMEOUT = 5.0
"""Seconds a node waits, at a free-clock run's end, for each neighbour's bye (or end of link)."""

REPORT_BATCH = 512
REPORT_INTERVAL = 0.5
"""Seconds between reports while deliveries are waiting (so a run cut short keeps them)."""


def handshake_timeout(default: float = 60.0) -> float:
    """Seconds a node waits for its neighbours' links, and (without a lease: a control channel
    that hears no heartbeats) for each handshake step: ``MESHCAST_HANDSHAKE_TIMEOUT`` (a launcher
    of hundreds of nodes raises it), at least a second; a bad value falls back to ``default``.
    A node on a broker waits for its coordinator as long as the coordinator's lease holds."""
    try:
        value = float(os.environ.get("MESHCAST_HANDSHAKE_TIMEOUT", default))
    except ValueError:
        return default
    return max(1.0, value) if math.isfinite(value) else default


HANDSHAKE_TIMEOUT = handshake_timeout()


Arrived = tuple[FreePacket, int]
"""A free-clock packet frame off a link, read without making it (:func:`node.transport.wire.free_packet`),
and when it came off (monotonic ns, if it carries telemetry; else 0)."""
InboxItem = tuple[str, Arrived | LinkFrame | WireError | None]
"""A frame off a link (or why it could not be read; None: the link ended), by port."""
Inbox = tuple[trio.MemorySendChannel[InboxItem], trio.MemoryReceiveChannel[InboxItem]]

LinkOpener = Callable[[Assignment], AbstractAsyncContextManager[dict[str, Link]]]


def done_report(
    e: AnyEngine,
    here: Coord,
    *,
    host: str,
    status: str,
    last_step: int,
    protocol_errors: int = 0,
    stale: int = 0,
) -> protocol.Done:
    """A node's final report from its engine (the one place a ``done`` is built from one)."""
    return protocol.Done(
        node=here,
        status=status,
        host=host,
        last_step=last_step,
        traffic=_traffic(e.traffic, e.links_used),
        trace=tuple(e.link_trace),
        worms=tuple(tuple(r) for r in getattr(e, "worm_trace", ())),  # wormhole switching with a trace
        injected=tuple(e.injected.items()),
        sent=e.sent,
        received=e.received,
        peak_queue=e.peak_queue,
        peak_in=e.peak_in,
        peak_out=e.peak_out,
        mean_occupancy=e.occupancy_sum / e.steps if e.steps else 0.0,
        dropped=e.dropped,
        copies=e.copies,
        link_sends=dict(e.link_sends),
        protocol_errors=protocol_errors,
        stale=stale,
        delivered=e.delivered,
    )


def _traffic(traffic: dict[int, int], used: dict[int, int]) -> tuple[int, ...]:
    """The ``done``'s traffic: (multicast, sends, port set) per multicast forwarded, flat."""
    out: list[int] = []
    for mc, n in traffic.items():
        out += (mc, n, used.get(mc, 0))
    return tuple(out)


def take_report(e: AnyEngine, here: Coord, errors_from: int) -> protocol.Report:
    """The deliveries (taken out of ``e``) and the errors from index ``errors_from`` on."""
    arrivals = tuple(
        (d.mc, d.step, d.hops, d.startups, d.wall_ns)
        if d.tel is None
        else (d.mc, d.step, d.hops, d.startups, d.wall_ns, d.tel)
        for d in e.deliveries
    )
    e.deliveries.clear()
    return protocol.Report(here, arrivals, tuple((x.kind, x.cause, x.mc) for x in e.errors[errors_from:]))


def _received(data: bytes) -> Arrived | LinkFrame | WireError:
    """A frame off a link, decoded (a free-clock packet as its fields); a packet that carries
    telemetry is stamped with the moment it came off the link (before it waits in the inbox: that
    wait is the node's, not the link's)."""
    now = time.monotonic_ns()
    got = free_packet(data)
    if got is not None:
        return got, (now if got[6] is not None else 0)
    frame = decode_link(data)
    if isinstance(frame, PacketFrame):  # free_packet reads every packet decode_link does: a safety net
        p = frame.packet
        return (p.mc, p.alg, p.header, p.hops, p.startups, p.sent, p.tel), (now if p.tel is not None else 0)
    return frame


def _direct_senders(links: dict[str, Link]) -> dict[str, Callable[[bytes], None]]:
    """The links a frame is handed to without awaiting (in-process, or queued by a shaper)."""
    return {p: link.send_nowait for p, link in links.items() if isinstance(link, DirectLink | ShapedLink)}


def _inner(link: Link) -> Link:
    """The link under a shaped one."""
    return link.inner if isinstance(link, ShapedLink) else link


def _algorithm_names(registry: Registry) -> tuple[str, ...]:
    """The names a hello lists, in the registry's order."""
    if not isinstance(registry, Registry):  # any iterable of algorithms (a test's stand-in)
        return tuple(a.name for a in registry)
    return registry.in_order()


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out


class Node:
    """One router: its control channel, its link opener and, once assigned, its engine."""

    # a few hundred thousand of these live in one process at a time (the in-process runtime)
    __slots__ = (
        "_all_ended", "_ended", "_gos", "_inbox", "_last_report", "_link_count", "_log", "_pack",
        "_pending_errors", "_step", "_stopped", "_stopping", "barrier", "control", "engine", "epoch",
        "here", "host", "open_links", "patience", "phase", "protocol_errors", "registry", "stale",
    )  # fmt: skip

    def __init__(
        self,
        here: Coord,
        control: Control,
        open_links: LinkOpener,
        *,
        registry: Registry = default_registry,
        host: str | None = None,
        log: Callable[[str], None] | None = None,
        barrier: StepBarrier | None = None,
        epoch: int = 0,
        patience: float | None = None,
        codec: bool = True,
    ) -> None:
        """``barrier``: in-process lockstep without null frames (links must be :class:`PolledLink`).
        ``epoch``: the run's (0: take the first one the coordinator states); ``patience``: how long
        to wait for the coordinator's next message (None: :data:`HANDSHAKE_TIMEOUT`; ``math.inf``
        when a lease watches the coordinator instead, so that no run ends for lasting long, or when
        the coordinator is in this process: its wall budget bounds the run, and its end cancels
        the nodes; either way no cancel scope per wait).
        ``codec`` False: control messages go as :func:`node.protocol.stamp` tuples, not msgpack
        (a control channel to a coordinator in this process; what it receives may be either)."""
        if barrier is not None and not hasattr(control, "send_nowait"):
            raise TypeError("a node under a StepBarrier needs a control channel with send_nowait")
        self.here = here
        self.barrier = barrier
        self.control = control
        self.open_links = open_links
        self.registry = registry
        self.host = host or socket.gethostname()
        self._log = log
        self.engine: AnyEngine | None = None
        self._inbox: Inbox | None = None
        """Free clock: the frames off the links, made when the first comes (lockstep needs none)."""
        self._pending_errors = 0
        self._last_report = 0.0
        self._step = -1
        self._stopped = False
        self._gos: trio.MemorySendChannel[protocol.Go] | None = None
        self._ended: set[str] = set()
        """Free clock: links whose peer said bye or whose stream ended (nothing more comes on them)."""
        self._all_ended: trio.Event | None = None
        self._link_count = 0
        self._stopping = False
        """Free clock: the coordinator said stop (a link closing from now on is the run's end)."""
        self.phase = Phase.NEW
        self.protocol_errors = 0
        self.epoch = epoch
        self.stale = 0
        """Control messages of another run's epoch, dropped (the epoch rule of :mod:`node.protocol`)."""
        self.patience = HANDSHAKE_TIMEOUT if patience is None else patience
        self._pack: Callable[[protocol.Event, int], Any] = protocol.encode if codec else protocol.stamp

    # -- control -----------------------------------------------------------------------
    def log(self, text: str) -> None:
        if self._log is not None:
            self._log(f"node {self.here[0]},{self.here[1]}: {text}")

    async def _send(self, event: protocol.Event) -> None:
        self.phase = protocol.advance(self.phase, event)  # our own messages follow the table
        await self.control.send(self._pack(event, self.epoch))

    async def _protocol_error(self, cause: str) -> None:
        """Count a bad or out-of-order control message and report it (never drop it silently)."""
        self.protocol_errors += 1
        self.log(f"protocol error: {cause}")
        if self.engine is not None:
            self.engine.error("protocol", cause)
        else:
            await self._send(protocol.Error(self.here, cause))

    async def _receive(self) -> protocol.Event:
        """The next control message that is in order; the others are reported and skipped."""
        while True:
            try:
                event, epoch = protocol.unpack(await self.control.receive())
                if not protocol.same_run(self.epoch, epoch):
                    self.stale += 1  # another run's: dropped and counted, never a protocol step
                    continue
                if event.TYPE not in protocol.TO_NODE:
                    raise ProtocolError(f"{event.TYPE!r} is not a message for a node")
                self.phase = protocol.advance(self.phase, event)
                self.epoch = self.epoch or epoch
                return event
            except ProtocolError as exc:
                await self._protocol_error(str(exc))

    async def _expect(self, kind: type[protocol.Event]) -> Any:
        """Wait for a control message of class ``kind``; a stop aborts the node."""
        with trio.fail_after(self.patience) if self.patience < math.inf else contextlib.nullcontext():
            event = await self._receive()
            if isinstance(event, protocol.Stop):
                raise NodeAborted(f"stopped while waiting for {kind.TYPE!r}")
            if not isinstance(event, kind):  # in the table but not what this phase is for
                await self._protocol_error(f"unexpected {event.TYPE!r} while waiting for {kind.TYPE!r}")
                return await self._expect(kind)
            return event

    # -- main --------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Do the whole protocol; ``started()`` once links are up and the node is ready."""
        await self._send(
            protocol.Hello(self.here, self.host, _algorithm_names(self.registry), PROTOCOL_VERSION)
        )
        try:
            assign = await self._assignment()
        except NodeAborted as exc:  # stopped before it had a run: say so, and end
            self.log(f"aborted: {exc}")
            await self._done(-1, str(exc))
            return
        if self._log is not None:
            self.log(
                f"assigned in {assign.topology.spec}, {assign.settings.port_model}, {assign.settings.clock}"
            )
        last_step = -1
        status = "ok"
        try:
            free = assign.settings.clock != "lockstep"
            # lockstep reads each link in step order itself: no task of its own beside the node's
            tasks = trio.open_nursery() if free else contextlib.nullcontext()
            async with self.open_links(assign) as links, tasks as nursery:
                if nursery is not None:
                    for port, link in links.items():
                        if not isinstance(link, DirectLink):  # those deliver into our inbox
                            nursery.start_soon(self._reader, port, link)
                await self._send(protocol.Ready(self.here))
                task_status.started()
                self.log("links up, ready")
                plan: protocol.PlanMessage = await self._expect(protocol.PlanMessage)
                injections = self._my_injections(plan)
                if nursery is not None:
                    links = self._shaped(assign, links, nursery)
                    # Forward from now on: a packet needs no start, and this node's task is
                    # already there when the sources inject (not started with thousands of others).
                    nursery.start_soon(self._forward_free, links)
                start: protocol.Start = await self._expect(protocol.Start)
                self.log("started")
                self._last_report = time.monotonic()
                if assign.settings.clock == "lockstep":
                    async with trio.open_nursery() as steps:
                        steps.start_soon(self._watch_stop, steps.cancel_scope)
                        await self._lockstep(assign, links, injections, plan.last_step)
                        steps.cancel_scope.cancel()
                    last_step = self._step
                    if self._stopped:
                        raise NodeAborted(f"stopped by the coordinator at step {self._step}")
                else:
                    if injections:
                        # Inject once every node of this process has taken its start (one
                        # scheduling batch) and the coordinator has timed that (the next one):
                        # its probes are paced by it (Session._settle). Across processes, once
                        # the others have too: the coordinator says how long that takes.
                        await trio.lowlevel.checkpoint()
                        await trio.lowlevel.checkpoint()
                        if start.settle > 0:
                            await trio.sleep(start.settle)
                    await self._inject_free(links, injections)
                    await self._until_stop()
                    await self._say_bye(links)
                if nursery is not None:
                    nursery.cancel_scope.cancel()
        except* NodeAborted as group:
            status = "; ".join(str(e) for e in _leaves(group))
            last_step = self._step
            if self.engine is not None:
                self.engine.error("aborted", status)
            self.log(f"aborted: {status}")
        finally:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + 5):
                await self._done(last_step, status)
        self.log("done")

    async def _assignment(self) -> Assignment:
        """Wait for a usable assignment; a bad one is reported and the node waits for the next."""
        while True:
            msg: protocol.Assign = await self._expect(protocol.Assign)
            try:
                assign = Assignment.from_event(msg, self.epoch)
                self.engine = make_engine(
                    assign.topology, assign.here, self.registry, assign.settings, clock_ns=time.monotonic_ns
                )
                return assign
            except (NodeAborted, ValueError) as exc:
                self.phase = Phase.HELLO  # the assignment did not take: wait for the next one
                await self._send(protocol.Error(self.here, f"bad assignment: {exc}"))

    def _my_injections(self, plan: protocol.PlanMessage) -> list[Injection]:
        return [
            Injection(mc, alg, list(dests), dict(params), step)
            for mc, alg, src, dests, step, params in plan.multicasts
            if src == self.here
        ]

    def deliver(self, port: str, data: bytes) -> None:
        """A frame for this node on ``port``, handed over directly (in-process :class:`DirectLink`)."""
        self._inbox_pair()[0].send_nowait((port, _received(data)))

    def _inbox_pair(self) -> Inbox:
        """The inbox's two ends (made on first use: a lockstep node never needs them)."""
        if self._inbox is None:
            self._inbox = trio.open_memory_channel[InboxItem](math.inf)
        return self._inbox

    def _ended_event(self) -> trio.Event:
        """Set once every link has ended (free clock; made on first use)."""
        if self._all_ended is None:
            self._all_ended = trio.Event()
        return self._all_ended

    async def _reader(self, port: str, link: Link) -> None:
        """One reader per link: decode each frame and queue it (or its error) for the node."""
        inbox = self._inbox_pair()[0]
        try:
            while True:
                data = await link.receive()
                inbox.send_nowait((port, _received(data)))
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            inbox.send_nowait((port, None))

    async def _watch_stop(self, scope: trio.CancelScope) -> None:
        """Lockstep: while stepping only stop matters (and, under barrier sync, go: to the barrier)."""
        while True:
            msg = await self._receive()
            if isinstance(msg, protocol.Stop):
                self._stopped = True
                scope.cancel()
                return
            if isinstance(msg, protocol.Go):
                if self._gos is None:
                    await self._protocol_error("'go' in a run without barrier sync")
                else:
                    self._gos.send_nowait(msg)

    async def _until_stop(self) -> None:
        """Free clock: answer probes with counters until the coordinator says stop."""
        assert self.engine is not None
        while True:
            msg = await self._receive()
            if isinstance(msg, protocol.Probe):
                await self._flush()
                e = self.engine
                await self._send(protocol.Counters(self.here, msg.probe, e.sent, e.received, len(e.errors)))
            elif isinstance(msg, protocol.Stop):
                return

    def _shaped(self, assign: Assignment, links: dict[str, Link], nursery: trio.Nursery) -> dict[str, Link]:
        """Free clock: ``links`` with the link model's behaviour on their sending side (a pump each)."""
        model = assign.link_model
        if model is None:
            return links
        out: dict[str, Link] = {}
        message_bytes = assign.settings.flits * assign.settings.flit_bytes
        for port, link in links.items():
            shaper = model.shaper(assign.topology, assign.here, port)
            if shaper is None:
                out[port] = link
            else:
                approach = assign.settings.shaper_approach_us / 1e6
                shaped = out[port] = ShapedLink(link, shaper, message_bytes, approach)
                nursery.start_soon(shaped.pump)
        return out

    async def _say_bye(self, links: dict[str, Link]) -> None:
        """Free clock, stopped: tell each neighbour the link ends here, and wait for theirs.

        The bye goes before the link's end of stream, so the peer knows the close is the run's
        end and not a lost link; waiting for the peer's bye (or end) before closing leaves no
        unread input, whose close would reset the peer's stream.
        """
        self._stopping = True
        streams = {p: link for p, link in links.items() if not isinstance(_inner(link), DirectLink)}
        bye = encode_link(ByeFrame())
        with trio.move_on_after(BYE_TIMEOUT):
            for link in streams.values():
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await link.send(bye)  # (a link that ended already needs no bye)
            for link in links.values():
                if isinstance(link, ShapedLink):
                    await link.drain()  # what a shaped link still holds (the bye last) goes out first
            self._link_count = len(streams)
            if len(self._ended) >= self._link_count:
                return
            await self._ended_event().wait()

    def _link_ended(self, port: str) -> None:
        """Nothing more comes on ``port`` (a bye, or its end of stream)."""
        self._ended.add(port)
        if self._link_count and len(self._ended) >= self._link_count:
            self._ended_event().set()

    # -- frames ------------------------------------------------------------------------
    def _bad_frame(self, port: str, cause: str) -> None:
        assert self.engine is not None
        self.engine.error("bad-frame", f"on {port}: {cause}")

    async def _transmit(self, links: dict[str, Link], port: str, frame: LinkFrame | bytes) -> None:
        """Send ``frame`` (or its bytes) on ``port``; NodeAborted if the link is down."""
        try:
            await links[port].send(frame if isinstance(frame, bytes) else encode_link(frame))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise NodeAborted(f"link {port} is down ({type(exc).__name__})") from None

    async def _lockstep(
        self, assign: Assignment, links: dict[str, Link], injections: list[Injection], last_inj: int
    ) -> None:
        """Run steps until global quiescence or the step budget (the last step is ``_step``)."""
        engine = self.engine
        assert engine is not None
        ports: list[str] = [p for p in PORTS if p in links]
        clock = Lockstep(
            engine, ports, diameter=assign.topology.diameter, max_steps=assign.settings.max_steps,
            injections=injections, last_injection=last_inj,
        )  # fmt: skip
        if self.barrier is not None:
            await self._sparse(assign, clock, self.barrier, links)
            return
        if assign.sync == "barrier":
            self._gos, gos = trio.open_memory_channel[protocol.Go](math.inf)
            remote = RemoteBarrier(
                self._send, gos, ports=ports, timeout=self.patience,
                report=lambda cause: engine.error("protocol", cause),
            )  # fmt: skip
            self.log("stepping under the coordinator's step barrier")
            try:
                await self._sparse(assign, clock, remote, links)
            except NoGo as exc:
                raise NodeAborted(str(exc)) from None
            return
        while True:
            self._step = clock.step
            due = clock.due
            frames = {} if due is None else {p: await self._step_frame(links, p, due) for p in ports}
            out = clock.advance(frames)
            if out is None:
                return  # every node stops at this same step: nobody needs our frame for it
            for p in ports:
                await self._transmit(links, p, out[p])
            if self._report_due(engine):
                await self._flush()

    async def _sparse(
        self,
        assign: Assignment,
        clock: Lockstep,
        barrier: LockstepDriver,
        links: dict[str, Link],
    ) -> None:
        """Lockstep at the barrier's pace: only the steps with work, only non-empty frames."""
        engine = self.engine
        assert engine is not None
        topo = assign.topology
        neighbours: dict[str, Hashable] = {p: topo.neighbour(self.here, p) for p in clock.ports}
        # Let this node's other tasks (the stop watcher) take their first step before joining:
        # else thousands of them start inside the run's first steps, in the measured span.
        await trio.lowlevel.checkpoint()

        async def exchange(t: int, expect: tuple[str, ...]) -> Mapping[str, Hashable]:
            """Across processes: this node's step ``t``, its frames read and sent over the links."""
            self._step = t
            frames = await self._expected_frames(t, expect, links) if t > 0 else {}
            out = clock.work(t, frames)
            for p, frame in out.items():
                await self._transmit(links, p, frame)
            if self._report_due(engine):
                await self._flush()
            return {p: neighbours[p] for p in out}

        await barrier.run_node(
            self.here, clock, lambda: self._polled_stepper(clock, links, neighbours), exchange
        )
        assert barrier.end is not None
        clock.finish(barrier.end)
        self._step = clock.step

    def _polled_stepper(
        self,
        clock: Lockstep,
        links: dict[str, Link],
        neighbours: dict[str, Hashable],
    ) -> Stepper:
        """This node's step as the in-process barrier calls it: no await, reports sent without waiting."""
        engine = self.engine
        assert engine is not None
        polled: dict[str, PolledLink] = links  # type: ignore[assignment]  # in one process
        send_nowait: Callable[[bytes], None] = self.control.send_nowait  # type: ignore[attr-defined]  # __init__
        bad = self._bad_frame
        early: dict[str, StepFrame] = {}  # frames of a step the node has yet to do

        def step(t: int) -> list[Hashable]:
            self._step = t
            try:
                sent = polled_step(t, clock, polled, early, bad, neighbours)
            except LinkDown as exc:
                raise NodeAborted(str(exc)) from None
            if (engine.deliveries or engine.errors) and self._report_due(engine):  # the cheap test first
                report = self._take_report()
                if report is not None:
                    self.phase = protocol.advance(self.phase, report)
                    send_nowait(self._pack(report, self.epoch))
            return sent

        return step

    def _report_due(self, engine: AnyEngine) -> bool:
        """Whether the deliveries and errors gathered so far are to be reported now."""
        return (
            len(engine.deliveries) >= REPORT_BATCH
            or len(engine.errors) > self._pending_errors
            or (bool(engine.deliveries) and time.monotonic() - self._last_report > REPORT_INTERVAL)
        )

    async def _expected_frames(
        self, t: int, expect: tuple[str, ...], links: dict[str, Link]
    ) -> dict[str, StepFrame]:
        """Across processes: exactly the frames of step ``t - 1`` the barrier said were sent."""
        frames: dict[str, StepFrame] = {}
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            for p in expect:
                frames[p] = await self._step_frame(links, p, t - 1)
            return frames
        raise NodeAborted(f"no frame of step {t - 1} on {', '.join(p for p in expect if p not in frames)} "
                          f"within {HANDSHAKE_TIMEOUT:g} s")  # fmt: skip

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
            got = usable(frame, step)
            if not isinstance(got, str):
                return got
            self._bad_frame(port, got)
            if isinstance(frame, StepFrame) and frame.step > step:
                raise NodeAborted(f"link {port} skipped step {step}")

    async def _inject_free(self, links: dict[str, Link], injections: list[Injection]) -> None:
        """Free clock, at start: inject this node's multicasts (in step order) and send their packets."""
        engine = self.engine
        assert isinstance(engine, Engine)  # make_engine refuses wormhole switching on the free clock
        direct = _direct_senders(links)
        for inj in sorted(injections, key=lambda i: i.step):
            # an injection's copies leave without a task switch between them, as the forwarding
            # loop's do: a copy stamped sent here must not reach its link after a later-stamped
            # copy the forwarding task sent meanwhile (its link draws delays in the order sent)
            for port, pkt in engine.inject_free(inj):
                send = direct.get(port)
                if send is None:
                    await self._transmit(links, port, encode_packet(pkt))
                    continue
                try:
                    send(encode_packet(pkt))
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    raise NodeAborted(f"link {port} is down ({type(exc).__name__})") from None
            await trio.lowlevel.checkpoint()

    async def _forward_free(self, links: dict[str, Link]) -> None:
        """Free clock: forward every packet as soon as it arrives."""
        engine = self.engine
        assert isinstance(engine, Engine)
        inbox = self._inbox_pair()[1]
        # in one process a frame is handed to the neighbour's inbox without awaiting (per hop)
        direct = _direct_senders(links)
        while True:
            item: InboxItem | None = await inbox.receive()
            while item is not None:  # then every frame already waiting, without a task switch each
                port, frame = item
                if type(frame) is tuple:  # a packet, read without making it (every hop but a bad one)
                    (mc, alg, header, hops, startups, sent, tel), rx = frame
                    for out_port, wire in engine.take_free(mc, alg, header, hops, startups, sent, tel, rx):
                        data = encode_free(wire)
                        send = direct.get(out_port)
                        if send is not None:
                            send(data)
                        else:
                            await self._transmit(links, out_port, data)
                    if len(engine.deliveries) >= REPORT_BATCH:
                        await self._flush()
                elif frame is None:
                    if port not in self._ended and not self._stopping:
                        engine.error("link-down", f"link {port} closed before the run's end")
                    self._link_ended(port)
                elif isinstance(frame, ByeFrame):
                    self._link_ended(port)
                elif isinstance(frame, WireError):
                    self._bad_frame(port, frame.cause)
                else:
                    self._bad_frame(port, f"{type(frame).__name__} in a free-clock run")
                try:
                    item = inbox.receive_nowait()
                except trio.WouldBlock:
                    item = None

    # -- reports -----------------------------------------------------------------------
    def _take_report(self) -> protocol.Report | None:
        """The deliveries and errors gathered since the last report (None: there are none)."""
        e = self.engine
        assert e is not None
        report = take_report(e, self.here, self._pending_errors)
        self._pending_errors = len(e.errors)
        self._last_report = time.monotonic()
        return report if report.arrivals or report.errors else None

    async def _flush(self) -> None:
        """Send the deliveries and errors gathered since the last report."""
        report = self._take_report()
        if report is not None:
            await self._send(report)

    async def _done(self, last_step: int, status: str) -> None:
        e = self.engine
        if e is None:
            await self._send(
                protocol.Done(
                    self.here, status, self.host, protocol_errors=self.protocol_errors, stale=self.stale
                )
            )
            return
        await self._flush()
        await self._send(
            done_report(
                e, self.here, host=self.host, status=status, last_step=last_step,
                protocol_errors=self.protocol_errors, stale=self.stale,
            )
        )  # fmt: skip
