"""One sparse lockstep step of a node in one process: polled frames in, non-empty frames out.

In one process the step barrier calls each due node's step (:meth:`node.transport.links.StepBarrier.drive`);
nothing a node does within a step awaits (the barrier says when a neighbour's frame is there),
so it lives here, apart from the actor: this module is compiled in the compiled build
(``make compiled``), the actor, whose ``except*`` mypyc rejects, is not. Every node-step of an
in-process lockstep run passes through :func:`polled_step`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import trio

from node.switching.engine import Engine
from node.switching.lockstep import Lockstep, grouped
from node.transport.links import PolledLink, QueueLink
from node.transport.wire import (
    LinkFrame,
    StepFrame,
    WireError,
    decode_link,
    encode_link,
    encode_step,
    step_head,
    step_packets,
)

__all__ = ["FUSED", "LinkDown", "fused_step", "layered_step", "polled_frames", "polled_step", "usable"]


FUSED = True
"""Whether :func:`polled_step` takes :func:`fused_step` where it can (the tests turn it off
to compare the records of both ways)."""


class LinkDown(Exception):
    """A link this node sends on is closed or broken (the message names it)."""


def usable(frame: LinkFrame | WireError, due: int, *, ahead: bool = False) -> StepFrame | str:
    """``frame`` if it is a step frame of step ``due`` (or, ``ahead``, of the next), else why not."""
    if isinstance(frame, StepFrame):
        if frame.step == due or (ahead and frame.step == due + 1):
            return frame
        return f"frame for step {frame.step} where step {due} was due"
    if isinstance(frame, WireError):
        return frame.cause
    return f"{type(frame).__name__} in a lockstep run"


def _take(link: PolledLink) -> bytes | None:
    """The link's next frame if one waits; a QueueLink's (in-process) by a direct compiled call."""
    if isinstance(link, QueueLink):
        return link.receive_nowait()
    return link.receive_nowait()


def polled_frames(
    t: int,
    ports: tuple[str, ...],
    links: dict[str, PolledLink],
    early: dict[str, StepFrame],
    bad: Callable[[str, str], None],
) -> dict[str, StepFrame]:
    """The frames of step ``t - 1`` already waiting, by port (a step-``t`` one kept in ``early``).

    A frame that is not a usable step frame is passed to ``bad`` (port, cause) and skipped.
    """
    frames: dict[str, StepFrame] = {}
    prev = t - 1
    for p in ports:
        frame = early.pop(p, None) if early else None
        if frame is None:
            link = links[p]
            if isinstance(link, QueueLink):  # _take, inline (once a port a node-step): no call
                waiting = link.waiting
                data = waiting.pop(0) if waiting else None
            else:
                data = link.receive_nowait()
            while data is not None:
                got = decode_link(data)
                if type(got) is StepFrame and (got.step == prev or got.step == t):  # usable(), inline
                    frame = got
                    break
                why = usable(got, prev, ahead=True)
                if isinstance(why, StepFrame):
                    frame = why
                    break
                bad(p, why)
                data = _take(link)
        if frame is None:
            continue
        if frame.step == t:  # sent this step by a neighbour that went first: next step's
            early[p] = frame
        else:
            frames[p] = frame
    return frames


def polled_step(
    t: int,
    clock: Lockstep,
    links: dict[str, PolledLink],
    early: dict[str, StepFrame],
    bad: Callable[[str, str], None],
    neighbours: dict[str, Hashable],
) -> list[Hashable]:
    """Do step ``t`` of ``clock`` with the frames waiting on ``links`` and send the non-empty ones;
    the neighbours sent one (``neighbours``: who is across each port), as the barrier wants them.

    :class:`LinkDown` if a link it sends on is down. The common case, packets at an idle node,
    takes :func:`fused_step`; the rest :func:`layered_step`.
    """
    if FUSED and t > 0 and not early:
        fused = fused_step(t, clock, links, neighbours)
        if fused is not None:
            return fused
    return layered_step(t, clock, links, early, bad, neighbours)


def layered_step(
    t: int,
    clock: Lockstep,
    links: dict[str, PolledLink],
    early: dict[str, StepFrame],
    bad: Callable[[str, str], None],
    neighbours: dict[str, Hashable],
) -> list[Hashable]:
    """:func:`polled_step` through the general layers: the frames decoded, the clock's
    :meth:`Lockstep.work` (its engine's whole step), each frame encoded."""
    frames = polled_frames(t, clock.ports, links, early, bad) if t > 0 else {}
    return _work(t, clock, links, frames, neighbours)


def _work(
    t: int,
    clock: Lockstep,
    links: dict[str, PolledLink],
    frames: dict[str, StepFrame],
    neighbours: dict[str, Hashable],
) -> list[Hashable]:
    """Step ``t`` with ``frames`` through :meth:`Lockstep.work`; its frames encoded and sent."""
    sent: list[Hashable] = []
    for p, frame in clock.work(t, frames).items():
        link = links[p]
        try:  # _put, inline
            if isinstance(link, QueueLink):
                link.send_nowait(encode_link(frame))
            else:
                link.send_nowait(encode_link(frame))
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock) as exc:
            raise LinkDown(f"link {p} is down ({type(exc).__name__})") from None
        sent.append(neighbours[p])
    return sent


def fused_step(
    t: int, clock: Lockstep, links: dict[str, PolledLink], neighbours: dict[str, Hashable]
) -> list[Hashable] | None:
    """Step ``t`` in one pass where it is the common case, else None (nothing read): an idle
    packet engine without credit flow, no injection, a frame of step ``t - 1`` first on each
    link that has any, carrying packets only, one packet in all or (isolated contention) one
    per multicast. The frames' bytes are read and the sends' written without frame or packet
    objects, and the engine's and clock's general steps are not entered
    (:meth:`node.switching.engine.Engine.take_each`, :meth:`Lockstep.took_in`); the records are
    the same (tests/test_fused_step.py)."""
    engine = clock.engine
    if type(engine) is not Engine or not engine.fusable or not clock.fusable(t):
        return None
    found: list[list[bytes]] = []
    head = step_head(t - 1)
    for p in clock.ports:
        link = links[p]
        if type(link) is not QueueLink:
            return None
        waiting = link.waiting
        if waiting:  # the first is of step t - 1, or the neighbour sent none then (one of t: early)
            if not waiting[0].startswith(head):
                return None
            found.append(waiting)
    if not found:
        return None
    if len(found) == 1:  # one frame (a sparse run's every step)
        got = step_packets(found[0][0], t - 1)
        if got is None:
            return None
        busy, arrivals = got
    else:
        busy = -1
        arrivals = []
        for waiting in found:
            got = step_packets(waiting[0], t - 1)
            if got is None:
                return None
            if got[0] > busy:
                busy = got[0]
            arrivals += got[1]
    if not arrivals:
        return None
    if len(arrivals) > 1 and (not engine.isolated or len({a[0] for a in arrivals}) < len(arrivals)):
        return None  # two packets in one domain: one waits (the general step)
    for waiting in found:
        del waiting[0]  # a frame of step t behind it (a neighbour that went first) waits for step t + 1
    sends = engine.take_each(t, arrivals)
    busy = clock.took_in(t, busy)
    if not sends:
        return []
    if len(sends) == 1:  # a sparse run's every hop
        port, packet = sends[0]
        _put(links, port, encode_step(t, busy, [packet]))
        return [neighbours[port]]
    by_port = grouped(sends)
    sent: list[Hashable] = []
    for port in clock.ports:
        packets = by_port.get(port)
        if packets is not None:
            _put(links, port, encode_step(t, busy, packets))
            sent.append(neighbours[port])
    return sent


def _put(links: dict[str, PolledLink], port: str, data: bytes) -> None:
    """Send ``data`` on ``port``; :class:`LinkDown` if the link is down."""
    try:
        links[port].send_nowait(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock) as exc:
        raise LinkDown(f"link {port} is down ({type(exc).__name__})") from None
