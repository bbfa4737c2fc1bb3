"""Does a tree's depth or a path's length drive the variation of arrival times?

The trees VH, DIAG, DIST, PAIR and MIN against the paths DP and MP on an 8×8 mesh: the same
seeded random destination sets for every algorithm, the free clock, each multicast alone on warm
node processes (``emulate_apart``), repeated, under two conditions: no link model, and links of
delay d with normal jitter σ (``--link-delay``, ``--link-jitter``). Per destination, the SD over
the repetitions of its wall-clock latency against h, the links its copy crossed (its depth in a
tree, its position along a path), with √h·σ, the link model's own share, beside it; per multicast
Al-Dubai et al.'s node-level CV (SD / mean of its destinations' latencies, §4.2.2). The first repetition
of each set and algorithm is a warm-up, recorded and left out of every number.
Prose: reports/variation.md.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import trio

from coordinator.analysis.telemetry import split
from coordinator.errors import UsageError
from coordinator.experiments.run import emulate_apart, merge_runs, runtime_problem
from coordinator.output.report import fmt
from coordinator.reproduce import framework
from coordinator.reproduce._variation_report import SIGN, build_report, cell, title, write_plots
from coordinator.reproduce._variation_study import (
    ALGORITHMS,
    ARRIVAL_COLUMNS,
    CONDITIONS,
    CV_COLUMNS,
    MULTICAST_COLUMNS,
    NODE_COLUMNS,
    SET_COLUMNS,
    SUMMARY_COLUMNS,
    ArrivalRow,
    MulticastRow,
    Read,
    SetRow,
    Stats,
    cv_rows,
    families,
    node_rows,
    rounded,
    stats,
    summary_rows,
    xy,
)
from coordinator.reproduce._variation_study import DEFAULT_REPEAT as DEFAULT_REPEAT  # the contract's
from coordinator.reproduce.framework import Context, Option, ProgressFn
from coordinator.runtimes.records import Arrival, RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Coord, Topology
from node.transport.linkmodel import Jitter, LinkModel, LinkSpec, parse_duration

__all__ = [
    "ALGORITHMS",
    "CONDITIONS",
    "Stats",
    "cv_rows",
    "draw_sets",
    "make_plan",
    "node_rows",
    "records",
    "run_condition",
    "stats",
]

NAME = "variation"
SUMMARY = (
    "arrival-time variation of trees (VH, DIAG, DIST, PAIR, MIN) and paths (DP, MP) "
    "against hop count, with and without a link model, 8×8 mesh"
)
TOPOLOGY = "mesh:8x8"
SETS, DESTS, WARMUP, WALL_BUDGET = 4, 10, 1, 120.0
LINK_DELAY, LINK_JITTER = "1ms", "normal:0.25ms"
RUNTIME = "processes"
DILATION = 4.0
"""--time-dilation of the link condition: the hosts of the 2-core machine add about 0.5 ms a hop
against 1 ms links (docs/measurements/telemetry.md), so K = 2 is at the verdict's edge; 4 leaves room."""
BLOCKS = 4
"""The rounds run in this many blocks, the two conditions alternating block by block (ABBA), so a
drift of the machine's speed or load touches both conditions alike."""
RETRIES = 2  # times the multicasts a failed processes run never started are run again, on fresh nodes
PORT_MODEL = "all-port"  # the free clock sends on every port at once; the logical steps follow all-port


# -- the experiment -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DestSet:
    """One destination set: its number, a uniformly random source, destinations uniform over the rest."""

    index: int
    source: Coord
    destinations: tuple[Coord, ...]


@dataclass(frozen=True, slots=True)
class Slot:
    """What one multicast of the plan is: algorithm, set, repetition, and whether it is a warm-up."""

    algorithm: str
    set: int
    rep: int
    warmup: bool


def draw_sets(topology: Topology, sets: int, dests: int, seed: int) -> list[DestSet]:
    """``sets`` destination sets of ``dests`` nodes, each with its own uniformly random source."""
    rng = random.Random(seed)
    nodes = list(topology.nodes())
    out = []
    for i in range(sets):
        src = rng.choice(nodes)
        out.append(DestSet(i, src, tuple(rng.sample([n for n in nodes if n != src], dests))))
    return out


def make_plan(
    topology: Topology, sets: Sequence[DestSet], algorithms: Sequence[str], reps: int, warmup: int
) -> tuple[Plan, dict[int, Slot]]:
    """Every repetition of every set and algorithm, in rounds (a round runs each set × algorithm once).

    Rounds spread a drift of the machine's speed over every algorithm alike; the first ``warmup``
    rounds are the warm-up repetitions.
    """
    mcs: list[Multicast] = []
    slots: dict[int, Slot] = {}
    for rep in range(warmup + reps):
        for s in sets:
            for a in algorithms:
                slots[len(mcs)] = Slot(a, s.index, rep, rep < warmup)
                mcs.append(Multicast(len(mcs), a, s.source, s.destinations, 0))
    return Plan(topology, tuple(mcs)), slots


def interleaved(plan: Plan, slots: Mapping[int, Slot], blocks: int) -> list[Plan]:
    """The plan's rounds in ``blocks`` runs of whole rounds (fewer if there are fewer rounds), each
    led by one cold multicast (a copy of its first, under a new id and in no slot) that starts the
    block's fresh nodes and is left out of every record."""
    rounds: dict[int, list[Multicast]] = defaultdict(list)
    for m in plan.multicasts:
        rounds[slots[m.id].rep].append(m)
    reps = sorted(rounds)
    n = max(1, min(blocks, len(reps)))
    cold_id = max((m.id for m in plan.multicasts), default=-1) + 1
    out = []
    for b in range(n):
        mcs = [m for r in reps[b * len(reps) // n : (b + 1) * len(reps) // n] for m in rounds[r]]
        cold = replace(mcs[0], id=cold_id + b)
        out.append(Plan(plan.topology, (cold, *mcs)))
    return out


def run_condition(
    plan: Plan, settings: RunSettings, progress: ProgressFn | None, retries: int = RETRIES
) -> tuple[RawRun, list[str]]:
    """``emulate_apart`` of ``plan``, then again of what a failed run never started (``retries`` times).

    A processes run stops at its first incomplete multicast; the ones after it run anew on fresh
    nodes. Returns the merged records and one line per run that did not complete.
    """
    runs: list[RawRun] = []
    notes: list[str] = []
    todo = plan
    for attempt in range(retries + 1):
        raw = trio.run(emulate_apart, todo, settings, progress)
        runs.append(raw)
        started = set().union(*(r.injected for r in runs))
        left = tuple(m for m in plan.multicasts if m.id not in started)
        if raw.incomplete:
            more = f"; {len(left)} multicasts not started" + (
                ", run again" if left and attempt < retries else ""
            )
            notes.append(
                f"run {attempt + 1} of {len(todo.multicasts)} multicasts incomplete: "
                + "; ".join(raw.incomplete[:3])
                + (more if left else "")
            )
        if not left:
            break
        todo = Plan(plan.topology, left)
    return merge_runs(runs), notes


def records(
    condition: str, plan: Plan, slots: Mapping[int, Slot], raw: RawRun
) -> tuple[list[ArrivalRow], list[MulticastRow]]:
    """The tidy rows of one condition: one per delivery at a destination, one per multicast (its status).

    A delivery is timed (``ok``) when it was read on the host that injected its multicast; a
    multicast is complete when every destination got it once, timed, and no other node got it.
    Latencies are in the emulated network's time (divided by the run's dilation), split into link
    and node time where the delivery carried telemetry from this injection.
    """
    k = raw.dilation
    by_mc: dict[int, list[Arrival]] = defaultdict(list)
    for a in raw.arrivals:
        by_mc[a.mc].append(a)
    arrivals: list[ArrivalRow] = []
    mcs: list[MulticastRow] = []
    for m in plan.multicasts:
        slot, dests = slots[m.id], set(m.destinations)
        t0, host = raw.injected.get(m.id, (None, None))
        seen: Counter[Coord] = Counter()
        stray = timed = 0
        for a in sorted(by_mc.get(m.id, []), key=lambda a: a.node):
            if a.node not in dests:
                stray += 1
                continue
            seen[a.node] += 1
            lat = link = None
            if t0 is not None and a.wall_ns is not None and a.host == host:
                lat = round((a.wall_ns - t0) / k)
                if a.tel is not None and a.tel[1] == t0:  # the path starts at this injection
                    link = round(split(a.tel, a.wall_ns).link / k)
            timed += lat is not None
            arrivals.append(
                ArrivalRow(
                    condition=condition,
                    algorithm=slot.algorithm,
                    set=slot.set,
                    rep=slot.rep,
                    warmup=int(slot.warmup),
                    node=xy(a.node),
                    hops=a.hops,
                    step=a.step,
                    latency_ns=lat,
                    link_ns=link,
                    node_ns=None if lat is None or link is None else lat - link,
                    ok=int(lat is not None),
                )
            )
        dupes = sum(n - 1 for n in seen.values())
        complete = len(seen) == len(dests) and not dupes and not stray and timed == sum(seen.values())
        mcs.append(
            MulticastRow(
                condition=condition,
                algorithm=slot.algorithm,
                set=slot.set,
                rep=slot.rep,
                warmup=int(slot.warmup),
                id=m.id,
                source=xy(m.source),
                destinations=len(dests),
                reached=len(seen),
                duplicates=dupes,
                stray=stray,
                wall_ok=timed,
                complete=int(complete),
            )
        )
    return arrivals, mcs


# -- command --------------------------------------------------------------------------------------
OPTIONS = (
    Option("--topology", f"the mesh (default {TOPOLOGY})", default=TOPOLOGY),
    Option("--algorithms", "comma list (default all seven)", default=",".join(ALGORITHMS)),
    Option("--sets", f"destination sets, each from its own random source (default {SETS})", int, SETS),
    Option("--dests", f"destinations per set (default {DESTS})", int, DESTS),
    Option(
        "--warmup",
        f"repetitions per set and algorithm run first and left out (default {WARMUP})",
        int,
        WARMUP,
    ),
    Option("--link-delay", f"the link model's delay per link (default {LINK_DELAY})", default=LINK_DELAY),
    Option(
        "--link-jitter", f"the link model's jitter DIST:VALUE (default {LINK_JITTER})", default=LINK_JITTER
    ),
    framework.runtime_option(
        RUNTIME,
        ("processes", "in-process"),
        "where the nodes run (default processes: one "
        "OS process per node, warm across repetitions; in-process for a quick look)",
    ),
    Option(
        "--time-dilation",
        f"K: the link condition's links act K times slower and its latencies are divided by K, so "
        f"that a host's cost per hop weighs K times less (default {DILATION:g}; 1: none)",
        float,
        DILATION,
    ),
    Option(
        "--wall-budget",
        f"wall-clock budget of each multicast's run, s (default {WALL_BUDGET:g})",
        float,
        WALL_BUDGET,
    ),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """The checked options."""

    topology: Topology
    algorithms: tuple[str, ...]
    model: LinkModel
    extra: tuple[str, ...]  # the non-default options, for the command line in the report


def check(args: Any) -> Settings:
    """The options, checked: one line naming the fault for anything that cannot run."""
    try:
        topo = Topology.parse(args.topology)
    except ValueError as exc:
        raise UsageError(f"--topology: {exc}") from None
    if topo.is_torus:
        raise UsageError(f"--topology {args.topology}: this study runs on a mesh")
    algorithms = framework.names_in(args.algorithms, ALGORITHMS, "--algorithms")
    framework.positive(args.sets, "--sets")
    if not 1 <= args.dests <= topo.size - 1:
        raise UsageError(f"--dests must be between 1 and {topo.size - 1} on {topo.spec}, got {args.dests}")
    framework.positive(args.warmup, "--warmup", strict=False)
    if not (math.isfinite(args.time_dilation) and args.time_dilation >= 1):
        raise UsageError(f"--time-dilation must be a number at least 1, got {args.time_dilation}")
    if not (math.isfinite(args.wall_budget) and args.wall_budget > 0):
        raise UsageError(f"--wall-budget must be a positive number of seconds, got {args.wall_budget}")
    try:
        delay = parse_duration(args.link_delay, "--link-delay")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        spec = LinkSpec(delay=delay, jitter=Jitter.parse(args.link_jitter))
    except ValueError as exc:
        raise UsageError(f"--link-jitter: {exc}") from None
    if (problem := runtime_problem(args.runtime)) is not None:
        raise UsageError(problem)
    defaults = (
        ("topology", TOPOLOGY),
        ("algorithms", ",".join(ALGORITHMS)),
        ("sets", SETS),
        ("dests", DESTS),
        ("warmup", WARMUP),
        ("link_delay", LINK_DELAY),
        ("link_jitter", LINK_JITTER),
        ("runtime", RUNTIME),
        ("time_dilation", DILATION),
        ("wall_budget", WALL_BUDGET),
    )
    extra = tuple(
        f"--{k.replace('_', '-')} {getattr(args, k):g}"
        if isinstance(d, float)
        else f"--{k.replace('_', '-')} {getattr(args, k)}"
        for k, d in defaults
        if getattr(args, k) != d
    )
    return Settings(topo, algorithms, LinkModel(spec, seed=args.seed), extra)


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run both conditions; write arrivals.csv, multicasts.csv, sets.csv and reproduction.json."""
    s = check(args)
    watch = framework.Stopwatch()
    load_before = _loadavg()
    sets = draw_sets(s.topology, args.sets, args.dests, args.seed)
    plan, slots = make_plan(s.topology, sets, s.algorithms, args.repeat, args.warmup)
    base = RunSettings(
        port_model=PORT_MODEL,
        contention="isolated",
        clock="free",
        seed=args.seed,
        runtime=args.runtime,
        wall_budget=args.wall_budget,
    )
    conditions = {
        "bare": base,
        "link": replace(base, link_model=s.model, time_dilation=args.time_dilation),
    }
    blocks = interleaved(plan, slots, BLOCKS)
    total = 2 * sum(len(m.destinations) for m in plan.multicasts)
    done_before = 0
    raws: dict[str, list[RawRun]] = {c: [] for c in CONDITIONS}
    notes: list[str] = []
    walls: dict[str, float] = dict.fromkeys(CONDITIONS, 0.0)
    loads: dict[str, list[list[float] | None]] = {c: [] for c in CONDITIONS}
    for b, block in enumerate(blocks):
        for cond in CONDITIONS if b % 2 == 0 else CONDITIONS[::-1]:  # ABBA

            def progress(done: int, _total: int, offset: int = done_before) -> None:
                if ctx.progress is not None:
                    ctx.progress(min(offset + done, total), total)

            t = framework.Stopwatch()
            raw, why = run_condition(block, conditions[cond], progress)
            walls[cond] = round(walls[cond] + t.wall(), 1)
            loads[cond].append(_loadavg())
            notes += [f"{cond}, block {b + 1}: {w}" for w in why]
            raws[cond].append(raw)
            done_before += sum(len(m.destinations) for m in block.multicasts[1:])
    arrivals: list[ArrivalRow] = []
    mcs: list[MulticastRow] = []
    for cond in CONDITIONS:
        a, m = records(cond, plan, slots, merge_runs(raws[cond]))
        arrivals += a
        mcs += m
    framework.write_tidy(out / "arrivals.csv", ARRIVAL_COLUMNS, arrivals)
    framework.write_tidy(out / "multicasts.csv", MULTICAST_COLUMNS, mcs)
    framework.write_tidy(
        out / "sets.csv",
        SET_COLUMNS,
        (
            SetRow(set=d.index, source=xy(d.source), destinations=" ".join(map(xy, d.destinations)))
            for d in sets
        ),
    )
    spec = s.model.default
    assert spec.jitter is not None
    facts = {
        "topology": s.topology.spec,
        "algorithms": list(s.algorithms),
        "sets": args.sets,
        "dests": args.dests,
        "warmup": args.warmup,
        "seed": args.seed,
        "runtime": args.runtime,
        "port_model": PORT_MODEL,
        "link_delay": args.link_delay,
        "link_jitter": args.link_jitter,
        "link_model": s.model.describe(),
        "delay_ms": spec.delay * 1e3,
        "jitter_sd_ms": spec.jitter.sd * 1e3,
        "condition_wall_s": walls,
        "time_dilation": args.time_dilation,
        "blocks": len(blocks),
        "loadavg_blocks": loads,
        "notes": notes,
        "loadavg_before": load_before,
        "loadavg_after": _loadavg(),
        "memory_gib": _memory_gib(),
    }
    cmd = framework.command_line(NAME, args, *s.extra)
    framework.write_json(
        out / "reproduction.json", framework.run_facts(cmd, watch, repeat=args.repeat, **facts)
    )


def _read(out: Path) -> Read:
    meta = json.loads((out / "reproduction.json").read_text())
    """An earlier run's files (the CSVs' cells come back as written: :func:`framework.read_tidy`)."""
    arrivals = cast(list[ArrivalRow], framework.read_tidy(out / "arrivals.csv"))
    mcs = cast(list[MulticastRow], framework.read_tidy(out / "multicasts.csv"))
    sets = cast(list[SetRow], framework.read_tidy(out / "sets.csv"))
    complete = {(m["condition"], m["algorithm"], m["set"], m["rep"]) for m in mcs if m["complete"]}
    return Read(meta, arrivals, mcs, sets, node_rows(arrivals, complete), cv_rows(arrivals, complete))


def run(args: Any, ctx: Context) -> int:
    """Emulate (unless ``--report-only``), then rebuild the derived tables, plots and report.md."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    read = framework.read_report_only(NAME, out, _read)
    meta = read.meta
    algorithms = tuple(meta["algorithms"])
    framework.write_tidy(out / "nodes.csv", NODE_COLUMNS, rounded(read.nodes))
    framework.write_tidy(out / "cv.csv", CV_COLUMNS, rounded(read.cvs))
    rows = [(c, a, stats(read.nodes, read.cvs, c, [a])) for c in CONDITIONS for a in algorithms]
    framework.write_tidy(out / "summary.csv", SUMMARY_COLUMNS, summary_rows(rows))
    report = build_report(out, read, rows, write_plots(out, read, rows))
    lines = []
    for cond in CONDITIONS:
        fam = families(read.nodes, read.cvs, cond, algorithms)
        if fam is not None:
            lines.append(
                f"{title(cond, meta)}: at equal h, paths − trees: SD {cell(fam.sd.diff, 3)} ms "
                f"({SIGN[fam.sd.sign]} 0), robust SD {cell(fam.iqr.diff, 3)} ms ({SIGN[fam.iqr.sign]} 0); "
                f"mean h trees {fmt(fam.tree.mean_h, 1)}, paths {fmt(fam.path.mean_h, 1)}; "
                f"node-level CV trees {cell(fam.tree.cv, 3)}, paths {cell(fam.path.cv, 3)}"
            )
    wall = float(meta["wall_s"])
    said = f"variation: {len(read.multicasts)} multicasts in {wall:.1f} s; wrote {out / 'report.md'}"
    return framework.finish(ctx, out, report, said, lines, all(m["complete"] for m in read.multicasts))
