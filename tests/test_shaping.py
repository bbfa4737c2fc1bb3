"""The link model's I/O shell (node/transport/shaping.py): frames leave in order, never early,
and the pump sleeps until a release rather than spinning through it (issue 42, item 4)."""

from __future__ import annotations

import random
from collections import Counter

import trio

from node.transport.linkmodel import LinkShaper, LinkSpec
from node.transport.shaping import ShapedLink
from node.transport.wire import ByeFrame, Packet, encode_link, encode_packet


class Noting:
    """A link that notes when each frame reaches it, and what."""

    def __init__(self) -> None:
        self.got: list[tuple[float, bytes]] = []

    async def send(self, data: bytes) -> None:
        self.got.append((trio.current_time(), data))

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def aclose(self) -> None:
        return None


class Steps(trio.abc.Instrument):
    """How many times each task ran (a spin runs its task once per checkpoint)."""

    def __init__(self) -> None:
        self.steps: Counter[str] = Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name] += 1


class Due(LinkShaper):
    """A link model that notes when it said each frame is due."""

    __slots__ = ("due",)

    def __init__(self, spec: LinkSpec) -> None:
        super().__init__(spec, random.Random(1))
        self.due: list[float] = []

    def release(self, now: float, nbytes: int) -> float:
        at = super().release(now, nbytes)
        self.due.append(at)
        return at


async def test_the_pump_sleeps_until_each_release() -> None:
    """Ten frames 3 ms apart on a 2 ms link (real clock): each leaves at or after its time, in
    order, and the pump runs a few steps a frame. A busy wait (as before issue 42, the last
    1.1 ms yielded) ran it once per checkpoint: dozens of steps a frame."""
    inner, shaper = Noting(), Due(LinkSpec(delay=0.002))
    link = ShapedLink(inner, shaper, 256)
    steps = Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.pump, name="pump")
            for i in range(10):
                await link.send(bytes([i]))
                await trio.sleep(0.003)
            with trio.fail_after(5):
                await link.drain()
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert [data for _, data in inner.got] == [bytes([i]) for i in range(10)]
    assert all(t >= due for (t, _), due in zip(inner.got, shaper.due, strict=True))
    assert steps.steps["pump"] <= 3 * 10 + 3, steps.steps["pump"]


async def test_a_packet_weighs_its_message_and_a_bye_its_bytes() -> None:
    """At 8 kbit/s (a byte a ms) a packet is serialised as its 1,000-byte message, a bye as its
    own three bytes: what the link model is asked for each."""
    sizes: list[int] = []

    class Sizes(LinkShaper):
        __slots__ = ()

        def release(self, now: float, nbytes: int) -> float:
            sizes.append(nbytes)
            return now

    link = ShapedLink(Noting(), Sizes(LinkSpec(rate=8e3), random.Random(1)), 1000)
    link.send_nowait(encode_packet(Packet(1, "vh", [[3, 3]], 0, 1, 0)))
    bye = encode_link(ByeFrame())
    link.send_nowait(bye)
    assert sizes == [1000, len(bye)]
