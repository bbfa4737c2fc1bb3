"""The I/O shell of a link model: hold each frame until its link says it reaches the peer.

:class:`ShapedLink` wraps a link end's sending side: ``send`` asks the link direction's
:class:`node.transport.linkmodel.LinkShaper` when the frame arrives and queues it; one pump task per link
(started in the node's nursery) sleeps on the run's timerfd (:mod:`node.transport.alarm`) until
``approach`` (``--shaper-approach``) before then, yields to the node's other tasks until it is
due, and passes it on, in order; what lateness is left is the host's
(``benchmarks/shaping_bench.py``). A packet is serialised at the link's rate as the message it
stands for (``--flits`` × ``--flit-bytes``), not as its encoded header. Receiving is the inner
link's own. Only the free clock is shaped: lockstep time is logical, and a link model does not
change its records.
"""

from __future__ import annotations

from collections import deque

import trio

from node.transport.alarm import alarm
from node.transport.linkmodel import LinkShaper
from node.transport.links import Link
from node.transport.wire import PACKET_PREFIX

__all__ = ["POLL_TICK", "ShapedLink"]

POLL_TICK = 0.001
"""Seconds: the I/O poll's timeout is whole milliseconds rounded up, so trio's own sleep can end
this much after its deadline (a pump without a timerfd stops sleeping this much earlier)."""


class ShapedLink:
    """A link end whose frames reach the peer when the link model says (FIFO, never sooner)."""

    def __init__(self, inner: Link, shaper: LinkShaper, message_bytes: int, approach: float = 0.0) -> None:
        self.inner = inner
        self.approach = approach
        """Seconds before a release at which the pump stops sleeping and yields until it is due."""
        self.shaper = shaper
        self.message_bytes = message_bytes
        """What a packet frame weighs on the link's rate: the message's L flits × the flit size
        (the papers' β·L), not its encoded header's length; other frames (a bye) weigh their bytes."""
        self._queue: deque[tuple[float, bytes]] = deque()
        self._wake = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self._error: BaseException | None = None

    def send_nowait(self, data: bytes) -> None:
        """Queue ``data`` for its release time (the pump sends it then)."""
        if self._error is not None:
            raise trio.BrokenResourceError(f"link down: {self._error}")
        nbytes = self.message_bytes if data.startswith(PACKET_PREFIX) else len(data)
        self._queue.append((self.shaper.release(trio.current_time(), nbytes), data))
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self._wake.set()

    async def send(self, data: bytes) -> None:
        self.send_nowait(data)
        await trio.lowlevel.checkpoint()

    async def receive(self) -> bytes:
        return await self.inner.receive()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def drain(self) -> None:
        """Wait until every queued frame has been passed on (or the link failed)."""
        await self._idle.wait()

    async def pump(self) -> None:
        """Pass each frame on at its release time, in order; runs until cancelled."""
        queue = self._queue
        precise = alarm() if self.approach > 0 else None
        while True:
            if not queue:
                self._idle.set()
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            release, data = queue[0]
            # sleep until ``approach`` before the release, then yield to the node's other tasks
            # until it is due: a wake-up from sleep comes late (a timerfd's ~0.1 ms on a virtual
            # machine's idle core; trio's own sleep ends on the I/O poll's next whole millisecond,
            # so without a timerfd the sleep ends a poll tick earlier still)
            if self.approach <= 0:  # sleep only: the least CPU, up to a poll tick late
                await trio.sleep_until(release)
            else:
                if precise is not None:
                    await precise.sleep_until(release - self.approach)
                else:
                    await trio.sleep_until(release - self.approach - POLL_TICK)
                while trio.current_time() < release:
                    await trio.sleep(0)
            queue.popleft()
            try:
                await self.inner.send(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                self._error = exc  # the next send says so, as the inner link would have
                queue.clear()
                self._idle.set()
                return
