"""``meshcast plot DIR``: the plots of a ``run --out``, ``sweep --out`` or ``load --out`` directory."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coordinator.cli.ui import plain
from coordinator.errors import UsageError
from coordinator.experiments import plot as plot_mod
from coordinator.output.paths import prepare_out_dir

__all__ = ["COMMANDS", "add_command", "write_plots"]


def _warn(plotted: plot_mod.Plotted) -> None:
    for w in plotted.warnings:
        print(f"meshcast: warning: {w}", file=sys.stderr)


def write_plots(directory: Path) -> list[Path]:
    """Draw ``directory``'s plots beside its results (used by ``run --out`` and ``sweep --out``),
    warning on stderr of what they leave out."""
    try:
        plotted = plot_mod.plot_dir(directory)
    except plot_mod.PlotError as exc:
        print(f"meshcast: no plots: {exc}", file=sys.stderr)
        return []
    _warn(plotted)
    return list(plotted.paths)


def cmd_plot(args: argparse.Namespace) -> int:
    """Draw the plots; 2 when the directory holds nothing meshcast can plot."""
    directory = Path(args.dir)
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    out = prepare_out_dir(args.out, force=True) if args.out else directory
    try:
        plotted = plot_mod.plot_dir(directory, out)
    except plot_mod.PlotError as exc:
        raise UsageError(str(exc)) from None
    _warn(plotted)
    print("wrote " + ", ".join(str(w) for w in plotted.paths), file=sys.stderr)
    return 0


def add_command(sub: Any) -> None:
    """Register ``meshcast plot``."""
    p = sub.add_parser(
        "plot",
        help="plot a run/sweep/load --out directory: metrics with 95%% CI bands, paired differences",
        description=plain(plot_mod.__doc__),
    )
    p.add_argument("dir", help="a directory written by run --out, sweep --out or load --out")
    p.add_argument("--out", default=None, help="write the PNGs here instead of into DIR")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"plot": cmd_plot}
