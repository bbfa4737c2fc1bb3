"""``meshcast replay``: one self-contained HTML page that plays a traced run (or two side by side)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coordinator.cli.ui import plain
from coordinator.errors import UsageError
from coordinator.output import replay as replay_mod
from coordinator.output.paths import prepare_out_file
from coordinator.output.replay import load_run, write_replay

__all__ = ["COMMANDS", "add_command"]


def add_command(sub: Any) -> None:
    """Register ``meshcast replay``."""
    p = sub.add_parser(
        "replay",
        help="an HTML page that plays a traced run step by step (offline, one file)",
        description=plain(replay_mod.__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="the --out directory of a 'meshcast run --trace'; two of them play side by side",
    )
    p.add_argument("--out", default=None, help="the page to write (default: RUN_DIR/replay.html)")


def cmd_replay(args: argparse.Namespace) -> int:
    """``meshcast replay``: read each run's result, refuse one without a trace, write the page."""
    if len(args.run_dirs) > 2:
        raise UsageError("replay plays one run, or two side by side: give at most two RUN_DIRs")
    docs = [(load_run(d), Path(d).absolute().name) for d in args.run_dirs]
    out = prepare_out_file(args.out if args.out else Path(args.run_dirs[0]) / "replay.html")
    write_replay(out, docs)
    print(f"wrote {out} ({out.stat().st_size:,} bytes): open it in a browser", file=sys.stderr)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"replay": cmd_replay}
