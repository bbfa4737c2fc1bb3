"""Seed 003 (Chen, Chang & Sheu): Hamiltonian dual-path vs graph- and pattern-based proximity grouping.

Figs. 10–11's setting (16×16 mesh, random or clustered destinations) in one isolated-contention emulation,
timed by the contention-free wormhole model, plus the worked example of §2.2/§3.1 (prose: reports/chen.md).
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.analysis.timing import Timing
from coordinator.errors import UsageError
from coordinator.output.report import Series, fmt, markdown_table, plot_series
from coordinator.reproduce import _wormhole as wormhole
from coordinator.reproduce import framework
from coordinator.reproduce.framework import Context, Option
from coordinator.runtimes.records import RunSettings
from node.routing.grouping import graph_groups, pattern_groups
from node.routing.twolevel import with_leaders
from node.topology import Coord, Topology

__all__ = ["ALGORITHMS", "KS", "SCENARIOS", "TIMING", "draw_points", "proximity_destinations", "run_example"]

NAME = "chen"
SUMMARY = "seed 003 (Chen et al.): dual-path vs graph/pattern proximity grouping on a 16×16 mesh, Figs. 10–11"
DEFAULT_REPEAT = 50

TOPOLOGY = "mesh:16x16"
KS: tuple[int, ...] = tuple(range(16, 241, 16))
ALGORITHMS = ("dp", "group-graph", "group-pattern")
GROUPING = ("group-graph", "group-pattern")
LABELS: Mapping[str, str] = {
    "dp": "Ham-Path (DP)",
    "group-graph": "Graph-Based",
    "group-pattern": "Pattern-Based",
}
COLOURS: Mapping[str, str] = {"dp": "#1f77b4", "group-graph": "#2ca02c", "group-pattern": "#d62728"}
SCENARIOS: Mapping[str, str] = {
    "random": "random destinations (Fig. 10)",
    "proximity": "destinations with proximity (Fig. 11)",
}
THRESHOLD = 0.8  # §4: "T = 4/5 used in the graph-based proximity grouping scheme"
TIMING = Timing("wormhole", ts=1000.0, beta=5.0, flits=100, router=20.0)  # ns
CLUSTER_SIZE = 8
CLUSTER_DENSITY = 0.5
METRICS = ("latency_max", "latency_mean", "traffic", "additional_traffic", "cv", "groups")
METRIC_NAMES: Mapping[str, str] = {
    "latency_max": "multicast latency (µs)",
    "traffic": "links used (channel traversals)",
    "groups": "number of groups",
}


_text = partial(framework.text, NAME)


# -- destination sets ---------------------------------------------------------------------------
def proximity_destinations(
    topology: Topology,
    source: Coord,
    k: int,
    rng: random.Random,
    cluster_size: int = CLUSTER_SIZE,
    density: float = CLUSTER_DENSITY,
) -> tuple[Coord, ...]:
    """k destinations with proximity: a uniform sample of the union of ⌈k / cluster_size⌉ squares of about
    cluster_size / density nodes round uniform centres, widened until the union (less the source) holds k."""
    if not 1 <= k <= topology.size - 1:
        raise ValueError(f"cannot pick {k} destinations on {topology.spec}")
    if cluster_size < 1 or not 0 < density <= 1:
        raise ValueError("cluster size must be at least 1 and density in (0, 1]")
    nodes = list(topology.nodes())
    centres = rng.sample(nodes, min(len(nodes), math.ceil(k / cluster_size)))
    r = max(1, math.ceil((math.sqrt(cluster_size / density) - 1) / 2))
    while True:
        pool = sorted(
            {
                (x, y)
                for cx, cy in centres
                for x in range(max(0, cx - r), min(topology.cols, cx + r + 1))
                for y in range(max(0, cy - r), min(topology.rows, cy + r + 1))
            }
            - {source}
        )
        if len(pool) >= k:
            return tuple(rng.sample(pool, k))
        r += 1


def draw_points(
    topology: Topology,
    ks: Sequence[int],
    repeat: int,
    seed: int,
    cluster_size: int = CLUSTER_SIZE,
    density: float = CLUSTER_DENSITY,
) -> list[wormhole.Point]:
    """``repeat`` sets per k and scenario: a uniform source, then uniform or clustered destinations
    (one generator per scenario, so adding a scenario or a k does not move the other's sets)."""
    nodes = list(topology.nodes())
    points: list[wormhole.Point] = []
    for i, scenario in enumerate(SCENARIOS):
        rng = random.Random(seed * 1000 + i)
        for k in ks:
            for rep in range(repeat):
                src = rng.choice(nodes)
                if scenario == "random":
                    dests = tuple(rng.sample([n for n in nodes if n != src], k))
                else:
                    dests = proximity_destinations(topology, src, k, rng, cluster_size, density)
                points.append(wormhole.Point(scenario, k, rep, src, dests))
    return points


def latency_ns(algorithm: str, step: int, hops: int, startups: int) -> float:
    """§4's wormhole latency of one delivery in ns (the lockstep step is not used: no contention)."""
    return TIMING.latency(step, hops, startups)


# -- the worked example (§2.2, §3.1, Figs. 2–3) ---------------------------------------------------
EXAMPLE_TOPOLOGY = "mesh:8x8"
EXAMPLE_SOURCE: Coord = (2, 5)
EXAMPLE: tuple[Coord, ...] = ((1, 6), (2, 6), (1, 7), (2, 3), (5, 2), (1, 2), (0, 2), (6, 1))
EXAMPLE_PAPER_CHANNELS: Mapping[str, int] = {"dp": 23, "group-graph": 15, "group-pattern": 15}
EXAMPLE_PAPER_GROUPS = "{(1,6),(2,6),(1,7)}, {(2,3),(1,2),(0,2)}, {(5,2),(6,1)}"
EXAMPLE_PAPER_LEADERS = "(2,6), (2,3), (5,2)"


@dataclass(frozen=True, slots=True)
class Example:
    """The worked example through the emulation: per algorithm its row and its groups."""

    rows: Mapping[str, wormhole.McRow]
    groups: Mapping[str, list[list[Coord]]]
    leaders: Mapping[str, list[Coord]]
    status: wormhole.EmulationStatus


def run_example(settings: RunSettings) -> Example:
    """Emulate the paper's 8×8 example by DP and both groupings (graph-based at the example's T = 1/2)."""
    topo = Topology.parse(EXAMPLE_TOPOLOGY)
    point = wormhole.Point("example", len(EXAMPLE), 0, EXAMPLE_SOURCE, EXAMPLE)
    em = wormhole.emulate_points(topo, [point], ALGORITHMS, settings, {"group-graph": {"T": 0.5}})
    return _example({r.algorithm: r for r in wormhole.mc_rows(em, latency_ns)}, em.status)


def _example(rows: Mapping[str, wormhole.McRow], status: wormhole.EmulationStatus) -> Example:
    """The example's rows with its groups and leaders (pure functions of the example)."""
    topo = Topology.parse(EXAMPLE_TOPOLOGY)
    groups = {
        "dp": [sorted(EXAMPLE)],
        "group-graph": graph_groups(EXAMPLE, 0.5),
        "group-pattern": pattern_groups(EXAMPLE),
    }
    leaders = {a: sorted(with_leaders(topo, EXAMPLE_SOURCE, g)) for a, g in groups.items() if a != "dp"}
    return Example(rows, groups, leaders, status)


def _groups_text(groups: Sequence[Sequence[Coord]]) -> str:
    return ", ".join("{" + ",".join(f"({x},{y})" for x, y in sorted(g)) + "}" for g in groups)


def _coords(cs: Sequence[Coord]) -> str:
    return ", ".join(f"({x},{y})" for x, y in cs)


def _example_section(ex: Example) -> str:
    """The worked example's groups, leaders, channels and latency beside the paper's channels."""
    columns: Sequence[tuple[str, str, Callable[[str], str]]] = (
        ("algorithm", "l", lambda a: LABELS[a]),
        ("groups (ours)", "l", lambda a: _groups_text(ex.groups[a]) if a != "dp" else "—"),
        ("leaders (ours)", "l", lambda a: _coords(ex.leaders.get(a, [])) or "—"),
        ("channels (ours)", "r", lambda a: str(ex.rows[a].traffic)),
        ("channels (paper)", "r", lambda a: str(EXAMPLE_PAPER_CHANNELS[a])),
        ("latency (µs)", "r", lambda a: fmt(_us(ex.rows[a].latency_max), 3)),
    )
    table = markdown_table(
        [c[0] for c in columns],
        [[cell(a) for *_, cell in columns] for a in ALGORITHMS],
        [c[1] for c in columns],
    )
    head = _text(
        "example", destinations=_coords(EXAMPLE), groups=EXAMPLE_PAPER_GROUPS, leaders=EXAMPLE_PAPER_LEADERS
    )
    return f"{head}\n\n{table}\n{_text('example note')}\n"


# -- numbers from the runs --------------------------------------------------------------------------
def _verdict(c: wormhole.Comparison) -> str:
    if c.points and len(c.lower) == c.points:
        return "holds"
    if c.lower and not c.higher:
        return "holds at some points, indistinguishable at the others"
    if c.lower:
        return "holds only in part"
    return "does not hold"


def drivers(ours: wormhole.Summaries, threshold: float) -> str:
    """What the numbers come down to: the price of a start-up in hops, and how finely each rule groups."""
    hops = (TIMING.ts + TIMING.flits * TIMING.beta) / (TIMING.beta + TIMING.router)
    k0, k1 = ours.ks[0], ours.ks[-1]
    cells = [
        f"{LABELS[g]}, {scenario}: {fmt(ours.mean(scenario, g, k0, 'groups'), 1)} groups at k = {k0}, "
        f"{fmt(ours.mean(scenario, g, k1, 'groups'), 1)} at k = {k1}"
        for scenario in SCENARIOS
        for g in GROUPING
    ]
    parts = [
        _text("drivers", cost=TIMING.ts + TIMING.flits * TIMING.beta, hops=hops, groups="; ".join(cells))
    ]
    sparse = ours.mean("random", "group-graph", k0, "groups")
    dense = ours.mean("random", "group-graph", k1, "groups")
    parts += [_text("sparse", threshold=threshold)] if sparse is not None and sparse >= 0.75 * k0 else []
    parts += [_text("dense")] if dense is not None and dense == 1 else []
    return " ".join(parts) + "\n"


def claims(ours: wormhole.Summaries) -> list[str]:
    """The paper's comparative claims, each checked against our data (computed, not written in)."""
    out: list[str] = []
    for metric, what in (("traffic", "links used"), ("latency_max", "multicast latency")):
        for scenario in SCENARIOS:
            for g in GROUPING:
                c = wormhole.paired(ours.rows, scenario, g, "dp", metric)
                comparison = wormhole.compare_text(c, LABELS[g], "DP", what)
                fields = {"label": LABELS[g], "what": what, "scenario": SCENARIOS[scenario]}
                out.append(_text("beats", fields, verdict=_verdict(c), comparison=comparison))
    # Fig. 11 vs Fig. 10: proximity lowers the latency of the grouping schemes
    for g in ALGORITHMS:
        rnd = [ours.mean("random", g, k, "latency_max") for k in ours.ks]
        prx = [ours.mean("proximity", g, k, "latency_max") for k in ours.ks]
        pairs = [(a, b) for a, b in zip(rnd, prx, strict=True) if a is not None and b is not None]
        below = sum(1 for a, b in pairs if b < a)
        rel = statistics.fmean((b - a) / a * 100 for a, b in pairs) if pairs else float("nan")
        verdict = (
            "holds" if pairs and below == len(pairs) else "does not hold" if below == 0 else "holds in part"
        )
        signed = f"{'+' if rel >= 0 else '−'}{abs(rel):.1f}%"
        fields = {"label": LABELS[g], "verdict": verdict, "rel": signed}
        out.append(_text("proximity", fields, below=below, points=len(pairs)))
    return out


def _table(ours: wormhole.Summaries, scenario: str) -> str:
    """One scenario's per-k latency and links (95% CIs) and mean numbers of groups."""
    latency, links = partial(wormhole.ci_cell, digits=3, scale=1000.0), partial(wormhole.ci_cell, digits=1)
    columns: list[wormhole.Column] = [
        (f"latency {LABELS[a]} (µs)", a, "latency_max", latency) for a in ALGORITHMS
    ]
    columns += [(f"links {LABELS[a]}", a, "traffic", links) for a in ALGORITHMS]
    columns += [(f"groups {LABELS[g]}", g, "groups", partial(wormhole.mean_cell, digits=2)) for g in GROUPING]
    return wormhole.point_table(ours, scenario, columns)


def _us(v: float | None) -> float | None:
    return None if v is None else v / 1000


def write_plots(out: Path, ours: wormhole.Summaries) -> list[Path]:
    """Latency, links used and number of groups against k, one plot per scenario (ours only)."""
    note = (
        f"ours: mean of {ours.repeat} sets per point, 95% CI shaded; the paper's Figs. 10–11 give no numbers"
    )
    groups_note = f"mean of {ours.repeat} sets per point; graph-based at T = {THRESHOLD:g}"

    def plot(name: str, m: str, series: list[Series], title: str, note: str) -> Path:
        return plot_series(
            out / "plots" / name, series, title, "number of destinations", METRIC_NAMES[m], note
        )

    written = []
    for scenario, title in SCENARIOS.items():
        for m, scale in (("latency_max", 1000.0), ("traffic", 1.0)):
            stats = {a: [ours.stat(scenario, a, k, m) for k in ours.ks] for a in ALGORITHMS}
            curves = [wormhole.ci_series(LABELS[a], ours.ks, stats[a], COLOURS[a], scale) for a in ALGORITHMS]
            head = f"{METRIC_NAMES[m].split(' (')[0]}, {title}, 16×16 mesh"
            written.append(plot(f"{scenario}_{m}.png", m, curves, head, note))
        groups = {g: [ours.mean(scenario, g, k, "groups") for k in ours.ks] for g in GROUPING}
        curves = [Series(LABELS[g], list(ours.ks), groups[g], False, COLOURS[g]) for g in GROUPING]
        written.append(
            plot(f"{scenario}_groups.png", "groups", curves, f"number of groups, {title}", groups_note)
        )
    return written


def build_report(
    ours: wormhole.Summaries,
    example: Example,
    status: wormhole.EmulationStatus,
    plots: Sequence[Path],
    out: Path,
    meta: Mapping[str, Any],
) -> str:
    """report.md's text."""
    fields = {"labels": ", ".join(LABELS.values()), "ks": ", ".join(map(str, ours.ks)), "repeat": ours.repeat}
    fields |= {"steps": status.steps, "state": status.state, "errors": len(status.errors)}
    parts = [
        _text("head", meta, fields) + "\n",
        *claims(ours),
        "",
        drivers(ours, meta["threshold"]),
        _example_section(example),
        _text("tables") + "\n",
    ]
    for scenario, title in SCENARIOS.items():
        parts.append(f"### {title[0].upper()}{title[1:]}\n")
        parts.append(_table(ours, scenario))
    parts += [_text("plots") + "\n", *wormhole.plot_links(plots, out), _text("rows") + "\n"]
    return "\n".join(parts)


# -- command --------------------------------------------------------------------------------------
OPTIONS = (
    Option(
        "--ks", "numbers of destinations, a comma list (default 16,32,…,240)", default=",".join(map(str, KS))
    ),
    Option("--threshold", f"graph-based grouping threshold T (default {THRESHOLD:g}, §4)", float, THRESHOLD),
    Option("--cluster-size", "destinations per cluster (proximity sets)", int, CLUSTER_SIZE),
    Option(
        "--cluster-density",
        "destinations per node of a cluster's square (proximity sets)",
        float,
        CLUSTER_DENSITY,
    ),
    framework.runtime_option(),
    Option("--wall-budget", "wall-clock budget (s)", float, 3600.0),
)


def _check(args: Any) -> tuple[int, ...]:
    ks = framework.int_list(args.ks, "--ks", 1, 255)
    if not 0 < args.threshold <= 1:
        raise UsageError(f"--threshold must be in (0, 1], got {args.threshold}")
    framework.positive(args.cluster_size, "--cluster-size")
    if not 0 < args.cluster_density <= 1:
        raise UsageError(f"--cluster-density must be in (0, 1], got {args.cluster_density}")
    framework.positive(args.wall_budget, "--wall-budget")
    return ks


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every point and the worked example; write tidy.csv, example.csv and reproduction.json."""
    ks = _check(args)
    watch = framework.Stopwatch()
    topo = Topology.parse(TOPOLOGY)
    settings = framework.lockstep_settings(args, "all-port")
    points = draw_points(topo, ks, args.repeat, args.seed, args.cluster_size, args.cluster_density)
    em = wormhole.emulate_points(
        topo, points, ALGORITHMS, settings, {"group-graph": {"T": args.threshold}}, ctx.progress
    )
    example = run_example(settings)
    groups = _group_counts(points, args.threshold)
    rows = [
        replace(r, groups=groups.get((r.scenario, r.algorithm, r.k, r.rep)))
        for r in wormhole.mc_rows(em, latency_ns)
    ]
    wormhole.write_rows(out / "tidy.csv", rows)
    wormhole.write_rows(out / "example.csv", example.rows.values())
    meta = framework.run_facts(
        framework.command_line(NAME, args, *([] if ks == KS else [f"--ks {args.ks}"])),
        watch,
        seed=args.seed,
        repeat=args.repeat,
        ks=list(ks),
        threshold=args.threshold,
        cluster_size=args.cluster_size,
        density=args.cluster_density,
        runtime=args.runtime,
        multicasts=len(rows),
        status=asdict(em.status),
        example_status=asdict(example.status),
    )
    framework.write_json(out / "reproduction.json", meta)


def _group_counts(points: Sequence[wormhole.Point], threshold: float) -> dict[tuple[str, str, int, int], int]:
    """Per point and grouping rule, its number of groups (the rules' pure grouping functions)."""
    rules: Mapping[str, Callable[[Sequence[Coord]], list[list[Coord]]]] = {
        "group-graph": lambda d: graph_groups(d, threshold),
        "group-pattern": pattern_groups,
    }
    return {
        (p.scenario, g, p.k, p.rep): len(rule(p.destinations)) for p in points for g, rule in rules.items()
    }


def _read(out: Path) -> tuple[wormhole.Summaries, Example, wormhole.EmulationStatus, dict[str, Any]]:
    meta = json.loads((out / "reproduction.json").read_text())
    rows = wormhole.read_rows(out / "tidy.csv")
    ours = wormhole.Summaries(
        rows, wormhole.summarise_rows(rows, METRICS), tuple(meta["ks"]), int(meta["repeat"])
    )
    ex_rows = {r.algorithm: r for r in wormhole.read_rows(out / "example.csv")}
    example = _example(ex_rows, wormhole.EmulationStatus(**meta["example_status"]))
    return ours, example, wormhole.EmulationStatus(**meta["status"]), meta


def run(args: Any, ctx: Context) -> int:
    """Emulate (unless ``--report-only``), then rebuild claims, plots and report.md from the files."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    ours, example, status, meta = framework.read_report_only("chen", out, _read)
    meta["wall_s"] = float(meta["wall_s"])
    plots = write_plots(out, ours)
    report = build_report(ours, example, status, plots, out, meta)
    said = f"chen: {len(ours.rows)} multicasts in {meta['wall_s']:.1f} s; wrote {out / 'report.md'}"
    return framework.finish(ctx, out, report, said, claims(ours), status.complete and example.status.complete)
