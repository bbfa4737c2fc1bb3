"""Shared helpers for reproduction reports: package data, number formats, markdown tables, plots.

Every reproduction (``coordinator/reproduce/*.py``) writes a ``report.md`` with the paper's
numbers beside ours and PNG plots where ours are solid lines and the paper's dashed. The
pieces they all need live here so that the reports look alike.

Plots use matplotlib's object API with the Agg canvas (no pyplot, no global backend switch),
so a report can be written on a headless CI machine and from inside a user's session alike.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.output.palette import algorithm_colour
from coordinator.output.results import atomic_write, write_csv

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from coordinator.analysis.result_types import JitterResult, MulticastResult, Spread

__all__ = [
    "WITHHELD",
    "DataTable",
    "Panel",
    "Series",
    "algorithm_colour",
    "draw_panels",
    "fmt",
    "fmt_ci",
    "fmt_delta",
    "jitter_fields",
    "latency_by_hops",
    "markdown_table",
    "plot_jitter",
    "plot_latency_by_hops",
    "plot_panels",
    "plot_series",
    "plot_telemetry",
    "read_data_table",
    "telemetry_by_hops",
    "write_jitter_csv",
]


# -- package data ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DataTable:
    """A CSV from ``coordinator/data/``: its ``#`` comment lines (the source) and numeric rows."""

    name: str
    comments: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[dict[str, float], ...]

    @property
    def source(self) -> str:
        """The comment lines joined, without their ``#`` (where the numbers come from)."""
        return " ".join(c.lstrip("#").strip() for c in self.comments)

    def column(self, name: str) -> list[float]:
        return [r[name] for r in self.rows]

    def by(self, key: str) -> dict[float, dict[str, float]]:
        """Rows indexed by the value of column ``key`` (e.g. the number of destinations)."""
        return {r[key]: r for r in self.rows}


def read_data_table(name: str) -> DataTable:
    """Read ``coordinator/data/NAME`` (package data): comment lines first, then a header, numbers."""
    text = resources.files("coordinator").joinpath("data", name).read_text(encoding="utf-8")
    lines = text.splitlines()
    comments = tuple(line for line in lines if line.startswith("#"))
    body = [line for line in lines if line.strip() and not line.startswith("#")]
    reader = csv.reader(body)
    header = tuple(h.strip() for h in next(reader))
    rows = []
    for i, rec in enumerate(reader, start=2):
        if len(rec) != len(header):
            raise ValueError(f"{name}: data row {i} has {len(rec)} fields, the header {len(header)}")
        rows.append({h: float(v) for h, v in zip(header, rec, strict=True)})
    return DataTable(name, comments, header, tuple(rows))


# -- numbers -----------------------------------------------------------------------------------
def fmt(v: float | None, digits: int = 2) -> str:
    """A number for a table; an em dash for a missing one."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.{digits}f}"


def fmt_ci(mean: float | None, lo: float | None, hi: float | None, digits: int = 2) -> str:
    """``mean [lo, hi]``, or just the mean when there is no interval."""
    if mean is None:
        return "—"
    if lo is None or hi is None or lo == hi:
        return fmt(mean, digits)
    return f"{fmt(mean, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def fmt_delta(ours: float | None, paper: float | None, digits: int = 2) -> str:
    """``ours − paper`` with its sign and, where the paper's value is not zero, in percent."""
    if ours is None or paper is None:
        return "—"
    d = ours - paper
    sign = "+" if d >= 0 else "−"
    text = f"{sign}{abs(d):.{digits}f}"
    if paper:
        text += f" ({sign}{abs(d) / abs(paper) * 100:.1f}%)"
    return text


# -- markdown ----------------------------------------------------------------------------------
def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], align: Sequence[str] | None = None
) -> str:
    """A GitHub-flavoured markdown table; ``align`` holds 'l', 'r' or 'c' per column (default r)."""
    cells = [[str(c) for c in r] for r in rows]
    for r in cells:
        if len(r) != len(header):
            raise ValueError(f"row {r!r} has {len(r)} cells, the header {len(header)}")
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    al = list(align) if align is not None else ["r"] * len(header)
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(marks[a] for a in al) + " |",
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in cells]
    return "\n".join(lines) + "\n"


# -- plots -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Series:
    """One curve: ours (solid, with an optional 95% CI band) or the paper's (dashed)."""

    label: str
    x: Sequence[float]
    y: Sequence[float | None]
    paper: bool = False
    colour: str | None = None
    band: tuple[Sequence[float | None], Sequence[float | None]] | None = field(default=None)
    marker: str | None = None  # default: "x" for the paper, "o" for ours
    linewidth: float | None = None  # default: 1.3 for the paper, 1.8 for ours


def plot_series(
    path: Path,
    series: Sequence[Series],
    title: str,
    xlabel: str,
    ylabel: str,
    note: str | None = None,
    dpi: int = 110,
) -> Path:
    """Draw ``series`` into a PNG (or SVG, by suffix) at ``path``, written atomically."""
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for s in series:
        pts = [(x, y) for x, y in zip(s.x, s.y, strict=True) if y is not None]
        if not pts:
            continue
        xs, ys = zip(*pts, strict=True)
        ax.plot(
            xs,
            ys,
            linestyle="--" if s.paper else "-",
            marker=s.marker or ("x" if s.paper else "o"),
            markersize=3.5,
            linewidth=s.linewidth or (1.3 if s.paper else 1.8),
            color=s.colour,
            label=s.label,
        )
        if s.band is not None:
            lo, hi = s.band
            bx = [x for x, a, b in zip(s.x, lo, hi, strict=True) if a is not None and b is not None]
            blo = [a for a, b in zip(lo, hi, strict=True) if a is not None and b is not None]
            bhi = [b for a, b in zip(lo, hi, strict=True) if a is not None and b is not None]
            if bx:
                ax.fill_between(bx, blo, bhi, color=s.colour, alpha=0.18, linewidth=0)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    if note:  # below the axes, in a strip that constrained layout keeps free
        engine = fig.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine):
            engine.set(rect=(0, 0.05, 1, 0.95))
        fig.text(0.01, 0.01, note, fontsize="x-small", color="#555555", ha="left", va="bottom")
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower() or "png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path


# -- jitter ------------------------------------------------------------------------------------
_STATS = ("mean", "sd", "median", "iqr", "p95", "p99")
_CIS = ("median", "sd")
_PARTS = ("mean", "sd", "median", "iqr")


def _columns(unit: str) -> tuple[str, ...]:
    bounds = (f"{unit}_{k}_ci95_{end}" for k in _CIS for end in ("low", "high"))
    return (*(f"{unit}_{k}" for k in _STATS), *bounds)


JITTER_COLUMNS = (
    "algorithm",
    "source",
    "node",
    "repetitions",
    *_columns("step"),
    *_columns("wall_us"),
    "host",
    *(f"link_us_{k}" for k in _PARTS),
    *(f"node_us_{k}" for k in _PARTS),
)
"""The columns of ``jitter.csv``: steps as counted, wall clock in µs (the records hold ns); a
statistic's 95% CI as ``_ci95_low`` and ``_ci95_high``; with the free clock's telemetry the wall
clock's two parts, on links and in nodes (empty without it)."""

WITHHELD = "—"
"""A measured row's statistic left out because too few repetitions were kept to state it: p95
below 20, p99 below 100, the median's CI below 6 (analysis.metrics says why). Unmeasured is empty."""


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1000.0, 3)


def _steps(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def _spread_fields(s: Spread, unit: str, scale: Callable[[float | None], float | None]) -> dict[str, Any]:
    """One Spread's cells: None where unmeasured, WITHHELD where measured but too few repetitions."""
    measured = s.median is not None
    out: dict[str, Any] = {}
    for k in _STATS:
        v = getattr(s, k)
        out[f"{unit}_{k}"] = WITHHELD if v is None and measured and k in ("p95", "p99") else scale(v)
    for k in _CIS:
        ci = getattr(s, f"{k}_ci")
        low: float | str | None = WITHHELD if measured else None
        high: float | str | None = low
        if ci is not None:
            low, high = scale(ci[0]), scale(ci[1])
        out[f"{unit}_{k}_ci95_low"], out[f"{unit}_{k}_ci95_high"] = low, high
    return out


def jitter_fields(j: JitterResult) -> dict[str, Any]:
    """One jitter record (analysis.metrics.jitter) keyed by JITTER_COLUMNS, wall clock in µs."""
    return {
        "algorithm": j.algorithm,
        "source": f"{j.source[0]},{j.source[1]}",
        "node": f"{j.node[0]},{j.node[1]}",
        "repetitions": j.repetitions,
        **_spread_fields(j.steps, "step", _steps),
        **_spread_fields(j.wall_ns, "wall_us", _us),
        "host": j.host or "",
        **{f"link_us_{k}": None if j.link_ns is None else _us(getattr(j.link_ns, k)) for k in _PARTS},
        **{f"node_us_{k}": None if j.node_ns is None else _us(getattr(j.node_ns, k)) for k in _PARTS},
    }


def jitter_row(j: JitterResult) -> list[Any]:
    """One jitter record as a row of JITTER_COLUMNS."""
    fields = jitter_fields(j)
    return [fields[c] for c in JITTER_COLUMNS]


def write_jitter_csv(path: Path, jitter: Sequence[JitterResult]) -> Path:
    """``jitter.csv``: per node, over its kept repetitions (``repetitions``), its arrival latency's
    mean, sample SD, median, IQR, p95 and p99 in steps and µs, the 95% CIs of the median and the
    SD, and the host that measured it; WITHHELD ("—") where too few repetitions were kept."""
    write_csv(path, JITTER_COLUMNS, (jitter_row(j) for j in jitter))
    return path


def _fmt_us(v: float) -> str:
    """µs for a cell: whole from 100 up, tenths below."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"


def plot_jitter(path: Path, cols: int, rows: int, jitter: Sequence[JitterResult], dpi: int = 110) -> Path:
    """Heat maps of the grid, a row per algorithm: each destination's median wall-clock latency
    over the repetitions (µs) and, beside it, its IQR (p75 − p25, µs); the source ★.

    Median and IQR rather than mean and SD: one slow repetition (a cold start, a preemption)
    moves an SD by as much as all the others together, and a quartile by one rank.
    """
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    algs = list(dict.fromkeys(j.algorithm for j in jitter)) or ["-"]
    side = min(5.0, max(3.2, 0.42 * max(cols, rows)))
    fig = Figure(figsize=(2 * side + 1.6, side * len(algs) + 0.5), layout="constrained")
    axes = fig.subplots(len(algs), 2, squeeze=False)
    panels = (("median", "median latency (µs)", "viridis"), ("iqr", "IQR (µs)", "magma"))
    small = max(cols, rows) > 12  # too many cells to write in
    scales = {}  # one colour scale per statistic, shared by the algorithms so colours compare
    for key, _, _ in panels:
        vals = [v / 1000.0 for j in jitter if (v := getattr(j.wall_ns, key)) is not None]
        scales[key] = (min(vals), max(vals)) if vals else (None, None)
    for (ax_med, ax_iqr), alg in zip(axes, algs, strict=True):
        mine = [j for j in jitter if j.algorithm == alg]
        n = max((j.repetitions for j in mine), default=0)
        for ax, (key, label, cmap) in zip((ax_med, ax_iqr), panels, strict=True):
            grid = [[math.nan] * cols for _ in range(rows)]
            for j in mine:
                x, y = j.node
                if (v := getattr(j.wall_ns, key)) is not None:
                    grid[y][x] = v / 1000.0
            vmin, vmax = scales[key]
            img = ax.imshow(grid, origin="lower", cmap=cmap, interpolation="nearest", vmin=vmin, vmax=vmax)
            fig.colorbar(img, ax=ax, shrink=0.85, label=label)
            if not small:
                lo, hi = img.get_clim()
                for j in mine:
                    if (ns := getattr(j.wall_ns, key)) is None:
                        continue
                    x, y = j.node
                    v = ns / 1000.0
                    bright = hi > lo and (v - lo) / (hi - lo) > 0.6  # viridis and magma end light
                    ax.text(x, y, _fmt_us(v), ha="center", va="center", fontsize=6.5,
                            color="black" if bright else "white")  # fmt: skip
            if mine:
                sx, sy = mine[0].source
                ax.plot([sx], [sy], marker="*", color="red", markersize=12, linestyle="none")
            what = "median" if key == "median" else "IQR"
            ax.set_title(f"{alg}: {what} over {n} repetitions", fontsize="medium")
            ax.set_xlabel("x (column)")
            ax.set_ylabel("y (row)")
            ax.set_xticks(range(cols))
            ax.set_yticks(range(rows))
            ax.tick_params(labelsize="x-small")
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):  # a strip below the axes for the note
        engine.set(rect=(0, 0.3 / fig.get_figheight(), 1, 1 - 0.3 / fig.get_figheight()))
    fig.text(0.01, 0.004, "wall-clock arrival latency of each destination over the kept repetitions; "
             "IQR = p75 − p25 (linear quantiles); one colour scale per statistic; ★ source",
             fontsize="x-small", color="#555555")  # fmt: skip
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path


def latency_by_hops(records: Iterable[MulticastResult]) -> dict[str, dict[int, list[float]]]:
    """Per algorithm and hop count (the links the packet crossed), the wall-clock latencies (µs)
    of every arrival of ``records`` that has one."""
    out: dict[str, dict[int, list[float]]] = {}
    for r in records:
        for a in r.arrivals:
            if a.wall_ns is not None:
                out.setdefault(r.algorithm, {}).setdefault(a.hops, []).append(a.wall_ns / 1000.0)
    return out


def telemetry_by_hops(records: Iterable[MulticastResult]) -> dict[int, tuple[float, float, int]]:
    """Per hop count h: the mean link time and node time (µs) of the deliveries h links away that
    carried telemetry, and how many there were."""
    parts: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for m in records:
        for a in m.arrivals:
            if a.link_ns is not None and a.node_ns is not None:
                parts[a.hops].append((a.link_ns, a.node_ns))
    return {
        h: (statistics.fmean(x for x, _ in v) / 1000.0, statistics.fmean(y for _, y in v) / 1000.0, len(v))
        for h, v in sorted(parts.items())
    }


def plot_telemetry(
    path: Path, records: Iterable[MulticastResult], delay_ns: float | None = None, dpi: int = 110
) -> Path:
    """Mean latency against hop count, stacked: time on links below, time in nodes above (µs), with
    the link model's mean delay per hop as a line where given. ValueError without telemetry."""
    from matplotlib.figure import Figure

    data = telemetry_by_hops(records)
    if not data:
        raise ValueError("no arrival carried telemetry to plot")
    hs = list(data)
    link = [data[h][0] for h in hs]
    node = [data[h][1] for h in hs]
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    ax.bar(hs, link, color="#1f77b4", label="on links (send to the next receive)")
    ax.bar(hs, node, bottom=link, color="#ff7f0e", label="in nodes (receive to send, or delivery)")
    if delay_ns is not None:
        ax.plot(hs, [h * delay_ns / 1000.0 for h in hs], color="black", linestyle=":", marker="x",
                label="the link model's mean delay × h")  # fmt: skip
    ax.set_xticks(hs, [f"{h}\nn={data[h][2]}" for h in hs])
    ax.set_xlabel("h: links crossed to the destination")
    ax.set_ylabel("mean latency (µs)")
    ax.set_title("where each latency went: links and nodes (per-hop telemetry)", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path


def plot_latency_by_hops(
    path: Path,
    records: Iterable[MulticastResult],
    predict: Callable[[int], float] | None = None,
    dpi: int = 110,
) -> Path:
    """Wall-clock arrival latency against hop count, a panel per algorithm, a box per hop count.

    ``records`` are multicast records (the kept repetitions: warm-up ones left out); each arrival
    with a wall time counts once, at its ``hops``. A box spans the quartiles with the median
    drawn, whiskers reach the furthest point within 1.5 IQR, points beyond are drawn alone.
    ``predict(h)``, when given, is a model's latency in ns after h hops (the records' unit),
    drawn as a line over the boxes. ValueError when no arrival has a wall time.
    """
    from matplotlib.figure import Figure

    data = latency_by_hops(records)
    if not data:
        raise ValueError("no arrival has a wall-clock latency to plot")
    algs = list(data)
    ncols = min(3, len(algs))
    nrows = math.ceil(len(algs) / ncols)
    # at least 6.4 in wide: one panel's width cut the figure's title off on both sides
    fig = Figure(figsize=(max(6.4, 4.6 * ncols), 3.6 * nrows + 0.7), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    # one scale for every panel, up to the highest whisker: a cold start or a preemption of
    # milliseconds would otherwise flatten every box; the points above it are counted instead
    top = 1.15 * max(_whisker_top(v) for by in data.values() for v in by.values())
    for ax, alg in zip(axes, algs, strict=False):
        hops = sorted(data[alg])
        ax.boxplot(
            [data[alg][h] for h in hops],
            positions=hops,
            widths=0.6,
            manage_ticks=False,
            patch_artist=True,
            boxprops={"facecolor": algorithm_colour(alg), "alpha": 0.35},
            medianprops={"color": "black"},
            flierprops={"marker": ".", "markersize": 3, "alpha": 0.6},
        )
        for h in hops:
            above = sum(v > top for v in data[alg][h])
            if above:
                ax.annotate(f"▲{above}", (h, top), textcoords="offset points", xytext=(0, -1),
                            ha="center", va="top", fontsize="x-small", color="#555555")  # fmt: skip
        if predict is not None:
            xs = list(range(min(hops), max(hops) + 1))
            ax.plot(xs, [predict(h) / 1000.0 for h in xs], color="#d62728", linewidth=1.5,
                    marker="x", markersize=4, label="predicted")  # fmt: skip
            ax.legend(fontsize="x-small", loc="upper left")
        ax.set_xticks(hops, [f"{h}\nn={len(data[alg][h])}" for h in hops])
        ax.tick_params(axis="x", labelsize="small")
        ax.set_xlim(min(hops) - 0.7, max(hops) + 0.7)
        ax.set_ylim(0, top)
        ax.set_title(alg, fontsize="medium")
        ax.set_xlabel("hops (links crossed); n = arrivals")
        ax.set_ylabel("arrival latency (µs)")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes[len(algs) :]:
        ax.set_visible(False)
    fig.suptitle("wall-clock arrival latency by hop count over the kept repetitions\n"
                 "box: quartiles and median; whiskers: furthest point within 1.5 IQR;\n"
                 "▲k: k points above the scale", fontsize="small")  # fmt: skip
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path


def _whisker_top(values: Sequence[float]) -> float:
    """The top of the upper whisker matplotlib's box plot draws for ``values``."""
    from matplotlib.cbook import boxplot_stats

    return float(boxplot_stats(list(values))[0]["whishi"])


# -- panels (meshcast plot) --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Panel:
    """One axes of a multi-panel figure: its curves (with 95% CI bands), labels and a zero line."""

    title: str
    ylabel: str
    series: Sequence[Series]
    zero_line: bool = False


def _single(series: Sequence[Series]) -> tuple[float, ...] | None:
    """The x of every series when each has one point at most (all at the same x or not), else None."""
    xs = []
    for s in series:
        pts = [x for x, y in zip(s.x, s.y, strict=True) if y is not None]
        if len(pts) > 1:
            return None
        xs += pts
    return tuple(xs)


def _error_bar(ax: Any, x: float, y: float, lo: float | None, hi: float | None, s: Series) -> Any:
    """A dot at (x, y) with its 95% CI as a bar (none when there is no interval)."""
    yerr = None if lo is None or hi is None else [[y - lo], [hi - y]]
    return ax.errorbar([x], [y], yerr=yerr, fmt="o", markersize=5, capsize=5, color=s.colour, label=s.label)


def draw_panels(panels: Sequence[Panel], title: str, xlabel: str, note: str) -> Figure:
    """Panels side by side (up to three a row): a line per series with its 95% CI band.

    A panel whose series have one point each (a run at one number of destinations) has no line
    to draw and no band to shade: each series is a dot with its 95% CI as an error bar, side by
    side and named on the x axis, and the figure says so. A lone point among longer series gets
    a bar too.
    """
    from matplotlib.figure import Figure

    cols = min(3, max(1, len(panels)))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.6 * cols, 3.6 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    dotted: set[float] = set()
    for ax, panel in zip(axes, panels, strict=False):
        single = _single(panel.series)
        drawn = [s for s in panel.series if any(y is not None for y in s.y)]
        for i, s in enumerate(drawn):
            pts = [(x, y, k) for k, (x, y) in enumerate(zip(s.x, s.y, strict=True)) if y is not None]
            lo, hi = s.band if s.band is not None else ([None] * len(s.x), [None] * len(s.x))
            if single is not None or len(pts) == 1:
                x, y, k = pts[0]
                _error_bar(ax, i if single is not None else x, y, lo[k], hi[k], s)
                dotted.add(x)
                continue
            xs, ys, _ = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.6, color=s.colour, label=s.label)
            ok = [(x, a, b) for x, a, b in zip(s.x, lo, hi, strict=True) if a is not None and b is not None]
            if ok:
                bx, blo, bhi = zip(*ok, strict=True)
                ax.fill_between(bx, blo, bhi, color=s.colour, alpha=0.2, linewidth=0)
        if panel.zero_line:
            ax.axhline(0, color="#444444", linewidth=0.8, linestyle=":")
        ax.set_title(panel.title, fontsize="medium")
        ax.set_ylabel(panel.ylabel)
        ax.grid(True, alpha=0.3)
        if single is not None and drawn:
            ax.set_xticks(range(len(drawn)), [s.label for s in drawn], rotation=30 if len(drawn) > 3 else 0,
                          ha="right" if len(drawn) > 3 else "center", fontsize="small")  # fmt: skip
            ax.set_xlim(-0.6, len(drawn) - 0.4)
            at = sorted(set(single))
            ax.set_xlabel(f"{xlabel} = {', '.join(f'{x:g}' for x in at)}")
        else:
            ax.set_xlabel(xlabel)
            ax.legend(fontsize="x-small")
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if dotted:
        note += (
            f"\none point per curve at {xlabel} = {', '.join(f'{x:g}' for x in sorted(dotted))}: "
            "a dot (mean) with its 95% CI as a bar, no line or band"
        )
    fig.suptitle(f"{title}\n{note}", fontsize="small")
    return fig


def plot_panels(
    path: Path, panels: Sequence[Panel], title: str, xlabel: str, note: str, dpi: int = 100
) -> Path:
    """:func:`draw_panels` into one PNG at ``path``, written atomically."""
    fig = draw_panels(panels, title, xlabel, note)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path
