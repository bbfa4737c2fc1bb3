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

:class:`Judge` judges a point as BookSim2 does instead (its ``TrafficManager::_SingleSim``): the run
is cut into sample periods; warm-up periods first, then the point has converged once the
latency and the accepted traffic change by at most a threshold over three periods in a row, and
it is unstable as soon as the mean latency (in-flight packets counted at their age) passes a
bound, or when it does not converge within the periods run. ``Traffic.pattern`` (uniform,
transpose, bitcomp, hotspot: BookSim2's names), ``Traffic.injection`` (poisson, bernoulli,
periodic) and ``Traffic.pick_self`` (uniform traffic that may address its source, as BookSim2's)
are BookSim2's measurement conventions as options; a self-addressed message never enters the
network: it is delivered at once, after its start-up and serialisation (Ts + L cycles under
wormhole, 0 steps under store-and-forward).
"""

from __future__ import annotations

import bisect
import math
import random
import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from coordinator.analysis.fidelity import Fidelity, judge_run
from coordinator.analysis.metrics import MulticastResult, ci95, multicast_metrics
from coordinator.output.palette import algorithm_colour
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan, PlanError, check_algorithm
from node.routing import registry
from node.routing.unicast import UNICASTS
from node.switching.vocabulary import prep_table
from node.topology import Coord, Topology

__all__ = ["EXTRA", "HEADER", "INJECTIONS", "PATTERNS", "Judge", "LoadPoint", "Traffic", "TrafficPlan",
           "load_point", "parse_rates", "plot_load", "poisson_plan", "run_plan", "skipped_point",
           "traffic_plan", "xy_bound"]  # fmt: skip

PATTERNS = ("uniform", "transpose", "bitcomp", "hotspot")
"""Destination patterns, named as BookSim2's src/traffic.cpp names them."""
INJECTIONS = ("poisson", "bernoulli", "periodic")
"""Injection processes: exponential gaps (today's), a coin per cycle (BookSim2's), one every 1/rate steps."""


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
    pattern: str = "uniform"
    """Destinations: ``uniform`` (``k`` of the other nodes, or of all nodes with ``pick_self``),
    ``transpose`` ((x, y) to (y, x); square networks), ``bitcomp`` ((x, y) to (M-1-x, N-1-y): the
    bit complement of the node number on a 2^n × 2^n network) or ``hotspot`` (every message to
    ``hotspot``); the last three send one destination (``k`` = 1)."""
    injection: str = "poisson"
    """``poisson``: exponential inter-arrival times; ``bernoulli``: each step a message with
    probability ``rate`` (BookSim2's injection_process); ``periodic``: one every 1/rate steps."""
    pick_self: bool = False
    """Uniform unicast traffic picks its destination among all nodes, the source included (BookSim2)."""


@dataclass(frozen=True, slots=True)
class TrafficPlan:
    """A traffic pattern's plan, and the self-addressed messages kept out of it (step, node)."""

    plan: Plan
    selves: tuple[tuple[int, Coord], ...] = ()


def poisson_plan(topology: Topology, algorithm: str, traffic: Traffic) -> Plan:
    """Injections of every node (or of ``traffic.sources``) over ``traffic.duration`` steps.

    Inter-arrival times are exponential (seeded) unless ``traffic.injection`` says otherwise;
    self-addressed messages (``pick_self`` and the permutation patterns) are left out.
    """
    return traffic_plan(topology, algorithm, traffic).plan


def _times(rng: random.Random, traffic: Traffic) -> list[int]:
    """One source's injection steps under ``traffic.injection``."""
    rate, duration = traffic.rate, traffic.duration
    if traffic.injection == "bernoulli":
        return [t for t in range(duration) if rng.random() < rate]
    if traffic.injection == "periodic":
        # a list, not a set: above one message a step, steps repeat (below, they cannot)
        return [int(i / rate) for i in range(math.ceil(duration * rate) + 1) if int(i / rate) < duration]
    out = []
    t = rng.expovariate(rate)
    while t < duration:
        out.append(int(t))
        t += rng.expovariate(rate)
    return out


def _check_traffic(topology: Topology, traffic: Traffic) -> None:
    """PlanError naming what ``traffic`` asks that cannot be made on ``topology``."""
    if traffic.rate <= 0:
        raise PlanError(f"rate must be positive, got {traffic.rate}")
    if traffic.pattern not in PATTERNS:
        raise PlanError(f"unknown traffic pattern {traffic.pattern!r} (known: {', '.join(PATTERNS)})")
    if traffic.injection not in INJECTIONS:
        raise PlanError(f"unknown injection {traffic.injection!r} (known: {', '.join(INJECTIONS)})")
    if traffic.injection == "bernoulli" and traffic.rate > 1:
        raise PlanError(f"bernoulli injection takes a rate of at most 1 message per step, got {traffic.rate}")
    if not 1 <= traffic.k <= topology.size - 1:
        raise PlanError(f"cannot pick {traffic.k} destinations on {topology.spec}")
    if traffic.k != 1 and (traffic.pattern != "uniform" or traffic.pick_self):
        what = f"traffic {traffic.pattern}" if traffic.pattern != "uniform" else "picking the source itself"
        raise PlanError(f"{what} sends one destination per message, not {traffic.k}")
    if traffic.pattern == "transpose" and topology.cols != topology.rows:
        raise PlanError(f"transpose traffic needs a square network, not {topology.spec}")
    if traffic.pattern == "hotspot" and traffic.hotspot is None:
        raise PlanError("hotspot traffic needs a hot spot node")
    if traffic.pattern != "uniform" and traffic.hotspot_fraction > 0:
        raise PlanError(f"a hot-spot fraction mixes a hot spot into uniform traffic, not {traffic.pattern}")
    if not 0 <= traffic.unicast_fraction <= 1 or not 0 <= traffic.hotspot_fraction <= 1:
        raise PlanError("fractions must lie between 0 and 1")


def traffic_plan(topology: Topology, algorithm: str, traffic: Traffic) -> TrafficPlan:
    """:func:`poisson_plan`'s plan and the self-addressed messages it leaves out (seeded).

    Under the defaults (uniform, Poisson, no self) the random draws are those of earlier versions,
    so a seed gives the same plan as before.
    """
    _check_traffic(topology, traffic)
    check_algorithm(algorithm, topology)
    rng = random.Random(traffic.seed)
    nodes = list(topology.nodes())
    events: list[tuple[int, Coord]] = []
    for src in nodes if traffic.sources is None else traffic.sources:
        events.extend((t, src) for t in _times(rng, traffic))
    events.sort()
    mcs: list[Multicast] = []
    selves: list[tuple[int, Coord]] = []
    for step, src in events:
        unicast = rng.random() < traffic.unicast_fraction
        want = 1 if unicast else traffic.k
        dests: list[Coord] = []
        if traffic.pattern == "transpose":
            dests = [(src[1], src[0])]
        elif traffic.pattern == "bitcomp":
            dests = [(topology.cols - 1 - src[0], topology.rows - 1 - src[1])]
        elif traffic.pattern == "hotspot":
            assert traffic.hotspot is not None
            dests = [traffic.hotspot]
        elif traffic.pick_self:
            dests = [rng.choice(nodes)]
        else:
            others = [n for n in nodes if n != src]
            hot = traffic.hotspot
            if hot is not None and hot != src and rng.random() < traffic.hotspot_fraction:
                dests.append(hot)
            pool = [n for n in others if n not in dests]
            dests.extend(rng.sample(pool, want - len(dests)))
        if dests == [src]:
            selves.append((step, src))
            continue
        # the unicast share of mixed traffic: the unicast rule, or the algorithm when it is one (dor)
        single = algorithm if algorithm in UNICASTS else "unicast"
        mcs.append(Multicast(len(mcs), single if unicast else algorithm, src, tuple(dests), step))
    return TrafficPlan(Plan(topology, tuple(mcs)), tuple(selves))


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
    in-process runtime's records without trio). trio and the runtimes are imported here, when a point
    runs: ``load --help`` and a bad option need neither."""
    import trio

    from coordinator.experiments.run import emulate, measured

    return trio.run(measured, emulate, plan, settings, None)


@dataclass(frozen=True, slots=True)
class Judge:
    """BookSim2's convergence test (src/trafficmanager.cpp ``_SingleSim``; its defaults).

    The run is cut into periods of ``sample_period`` steps, ``max_samples`` of them at most; the
    first ``warmup_periods`` warm up (statistics cleared every second period, and once more when
    they end; 0: until the first calm period). After each period the mean latency since the last
    clearing (warm-up: of the packets delivered since; running: of those created since) and the
    accepted traffic are compared with the period before: a change above ``threshold`` (relative;
    BookSim2's warmup_thres, stopping_thres and their acc_ twins) resets the count of converging
    periods, and ``converge`` of them in a row end the point as converged. The point is unstable
    as soon as the mean latency of the delivered packets and of every flit still in flight
    (counted at its packet's age) passes ``latency_bound`` (latency_thres), also while the
    measured packets drain (checked every 1000 steps) or after, or when the periods run out first.
    """

    sample_period: int
    max_samples: int = 10
    warmup_periods: int = 3
    latency_bound: float = 500.0
    threshold: float = 0.05
    converge: int = 3


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One offered-load point: what was offered and delivered, and the batch-means latency.

    The fields after ``fidelity`` say how the point was measured and judged (``to_json``); they
    have defaults so that points stored before them still read. ``cycles``, ``wall_s`` and ``cpu_s``
    are not compared: the runtimes end a run at different steps, and times vary.
    """

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
    flits: int | None = None
    """Flits per packet (message) under wormhole; None under store-and-forward (a packet is not cut)."""
    offered_packets: float | None = None
    """Packets offered per node per step in the measured window: one per destination of the messages
    created there (a unicast message is one packet; self-addressed ones included)."""
    accepted_packets: float | None = None
    """Packets (one per destination reached) delivered per node per step in the measured window."""
    window: tuple[int, int] | None = None
    """The measured window [from, to) in steps."""
    link_sends: int = 0
    """Flits (wormhole) or packets (store-and-forward) sent on links over the whole run: flit-hops."""
    self_addressed: int = 0
    """Messages addressed to their source (delivered at once, never in the network), whole run."""
    verdict: str = ""
    """``stable``/``saturated`` (batch judging) or ``converged``/``unstable`` (:class:`Judge`)."""
    why: str = ""
    deadlock_cycle: int | None = None
    periods: list[dict[str, Any]] = field(default_factory=list)
    """:class:`Judge`: each period judged: its end, the latency, the accepted rate and their changes."""
    ran: bool = True
    """False: not run, a lower rate of the same algorithm was already unstable."""
    cycles: int = field(default=0, compare=False)
    """Steps the run simulated (its last step + 1)."""
    wall_s: float = field(default=0.0, compare=False)
    cpu_s: float = field(default=0.0, compare=False)
    """Wall and CPU time (``time.process_time``) of making and running the point's plan and judging it."""

    def row(self) -> list[Any]:
        return [self.algorithm, self.rate, self.offered, self.throughput, self.latency, self.ci95[0],
                self.ci95[1], self.saturated or "", self.messages, self.peak_queue]  # fmt: skip

    def extra(self) -> list[Any]:
        """The columns :data:`EXTRA` names, after ``row()``'s in ``meshcast load``'s load.csv."""
        d = self.to_json()
        return [d[k] if d[k] is not None else "" for k in EXTRA]

    def to_json(self) -> dict[str, Any]:
        """The point as ``meshcast load --json`` and load.json give it."""
        per = self.flits

        def times(x: float | None) -> float | None:
            return None if x is None or per is None else x * per

        return {
            "algorithm": self.algorithm,
            "rate": self.rate,
            "ran": self.ran,
            "verdict": self.verdict,
            "why": self.why,
            "saturated": self.saturated,
            "deadlock_cycle": self.deadlock_cycle,
            "flits_per_packet": self.flits,
            "offered_packets": self.offered_packets,
            "offered_flits": times(self.offered_packets),
            "accepted_packets": self.accepted_packets,
            "accepted_flits": times(self.accepted_packets),
            "offered_deliveries": self.offered,
            "throughput_deliveries": self.throughput,
            "latency": self.latency,
            "latency_ci95": list(self.ci95),
            "window": None if self.window is None else list(self.window),
            "messages": self.messages,
            "self_addressed": self.self_addressed,
            "cycles": self.cycles,
            "flit_hops": self.link_sends if per is not None else None,
            "link_sends": self.link_sends,
            "peak_queue": self.peak_queue,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "batches": self.batches,
            "periods": self.periods,
        }


EXTRA = ["verdict", "offered_packets", "offered_flits", "accepted_packets", "accepted_flits", "flit_hops",
         "cycles", "wall_s", "cpu_s", "deadlock_cycle"]  # fmt: skip
"""Columns ``meshcast load`` adds at the end of load.csv (HEADER's come first, unchanged)."""


def skipped_point(algorithm: str, traffic: Traffic, below: float, flits: int | None) -> LoadPoint:
    """A rate not run because the lower rate ``below`` of the same algorithm was unstable."""
    why = f"unstable: the lower rate {below:.4g} was unstable (not run)"
    return LoadPoint(algorithm, traffic.rate, traffic.rate * traffic.k, math.nan, None, (None, None), [], why,
                     0, 0, flits=flits, offered_packets=traffic.rate, verdict="unstable", why=why,
                     ran=False)  # fmt: skip


_DEADLOCK = re.compile(r"deadlock at cycle (\d+)")


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
    judge: Judge | None = None,
) -> LoadPoint:
    """Run one offered-load point and reduce it to batch-means statistics.

    ``latency_of``: average the latency over this algorithm's messages only (the multicasts of a
    multicast/unicast mix); None averages over every message.
    ``shortfall``: a point delivering less than (1 - shortfall) × offered is saturated (its queues grow).
    ``judge``: judge it as BookSim2 does (:class:`Judge`; ``warmup``, ``batches``, ``growth`` and
    ``shortfall`` are then not used); None: the batch-means judging above.
    """
    wall0, cpu0 = time.perf_counter(), time.process_time()
    made = traffic_plan(topology, algorithm, traffic)
    plan = made.plan
    raw = run_plan(plan, settings)
    recs = multicast_metrics(plan, raw)
    wormhole = settings.switching == "wormhole"
    flits = settings.flits if wormhole else None
    prep = prep_table(settings.prep, registry).get(algorithm, 0)  # as the engine reads it
    self_latency = settings.ts + settings.flits + prep if wormhole else 0
    found = [int(m.group(1)) for x in raw.incomplete if (m := _DEADLOCK.search(x))]
    common: dict[str, Any] = dict(
        flits=flits,
        link_sends=sum(raw.link_sends.values()),
        self_addressed=len(made.selves),
        deadlock_cycle=found[0] if found else None,
        cycles=raw.last_step + 1,
    )
    peak = int(max(raw.peak_queue.values(), default=0))
    if judge is not None:
        point = _converged_point(topology, algorithm, traffic, made, raw, recs, judge, self_latency, peak,
                                 latency_of, common)  # fmt: skip
    else:
        point = _batch_point(topology, algorithm, traffic, made, raw, recs, warmup, batches, growth,
                             latency_of, shortfall, peak, self_latency, common)  # fmt: skip
    fidelity = None
    if settings.clock == "free":
        measured = [r for r in recs if point.window is not None and r.injected >= point.window[0]]
        fidelity = judge_run(measured, settings, raw)
    return replace(point, fidelity=fidelity, wall_s=time.perf_counter() - wall0,
                   cpu_s=time.process_time() - cpu0)  # fmt: skip


def _batch_point(
    topology: Topology,
    algorithm: str,
    traffic: Traffic,
    made: TrafficPlan,
    raw: RawRun,
    recs: list[MulticastResult],
    warmup: int,
    batches: int,
    growth: float,
    latency_of: str | None,
    shortfall: float,
    peak: int,
    self_latency: int,
    common: dict[str, Any],
) -> LoadPoint:
    """Today's judging: batch means over [warmup, duration), drained, not growing, delivering 90%."""
    window = traffic.duration - warmup
    measured = [r for r in recs if r.injected >= warmup]
    selves = [step for step, _ in made.selves if step >= warmup]  # none unless the traffic asks for them
    offered = (sum(len(r.destinations) for r in measured) + len(selves)) / (topology.size * window)
    delivered = sum(1 for a in raw.arrivals if warmup <= a.step < traffic.duration)
    delivered += sum(1 for step in selves if step + self_latency < traffic.duration)
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
        if latency_of is None:
            lat += [self_latency for step in selves if lo <= step < hi]
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
    lat_mean = None if saturated else stats["mean"]
    ci = (None, None) if saturated else (stats["ci95"][0], stats["ci95"][1])
    why = saturated or f"drained, batch means within {growth:g}×, delivered at least {1 - shortfall:.0%}"
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
        None,
        offered_packets=offered,
        accepted_packets=throughput,
        window=(warmup, traffic.duration),
        verdict="saturated" if saturated else "stable",
        why=why,
        **common,
    )


def _converged_point(
    topology: Topology,
    algorithm: str,
    traffic: Traffic,
    made: TrafficPlan,
    raw: RawRun,
    recs: list[MulticastResult],
    judge: Judge,
    self_latency: int,
    peak: int,
    latency_of: str | None,
    common: dict[str, Any],
) -> LoadPoint:
    """BookSim2's judging (:class:`Judge`) of a run already made."""
    n = topology.size
    flits = common["flits"] or 1
    # every message: (created, done or None, counted for latency); self-addressed ones done at once
    msgs = [(r.injected, None if r.time is None else r.injected + r.time,
             latency_of is None or r.algorithm == latency_of) for r in recs]  # fmt: skip
    msgs += [(step, step + self_latency, True) for step, _ in made.selves]
    arrivals = sorted([a.step for a in raw.arrivals] + [step + self_latency for step, _ in made.selves])
    end_of_run = raw.last_step + 1
    stuck = common["deadlock_cycle"]
    cut = stuck is None and bool(raw.incomplete)
    verdict = _periods(msgs, arrivals, n, judge, end_of_run, stuck, flits, cut)
    reason, start, stop, periods = verdict
    measured = [m for m in msgs if start <= m[0] < stop]
    done = [m for m in measured if m[1] is not None]
    lat_samples = [m[1] - m[0] for m in done if m[2] and m[1] is not None]
    size = judge.sample_period
    means = []
    for lo in range(start, stop, size):
        xs = [m[1] - m[0] for m in done if lo <= m[0] < lo + size and m[2] and m[1] is not None]
        if xs:
            means.append(statistics.fmean(xs))
    window = max(1, stop - start)
    delivered = sum(1 for a in arrivals if start <= a < stop)
    offered_deliveries = sum(len(r.destinations) for r in recs if start <= r.injected < stop)
    offered_deliveries += sum(1 for step, _ in made.selves if start <= step < stop)
    unstable = reason.startswith("unstable")
    mean = statistics.fmean(lat_samples) if lat_samples and not unstable else None
    stats = ci95(means)  # the spread of the periods' means, around the mean over every packet
    half = None if stats["mean"] is None else (stats["ci95"][1] - stats["ci95"][0]) / 2
    ci = (None, None) if mean is None or half is None else (mean - half, mean + half)
    return LoadPoint(
        algorithm,
        traffic.rate,
        offered_deliveries / (n * window),
        delivered / (n * window),
        mean,
        ci,
        means,
        reason if unstable else None,
        len(measured),
        peak,
        None,
        offered_packets=offered_deliveries / (n * window),
        accepted_packets=delivered / (n * window),
        window=(start, stop),
        verdict="unstable" if unstable else "converged",
        why=reason,
        periods=periods,
        **common,
    )


def _periods(
    msgs: list[tuple[int, int | None, bool]],
    arrivals: list[int],
    n: int,
    judge: Judge,
    end_of_run: int,
    stuck: int | None,
    weight: int,
    cut: bool,
) -> tuple[str, int, int, list[dict[str, Any]]]:
    """Walk the sample periods as ``_SingleSim`` does: (why, measured from, measured to, periods).

    ``msgs``: (created, done or None, counted for latency) per message; ``arrivals``: the steps
    packets were delivered (sorted); ``end_of_run``: the first step the run did not simulate;
    ``stuck``: the cycle a deadlock was found; ``cut``: the step budget ended the run;
    ``weight``: flits per packet. As in BookSim2 the
    latency checked against the bound averages over delivered packets and in-flight *flits* (a
    packet not delivered counts once per flit, at its age).
    """
    p, bound, thr = judge.sample_period, judge.latency_bound, judge.threshold
    prev_lat = prev_acc = 0.0
    reset = 0
    running = clear = False
    converged = 0
    run_from = 0
    streak_from = 0
    periods: list[dict[str, Any]] = []
    for phase in range(judge.max_samples):
        if clear or (not running and phase % 2 == 0):
            clear = False
            reset = phase * p
            if running:
                run_from = reset
        t = (phase + 1) * p
        if stuck is not None and stuck < t:
            return f"unstable: deadlock at cycle {stuck} (period {phase + 1})", run_from, t, periods
        if cut and t > end_of_run:
            return (
                f"unstable: the step budget ran out at step {end_of_run} (period {phase + 1})",
                run_from,
                t,
                periods,
            )
        if running:  # packets created while running, delivered by t
            done = [d - c for c, d, ok in msgs if ok and d is not None and run_from <= c and d < t]
        else:  # packets delivered since the last clearing
            done = [d - c for c, d, ok in msgs if ok and d is not None and reset <= d < t]
        flying = [t - c for c, d, ok in msgs if ok and c < t and (d is None or d >= t)]
        lat = statistics.fmean(done) if done else 0.0
        with_flying = (sum(done) + weight * sum(flying)) / max(1, len(done) + weight * len(flying))
        acc = _count(arrivals, reset, t) / (n * (t - reset))
        d_lat = abs(lat - prev_lat) / lat if lat else math.inf
        d_acc = abs(acc - prev_acc) / acc if acc else math.inf
        prev_lat, prev_acc = lat, acc
        periods.append({"period": phase + 1, "end": t, "state": "running" if running else "warming up",
                        "latency": lat, "latency_with_in_flight": with_flying, "accepted_packets": acc,
                        "latency_change": _finite(d_lat), "accepted_change": _finite(d_acc)})  # fmt: skip
        if with_flying > bound:
            return (f"unstable: latency {with_flying:.4g} > bound {bound:g} in period {phase + 1}",
                    run_from, t, periods)  # fmt: skip
        calm = d_lat <= thr and d_acc <= thr
        if not running:  # warmup_periods 0: warmed up once calm (BookSim2's rule then)
            if (phase + 1 >= judge.warmup_periods) if judge.warmup_periods > 0 else calm:
                running = clear = True
        elif calm:
            if converged == 0:
                streak_from = phase + 1
            converged += 1
            if converged >= judge.converge:
                why = _drain(msgs, run_from, t, judge, streak_from, phase + 1, stuck, end_of_run, weight)
                return why, run_from, t, periods
        else:
            converged = 0
    return (f"unstable: did not converge within {judge.max_samples} periods of {p} steps", run_from,
            judge.max_samples * p, periods)  # fmt: skip


def _drain(
    msgs: list[tuple[int, int | None, bool]],
    run_from: int,
    t: int,
    judge: Judge,
    first: int,
    last: int,
    stuck: int | None,
    end_of_run: int,
    weight: int,
) -> str:
    """Converged at ``t``: the packets created since ``run_from`` drain; latency checked each 1000 steps."""
    bound, thr = judge.latency_bound, judge.threshold
    ours = [(c, d) for c, d, ok in msgs if ok and run_from <= c < t]
    if any(d is None for _, d in ours):
        left = (
            "a deadlock at cycle " + str(stuck)
            if stuck is not None
            else f"the run's end at step {end_of_run}"
        )
        return f"unstable: measured packets undelivered at {left} (draining)"
    finish = max((d for _, d in ours if d is not None), default=t)
    check = t + 1000
    while check <= finish:
        done = [d - c for c, d, ok in msgs if ok and d is not None and run_from <= c < t and d < check]
        flying = [check - c for c, d, ok in msgs if ok and c < check and (d is None or d >= check)]
        lat = (sum(done) + weight * sum(flying)) / max(1, len(done) + weight * len(flying))
        if lat > bound:
            return f"unstable: latency {lat:.4g} > bound {bound:g} while draining (step {check})"
        check += 1000
    lats = [d - c for c, d in ours if d is not None]
    if lats and statistics.fmean(lats) > bound:  # between two checks, or before the first
        return f"unstable: latency {statistics.fmean(lats):.4g} > bound {bound:g} after draining"
    span = f"periods {first}–{last}" if last > first else f"period {last}"
    return f"converged: {span} within {thr:.0%}"


def _count(sorted_steps: list[int], lo: int, hi: int) -> int:
    """How many of ``sorted_steps`` lie in [lo, hi)."""
    return bisect.bisect_left(sorted_steps, hi) - bisect.bisect_left(sorted_steps, lo)


def _finite(x: float) -> float | None:
    """``x``, or None for infinity (JSON has none)."""
    return None if math.isinf(x) else x


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
