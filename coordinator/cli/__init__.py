"""The ``meshcast`` command line: run, algorithms, demo, bench (and the commands of later modules).

Every bad argument ends in one line naming the cause and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.timing import Timing
from coordinator.errors import UsageError
from coordinator.experiments.run import RUNTIMES, emulate, result_document, runtime_problem
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Plan, PlanError, explicit, random_plan
from node.engine import CONTENTIONS, PORT_MODELS
from node.routing import plugin_errors, registry
from node.topology import Topology, TopologyError, parse_coord, parse_coords

__all__ = ["main"]


def _topology(text: str) -> Topology:
    try:
        return Topology.parse(text)
    except TopologyError as exc:
        raise UsageError(str(exc)) from None


def _params(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items:
        key, sep, value = it.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {it!r}: expected NAME=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that runs an emulation."""
    p.add_argument("--port-model", choices=PORT_MODELS, default="one-port")
    p.add_argument("--contention", choices=CONTENTIONS, default="isolated")
    p.add_argument("--clock", choices=("lockstep", "free"), default="lockstep")
    p.add_argument("--runtime", choices=RUNTIMES, default="in-process")
    p.add_argument("--max-steps", type=int, default=10_000, help="step budget (lockstep)")
    p.add_argument("--wall-budget", type=float, default=600.0, help="wall-clock budget in seconds")
    p.add_argument("--hop-limit", type=int, default=None, help="drop packets beyond this many hops")
    p.add_argument(
        "--buffer",
        type=int,
        default=None,
        metavar="N",
        help="shared contention: packets each input link's buffer holds (default unbounded)",
    )
    p.add_argument(
        "--out-buffer",
        type=int,
        default=None,
        metavar="N",
        help="shared contention: packets a node's output buffer holds (default unbounded)",
    )
    p.add_argument(
        "--policy",
        choices=("block", "drop"),
        default="block",
        help="when an input buffer is full: block the upstream link (no loss) or drop and count",
    )
    p.add_argument("--broker", default=None, help="MQTT broker URL (processes/containers runtimes)")
    p.add_argument("--seed", type=int, default=1)
    t = p.add_argument_group("timing model (reported on the recorded steps, hops and start-ups)")
    t.add_argument("--timing", choices=("store-and-forward", "wormhole"), default=None)
    t.add_argument("--ts", type=float, default=33.0, help="start-up time (seed 004: 33 cycles)")
    t.add_argument("--beta", type=float, default=1.0, help="time per flit per link (seed 004: 1 cycle)")
    t.add_argument("--flits", type=int, default=64, help="message length L in flits (seed 004: 64)")
    t.add_argument("--router-delay", type=float, default=0.0, help="per-hop router delay")


def timing_from(args: argparse.Namespace) -> Timing | None:
    if getattr(args, "timing", None) is None:
        return None
    try:
        return Timing(args.timing, args.ts, args.beta, args.flits, args.router_delay)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def settings_from(args: argparse.Namespace, **extra: Any) -> RunSettings:
    if args.max_steps < 1:
        raise UsageError(f"--max-steps must be positive, got {args.max_steps}")
    if args.wall_budget <= 0:
        raise UsageError(f"--wall-budget must be positive, got {args.wall_budget}")
    problem = runtime_problem(args.runtime)
    if problem:
        raise UsageError(problem)
    for flag, cap in (("--buffer", args.buffer), ("--out-buffer", args.out_buffer)):
        if cap is not None and cap < 1:
            raise UsageError(f"{flag} must be at least 1, got {cap}")
    if args.hop_limit is not None and args.hop_limit < 1:
        raise UsageError(f"--hop-limit must be positive, got {args.hop_limit}")
    return RunSettings(
        port_model=args.port_model,
        contention=args.contention,
        clock=args.clock,
        hop_limit=args.hop_limit,
        max_steps=args.max_steps,
        wall_budget=args.wall_budget,
        seed=args.seed,
        runtime=args.runtime,
        broker=args.broker,
        buffer=args.buffer,
        out_buffer=args.out_buffer,
        policy=args.policy,
        **extra,
    )


def plan_from(args: argparse.Namespace, topo: Topology) -> Plan:
    algorithms = [a.strip() for a in args.algorithm.split(",") if a.strip()]
    if not algorithms:
        raise UsageError("--algorithm is empty")
    params = _params(args.param)
    try:
        if getattr(args, "mcast_set", None):
            from coordinator.workloads.mcast import plan_from_args

            return plan_from_args(args, topo, algorithms, params)
        source = parse_coord(args.source) if args.source else None
        if args.dests is not None:
            if args.random_dests is not None:
                raise UsageError("give either --dests or --random-dests, not both")
            return explicit(topo, algorithms, source or (0, 0), parse_coords(args.dests), args.repeat, params)
        if args.random_dests is None:
            raise UsageError("say which destinations: --dests 'x,y x,y ...' or --random-dests K")
        return random_plan(topo, algorithms, args.random_dests, args.repeat, args.seed, source, params)
    except (PlanError, TopologyError) as exc:
        raise UsageError(str(exc)) from None


def progress_runner(total_hint: str) -> tuple[Callable[[int, int], None] | None, Any]:
    """A rich progress bar on a terminal (None elsewhere), and the context that shows it."""
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from coordinator.cli.ui import console

    prog = Progress(
        TextColumn(total_hint),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=console(stderr=True),
    )
    task = prog.add_task(total_hint, total=None)

    def update(done: int, total: int) -> None:
        prog.update(task, completed=done, total=total)

    return update, prog


def execute(
    plan: Plan, settings: RunSettings, label: str = "deliveries", timing: Timing | None = None
) -> dict[str, Any]:
    update, prog = progress_runner(label)
    if prog is not None:
        with prog:
            raw = trio.run(emulate, plan, settings, update)
    else:
        raw = trio.run(emulate, plan, settings, None)
    return result_document(plan, settings, raw, timing)


def print_summary(doc: dict[str, Any]) -> None:
    from rich.table import Table

    from coordinator.cli.ui import console

    run = doc["run"]
    con = console()
    status = "complete" if run["complete"] else "INCOMPLETE: " + "; ".join(run["incomplete"])
    con.print(
        f"[bold]{run['topology']}[/] {run['port_model']}, {run['contention']} contention, "
        f"{run['clock']} clock, {run['runtime']} runtime — {len(doc['multicasts'])} multicasts, "
        f"{run['steps']} steps, {run['wall_s']:.2f} s — {status}"
    )
    table = Table(show_lines=False)
    for col in ("algorithm", "n", "time", "traffic", "additional traffic", "mean arrival", "CV"):
        table.add_column(col, justify="right" if col != "algorithm" else "left")

    def fmt(s: dict[str, Any]) -> str:
        if s["mean"] is None:
            return "-"
        lo, hi = s["ci95"]
        return f"{s['mean']:.2f}" if lo == hi else f"{s['mean']:.2f} ± {(hi - lo) / 2:.2f}"

    for alg, s in doc["by_algorithm"].items():
        table.add_row(
            alg, str(s["time"]["n"] or s["traffic"]["n"]), fmt(s["time"]), fmt(s["traffic"]),
            fmt(s["additional_traffic"]), fmt(s["mean_arrival"]), fmt(s["cv"]),
        )  # fmt: skip
    con.print(table)
    if "latency" in doc:
        tm = doc["run"]["timing"]
        con.print(
            f"latency ({tm['model']}, Ts={tm['ts']:g}, β={tm['beta']:g}, L={tm['flits']}, "
            f"router={tm['router']:g}): "
            + "; ".join(f"{a} max {fmt(v['max'])}, mean {fmt(v['mean'])}, CV {fmt(v['cv'])}"
                        for a, v in doc["latency"].items())
        )  # fmt: skip
    if len(doc["multicasts"]) == 1 or all(len(m["destinations"]) <= 12 for m in doc["multicasts"][:1]):
        m = doc["multicasts"][0]
        arr = ", ".join(f"({a['node'][0]},{a['node'][1]})@{a['step']}" for a in m["arrivals"])
        con.print(f"arrival steps of multicast 0 ({m['algorithm']}): {arr}")
    errs = doc["errors"]
    if errs:
        con.print(f"[yellow]{len(errs)} error(s)[/], first: {errs[0]}")


# -- commands --------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    topo = _topology(args.topology)
    plan = plan_from(args, topo)
    if args.port_model is None:  # the mcast(n, d, c) model (seed 002) is all-port
        args.port_model = "all-port" if args.mcast_set else "one-port"
    settings = settings_from(args, trace=args.trace)
    if args.mcast_set:
        from coordinator.workloads.mcast import print_mcast, run_mcast

        doc = run_mcast(args, plan, settings, timing_from(args))
    else:
        doc = execute(plan, settings, timing=timing_from(args))
    if args.out:
        from coordinator.output.results import write_run

        written = write_run(Path(args.out), doc)
        if not args.json:
            print("wrote " + ", ".join(str(w) for w in written), file=sys.stderr)
    if args.json:
        json.dump(doc, sys.stdout)
        sys.stdout.write("\n")
    else:
        print_summary(doc)
        if args.mcast_set:
            print_mcast(doc)
    return 0 if doc["run"]["complete"] else 1


def cmd_algorithms(args: argparse.Namespace) -> int:
    from rich.table import Table

    from coordinator.cli.ui import console

    table = Table("algorithm", "family", "topologies", "source", "what it does")
    for a in registry:
        table.add_row(a.name, a.family, ", ".join(a.kinds), a.source, a.summary)
    console().print(table)
    for e in plugin_errors:
        print(f"warning: {e}", file=sys.stderr)
    return 0


DEMO_DESTS = "4,6 6,6 0,2 4,0 3,0 7,4"


def cmd_demo(args: argparse.Namespace) -> int:
    """Seed 000's Example 1 with every mesh algorithm, then a random comparison."""
    from coordinator.cli.ui import console

    con = console()
    topo = Topology.parse("mesh:8x8")
    algs = [a.name for a in registry if a.unsupported(topo) is None]
    con.rule("[bold]meshcast demo[/]: seed 000 Example 1 — 8×8 mesh, source (0,0), one-port")
    con.print(f"destinations {DEMO_DESTS}; algorithms: {', '.join(algs)}")
    plan = explicit(topo, algs, (0, 0), parse_coords(DEMO_DESTS))
    doc = execute(plan, RunSettings())
    print_summary(doc)
    for m in doc["multicasts"]:
        con.print(f"  {m['algorithm']:>14}: time {m['time']}, traffic {m['traffic']}, "
                  f"additional traffic {m['additional_traffic']}")  # fmt: skip
    topo2 = Topology.parse("torus:16x16")
    algs2 = [a.name for a in registry if a.unsupported(topo2) is None]
    con.rule("16×16 torus, 40 random destinations, 20 repetitions, same sets for every algorithm")
    plan2 = random_plan(topo2, algs2, 40, 20, seed=args.seed, source=(0, 0))
    doc2 = execute(plan2, RunSettings(seed=args.seed))
    print_summary(doc2)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from coordinator.experiments.bench import run_bench

    run_bench(quick=args.quick)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "algorithms": cmd_algorithms,
    "demo": cmd_demo,
    "bench": cmd_bench,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's own errors: one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="meshcast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run multicasts and report time, traffic and arrival variation")
    run.add_argument("--topology", required=True, help="mesh:MxN or torus:MxN (M columns, N rows)")
    run.add_argument(
        "--algorithm", required=True, help="a name from 'meshcast algorithms' (comma-separated for several)"
    )
    run.add_argument(
        "--source", default=None, help="x,y (random for each set if omitted with --random-dests)"
    )
    run.add_argument("--dests", default=None, help="destinations, e.g. '4,6 6,6 0,2'")
    run.add_argument(
        "--random-dests", type=int, default=None, metavar="K", help="K uniform random destinations"
    )
    run.add_argument("--repeat", type=int, default=1, help="repetitions (new random sets each time)")
    run.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="algorithm parameter")
    run.add_argument("--trace", action="store_true", help="record every link traversal")
    run.add_argument("--out", default=None, help="write run.json and CSVs into this directory")
    run.add_argument("--json", action="store_true", help="print the result document as JSON")
    m = run.add_argument_group("mcast(n, d, c) message sets (seed 002): shared contention, all-port")
    m.add_argument(
        "--mcast-set",
        choices=("random", "worst"),
        default=None,
        help="every node sources one message (replaces --dests/--random-dests)",
    )
    m.add_argument("--d", type=int, default=None, help="at most D destinations per message")
    m.add_argument("--c", type=int, default=None, help="no node receives more than C messages")
    add_run_options(run)
    run.set_defaults(port_model=None)
    sub.add_parser("algorithms", help="list registered algorithms and the topologies they support")
    demo = sub.add_parser("demo", help="the default experiment (what 'make demo' runs)")
    demo.add_argument("--seed", type=int, default=1)
    bench = sub.add_parser("bench", help="measure the relay-chain limit and the emulator's rates")
    bench.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test")
    for extra in _extra_commands():
        extra(sub)
    return parser


def _extra_commands() -> list[Callable[[Any], None]]:
    """Commands that live in their own modules register here (sweep, reproduce, show, ...)."""
    import importlib

    adders = []
    for mod in (
        "coordinator.experiments.sweep",
        "coordinator.experiments.show",
        "coordinator.cli.reproduce",
        "coordinator.cli.deploy",
        "coordinator.experiments.load",
    ):
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
            continue
        adders.append(m.add_command)
        COMMANDS.update(m.COMMANDS)
    return adders


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        msg = str(exc)
        print(msg if msg.startswith("meshcast") else f"meshcast: error: {msg}", file=sys.stderr)
        return 2
    except (PlanError, TopologyError) as exc:
        print(f"meshcast: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("meshcast: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
