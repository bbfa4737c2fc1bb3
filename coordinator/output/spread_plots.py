"""Plots of a spread against path length h, and of CVs per algorithm: the variation study's figures.

The figures are drawn from plain data (:class:`Curve` series, :class:`Panel` columns,
:class:`CvBar` bars), so the reproduction decides what is plotted and this module only how.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.output.results import atomic_write

__all__ = [
    "Curve",
    "CvBar",
    "CvPanel",
    "Panel",
    "draw_curves",
    "plot_by_h",
    "plot_cv",
    "save_png",
    "two_five",
]


def save_png(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Write a matplotlib figure as a PNG, atomically (a half-written plot never stands)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path


@dataclass(frozen=True, slots=True)
class Curve:
    """One series of a by-h plot: its label and style, and per h (ascending) the mean of its values
    and that mean's 95% CI, as ``(h, mean, low, high)``."""

    label: str
    colour: str
    tree: bool
    points: Sequence[tuple[int, float, float, float]]


@dataclass(frozen=True, slots=True)
class Panel:
    """One column of :func:`plot_by_h`: its title, the curves per algorithm (above) and per family
    (below), and whether the reference curve is drawn in it."""

    title: str
    each: Sequence[Curve]
    pooled: Sequence[Curve]
    reference: bool


def draw_curves(ax: Any, curves: Sequence[Curve], log: bool, bands: bool) -> None:
    """Per curve and h the mean with its 95% CI: error bars (``bands`` False) or a shaded band; the
    axes cut at a third below and thrice above the means (log) or 1.3 × the largest mean, so that a
    CI of two nodes does not set the scale."""
    width = (0.12 if log else 0.5) / max(1, len(curves))
    means: list[float] = []
    for i, c in enumerate(curves):
        hs = [h for h, _, _, _ in c.points]
        ys = [y for _, y, _, _ in c.points]
        lo = [a for _, _, a, _ in c.points]
        hi = [b for _, _, _, b in c.points]
        means += ys
        style = {
            "color": c.colour,
            "marker": "o" if c.tree else "s",
            "markersize": 3.5,
            "linestyle": "-" if c.tree else "--",
            "linewidth": 1.1 if not bands else 1.8,
            "label": c.label,
        }
        if bands:
            ax.plot(hs, ys, **style)
            ax.fill_between(hs, lo, hi, color=c.colour, alpha=0.18, linewidth=0)
        else:
            off = (i - (len(curves) - 1) / 2) * width
            xs = [h * (1 + off) if log else h + off for h in hs]
            err = [[y - a for y, a in zip(ys, lo, strict=True)], [b - y for y, b in zip(ys, hi, strict=True)]]
            ax.errorbar(xs, ys, yerr=err, elinewidth=0.7, capsize=1.5, **style)
    if means:
        positive = [m for m in means if m > 0]
        if log and positive:
            ax.set_ylim(min(positive) / 3, max(positive) * 3)
        elif not log:
            ax.set_ylim(0, max(means) * 1.3)


def two_five(x: float, _pos: int | None = None) -> str:
    """A log axis's minor tick label at 2 and 5 times a power of ten, none elsewhere."""
    if x <= 0:
        return ""
    lead = round(x / 10 ** math.floor(math.log10(x)))
    return f"{x:g}" if lead in (2, 5) else ""


def plot_by_h(
    path: Path,
    panels: Sequence[Panel],
    ylabel: str,
    reference: Callable[[float], float],
    reference_label: str,
    suptitle: str,
    log: bool = False,
) -> Path:
    """Per panel a column of two plots: above, per algorithm and h the mean over the nodes with its
    95% CI as error bars, trees solid, paths dashed; below, the same pooled per family, the CI
    shaded. ``reference`` dotted where the panel asks for it. ``log``: both axes logarithmic (a
    power of h is a straight line)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(12.0, 9.0), layout="constrained")
    axes = fig.subplots(2, len(panels), squeeze=False)
    for col, panel in enumerate(panels):
        for row, curves in enumerate((panel.each, panel.pooled)):
            ax = axes[row][col]
            draw_curves(ax, curves, log, bands=row == 1)
            top = max((c.points[-1][0] for c in curves if c.points), default=0)
            if panel.reference and top:
                hx = [h / 10 for h in range(10, 10 * top + 1)]
                ax.plot(
                    hx,
                    [reference(h) for h in hx],
                    color="black",
                    linestyle=":",
                    linewidth=1.8,
                    label=reference_label,
                )
                lo, hi = ax.get_ylim()  # the reference in view
                ys = [reference(1.0), reference(float(top))]
                ax.set_ylim(min(lo, min(ys) / 2) if log else lo, max(hi, max(ys) * 1.1))
            what = "per algorithm" if row == 0 else "per family"
            ax.set_title(f"{panel.title}: {what}", fontsize="medium")
            ax.set_xlabel("h: links crossed to the destination")
            ax.set_ylabel(ylabel)
            if log:
                ax.set_xscale("log")
                ax.set_yscale("log", nonpositive="clip")
                for axis in (ax.xaxis, ax.yaxis):
                    axis.set_major_formatter("{x:g}")
                    axis.set_minor_formatter(FuncFormatter(two_five))
            ax.grid(True, which="both" if log else "major", alpha=0.3)
            ax.legend(fontsize="x-small", ncol=2)
    fig.suptitle(suptitle, fontsize="small")
    return save_png(fig, path)


@dataclass(frozen=True, slots=True)
class CvBar:
    """One algorithm's bar in :func:`plot_cv`: its mean CV with a 95% CI, and its hop-count CV."""

    label: str
    colour: str
    hatched: bool
    cv: float
    lo: float
    hi: float
    cv_hops: float | None


@dataclass(frozen=True, slots=True)
class CvPanel:
    """One panel of :func:`plot_cv`: a title and its bars."""

    title: str
    bars: Sequence[CvBar]


def plot_cv(path: Path, panels: Sequence[CvPanel], suptitle: str) -> Path:
    """One panel per condition: each algorithm's mean node-level CV (wall clock) with its 95% CI, paths
    hatched, and the CV of its destinations' hop counts as a white diamond."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 4.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        xs = list(range(len(panel.bars)))
        err = [[b.cv - b.lo for b in panel.bars], [b.hi - b.cv for b in panel.bars]]
        drawn = ax.bar(
            xs,
            [b.cv for b in panel.bars],
            yerr=err,
            capsize=3,
            alpha=0.85,
            color=[b.colour for b in panel.bars],
            error_kw={"ecolor": "#444444", "elinewidth": 1.0},
            label="node-level CV (wall clock), 95% CI",
        )
        for rect, b in zip(drawn, panel.bars, strict=True):
            if b.hatched:
                rect.set_hatch("//")
        ax.plot(
            [x + 0.22 for x in xs],
            [b.cv_hops for b in panel.bars],
            linestyle="none",
            marker="D",
            markersize=6,
            markerfacecolor="white",
            markeredgecolor="black",
            label="CV of the destinations' h (no clock)",
        )
        ax.set_xticks(xs, [b.label for b in panel.bars])
        ax.set_title(panel.title, fontsize="medium")
        ax.set_ylabel("node-level CV (SD / mean over destinations)")
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="x-small", loc="best", framealpha=0.9)
    fig.suptitle(suptitle, fontsize="small")
    return save_png(fig, path)
