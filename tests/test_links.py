"""In-process link ends (node/transport/links.py): the plain-queue end of the sparse barrier keeps a
link's contract."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from node.transport.links import queue_link_pair


async def test_frames_arrive_in_order_without_waiting() -> None:
    a, b = queue_link_pair()
    assert b.receive_nowait() is None
    for data in (b"1", b"2", b"3"):
        a.send_nowait(data)
    assert [b.receive_nowait() for _ in range(4)] == [b"1", b"2", b"3", None]
    b.send_nowait(b"back")
    assert await a.receive() == b"back"


async def test_receive_waits_for_a_frame() -> None:
    a, b = queue_link_pair()
    got: list[bytes] = []

    async def reader() -> None:
        got.append(await b.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        await a.send(b"late")
    assert got == [b"late"]


async def test_close_is_end_of_channel_for_the_peer_after_its_frames() -> None:
    a, b = queue_link_pair()
    a.send_nowait(b"last")
    await a.aclose()
    assert await b.receive() == b"last"
    with pytest.raises(trio.EndOfChannel):
        await b.receive()
    with pytest.raises(trio.BrokenResourceError):
        b.send_nowait(b"to nobody")
    with pytest.raises(trio.ClosedResourceError):
        a.send_nowait(b"after close")


async def test_a_parked_reader_wakes_on_the_peers_close() -> None:
    a, b = queue_link_pair()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def reader() -> None:
                with pytest.raises(trio.EndOfChannel):
                    await b.receive()

            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            await a.aclose()
