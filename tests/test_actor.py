"""A live node fed malformed frames and bad headers keeps forwarding and reports each error."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgpack
import trio

from node import protocol
from node.actor import Assignment, Node
from node.protocol import PROTOCOL_VERSION
from node.routing import registry
from node.transport.links import Link, MemoryControl, StepBarrier, memory_link_pair, queue_link_pair
from node.transport.wire import (
    Packet,
    PacketFrame,
    StepFrame,
    decode_control,
    decode_link,
    encode_control,
    encode_link,
)

MemoryControlTx = trio.MemorySendChannel[bytes]


def _assign(**over: Any) -> dict[str, Any]:
    msg = {
        "type": "assign", "run": "t", "topology": "mesh:3x1", "node": [1, 0], "port_model": "one-port",
        "contention": "isolated", "clock": "lockstep", "hop_limit": None, "max_steps": 50, "trace": False,
    }  # fmt: skip
    msg.update(over)
    return msg


def _middle_node(
    pair: Callable[[], tuple[Any, Any]] = memory_link_pair, barrier: StepBarrier | None = None
) -> tuple[Node, Any, Any, trio.MemoryReceiveChannel[bytes], MemoryControlTx]:
    """Node (1,0) of mesh:3x1 with the test holding both neighbours' link ends and the bus.

    ``pair`` makes each link's two ends (memory channels, or plain queues for the sparse
    ``barrier``)."""
    west_node, west_test = pair()
    east_node, east_test = pair()
    to_coord_tx, to_coord_rx = trio.open_memory_channel[bytes](math.inf)
    to_node_tx, to_node_rx = trio.open_memory_channel[bytes](math.inf)

    @asynccontextmanager
    async def opener(_: Assignment) -> AsyncIterator[dict[str, Link]]:
        try:
            yield {"-x": west_node, "+x": east_node}
        finally:
            await west_node.aclose()
            await east_node.aclose()

    node = Node((1, 0), MemoryControl(to_coord_tx, to_node_rx), opener, barrier=barrier)
    return node, west_test, east_test, to_coord_rx, to_node_tx


async def test_node_survives_bad_input_and_keeps_forwarding() -> None:
    node, west_test, east_test, to_coord_rx, to_node_tx = _middle_node()

    async def recv() -> dict[str, Any]:
        msg = decode_control(await to_coord_rx.receive())
        assert isinstance(msg, dict)
        return msg

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)
            assert (await recv())["type"] == "hello"
            to_node_tx.send_nowait(b"\xc1 not msgpack")  # bad control message: reported, skipped
            to_node_tx.send_nowait(encode_control(_assign(contention="shared")))
            msgs = [await recv(), await recv()]
            assert {m["type"] for m in msgs} == {"error", "ready"}
            to_node_tx.send_nowait(encode_control({"type": "plan", "last_step": 0, "multicasts": []}))
            to_node_tx.send_nowait(encode_control({"type": "start"}))

            good = Packet(7, "unicast", [2, 0], 1, 1, 0)
            bad_header = Packet(8, "unicast", "nowhere", 1, 1, 0)
            unknown = Packet(9, "warp-drive", [2, 0], 1, 1, 0)
            await west_test.send(b"\x93\x01")  # truncated msgpack
            await west_test.send(msgpack.packb(["S", "zero", 0, []]))  # wrong type
            await west_test.send(encode_link(StepFrame(0, 0, (bad_header, unknown, good))))
            await east_test.send(encode_link(StepFrame(0, 0, ())))
            forwarded = None
            east_frames = 0
            for t in range(1, 30):  # play both neighbours until the node stops by itself
                try:
                    f = decode_link(await east_test.receive())
                    await west_test.receive()
                except trio.EndOfChannel:
                    break
                assert isinstance(f, StepFrame)
                east_frames += 1
                if f.packets:
                    forwarded = (f.step, f.packets)
                await west_test.send(encode_link(StepFrame(t, 0, ())))
                await east_test.send(encode_link(StepFrame(t, 0, ())))
            # the good packet left on +x; under one-port it waited behind the two bad ones
            assert forwarded is not None
            step, packets = forwarded
            assert [p.mc for p in packets] == [7]
            assert packets[0].hops == 2
            reports = []
            while True:
                m = await recv()
                reports.append(m)
                if m["type"] == "done":
                    break
            nursery.cancel_scope.cancel()
    errors = [e for m in reports if m["type"] == "report" for e in m["errors"]]
    kinds = sorted(e[0] for e in errors)
    assert kinds == ["bad-frame", "bad-frame", "bad-header", "unknown-algorithm"]
    causes = " | ".join(e[1] for e in errors)
    assert "not msgpack" in causes and "step must be" in causes and "warp-drive" in causes
    assert reports[-1]["status"] == "ok"
    assert step == 3  # taken in at steps 1, 2, 3 (one-port input), forwarded at once
    assert east_frames == 3 + 2 + 1  # busy until step 3, then quiescent after the diameter (2)


async def test_node_reports_a_dead_link_instead_of_hanging() -> None:
    node, west_test, east_test, to_coord_rx, to_node_tx = _middle_node()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)
            await to_coord_rx.receive()
            to_node_tx.send_nowait(encode_control(_assign()))
            await to_coord_rx.receive()
            to_node_tx.send_nowait(encode_control({"type": "plan", "last_step": 0, "multicasts": []}))
            to_node_tx.send_nowait(encode_control({"type": "start"}))
            await east_test.aclose()  # the east neighbour dies
            await west_test.send(encode_link(StepFrame(0, 0, ())))
            done = None
            while done is None:
                m = decode_control(await to_coord_rx.receive())
                assert isinstance(m, dict)
                if m["type"] == "done":
                    done = m
    assert "link +x" in done["status"]


async def test_node_reports_an_out_of_order_message_instead_of_dropping_it() -> None:
    node, _west, _east, to_coord_rx, to_node_tx = _middle_node()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)
            assert decode_control(await to_coord_rx.receive()) == {
                "type": "hello",
                "node": [1, 0],
                "host": node.host,
                "algorithms": [a.name for a in registry],  # what it can run, checked before start-up
                "version": PROTOCOL_VERSION,
            }
            to_node_tx.send_nowait(encode_control({"type": "start"}))  # before any assignment
            err = decode_control(await to_coord_rx.receive())
            assert isinstance(err, dict) and err["type"] == "error"
            assert "unexpected 'start' while hello" in err["cause"]
            to_node_tx.send_nowait(encode_control({"type": "stop"}))
            done = decode_control(await to_coord_rx.receive())
            assert isinstance(done, dict) and done["type"] == "done"
            assert done["protocol_errors"] == 1
            nursery.cancel_scope.cancel()
    assert node.protocol_errors == 1


async def test_a_sparse_node_reports_bad_frames_on_its_polled_links() -> None:
    """In-process sparse lockstep: what a node polls off a link and cannot use is reported, not used."""
    node, west_test, east_test, to_coord_rx, to_node_tx = _middle_node(queue_link_pair, StepBarrier([(1, 0)]))
    for data in (
        b"\xc1 not msgpack",
        encode_link(PacketFrame(Packet(3, "unicast", [2, 0], 1, 1, 0))),
        encode_link(StepFrame(7, 0, ())),
    ):
        west_test.send_nowait(data)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)
            to_node_tx.send_nowait(encode_control(_assign()))
            # an injection at step 1 wakes the node then (it sends nothing: the barrier holds it alone)
            plan = {
                "type": "plan",
                "last_step": 1,
                "multicasts": [[1, "warp-drive", [1, 0], [[2, 0]], 1, {}]],
            }
            to_node_tx.send_nowait(encode_control(plan))
            to_node_tx.send_nowait(encode_control({"type": "start"}))
            reports: list[dict[str, Any]] = []
            while True:
                m = decode_control(await to_coord_rx.receive())
                assert isinstance(m, dict)
                reports.append(m)
                if m["type"] == "done":
                    break
            nursery.cancel_scope.cancel()
    errors = [e for m in reports if m["type"] == "report" for e in m["errors"]]
    assert sorted(e[0] for e in errors) == ["bad-frame"] * 3 + ["bad-injection"]
    causes = " | ".join(e[1] for e in errors)
    assert "not msgpack" in causes and "PacketFrame in a lockstep run" in causes
    assert "frame for step 7 where step 0 was due" in causes
    assert reports[-1]["status"] == "ok" and reports[-1]["last_step"] >= 1
    assert west_test.receive_nowait() is None and east_test.receive_nowait() is None  # nothing sent


async def test_a_node_drops_and_counts_messages_of_another_run() -> None:
    """The epoch rule on the node: another run's messages (a stale start, a stale stop) are dropped
    and counted in its final report, not taken as protocol steps or errors; its own carry its
    run's epoch, learnt from the first message of the coordinator."""
    node, _west, _east, to_coord_rx, to_node_tx = _middle_node()
    mine, other = protocol.new_epoch(), protocol.new_epoch()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(node.run)
            assert protocol.decode_stamped(await to_coord_rx.receive())[1] == 0  # no epoch known yet
            to_node_tx.send_nowait(msgpack.packb({**_assign(), "epoch": mine}, use_bin_type=True))
            to_node_tx.send_nowait(protocol.encode(protocol.Stop(), other))
            to_node_tx.send_nowait(protocol.encode(protocol.Start(), other))
            ready, epoch = protocol.decode_stamped(await to_coord_rx.receive())
            assert isinstance(ready, protocol.Ready) and epoch == mine
            to_node_tx.send_nowait(protocol.encode(protocol.Stop(), mine))
            while True:
                done, epoch = protocol.decode_stamped(await to_coord_rx.receive())
                if isinstance(done, protocol.Done):
                    break
            nursery.cancel_scope.cancel()
    assert epoch == mine and done.stale == 2 and done.protocol_errors == 0
    assert node.stale == 2
