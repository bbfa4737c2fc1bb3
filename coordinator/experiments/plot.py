"""Plots of a results directory: what ``run --out``, ``sweep --out`` or ``load --out`` wrote.

* run and sweep: ``metrics.png``, each metric against the number of destinations per algorithm
  with its 95% CI band; ``differences.png``, the paired difference between two algorithms on the
  very same destination sets (a sweep draws each set once and gives it to every algorithm; a run
  pairs multicasts whose source and destinations are equal) with its 95% CI. A run at one number
  of destinations has no line to draw: each algorithm is a dot with its 95% CI as a bar.
* load: ``load-ci.png``, latency and throughput against offered load (with the batch-means CI).

A multicast that missed destinations is left out of the run and sweep plots (its time, traffic
and CV count only the destinations reached: its additional traffic can even be negative); the
figure's title and a warning the command prints say how many were.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.analysis.metrics import SUMMARY_FIELDS, ci95
from coordinator.output.report import Panel, Series, algorithm_colour, plot_panels
from coordinator.wording import plural

__all__ = ["METRICS", "NOTE", "PlotError", "Plotted", "paired_differences", "plot_dir", "rows_of"]

METRICS: dict[str, tuple[str, str]] = {
    "time": ("time (max arrival)", "steps"),
    "traffic": ("traffic", "link traversals"),
    "additional_traffic": ("additional traffic", "link traversals"),
    "mean_arrival": ("mean arrival", "steps"),
    "cv": ("CV of arrival steps", "ratio (no unit)"),
}
NOTE = (
    "mean and 95% CI (Student t): a line and band across numbers of destinations, a dot and bar at a "
    "lone one; time in steps, traffic in link traversals"
)
INCOMPLETE = "destinations not reached: their time, traffic and CV count only the destinations reached"


class PlotError(ValueError):
    """A directory that holds no results meshcast can plot (the message says what it looked for)."""


Row = dict[str, Any]
"""One multicast: algorithm, k (destinations), pair (the key shared by the same destination set
across algorithms), complete (every destination reached) and one value per metric (None when
missing)."""


@dataclass(frozen=True, slots=True)
class Plotted:
    """What :func:`plot_dir` drew: the files, and warnings for the user (incomplete multicasts
    left out)."""

    paths: tuple[Path, ...]
    warnings: tuple[str, ...] = ()


def _num(v: Any) -> float | None:
    if v is None or v == "":
        return None
    return float(v)


def rows_of(directory: Path) -> tuple[list[Row], str]:
    """The multicasts of a sweep's tidy.csv or a run's run.json, and a title; PlotError otherwise."""
    if (directory / "tidy.csv").is_file():
        rows = []
        with (directory / "tidy.csv").open(newline="") as f:
            for r in csv.DictReader(f):
                rows.append(
                    {
                        "algorithm": r["algorithm"],
                        "k": int(r["k"]),
                        "pair": (int(r["k"]), int(r["repetition"])),  # the set every algorithm shares
                        "complete": not int(r.get("missing") or 0),
                        **{m: _num(r[m]) for m in SUMMARY_FIELDS},
                    }
                )
        meta = _json(directory / "sweep.json")
        title = f"sweep on {meta.get('topology', '?')}, {meta.get('repeat', '?')} sets per point"
        return rows, title
    if (directory / "run.json").is_file():
        doc = _json(directory / "run.json")
        seen: dict[tuple[str, Any], int] = defaultdict(int)
        rows = []
        for m in doc.get("multicasts", []):
            key = (m["source"][0], m["source"][1], tuple(tuple(d) for d in m["destinations"]))
            nth = seen[(m["algorithm"], key)]
            seen[(m["algorithm"], key)] += 1
            rows.append(
                {
                    "algorithm": m["algorithm"],
                    "k": len(m["destinations"]),
                    "pair": (key, nth),  # the nth repetition of the same set
                    "complete": not m.get("missing"),
                    **{f: m.get(f) for f in SUMMARY_FIELDS},
                }
            )
        run = doc.get("run", {})
        return rows, f"run on {run.get('topology', '?')}, {plural(len(rows), 'multicast')}"
    raise PlotError(f"{directory}: no tidy.csv (sweep --out), run.json (run --out) or load.csv (load --out)")


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PlotError(f"{path}: cannot read ({exc})") from None
    return doc if isinstance(doc, dict) else {}


def by_point(rows: Sequence[Row], metric: str) -> dict[str, dict[int, dict[str, Any]]]:
    """Per algorithm and number of destinations: mean and 95% CI of ``metric``."""
    groups: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r[metric] is not None:
            groups[r["algorithm"]][r["k"]].append(r[metric])
    return {a: {k: ci95(v) for k, v in sorted(ks.items())} for a, ks in groups.items()}


def paired_differences(rows: Sequence[Row], metric: str, a: str, b: str) -> dict[int, dict[str, Any]]:
    """Per number of destinations: mean and 95% CI of ``metric``(a) − ``metric``(b) on shared sets."""
    va = {r["pair"]: r[metric] for r in rows if r["algorithm"] == a}
    vb = {r["pair"]: r[metric] for r in rows if r["algorithm"] == b}
    diffs: dict[int, list[float]] = defaultdict(list)
    ks = {r["pair"]: r["k"] for r in rows}
    for key in va.keys() & vb.keys():
        if va[key] is not None and vb[key] is not None:
            diffs[ks[key]].append(va[key] - vb[key])
    return {k: ci95(v) for k, v in sorted(diffs.items())}


def _series(label: str, colour: str, points: dict[int, dict[str, Any]]) -> Series:
    xs = list(points)
    return Series(
        label,
        xs,
        [points[k]["mean"] for k in xs],
        colour=colour,
        band=([points[k]["ci95"][0] for k in xs], [points[k]["ci95"][1] for k in xs]),
    )


def _plot_table(path: Path, rows: Sequence[Row], title: str) -> Path:
    """One multicast per algorithm: its metrics as one table (a CI needs two)."""
    import io

    from matplotlib.figure import Figure

    from coordinator.output.results import atomic_write

    head = ["algorithm", *(f"{name}\n({unit})" for name, unit in METRICS.values())]
    cells = [
        [str(r["algorithm"]), *("—" if r.get(m) is None else f"{float(r[m]):.4g}" for m in METRICS)]
        for r in rows
    ]
    fig = Figure(figsize=(9, 1.3 + 0.35 * len(rows)), layout="constrained")
    ax = fig.subplots()
    ax.axis("off")
    table = ax.table(cellText=cells, colLabels=head, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.scale(1, 1.6)
    for (r, _), cell in table.get_celld().items():
        if r == 0:
            cell.set_height(cell.get_height() * 1.8)
    fig.suptitle(title + "\none multicast per algorithm: its numbers (a confidence interval needs two)",
                 fontsize="medium")  # fmt: skip
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write(path, buf.getvalue())
    return path


def plot_dir(directory: Path, out: Path | None = None) -> Plotted:
    """Draw the plots of ``directory`` into ``out`` (default: the same directory).

    Incomplete multicasts (destinations not reached) are left out, and said so in the figure's
    title and in the warnings returned; PlotError when nothing is left to plot.
    """
    out = out or directory
    if (directory / "load.csv").is_file() and not (directory / "tidy.csv").is_file():
        return Plotted((_plot_load(directory, out),))
    rows, title = rows_of(directory)
    if not rows:
        raise PlotError(f"{directory}: the results hold no multicasts")
    kept = [r for r in rows if r["complete"]]
    warnings: tuple[str, ...] = ()
    if len(kept) < len(rows):
        gone = plural(len(rows) - len(kept), "incomplete multicast")
        if not kept:
            raise PlotError(f"{directory}: nothing to plot: all {gone} ({INCOMPLETE})")
        warnings = (f"left {gone} out of the plots ({INCOMPLETE})",)
        title += f"; {gone} left out"
    algorithms = list(dict.fromkeys(r["algorithm"] for r in kept))
    if len(kept) == len(algorithms):  # one multicast an algorithm: its numbers, not five lone dots
        return Plotted((_plot_table(out / "metrics.png", kept, title),), warnings)
    panels = []
    for metric, (name, unit) in METRICS.items():
        pts = by_point(kept, metric)
        series = [_series(a, algorithm_colour(a), pts[a]) for a in algorithms if a in pts]
        panels.append(Panel(name, unit, series))
    written = [plot_panels(out / "metrics.png", panels, title, "destinations", NOTE)]
    if len(algorithms) > 1:
        panels = []
        pairs = list(itertools.combinations(algorithms, 2))
        for metric, (name, unit) in METRICS.items():
            series = []
            for i, (a, b) in enumerate(pairs):
                diff = paired_differences(kept, metric, a, b)
                if diff:
                    series.append(_series(f"{a} − {b}", _PAIR_COLOURS[i % len(_PAIR_COLOURS)], diff))
            panels.append(Panel(f"{name}: paired difference", unit, series, zero_line=True))
        note = NOTE + "; differences on the same destination sets"
        written.append(plot_panels(out / "differences.png", panels, title, "destinations", note))
    return Plotted(tuple(written), warnings)


_PAIR_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _plot_load(directory: Path, out: Path) -> Path:
    curves: dict[str, dict[float, dict[str, Any]]] = defaultdict(dict)
    with (directory / "load.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            if r.get("saturated"):
                continue
            lat, lo, hi = _num(r["latency"]), _num(r["ci95_low"]), _num(r["ci95_high"])
            curves[r["algorithm"]][float(r["offered"])] = {
                "latency": {"mean": lat, "ci95": [lo, hi]},
                "throughput": {"mean": _num(r["throughput"]), "ci95": [None, None]},
            }
    if not curves:
        raise PlotError(f"{directory / 'load.csv'}: every point saturated, nothing to plot")
    panels = []
    for key, name, unit in (
        ("latency", "latency", "steps"),
        ("throughput", "throughput", "deliveries per node per step"),
    ):
        series = []
        for a, pts in curves.items():
            xs = sorted(pts)
            ys = [pts[x][key]["mean"] for x in xs]
            band = ([pts[x][key]["ci95"][0] for x in xs], [pts[x][key]["ci95"][1] for x in xs])
            series.append(
                Series(a, xs, ys, colour=algorithm_colour(a), band=band if key == "latency" else None)
            )
        panels.append(Panel(name, unit, series))
    note = "band = 95% CI of the latency (batch means); saturated points left out"
    return plot_panels(out / "load-ci.png", panels, "latency and throughput under load", "offered load", note)
