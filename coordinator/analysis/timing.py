"""Timing models applied to the recorded (step, hops, start-ups) of each delivery.

Reported, never simulated twice (DESIGN.md):

* store-and-forward: latency = steps × (L·β + router delay);
* wormhole / cut-through, contention-free (seed 004 eq. 7): Σ over start-ups (Ts + L·β) + hops·β.

Units are whatever Ts, β and the router delay are given in (seed 004: cycles, Ts = 33, β = 1,
L = 64 flits; seed 003: t_s = 1 µs, 5 ns links, 20 ns routers, 100 flits).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace

from coordinator.analysis.result_types import MulticastLatency, MulticastResult
from node import defaults

__all__ = ["TIMINGS", "Timing", "apply_timing"]

TIMINGS = ("store-and-forward", "wormhole")


@dataclass(frozen=True, slots=True)
class Timing:
    """A timing model and its parameters."""

    model: str = "wormhole"
    ts: float = float(defaults.TS)
    beta: float = 1.0
    flits: int = defaults.FLITS
    router: float = 0.0

    def __post_init__(self) -> None:
        if self.model not in TIMINGS:
            raise ValueError(f"unknown timing model {self.model!r}: use one of {', '.join(TIMINGS)}")
        if self.ts < 0 or self.beta < 0 or self.router < 0 or self.flits < 1:
            raise ValueError("timing parameters must be non-negative and --flits at least 1")

    def latency(self, step: int, hops: int, startups: int) -> float:
        """One delivery's latency under this model."""
        message = self.flits * self.beta
        if self.model == "store-and-forward":
            return step * (message + self.router)
        return startups * (self.ts + message) + hops * (self.beta + self.router)


def apply_timing(records: Iterable[MulticastResult], timing: Timing) -> list[MulticastResult]:
    """``records`` with a ``latency`` on every arrival and a latency block (max, mean, cv) on each."""
    out = []
    for m in records:
        arrivals = tuple(
            replace(a, latency=timing.latency(a.step - m.injected, a.hops, a.startups)) for a in m.arrivals
        )
        lats = [a.latency for a in arrivals if a.latency is not None]
        mean = statistics.fmean(lats) if lats else None
        latency = MulticastLatency(
            model=timing.model,
            max=max(lats) if lats and not m.missing else None,
            mean=mean,
            cv=statistics.pstdev(lats) / mean if lats and mean else None,
        )
        out.append(replace(m, arrivals=arrivals, latency=latency))
    return out
