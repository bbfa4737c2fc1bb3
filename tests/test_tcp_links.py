"""TCP links (node/transport/tcp.py): framing, authentication, and bad input over the wire (loopback only)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import msgpack
import trio
import trio.testing

from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.model import run_model
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.session import Session
from coordinator.workloads.plan import Plan, random_plan
from node.actor import Assignment, Node
from node.protocol import Assign
from node.topology import Coord, Topology
from node.transport.links import MemoryControl
from node.transport.tcp import MAX_PENDING, FrameError, FrameReader, TcpLinks, peer_entry
from node.transport.wire import (
    MAX_FRAME,
    MAX_HELLO,
    PREFIX,
    HelloFrame,
    StepFrame,
    decode_link,
    encode_link,
    frame_bytes,
)

Attack = Callable[[dict[Coord, TcpLinks]], Awaitable[None]]


async def run_tcp(
    plan: Plan,
    settings: RunSettings,
    attack: Attack | None = None,
    stop_gap: float = 0.0,
    before: Attack | None = None,
) -> RawRun:
    """The in-process runtime, but every link a real TCP connection on loopback.

    ``attack`` runs after every link is up and before the plan goes out; ``before``, once every
    node listens and before any is assigned (as on an idle deployment). ``stop_gap``: seconds
    between the nodes' stops (a broker delivers them one after another, not all at once).
    """
    topo = plan.topology
    to_coord_tx, to_coord_rx = trio.open_memory_channel[bytes](math.inf)
    to_nodes: dict[Coord, trio.MemorySendChannel[bytes]] = {}
    listeners: dict[Coord, TcpLinks] = {}
    nodes: list[Node] = []
    for here in topo.nodes():
        links = await TcpLinks.listen("127.0.0.1", 0)
        tx, rx = trio.open_memory_channel[bytes](math.inf)
        to_nodes[here] = tx
        node = Node(here, MemoryControl(to_coord_tx.clone(), rx), links.open)

        def report(kind: str, cause: str, node: Node = node) -> None:
            assert node.engine is not None
            node.engine.error(kind, cause)

        links.report = report
        listeners[here] = links
        nodes.append(node)
    attacked = False

    async def send_to(node: Coord, data: bytes) -> None:
        nonlocal attacked
        if attack is not None and not attacked and msgpack.unpackb(data)["type"] == "plan":
            attacked = True
            await attack(listeners)
        to_nodes[node].send_nowait(data)

    async def broadcast(data: bytes) -> None:
        stop = stop_gap > 0 and msgpack.unpackb(data)["type"] == "stop"
        for tx in to_nodes.values():
            tx.send_nowait(data)
            if stop:
                await trio.sleep(stop_gap)

    def peers(n: Coord) -> dict[str, Any]:
        return {p: peer_entry("127.0.0.1", listeners[m].port) for p, m in topo.neighbours(n).items()}

    session = Session(plan, settings, send_to, broadcast, to_coord_rx, peers=peers)
    if before is not None:
        await before(listeners)
    async with trio.open_nursery() as nursery:
        for node in nodes:
            nursery.start_soon(node.run)
        raw = await session.run(set(topo.nodes()))
        nursery.cancel_scope.cancel()
    for links in listeners.values():
        await links.aclose()
    return raw


def _plan() -> Plan:
    return random_plan(Topology.parse("torus:3x3"), ["vh"], 4, repeat=6, seed=3)


async def test_tcp_links_give_the_in_process_records() -> None:
    settings = RunSettings(wall_budget=30)
    plan = _plan()
    raw = await run_tcp(plan, settings)
    ref = await run_inprocess(plan, settings)
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.traffic == ref.traffic
    assert not raw.errors


async def test_free_clock_over_tcp_ends_without_link_errors() -> None:
    """The run's own end closes every link: with each side's bye first, that is no error.

    The stops reach the nodes 20 ms apart, so each node's neighbours close before it stops.
    """
    plan = _plan()
    for _ in range(3):
        raw = await run_tcp(plan, RunSettings(wall_budget=30, clock="free"), stop_gap=0.02)
        assert not raw.incomplete, raw.incomplete
        assert not raw.errors, raw.errors[:3]
        assert len(raw.arrivals) == sum(len(m.destinations) for m in plan.multicasts)


async def _send_and_wait(port: int, data: bytes, close_after: float = 5.0) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await stream.send_all(data)
        with trio.move_on_after(close_after):
            while await stream.receive_some(1 << 16):  # until the node closes it
                pass
    except trio.BrokenResourceError:
        pass  # the node reset it: fine, it was rejected
    finally:
        await stream.aclose()


async def test_bad_callers_are_reported_and_real_links_keep_working() -> None:
    """Garbage, a wrong token, a stranger, an oversized frame: each reported; the run completes."""
    target: Coord = (1, 1)  # (0,1) and (1,0) dial it; its listener is exposed to the attacks
    plan = _plan()

    async def attack(listeners: dict[Coord, TcpLinks]) -> None:
        port = listeners[target].port
        await _send_and_wait(port, frame_bytes(b"\xc1\xc1 this is not msgpack \xc1"))
        await _send_and_wait(port, frame_bytes(encode_link(HelloFrame("not-the-run-token", (0, 1)))))
        await _send_and_wait(port, frame_bytes(encode_link(StepFrame(0, 0, ()))))  # no hello first
        big = msgpack.packb(["H", "x" * (MAX_FRAME + 1000), [0, 1]])
        await _send_and_wait(port, frame_bytes(big))
        with trio.fail_after(10):
            while listeners[target].rejected < 4:
                await trio.sleep(0.01)

    settings = RunSettings(wall_budget=30)
    raw = await run_tcp(plan, settings, attack)
    ref = await run_inprocess(plan, settings)
    assert not raw.incomplete, raw.incomplete
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert not raw.errors, raw.errors  # strangers are not the run's errors: counted apart
    assert set(raw.rejected) == {target}
    kinds = sorted(c.split(":")[0] for c in raw.rejected[target])
    assert kinds == ["bad-frame", "bad-frame", "link-auth", "link-auth"], raw.rejected
    causes = " | ".join(raw.rejected[target])
    assert "not msgpack" in causes
    assert "wrong run token" in causes
    assert "not a hello" in causes
    assert "over the limit" in causes


async def test_a_known_token_from_a_non_neighbour_is_rejected() -> None:
    """The token alone is not enough: the caller must be the neighbour announced for a port."""
    plan = _plan()
    target: Coord = (1, 1)
    tokens: list[str] = []

    async def attack(listeners: dict[Coord, TcpLinks]) -> None:
        # the token is in every assignment; use the real one with a wrong identity
        hello = frame_bytes(encode_link(HelloFrame(tokens[0], (2, 2))))
        await _send_and_wait(listeners[target].port, hello)
        with trio.fail_after(10):
            while listeners[target].rejected < 1:
                await trio.sleep(0.01)

    orig = Session._assign

    def spy(self: Session, node: Coord) -> Assign:
        msg = orig(self, node)
        tokens.append(msg.token)
        return msg

    Session._assign = spy  # type: ignore[method-assign]
    try:
        raw = await run_tcp(plan, RunSettings(wall_budget=30), attack)
    finally:
        Session._assign = orig  # type: ignore[method-assign]
    assert not raw.incomplete and not raw.errors
    (cause,) = raw.rejected[target]
    assert cause.startswith("link-auth: ") and "(2,2) is not a neighbour that dials this node" in cause


async def test_frame_reader_cuts_frames_across_chunk_boundaries() -> None:
    a, b = trio.testing.memory_stream_pair()
    frames = [encode_link(StepFrame(i, i - 1, ())) for i in range(50)]
    blob = b"".join(frame_bytes(f) for f in frames)
    reader = FrameReader(b, max_frame=1024)

    async def writer() -> None:
        for i in range(0, len(blob), 7):
            await a.send_all(blob[i : i + 7])
        await a.send_eof()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        got = [await reader.next() for _ in frames]
    assert got == frames
    assert [decode_link(f) for f in got] == [decode_link(f) for f in frames]
    try:
        await reader.next()
    except trio.EndOfChannel:
        pass
    else:
        raise AssertionError("expected the end of the stream")


async def test_frame_reader_limits_and_garbage() -> None:
    for data, cause in (
        (frame_bytes(msgpack.packb(b"x" * 5000)), "over the limit of 1024"),
        (b"\x00\x00", "stream ended inside a frame's length"),
        (frame_bytes(msgpack.packb([1, 2, 3]))[:-1], "stream ended inside a frame"),
    ):
        a, b = trio.testing.memory_stream_pair()
        await a.send_all(data)
        await a.send_eof()
        try:
            await FrameReader(b, max_frame=1024).next()
        except FrameError as exc:
            assert cause in str(exc)
        else:
            raise AssertionError(f"no FrameError for {data[:10]!r}")


class _CountingStream(trio.abc.ReceiveStream):
    """A stream that declares a 100 MB frame, then would send it forever; counts bytes read."""

    def __init__(self) -> None:
        self.given = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        n = max_bytes or 65536
        chunk = PREFIX.pack(100_000_000) + b"x" * (n - PREFIX.size) if self.given == 0 else b"x" * n
        self.given += len(chunk)
        return chunk

    async def aclose(self) -> None:
        pass


async def test_a_declared_100_mb_frame_is_refused_on_sight() -> None:
    """The length prefix is checked before the frame's bytes are read: nothing is buffered."""
    stream = _CountingStream()
    reader = FrameReader(stream)
    try:
        await reader.next()
    except FrameError as exc:
        assert "declares 100000000 bytes, over the limit" in str(exc)
    else:
        raise AssertionError("a 100 MB frame was accepted")
    assert stream.given <= 65536, f"{stream.given} bytes read before refusing"
    a, b = trio.testing.memory_stream_pair()  # a hello is held to MAX_HELLO, far below MAX_FRAME
    await a.send_all(PREFIX.pack(MAX_HELLO + 1))
    try:
        await FrameReader(b).next(MAX_HELLO)
    except FrameError as exc:
        assert f"over the limit of {MAX_HELLO}" in str(exc)
    else:
        raise AssertionError("an oversized hello was accepted")


async def test_strangers_waiting_for_hello_are_capped_and_real_peers_still_connect() -> None:
    """MAX_PENDING silent strangers hold the target; one more closes the one that waited longest
    (not itself); the run still completes with the in-process records and no errors."""
    target: Coord = (1, 1)
    plan = _plan()
    held: list[trio.SocketStream] = []

    async def attack(listeners: dict[Coord, TcpLinks]) -> None:
        links = listeners[target]
        for _ in range(MAX_PENDING):
            held.append(await trio.open_tcp_stream("127.0.0.1", links.port))
            with trio.fail_after(10):  # accepted in this order
                while links.pending < len(held):
                    await trio.sleep(0.01)
        held.append(await trio.open_tcp_stream("127.0.0.1", links.port))
        with trio.fail_after(10):  # the first is closed by the node without a byte from us
            with contextlib.suppress(trio.BrokenResourceError):
                assert await held[0].receive_some(1) == b""
        assert links.pending == MAX_PENDING
        assert links.rejected == 1

    settings = RunSettings(wall_budget=30)
    try:
        raw = await run_tcp(plan, settings, attack)
    finally:
        for s in held:
            await s.aclose()
    ref = await run_inprocess(plan, settings)
    assert not raw.incomplete, raw.incomplete
    assert not raw.errors, raw.errors
    assert raw.logical_arrivals() == ref.logical_arrivals()
    assert raw.logical_arrivals() == run_model(plan, settings).logical_arrivals()
    assert any("closed to make room" in c for c in raw.rejected[target]), raw.rejected


async def test_200_connections_held_before_a_run_do_not_keep_the_neighbours_out() -> None:
    """Issue 37: a stranger holds 200 connections to a node's port while it is idle (they queue
    in its backlog); the run that follows still brings every link up, completes with the
    reference records and no errors, and the strangers are counted as rejected."""
    target: Coord = (1, 1)
    plan = _plan()
    held: list[trio.SocketStream] = []

    async def before(listeners: dict[Coord, TcpLinks]) -> None:
        port = listeners[target].port
        with trio.move_on_after(10):  # the kernel may stop completing handshakes once the backlog is full
            for _ in range(200):
                held.append(await trio.open_tcp_stream("127.0.0.1", port))
        assert len(held) >= 100, f"only {len(held)} connections could be opened"

    settings = RunSettings(wall_budget=60)
    try:
        raw = await run_tcp(plan, settings, before=before)
    finally:
        for s in held:
            await s.aclose()
    assert not raw.incomplete, raw.incomplete
    assert not raw.errors, raw.errors[:3]
    assert raw.logical_arrivals() == run_model(plan, settings).logical_arrivals()
    assert len(raw.rejected.get(target, [])) >= len(held) - MAX_PENDING - 5, len(raw.rejected.get(target, []))


async def test_a_silent_connection_is_closed_after_the_hello_timeout() -> None:
    """An unauthenticated connection lives at most hello_timeout seconds."""
    links = await TcpLinks.listen("127.0.0.1", 0, hello_timeout=0.5)
    topo = Topology.parse("mesh:2x2")
    # TcpLinks.open reads only these fields of the assignment
    assign = cast(Assignment, SimpleNamespace(here=(1, 1), topology=topo, peers={}, token="t"))
    reports: list[str] = []
    links.report = lambda kind, cause: reports.append(cause)
    links.connect_timeout = 5
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            try:
                async with links.open(assign):
                    pass
            except Exception:
                pass

        nursery.start_soon(serve)
        s = await trio.open_tcp_stream("127.0.0.1", links.port)
        with trio.fail_after(5):
            with contextlib.suppress(trio.BrokenResourceError):
                assert await s.receive_some(1) == b""
        await s.aclose()
        nursery.cancel_scope.cancel()
    await links.aclose()
    assert any("no hello frame within 0.5 s" in r for r in reports), reports
