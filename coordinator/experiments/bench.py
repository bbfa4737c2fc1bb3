"""``meshcast bench``: the limit of this design and how close the emulator gets to it.

(a) relay chain: trio tasks in a line, each receiving msgpack bytes from a memory channel,
    decoding, re-encoding and passing them on — the least work one emulated hop can cost;
(b) the in-process emulator, lockstep and free clock: 100 VH multicasts × 50 destinations on
    20×20 and 32×32 tori, and a sparse one (1 multicast × 10 destinations on a 64×64 torus):
    packet-hops and steps per second, their ratio to (a), start-up time and peak memory;
(c) wormhole switching (``switching="wormhole"``, L = 16 flits, Ts = 0, lockstep): random XY
    unicasts on a mesh (16×16; quick 8×8), in-process and on the engines runtime (every node's
    engine in one loop, no trio). ``packet_hops`` counts worm-hops, ``flit_hops`` the flits that
    crossed links; ``ratio`` is flit-hops/s ÷ (a), since a flit is what a link frame carries.
(d) with ``shards`` > 1, each dense lockstep point of (b) again on that many shard processes
    (``--shards``: one OS process per block of nodes, links between them over loopback TCP).
(e) each dense lockstep point of (b) again on the engines runtime: the same engines and lockstep
    driver in one plain loop, frames through msgpack, no trio task, link or control message —
    the nodes' own work per hop, a ceiling no I/O shell around these engines can pass.
(f) wormhole under uniform load (:data:`FLIT_LOAD`, issue #36's workload): a 10×10 mesh, XY
    unicasts, one VC, B = 8, L = 64, every node a Poisson source of 0.128 flits/node/cycle
    (``meshcast load``'s plan and defaults otherwise: one-port, Ts = 33), on the engines runtime
    and on the reference model; flit-hops/s over the whole run, start-up (building the engines
    or the model's tables) included.
Each point runs in a fresh process (so its peak RSS is its own; a sharded point's is the
coordinator's only). Rates are over the active span
(the first injection to the last delivery, from the nodes' own wall clocks); the whole run
(start → every node done, which adds a fan-out to and from every node) is reported beside them.
Figures, not assertions: speed targets live here, never in timed tests.

``meshcast bench --json`` prints ``{"relay_hops_per_s": float, "build": "plain" | "compiled",
"rows": [row, ...]}``; ``build`` says whether the node's hot modules ran compiled (``make compiled``,
mypyc) or as Python sources. A row is a :class:`BenchRow` (``to_json``); its JSON fields:
topology, runtime (the registry's name of the runtime the point ran on: "in-process" |
"engines" | "model"), shards (1 unless sharded), clock, switching
("store-and-forward" | "wormhole"), nodes, multicasts, destinations, complete, steps (None on the
free clock), span_steps (those of them in the active span, below), packet_hops, flit_hops (None
under store-and-forward), start_s, run_s, active_s, packet_hops_per_s, flit_hops_per_s (None
under store-and-forward), steps_per_s (span_steps per second of the active span: the run's idle
tail after the last delivery is not in the span), run_packet_hops_per_s, peak_rss_mb,
workload ("random plan" for (b)–(e), "uniform load" for (f), which also has
offered_flits_per_node_cycle), runs (the (b), (d) and (e) rows: the runs it is the median of),
relay_hops_per_s (the relay chain measured in the point's process
just before and after it, mean), ratio (flit_hops_per_s under wormhole, else packet_hops_per_s, ÷ that row's
relay_hops_per_s), cpu_s (the CPU seconds of the point's process over its run, every thread; left out
for a sharded point) and hops_per_cpu_s (flit-hops under wormhole, else packet-hops, per CPU-second:
the figure that compares with BookSim2's flit-hops per CPU-second, :data:`BOOKSIM_FLIT_HOPS_PER_CPU_S`).
The top-level relay_hops_per_s is the median of the rows': this shared
machine's speed drifts within minutes, so each point is compared with the limit measured beside
it, not with one measured minutes earlier.
"""

from __future__ import annotations

import multiprocessing
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Final, NamedTuple

import msgpack
import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes import registry
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan, random_plan
from node.topology import Topology

__all__ = ["BOOKSIM_FLIT_HOPS_PER_CPU_S",
           "FLIT_LOAD", "RELAY_PACKET", "SWITCHING", "WORM_FLITS", "BenchPoint", "BenchRow", "EmulatorPoint",
           "FlitLoad", "FlitLoadPoint", "Point",
           "WormPoint", "bench_points", "beside_relay", "flit_load_point", "flit_load_points", "relay_chain",
           "run_bench", "wormhole_point", "wormhole_points"]  # fmt: skip

SWITCHING = "store-and-forward"


class Point(NamedTuple):
    """An emulator point: random multicasts on a torus, in-process, under a clock."""

    topology: str
    clock: str  # "lockstep" | "free"
    multicasts: int
    destinations: int  # per multicast


class EmulatorPoint(NamedTuple):
    """A :class:`Point` with its shards and runtime: the arguments of :func:`emulator_point`."""

    topology: str
    clock: str
    multicasts: int
    destinations: int
    shards: int = 1
    runtime: str = "in-process"


class WormPoint(NamedTuple):
    """A wormhole point: random XY unicasts on a mesh: the arguments of :func:`wormhole_point`."""

    topology: str
    runtime: str  # "in-process" | "engines" | "model"
    multicasts: int  # unicast messages
    destinations: int  # per message


class FlitLoadPoint(NamedTuple):
    """A flit-level load point: the arguments of :func:`flit_load_point`."""

    runtime: str  # "engines" | "model"
    quick: bool


BenchPoint = EmulatorPoint | WormPoint | FlitLoadPoint
"""What :func:`beside_relay` measures: the arguments of one of the three measuring functions."""
WORM_FLITS = 16


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One measured point of the bench (its JSON fields: the module's docstring)."""

    topology: str
    workload: str
    runtime: str
    shards: int
    clock: str
    switching: str
    nodes: int
    multicasts: int
    destinations: int
    runs: int | None
    offered_flits_per_node_cycle: float | None
    complete: bool
    steps: int | None
    span_steps: int | None
    packet_hops: int
    flit_hops: int | None
    start_s: float
    run_s: float
    active_s: float
    packet_hops_per_s: float
    flit_hops_per_s: float | None
    steps_per_s: float | None
    run_packet_hops_per_s: float | None
    peak_rss_mb: float
    relay_hops_per_s: float | None = None
    """Set by :func:`beside_relay`."""
    ratio: float | None = None
    """Set by :func:`run_bench`."""
    cpu_s: float | None = None
    """CPU seconds the point's process spent on the run (every thread; None for a sharded point,
    whose shard processes are not counted)."""
    hops_per_cpu_s: float | None = None
    """Flit-hops (wormhole) or packet-hops per CPU-second of :attr:`cpu_s`: what compares with
    BookSim2's flit-hops per CPU-second (:data:`BOOKSIM_FLIT_HOPS_PER_CPU_S`)."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset(
        {"runs", "offered_flits_per_node_cycle", "relay_hops_per_s", "ratio", "cpu_s", "hops_per_cpu_s"}
    )
    """The fields a row of another kind (or not measured beside the relay chain) leaves out of its JSON."""

    def to_json(self) -> dict[str, Any]:
        """The row as ``meshcast bench --json`` writes it (a field in :attr:`OPTIONAL` left out when None)."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in self.OPTIONAL}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BenchRow:
        """A row back from its JSON (fields of other tools, such as ``best_of``, ignored)."""
        values: dict[str, Any] = {f.name: d.get(f.name) for f in fields(cls)}
        return cls(**values)

    @property
    def booksim_ratio(self) -> float | None:
        """Flit-hops per CPU-second over BookSim2's on this machine kind (wormhole rows only)."""
        if self.flit_hops is None or self.hops_per_cpu_s is None:
            return None
        return round(self.hops_per_cpu_s / BOOKSIM_FLIT_HOPS_PER_CPU_S, 2)

    @property
    def rate(self) -> float:
        """What the ratio divides: flit-hops/s under wormhole, else packet-hops/s."""
        return self.flit_hops_per_s if self.flit_hops_per_s is not None else self.packet_hops_per_s


@dataclass(frozen=True, slots=True)
class FlitLoad:
    """A wormhole load workload: XY unicasts from every node of a mesh, Poisson at ``flits_per_node``
    flits per node per cycle (messages of ``flits`` flits), injected for ``duration`` cycles."""

    topology: str
    flits: int
    buffer_flits: int
    flits_per_node: float
    duration: int


FLIT_LOAD: Final = FlitLoad("mesh:10x10", flits=64, buffer_flits=8, flits_per_node=0.128, duration=2000)
"""Issue #36's speed workload (10×10 mesh, XY, 1 VC, B = 8, L = 64, 0.128 flits/node/cycle):
``meshcast load --topology mesh:10x10 --algorithms unicast --dests 1 --switching wormhole
--buffer-flits 8 --flits 64 --rates 0.002 --duration 2000`` runs the same plan."""


BOOKSIM_FLIT_HOPS_PER_CPU_S: Final = 830_000.0
"""BookSim2 (``booksim m10b8.cfg``: 10×10 mesh, XY, 1 VC, B = 8, L = 64, 0.002 packets/node/cycle)
on this 2-core machine kind, whole process: 60,856 cycles in about 6.2 CPU-seconds, 12,171 packets of
64 flits over 6.6 links each, ≈ 5.14 M flit-hops — 0.83 M flit-hops per CPU-second (measured by the
issue that asked for the comparison; the config and README are in the project's shared BookSim2
folder, docs/wormhole.md "Speed" says how to measure it again: ``benchmarks/booksim_speed.py``)."""


def _cpu_rates(hops: int, cpu: float, shards: int = 1) -> dict[str, float | None]:
    """A row's CPU fields: the seconds and hops per CPU-second (None for a sharded point)."""
    if shards > 1:
        return {"cpu_s": None, "hops_per_cpu_s": None}
    return {"cpu_s": round(cpu, 3), "hops_per_cpu_s": hops / max(cpu, 1e-9)}


RELAY_PACKET: Final = [1, "vh", [[3, 4], [5, 6], [7, 8]], 1, 1, 0]
"""The relay chain's packet: a packet's six fields with a small header (6 msgpack objects in it)."""


Relay = Callable[[trio.MemoryReceiveChannel[bytes], trio.MemorySendChannel[bytes]], Awaitable[None]]
"""One task of the relay chain: what it does with each packet it receives before sending it on."""


async def decode_relay(rx: trio.MemoryReceiveChannel[bytes], tx: trio.MemorySendChannel[bytes]) -> None:
    """The bench's relay task: decode each packet, count its hop, encode it and pass it on."""
    async with rx, tx:
        async for data in rx:
            pkt = msgpack.unpackb(data)
            pkt[3] += 1
            await tx.send(msgpack.packb(pkt))


async def _relay_chain(
    length: int, packets: int, payloads: Sequence[bytes] = (), relay: Relay = decode_relay
) -> float:
    """Seconds to push ``packets`` msgpack packets (``payloads`` in turn) through ``length`` tasks."""
    payloads = list(payloads) or [msgpack.packb(RELAY_PACKET)]
    chans = [trio.open_memory_channel[bytes](16) for _ in range(length + 1)]

    async def sink(rx: trio.MemoryReceiveChannel[bytes]) -> None:
        async with rx:
            async for _ in rx:
                pass

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(length):
            nursery.start_soon(relay, chans[i][1], chans[i + 1][0])
        nursery.start_soon(sink, chans[length][1])
        async with chans[0][0] as tx:
            for i in range(packets):
                await tx.send(payloads[i % len(payloads)])
    return time.perf_counter() - t0


def relay_chain(
    length: int = 64, packets: int = 5000, payloads: Sequence[bytes] = (), relay: Relay = decode_relay
) -> float:
    """Hops per second of the relay chain (its own small packet, or ``payloads``: packets' msgpack
    bytes; ``relay``: what each task does, :func:`decode_relay` for the bench's limit)."""
    secs = trio.run(_relay_chain, length, packets, payloads, relay)
    return length * packets / secs


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def _active(raw: RawRun, plan: Plan) -> tuple[float, int]:
    """The active span's seconds and lockstep steps: first injection to last delivery, on the
    nodes' own wall clocks (without those, as on the reference model: the whole run).

    Its steps are not the run's last step: after the last delivery the α-synchronizer's end
    takes a diameter's worth of idle steps more (the sparse 64×64 point's run has 127 steps,
    its last delivery is near step 60), done after the span the rates divide by.
    """
    walls = [a.wall_ns for a in raw.arrivals if a.wall_ns is not None]
    starts = [ns for ns, _ in raw.injected.values()]
    if not (walls and starts):
        return max(raw.wall_s, 1e-9), raw.last_step
    steps = max(a.step for a in raw.arrivals) - min(m.step for m in plan.multicasts)
    return max((max(walls) - min(starts)) / 1e9, 1e-9), steps


def _timed_run(plan: Plan, settings: RunSettings) -> tuple[RawRun, float, float, int]:
    """Run ``plan`` on ``settings.runtime``: the raw run, the whole time, and the seconds and steps
    the rates divide by (the active span; a runtime that is one plain loop, the engines runtime or
    the reference model, whose nodes have no wall clocks of their own: its whole loop)."""
    t0 = time.perf_counter()
    raw = trio.run(emulate, plan, settings, None)
    total = time.perf_counter() - t0
    raw.wall_s = raw.wall_s or total
    if not registry.get(settings.runtime).is_async:
        return raw, total, max(raw.wall_s, 1e-9), raw.last_step
    return (raw, total, *_active(raw, plan))


SPARSE_RUNS = 5
"""Runs of a sparse point (one multicast), the median one reported: its active span is ~10 ms,
so a single run measures as much the machine's scheduling as the emulator. The row's
``peak_rss_mb`` is the process's peak over all of them, its relay chain measured around all."""


def emulator_point(
    spec: str, clock: str, multicasts: int, dests: int, shards: int = 1, runtime: str = "in-process"
) -> BenchRow:
    """One run of ``multicasts`` random VH multicasts of ``dests`` destinations, measured:
    in-process, or (lockstep) on the engines runtime, whose rates are over its whole loop.
    A sparse point (one multicast) is run :data:`SPARSE_RUNS` times; its row is the median run."""
    topo = Topology.parse(spec)
    plan = random_plan(topo, ["vh"], dests, multicasts, seed=1)
    runs = SPARSE_RUNS if multicasts == 1 else 1
    settings = RunSettings(clock=clock, shards=shards, runtime=runtime)
    timed: list[tuple[RawRun, float, float, int, float]] = []
    for _ in range(runs):
        cpu0 = time.process_time()
        timed.append((*_timed_run(plan, settings), time.process_time() - cpu0))
    timed.sort(key=lambda r: r[2])  # by active span: the median run is the row
    raw, total, active, span_steps, cpu = timed[len(timed) // 2]
    hops = sum(raw.traffic.values())
    steps = raw.last_step if clock == "lockstep" else None
    return BenchRow(
        topology=spec,
        workload="random plan",
        runtime=runtime,
        shards=shards,
        clock=clock,
        switching=SWITCHING,
        nodes=topo.size,
        multicasts=multicasts,
        destinations=dests,
        runs=runs,
        offered_flits_per_node_cycle=None,
        complete=not raw.incomplete and len(raw.arrivals) == multicasts * dests,
        steps=steps,
        span_steps=span_steps if steps is not None else None,
        packet_hops=hops,
        flit_hops=None,
        start_s=round(max(total - raw.wall_s, 0.0), 3),
        run_s=round(raw.wall_s, 3),
        active_s=round(active, 3),
        packet_hops_per_s=hops / active,
        flit_hops_per_s=None,
        steps_per_s=span_steps / active if steps is not None else None,
        run_packet_hops_per_s=hops / raw.wall_s if raw.wall_s > 0 else None,
        peak_rss_mb=round(_peak_rss_mb(), 1),
        **_cpu_rates(hops, cpu, shards),
    )


def wormhole_point(spec: str, runtime: str, multicasts: int, dests: int) -> BenchRow:
    """One wormhole run (L = 16, Ts = 0) of random unicasts to ``dests`` nodes each, measured.

    The in-process rates are over the active span as above; the engines runtime and the reference
    model (``model``, what the wormhole reproductions run on) have no node wall clocks, so their
    rates are over the whole run.
    """
    topo = Topology.parse(spec)
    plan = random_plan(topo, ["unicast"], dests, multicasts, seed=1)
    settings = RunSettings(
        contention="shared",
        switching="wormhole",
        flits=WORM_FLITS,
        ts=0,
        max_steps=100_000,
        runtime=runtime,
    )
    cpu0 = time.process_time()
    raw, total, active, steps = _timed_run(plan, settings)
    cpu = time.process_time() - cpu0
    hops = sum(raw.traffic.values())
    flits = sum(raw.link_sends.values())
    return BenchRow(
        topology=spec,
        workload="random plan",
        runtime=runtime,
        shards=1,
        clock="lockstep",
        switching="wormhole",
        nodes=topo.size,
        multicasts=multicasts,
        destinations=dests,
        runs=None,
        offered_flits_per_node_cycle=None,
        complete=not raw.incomplete and len(raw.arrivals) == multicasts * dests,
        steps=raw.last_step,
        span_steps=steps,
        packet_hops=hops,
        flit_hops=flits,
        start_s=round(max(total - raw.wall_s, 0.0), 3),
        run_s=round(raw.wall_s, 3),
        active_s=round(active, 3),
        packet_hops_per_s=hops / active,
        flit_hops_per_s=flits / active,
        steps_per_s=steps / active,
        run_packet_hops_per_s=hops / raw.wall_s if raw.wall_s > 0 else None,
        peak_rss_mb=round(_peak_rss_mb(), 1),
        **_cpu_rates(flits, cpu),
    )


def flit_load_point(runtime: str, quick: bool = False) -> BenchRow:
    """:data:`FLIT_LOAD` (quick: a quarter of its duration) on the engines runtime or the model.

    The rates divide by the whole run, start-up included: building the engines (or the model's
    tables) to the last node done. ``steps`` is the run's last cycle.
    """
    from coordinator.experiments.load import Traffic, poisson_plan

    w = replace(FLIT_LOAD, duration=FLIT_LOAD.duration // 4) if quick else FLIT_LOAD
    topo = Topology.parse(w.topology)
    plan = poisson_plan(topo, "unicast", Traffic(w.flits_per_node / w.flits, 1, w.duration, seed=1))
    settings = RunSettings(
        contention="shared",
        switching="wormhole",
        flits=w.flits,
        buffer_flits=w.buffer_flits,
        max_steps=4 * w.duration,  # load's step budget (--budget-factor 4)
        runtime=runtime,
    )
    cpu0 = time.process_time()
    raw, total, _, _ = _timed_run(plan, settings)
    cpu = time.process_time() - cpu0
    hops = sum(raw.traffic.values())
    flits = sum(raw.link_sends.values())
    return BenchRow(
        topology=w.topology,
        workload="uniform load",
        runtime=runtime,
        shards=1,
        clock="lockstep",
        switching="wormhole",
        nodes=topo.size,
        multicasts=len(plan.multicasts),
        destinations=1,
        runs=None,
        offered_flits_per_node_cycle=w.flits_per_node,
        complete=not raw.incomplete and len(raw.arrivals) == len(plan.multicasts),
        steps=raw.last_step,
        span_steps=raw.last_step,
        packet_hops=hops,
        flit_hops=flits,
        start_s=0.0,
        run_s=round(total, 3),
        active_s=round(total, 3),
        packet_hops_per_s=hops / total,
        flit_hops_per_s=flits / total,
        steps_per_s=raw.last_step / total,
        run_packet_hops_per_s=hops / total,
        peak_rss_mb=round(_peak_rss_mb(), 1),
        **_cpu_rates(flits, cpu),
    )


def flit_load_points(quick: bool = False) -> list[FlitLoadPoint]:
    """The (f) points: :data:`FLIT_LOAD` on the engines runtime and on the reference model."""
    return [FlitLoadPoint(runtime, quick) for runtime in ("engines", "model")]


def wormhole_points(quick: bool = False) -> list[WormPoint]:
    """The wormhole points: random XY unicasts on a 16×16 mesh (quick: 8×8), in-process, on the
    engines and on the reference model."""
    spec, m, k = ("mesh:8x8", 10, 5) if quick else ("mesh:16x16", 50, 10)
    return [WormPoint(spec, runtime, m, k) for runtime in ("in-process", "engines", "model")]


def bench_points(quick: bool = False, large: bool = False) -> list[Point]:
    """The emulator points: dense 20×20 and 32×32 (lockstep, free), sparse 64×64; quick: smaller."""
    if quick:
        dense, sparse = [("torus:8x8", 10, 10)], ("torus:16x16", 1, 10)
    else:
        dense, sparse = [("torus:20x20", 100, 50), ("torus:32x32", 100, 50)], ("torus:64x64", 1, 10)
    if large:
        dense.append(("torus:128x128", 100, 50))
    points = [Point(spec, clock, m, k) for spec, m, k in dense for clock in ("lockstep", "free")]
    return points + [Point(sparse[0], clock, sparse[1], sparse[2]) for clock in ("lockstep", "free")]


def beside_relay(measure: Callable[..., BenchRow], point: BenchPoint, chain: tuple[int, int]) -> BenchRow:
    """``measure(*point)`` with the relay chain (``chain``: length, packets) run just before and
    just after it in the same process: the row's ``relay_hops_per_s`` is their mean.

    This machine's speed drifts by a third within minutes, so a limit measured once at the start
    of a several-minute bench says little about the speed a later point ran at.
    """
    before = relay_chain(*chain)
    row = measure(*point)
    return replace(row, relay_hops_per_s=round((before + relay_chain(*chain)) / 2, 1))


def run_bench(
    quick: bool = False,
    large: bool = False,
    progress: Callable[[int, int], None] | None = None,
    shards: int = 1,
) -> tuple[float, list[BenchRow]]:
    """The relay-chain limit (hops/s) and one row per emulator point, with its ratio to the limit.

    Each row's ratio divides by the relay chain measured beside that point (:func:`beside_relay`);
    the limit returned is the median of those.
    """
    chain = (16, 500) if quick else (64, 2000)
    points = bench_points(quick, large)
    dense = [p for p in points if p.clock == "lockstep" and p.multicasts > 1]
    sharded = [EmulatorPoint(*p, shards) for p in dense if shards > 1]
    engines = [EmulatorPoint(*p, 1, "engines") for p in dense]
    jobs: list[tuple[Callable[..., BenchRow], BenchPoint]] = [
        *((emulator_point, p) for p in [*(EmulatorPoint(*pt) for pt in points), *sharded, *engines]),
        *((wormhole_point, p) for p in wormhole_points(quick)),
        *((flit_load_point, p) for p in flit_load_points(quick)),
    ]
    rows = []
    ctx = multiprocessing.get_context("spawn")
    for i, (measure, point) in enumerate(jobs):
        if progress is not None:
            progress(i, len(jobs))
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            row = pool.submit(beside_relay, measure, point, chain).result()
        assert row.relay_hops_per_s is not None
        rows.append(replace(row, ratio=round(row.rate / row.relay_hops_per_s, 3)))
    if progress is not None:
        progress(len(jobs), len(jobs))
    return statistics.median(r.relay_hops_per_s or 0.0 for r in rows), rows
