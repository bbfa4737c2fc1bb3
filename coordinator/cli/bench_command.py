"""``meshcast bench``: the relay-chain limit and the emulator's rates, as a table or one JSON object."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from coordinator.cli.ui import console, progress
from coordinator.experiments.bench import SPARSE_RUNS, run_bench
from node import build_name

__all__ = ["COMMANDS", "add_command"]

COLUMNS = ("topology", "runtime", "shards", "clock", "switching", "nodes", "packet_hops_per_s",
           "flit_hops_per_s", "steps_per_s", "relay_hops_per_s", "ratio", "start_s",
           "peak_rss_mb")  # fmt: skip


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    return str(value)


def _shard_count(text: str) -> int:
    """``--shards``: a whole number from 1 to 64."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of shards, got {text!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"shards must be 1 to 64, got {n}")
    return n


def cmd_bench(args: argparse.Namespace) -> int:
    """Measure, then print (a) the relay chain's hops/s and (b) one row per emulator point."""
    with progress("bench points") as update:
        limit, rows = run_bench(quick=args.quick, large=args.large, progress=update, shards=args.shards)
    if args.json:
        print(json.dumps({"relay_hops_per_s": limit, "build": build_name(), "rows": rows}))
        return 0
    from rich.table import Table

    con = console()
    con.print(f"node build: [bold]{build_name()}[/] (make compiled: mypyc; make plain: the sources)")
    con.print(
        "(a) relay chain (trio memory channels, msgpack decode+encode per hop), measured beside each point:"
        f" median [bold]{limit:,.0f}[/] hops/s (each row: relay_hops_per_s)"
    )
    table = Table(*COLUMNS, "mcasts×dests", "steps", "packet-hops", "active s", "run s", "run hops/s")
    for r in rows:
        table.add_row(
            *(_cell(r[c]) for c in COLUMNS), f"{r['multicasts']}×{r['destinations']}", _cell(r["steps"]),
            f"{r['packet_hops']:,}", f"{r['active_s']:.2f}", f"{r['run_s']:.2f}",
            _cell(r["run_packet_hops_per_s"]),
        )  # fmt: skip
    con.print(
        "(b) emulator, in-process runtime, VH, isolated contention, one-port (store-and-forward rows);"
        " (e) engines rows: the same nodes' engines in one plain loop, no trio: their own work per hop"
    )
    con.print("(c) wormhole rows: random XY unicasts, L = 16 flits, Ts = 0, shared contention, one-port")
    con.print(table)
    con.print(
        "Rates are over the active span (first injection to last delivery; engines: the whole loop),"
        " steps/s over the steps in it (the idle tail after the last delivery is not);"
        " ratio = packet-hops/s ÷ the row's relay_hops_per_s (a), under wormhole flit-hops/s ÷ it"
        " (packet-hops under wormhole are worm-hops)."
    )
    con.print(
        "run s: start to every node done (adds a fan-out to and from every node); start_s: before start."
        f" A sparse row (one multicast, an active span of milliseconds) is the median of {SPARSE_RUNS} runs."
    )
    return 0


def add_command(sub: Any) -> None:
    """Register ``meshcast bench``."""
    bench = sub.add_parser("bench", help="measure the relay-chain limit and the emulator's rates")
    bench.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    bench.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    bench.add_argument("--large", action="store_true", help="also a 128×128 torus (16,384 nodes)")
    bench.add_argument(
        "--shards", type=_shard_count, default=1, metavar="N",
        help="also run each dense lockstep point on N shard processes (default 1: not)",
    )  # fmt: skip


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"bench": cmd_bench}
