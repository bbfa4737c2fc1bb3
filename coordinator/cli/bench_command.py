"""``meshcast bench``: the relay-chain limit and the emulator's rates, as a table or one JSON object."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from coordinator.cli.ui import console, progress
from coordinator.experiments.bench import BOOKSIM_FLIT_HOPS_PER_CPU_S, SPARSE_RUNS, BenchRow, run_bench
from node import build_name

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["COMMANDS", "TABLES", "add_command", "bench_tables"]

TABLES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("(b)–(f) points", (("topology", "topology"), ("runtime", "runtime"), ("shards", "shards"),
                        ("clock", "clock"), ("switching", "switching"))),
    ("their work and times", (("nodes", "nodes"), ("mcasts × dests", "mcasts×dests"),
                              ("steps", "steps"), ("packet hops", "packet_hops"), ("start s", "start_s"),
                              ("active s", "active_s"), ("run s", "run_s"), ("peak MB", "peak_rss_mb"))),
    ("their rates", (("packet hops/s", "packet_hops_per_s"), ("flit hops/s", "flit_hops_per_s"),
                     ("steps/s", "steps_per_s"), ("relay hops/s", "relay_hops_per_s"), ("ratio", "ratio"),
                     ("run hops/s", "run_packet_hops_per_s"))),
    ("their CPU time", (("CPU s", "cpu_s"), ("hops per CPU-second", "hops_per_cpu_s"),
                        ("× BookSim2", "booksim_ratio"))),
)  # fmt: skip
"""The bench's four tables, each narrow enough for an 80-column terminal: a title and its columns
(heading, row field; one row per point, numbered in every table). The headings are words, so a
narrow terminal wraps them between words instead of cutting them to "topo…"."""
TEXT_FIELDS = frozenset({"topology", "runtime", "clock", "switching"})


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _field(row: BenchRow, field: str) -> str:
    if field == "mcasts×dests":
        return f"{row.multicasts}×{row.destinations}"
    return _cell(getattr(row, field))


def bench_tables(rows: Sequence[BenchRow]) -> list[Table]:
    """The rows of ``run_bench`` as :data:`TABLES` (rich tables, the points numbered in each)."""
    from rich import box
    from rich.table import Table

    tables = []
    for title, columns in TABLES:
        table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0))
        table.add_column("#", justify="right")
        for heading, field in columns:
            table.add_column(heading, justify="left" if field in TEXT_FIELDS else "right")
        for i, r in enumerate(rows, 1):
            table.add_row(str(i), *(_field(r, field) for _, field in columns))
        tables.append(table)
    return tables


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
        doc = {"relay_hops_per_s": limit, "build": build_name(), "rows": [r.to_json() for r in rows]}
        print(json.dumps(doc))
        return 0
    con = console()
    con.print(f"node build: [bold]{build_name()}[/] (make compiled: mypyc; make plain: the sources)")
    con.print(
        "(a) relay chain (trio memory channels, msgpack decode+encode per hop), measured beside each point:"
        f" median [bold]{limit:,.0f}[/] hops/s (each point: relay hops/s)"
    )
    con.print(
        "(b) emulator, in-process runtime, VH, isolated contention, one-port (store-and-forward rows);"
        " (e) engines rows: the same nodes' engines in one plain loop, no trio: their own work per hop"
    )
    con.print("(c) wormhole rows: random XY unicasts, L = 16 flits, Ts = 0, shared contention, one-port")
    con.print(
        "(f) wormhole under load: 10×10 mesh, XY unicasts, 1 VC, B = 8, L = 64, Ts = 33, one-port,"
        " Poisson 0.128 flits/node/cycle, engines and model: rates over the whole run, start-up included"
    )
    for table in bench_tables(rows):
        con.print(table)
    con.print(
        "Rates are over the active span (first injection to last delivery; engines: the whole loop),"
        " steps/s over the steps in it (the idle tail after the last delivery is not);"
        " ratio = packet hops/s ÷ the point's relay hops/s (a), under wormhole flit hops/s ÷ it"
        " (packet hops under wormhole are worm-hops)."
    )
    con.print(
        "run s: start to every node done (adds a fan-out to and from every node); start s: before start."
        f" A sparse row (one multicast, an active span of milliseconds) is the median of {SPARSE_RUNS} runs."
    )
    con.print(
        "CPU s: the point's process over its run (every thread; sharded rows: -). hops per CPU-second:"
        " flit hops under wormhole, else packet hops. × BookSim2: flit hops per CPU-second over"
        f" BookSim2's {BOOKSIM_FLIT_HOPS_PER_CPU_S:,.0f} (m10b8.cfg on this machine kind, whole process;"
        " docs/wormhole.md, Speed)."
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
