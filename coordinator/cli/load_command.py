"""``meshcast load``: offered-load options, validated; one line per point; load.csv, load.json and
load.png (``--json``: the same document on stdout, the console on stderr)."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from coordinator.cli.options import MAX_COUNT, add_run_options, in_range, settings_from, topology_from
from coordinator.cli.ui import console, progress
from coordinator.errors import UsageError
from coordinator.experiments.load import (
    EXTRA,
    HEADER,
    INJECTIONS,
    PATTERNS,
    Judge,
    LoadPoint,
    Traffic,
    load_point,
    parse_rates,
    plot_load,
    poisson_plan,
    skipped_point,
    xy_bound,
)
from coordinator.experiments.replays import LOAD_MAX
from coordinator.output.paths import prepare_out_dir
from coordinator.output.results import atomic_write, write_csv
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import PlanError, check_algorithm
from node.routing.unicast import UNICASTS
from node.settings import NodeSettings
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
    if args.judge == "batches" and not 0 <= args.warmup < args.duration:
        raise UsageError(f"--warmup must lie in [0, --duration), got {args.warmup} and {args.duration}")
    judge = _judge(args)
    if args.traffic == "hotspot" and hotspot is None:
        raise UsageError("--traffic hotspot sends every message to --hotspot X,Y: give it")
    if args.traffic != "uniform" and args.hotspot_fraction > 0:
        raise UsageError(
            f"--hotspot-fraction mixes a hot spot into uniform traffic, not --traffic {args.traffic}"
        )
    if args.injection == "bernoulli" and max(rates) > 1:
        raise UsageError(f"--injection bernoulli takes rates of at most 1 message per step, got {max(rates)}")
    if (args.traffic != "uniform" or args.pick_self) and args.dests != 1:
        what = "--pick-self" if args.traffic == "uniform" else f"--traffic {args.traffic}"
        raise UsageError(f"{what} sends one destination per message: give --dests 1, not {args.dests}")
    if args.traffic == "transpose" and topo.cols != topo.rows:
        raise UsageError(f"--traffic transpose needs a square network, not {topo.spec}")
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if not algorithms:
        raise UsageError("--algorithms is empty")
    if args.replay and not args.out:
        raise UsageError("--replay writes replay.html into the results: give --out DIR")
    settings = settings_from(args, topo)
    budget = args.duration * args.budget_factor
    given = settings.max_steps
    if given != NodeSettings().max_steps and given != budget:  # given, and not load's own bound
        raise UsageError(
            f"load bounds each point at --duration × --budget-factor steps ({budget} here), not --max-steps "
            f"{given}: give --budget-factor"
        )
    settings = replace(settings, contention="shared", max_steps=budget)
    in_range("--duration × --budget-factor", settings.max_steps, 1, 10**9)
    for alg in algorithms:
        try:
            check_algorithm(alg, topo)
        except PlanError as exc:
            raise UsageError(str(exc)) from None
    out = prepare_out_dir(args.out, force=args.force) if args.out else None
    if out is not None:  # what made it: meshcast load --config DIR/config.toml runs it again
        given_max, args.max_steps = args.max_steps, settings.max_steps
        text = args.experiment_file_of(settings)
        args.max_steps = given_max
        # the bound the run used, as a comment: load sets it from --duration, so a run of this file
        # with another --duration or --budget-factor must not find it given
        text = re.sub(r"^max-steps = (\d+)$", r"# max-steps = \1  # the bound each point ran under: "
                      "--duration × --budget-factor", text, count=1, flags=re.M)  # fmt: skip
        (out / "config.toml").write_text(text)
    con = console(stderr=args.json)
    points: list[LoadPoint] = []
    bound = _unicast_bound(topo, algorithms, args, settings)
    unit = "cycle" if settings.switching == "wormhole" else "step"
    if bound is not None:
        con.print(f"XY bound (uniform unicast, docs/wormhole.md): {bound:.5f} messages/node/step")
    with progress("load points") as update:
        _run_points(args, topo, algorithms, rates, hotspot, settings, judge, points, update)
    verdicts = [p.fidelity for p in points if p.fidelity is not None]
    if verdicts:
        bad = [f for f in verdicts if f.ok is False]
        line = (bad or verdicts)[0].line()
        con.print(f"{line} [{len(bad)} of {len(verdicts)} points NOT ok]", highlight=False, markup=False)
    ran = [p for p in points if p.ran]
    if bound is not None and ran:
        best = max(p.throughput for p in ran)
        con.print(
            f"highest throughput measured: {best:.5f} messages/node/step ({best / bound:.0%} of the XY bound)"
        )
    doc = _document(args, topo, algorithms, settings, judge, bound, points, unit)
    if out is not None:
        write_csv(out / "load.csv", HEADER + EXTRA, (p.row() + p.extra() for p in points))
        atomic_write(out / "load.json", json.dumps(doc, indent=1) + "\n")
        title = f"{topo.spec}, {args.dests} destinations, {settings.port_model}"
        if settings.switching == "wormhole":
            title += f", wormhole L={settings.flits} Ts={settings.ts} B={settings.buffer_flits}"
            if settings.vcs > 1:
                title += f" V={settings.vcs} {settings.vc_classes}"
        if args.traffic != "uniform":
            title += f", {args.traffic}"
        title += f", {args.runtime}"
        plot_load(ran, out / "load.png", title, bound)
        con.print(f"wrote {out / 'load.csv'}, {out / 'load.json'} and {out / 'load.png'}")
        if args.replay:
            _write_replay(out, args, topo, algorithms[0], rates, hotspot, points, settings)
    if args.json:
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
    return 0


def _judge(args: argparse.Namespace) -> Judge | None:
    """``--judge converge``'s :class:`Judge` from its options (validated); None for ``--judge batches``."""
    if args.judge == "batches":
        return None
    in_range("--max-samples", args.max_samples, 2, 10**4)
    in_range("--warmup-periods", args.warmup_periods, 0, 10**4)
    in_range("--latency-bound", args.latency_bound, 1e-9, 1e12)
    in_range("--converge-threshold", args.converge_threshold, 0.0, 10.0)
    period = args.sample_period if args.sample_period is not None else args.duration // args.max_samples
    if period < 1 or period * args.max_samples > args.duration:
        raise UsageError(
            f"--max-samples {args.max_samples} periods of --sample-period {period} steps do not fit in "
            f"--duration {args.duration}: sources inject only during --duration"
        )
    if args.warmup_periods >= args.max_samples:
        raise UsageError(
            f"--warmup-periods {args.warmup_periods} leaves none of --max-samples {args.max_samples}"
        )
    return Judge(period, args.max_samples, args.warmup_periods, args.latency_bound, args.converge_threshold)


def _document(
    args: argparse.Namespace,
    topo: Topology,
    algorithms: list[str],
    settings: RunSettings,
    judge: Judge | None,
    bound: float | None,
    points: list[LoadPoint],
    unit: str,
) -> dict[str, Any]:
    """load.json and ``--json``: what ran, how it was judged, and every point (:meth:`LoadPoint.to_json`)."""
    wormhole = settings.switching == "wormhole"
    return {
        "command": "load",
        "topology": topo.spec,
        "algorithms": algorithms,
        "units": {
            "time": f"{unit}s",
            "rates": f"per node per {unit}; packets: one per destination of a message (a unicast message is "
            "one packet), flits: packets × flits_per_packet (null under store-and-forward)",
            "latency": f"{unit}s from a message's creation (its plan step, source queueing included) to "
            + ("the cycle its (last) destination received the tail" if wormhole else "its (last) delivery"),
        },
        "settings": {
            "switching": settings.switching,
            "flits": settings.flits if wormhole else None,
            "ts": settings.ts,
            "buffer_flits": settings.buffer_flits,
            "vcs": settings.vcs,
            "vc_classes": settings.vc_classes,
            "dateline": settings.dateline,
            "port_model": settings.port_model,
            "runtime": settings.runtime,
            "max_steps": settings.max_steps,
            "seed": args.seed,
            # how the router was timed (the preset with any stage option applied), under wormhole
            "router": settings.router if wormhole else None,
            "router_timing": asdict(settings.router_timing()) if wormhole else None,
        },
        "traffic": {
            "pattern": args.traffic,
            "injection": args.injection,
            "pick_self": args.pick_self,
            "dests": args.dests,
            "duration": args.duration,
            "unicast_fraction": args.unicast_fraction,
            "hotspot": args.hotspot,
            "hotspot_fraction": args.hotspot_fraction,
        },
        "judge": {"kind": "batches", "warmup": args.warmup, "batches": args.batches}
        if judge is None
        else {"kind": "converge", **asdict(judge)},
        "xy_bound_packets": bound,
        "points": [_clean(p.to_json()) for p in points],
    }


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with NaN (a point not run) as null: JSON has no NaN."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}


def _g(x: float | None) -> str:
    """Four significant digits (— for none)."""
    return "—" if x is None or math.isnan(x) else f"{x:.4g}"


def _line(p: LoadPoint, unit: str) -> str:
    """One point on the console: rates in packets (and flits) per node per cycle, latency, verdict and why."""

    def rate(x: float | None) -> str:
        flits = "" if p.flits is None or x is None else f" ({_g(x * p.flits)} flits)"
        return f"{_g(x)} packets{flits}"

    head = f"{p.algorithm:>10} rate {_g(p.rate)} packets/node/{unit}: "
    if not p.ran:
        return head + p.why
    lat = "no latency" if p.latency is None else f"latency {_g(p.latency)} {unit}s"
    if p.latency is not None and p.ci95[0] is not None and p.ci95[1] is not None:
        lat += f" [95% CI {_g(p.ci95[0])}–{_g(p.ci95[1])}]"
    why = p.why if p.why.split(":")[0] in ("converged", "unstable") else f"{p.verdict}: {p.why}"
    return (
        f"{head}offered {rate(p.offered_packets)}, accepted {rate(p.accepted_packets)} /node/{unit}, "
        f"{lat}; {why}"
    )


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
                          args.hotspot_fraction, args.seed, pattern=args.traffic, injection=args.injection,
                          pick_self=args.pick_self)  # fmt: skip
        candidates.append((rate, saturated[rate], poisson_plan(topo, algorithm, traffic)))
    plan, note = load_replay_choice(candidates)
    console(stderr=args.json).print(note)
    if plan is not None:
        doc = traced_document(plan, settings)
        console(stderr=args.json).print(
            f"wrote {write_replay(out / 'replay.html', [(doc, out.absolute().name)])}"
        )


def _unicast_bound(
    topo: Topology, algorithms: list[str], args: argparse.Namespace, settings: RunSettings
) -> float | None:
    """Uniform unicast messages/node/step XY routing can carry here (wormhole, mesh, no hot spot)."""
    bound = xy_bound(topo)
    uniform = (
        (args.hotspot is None or args.hotspot_fraction == 0)
        and args.traffic == "uniform"
        and not args.pick_self
    )
    only_unicast = (set(algorithms) <= UNICASTS and args.dests == 1) or args.unicast_fraction == 1
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
    judge: Judge | None,
    points: list[LoadPoint],
    update: Callable[[int, int], None] | None,
) -> None:
    """Every algorithm × rate, one line each, appended to ``points``; progress after each.

    Judged by convergence, the rates go up from the lowest and once one is unstable the higher
    rates of the same algorithm are reported unstable without running (BookSim2 stops there too).
    """
    con = console(stderr=args.json)
    total = len(algorithms) * len(rates)
    unit = "cycle" if settings.switching == "wormhole" else "step"
    flits = settings.flits if settings.switching == "wormhole" else None
    order = rates if judge is None else sorted(rates)
    for alg in algorithms:
        unstable: float | None = None
        for rate in order:
            traffic = Traffic(rate, args.dests, args.duration, args.unicast_fraction, hotspot,
                              args.hotspot_fraction, args.seed, pattern=args.traffic,
                              injection=args.injection, pick_self=args.pick_self)  # fmt: skip
            if unstable is not None:
                p = skipped_point(alg, traffic, unstable, flits)
            else:
                try:
                    p = load_point(topo, alg, traffic, settings, args.warmup, args.batches, judge=judge)
                except PlanError as exc:
                    raise UsageError(str(exc)) from None
                if judge is not None and p.verdict == "unstable":
                    unstable = rate
            points.append(p)
            con.print(_line(p, unit), highlight=False, markup=False)
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
    p.add_argument(
        "--warmup", type=int, default=200, help="steps whose messages are left out (--judge batches)"
    )
    p.add_argument(
        "--batches", type=int, default=10, help="batches for the batch-means 95%% CI (--judge batches)"
    )
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
    p.add_argument(
        "--traffic",
        choices=PATTERNS,
        default="uniform",
        help="destinations, as BookSim2 names them: uniform (--dests of the other nodes), transpose "
        "((x,y) to (y,x)), bitcomp ((x,y) to (M-1-x,N-1-y)), hotspot (every message to --hotspot); "
        "all but uniform send one destination",
    )
    p.add_argument(
        "--injection",
        choices=INJECTIONS,
        default="poisson",
        help="poisson: exponential gaps; bernoulli: a message each step with probability rate (BookSim2's); "
        "periodic: one every 1/rate steps",
    )
    p.add_argument(
        "--pick-self",
        action="store_true",
        help="uniform unicast picks among all nodes, the source too (BookSim2); a self-addressed message is "
        "delivered at once, after Ts + L cycles (wormhole) or 0 steps",
    )
    p.add_argument(
        "--judge",
        choices=("converge", "batches"),
        default="converge",
        help="converge: BookSim2's sample periods, latency bound and convergence test; batches: batch "
        "means over --warmup..--duration, saturated if it does not drain, grows 2x or delivers < 90%%",
    )
    p.add_argument(
        "--sample-period",
        type=int,
        default=None,
        help="steps per sample period (--judge converge; default --duration / --max-samples)",
    )
    p.add_argument("--max-samples", type=int, default=10, help="sample periods at most, warm-up included")
    p.add_argument("--warmup-periods", type=int, default=3, help="sample periods of warm-up (BookSim2: 3)")
    p.add_argument(
        "--latency-bound",
        type=float,
        default=500.0,
        help="a point whose mean latency (in-flight flits at their age) passes this is unstable (BookSim2's "
        "latency_thres)",
    )
    p.add_argument(
        "--converge-threshold",
        type=float,
        default=0.05,
        help="largest relative change of latency and accepted traffic between periods that converges "
        "(BookSim2's warmup_thres, stopping_thres and their acc_ twins)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document (the console goes to stderr)")
    p.add_argument(
        "--out", default=None, help="new (or empty) directory for load.csv, load.json and load.png"
    )
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.add_argument(
        "--replay",
        action="store_true",
        help="also write replay.html into --out: one point of the first algorithm traced and played "
        f"step by step (the highest rate that did not saturate; at most {LOAD_MAX} messages)",
    )
    add_run_options(p, command="load")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"load": cmd_load}
