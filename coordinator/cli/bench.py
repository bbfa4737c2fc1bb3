"""``meshcast bench``: the relay-chain limit and the emulator's rates, as a table."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from coordinator.cli.ui import console, progress
from coordinator.experiments.bench import run_bench

__all__ = ["COMMANDS", "add_command"]


def cmd_bench(args: argparse.Namespace) -> int:
    """Measure, then print (a) the relay chain's hops/s and (b) one row per emulator point."""
    from rich.table import Table

    con = console()
    with progress("bench points") as update:
        limit, rows = run_bench(quick=args.quick, progress=update)
    con.print(
        f"(a) relay chain (trio memory channels, msgpack decode+encode per hop): [bold]{limit:,.0f}[/] hops/s"
    )
    table = Table("topology", "clock", "multicasts×dests", "steps", "packet-hops", "run s",
                  "packet-hops/s", "steps/s", "link frames/s", "frames/s ÷ relay limit")  # fmt: skip
    for r in rows:
        table.add_row(
            r["topology"], r["clock"], f"{r['multicasts']}×{r['destinations']}", str(r["steps"] or "-"),
            f"{r['packet_hops']:,}", f"{r['run_s']:.2f}", f"{r['hops_per_s']:,.0f}",
            f"{r['steps_per_s']:.1f}" if r["steps_per_s"] else "-",
            f"{r['frames_per_s']:,.0f}", f"{r['ratio']:.2f}",
        )  # fmt: skip
    con.print("(b) emulator, in-process runtime, VH, isolated contention, one-port")
    con.print(table)
    con.print("A lockstep frame is one msgpack message per link per step (possibly empty); in the free clock")
    con.print("every frame carries one packet, so frames/s = packet-hops/s there.")
    return 0


def add_command(sub: Any) -> None:
    """Register ``meshcast bench``."""
    bench = sub.add_parser("bench", help="measure the relay-chain limit and the emulator's rates")
    bench.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"bench": cmd_bench}
