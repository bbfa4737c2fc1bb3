"""``meshcast sweep``: the options, their validation, the progress bar and the summary table."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from coordinator.cli.options import (
    MAX_REPEAT,
    add_run_options,
    check_params,
    in_range,
    parse_params,
    settings_from,
    topology_from,
)
from coordinator.cli.plot_command import write_plots
from coordinator.cli.ui import console, plain, progress
from coordinator.errors import UsageError
from coordinator.experiments import sweep as sweep_mod
from coordinator.experiments.replays import SWEEP_MAX
from coordinator.experiments.sweep import DEFAULT_CHUNK, SweepResult, check_settings, parse_dests, sweep_plan
from coordinator.output.paths import prepare_out_dir
from coordinator.runtimes.records import RunSettings
from coordinator.wording import plural
from coordinator.workloads.plan import PlanError
from node.choices import Contention
from node.topology import Coord, Topology, TopologyError, parse_coord

__all__ = ["COMMANDS", "add_command", "progress_label"]

MAX_JOBS = 256


def add_command(sub: Any) -> None:
    """Register ``meshcast sweep``."""
    p = sub.add_parser(
        "sweep",
        help="sweep the number of destinations: the same random sets for every algorithm, emulated together",
        description=plain(sweep_mod.__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--topology", required=True, help="mesh:MxN or torus:MxN (M columns, N rows)")
    p.add_argument(
        "--algorithms",
        "--algorithm",
        dest="algorithms",
        required=True,
        help="comma-separated names from 'meshcast algorithms', e.g. diag,pair,min",
    )
    p.add_argument(
        "--dests",
        required=True,
        help="numbers of destinations: start:stop:step (stop included) "
        "or a comma list, e.g. 20:380:20 or 5,10,20",
    )
    p.add_argument("--repeat", type=int, default=10, help="random destination sets per point (default 10)")
    p.add_argument("--source", default="0,0", help="x,y of the source, or 'random' for one per set")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="algorithm parameter")
    p.add_argument(
        "--out", required=True, help="new (or empty) directory for tidy.csv, summary.csv, sweep.json, plots"
    )
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.add_argument(
        "--replay",
        action="store_true",
        help="also write replay.html into --out: the first repetition of each point, every algorithm, "
        f"traced and played step by step (at most {SWEEP_MAX} multicasts; isolated contention)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes for the emulations (default: the number of cores, %(default)s here)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=DEFAULT_CHUNK,
        help=f"most multicasts per emulation, 0 for no limit (default {DEFAULT_CHUNK})",
    )
    add_run_options(p, command="sweep")


def _print_summary(result: SweepResult, algorithms: Sequence[str]) -> None:
    from rich.table import Table

    by = {(r["algorithm"], r["k"]): r for r in result.summary}
    ks = sorted({r["k"] for r in result.summary})
    table = Table(title="mean time / traffic per point")
    table.add_column("k", justify="right")
    for a in algorithms:
        table.add_column(a, justify="right")
    for k in ks:
        cells = []
        for a in algorithms:
            r = by.get((a, k))
            t, tr = (r["time_mean"], r["traffic_mean"]) if r else (None, None)
            cells.append("-" if t is None else f"{t:.2f} / {tr:.1f}")
        table.add_row(str(k), *cells)
    console().print(table)


def progress_label(algorithms: Sequence[str], ks: Sequence[int], repeat: int) -> tuple[str, int]:
    """The sweep's progress bar label and the count it runs to: the bar counts deliveries (what
    every runtime reports as it goes), so the label says so, beside the multicasts they belong to.

    ``("sweep: 42000 deliveries of 210 multicasts", 42000)`` for 3 algorithms, k = 100 and 300,
    35 repetitions.
    """
    multicasts = len(algorithms) * len(ks) * repeat
    deliveries = len(algorithms) * sum(ks) * repeat
    label = f"sweep: {plural(deliveries, 'delivery', 'deliveries')} of {plural(multicasts, 'multicast')}"
    return label, deliveries


def cmd_sweep(args: argparse.Namespace) -> int:
    """``meshcast sweep``: validate, run every chunk, write tidy/summary/sweep.json, print a table."""
    topo = topology_from(args.topology)
    try:
        algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        if not algorithms:
            raise UsageError("--algorithms is empty")
        ks = parse_dests(args.dests)
        source = None if args.source.strip().lower() == "random" else parse_coord(args.source)
    except (PlanError, TopologyError) as exc:
        raise UsageError(str(exc)) from None
    in_range("--repeat", args.repeat, 1, MAX_REPEAT)
    in_range("--jobs", args.jobs, 1, MAX_JOBS)
    in_range("--chunk", args.chunk, 0, 10**7)
    if args.contention is None:  # a sweep measures single multicasts (wormhole: each in its own network)
        args.contention = Contention.ISOLATED
    settings = settings_from(args, topo)
    if args.replay and settings.contention != "isolated":
        raise UsageError(
            "--replay replays a sweep's multicasts one by one: it needs --contention isolated (the default)"
        )
    params = check_params(algorithms, parse_params(args.param))
    try:
        check_settings(settings)
        sweep_plan(topo, algorithms, ks, 1, args.seed, source, params)  # validate before the run
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    out = prepare_out_dir(args.out, force=args.force)
    # what made it, each setting as it ran: sweep --config DIR/config.toml
    (out / "config.toml").write_text(args.experiment_file_of(settings))
    label, _ = progress_label(algorithms, ks, args.repeat)
    run = (topo, algorithms, ks, args.repeat, args.seed, source, settings)
    with progress(label) as update:
        result = sweep_mod.sweep(*run, update, params, jobs=args.jobs, chunk=args.chunk)
    meta = {
        "command": "sweep",
        "topology": topo.spec,
        "algorithms": algorithms,
        "ks": ks,
        "repeat": args.repeat,
        "seed": args.seed,
        "source": None if source is None else list(source),
        "params": params,
        "chunk": args.chunk,
        "jobs": args.jobs,
        "settings": asdict(settings),
    }
    written = sweep_mod.write_sweep(out, result, meta)
    written += write_plots(out)
    if args.replay:
        run_args = (topo, algorithms, ks, args.repeat, args.seed, source, params)
        written.append(_write_replay(out, run_args, settings))
    _print_summary(result, algorithms)
    line = result.fidelity_line()
    if line is not None:
        print(line)
    print("wrote " + ", ".join(str(w) for w in written), file=sys.stderr)
    if not result.complete:
        missing = sum(1 for r in result.tidy if r["missing"])
        why = "; ".join(result.incomplete) or f"{plural(missing, 'multicast')} missed destinations"
        print(f"meshcast: sweep incomplete: {why}", file=sys.stderr)
        return 1
    return 0


def _write_replay(
    out: Path,
    run_args: tuple[Topology, list[str], list[int], int, int, Coord | None, dict[str, Any]],
    settings: RunSettings,
) -> Path:
    """``--replay``: the sweep's replay page (coordinator/experiments/replays.py says which multicasts)."""
    from coordinator.experiments.replays import sweep_replay_plan, traced_document
    from coordinator.output.replay import write_replay

    plan, points = sweep_plan(*run_args)  # the sweep's own plan (seeded): its multicasts and ids
    chosen, note = sweep_replay_plan(plan, points, run_args[2], run_args[1])
    print(note, file=sys.stderr)
    return write_replay(out / "replay.html", [(traced_document(chosen, settings), out.absolute().name)])


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"sweep": cmd_sweep}
