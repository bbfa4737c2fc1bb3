"""``meshcast run``, ``algorithms`` and ``demo``: one plan emulated, its results printed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.result_types import CI, RunInfo, RunResult
from coordinator.analysis.timing import Timing
from coordinator.cli.options import (
    MAX_COUNT,
    MAX_REPEAT,
    add_run_options,
    check_params,
    in_range,
    parse_params,
    settings_from,
    timing_from,
    topology_from,
)
from coordinator.cli.ui import console, progress
from coordinator.errors import Interrupted, UsageError
from coordinator.experiments.mcast_run import run_document
from coordinator.experiments.run import emulate, emulate_apart, measured, run_result
from coordinator.output.paths import prepare_out_dir
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.wording import plural
from coordinator.workloads.mcast import mcast_plan, message_set
from coordinator.workloads.plan import Plan, PlanError, explicit, random_plan
from node.choices import Contention, PortModel
from node.routing import Algorithm, plugin_errors, registry
from node.topology import Topology, TopologyError, parse_coord, parse_coords

__all__ = [
    "COMMANDS",
    "add_command",
    "built_in",
    "demo_algorithms",
    "execute",
    "plan_from",
    "print_summary",
]


def algorithms_of(text: str) -> list[str]:
    """The comma-separated names of ``--algorithm``, or a UsageError when there are none."""
    algorithms = [a.strip() for a in text.split(",") if a.strip()]
    if not algorithms:
        raise UsageError("--algorithm is empty")
    return algorithms


def plan_from(args: argparse.Namespace, topo: Topology) -> Plan:
    """The plan of ``run``'s options (explicit, random or an mcast(n, d, c) set), validated."""
    algorithms = algorithms_of(args.algorithm)
    in_range("--repeat", args.repeat, 1, MAX_REPEAT)
    in_range("--random-dests", args.random_dests, 1, MAX_COUNT)
    in_range("--seed", args.seed, 0, 2**63 - 1)
    if getattr(args, "mcast_set", None) is None:  # (the set checks them itself) unused, never silently wrong
        in_range("--d", getattr(args, "d", None), 1, MAX_COUNT)
        in_range("--c", getattr(args, "c", None), 1, MAX_COUNT)
    params = check_params(algorithms, parse_params(args.param))
    warmup = warmup_of(args)
    try:
        if getattr(args, "mcast_set", None):
            return _mcast_plan(args, topo, algorithms, params)
        source = parse_coord(args.source) if args.source else None
        if args.dests is not None:
            if args.random_dests is not None:
                raise UsageError("give either --dests or --random-dests, not both")
            every = getattr(args, "inject_every", None) or 0
            dests = parse_coords(args.dests)
            return explicit(topo, algorithms, source or (0, 0), dests, args.repeat, params, every, warmup)
        if args.random_dests is None:
            raise UsageError("say which destinations: --dests 'x,y x,y ...' or --random-dests K")
        return random_plan(topo, algorithms, args.random_dests, args.repeat, args.seed, source, params)
    except (PlanError, TopologyError) as exc:
        raise UsageError(str(exc)) from None


def warmup_of(args: argparse.Namespace) -> int:
    """``--warmup-repeats`` checked, or its default: 1 when ``--dests`` is repeated, else 0.

    Warm-up repetitions exist for one multicast made again and again (``--dests``); random sets
    and message sets are never the same multicast twice, so an explicit value there is refused.
    Commands without the option (``coordinate``, ``compose``) get 0.
    """
    if not hasattr(args, "warmup_repeats"):
        return 0
    given = args.warmup_repeats
    if given is None:
        return 1 if args.dests is not None and args.repeat > 1 and not getattr(args, "mcast_set", None) else 0
    in_range("--warmup-repeats", given, 0, MAX_REPEAT)
    if given and (args.dests is None or getattr(args, "mcast_set", None)):
        raise UsageError("--warmup-repeats applies to repetitions of one --dests multicast; give --dests")
    return int(given)


def _mcast_plan(
    args: argparse.Namespace, topo: Topology, algorithms: list[str], params: dict[str, Any]
) -> Plan:
    """``run --mcast-set KIND --d D --c C --seed S``: the message set's plan for one algorithm."""
    if args.dests is not None or args.random_dests is not None:
        raise PlanError("--mcast-set makes the destinations: leave out --dests and --random-dests")
    if len(algorithms) != 1:
        raise PlanError("--mcast-set runs one algorithm at a time (several would compete for the links)")
    if args.d is None or args.c is None:
        raise PlanError("--mcast-set needs --d D (destinations per message) and --c C (congestion)")
    mset = message_set(topo, args.mcast_set, args.d, args.c, args.seed)
    return mcast_plan(mset, algorithms[0], params)


def execute(
    plan: Plan,
    settings: RunSettings,
    label: str = "deliveries",
    timing: Timing | None = None,
    apart: bool = False,
) -> RunResult:
    """Run ``plan`` with a progress bar on a terminal; its results.

    ``apart``: every multicast in an emulation of its own, one after another (for jitter).
    """
    with progress(label) as update:
        raw = trio.run(measured, emulate_apart if apart else emulate, plan, settings, update)
    return run_result(plan, settings, raw, timing)


def repetitions_apart(args: argparse.Namespace, plan: Plan) -> bool:
    """Whether ``run`` emulates each repetition on its own (the default for repeated ``--dests``,
    and for every multicast of a wormhole run: ``--together`` makes them compete).

    Repetitions of one multicast are for jitter; injected together they queue behind each other
    and the spread of their wall-clock latency measures that queue. ``--inject-every N`` spaces
    them N steps apart in one lockstep emulation instead; ``--together`` restores the queue.
    """
    every = getattr(args, "inject_every", None)
    together = getattr(args, "together", False)
    if every is not None:
        in_range("--inject-every", every, 1, MAX_COUNT)
        if together:
            raise UsageError("give either --inject-every or --together, not both")
        if args.clock == "free":
            raise UsageError(
                "--inject-every spaces logical steps, which the free clock does not follow; "
                "under --clock free repetitions already run one after another"
            )
        if args.dests is None:
            raise UsageError("--inject-every spaces repetitions of --dests; give --dests")
        return False
    if together or getattr(args, "mcast_set", None):
        return False
    if getattr(args, "switching", "") == "wormhole":  # isolated (see _wormhole_contention): each alone
        return args.repeat > 1 or (args.dests is None and len(algorithms_of(args.algorithm)) > 1)
    if args.dests is None:
        return False
    return args.repeat + plan.warmup_repeats > 1


def print_summary(result: RunResult) -> None:
    """The run's status line, a table per algorithm, latency, and the arrivals of a single multicast."""
    from rich.table import Table

    run = result.run
    con = console()
    status = "complete" if run.complete else "INCOMPLETE: " + "; ".join(run.incomplete)
    con.print(
        f"[bold]{run.topology}[/] {run.port_model}, {run.contention} contention, "
        f"{run.clock} clock, {run.runtime} runtime — {plural(len(result.multicasts), 'multicast')}, "
        + (f"{plural(run.steps, 'step')} emulated in all, " if run.clock == "lockstep" else "")
        + f"{run.wall_s:.2f} s — {status}"
    )
    caption = (
        _warmup_note(run) + "time and mean arrival in steps, traffic in link traversals; "
        "additional traffic = traffic − destinations; "
        "CV = SD / mean of the destinations' arrival (steps; wall: wall-clock latency); ± = 95% CI"
    )
    table = Table(show_lines=False, caption=caption)
    # the CV of wall-clock latency only where it measures something: under the free clock (under
    # lockstep the wall clock times the host, and the column changed from run to run)
    walled = run.clock == "free" and any(s.cv_wall.n for s in result.by_algorithm.values())
    cols = ["algorithm", "n", "time", "traffic", "additional traffic", "mean arrival", "CV"]
    for col in cols + ["CV wall"] * walled:  # the CV of wall-clock latency where it was measured
        table.add_column(col, justify="right" if col != "algorithm" else "left")

    def fmt(s: CI) -> str:
        if s.mean is None:
            return "-"
        lo, hi = s.low, s.high
        if lo == hi or lo is None or hi is None:
            return f"{s.mean:.2f}"
        return f"{s.mean:.2f} ± {(hi - lo) / 2:.2f}"

    for alg, s in result.by_algorithm.items():
        table.add_row(
            alg, str(s.time.n or s.traffic.n), fmt(s.time), fmt(s.traffic),
            fmt(s.additional_traffic), fmt(s.mean_arrival), fmt(s.cv),
            *[fmt(s.cv_wall)] * walled,
        )  # fmt: skip
    con.print(table)
    tm = result.run.timing
    if result.latency is not None and tm is not None:
        con.print(
            f"latency ({tm.model}, Ts={tm.ts:g}, β={tm.beta:g}, L={tm.flits}, router={tm.router:g}): "
            + "; ".join(f"{a} max {fmt(v.max)}, mean {fmt(v.mean)}, CV {fmt(v.cv)}"
                        for a, v in result.latency.items())
        )  # fmt: skip
    if len(result.multicasts) == 1 and len(result.multicasts[0].destinations) <= 24:
        m = result.multicasts[0]
        arr = ", ".join(f"({a.node[0]},{a.node[1]})@{a.step}" for a in m.arrivals)
        con.print(f"arrival steps ({m.algorithm}): {arr or 'none'}")
    errs = result.errors
    if errs:
        from rich.markup import escape

        con.print(f"[yellow]{plural(len(errs), 'error')}[/], first: {escape(error_line(errs[0]))}")


def error_line(err: Mapping[str, Any]) -> str:
    """One error record in words: its kind, multicast, node and cause, then anything else."""
    e = dict(err)
    words = [str(e.pop("kind", "error"))]
    if "mc" in e:
        words.append(f"multicast {e.pop('mc')}")
    if (node := e.pop("node", None)) is not None:
        words.append(f"at ({node[0]},{node[1]})")
    if (missing := e.pop("missing", None)) is not None:
        words.append("missing " + " ".join(f"({x},{y})" for x, y in missing))
    cause = e.pop("cause", None)
    rest = ", ".join(f"{k} {v}" for k, v in e.items())
    return " ".join(words) + (f": {cause}" if cause else "") + (f" ({rest})" if rest else "")


JITTER_ROWS = 40


def _num(v: float | str | None, us: bool = False) -> str:
    """A table number: µs whole from 100 up (tenths below), steps to three significant digits; a
    withheld statistic (report.WITHHELD) as it is."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if us:
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"
    return f"{v:.3g}"


def _with_ci(f: dict[str, Any], key: str) -> str:
    """``key``'s µs value over its 95% CI in brackets (``1234`` above ``[1200, 1300]``); the CI
    "[—]" when too few repetitions were kept to state it."""
    v = f[f"wall_us_{key}"]
    if v is None:
        return "-"
    low, high = f[f"wall_us_{key}_ci95_low"], f[f"wall_us_{key}_ci95_high"]
    ci = f"[{_num(low, True)}, {_num(high, True)}]" if low is not None and not isinstance(low, str) else "[—]"
    return f"{_num(v, True)}\n{ci}"


def _jitter_cells(f: dict[str, Any]) -> dict[str, str]:
    """The jitter table's cells of one jitter.csv row (report.jitter_fields), by heading.

    An SD is in parentheses and a 95% CI in brackets: ± means a 95% CI of a mean everywhere in
    meshcast's output.
    """
    return {
        "algorithm": f["algorithm"],
        "source": f["source"],
        "node": f["node"],
        "n": str(f["repetitions"]),
        "steps mean (SD)": f"{_num(f['step_mean'])} ({_num(f['step_sd'])})",
        "median µs [95% CI]": _with_ci(f, "median"),
        "IQR µs": _num(f["wall_us_iqr"], True),
        "mean µs": _num(f["wall_us_mean"], True),
        "SD µs [95% CI]": _with_ci(f, "sd"),
        "p95 µs": _num(f["wall_us_p95"], True),
        "p99 µs": _num(f["wall_us_p99"], True),
        "host": f["host"],
    }


def jitter_caption(repetitions: Sequence[int]) -> str:
    """What a jitter table's statistics are and, where some are "—", why (their minimum of kept
    repetitions against the table's)."""
    from coordinator.analysis.metrics import P95_MIN_REPETITIONS, P99_MIN_REPETITIONS

    low, high = min(repetitions, default=0), max(repetitions, default=0)
    kept = f"{low}" if low == high else f"{low}-{high}"
    text = (
        f"n = kept repetitions ({kept} here); SD = sample SD (n − 1); IQR = p75 − p25; 95% CIs: the "
        "median's from order statistics (exact, any distribution; — below 6), the SD's chi-square "
        "(exact for normal data, too narrow for heavy tails)"
    )
    if low < P99_MIN_REPETITIONS:
        text += (
            f"; p95 needs {P95_MIN_REPETITIONS} kept repetitions and p99 {P99_MIN_REPETITIONS} "
            "(fewer: the tail is the largest value renamed), — where a row has fewer"
        )
    return text


def print_jitter(result: RunResult) -> None:
    """Per node, over repetitions, its arrival latency: steps mean (SD); µs median [CI], IQR,
    mean, SD [CI], p95, p99.

    One algorithm, source (``run --dests`` has one) or host goes in the title rather than a column, and
    a CI goes under its value, so that the table fits a 100-column terminal; the headings wrap between
    words, the numbers never do.
    """
    from rich.table import Table

    from coordinator.output.report import jitter_fields

    rows = result.jitter
    if not rows:
        return
    run = result.run
    how = run.repetitions or "together"
    cells = [_jitter_cells(jitter_fields(j)) for j in rows[:JITTER_ROWS]]
    one = {h: next(iter(v)) for h in ("algorithm", "source", "host") if len(v := {c[h] for c in cells}) == 1}
    heads = [h for h in cells[0] if h not in one]
    where = f" of {one['algorithm']}" if "algorithm" in one else ""
    where += f" from {one['source']}" if "source" in one else ""
    where += f" on {one['host']}" if one.get("host") else ""
    table = Table(
        title=f"jitter: each node's arrival latency{where} over repetitions (repetitions {how})",
        caption=_warmup_note(run) + jitter_caption([j.repetitions for j in rows]),
    )
    for h in heads:
        widest = max(*(len(line) for c in cells for line in c[h].split("\n")), *map(len, h.split()))
        table.add_column(h, justify="left" if h in ("algorithm", "host") else "right", min_width=widest)
    for c in cells:
        table.add_row(*(c[h] for h in heads))
    con = console()
    con.print(table)
    if len(rows) > JITTER_ROWS:
        con.print(f"… {len(rows) - JITTER_ROWS} more nodes (all of them in jitter.csv with --out)")


def telemetry_line(result: RunResult) -> str | None:
    """One line on where the latency went (per-hop telemetry), or None without telemetry."""
    tel = result.telemetry
    if tel is None or tel.residence_per_hop_ns is None or tel.link_per_hop_ns is None:
        return None
    line = (
        f"telemetry: per hop {tel.link_per_hop_ns / 1e6:.3f} ms on links, "
        f"{tel.residence_per_hop_ns / 1e6:.3f} ms in nodes ({tel.deliveries} deliveries)"
    )
    if tel.hosts is not None and tel.links is not None and tel.covariance is not None:
        line += (
            f"; of the per-node variance the hosts own {tel.hosts:.0%}, the links {tel.links:.0%}, "
            f"the covariance {tel.covariance:+.0%} ({plural(tel.destinations, 'destination')})"
        )
    return line


def print_telemetry(result: RunResult) -> None:
    """The telemetry's line and the fidelity verdict's (free clock)."""
    line = telemetry_line(result)
    if line is not None:
        console().print(line, highlight=False, markup=False)
    if result.fidelity is not None:
        console().print(result.fidelity.line(), highlight=False, markup=False)


def _warmup_note(run: RunInfo) -> str:
    """What the warm-up discarded, as the start of a caption ("" when nothing was)."""
    n, gone = run.warmup_repeats, run.warmup_discarded
    if not gone:
        return ""
    first = plural(n, "repetition")
    was = "was" if n == 1 else "were"
    return f"warm-up: the first {first} of each multicast {was} run and discarded ({gone} in all); "


def _model_line(settings: RunSettings) -> Callable[[int], float] | None:
    """Under a link model, the latency it alone predicts after h hops (ns): h times a hop's exact
    mean (the message serialised, the delay and jitter as drawn: LinkSpec.hop_moments)."""
    model = settings.link_model
    if model is None or settings.clock != "free":
        return None
    per_hop, _ = model.default.hop_moments(settings.flits * settings.flit_bytes)
    return lambda h: h * per_hop * 1e9


def write_outputs(
    out: Any, result: RunResult, plan: Plan, predict: Callable[[int], float] | None = None
) -> list[Any]:
    """run.json and the CSVs; with jitter also jitter.csv, its heat maps jitter.png and, where
    wall times were measured, latency against hop count, latency-hops.png (with ``predict``'s
    line, latency in ns after h hops, when given)."""
    from coordinator.output.report import (
        latency_by_hops,
        plot_jitter,
        plot_latency_by_hops,
        plot_telemetry,
        telemetry_by_hops,
        write_jitter_csv,
    )
    from coordinator.output.results import write_run

    written: list[Any] = list(write_run(out, result))
    if result.jitter:
        written.append(write_jitter_csv(out / "jitter.csv", result.jitter))
        topo = plan.topology
        written.append(plot_jitter(out / "jitter.png", topo.cols, topo.rows, result.jitter))
        if latency_by_hops(result.multicasts):
            written.append(plot_latency_by_hops(out / "latency-hops.png", result.multicasts, predict))
    if telemetry_by_hops(result.multicasts):
        per_hop = predict(1) if predict is not None else None
        written.append(plot_telemetry(out / "telemetry.png", result.multicasts, per_hop))
    if result.mcast is None:
        from coordinator.cli.plot_command import write_plots

        written.extend(write_plots(out))
    return written


def print_mcast(m: Mapping[str, Any]) -> None:
    """Two lines: completion time against √(cn), peak buffer occupancy against c (``m``: the
    ``mcast`` section of the results)."""
    con = console()
    req = m.get("requested") or {}
    head = f"mcast(n={m['n']}, d={m['d']}, c={m['c']})"
    if req:
        head += f" — {req.get('set', '?')} set asked with d={req.get('d')}, c={req.get('c')}"
    con.print(f"[bold]{head}[/]: {m['messages']} messages, {m['deliveries']} deliveries")
    if m["time"] is None:
        con.print(f"[red]not complete[/]: {m['missing']} deliveries missing, {m['dropped']} packets dropped")
    else:
        con.print(
            f"completion time {m['time']} steps = {m['time_over_sqrt_cn']:.2f} × √(cn) "
            f"(√(cn) = {m['sqrt_cn']:.1f}; lower bound {m['lower_bound']})"
        )
    if m["peak_buffer"] is None:
        con.print(
            f"peak buffer occupancy: not measured by this runtime; traffic {m['traffic']} link traversals"
        )
    else:
        con.print(
            f"peak buffer occupancy {m['peak_buffer']} packets = {m['peak_buffer_over_c']:.2f} × c "
            f"(held past a step: {m['peak_held']}; busiest node's mean {m['mean_occupancy']:.2f}); "
            f"traffic {m['traffic']} link traversals"
        )


def print_incomplete(run: RunInfo) -> None:
    """One line on stderr per kind of cause that kept the run from completing, and one for the
    strangers the nodes' link ports refused (which did not)."""
    for line in run.incomplete:
        print(f"meshcast: incomplete: {line}", file=sys.stderr)
    rejected = run.rejected or {}
    if rejected:
        where = ", ".join(f"({node}) {n}" for node, n in rejected.items())
        print(
            f"meshcast: refused {plural(sum(rejected.values()), 'unauthenticated connection')} at the "
            f"link ports ({where}); not the run's errors ('rejected' in the JSON)",
            file=sys.stderr,
        )


# -- commands --------------------------------------------------------------------------------
def _keep_partial(
    exc: Interrupted, out: Path | None, plan: Plan, settings: RunSettings, timing: Timing | None
) -> None:
    """Write what arrived before a signal to ``out``, marked incomplete, so nothing is lost."""
    if out is None or not isinstance(exc.partial, RawRun):
        return
    from coordinator.output.results import write_run

    written = write_run(out, run_result(plan, settings, exc.partial, timing))
    print("wrote partial results " + ", ".join(str(w) for w in written), file=sys.stderr)


def print_prediction(result: RunResult) -> None:
    """``--predict``: each node's measured wall-clock arrivals beside the link model's prediction."""
    rows = result.prediction
    if rows is None:
        return
    from rich.table import Table

    table = Table(
        "algorithm", "node", "h", "n", "mean ms", "h·m ms", "SD ms", "√h·s ms", "host ms/hop",
        title="measured against the link model (mean h·m, SD √h·s; the rest is the hosts')",
        caption="n = kept repetitions; m, s: a hop's exact mean and SD as the model draws it (the "
        "message serialised at the rate, then max(0, d + jitter)); SD is the sample SD (n − 1)",
    )  # fmt: skip

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:.3f}"

    for r in rows:
        table.add_row(
            r.algorithm, f"{r.node[0]},{r.node[1]}", str(r.hops), str(r.repetitions), ms(r.mean_s),
            ms(r.predicted_mean_s), ms(r.sd_s), ms(r.predicted_sd_s), ms(r.host_cost_per_hop_s),
        )  # fmt: skip
    console().print(table)
    if not rows:
        console().print("no node was reached in two or more repetitions: nothing to compare (--repeat N)")


def _wormhole_contention(args: argparse.Namespace) -> None:
    """Under wormhole switching: each multicast in an idle network of its own (isolated) unless
    the run makes them compete (``--together``, ``--inject-every``, ``--mcast-set``); shared
    contention with several multicasts and neither is refused, as it would inject every set at
    once into one network (where trees of several deadlock)."""
    if getattr(args, "switching", "") != "wormhole":
        return
    competing = args.together or args.inject_every is not None or bool(args.mcast_set)
    if args.contention is None:
        args.contention = Contention.SHARED if competing else Contention.ISOLATED
        return
    several = args.repeat > 1 or (args.dests is None and len(algorithms_of(args.algorithm)) > 1)
    if args.contention == "shared" and several and not competing:
        raise UsageError(
            "--contention shared under wormhole switching would inject every multicast at once into "
            "one network: add --inject-every N to space them, --together to make them compete, "
            "or use --contention isolated (each in an idle network of its own)"
        )


def cmd_run(args: argparse.Namespace) -> int:
    """``meshcast run``: validate everything, run, write ``--out``, print or dump JSON."""
    topo = topology_from(args.topology)
    if args.port_model is None and args.mcast_set:  # Herley, Pietracaprina & Pucci's mcast(n, d, c) model
        args.port_model = PortModel.ALL_PORT  # is all-port (not given otherwise: the setting's default)
    if args.replay and not args.out:
        raise UsageError("--replay writes replay.html into the results: give --out DIR")
    _wormhole_contention(args)
    settings = settings_from(args, topo, trace=args.trace or args.replay)
    if args.predict and (settings.link_model is None or settings.clock != "free"):
        raise UsageError(
            "--predict compares free-clock arrivals with a link model: give --clock free and --link-*"
        )
    timing = timing_from(args)
    plan = plan_from(args, topo)
    apart = repetitions_apart(args, plan)
    out = prepare_out_dir(args.out, force=args.force) if args.out else None
    if out is not None:  # what made it, each setting as it ran: meshcast run --config DIR/config.toml
        resolved = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
        resolved["warmup_repeats"] = plan.warmup_repeats
        (out / "config.toml").write_text(args.experiment_file_of(resolved))
    if args.mcast_set:
        mset = message_set(plan.topology, args.mcast_set, args.d, args.c, args.seed)
        with progress("deliveries") as update:
            result = run_document(plan, settings, timing, update, mset)
    else:
        try:
            result = execute(plan, settings, timing=timing, apart=apart)
        except Interrupted as exc:
            _keep_partial(exc, out, plan, settings, timing)
            raise
        if args.repeat + plan.warmup_repeats > 1 and args.dests is not None:
            every = args.inject_every
            how = "apart" if apart else f"every {every} steps" if every else "together"
            result = replace(result, run=replace(result.run, repetitions=how))
        if args.predict and settings.link_model is not None:
            from coordinator.analysis.linkpredict import predict

            result = replace(
                result,
                prediction=tuple(
                    predict(result.multicasts, settings.link_model, settings.flits * settings.flit_bytes)
                ),
            )
    if out is not None:
        written = [out / "config.toml", *write_outputs(out, result, plan, predict=_model_line(settings))]
        if args.replay:
            from coordinator.output.replay import write_replay

            written.append(write_replay(out / "replay.html", [(result.to_json(), out.absolute().name)]))
        if not args.json:
            print("wrote " + ", ".join(str(w) for w in written), file=sys.stderr)
    if args.json:
        json.dump(result.to_json(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print_summary(result)
        print_jitter(result)
        print_telemetry(result)
        print_prediction(result)
        if result.mcast is not None:
            print_mcast(result.mcast)
    print_incomplete(result.run)
    return 0 if result.run.complete else 1


def cmd_algorithms(args: argparse.Namespace) -> int:
    """``meshcast algorithms``: every registered rule, its topologies and its parameters."""
    from rich.table import Table

    table = Table("algorithm", "family", "topologies", "parameters", "source", "what it does")
    for a in registry:
        params = "\n".join(f"{p.name}={p.default!r}: {p.allowed()}; {p.help}" for p in a.params) or "-"
        table.add_row(a.name, a.family, ", ".join(a.kinds), params, a.source, a.summary)
    console().print(table)
    for e in plugin_errors:
        print(f"warning: {e}", file=sys.stderr)
    return 0


DEMO_DESTS = "4,6 6,6 0,2 4,0 3,0 7,4"
MALANI_EXAMPLE_1: dict[str, tuple[int, int]] = {
    "vh": (25, 12),
    "diag": (21, 12),
    "dist": (17, 17),
    "pair": (17, 12),
}
"""Example 1 (8×8 mesh, source (0,0), :data:`DEMO_DESTS`) as Malani's thesis gives it: per
algorithm (traffic in links, one-port time in steps) — §2.2 for VH, DIAG and DIST (Figs. 4–6),
§3.2 for PAIR (Fig. 8). The thesis shows MIN on Example 2 only. DIST's 17 steps: the thesis does
not give its send order; ours is the optimal one (the Algorithms reference lists it as open)."""
DEMO_DEFINITIONS = (
    "CV = SD / mean of one multicast's arrival steps at its destinations (population SD; Al-Dubai et "
    "al.'s node-level coefficient of variation, their §4.2.2): 0 when every destination receives at "
    "the same step",
    "additional traffic = traffic − number of destinations: the link traversals beyond the one per "
    "destination that any multicast needs",
)


def built_in(algorithm: Algorithm) -> bool:
    """Whether ``algorithm`` is one of meshcast's own rules (in the ``ALGORITHMS`` of a family
    module of ``node.routing``), not a plug-in registered through the ``meshcast.algorithms``
    entry points."""
    return any(
        any(a is algorithm for a in getattr(module, "ALGORITHMS", ()))
        for name, module in list(sys.modules.items())
        if name.startswith("node.routing.")
    )


def demo_algorithms(topology: Topology) -> list[str]:
    """The built-in algorithms that run on ``topology``, in the registry's order (plug-ins left out)."""
    return [a.name for a in registry if built_in(a) and a.unsupported(topology) is None]


def print_example_1(result: RunResult) -> None:
    """Malani's algorithms on Example 1: our time and traffic beside the thesis's."""
    from rich.table import Table

    table = Table(
        title="Example 1, Malani's algorithms: ours beside the thesis's",
        caption="time in steps (one-port), traffic in links; — the thesis gives none (MIN: Example 2 only); "
        "DIST's 17 steps: the thesis does not give its send order",
    )
    for col in ("algorithm", "time", "thesis time", "traffic", "thesis traffic"):
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    for a in ("vh", "diag", "dist", "pair", "min"):
        s = result.by_algorithm.get(a)
        if s is None:
            continue
        paper = MALANI_EXAMPLE_1.get(a)
        ours = [f"{ci.mean:g}" if ci.mean is not None else "-" for ci in (s.time, s.traffic)]
        table.add_row(a, ours[0], str(paper[1]) if paper else "—", ours[1], str(paper[0]) if paper else "—")
    console().print(table)


def cmd_demo(args: argparse.Namespace) -> int:
    """Example 1 of Malani's thesis with every built-in mesh algorithm, then a random comparison on
    a torus. Plug-ins installed through entry points are left out: the demo shows the papers'
    algorithms."""
    in_range("--seed", args.seed, 0, 2**63 - 1)
    con = console()
    topo = Topology.parse("mesh:8x8")
    algs = demo_algorithms(topo)
    con.rule(
        "[bold]meshcast demo[/]: Example 1 of A. Malani, “Efficient Multicast Algorithms for Mesh and "
        "Torus Networks” — 8×8 mesh, source (0,0), one-port"
    )
    con.print(f"destinations {DEMO_DESTS}; algorithms: {', '.join(algs)}")
    plugins = [a.name for a in registry if not built_in(a)]
    if plugins:
        con.print(f"installed plug-ins, not in the demo: {', '.join(plugins)}")
    plan = explicit(topo, algs, (0, 0), parse_coords(DEMO_DESTS))
    result = execute(plan, RunSettings())
    print_summary(result)
    for line in DEMO_DEFINITIONS:
        con.print(line)
    print_example_1(result)
    topo2 = Topology.parse("torus:16x16")
    algs2 = demo_algorithms(topo2)
    con.rule("16×16 torus, 40 random destinations, 20 repetitions, same sets for every algorithm")
    plan2 = random_plan(topo2, algs2, 40, 20, seed=args.seed, source=(0, 0))
    result2 = execute(plan2, RunSettings(seed=args.seed))
    print_summary(result2)
    return 0 if result.run.complete and result2.run.complete else 1


def add_command(sub: Any) -> None:
    """Register ``run``, ``algorithms`` and ``demo``."""
    run = sub.add_parser("run", help="run multicasts and report time, traffic and arrival variation")
    run.add_argument("--topology", required=True, help="mesh:MxN or torus:MxN (M columns, N rows)")
    run.add_argument(
        "--algorithm",
        "--algorithms",
        required=True,
        help="a name from 'meshcast algorithms' (comma-separated for several)",
    )
    run.add_argument(
        "--source",
        default=None,
        help="x,y (omitted: 0,0 with --dests, random for each set with --random-dests)",
    )
    run.add_argument("--dests", default=None, help="destinations, e.g. '4,6 6,6 0,2'")
    run.add_argument(
        "--random-dests", type=int, default=None, metavar="K", help="K uniform random destinations"
    )
    run.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="repetitions: of the --dests multicast (for jitter: each emulated on its own, one after "
        "another, unless --inject-every or --together), or new random sets with --random-dests",
    )
    run.add_argument(
        "--warmup-repeats",
        type=int,
        default=None,
        metavar="N",
        help="run N more repetitions of the --dests multicast first, for each algorithm, and leave them "
        "out of every result (the first may run cold, slower than the rest). "
        "Default: 1 when --repeat is above 1, else 0; given explicitly it applies with --repeat 1 too",
    )
    run.add_argument(
        "--inject-every",
        type=int,
        default=None,
        metavar="N",
        help="lockstep: inject the repetitions of --dests N steps apart in one emulation",
    )
    run.add_argument(
        "--together",
        action="store_true",
        help="inject every repetition at step 0 in one emulation (they queue: measures load, not jitter)",
    )
    run.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="algorithm parameter",
    )
    run.add_argument("--trace", action="store_true", help="record every link traversal")
    run.add_argument(
        "--replay",
        action="store_true",
        help="also write replay.html into --out: a page that plays the run step by step (implies --trace)",
    )
    run.add_argument(
        "--predict",
        action="store_true",
        help="free clock with a link model: print each node's measured arrival mean and SD beside the "
        "model's h·m and √h·s, m and s a hop's exact mean and SD as the model draws it (the rate "
        "term for --flits × --flit-bytes, the delay, jitter clamped at zero) (JSON: prediction)",
    )
    run.add_argument(
        "--out",
        default=None,
        help="write run.json, CSVs, jitter.csv/jitter.png and plots into this new (or empty) directory",
    )
    run.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    run.add_argument("--json", action="store_true", help="print the result document as JSON")
    m = run.add_argument_group(
        "mcast(n, d, c) message sets (Herley, Pietracaprina & Pucci, “Store-and-Forward Multicast Routing "
        "on the Mesh”): shared contention, all-port"
    )
    m.add_argument(
        "--mcast-set",
        choices=("random", "worst"),
        default=None,
        help="every node sources one message (replaces --dests/--random-dests)",
    )
    m.add_argument("--d", type=int, default=None, help="at most D destinations per message")
    m.add_argument("--c", type=int, default=None, help="no node receives more than C messages")
    add_run_options(run)
    sub.add_parser("algorithms", help="list registered algorithms, their topologies and parameters")
    demo = sub.add_parser("demo", help="the default experiment (what 'make demo' runs)")
    demo.add_argument("--seed", type=int, default=1, help="seed of the random torus comparison")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "algorithms": cmd_algorithms,
    "demo": cmd_demo,
}
