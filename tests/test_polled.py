"""The actor's await-free in-process step (node/sync/polled.py): which frames it takes, keeps and refuses."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine
from node.switching.lockstep import Lockstep
from node.sync.polled import LinkDown, polled_frames, polled_step, usable
from node.topology import Topology
from node.transport.links import PolledLink, queue_link_pair
from node.transport.wire import HelloFrame, Packet, StepFrame, WireError, encode_link

TOPO = Topology.parse("mesh:3x1")


def _frame(step: int, *packets: Packet) -> bytes:
    return encode_link(StepFrame(step, step, tuple(packets)))


def test_usable_says_why_a_frame_is_refused() -> None:
    assert usable(StepFrame(4, 0, ()), 4) == StepFrame(4, 0, ())
    assert usable(StepFrame(5, 0, ()), 4, ahead=True) == StepFrame(5, 0, ())
    assert usable(StepFrame(5, 0, ()), 4) == "frame for step 5 where step 4 was due"
    assert usable(WireError("not msgpack"), 4) == "not msgpack"
    assert usable(HelloFrame("t", (0, 0)), 4) == "HelloFrame in a lockstep run"


def test_takes_the_step_before_keeps_the_next_and_reports_the_rest() -> None:
    west, here_w = queue_link_pair()
    east, here_e = queue_link_pair()
    links: dict[str, PolledLink] = {"-x": here_w, "+x": here_e}
    west.send_nowait(b"\xc1")  # not msgpack: reported, and the good frame behind it is taken
    west.send_nowait(_frame(2))
    east.send_nowait(_frame(3))  # the east neighbour already did step 3: kept for the next step
    early: dict[str, StepFrame] = {}
    bad: list[tuple[str, str]] = []
    frames = polled_frames(3, ("+x", "-x"), links, early, lambda p, cause: bad.append((p, cause)))
    assert list(frames) == ["-x"] and frames["-x"].step == 2
    assert list(early) == ["+x"] and early["+x"].step == 3
    assert [p for p, _ in bad] == ["-x"] and "not msgpack" in bad[0][1]
    # next step: the kept frame is used, nothing is read from the link for it
    frames = polled_frames(4, ("+x", "-x"), links, early, bad.append)  # type: ignore[arg-type]
    assert list(frames) == ["+x"] and frames["+x"].step == 3 and early == {}


def test_a_step_sends_its_packets_and_names_whom() -> None:
    here = (1, 0)
    engine = Engine(TOPO, here, registry, NodeSettings())
    clock = Lockstep(engine, ["+x", "-x"], diameter=TOPO.diameter, max_steps=10)
    west, here_w = queue_link_pair()
    east, here_e = queue_link_pair()
    links: dict[str, PolledLink] = {"+x": here_e, "-x": here_w}
    neighbours: dict[str, Hashable] = {"+x": (2, 0), "-x": (0, 0)}
    polled_step(0, clock, links, {}, lambda p, c: None, neighbours)
    # the west neighbour sent a unicast for (2, 0) at step 0: this node forwards it east at step 1
    west.send_nowait(_frame(0, Packet(7, "unicast", [2, 0], 1, 1, 0)))
    sent = polled_step(1, clock, links, {}, lambda p, c: None, neighbours)
    assert sent == [(2, 0)]
    data = east.receive_nowait()
    assert data is not None and east.receive_nowait() is None and west.receive_nowait() is None


async def test_a_closed_link_is_named() -> None:
    here = (1, 0)
    engine = Engine(TOPO, here, registry, NodeSettings())
    clock = Lockstep(engine, ["+x", "-x"], diameter=TOPO.diameter, max_steps=10)
    west, here_w = queue_link_pair()
    east, here_e = queue_link_pair()
    await east.aclose()
    links: dict[str, PolledLink] = {"+x": here_e, "-x": here_w}
    neighbours: dict[str, Hashable] = {"+x": (2, 0), "-x": (0, 0)}
    west.send_nowait(_frame(0, Packet(7, "unicast", [2, 0], 1, 1, 0)))
    polled_step(0, clock, links, {}, lambda p, c: None, neighbours)
    with pytest.raises(LinkDown, match=r"link \+x is down \(BrokenResourceError\)"):
        polled_step(1, clock, links, {}, lambda p, c: None, neighbours)
