"""``meshcast load``: offered-load options, validated; one line per point; load.csv and load.png."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from coordinator.cli.options import MAX_COUNT, add_run_options, in_range, settings_from, topology_from
from coordinator.cli.ui import console, progress
from coordinator.errors import UsageError
from coordinator.experiments.load import (
    HEADER,
    LoadPoint,
    Traffic,
    load_point,
    parse_rates,
    plot_load,
    poisson_plan,
    xy_bound,
)
from coordinator.experiments.replays import LOAD_MAX
from coordinator.output.paths import prepare_out_dir
from coordinator.output.results import write_csv
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import PlanError, check_algorithm
from node.topology import Coord, Topology, TopologyError, parse_coord

__all__ = ["COMMANDS", "add_command"]


def cmd_load(args: argparse.Namespace) -> int:
    """``meshcast load``: every algorithm × rate as one shared-contention run."""
    topo = topology_from(args.topology)
    try:
        rates = parse_rates(args.rates)
        hotspot = topo.check(parse_coord(args.hotspot), "hot spot") if args.hotspot else None
    except (TopologyError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    for r in rates:
        in_range("--rates", r, 1e-9, 1e6)
    in_range("--duration", args.duration, 1, 10**7)
    in_range("--batches", args.batches, 1, 10**4)
    in_range("--budget-factor", args.budget_factor, 1, 1000)
    in_range("--dests", args.dests, 1, MAX_COUNT)
    in_range("--unicast-fraction", args.unicast_fraction, 0.0, 1.0)
    in_range("--hotspot-fraction", args.hotspot_fraction, 0.0, 1.0)
    if not 0 <= args.warmup < args.duration:
        raise UsageError(f"--warmup must lie in [0, --duration), got {args.warmup} and {args.duration}")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not algorithms:
        raise UsageError("--algorithms is empty")
    if args.replay and not args.out:
        raise UsageError("--replay writes replay.html into the results: give --out DIR")
    settings = settings_from(args, topo)
    settings = replace(settings, contention="shared", max_steps=args.duration * args.budget_factor)
    in_range("--duration × --budget-factor", settings.max_steps, 1, 10**9)
    for alg in algorithms:
        try:
            check_algorithm(alg, topo)
        except PlanError as exc:
            raise UsageError(str(exc)) from None
    out = prepare_out_dir(args.out, force=args.force) if args.out else None
    if out is not None:  # what made it: meshcast load --config DIR/config.toml runs it again
        (out / "config.toml").write_text(args.experiment_file_of(settings))
    con = console()
    points: list[LoadPoint] = []
    bound = _unicast_bound(topo, algorithms, args, settings)
    if bound is not None:
        con.print(f"XY bound (uniform unicast, docs/wormhole.md): {bound:.5f} messages/node/step")
    with progress("load points") as update:
        _run_points(args, topo, algorithms, rates, hotspot, settings, points, update)
    verdicts = [p.fidelity for p in points if p.fidelity is not None]
    if verdicts:
        bad = [f for f in verdicts if f.ok is False]
        line = (bad or verdicts)[0].line()
        con.print(f"{line} [{len(bad)} of {len(verdicts)} points NOT ok]", highlight=False, markup=False)
    if bound is not None and points:
        best = max(p.throughput for p in points)
        con.print(
            f"highest throughput measured: {best:.5f} messages/node/step ({best / bound:.0%} of the XY bound)"
        )
    if out is not None:
        write_csv(out / "load.csv", HEADER, (p.row() for p in points))
        title = f"{topo.spec}, {args.dests} destinations, {settings.port_model}"
        if settings.switching == "wormhole":
            title += f", wormhole L={settings.flits} Ts={settings.ts} B={settings.buffer_flits}"
            if settings.vcs > 1:
                title += f" V={settings.vcs} {settings.vc_classes}"
        title += f", {args.runtime}"
        plot_load(points, out / "load.png", title, bound)
        con.print(f"wrote {out / 'load.csv'} and {out / 'load.png'}")
        if args.replay:
            _write_replay(out, args, topo, algorithms[0], rates, hotspot, points, settings)
    return 0


def _write_replay(
    out: Path,
    args: argparse.Namespace,
    topo: Topology,
    algorithm: str,
    rates: list[float],
    hotspot: Coord | None,
    points: list[LoadPoint],
    settings: RunSettings,
) -> None:
    """``--replay``: one point of ``algorithm`` traced (coordinator/experiments/replays.py says which)."""
    from coordinator.experiments.replays import load_replay_choice, traced_document
    from coordinator.output.replay import write_replay

    saturated = {p.rate: p.saturated is not None for p in points if p.algorithm == algorithm}
    candidates = []
    for rate in rates:
        traffic = Traffic(rate, args.dests, args.duration, args.unicast_fraction, hotspot,
                          args.hotspot_fraction, args.seed)  # fmt: skip
        candidates.append((rate, saturated[rate], poisson_plan(topo, algorithm, traffic)))
    plan, note = load_replay_choice(candidates)
    console().print(note)
    if plan is not None:
        doc = traced_document(plan, settings)
        console().print(f"wrote {write_replay(out / 'replay.html', [(doc, out.absolute().name)])}")


def _unicast_bound(
    topo: Topology, algorithms: list[str], args: argparse.Namespace, settings: RunSettings
) -> float | None:
    """Uniform unicast messages/node/step XY routing can carry here (wormhole, mesh, no hot spot)."""
    bound = xy_bound(topo)
    uniform = args.hotspot is None or args.hotspot_fraction == 0
    only_unicast = (algorithms == ["unicast"] and args.dests == 1) or args.unicast_fraction == 1
    if bound is None or settings.switching != "wormhole" or not uniform or not only_unicast:
        return None
    return bound / settings.flits


def _run_points(
    args: argparse.Namespace,
    topo: Topology,
    algorithms: list[str],
    rates: list[float],
    hotspot: Coord | None,
    settings: RunSettings,
    points: list[LoadPoint],
    update: Callable[[int, int], None] | None,
) -> None:
    """Every algorithm × rate, one line each, appended to ``points``; progress after each."""
    con = console()
    total = len(algorithms) * len(rates)
    for alg in algorithms:
        for rate in rates:
            traffic = Traffic(rate, args.dests, args.duration, args.unicast_fraction, hotspot,
                              args.hotspot_fraction, args.seed)  # fmt: skip
            try:
                p = load_point(topo, alg, traffic, settings, args.warmup, args.batches)
            except PlanError as exc:
                raise UsageError(str(exc)) from None
            points.append(p)
            shown = "saturated: " + p.saturated if p.saturated else f"latency {p.latency:.1f} steps"
            con.print(
                f"{alg:>10} rate {rate:.4f} messages/node/step: offered {p.offered:.3f} and throughput "
                f"{p.throughput:.3f} deliveries/node/step, {shown}"
            )
            if update is not None:
                update(len(points), total)


def add_command(sub: Any) -> None:
    """Register ``meshcast load``."""
    p = sub.add_parser("load", help="latency and throughput against offered load (shared contention)")
    p.add_argument("--topology", required=True, help="mesh:MxN or torus:MxN (M columns, N rows)")
    p.add_argument("--algorithms", "--algorithm", required=True, help="comma-separated algorithm names")
    p.add_argument("--dests", type=int, default=10, help="destinations per multicast")
    p.add_argument("--rates", required=True, help="messages per node per step: FROM:TO:COUNT or a list")
    p.add_argument("--duration", type=int, default=1000, help="steps during which sources inject")
    p.add_argument("--warmup", type=int, default=200, help="steps whose messages are left out")
    p.add_argument("--batches", type=int, default=10, help="batches for the batch-means 95%% CI")
    p.add_argument("--budget-factor", type=int, default=4, help="step budget = duration × this")
    p.add_argument(
        "--unicast-fraction",
        type=float,
        default=0.0,
        help="share of unicast messages (0.9 in Al-Dubai et al.'s load study)",
    )
    p.add_argument("--hotspot", default=None, help="x,y of a hot-spot node")
    p.add_argument(
        "--hotspot-fraction", type=float, default=0.0, help="share of messages that include the hot spot"
    )
    p.add_argument("--out", default=None, help="new (or empty) directory for load.csv and load.png")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.add_argument(
        "--replay",
        action="store_true",
        help="also write replay.html into --out: one point of the first algorithm traced and played "
        f"step by step (the highest rate that did not saturate; at most {LOAD_MAX} messages)",
    )
    add_run_options(p, command="load")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"load": cmd_load}
