"""``meshcast show``: draw one multicast on its grid (PNG or SVG) for papers, slides and debugging.

The multicast is emulated like any other (``emulate`` with ``trace=True``), so the picture shows
what the nodes actually did: every link a packet crossed (an arrow, coloured by the step it was
sent in), the destinations with the step each was reached in, the relay nodes, the source.
On a torus a wrap-around link is drawn as an arrow leaving the grid on one side and one
entering it on the other, in the same colour, so that the picture stays a flat grid. Row 0 is
at the bottom, as in the seed papers' figures.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.result_types import MulticastResult, RunResult
from coordinator.experiments.run import emulate, run_result
from coordinator.output.results import atomic_write
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import PlanError, explicit, random_plan
from node.topology import Coord, Topology

__all__ = ["FORMATS", "draw_multicast", "show"]

FORMATS = ("png", "svg")
_WRAP_STUB = 0.42  # how far a wrap-around arrow reaches beyond the grid's edge


def show(
    topology: Topology,
    algorithm: str,
    source: Coord,
    destinations: Sequence[Coord] | None,
    settings: RunSettings,
    random_dests: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> RunResult:
    """Emulate one multicast with a trace; its results (one multicast, with ``links``)."""
    if destinations is not None:
        plan = explicit(topology, [algorithm], source, destinations, 1, params)
    elif random_dests is not None:
        plan = random_plan(topology, [algorithm], random_dests, 1, settings.seed, source, params)
    else:
        raise PlanError("say which destinations: --dests 'x,y x,y ...' or --random-dests K")
    traced = replace(settings, trace=True)
    raw = trio.run(emulate, plan, traced, None)
    return run_result(plan, traced, raw)


def _xs(nodes: Iterable[Sequence[int]]) -> list[int]:
    return [n[0] for n in nodes]


def _ys(nodes: Iterable[Sequence[int]]) -> list[int]:
    return [n[1] for n in nodes]


def _wrap_direction(a: int, b: int) -> int:
    """+1 or −1 when a → b is a wrap-around step on a ring, 0 for an ordinary step."""
    if abs(b - a) <= 1:
        return 0
    return -1 if b > a else 1


def draw_multicast(
    topology: Topology,
    record: MulticastResult,
    path: Path,
    title: str | None = None,
    link_steps: bool = False,
    dpi: int = 150,
    port_model: str = "",
) -> Path:
    """Draw ``record`` (from :func:`show`) on ``topology`` into ``path`` (.png or .svg), atomically;
    the default title names ``port_model``."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    cols, rows = topology.cols, topology.rows
    scale = 0.62 if max(cols, rows) <= 24 else max(0.2, 15 / max(cols, rows))
    fig = Figure(figsize=(cols * scale + 1.9, rows * scale + 1.5), layout="constrained")
    ax = fig.add_subplot()
    ax.set_aspect("equal")
    ax.set_xlim(-0.9, cols - 0.1)
    ax.set_ylim(-0.9, rows - 0.1)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize="x-small", length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    small = max(cols, rows) > 16
    # the idle network
    grid: dict[str, Any] = {"color": "#d9d9d9", "linewidth": 0.8, "zorder": 0}
    for y in range(rows):
        ax.plot([0, cols - 1], [y, y], **grid)
    for x in range(cols):
        ax.plot([x, x], [0, rows - 1], **grid)
    if topology.is_torus:
        stub: dict[str, Any] = {"color": "#d9d9d9", "linewidth": 0.8, "linestyle": ":", "zorder": 0}
        for y in range(rows):
            ax.plot([-_WRAP_STUB, 0], [y, y], **stub)
            ax.plot([cols - 1, cols - 1 + _WRAP_STUB], [y, y], **stub)
        for x in range(cols):
            ax.plot([x, x], [-_WRAP_STUB, 0], **stub)
            ax.plot([x, x], [rows - 1, rows - 1 + _WRAP_STUB], **stub)
        ax.set_xlim(-0.9, cols - 1 + 0.9)
        ax.set_ylim(-0.9, rows - 1 + 0.9)
    # the used links, coloured by send step
    links = list(record.links or ())
    last = max((lk.step for lk in links), default=0)
    norm = Normalize(vmin=0, vmax=max(1, last))
    cmap = colormaps["viridis"]
    reached: set[Coord] = set()

    def arrow(a: tuple[float, float], b: tuple[float, float], colour: Any, head: bool = True) -> None:
        ax.add_patch(
            FancyArrowPatch(
                a,
                b,
                arrowstyle="-|>" if head else "-",
                mutation_scale=9 if not small else 6,
                shrinkA=5 if not small else 3,
                shrinkB=6 if head and not small else 3,
                color=colour,
                linewidth=1.6 if not small else 1.0,
                zorder=2,
            )
        )

    for lk in links:
        if lk.to is None:
            continue
        (fx, fy), (tx, ty) = lk.frm, lk.to
        reached.add((tx, ty))
        colour = cmap(norm(lk.step))
        wx = _wrap_direction(fx, tx) if topology.is_torus and fy == ty else 0
        wy = _wrap_direction(fy, ty) if topology.is_torus and fx == tx else 0
        if wx or wy:
            out = (fx + wx * _WRAP_STUB * 1.6, fy + wy * _WRAP_STUB * 1.6)
            inn = (tx - wx * _WRAP_STUB * 1.6, ty - wy * _WRAP_STUB * 1.6)
            arrow((fx, fy), out, colour, head=False)
            arrow(inn, (tx, ty), colour)
            mid = out
        else:
            arrow((fx, fy), (tx, ty), colour)
            mid = ((fx + tx) / 2, (fy + ty) / 2)
        if link_steps:
            ax.text(
                mid[0],
                mid[1],
                str(lk.step),
                fontsize=5.5,
                ha="center",
                va="center",
                zorder=3,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
            )
    # the nodes
    src = record.source
    dests = list(record.destinations)
    arrival = {a.node: a.step for a in record.arrivals}
    missing = set(record.missing)
    dest_set = set(dests)
    size = 110 if not small else 40
    idle = [n for n in topology.nodes() if n not in reached and n not in dest_set and n != src]
    relays = [n for n in reached if n not in dest_set and n != src]
    if idle:
        ax.scatter(_xs(idle), _ys(idle), s=size * 0.25, c="#bdbdbd", zorder=1, linewidths=0)
    if relays:
        ax.scatter(
            _xs(relays),
            _ys(relays),
            s=size * 0.55,
            facecolors="white",
            edgecolors="#555555",
            linewidths=1.0,
            zorder=3,
        )
    got = [d for d in dests if d not in missing]
    if got:
        ax.scatter(
            _xs(got), _ys(got), s=size * 1.6, c="#ff9f1c", edgecolors="#8a5300", linewidths=0.8, zorder=4
        )
        for d in got:
            ax.text(
                d[0],
                d[1],
                str(arrival.get(d, "?")),
                fontsize=6.5 if not small else 4.5,
                ha="center",
                va="center",
                zorder=5,
                fontweight="bold",
            )
    if missing:
        ax.scatter(_xs(missing), _ys(missing), s=size * 1.4, marker="X", c="#d62728", zorder=4)
    ax.scatter([src[0]], [src[1]], s=size * 2.0, marker="s", c="#d62728", edgecolors="black", zorder=4)
    ax.text(
        src[0],
        src[1],
        "S",
        fontsize=7 if not small else 5,
        color="white",
        ha="center",
        va="center",
        fontweight="bold",
        zorder=5,
    )
    # legend, colour bar, title
    handles = [
        Line2D([], [], marker="s", linestyle="", color="#d62728", markeredgecolor="black", label="source"),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="#ff9f1c",
            markeredgecolor="#8a5300",
            label="destination (arrival step)",
        ),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markerfacecolor="white",
            markeredgecolor="#555555",
            label="relay",
        ),
    ]
    if missing:
        handles.append(Line2D([], [], marker="X", linestyle="", color="#d62728", label="not reached"))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=len(handles),
        fontsize="x-small",
        frameon=False,
        handletextpad=0.3,
        columnspacing=1.2,
    )
    if links:
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.6, pad=0.01, aspect=30)
        bar.set_label("send step of the link", fontsize="x-small")
        bar.ax.tick_params(labelsize="x-small")
    if title is None:
        t = record.time
        title = (
            f"{record.algorithm.upper()} on {topology.spec}, source ({src[0]},{src[1]}), "
            f"{len(dests)} destinations\ntime {t if t is not None else 'incomplete'}, "
            f"traffic {record.traffic} links ({port_model})"
        )
    ax.set_title(title, fontsize="small")
    buf = io.BytesIO()
    fig.savefig(buf, format=path.suffix.lstrip(".").lower(), dpi=dpi)
    atomic_write(path, buf.getvalue())
    return path
