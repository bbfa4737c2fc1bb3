"""Chen, Chang & Sheu (1999): Hamiltonian dual-path vs graph- and pattern-based proximity grouping.

Figs. 10–11's setting (16×16 mesh, random or clustered destinations) in one isolated-contention emulation,
timed by the contention-free wormhole model (t_r per hop and per flit), plus the worked example of §2.2/§3.1
(prose: reports/chen.md).
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any

from coordinator.analysis.timing import Timing
from coordinator.analysis.verdicts import COLUMNS, Claim, Verdict, by_points, legend, repeat_warning
from coordinator.errors import UsageError
from coordinator.output.report import Series, algorithm_colour, fmt, fmt_delta, markdown_table, plot_series
from coordinator.reproduce import _wormhole as wormhole
from coordinator.reproduce import framework
from coordinator.reproduce.framework import Context, Option
from coordinator.runtimes.records import RunSettings
from coordinator.wording import plural
from node.routing.grouping import graph_cuts, graph_groups, graph_split, pattern_groups
from node.routing.twolevel import with_leaders
from node.topology import Coord, Topology, coords_text

__all__ = ["ALGORITHMS", "KS", "SCENARIOS", "TIMING", "draw_points", "proximity_destinations", "run_example"]

NAME = "chen"
SUMMARY = (
    "Chen, Chang & Sheu (1999): dual-path vs graph/pattern proximity grouping on a 16×16 mesh, Figs. 10–11"
)
DEFAULT_REPEAT = 50

TOPOLOGY = "mesh:16x16"
KS: tuple[int, ...] = tuple(range(16, 241, 16))
ALGORITHMS = ("dp", "group-graph", "group-pattern")
GROUPING = ("group-graph", "group-pattern")
LABELS = {"dp": "Ham-Path (DP)", "group-graph": "Graph-Based", "group-pattern": "Pattern-Based"}
COLOURS: Mapping[str, str] = {a: algorithm_colour(a) for a in ALGORITHMS}  # as in every plot (output.palette)
SCENARIOS = {"random": "random destinations (Fig. 10)", "proximity": "destinations with proximity (Fig. 11)"}
THRESHOLD = 0.8  # §4: "T = 4/5 used in the graph-based proximity grouping scheme"
GREAT = 10.0  # our tolerance for §4's "a great amount": a mean latency reduction of at least this (%)
TIMING = Timing("wormhole", ts=1000.0, beta=5.0, flits=100, router=20.0)  # ns, t_r charged per hop
READINGS: Mapping[str, Timing] = {"per-hop": TIMING, "per-flit": replace(TIMING, beta=25.0, router=0.0)}
CHECKS = (("traffic", "per-hop"), ("latency_max", "per-hop"), ("latency_max", "per-flit"))  # metric, reading
#: The per-flit reading is a flit engine in cycles of t_l + t_r = 25 ns: one cycle per flit and per hop, a
#: start-up of t_s / 25 ns = 40 cycles, no preparation; each multicast alone in an idle network (eq. 7 exact).
FLITS = "flits"  # the model name of those rows in tidy.csv
CYCLE_NS = READINGS["per-flit"].beta + READINGS["per-flit"].router
FLIT_SETTINGS = RunSettings(port_model="all-port", contention="isolated", runtime="model",
                            switching="wormhole", flits=TIMING.flits, ts=round(TIMING.ts / CYCLE_NS), prep=0,
                            max_steps=100_000)  # fmt: skip
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
        sq = {
            (x, y) for cx, cy in centres for x in range(cx - r, cx + r + 1) for y in range(cy - r, cy + r + 1)
        }
        pool = sorted(n for n in sq if topology.contains(n) and n != source)
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


def timed(em: wormhole.Emulated) -> list[wormhole.McRow]:
    """Every multicast's row under each reading of t_r (model = the reading; the step is not used)."""
    return [r for m, t in READINGS.items() for r in wormhole.mc_rows(em, lambda _, *d: t.latency(*d), m)]  # noqa: B023


def flit_rows(em: wormhole.Emulated) -> list[wormhole.McRow]:
    """Every multicast's row from its flit-level run: a delivery's latency is its arrival cycle × 25 ns."""
    return wormhole.mc_rows(em, lambda _a, step, _h, _s: CYCLE_NS * step, FLITS)


@dataclass(frozen=True, slots=True)
class Agreement:
    """Flit-level rows against the per-flit formula's rows of the same multicasts."""

    pairs: int
    last: int  # the last delivery (the multicast's latency, as Figs. 10–11 plot it) equal
    equal: int  # every delivery equal: the last and the mean delivery's latency and the CV
    later: int  # not every delivery equal, none earlier than the formula (the mean and the last not below it)
    by_algorithm: Mapping[str, tuple[int, int, int]]  # algorithm → (last, equal, pairs)
    worst: float  # the largest |flits − formula| of a multicast's latency (ns)
    worst_mean: float  # the largest |flits − formula| of a multicast's mean delivery (ns)
    first: str  # the first multicast not equal at every delivery, described ("" when none)


def _same(x: float | None, y: float | None) -> bool:
    return (x is None) == (y is None) and (x is None or y is None or abs(x - y) <= 1e-6)


def agreement(flits: Sequence[wormhole.McRow], formula: Sequence[wormhole.McRow]) -> Agreement:
    """Pair each flit-level row with the formula's row of the same (scenario, algorithm, k, set) (both
    complete): is the last delivery equal (to 1e-6 ns), is every one (the last, the mean and the CV), and
    where not, is none earlier."""
    key = {(r.scenario, r.algorithm, r.k, r.rep): r for r in formula}
    tally: dict[str, list[int]] = {a: [0, 0, 0] for a in ALGORITHMS}
    later, worst, worst_mean, first = 0, 0.0, 0.0, ""
    for f in flits:
        g = key.get((f.scenario, f.algorithm, f.k, f.rep))
        if g is None:
            continue
        ok = f.complete and g.complete
        last = ok and _same(f.latency_max, g.latency_max)
        same = last and _same(f.latency_mean, g.latency_mean) and _same(f.cv, g.cv)
        t = tally[f.algorithm]
        t[0], t[1], t[2] = t[0] + last, t[1] + same, t[2] + 1
        if (
            ok
            and not same
            and all(
                x is not None and y is not None and x >= y - 1e-6
                for x, y in ((f.latency_max, g.latency_max), (f.latency_mean, g.latency_mean))
            )
        ):
            later += 1
        if f.latency_max is not None and g.latency_max is not None:
            worst = max(worst, abs(f.latency_max - g.latency_max))
        if f.latency_mean is not None and g.latency_mean is not None:
            worst_mean = max(worst_mean, abs(f.latency_mean - g.latency_mean))
        if not same and not first:
            first = f"{LABELS[f.algorithm]}, {f.scenario}, k = {f.k}, set {f.rep}"
    by = {a: (t[0], t[1], t[2]) for a, t in tally.items() if t[2]}
    n = sum(t[2] for t in by.values())
    return Agreement(n, sum(t[0] for t in by.values()), sum(t[1] for t in by.values()), later, by, worst,
                     worst_mean, first)  # fmt: skip


# -- the worked example (§2.2, §3.1, Figs. 2–3) ---------------------------------------------------
EXAMPLE_TOPOLOGY = "mesh:8x8"
EXAMPLE_SOURCE: Coord = (2, 5)
EXAMPLE: tuple[Coord, ...] = ((1, 6), (2, 6), (1, 7), (2, 3), (5, 2), (1, 2), (0, 2), (6, 1))
EXAMPLE_PAPER_CHANNELS: Mapping[str, int] = {"dp": 23, "group-graph": 15, "group-pattern": 15}
EXAMPLE_PAPER_GROUPS = (((1, 6), (2, 6), (1, 7)), ((2, 3), (1, 2), (0, 2)), ((5, 2), (6, 1)))
EXAMPLE_PAPER_LEADERS: tuple[Coord, ...] = ((2, 6), (2, 3), (5, 2))


@dataclass(frozen=True, slots=True)
class Example:
    """The worked example through the emulation: per reading of t_r and algorithm its row; its groups."""

    rows: Mapping[tuple[str, str], wormhole.McRow]  # by reading of t_r and algorithm
    groups: Mapping[str, list[list[Coord]]]
    leaders: Mapping[str, list[Coord]]
    status: wormhole.EmulationStatus


# what _read gives: the summaries per reading of t_r, the example, the run's status, reproduction.json
Read = tuple[dict[str, wormhole.Summaries], Example, wormhole.EmulationStatus, dict[str, Any]]
Rule = Callable[[Sequence[Coord]], list[list[Coord]]]


def run_example(settings: RunSettings) -> Example:
    """Emulate the paper's 8×8 example by DP and both groupings (graph-based at the example's T = 1/2)."""
    topo = Topology.parse(EXAMPLE_TOPOLOGY)
    point = wormhole.Point("example", len(EXAMPLE), 0, EXAMPLE_SOURCE, EXAMPLE)
    em = wormhole.emulate_points(topo, [point], ALGORITHMS, settings, {"group-graph": {"T": 0.5}})
    return _example(timed(em), em.status)


def _example(rows: Sequence[wormhole.McRow], status: wormhole.EmulationStatus) -> Example:
    """The example's rows with its groups and leaders (pure functions of the example)."""
    topo = Topology.parse(EXAMPLE_TOPOLOGY)
    groups = {
        "dp": [sorted(EXAMPLE)],
        "group-graph": graph_groups(EXAMPLE, 0.5),
        "group-pattern": pattern_groups(EXAMPLE),
    }
    leaders = {a: sorted(with_leaders(topo, EXAMPLE_SOURCE, g)) for a, g in groups.items() if a != "dp"}
    return Example({(r.model, r.algorithm): r for r in rows}, groups, leaders, status)


def _groups_text(groups: Sequence[Sequence[Coord]]) -> str:
    return ", ".join("{" + ",".join(f"({x},{y})" for x, y in sorted(g)) + "}" for g in groups)


def _us(ex: Example, reading: str, algorithm: str) -> str:
    return fmt((ex.rows[(reading, algorithm)].latency_max or math.nan) / 1000, 3)


def _example_section(ex: Example) -> str:
    """The worked example's groups, leaders, channels and latency beside the paper's channels."""
    columns: Sequence[tuple[str, str, Callable[[str], str]]] = (
        ("algorithm", "l", lambda a: LABELS[a]),
        ("groups (ours)", "l", lambda a: _groups_text(ex.groups[a]) if a != "dp" else "—"),
        ("leaders (ours)", "l", lambda a: coords_text(ex.leaders.get(a, [])) or "—"),
        ("channels (ours)", "r", lambda a: str(ex.rows[("per-hop", a)].traffic)),
        ("channels (paper)", "r", lambda a: str(EXAMPLE_PAPER_CHANNELS[a])),
        *((f"latency, t_r {m} (µs)", "r", partial(_us, ex, m)) for m in READINGS),
    )
    heads, aligns, cells = zip(*columns, strict=True)
    table = markdown_table(list(heads), [[c(a) for c in cells] for a in ALGORITHMS], list(aligns))
    paper = {"groups": _groups_text(EXAMPLE_PAPER_GROUPS), "leaders": coords_text(EXAMPLE_PAPER_LEADERS)}
    head = _text("example", paper, destinations=coords_text(EXAMPLE))
    return f"{head}\n\n{table}\n{_text('example note')}\n"


# -- the claims -----------------------------------------------------------------------------------
def drivers(ours: wormhole.Summaries, threshold: float) -> str:
    """What the numbers come down to: the price of a start-up in hops, and how finely each rule groups."""
    hop, (cost, flit) = TIMING.beta + TIMING.router, (t.ts + t.flits * t.beta for t in READINGS.values())
    k0, k1 = ours.ks[0], ours.ks[-1]
    cells = [
        f"{LABELS[g]}, {scenario}: {fmt(ours.mean(scenario, g, k0, 'groups'), 1)} groups at k = {k0}, "
        f"{fmt(ours.mean(scenario, g, k1, 'groups'), 1)} at k = {k1}"
        for scenario in SCENARIOS
        for g in GROUPING
    ]
    f = {"cost": cost, "flit": flit, "hop": hop, "cost_hops": cost / hop, "flit_hops": flit / hop}
    parts = [_text("drivers", f, groups="; ".join(cells))]
    sparse = ours.mean("random", "group-graph", k0, "groups")
    dense = ours.mean("random", "group-graph", k1, "groups")
    parts += [_text("sparse", threshold=threshold)] if sparse is not None and sparse >= 0.75 * k0 else []
    parts += [_text("dense")] if dense is not None and dense == 1 else []
    return " ".join(parts) + "\n"


def _claim(
    key: str, hits: int, points: int, extra: Mapping[str, Any], size_ok: bool | None = None, **f: Any
) -> Claim:
    """Claim ``key`` of reports/chen.md (sections ``key source``, ``key claim``, ``key``: the evidence)."""
    numbers = {"hits": hits, "points": points, **extra}
    src, text, evidence = (_text(s, numbers, f) for s in (f"{key} source", f"{key} claim", key))
    return Claim(src, text, by_points(hits, points, size_ok=size_ok), evidence, numbers)


def claims(readings: Mapping[str, wormhole.Summaries], ex: Example) -> list[Claim]:
    """The paper's claims, decided by counts over points (the worked example's over its few cases)."""
    out: list[Claim] = []
    for (metric, m), scenario, g in product(CHECKS, SCENARIOS, GROUPING):
        c = wormhole.paired(readings[m].rows, scenario, g, "dp", metric)
        what = "number of links used" if metric == "traffic" else f"multicast latency (t_r {m})"
        pct = None if c.overall_pct is None else round(c.overall_pct, 2)
        extra = {"same": len(c.same), "higher": len(c.higher), "mean_pct": pct}
        fig = SCENARIOS[scenario].split("(")[-1][:-1]
        f: dict[str, Any] = {"label": LABELS[g], "fig": fig, "reading": m}
        f["text"] = wormhole.compare_text(c, LABELS[g], "DP", what)
        out.append(_claim(metric, len(c.lower), c.points, extra, **f))
    for m, g in product(READINGS, ALGORITHMS):
        rnd, prx = ([readings[m].mean(s, g, k, "latency_max") for k in readings[m].ks] for s in SCENARIOS)
        rel = [(b - a) / a * 100 for a, b in zip(rnd, prx, strict=True) if a and b]
        pct = round(statistics.fmean(rel), 2) if rel else None
        f = {"label": LABELS[g], "reading": m, "great": GREAT, "pct": fmt_delta(pct, 0.0, 1) + "%"}
        big = pct is not None and pct <= -GREAT  # the size: "a great amount"
        out.append(_claim("proximity", sum(r < 0 for r in rel), len(rel), {"mean_pct": pct}, big, **f))
    ch = {f"channels {a}": ex.rows[("per-hop", a)].traffic for a in ALGORITHMS}
    fewer = sum(ch[f"channels {g}"] < ch["channels dp"] for g in GROUPING)
    size_ok = list(ch.values()) == list(EXAMPLE_PAPER_CHANNELS.values())
    out.append(_claim("channels", fewer, len(GROUPING), ch, size_ok))
    us = {f"{m} {a}": (ex.rows[(m, a)].latency_max or math.nan) / 1000 for m in READINGS for a in ALGORITHMS}
    out.append(_claim("time", sum(us[f"{m} {g}"] < us[f"{m} dp"] for m in READINGS for g in GROUPING), 4, us))
    groups, leaders = ex.groups["group-graph"], ex.leaders["group-graph"]
    same = len({frozenset(g) for g in EXAMPLE_PAPER_GROUPS} & {frozenset(g) for g in groups})
    same += len(set(EXAMPLE_PAPER_LEADERS) & set(leaders))
    out.append(_claim("groups", same, 6, {}, groups=_groups_text(groups), leaders=coords_text(leaders)))
    w1, _, _, rest = graph_split(EXAMPLE)
    w = {"first": w1, "second": graph_split(rest)[0]}
    some = "some" if any(c.weight == 93 for c in graph_cuts(EXAMPLE)) else "no"
    out.append(_claim("weights", (w1 == 93) + (w["second"] == 32), 2, w, some=some))
    src, text, why = (_text(f"pattern example{s}") for s in (" source", " claim", ""))
    out.append(Claim(src, text, Verdict.NOT_REPRODUCIBLE, why))
    return out + ([flit_claim(readings[FLITS].rows, readings["per-flit"].rows)] if FLITS in readings else [])


def flit_claim(flits: Sequence[wormhole.McRow], formula: Sequence[wormhole.McRow]) -> Claim:
    """The per-flit formula against flit-level wormhole switching, each multicast alone: the multicast's
    latency (its last delivery) is an identity, so held only when every multicast agrees; every delivery
    equal, and where not why, in the evidence."""
    a = agreement(flits, formula)
    each = ", ".join(f"{LABELS[g]} {last} ({every}) of {n}" for g, (last, every, n) in a.by_algorithm.items())
    first = _text("flits first", where=a.first) if a.first else ""
    numbers = {"hits": a.last, "points": a.pairs, "every": a.equal, "later": a.later,
               "worst_ns": round(a.worst, 6), "worst_mean_ns": round(a.worst_mean, 6),
               "others": a.pairs - a.equal}  # fmt: skip
    f = {
        "each": each,
        "first": first,
        "cycle": CYCLE_NS,
        "ts": FLIT_SETTINGS.ts,
        "flits": FLIT_SETTINGS.flits,
    }
    src, text, evidence = (_text(s, numbers, f) for s in ("flits source", "flits claim", "flits"))
    verdict = by_points(a.last, a.pairs, share=1.0) if a.pairs else Verdict.UNTESTABLE
    return Claim(src, text, verdict, evidence, numbers)


def _table(
    ours: wormhole.Summaries, scenario: str, full: bool = True, flits: wormhole.Summaries | None = None
) -> str:
    """One scenario's per-k latency (and when ``full`` links, 95% CIs, and mean numbers of groups; with
    ``flits``, the flit-level latency of the same multicasts beside)."""
    latency, links = partial(wormhole.ci_cell, digits=3, scale=1000.0), partial(wormhole.ci_cell, digits=1)
    cols: list[wormhole.Column] = [
        (f"latency {LABELS[a]} (µs)", a, "latency_max", latency) for a in ALGORITHMS
    ]
    if flits is not None:
        cols += [(f"flits {LABELS[a]} (µs)", f"{a} {FLITS}", "latency_max", latency) for a in ALGORITHMS]
        summary = {**ours.summary, **{(s, f"{a} {FLITS}", k): v for (s, a, k), v in flits.summary.items()}}
        ours = replace(ours, summary=summary)
    cols += [(f"links {LABELS[a]}", a, "traffic", links) for a in ALGORITHMS if full]
    groups = partial(wormhole.mean_cell, digits=2)
    return wormhole.point_table(
        ours, scenario, cols + [(f"groups {LABELS[g]}", g, "groups", groups) for g in GROUPING if full]
    )


def write_plots(out: Path, ours: wormhole.Summaries) -> list[Path]:
    """Latency, links used and number of groups against k, one plot per scenario (ours only)."""
    note = f"ours: mean of {ours.repeat} sets per point, 95% CI shaded; Figs. 10–11 give no numbers"
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


def build_report(read: Read, plots: Sequence[Path], out: Path) -> str:
    """report.md's text."""
    readings, example, status, meta = read
    ours = readings["per-hop"]
    fields = {"labels": ", ".join(LABELS.values()), "ks": ", ".join(map(str, ours.ks)), "repeat": ours.repeat}
    fields |= {"steps": status.steps, "state": status.state, "errors": len(status.errors), "great": GREAT}
    fl = meta.get("flits_status")
    fields |= {
        "flits_run": "" if fl is None else _text("flits run", fl, state=wormhole.EmulationStatus(**fl).state),
        "flits_note": "" if FLITS not in readings else _text("flits note"),
    }
    parts = [
        _text("head", meta, fields) + "\n",
        legend(ours.repeat) + "\n",
        *(c.markdown() for c in claims(readings, example)),
        "",
        drivers(ours, meta["threshold"]),
        _example_section(example),
        _text("tables") + "\n",
    ]
    for scenario, title in SCENARIOS.items():
        parts += [f"### {title[0].upper()}{title[1:]}\n", _table(ours, scenario)]
    k, us = 96 if 96 in ours.ks else ours.ks[0], dict[str, float]()
    for (m, r), a in product(readings.items(), ALGORITHMS):
        us[f"{a} {m}"] = (r.mean("random", a, k, "latency_max") or 0) / 1000
    parts.append(_text("flit tables", us, k=k) + "\n")
    if FLITS in readings:
        parts.append(
            _text("flits tables", ts=FLIT_SETTINGS.ts, flits=FLIT_SETTINGS.flits, cycle=CYCLE_NS) + "\n"
        )
    for scenario, title in SCENARIOS.items():
        parts += [
            f"### {title[0].upper()}{title[1:]}, t_r per flit\n",
            _table(readings["per-flit"], scenario, False, readings.get(FLITS)),
        ]
    parts += [_text("plots") + "\n", *wormhole.plot_links(plots, out), _text("rows") + "\n"]
    return "\n".join(parts)


# -- command --------------------------------------------------------------------------------------
OPTIONS = (
    Option("--ks", "numbers of destinations (default 16,32,…,240)", default=",".join(map(str, KS))),
    Option("--threshold", f"graph-based grouping threshold T (default {THRESHOLD:g}, §4)", float, THRESHOLD),
    Option("--cluster-size", "destinations per cluster (proximity sets)", int, CLUSTER_SIZE),
    Option("--cluster-density", "destinations per node of a cluster's square", float, CLUSTER_DENSITY),
    framework.runtime_option(),
    Option("--wall-budget", "wall-clock budget (s)", float, 3600.0),
    Option("--flits", "also run every multicast at flit level, alone in an idle network, on the reference "
           "model: t_r per flit in cycles of 25 ns (default: yes)", None, True, negatable=True),
)  # fmt: skip


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
    fl = None
    if args.flits:  # wall time of the whole flit-level run (each multicast's own run records only its own)
        t0 = time.perf_counter()
        fl = wormhole.emulate_points(
            topo, points, ALGORITHMS, FLIT_SETTINGS, {"group-graph": {"T": args.threshold}}, ctx.progress
        )
        fl = replace(fl, status=replace(fl.status, wall_s=round(time.perf_counter() - t0, 1)))
    rows = [
        replace(r, groups=groups.get((r.scenario, r.algorithm, r.k, r.rep)))
        for r in timed(em) + ([] if fl is None else flit_rows(fl))
    ]
    wormhole.write_rows(out / "tidy.csv", rows)
    wormhole.write_rows(out / "example.csv", example.rows.values())
    facts = {k: getattr(args, k) for k in ("seed", "repeat")} | {"ks": list(ks), "threshold": args.threshold}
    facts |= {"cluster_size": args.cluster_size, "density": args.cluster_density, "runtime": args.runtime}
    facts |= {
        "multicasts": len(em.index),
        "status": asdict(em.status),
        "example_status": asdict(example.status),
    }
    facts |= {} if fl is None else {"flits_status": asdict(fl.status)}
    extra = ([] if ks == KS else [f"--ks {args.ks}"]) + ([] if args.flits else ["--no-flits"])
    cmd = framework.command_line(NAME, args, *extra)
    framework.write_json(out / "reproduction.json", framework.run_facts(cmd, watch, **facts))


def _group_counts(points: Sequence[wormhole.Point], threshold: float) -> dict[tuple[str, str, int, int], int]:
    """Per point and grouping rule, its number of groups (the rules' pure grouping functions)."""
    rules: Mapping[str, Rule] = {
        "group-graph": partial(graph_groups, threshold=threshold),
        "group-pattern": pattern_groups,
    }
    return {
        (p.scenario, g, p.k, p.rep): len(rule(p.destinations)) for p in points for g, rule in rules.items()
    }


def _read(out: Path) -> Read:
    meta, rows = json.loads((out / "reproduction.json").read_text()), wormhole.read_rows(out / "tidy.csv")
    by = {m: rs for m in (*READINGS, FLITS) if (rs := [r for r in rows if r.model == m])}
    ks, status = tuple(meta["ks"]), wormhole.EmulationStatus(**meta["example_status"])
    ours = {
        m: wormhole.Summaries(rs, wormhole.summarise_rows(rs, METRICS), ks, meta["repeat"])
        for m, rs in by.items()
    }
    example = _example(wormhole.read_rows(out / "example.csv"), status)
    return ours, example, wormhole.EmulationStatus(**meta["status"]), meta


def run(args: Any, ctx: Context) -> int:
    """Emulate (unless ``--report-only``), then rebuild claims, plots and report.md from the files."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    read = framework.read_report_only("chen", out, _read)
    readings, example, status, meta = read
    ours, meta["wall_s"] = readings["per-hop"], float(meta["wall_s"])
    report = build_report(read, write_plots(out, ours), out)
    cs = claims(readings, example)
    framework.write_tidy(out / "claims.csv", COLUMNS, (c.row() for c in cs))
    if (warning := repeat_warning(ours.repeat)) is not None:
        ctx.warn(warning)
    said = f"chen: {plural(len(ours.rows), 'multicast')} in {meta['wall_s']:.1f} s; wrote {out / 'report.md'}"
    done = status.complete and example.status.complete
    return framework.finish(ctx, out, report, said, [c.markdown() for c in cs], done)
