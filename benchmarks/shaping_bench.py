"""How late the application's link shaping releases a frame, and what its spin costs.

``python benchmarks/shaping_bench.py [FRAMES]``: one ShapedLink (delay 1 ms, jitter
normal:0.25 ms) over a link that only notes when each frame reaches it; frames are sent at
random gaps of 0.1-3 ms. Lateness is when the frame was passed on minus when the link model said
it is due (trio's clock). Prints the lateness percentiles in microseconds and the CPU time the
process used per frame and per second of wall time (the pump yields, rather than sleeps, for the
last ``node.shaping.SPIN`` seconds before a release).
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import trio

from node.linkmodel import Jitter, LinkShaper, LinkSpec
from node.shaping import SPIN, ShapedLink


class Noting:
    """A link that notes when each frame reaches it."""

    def __init__(self) -> None:
        self.times: list[float] = []

    async def send(self, data: bytes) -> None:
        self.times.append(trio.current_time())

    def send_nowait(self, data: bytes) -> None:
        self.times.append(trio.current_time())

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def aclose(self) -> None:
        return None


class NotingShaper(LinkShaper):
    """A link model that notes when it said each frame is due."""

    __slots__ = ("due",)

    def __init__(self, spec: LinkSpec, rng: random.Random) -> None:
        super().__init__(spec, rng)
        self.due: list[float] = []

    def release(self, now: float, nbytes: int) -> float:
        at = super().release(now, nbytes)
        self.due.append(at)
        return at


async def measure(frames: int) -> tuple[list[float], float, float]:
    """Lateness of each frame (s), wall seconds and CPU seconds of the run."""
    inner = Noting()
    spec = LinkSpec(delay=0.001, jitter=Jitter("normal", 0.00025))
    shaper = NotingShaper(spec, random.Random(1))
    due = shaper.due
    link = ShapedLink(inner, shaper)
    gaps = random.Random(2)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.pump)
        for _ in range(frames):
            await link.send(b"x" * 64)
            await trio.sleep(gaps.uniform(0.0001, 0.003))
        with trio.fail_after(5):
            await link.drain()
        nursery.cancel_scope.cancel()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return [t - d for t, d in zip(inner.times, due, strict=True)], wall, cpu


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    late, wall, cpu = trio.run(measure, frames)
    us = sorted(x * 1e6 for x in late)
    q = statistics.quantiles(us, n=100)
    print(f"{frames} frames, SPIN {SPIN * 1e3:g} ms; lateness (µs): median {q[49]:.1f}, p95 {q[94]:.1f}, "
          f"p99 {q[98]:.1f}, max {us[-1]:.1f}; never early: {us[0] >= 0}")  # fmt: skip
    per_frame = cpu / frames * 1e6
    print(f"wall {wall:.2f} s, CPU {cpu:.2f} s ({cpu / wall:.0%} of a core), {per_frame:.0f} µs CPU a frame")


if __name__ == "__main__":
    main()
