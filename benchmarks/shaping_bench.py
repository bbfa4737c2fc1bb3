"""How late the application's link shaping releases a frame, and what it costs the host.

``python benchmarks/shaping_bench.py [--frames N] [--processes P] [--links K] [--seconds S]
[--gap-ms G] [--json FILE]``

Two measurements, both with the link model of the variation study (delay 1 ms, jitter
normal:0.25 ms):

- **one link**: one ShapedLink over a link that only notes when each frame reaches it; N frames
  sent at random gaps of 0.1-3 ms. Lateness is when the frame was passed on minus when the link
  model said it is due (trio's clock); CPU is the process's, per frame and per second of wall time.
- **P node processes** (the default 64, as mesh:8x8 on the processes runtime): each a forked
  process running trio with K shaped links (the default 4, a mesh node's ports) and their pumps,
  for S seconds, twice: with idle links (no frame at all) and with traffic, a frame on each link
  at random gaps uniform on [0, 2G] ms (mean G). Each process reports its CPU time over the
  window and every frame's lateness. This is a proxy for 64 node processes (no TCP, no actor, no
  coordinator): what it isolates is what the shaper's waiting costs, which is the only part that
  changes with how the pump waits.

``--json FILE`` writes every figure with the date, the command, the commit, the load averages
before and after, and the pump's way of waiting (``spin`` before issue 42, ``sleep``
after), so a figure taken on a busy machine says so.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import trio

from node import defaults
from node.transport import shaping
from node.transport.linkmodel import Jitter, LinkShaper, LinkSpec
from node.transport.shaping import ShapedLink

SPEC = LinkSpec(delay=0.001, jitter=Jitter("normal", 0.00025))


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


APPROACH_S = defaults.SHAPER_APPROACH_US / 1e6
"""The pumps' approach (``--approach-us``; the setting's default): set before the processes fork."""


def waiting() -> str:
    """How this checkout's pump waits for a release: ``spin`` (yields for the last SPIN seconds,
    before issue 42), ``sleep`` (trio.sleep_until, the timer's granularity taken as lateness) or
    ``approach`` (sleeps to a poll tick before the release, then yields: ``--shaper-approach``)."""
    spin = getattr(shaping, "SPIN", None)
    if spin:
        return f"spin (last {spin * 1e3:g} ms yielded)"
    if not APPROACH_S:
        return "sleep (trio.sleep_until)"
    timerfd = os.environ.get("MESHCAST_TIMERFD", "1") != "0"
    timer = "timerfd" if timerfd else "trio sleep to a poll tick before"
    return f"approach (last {APPROACH_S * 1e6:g} µs yielded, {timer})"


async def one_link(frames: int) -> tuple[list[float], float, float]:
    """Lateness of each frame (s), wall seconds and CPU seconds of the run."""
    inner = Noting()
    shaper = NotingShaper(SPEC, random.Random(1))
    link = ShapedLink(inner, shaper, 256, APPROACH_S)
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
    return [t - d for t, d in zip(inner.times, shaper.due, strict=True)], wall, cpu


@dataclass(frozen=True, slots=True)
class Node:
    """One proxy node process's job: ``links`` shaped links for ``seconds``; ``gap`` the mean
    seconds between a link's frames (None: idle links, no frame)."""

    index: int
    links: int
    seconds: float
    gap: float | None


async def _node(job: Node) -> tuple[float, float, list[float]]:
    """CPU and wall seconds over the window, and every frame's lateness (s)."""
    links = [(Noting(), NotingShaper(SPEC, random.Random(job.index * 64 + k))) for k in range(job.links)]
    shaped = [ShapedLink(inner, shaper, 256, APPROACH_S) for inner, shaper in links]

    async def traffic(link: ShapedLink, rng: random.Random, until: float) -> None:
        assert job.gap is not None
        while trio.current_time() < until:
            await link.send(b"x" * 64)
            await trio.sleep(rng.uniform(0.0, 2 * job.gap))

    wall0, cpu0 = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for link in shaped:
            nursery.start_soon(link.pump)
        until = trio.current_time() + job.seconds
        if job.gap is not None:
            async with trio.open_nursery() as senders:
                for k, link in enumerate(shaped):
                    senders.start_soon(traffic, link, random.Random(job.index * 1000 + k), until)
            with trio.fail_after(5):
                for link in shaped:
                    await link.drain()
        else:
            await trio.sleep_until(until)
        nursery.cancel_scope.cancel()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    late = [t - d for (inner, shaper) in links for t, d in zip(inner.times, shaper.due, strict=True)]
    return cpu, wall, late


def _child(job: Node, conn: Connection) -> None:
    conn.send(trio.run(_node, job))
    conn.close()


def nodes(processes: int, links: int, seconds: float, gap: float | None) -> dict[str, Any]:
    """``processes`` forked proxy nodes at once: their summed CPU, and the lateness of every frame."""
    ctx = multiprocessing.get_context("fork")
    pipes, procs = [], []
    for i in range(processes):
        rx, tx = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_child, args=(Node(i, links, seconds, gap), tx))
        p.start()
        tx.close()
        pipes.append(rx)
        procs.append(p)
    got = [rx.recv() for rx in pipes]
    for p in procs:
        p.join(timeout=30)
    cpu = sum(c for c, _, _ in got)
    wall = max(w for _, w, _ in got)
    late = [x for _, _, xs in got for x in xs]
    out: dict[str, Any] = {
        "processes": processes,
        "links_each": links,
        "seconds": seconds,
        "mean_gap_ms": None if gap is None else gap * 1e3,
        "frames": len(late),
        "cpu_s": round(cpu, 3),
        "cores_used": round(cpu / wall, 3),
        "cpu_per_process_per_s_ms": round(cpu / processes / wall * 1e3, 3),
    }
    if late:
        out["cpu_per_frame_us"] = round(cpu / len(late) * 1e6, 1)
        out["lateness_us"] = percentiles(late)
    return out


def percentiles(late: list[float]) -> dict[str, float | bool]:
    """Median, p95, p99, max and mean of ``late`` (s) in µs, and whether no frame was early."""
    us = sorted(x * 1e6 for x in late)
    q = statistics.quantiles(us, n=100, method="inclusive")
    return {
        "median": round(q[49], 1),
        "p95": round(q[94], 1),
        "p99": round(q[98], 1),
        "max": round(us[-1], 1),
        "mean": round(statistics.fmean(us), 1),
        "never_early": us[0] >= 0,
    }


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "node"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + (" (node/ modified)" if dirty.stdout.strip() else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=2000, help="one link: frames sent")
    ap.add_argument("--processes", type=int, default=64, help="proxy node processes (0: skip)")
    ap.add_argument("--links", type=int, default=4, help="shaped links in each process")
    ap.add_argument("--seconds", type=float, default=10.0, help="each proxy measurement's window")
    ap.add_argument("--gap-ms", type=float, default=100.0, help="mean ms between a link's frames")
    ap.add_argument("--json", default=None, help="write the figures here as JSON")
    ap.add_argument(
        "--approach-us", type=int, default=defaults.SHAPER_APPROACH_US,
        help="the pumps' --shaper-approach (0: sleep only)",
    )  # fmt: skip
    args = ap.parse_args()
    global APPROACH_S
    APPROACH_S = args.approach_us / 1e6
    doc: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join(["python", *sys.argv]),
        "commit": _commit(),
        "waiting": waiting(),
        "link_model": str(SPEC),
        "cores": os.cpu_count(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    late, wall, cpu = trio.run(one_link, args.frames)
    doc["one_link"] = {
        "frames": args.frames,
        "lateness_us": percentiles(late),
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "cpu_share_of_a_core": round(cpu / wall, 3),
        "cpu_per_frame_us": round(cpu / args.frames * 1e6, 1),
    }
    print(f"{doc['waiting']}, {SPEC}; one link, {args.frames} frames: {json.dumps(doc['one_link'])}")
    if args.processes:
        for name, gap in (("idle_links", None), ("traffic", args.gap_ms / 1e3)):
            doc[name] = nodes(args.processes, args.links, args.seconds, gap)
            print(f"{args.processes} processes, {name}: {json.dumps(doc[name])}")
    doc["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load averages before {doc['load_before']}, after {doc['load_after']} on {doc['cores']} cores")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
