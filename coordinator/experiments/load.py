"""Offered load: Poisson traffic generators, batch-means statistics and ``meshcast load`` sweeps.

Every node is a source with exponential inter-arrival times at ``rate`` messages per step
(seeded); a message is a multicast to ``k`` uniform destinations or, with probability
``unicast_fraction``, a unicast to one (seed 004 §4.2.4 mixes 90% / 10%); a hot spot draws a
share of destinations to one node. Everything runs with shared contention. Messages injected
during the warm-up are excluded; the rest are cut by injection step into batches whose means
give the grand mean and its 95% CI (batch means, seed 004 §4.2). A point whose run does not
drain within its budget, whose batch means keep growing, or which delivers less than 90% of what
it offers during the measured window, is reported as saturated, not as a number (a wormhole run
that deadlocked says "deadlock at cycle N" instead). Under
``switching="wormhole"`` a message is one worm of ``settings.flits`` flits (a unicast: an XY
worm) and a step is a cycle; :func:`xy_bound` is the most uniform unicast traffic that
dimension-ordered routing can carry on a mesh (docs/wormhole.md, "Under load").
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.fidelity import Fidelity, judge_run
from coordinator.analysis.metrics import ci95, multicast_metrics
from coordinator.experiments.run import emulate
from coordinator.experiments.run import measured as measured_run
from coordinator.output.palette import algorithm_colour
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan, PlanError, check_algorithm
from node.topology import Coord, Topology

__all__ = ["HEADER", "LoadPoint", "Traffic", "load_point", "parse_rates", "plot_load", "poisson_plan",
           "run_plan", "xy_bound"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Traffic:
    """A traffic pattern: rate per node per step, destinations per multicast, mix and hot spot."""

    rate: float
    k: int
    duration: int
    unicast_fraction: float = 0.0
    hotspot: Coord | None = None
    hotspot_fraction: float = 0.0
    seed: int = 1
    sources: tuple[Coord, ...] | None = None
    """The nodes that inject (None: every node)."""


def poisson_plan(topology: Topology, algorithm: str, traffic: Traffic) -> Plan:
    """Injections of every node (or of ``traffic.sources``) over ``traffic.duration`` steps.

    Inter-arrival times are exponential (seeded).
    """
    if traffic.rate <= 0:
        raise PlanError(f"rate must be positive, got {traffic.rate}")
    if not 1 <= traffic.k <= topology.size - 1:
        raise PlanError(f"cannot pick {traffic.k} destinations on {topology.spec}")
    if not 0 <= traffic.unicast_fraction <= 1 or not 0 <= traffic.hotspot_fraction <= 1:
        raise PlanError("fractions must lie between 0 and 1")
    check_algorithm(algorithm, topology)
    rng = random.Random(traffic.seed)
    nodes = list(topology.nodes())
    events: list[tuple[int, Coord]] = []
    for src in nodes if traffic.sources is None else traffic.sources:
        t = rng.expovariate(traffic.rate)
        while t < traffic.duration:
            events.append((int(t), src))
            t += rng.expovariate(traffic.rate)
    events.sort()
    mcs = []
    for i, (step, src) in enumerate(events):
        others = [n for n in nodes if n != src]
        unicast = rng.random() < traffic.unicast_fraction
        want = 1 if unicast else traffic.k
        dests: list[Coord] = []
        hot = traffic.hotspot
        if hot is not None and hot != src and rng.random() < traffic.hotspot_fraction:
            dests.append(hot)
        pool = [n for n in others if n not in dests]
        dests.extend(rng.sample(pool, want - len(dests)))
        mcs.append(Multicast(i, "unicast" if unicast else algorithm, src, tuple(dests), step))
    return Plan(topology, tuple(mcs))


def xy_bound(topology: Topology) -> float | None:
    """The most uniform unicast traffic XY routing carries on a mesh, in flits per node per cycle
    (divide by L for messages of L flits per node per cycle); None on a torus.

    Every node sends λ messages of L flits per cycle to a uniform other node. Under XY the link
    from column c-1 to column c in row y carries the messages from the c sources left of it in
    that row to the (M-c)·N nodes right of the cut: λ·L·c·(M-c)·N/(MN-1) flits per cycle, the
    most at c = M/2; the Y links likewise with M·⌊N²/4⌋. A link carries one flit per cycle, so
    λ·L ≤ (MN-1)/max(N·⌊M²/4⌋, M·⌊N²/4⌋) — on a k×k mesh 4(k²-1)/k³ flits/node/cycle.
    """
    if topology.kind != "mesh":
        return None
    m, n = topology.cols, topology.rows
    load = max(n * (m * m // 4), m * (n * n // 4))
    return (m * n - 1) / load if load else None


def run_plan(plan: Plan, settings: RunSettings) -> RawRun:
    """Run ``plan`` on ``settings.runtime`` (``engines``: every node's engine in one loop, the
    in-process runtime's records without trio)."""
    return trio.run(measured_run, emulate, plan, settings, None)


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One offered-load point: what was offered and delivered, and the batch-means latency."""

    algorithm: str
    rate: float
    offered: float
    throughput: float
    latency: float | None
    ci95: tuple[float | None, float | None]
    batches: list[float]
    saturated: str | None
    messages: int
    peak_queue: int
    fidelity: Fidelity | None = None
    """Free clock: whether the hosts kept up while the point ran (:mod:`coordinator.analysis.fidelity`)."""

    def row(self) -> list[Any]:
        return [self.algorithm, self.rate, self.offered, self.throughput, self.latency, self.ci95[0],
                self.ci95[1], self.saturated or "", self.messages, self.peak_queue]  # fmt: skip


def load_point(
    topology: Topology,
    algorithm: str,
    traffic: Traffic,
    settings: RunSettings,
    warmup: int,
    batches: int = 10,
    growth: float = 2.0,
    latency_of: str | None = None,
    shortfall: float = 0.1,
) -> LoadPoint:
    """Run one offered-load point and reduce it to batch-means statistics.

    ``latency_of``: average the latency over this algorithm's messages only (the multicasts of a
    multicast/unicast mix); None averages over every message.
    ``shortfall``: a point delivering less than (1 - shortfall) × offered is saturated (its queues grow).
    """
    plan = poisson_plan(topology, algorithm, traffic)
    raw = run_plan(plan, settings)
    recs = multicast_metrics(plan, raw)
    window = traffic.duration - warmup
    measured = [r for r in recs if r.injected >= warmup]
    offered = sum(len(r.destinations) for r in measured) / (topology.size * window)
    delivered = sum(1 for a in raw.arrivals if warmup <= a.step < traffic.duration)
    throughput = delivered / (topology.size * window)
    saturated = None
    if raw.incomplete or any(r.missing for r in measured):
        stuck = [x for x in raw.incomplete if x.startswith("deadlock")]
        saturated = stuck[0].split(":")[0] if stuck else "did not drain within the step budget"
    size = max(1, math.ceil(window / batches))
    means = []
    for b in range(batches):
        lo, hi = warmup + b * size, warmup + (b + 1) * size
        lat = [
            r.time
            for r in measured
            if lo <= r.injected < hi
            and r.time is not None
            and (latency_of is None or r.algorithm == latency_of)
        ]
        if lat:
            means.append(statistics.fmean(lat))
    if saturated is None and len(means) >= 4:
        head = statistics.fmean(means[: len(means) // 4 or 1])
        tail = statistics.fmean(means[-(len(means) // 4 or 1) :])
        if head > 0 and tail > growth * head:
            saturated = f"batch-mean latency grew {tail / head:.1f}× during the run"
    if saturated is None and throughput < (1 - shortfall) * offered:
        saturated = f"delivered {throughput / offered:.0%} of the offered load"
    stats = ci95(means)
    peak = int(max(raw.peak_queue.values(), default=0))
    lat_mean = None if saturated else stats["mean"]
    ci = (None, None) if saturated else (stats["ci95"][0], stats["ci95"][1])
    fidelity = None
    if settings.clock == "free":
        fidelity = judge_run(measured, settings, raw)
    return LoadPoint(
        algorithm,
        traffic.rate,
        offered,
        throughput,
        lat_mean,
        ci,
        means,
        saturated,
        len(measured),
        peak,
        fidelity,
    )


def parse_rates(text: str) -> list[float]:
    """``a:b:n`` (n evenly spaced rates from a to b) or a comma list."""
    try:
        if ":" in text:
            a, b, n = text.split(":")
            lo, hi, count = float(a), float(b), int(n)
            if count < 1 or lo <= 0 or hi < lo:
                raise ValueError
            return [lo + (hi - lo) * i / max(count - 1, 1) for i in range(count)]
        items = text.split(",")
        if any(not x.strip() for x in items):  # "0.05,,0.1": a rate left out is a typo, not a list
            raise ValueError
        rates = [float(x) for x in items]
        if not rates or min(rates) <= 0:
            raise ValueError
        return rates
    except ValueError:
        raise ValueError(
            f"cannot read --rates {text!r}: use FROM:TO:COUNT or a comma list of positive rates"
        ) from None


def plot_load(points: Sequence[LoadPoint], path: Path, title: str, bound: float | None = None) -> None:
    """Latency and throughput against offered load; saturated points marked, not plotted.

    ``bound``: a capacity (deliveries / node / step, e.g. :func:`xy_bound` ÷ L) drawn as a line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for alg in dict.fromkeys(p.algorithm for p in points):
        ps = [p for p in points if p.algorithm == alg]
        ok = [p for p in ps if p.saturated is None]
        colour = algorithm_colour(alg)
        ax1.plot([p.offered for p in ok], [p.latency for p in ok], marker="o", label=alg, color=colour)
        sat = [p for p in ps if p.saturated is not None]
        if sat:
            top = max((p.latency or 0 for p in ok), default=1)
            ax1.scatter([p.offered for p in sat], [top * 1.1] * len(sat), marker="x", color=colour)
        ax2.plot([p.offered for p in ps], [p.throughput for p in ps], marker="o", label=alg, color=colour)
    if bound is not None:
        for ax in (ax1, ax2):
            ax.axvline(bound, color="grey", linestyle="--", label=f"XY bound {bound:.4f}")
        ax2.axhline(bound, color="grey", linestyle=":")
    ax1.set_xlabel("offered load (deliveries / node / step)")
    ax1.set_ylabel("mean multicast latency (steps)")
    ax1.set_title("latency (× = saturated)")
    ax2.set_xlabel("offered load (deliveries / node / step)")
    ax2.set_ylabel("throughput (deliveries / node / step)")
    ax2.set_title("throughput")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


HEADER = ["algorithm", "rate", "offered", "throughput", "latency", "ci95_low", "ci95_high", "saturated",
          "messages", "peak_queue"]  # fmt: skip
