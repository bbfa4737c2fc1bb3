"""A broker connection that drops while it is being set up must not end a later run.

aiomqtt leaves the error of a connection that dropped during its subscribe unread; asyncio
reports the future "never retrieved" when it is collected, and trio-asyncio raises that report
into its loop: on a containers deployment whose broker was killed just as the nodes
reconnected, the next run lost a node at whatever moment the collector ran (issue 44).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from pathlib import Path

import trio

from coordinator.runtimes.processes import local_broker
from node.transport.mqtt import BrokerAddress, open_node_control
from tests._env import need_broker

SUBSCRIBE = 0x82  # an MQTT SUBSCRIBE packet's first byte


async def _relay(src: trio.SocketStream, dst: trio.SocketStream, cut: trio.Event | None) -> None:
    """Copy ``src`` to ``dst``; with ``cut``, drop both ends once a SUBSCRIBE goes by."""
    async for chunk in src:
        if cut is not None and chunk[:1] == bytes([SUBSCRIBE]):
            cut.set()
            return
        await dst.send_all(chunk)


async def _proxy(
    upstream: BrokerAddress, listeners: list[trio.SocketListener], cuts: list[trio.Event]
) -> None:
    """Relay every connection to the broker, except the first, dropped at its SUBSCRIBE."""

    async def serve(client: trio.SocketStream) -> None:
        cut = trio.Event() if not cuts else None
        if cut is not None:
            cuts.append(cut)
        broker = await trio.open_tcp_stream(upstream.host, upstream.port)
        async with client, broker, trio.open_nursery() as relays:

            async def one_way(a: trio.SocketStream, b: trio.SocketStream, c: trio.Event | None) -> None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await _relay(a, b, c)
                relays.cancel_scope.cancel()

            relays.start_soon(one_way, client, broker, cut)
            relays.start_soon(one_way, broker, client, None)

    await trio.serve_listeners(serve, listeners)


async def test_a_connection_dropped_at_its_subscribe_does_not_end_the_node_later(tmp_path: Path) -> None:
    need_broker()
    async with local_broker(tmp_path) as broker, trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        cuts: list[trio.Event] = []
        nursery.start_soon(_proxy, broker.address, listeners, cuts)
        via = dataclasses.replace(broker.address, port=port)
        with trio.fail_after(30):
            async with open_node_control(via, "drops", (0, 0), connect_timeout=25) as control:
                assert cuts and cuts[0].is_set()  # the first connection was dropped at its subscribe
                assert control.connections == 1  # and the second one is up
                for _ in range(3):  # the dropped client is collected now: its error must stay unread
                    gc.collect()
                    await trio.sleep(0.05)
                await trio.sleep(0.2)
                assert control.connections == 1  # still the same connection, and the block ends cleanly
        nursery.cancel_scope.cancel()
