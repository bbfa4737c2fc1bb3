"""The physics check run (issue 42): repeated VH multicasts over a link model, judged twice.

Once by the fidelity verdict (did the hosts keep up?) and once by the physics itself (does each
destination h links away arrive with mean h·m and SD √h·s?), at a time dilation K and with an
optional number of busy loops beside it. The slow tests and ``benchmarks/dilation_demo.py`` run it.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import trio

from coordinator.analysis.fidelity import deliveries, physics_misses
from coordinator.analysis.metrics import chi2_quantile
from coordinator.experiments.run import emulate_apart, measured, run_result
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology
from node.transport.linkmodel import Jitter, LinkModel, LinkSpec

DESTS = ((7, 7), (0, 7), (7, 0), (3, 4), (5, 2), (2, 6), (6, 5), (1, 1))
"""The destinations of every repetition (those inside the topology): hop counts 2 to 14 from (0,0)."""


@dataclass(frozen=True)
class PhysicsOutcome:
    """What one physics run found: the verdict, the physics misses, and what it ran under."""

    k: float
    complete: bool
    misses: list[str]
    fidelity_line: str
    fidelity_ok: bool
    advised_k: float | None
    hosts_share: float | None
    """The verdict's share of the per-node variance that the hosts added."""
    wall_s: float
    loadavg: tuple[float, float, float]
    admitted_misses: list[str] = field(default_factory=list)
    """The destinations that miss even the tolerances a run the verdict passes can reach by chance
    (:func:`admitted_tolerances`): a verdict of ok with one of these is a verdict that is wrong."""

    @property
    def physics_holds(self) -> bool:
        """Every destination at least two links away met its mean and SD."""
        return self.complete and not self.misses


@contextmanager
def busy_loops(n: int) -> Iterator[None]:
    """``n`` processes spinning on a core each, for as long as the block lasts."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def admitted_tolerances(
    settings: RunSettings, repeat: int, delay: float, sigma: float, *, p: float = 0.995, min_hops: int = 2
) -> tuple[float, float]:
    """The physics check's mean and SD tolerances that a destination of a run the verdict passes
    can reach by chance, with probability ``1 - p`` each (``repeat`` deliveries a destination).

    The verdict judges the hosts' share of the variance and their time per hop over the whole run
    (``fidelity_share``, ``fidelity_per_hop``: 25% each by default); the physics check judges each
    destination, on 20 samples. A verdict of ok admits an SD up to ``1 / sqrt(1 - share)`` of the
    link model's and a mean up to ``1 + per_hop`` of it; a sample SD of ``repeat`` deliveries reads up
    to ``sqrt(chi2(p, repeat - 1) / (repeat - 1))`` times its true value, and a sample mean ``z(p)``
    standard errors over (at the nearest destination judged, ``min_hops`` links away).
    """
    sd_factor = math.sqrt(1 / (1 - settings.fidelity_share)) * math.sqrt(
        chi2_quantile(p, repeat - 1) / (repeat - 1)
    )
    mean_noise = NormalDist().inv_cdf(p) * sd_factor * math.sqrt(min_hops) * sigma / (min_hops * delay)
    return settings.fidelity_per_hop + mean_noise / math.sqrt(repeat), sd_factor - 1


def physics_run(
    k: float,
    repeat: int,
    *,
    topology: str = "mesh:8x8",
    delay: float = 0.002,
    sigma: float = 0.0005,
    runtime: str = "processes",
) -> PhysicsOutcome:
    """``repeat`` kept VH multicasts from (0,0) (one more, cold, run first and left out), each in
    its own emulation, over links of ``delay`` with normal jitter ``sigma``, dilated ``k`` times."""
    topo = Topology.parse(topology)
    dests = tuple(c for c in DESTS if topo.contains(c))
    plan = Plan(topo, tuple(Multicast(i, "vh", (0, 0), dests, 0) for i in range(repeat + 1)))
    model = LinkModel(LinkSpec(delay=delay, jitter=Jitter("normal", sigma)), seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        settings = RunSettings(
            clock="free", port_model="all-port", runtime=runtime, run_dir=tmp, link_model=model,
            time_dilation=k, wall_budget=900.0,
        )  # fmt: skip
        t0 = time.monotonic()
        raw = trio.run(measured, emulate_apart, plan, settings)
        wall = time.monotonic() - t0
    kept = replace(raw, arrivals=[a for a in raw.arrivals if a.mc > 0])
    result = run_result(Plan(topo, plan.multicasts[1:]), settings, kept)
    assert result.fidelity is not None  # a free-clock run with a link model is always judged
    groups = deliveries(result.multicasts)
    mean_tol, sd_tol = admitted_tolerances(settings, repeat, delay, sigma)
    return PhysicsOutcome(
        k=k,
        complete=result.run.complete,
        misses=physics_misses(groups, model),
        fidelity_line=result.fidelity.line(),
        fidelity_ok=bool(result.fidelity.ok),
        advised_k=result.fidelity.advised_dilation,
        hosts_share=result.fidelity.hosts_share,
        wall_s=round(wall, 1),
        loadavg=os.getloadavg(),
        admitted_misses=physics_misses(groups, model, mean_tol=mean_tol, sd_tol=sd_tol),
    )
