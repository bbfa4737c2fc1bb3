"""Links over TCP: one connection per neighbour link, msgpack frames on a byte stream.

Each node listens on one port. For every link, the node with the smaller coordinates
(``(x, y)`` tuples compared) dials the other; its first frame is
``HelloFrame(token, its coordinates, the run's epoch, its protocol version)``. The listening side
accepts a connection only from the neighbour the coordinator announced for that port, carrying
the run's token, of this run's epoch and of this code's protocol version (another version is
refused by name). Each frame on the
stream is its length (4 bytes, big-endian, :data:`node.transport.wire.PREFIX`) and then its msgpack
bytes, which :func:`node.transport.wire.decode_link` checks strictly. The declared length is checked
before anything is buffered: at most :data:`node.transport.wire.MAX_HELLO` for the first frame of an
accepted connection, :data:`node.transport.wire.MAX_FRAME` once the peer is authenticated. At most
:data:`MAX_PENDING` accepted connections may wait for their hello at a time, each for at most
:data:`HELLO_TIMEOUT` seconds, so a stranger can hold only a few KiB of a node's memory; one more
closes the longest-waiting of them, not itself, so connections held open by a stranger never
crowd out a neighbour's dial (which says hello at once).

A bad connection (garbage, a wrong token, an unknown caller, an oversized frame, one silent too
long) is rejected: reported through :attr:`TcpLinks.report` as kind :data:`REJECTED` (counted
apart from the run's errors: a stranger cannot fail a run) and closed; the node keeps serving
its real links. The peers' addresses come from the ``assign`` message: ``peers`` maps each
port to ``{"host": ..., "port": ...}`` (see :func:`peer_entry`).
"""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import trio

from node.protocol import REJECTED, Assignment, NodeAborted
from node.topology import Coord
from node.transport.links import Link
from node.transport.wire import (
    MAX_FRAME,
    MAX_HELLO,
    PREFIX,
    PROTOCOL_VERSION,
    HelloFrame,
    WireError,
    check_length,
    decode_link,
    encode_link,
    frame_bytes,
)

__all__ = [
    "CONNECT_TIMEOUT",
    "REJECTED",
    "FrameError",
    "FrameReader",
    "TcpLink",
    "TcpLinks",
    "dials",
    "peer_entry",
]

CONNECT_TIMEOUT: Final = 60.0
"""How long a node waits for all of its links to come up."""
HELLO_TIMEOUT: Final = 10.0
"""How long an accepted connection may take to send its hello frame."""
MAX_PENDING: Final = 16
"""Accepted connections that may wait for their hello at once (a node has at most 4 dialling
neighbours); one more closes the one that has waited longest."""
CLOSE_GRACE: Final = 2.0
"""How long closing a link waits for the peer's end of stream (so no frame is cut off)."""
CHUNK: Final = 65536

Reporter = Callable[[str, str], None]


class FrameError(Exception):
    """The byte stream cannot be cut into frames any more (garbage or an oversized frame)."""


def dials(here: Coord, peer: Coord) -> bool:
    """True if ``here`` opens the connection to ``peer`` (the smaller coordinates dial)."""
    return here < peer


def peer_entry(host: str, port: int) -> dict[str, Any]:
    """One value of the ``assign`` message's ``peers`` map: where the neighbour listens."""
    return {"host": host, "port": int(port)}


class FrameReader:
    """Cuts a byte stream into length-prefixed frames (the msgpack bytes of each).

    The 4-byte length is read first and checked against the limit before the frame's bytes are
    read, so a declared 100 MB frame is refused on sight and nothing more than one frame of at
    most ``max_frame`` bytes (and one chunk) is ever buffered.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, max_frame: int = MAX_FRAME) -> None:
        self.stream = stream
        self.max_frame = max_frame
        self._buf = bytearray()

    async def _fill(self, n: int, what: str) -> bool:
        """Buffer at least ``n`` bytes; False at a clean end of stream before any byte of ``what``."""
        while len(self._buf) < n:
            data = await self.stream.receive_some(CHUNK)
            if not data:
                if self._buf:
                    raise FrameError(f"stream ended inside {what} ({len(self._buf)} of {n} bytes)")
                return False
            self._buf += data
        return True

    async def next(self, limit: int | None = None) -> bytes:
        """The next frame's bytes (at most ``limit``, default ``max_frame``); EndOfChannel at a
        clean end of stream, FrameError for a frame cut short or declared over the limit."""
        limit = self.max_frame if limit is None else min(limit, self.max_frame)
        if not await self._fill(PREFIX.size, "a frame's length"):
            raise trio.EndOfChannel
        (n,) = PREFIX.unpack_from(self._buf)
        refused = check_length(n, limit)
        if refused is not None:
            raise FrameError(refused)
        del self._buf[: PREFIX.size]
        if n and not await self._fill(n, "a frame"):
            raise FrameError(f"stream ended inside a frame (0 of {n} bytes)")
        frame = bytes(self._buf[:n])
        del self._buf[:n]
        return frame


class TcpLink:
    """One authenticated link end over a TCP stream (implements :class:`node.transport.links.Link`)."""

    def __init__(self, stream: trio.SocketStream, reader: FrameReader, name: str, report: Reporter) -> None:
        self.stream = stream
        self.reader = reader
        self.name = name
        self._report = report
        self._send_lock = trio.StrictFIFOLock()
        self._closed = False

    async def send(self, data: bytes) -> None:
        async with self._send_lock:
            try:
                await self.stream.send_all(frame_bytes(data))
            except OSError as exc:
                raise trio.BrokenResourceError(f"{self.name}: {exc}") from None

    async def receive(self) -> bytes:
        try:
            return await self.reader.next()
        except FrameError as exc:
            self._report("bad-frame", f"{self.name}: {exc}; link closed")
            raise trio.BrokenResourceError(str(exc)) from None
        except (trio.BrokenResourceError, OSError) as exc:
            raise trio.BrokenResourceError(f"{self.name}: {exc}") from None

    async def aclose(self) -> None:
        """Half-close, wait (briefly) for the peer's end of stream, then close.

        Closing at once with unread input would make the kernel send a reset, which can
        destroy frames the peer has not read yet.
        """
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_GRACE):
            try:
                await self.stream.send_eof()
                while await self.stream.receive_some(CHUNK):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError, OSError):
                pass
        await trio.aclose_forcefully(self.stream)


def _report_nowhere(kind: str, cause: str) -> None:
    pass


class TcpLinks:
    """A node's TCP listener and the ``open_links`` factory for :class:`node.actor.Node`.

    Bind first (:meth:`listen`, before the node says hello, so a port clash shows at once),
    then pass :meth:`open` as the node's link opener. Set :attr:`report` to record bad
    connections in the node's error list.
    """

    def __init__(
        self,
        listeners: list[trio.SocketListener],
        *,
        max_frame: int = MAX_FRAME,
        connect_timeout: float = CONNECT_TIMEOUT,
        max_pending: int = MAX_PENDING,
        hello_timeout: float = HELLO_TIMEOUT,
        report: Reporter | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.listeners = listeners
        self.max_frame = max_frame
        self.connect_timeout = connect_timeout
        self.max_pending = max_pending
        self.hello_timeout = hello_timeout
        self._waiting: dict[int, trio.CancelScope] = {}
        """Accepted connections waiting for their hello now, oldest first (by accept number)."""
        self._accepted = 0
        self.report: Reporter = report or _report_nowhere
        self._log = log
        self.rejected = 0

    @classmethod
    async def listen(cls, host: str = "0.0.0.0", port: int = 0, **kw: Any) -> TcpLinks:
        """Bind ``host:port`` (0: any free port) with a backlog big enough for every neighbour."""
        listeners = await trio.open_tcp_listeners(port, host=host, backlog=128)
        return cls(listeners, **kw)

    @property
    def pending(self) -> int:
        """Accepted connections waiting for their hello now."""
        return len(self._waiting)

    @property
    def port(self) -> int:
        return int(self.listeners[0].socket.getsockname()[1])

    def log(self, text: str) -> None:
        if self._log is not None:
            self._log(text)

    def _reject(self, kind: str, cause: str) -> None:
        self.rejected += 1
        self.report(REJECTED, f"{kind}: {cause}")
        self.log(f"rejected a link connection: {kind}: {cause}")

    async def aclose(self) -> None:
        for lst in self.listeners:
            await lst.aclose()

    @asynccontextmanager
    async def open(self, assign: Assignment) -> AsyncIterator[dict[str, Link]]:
        """Bring up every link of ``assign.here``; keep rejecting bad callers until closed."""
        here = assign.here
        expected: dict[Coord, str] = {}
        addresses: dict[str, tuple[str, int]] = {}
        for port, peer in assign.topology.neighbours(here).items():
            expected[peer] = port
            entry = assign.peers.get(port)
            if dials(here, peer):
                try:
                    addresses[port] = (str(entry["host"]), int(entry["port"]))  # type: ignore[index]
                except (KeyError, TypeError, ValueError):
                    raise NodeAborted(f"no address for the peer on port {port} in the assignment") from None
        links: dict[str, TcpLink] = {}
        all_up = trio.Event()

        def up(port: str, link: TcpLink) -> None:
            links[port] = link
            if len(links) == len(expected):
                all_up.set()

        try:
            async with trio.open_nursery() as nursery:
                for lst in self.listeners:
                    nursery.start_soon(self._accept_loop, lst, assign, expected, links, up, nursery)
                for port, (host, tcp_port) in addresses.items():
                    nursery.start_soon(self._dial, port, host, tcp_port, assign, up)
                if not expected:
                    all_up.set()
                with trio.move_on_after(self.connect_timeout) as waited:
                    await all_up.wait()
                if waited.cancelled_caught:
                    missing = sorted(set(expected.values()) - set(links))
                    raise NodeAborted(f"links {', '.join(missing)} not up after {self.connect_timeout:g} s")
                self.log(f"{len(links)} TCP links up")
                yield dict(links)
                nursery.cancel_scope.cancel()
        finally:
            async with trio.open_nursery() as closers:
                for link in links.values():
                    closers.start_soon(link.aclose)

    async def _dial(
        self, port: str, host: str, tcp_port: int, assign: Assignment, up: Callable[[str, TcpLink], None]
    ) -> None:
        """Connect to the peer on ``port`` (retrying until it listens) and say hello."""
        delay = 0.02
        while True:
            try:
                with trio.fail_after(5):
                    stream = await trio.open_tcp_stream(host, tcp_port)
                break
            except (OSError, trio.TooSlowError) as exc:
                # refused / unreachable / name not resolvable yet: the peer is still starting
                if delay >= 0.5 and not (isinstance(exc, OSError) and exc.errno in _QUIET_ERRNOS):
                    self.log(f"dialling {port} at {host}:{tcp_port}: {exc!r}; retrying")
                await trio.sleep(delay)
                delay = min(delay * 2, 0.5)
        try:
            await stream.send_all(
                frame_bytes(encode_link(HelloFrame(assign.token, assign.here, assign.epoch)))
            )
        except (trio.BrokenResourceError, OSError) as exc:
            await trio.aclose_forcefully(stream)
            raise NodeAborted(f"link {port} to {host}:{tcp_port} broke during hello: {exc}") from None
        up(port, TcpLink(stream, FrameReader(stream, self.max_frame), f"link {port}", self.report))

    async def _accept_loop(
        self,
        listener: trio.SocketListener,
        assign: Assignment,
        expected: dict[Coord, str],
        links: dict[str, TcpLink],
        up: Callable[[str, TcpLink], None],
        nursery: trio.Nursery,
    ) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:  # e.g. EMFILE: report, back off, keep serving
                self._reject("link-accept", f"accept failed: {exc}")
                await trio.sleep(0.1)
                continue
            if self._waiting and len(self._waiting) >= self.max_pending:
                oldest = next(iter(self._waiting))  # the longest silent makes room
                self._waiting.pop(oldest).cancel()
            self._accepted += 1
            scope = self._waiting[self._accepted] = trio.CancelScope(
                deadline=trio.current_time() + self.hello_timeout
            )
            nursery.start_soon(self._greet, stream, scope, self._accepted, assign, expected, links, up)

    async def _greet(
        self,
        stream: trio.SocketStream,
        scope: trio.CancelScope,
        number: int,
        assign: Assignment,
        expected: dict[Coord, str],
        links: dict[str, TcpLink],
        up: Callable[[str, TcpLink], None],
    ) -> None:
        """Read an accepted connection's first frame; keep it only if it is the announced peer.

        ``scope`` ends the wait at the hello deadline, or sooner when the connection is the
        longest waiting and one more arrives (:meth:`_accept_loop`)."""
        caller = _caller(stream)
        reader = FrameReader(stream, self.max_frame)
        frame: Any = None
        try:
            with scope:
                try:
                    frame = decode_link(await reader.next(MAX_HELLO))
                except FrameError as exc:
                    frame = WireError(str(exc))
                except (trio.EndOfChannel, trio.BrokenResourceError, OSError):
                    frame = WireError("closed before its hello frame")
        finally:
            self._waiting.pop(number, None)
        if scope.cancelled_caught:
            frame = WireError(
                f"no hello frame within {self.hello_timeout:g} s"
                if trio.current_time() >= scope.deadline
                else f"no hello frame yet, and {self.max_pending} newer connections wait: closed to make room"
            )
        kind, cause = "", ""
        if isinstance(frame, WireError):
            kind, cause = "bad-frame", frame.cause
        elif not isinstance(frame, HelloFrame):
            kind, cause = "link-auth", f"first frame is a {type(frame).__name__}, not a hello"
        elif frame.version != PROTOCOL_VERSION:
            kind, cause = (
                "link-auth",
                f"({frame.node[0]},{frame.node[1]}) speaks protocol version {frame.version}, this node"
                f" {PROTOCOL_VERSION}: update it",
            )
        elif frame.epoch and assign.epoch and frame.epoch != assign.epoch:
            kind, cause = (
                "link-auth",
                f"({frame.node[0]},{frame.node[1]}) dials for another run (epoch {frame.epoch:x}, this"
                f" run's is {assign.epoch:x})",
            )
        elif frame.token != assign.token:
            kind, cause = (
                "link-auth",
                f"wrong run token from a caller claiming ({frame.node[0]},{frame.node[1]})",
            )
        elif frame.node not in expected or dials(assign.here, frame.node):
            kind, cause = (
                "link-auth",
                f"({frame.node[0]},{frame.node[1]}) is not a neighbour that dials this node",
            )
        elif expected[frame.node] in links:
            kind, cause = "link-auth", f"second connection for port {expected[frame.node]}"
        if kind:
            self._reject(kind, f"connection from {caller}: {cause}")
            await trio.aclose_forcefully(stream)
            return
        assert isinstance(frame, HelloFrame)
        port = expected[frame.node]
        up(port, TcpLink(stream, reader, f"link {port}", self.report))


def _caller(stream: trio.SocketStream) -> str:
    try:
        who = stream.socket.getpeername()
    except OSError:
        return "an unknown address"
    return f"{who[0]}:{who[1]}"


_QUIET_ERRNOS: Final = (errno.ECONNREFUSED,)
