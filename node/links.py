"""Link and control-channel interfaces, and their in-memory implementations.

A link end carries msgpack bytes to one neighbour and from it — the same bytes a TCP stream
would carry. The control channel carries encoded control messages between a node and the
coordinator (an in-memory bus here, MQTT in the distributed runtimes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import trio

__all__ = ["Control", "Link", "MemoryControl", "MemoryLink", "memory_link_pair"]


class Link(Protocol):
    """One node's end of a bidirectional link."""

    async def send(self, data: bytes) -> None: ...
    async def receive(self) -> bytes: ...
    async def aclose(self) -> None: ...


class Control(Protocol):
    """A node's channel to the coordinator; messages are encoded control frames."""

    async def send(self, data: bytes) -> None: ...
    async def receive(self) -> bytes: ...


@dataclass
class MemoryLink:
    """A link end over two trio memory channels."""

    tx: trio.MemorySendChannel[bytes]
    rx: trio.MemoryReceiveChannel[bytes]

    async def send(self, data: bytes) -> None:
        await self.tx.send(data)

    async def receive(self) -> bytes:
        return await self.rx.receive()

    async def aclose(self) -> None:
        await self.tx.aclose()
        await self.rx.aclose()


def memory_link_pair(capacity: int = 16) -> tuple[MemoryLink, MemoryLink]:
    """Both ends of one bidirectional in-memory link."""
    a_tx, b_rx = trio.open_memory_channel[bytes](capacity)
    b_tx, a_rx = trio.open_memory_channel[bytes](capacity)
    return MemoryLink(a_tx, a_rx), MemoryLink(b_tx, b_rx)


@dataclass
class MemoryControl:
    """A node's end of the in-memory control bus (unbounded: reports never block a node)."""

    tx: trio.MemorySendChannel[bytes]
    rx: trio.MemoryReceiveChannel[bytes]

    async def send(self, data: bytes) -> None:
        self.tx.send_nowait(data)

    async def receive(self) -> bytes:
        return await self.rx.receive()
