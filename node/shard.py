"""A shard: one OS process hosting a block of node actors (``python -m node.shard HOST PORT INDEX``).

The in-process runtime with ``--shards N`` starts N of these, so a run uses every core. Inside a
shard the nodes are trio tasks joined by memory links; a link to a node of another shard goes
over the one TCP connection between the two shards, each frame tagged with the node and port it
is for (:class:`CrossLink`). Every node speaks the control protocol through the shard's one
control connection to the coordinator, each frame from the coordinator tagged with the node it
is for (or with none: for every node of the shard). In lockstep the shard's nodes share a sparse
step barrier that agrees every step with the other shards (:mod:`node.sync.shardstep`; or, if the
coordinator says ``sparse: false``, the α-synchronizer runs on every link), so the records are
those of the unsharded run.

Start-up: the shard listens for its peers, dials the coordinator and sends ``{token, shard,
port}``; the coordinator answers ``{topology, shards, hosts, ports, sparse}``; each shard dials
the peers with a smaller index (all of them when sparse, else those hosting a neighbour of one
of its nodes; first frame ``{token, shard}``), accepts the others, then starts its nodes.
Nothing but the hosts and ports in that answer ties the shards to one machine. The run token
comes in ``MESHCAST_SHARD_TOKEN``.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import msgpack
import trio

from node.actor import Assignment, Node
from node.sync.shardstep import ShardBarrier
from node.topology import Coord, Topology
from node.transport.links import Link, memory_link_pair
from node.transport.tcp import FrameError, FrameReader
from node.transport.wire import MAX_FRAME, frame_bytes

__all__ = [
    "BROADCAST",
    "SETUP_TIMEOUT",
    "TOKEN_ENV",
    "CrossLink",
    "FrameWriter",
    "blocks",
    "main",
    "pack",
    "run_shard",
    "shard_of",
    "unpack",
]

TOKEN_ENV: Final = "MESHCAST_SHARD_TOKEN"
SETUP_TIMEOUT: Final = 60.0
"""Seconds for the start-up exchange (coordinator answer, peer connections)."""
CLOSE_GRACE: Final = 5.0
"""Seconds a finished shard waits for its peers' end of stream (so no frame they need is cut off)."""
BROADCAST: Final = -1
"""The x of a control frame for every node of the shard."""
MAX_SHARD_FRAME: Final = MAX_FRAME + 1024


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def shard_of(topo: Topology, node: Coord, shards: int) -> int:
    """The shard hosting ``node``: contiguous blocks of the row-major order, as even as can be."""
    return topo.index(node) * shards // topo.size


def blocks(topo: Topology, shards: int) -> list[list[Coord]]:
    """The nodes of each shard, in row-major order."""
    out: list[list[Coord]] = [[] for _ in range(shards)]
    for n in topo.nodes():
        out[shard_of(topo, n, shards)].append(n)
    return out


class FrameWriter:
    """Length-prefixed frames onto a stream from many tasks, batched by one writer task."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self.stream = stream
        self._tx, self._rx = trio.open_memory_channel[bytes](math.inf)

    def send_nowait(self, payload: bytes) -> None:
        self._tx.send_nowait(frame_bytes(payload))

    def close(self) -> None:
        """No more frames: the writer sends what is queued, then ends."""
        self._tx.close()

    async def run(self) -> None:
        """Write frames until :meth:`close` (then drain and send end of stream) or the stream
        breaks (then :meth:`send_nowait` raises BrokenResourceError)."""
        try:
            async for first in self._rx:
                batch = [first]
                while True:
                    try:
                        batch.append(self._rx.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await self.stream.send_all(b"".join(batch))
            if isinstance(self.stream, trio.abc.HalfCloseableStream):
                await self.stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self._rx.close()


@dataclass
class CrossLink:
    """A link end to a node of another shard (implements :class:`node.transport.links.Link`)."""

    writer: FrameWriter
    to: Coord
    port: str
    """The peer node's port this link enters by."""
    rx: trio.MemoryReceiveChannel[bytes]

    async def send(self, data: bytes) -> None:
        self.send_nowait(data)

    def send_nowait(self, data: bytes) -> None:
        try:
            self.writer.send_nowait(pack([self.to[0], self.to[1], self.port, data]))
        except trio.ClosedResourceError:
            raise trio.BrokenResourceError("shard connection closed") from None

    async def receive(self) -> bytes:
        return await self.rx.receive()

    def receive_nowait(self) -> bytes | None:
        """The next frame if one is waiting, else None."""
        try:
            return self.rx.receive_nowait()
        except trio.WouldBlock:
            return None

    async def aclose(self) -> None:
        return None


@dataclass
class _NodeControl:
    """A node's control channel through the shard's control connection."""

    writer: FrameWriter
    rx: trio.MemoryReceiveChannel[bytes]

    async def send(self, data: bytes) -> None:
        self.writer.send_nowait(data)

    def send_nowait(self, data: bytes) -> None:
        """Send without a checkpoint (a node's reports from within a step the barrier drives)."""
        self.writer.send_nowait(data)

    async def receive(self) -> bytes:
        return await self.rx.receive()


@dataclass
class _Peer:
    """The connection to one other shard."""

    stream: trio.SocketStream
    reader: FrameReader
    writer: FrameWriter
    inboxes: dict[tuple[Coord, str], trio.MemorySendChannel[bytes]] = field(default_factory=dict)


async def _read_frame(reader: FrameReader, limit: int | None = None) -> Any:
    return unpack(await reader.next(limit))


async def _setup(
    control: trio.SocketStream, reader: FrameReader, listener: trio.SocketListener, index: int, token: str
) -> tuple[Topology, int, dict[int, _Peer], bool]:
    """The start-up exchange: the coordinator's answer, then a connection to every peer shard.

    Each stream keeps the reader that read its first frame: it may hold the bytes that follow.
    """
    port = listener.socket.getsockname()[1]
    await control.send_all(frame_bytes(pack({"token": token, "shard": index, "port": port})))
    answer = await _read_frame(reader, 1 << 20)
    topo = Topology.parse(answer["topology"])
    shards: int = answer["shards"]
    hosts: list[str] = answer["hosts"]
    ports: list[int] = answer["ports"]
    sparse = bool(answer.get("sparse"))
    if sparse:  # every shard takes part in every step's agreement
        peers = set(range(shards)) - {index}
    else:
        peers = {
            shard_of(topo, nb, shards)
            for n in blocks(topo, shards)[index]
            for nb in topo.neighbours(n).values()
        } - {index}
    streams: dict[int, _Peer] = {}
    for j in sorted(p for p in peers if p < index):
        stream = await trio.open_tcp_stream(hosts[j], ports[j])
        await stream.send_all(frame_bytes(pack({"token": token, "shard": index})))
        streams[j] = _Peer(stream, FrameReader(stream, MAX_SHARD_FRAME), FrameWriter(stream))
    while len(streams) < len(peers):
        stream = await listener.accept()
        first = FrameReader(stream, MAX_SHARD_FRAME)
        hello: Any = None
        with (
            trio.move_on_after(SETUP_TIMEOUT / 4),
            suppress(trio.EndOfChannel, trio.BrokenResourceError, FrameError, OSError, ValueError),
        ):
            hello = await _read_frame(first, 1024)
        who: Any = hello.get("shard") if isinstance(hello, dict) else None
        who = who if isinstance(who, int) else None
        if isinstance(hello, dict) and hello.get("token") == token and who in peers and who > index:
            streams.setdefault(who, _Peer(stream, first, FrameWriter(stream)))
        if who not in streams or streams[who].stream is not stream:  # a stranger, or a second one
            await trio.aclose_forcefully(stream)
    return topo, shards, streams, sparse


def _wire(topo: Topology, shards: int, index: int, peers: dict[int, _Peer]) -> dict[Coord, dict[str, Link]]:
    """Each hosted node's port → link end: memory inside the shard, :class:`CrossLink` across."""
    mine = blocks(topo, shards)[index]
    ends: dict[Coord, dict[str, Link]] = {n: {} for n in mine}
    for a in mine:
        for port, b in topo.neighbours(a).items():
            if port in ends[a]:
                continue
            back = topo.opposite(port)
            j = shard_of(topo, b, shards)
            if j == index:
                ea, eb = memory_link_pair()
                ends[a][port] = ea
                ends[b][back] = eb
            else:
                tx, rx = trio.open_memory_channel[bytes](math.inf)
                peers[j].inboxes[(a, port)] = tx
                ends[a][port] = CrossLink(peers[j].writer, b, back, rx)
    return ends


def _send_marker(writer: FrameWriter, marker: dict[str, Any]) -> None:
    writer.send_nowait(pack(marker))


def _marker(barrier: ShardBarrier | None, shard: int, marker: dict[str, Any]) -> None:
    if barrier is not None:
        barrier.marker(shard, marker)


def _opener(links: dict[str, Link]) -> Callable[[Assignment], Any]:
    """The node's links, left open when it ends: a neighbour still reading them (free clock, before
    its own stop) must not take a closed link for a fault; they go with the shard."""

    @asynccontextmanager
    async def open_links(assign: Assignment) -> AsyncIterator[dict[str, Link]]:
        yield dict(links)

    return open_links


async def _read_peer(peer: _Peer, marker: Callable[[dict[str, Any]], None]) -> None:
    """Frames from a peer shard into the inboxes of the links they are for, and its step markers
    to ``marker``."""
    try:
        while True:
            item = unpack(await peer.reader.next())
            if isinstance(item, dict):
                marker(item)
                continue
            x, y, port, data = item
            tx = peer.inboxes.get(((x, y), port))
            if tx is not None:
                tx.send_nowait(data)
    except trio.EndOfChannel:  # the peer is done: its nodes sent all they will (links stay open)
        pass
    except (trio.BrokenResourceError, FrameError, OSError, ValueError, TypeError):
        for tx in peer.inboxes.values():  # a broken connection: its links are down
            tx.close()


async def _read_control(reader: FrameReader, inboxes: dict[Coord, trio.MemorySendChannel[bytes]]) -> None:
    """Control frames from the coordinator, each to its node (or to all); returns at end of stream."""
    while True:
        try:
            x, y, data = unpack(await reader.next())
        except (trio.EndOfChannel, trio.BrokenResourceError, FrameError, OSError):
            return
        for tx in inboxes.values() if x == BROADCAST else [inboxes[(x, y)]] if (x, y) in inboxes else []:
            tx.send_nowait(data)


async def run_shard(host: str, port: int, index: int, token: str) -> None:
    """Be shard ``index`` of the run whose coordinator listens at ``host``:``port``, until it ends."""
    control = await trio.open_tcp_stream(host, port)
    # listen where the coordinator is reached from: loopback on one machine, the LAN across hosts
    listener = (await trio.open_tcp_listeners(0, host=control.socket.getsockname()[0]))[0]
    from_coordinator = FrameReader(control, MAX_SHARD_FRAME)
    with trio.fail_after(SETUP_TIMEOUT):
        topo, shards, peers, sparse = await _setup(control, from_coordinator, listener, index, token)
    await listener.aclose()
    ends = _wire(topo, shards, index, peers)
    barrier: ShardBarrier | None = None
    if sparse:
        barrier = ShardBarrier(
            ends, index, lambda n: shard_of(topo, (n[0], n[1]), shards),
            {j: partial(_send_marker, p.writer) for j, p in peers.items()},
        )  # fmt: skip
    up = FrameWriter(control)
    inboxes: dict[Coord, trio.MemorySendChannel[bytes]] = {}
    nodes: list[Node] = []
    for here, links in ends.items():
        tx, rx = trio.open_memory_channel[bytes](math.inf)
        inboxes[here] = tx
        nodes.append(Node(here, _NodeControl(up, rx), _opener(links), barrier=barrier))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(up.run)
        for j, peer in peers.items():
            nursery.start_soon(_read_peer, peer, partial(_marker, barrier, j))
            nursery.start_soon(peer.writer.run)
        async with trio.open_nursery() as hosted:

            async def control_reader() -> None:
                await _read_control(from_coordinator, inboxes)
                hosted.cancel_scope.cancel()  # the coordinator is gone: nothing to run for

            hosted.start_soon(control_reader)
            async with trio.open_nursery() as running:
                for node in nodes:
                    running.start_soon(node.run, name=f"node-{node.here[0]}-{node.here[1]}")
            hosted.cancel_scope.cancel()
        # our last frames out (then end of stream), our peers' end of stream in, within a grace
        up.close()
        for peer in peers.values():
            peer.writer.close()
        nursery.cancel_scope.deadline = trio.current_time() + CLOSE_GRACE


def main(argv: list[str] | None = None) -> int:
    """``python -m node.shard HOST PORT INDEX`` (the run token in :data:`TOKEN_ENV`)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m node.shard HOST PORT INDEX", file=sys.stderr)
        return 2
    token = os.environ.get(TOKEN_ENV, "")
    trio.run(run_shard, args[0], int(args[1]), int(args[2]), token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
