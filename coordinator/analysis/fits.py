"""Fits of a spread against a path length, each with its 95% CI: the statistics of the variation study.

:class:`Fit` is an estimate with its interval; :func:`mean_ci` a mean, :func:`fit_sqrt` the a of
SD ≈ a·√h, :func:`fit_loglog` the k of SD ∝ h^k, and :func:`iqr_sd` the robust SD. Pure functions
of numbers: the reproductions judge claims with them, the report and plots print them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coordinator.analysis.metrics import ci95, t_critical

__all__ = ["IQR_PER_SD", "NO_FIT", "Fit", "fit_loglog", "fit_sqrt", "iqr_sd", "mean_ci"]

IQR_PER_SD = 1.349
"""The interquartile range of a normal distribution, in SDs."""


@dataclass(frozen=True, slots=True)
class Fit:
    """An estimate with its 95% CI (lo = hi = value from a single point; None without data) and n."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int

    @property
    def above_zero(self) -> bool:
        return self.n > 1 and self.lo is not None and self.lo > 0

    def holds(self, x: float) -> bool:
        return self.n > 1 and self.lo is not None and self.hi is not None and self.lo <= x <= self.hi


NO_FIT = Fit(None, None, None, 0)


def mean_ci(values: Iterable[float | None]) -> Fit:
    """Mean and 95% CI (Student t) of the values that are not None."""
    s = ci95([v for v in values if v is not None])
    return Fit(s["mean"], s["ci95"][0], s["ci95"][1], s["n"])


def fit_sqrt(points: Sequence[tuple[int, float]]) -> Fit:
    """SD ≈ a·√h by least squares through the origin over (h, SD) points: a, with its 95% CI (Student t)."""
    pts = [(h, y) for h, y in points if h > 0]
    if not pts:
        return NO_FIT
    sh = sum(h for h, _ in pts)
    a = sum(y * math.sqrt(h) for h, y in pts) / sh
    if len(pts) < 2:
        return Fit(a, a, a, 1)
    s2 = sum((y - a * math.sqrt(h)) ** 2 for h, y in pts) / (len(pts) - 1)
    half = t_critical(len(pts) - 1) * math.sqrt(s2 / sh)
    return Fit(a, a - half, a + half, len(pts))


def fit_loglog(points: Sequence[tuple[int, float]]) -> Fit:
    """The exponent k of SD ∝ h^k: least squares of ln SD on ln h, with its 95% CI (3+ points, 2+ h)."""
    pts = [(math.log(h), math.log(y)) for h, y in points if h > 0 and y > 0]
    if len(pts) < 3 or len({x for x, _ in pts}) < 2:
        return NO_FIT
    mx, my = statistics.fmean(x for x, _ in pts), statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    k = sum((x - mx) * (y - my) for x, y in pts) / sxx
    s2 = sum((y - my - k * (x - mx)) ** 2 for x, y in pts) / (len(pts) - 2)
    half = t_critical(len(pts) - 2) * math.sqrt(s2 / sxx)
    return Fit(k, k - half, k + half, len(pts))


def iqr_sd(xs: Sequence[float]) -> float | None:
    """The robust SD: the interquartile range over 1.349 (a normal distribution's SD), so that a few
    stalled repetitions do not make it; None below two values."""
    if len(xs) < 2:
        return None
    q1, _, q3 = statistics.quantiles(xs, n=4)
    return (q3 - q1) / IQR_PER_SD
