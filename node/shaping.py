"""The I/O shell of a link model: hold each frame until its link says it reaches the peer.

:class:`ShapedLink` wraps a link end's sending side: ``send`` asks the link direction's
:class:`node.linkmodel.LinkShaper` when the frame arrives and queues it; one pump task per link
(started in the node's nursery) sleeps until then and passes it on, in order. Receiving is the
inner link's own. Only the free clock is shaped: lockstep time is logical, and a link model does
not change its records.
"""

from __future__ import annotations

from collections import deque

import trio

from node.linkmodel import LinkShaper
from node.links import Link

__all__ = ["SPIN", "ShapedLink"]

SPIN = 0.0011
"""Seconds before a release that the pump stops sleeping and yields until it is due instead.

Trio's sleeps end at the I/O poll's timeout, which the OS takes in whole milliseconds rounded
up: a sleep alone would deliver each frame up to 1 ms late (measured: +0.3-0.4 ms a hop, most
of the per-hop cost). Yielding for the last stretch costs some CPU while a frame is due, so
it is just over the rounding's 1 ms: node processes sharing two cores then spin less (measured
across 16 processes: per-hop host noise 0.4-0.9 ms at 1.1 ms against 0.5-0.8 ms at 1.5 ms).
"""


class ShapedLink:
    """A link end whose frames reach the peer when the link model says (FIFO, never sooner)."""

    def __init__(self, inner: Link, shaper: LinkShaper) -> None:
        self.inner = inner
        self.shaper = shaper
        self._queue: deque[tuple[float, bytes]] = deque()
        self._wake = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self._error: BaseException | None = None

    def send_nowait(self, data: bytes) -> None:
        """Queue ``data`` for its release time (the pump sends it then)."""
        if self._error is not None:
            raise trio.BrokenResourceError(f"link down: {self._error}")
        self._queue.append((self.shaper.release(trio.current_time(), len(data)), data))
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
        while True:
            if not queue:
                self._idle.set()
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            release, data = queue[0]
            await _until(release)
            queue.popleft()
            try:
                await self.inner.send(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                self._error = exc  # the next send says so, as the inner link would have
                queue.clear()
                self._idle.set()
                return


async def _until(deadline: float) -> None:
    """Return at ``deadline`` (trio's clock) to within a checkpoint, not a millisecond."""
    while True:
        left = deadline - trio.current_time()
        if left <= 0:
            return
        if left > SPIN:
            await trio.sleep_until(deadline - SPIN)
        else:
            await trio.lowlevel.checkpoint()
