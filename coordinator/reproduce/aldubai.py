"""Al-Dubai, Ould-Khaoua & Mackenzie (2009): DP, MP, CP and QG on 16×16, 24×24 and 32×32 meshes.

Contention-free flit-level wormhole latency (each multicast alone in the network), traffic and CV
beside the paper's Table 3, Figs. 10–14 and Tables 4–5; prose in data/reports/aldubai.md.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.analysis.timing import Timing
from coordinator.analysis.verdicts import COLUMNS, Claim, by_points, legend, repeat_warning
from coordinator.output.report import algorithm_colour, fmt, fmt_ci, fmt_delta, markdown_table, plot_series
from coordinator.reproduce import _wormhole as wormhole
from coordinator.reproduce.framework import (
    Context,
    Option,
    Stopwatch,
    command_line,
    finish,
    lockstep_settings,
    names_in,
    paper_csv,
    positive,
    read_report_only,
    run_facts,
    run_pool,
    runtime_option,
    text,
    texts,
    write_json,
    write_tidy,
)
from coordinator.runtimes import registry
from coordinator.runtimes.records import RunSettings
from coordinator.wording import plural
from node import defaults
from node.topology import Topology

__all__ = ["ALGORITHMS", "COLOURS", "CV_KS", "KS", "MESHES", "PREP", "SCENARIOS", "TS", "paper_data"]

NAME = "aldubai"
SUMMARY = (
    "Al-Dubai et al. (2009): DP, MP, CP, QG on 16×16, 24×24 and 32×32 meshes under flit-level wormhole "
    "switching — contention-free latency, traffic, CV (Table 3, Figs. 10–14, Tables 4–5)"
)
DEFAULT_REPEAT = 40  # "averaging values obtained from at least 40 experiments in each case"
USES = ("jobs",)

MESHES: Mapping[str, str] = {"16x16": "mesh:16x16", "24x24": "mesh:24x24", "32x32": "mesh:32x32"}
#: The runs: scenario → (mesh, message length L in flits, what of the paper it stands for).
SCENARIOS: Mapping[str, tuple[str, int, str]] = {
    "16x16-L32": ("16x16", 32, "Fig. 10, Table 3"),
    "16x16-L64": ("16x16", 64, "Table 4"),
    "16x16-L128": ("16x16", 128, "Fig. 11"),
    "24x24-L64": ("24x24", 64, "Fig. 12"),
    "32x32-L64": ("32x32", 64, "Fig. 13, Table 5"),
}
KS: tuple[int, ...] = tuple(range(10, 81, 10))
CV_KS: tuple[int, ...] = (20, 40, 60, 80)
ALGORITHMS = ("dp", "mp", "cp", "qg")
COLOURS: Mapping[str, str] = {a: algorithm_colour(a) for a in ALGORITHMS}  # as in every plot (output.palette)
TS = defaults.TS  # start-up, cycles; β = 1 cycle per flit
PREP: Mapping[str, int] = defaults.PREP  # §4.2, cycles (the model's default table)
METRICS = ("latency_max", "additional_traffic", "cv")


def _title(scenario: str) -> str:
    """``16×16 mesh, L = 32 flits``."""
    mesh, flits, _ = SCENARIOS[scenario]
    return f"{mesh.replace('x', '×')} mesh, L = {flits} flits"


# -- the paper's numbers ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PaperData:
    """Tables 4–5 (CV per mesh × k × algorithm) and Table 3 (mean latency, k = 10, 32 flits)."""

    cv: Mapping[tuple[str, int, str], float]
    cv_source: str
    table3: Mapping[str, tuple[float, float, float]]
    table3_source: str


def paper_data() -> PaperData:
    """The paper's Tables 3–5 from the project's package data (coordinator/data)."""
    cv_source, rows = paper_csv("aldubai_cv.csv")
    cv = {(r["mesh"], int(r["destinations"]), r["algorithm"].lower()): float(r["cv"]) for r in rows}
    t3_source, rows = paper_csv("aldubai_table3_latency.csv")
    t3 = {r["algorithm"].lower(): (float(r["mean"]), float(r["ci_low"]), float(r["ci_high"])) for r in rows}
    return PaperData(cv, cv_source, t3, t3_source)


# -- runs ---------------------------------------------------------------------------------------
def draw_points(
    mesh: str, topology: Topology, ks: Sequence[int], repeat: int, seed: int
) -> list[wormhole.Point]:
    """``repeat`` sets per k: a uniformly random source, then k uniformly random other nodes (the same
    sets for every message length on a mesh)."""
    rng = random.Random(seed * 1000 + list(MESHES).index(mesh))
    nodes = list(topology.nodes())
    return [
        wormhole.Point(
            mesh, k, rep, s := rng.choice(nodes), tuple(rng.sample([n for n in nodes if n != s], k))
        )
        for k in ks
        for rep in range(repeat)
    ]


@dataclass(frozen=True, slots=True)
class Task:
    """One scenario's sets of one k, and the settings of its runs."""

    scenario: str
    points: tuple[wormhole.Point, ...]
    settings: RunSettings

    def cost(self) -> float:
        """k × the mesh's node count (the scenario's name begins with its side): run the largest first."""
        return self.points[0].k * int(self.scenario[:2]) ** 2


def run_task(task: Task) -> tuple[list[wormhole.McRow], wormhole.EmulationStatus]:
    """Every set × algorithm of a task, each multicast alone in an idle network (its own run, injected at
    step 0): flit-level rows (latency = the step its destination received the tail; ``queued`` = the
    cycles beyond eq. 7 + preparation: injection-channel waits) and eq. 7 alone on the same deliveries."""
    scenario, points, settings = task.scenario, task.points, task.settings
    topo = Topology.parse(MESHES[SCENARIOS[scenario][0]])
    em = wormhole.emulate_points(topo, points, ALGORITHMS, settings, apart=True)
    per, t = TS + settings.flits, Timing("wormhole", float(TS), 1.0, settings.flits, 0.0)  # eq. 7, β = 1
    rows = [
        replace(r, queued=r.queued - sum(PREP[r.algorithm] + a.startups * per for a in rec.arrivals))
        for r, rec in zip(wormhole.mc_rows(em, lambda _a, step, _h, _s: step), em.records, strict=True)
    ]
    return rows + wormhole.mc_rows(em, lambda _a, _step, h, s: t.latency(0, h, s), "eq7"), em.status


def _merged(ss: Sequence[wormhole.EmulationStatus]) -> wormhole.EmulationStatus:
    """A scenario's status from its tasks': complete if all are, the longest multicast's steps."""
    return wormhole.EmulationStatus(
        all(s.complete for s in ss),
        [w for s in ss for w in s.incomplete],
        max(s.steps for s in ss),
        round(sum(s.wall_s for s in ss), 1),
        [e for s in ss for e in s.errors],
    )


@dataclass(frozen=True, slots=True)
class Ours(wormhole.Summaries):
    """The flit-level rows and summaries, the scenarios run, and eq. 7 alone (``eq7``) on the same runs."""

    scenarios: tuple[str, ...]
    eq7: wormhole.Summaries


# -- claims -------------------------------------------------------------------------------------
#: Each claim's scenarios (those run are judged) and the paper's figure or table each stands for.
CLAIMS: Mapping[str, Mapping[str, str]] = {
    "claim-cv": {"16x16-L64": "Table 4", "32x32-L64": "Table 5"},
    "claim-light": {"16x16-L32": "Fig. 10", "16x16-L128": "Fig. 11"},
    "claim-large": {"24x24-L64": "Fig. 12", "32x32-L64": "Fig. 13"},
    "claim-traffic": {"16x16-L32": "Fig. 14a", "32x32-L64": "Fig. 14b"},
    "claim-cp": {
        "16x16-L32": "Fig. 10",
        "16x16-L128": "Fig. 11",
        "24x24-L64": "Fig. 12",
        "32x32-L64": "Fig. 13",
    },
}


def _claim(key: str, scenario: str, hits: int, points: int, **fields: Any) -> Claim:
    """A claim over ``points`` that held at ``hits``: source, text, evidence from reports/aldubai.md."""
    numbers = {"hits": hits, "points": points}
    where = dict(fig=CLAIMS[key][scenario], title=_title(scenario))
    source, said, evidence = text(NAME, key, numbers, where, fields).split("\n")
    return Claim(source, said, by_points(hits, points), evidence, numbers)


def _compare(
    ours: Ours, scenario: str, pairs: Iterable[tuple[str, str]], metric: str, what: str = "mean latency"
) -> tuple[list[wormhole.Comparison], str]:
    """Each (a, b) of ``pairs`` compared on ``metric`` over ``scenario``'s sets, and their sentences."""
    cs = [wormhole.paired(ours.rows, scenario, a, b, metric) for a, b in pairs]
    return cs, "; ".join(wormhole.compare_text(c, c.a.upper(), c.b.upper(), what) for c in cs)


def _ks(ks: Sequence[int]) -> str:
    """`` (k = 10, 20)`` naming the points, nothing when there are none."""
    return f" (k = {', '.join(map(str, ks))})" if ks else ""


Extreme = tuple[str, str, str, Callable[..., str], bool, str]
#: "ALG has the lowest / highest METRIC": text, algorithm, metric, min or max, at CV_KS only?, what.
EXTREMES: tuple[Extreme, ...] = (
    ("claim-cv", "qg", "cv", min, True, "CV"),
    ("claim-traffic", "qg", "additional_traffic", min, False, "additional traffic"),
    ("claim-cp", "cp", "latency_max", max, False, "mean latency"),
)


def _extreme_claim(ours: Ours, scenario: str, extreme: Extreme) -> Claim:
    """Where an algorithm has the lowest (highest) mean of a metric, and how QG compares."""
    key, alg, metric, pick, cv, what = extreme

    def best(k: int) -> str | None:
        known = {a: v for a in ALGORITHMS if (v := ours.mean(scenario, a, k, metric)) is not None}
        return pick(known, key=lambda a: known[a]) if known else None

    winner = {k: best(k) for k in ours.ks if not cv or k in CV_KS}
    hits = [k for k, a in winner.items() if a == alg]
    winners = ", ".join(f"k={k}: {(a or '—').upper()}" for k, a in winner.items())
    _, sig = _compare(ours, scenario, [("qg", a) for a in ALGORITHMS if a != "qg"], metric, what)
    fields = dict(n=len(ours.ks), ks=_ks(hits), winners=winners, sig=sig)
    return _claim(key, scenario, len(hits), len(winner), **fields)


def _light_claim(ours: Ours, scenario: str) -> Claim:
    """DP and MP both below both QG and CP at light load (k ≤ 20)."""
    light = [k for k in ours.ks if k <= 20]
    lat = {k: {a: ours.mean(scenario, a, k, "latency_max") for a in ALGORITHMS} for k in light}

    def side(k: int, pick: Callable[..., float], algs: str, missing: float) -> float:  # a missing one fails
        return pick(missing if (v := lat[k][a]) is None else v for a in algs.split())

    hits = sum(side(k, max, "dp mp", float("inf")) < side(k, min, "qg cp", -float("inf")) for k in light)
    values = "; ".join(
        f"k={k}: " + ", ".join(f"{a.upper()} {fmt(v, 1)}" for a, v in lat[k].items()) + " cycles"
        for k in light
    )
    _, sig = _compare(ours, scenario, [("dp", "qg"), ("mp", "qg")], "latency_max")
    return _claim("claim-light", scenario, hits, len(light), values=values, sig=sig)


def _large_claim(ours: Ours, scenario: str) -> Claim:
    """QG beats DP and MP on a larger mesh."""
    cs, sig = _compare(ours, scenario, [("qg", "dp"), ("qg", "mp")], "latency_max")
    both = sorted(set(cs[0].lower) & set(cs[1].lower))
    return _claim("claim-large", scenario, len(both), len(ours.ks), ks=_ks(both), sig=sig)


def claims(ours: Ours) -> list[Claim]:
    """The paper's comparative claims, each checked on the flit-level runs of the scenarios run."""

    def run(key: str) -> list[str]:
        return [s for s in CLAIMS[key] if s in ours.scenarios]

    out = [_extreme_claim(ours, s, EXTREMES[0]) for s in run("claim-cv")]
    out += [_light_claim(ours, s) for s in run("claim-light")]
    out += [_large_claim(ours, s) for s in run("claim-large")]
    out += [_extreme_claim(ours, s, e) for e in EXTREMES[1:] for s in run(e[0])]
    return out + ([eq7_claim(ours)] if ours.rows else [])


def eq7_agreement(ours: Ours) -> dict[str, tuple[int, int, int]]:
    """Per algorithm (exact, whole, multicasts): multicasts whose flit-level deliveries all arrived at
    preparation + eq. 7 (``queued`` 0, the last and the mean delivery equal to eq. 7's on the same deliveries
    plus the preparation time), and those whose deliveries waited for an injection channel, by waits that add
    up to whole start-ups Ts + L (eq. 13's λ: a worm queued behind others of its multicast on a port)."""
    formula = {(r.scenario, r.algorithm, r.k, r.rep): r for r in ours.eq7.rows}
    out = {a: [0, 0, 0] for a in ALGORITHMS}
    for r in ours.rows:
        g = formula.get((r.scenario, r.algorithm, r.k, r.rep))
        if g is None:
            continue
        prep, per = PREP[r.algorithm], TS + SCENARIOS[r.scenario][1]
        close = [
            x is not None and y is not None and abs(x - y - prep) < 1e-9
            for x, y in ((r.latency_max, g.latency_max), (r.latency_mean, g.latency_mean))
        ]
        above = (
            r.latency_max is not None and g.latency_max is not None and r.latency_max >= g.latency_max + prep
        )
        tally = out[r.algorithm]
        tally[0] += r.complete and r.queued == 0 and all(close)
        tally[1] += r.complete and r.queued > 0 and r.queued % per == 0 and above
        tally[2] += 1
    return {a: (e, w, n) for a, (e, w, n) in out.items() if n}


def eq7_claim(ours: Ours) -> Claim:
    """§4.1's eq. 7 (with eq. 13's λ for worms that share a source port) against the flit-level runs, each
    multicast alone: an identity, so held only when it holds for every multicast."""
    got = eq7_agreement(ours)
    exact, whole, n = (sum(t[i] for t in got.values()) for i in range(3))
    each = "; ".join(
        text(NAME, "eq7-each", alg=a.upper(), exact=e, whole=w, n=m) for a, (e, w, m) in got.items()
    )
    numbers = {"hits": exact + whole, "points": n, "exact": exact, "whole": whole}
    source, said, evidence = text(NAME, "claim-eq7", numbers, each=each).split("\n")
    return Claim(source, said, by_points(exact + whole, n, share=1.0), evidence, numbers)


# -- report ----------------------------------------------------------------------------------------
def _tables(ours: Ours, table: Callable[[str], str], which: Mapping[str, str] | None = None) -> str:
    """A table per scenario run of ``which`` (default all) under ``### LABEL: 16×16 mesh, L = 32 flits``."""
    labels = which or {s: f[2] for s, f in SCENARIOS.items()}
    return "\n".join(
        f"### {lab}: {_title(s)}\n\n{table(s)}" for s, lab in labels.items() if s in ours.scenarios
    )


def _cv_table(ours: Ours, paper: PaperData, scenario: str) -> str:
    """Table 4 or 5: per k and algorithm, the paper's CV and QG_IMPR% (% above QG's CV) beside ours."""
    mesh, rows = SCENARIOS[scenario][0], []
    for k, a in ((k, a) for k in CV_KS if k in ours.ks for a in ALGORITHMS):
        p, o = paper.cv.get((mesh, k, a)), ours.mean(scenario, a, k, "cv")
        qg = paper.cv.get((mesh, k, "qg")), ours.mean(scenario, "qg", k, "cv")
        impr = [
            None if a == "qg" or v is None or not q else (v - q) / q * 100
            for v, q in zip((p, o), qg, strict=True)
        ]
        cell = wormhole.ci_cell(ours.stat(scenario, a, k, "cv"), 3)
        rows.append([k, a.upper(), fmt(p, 3), cell, fmt_delta(o, p, 3), *(fmt(x, 1) for x in impr)])
    header = ("k", "algorithm", "paper CV (loaded)", "ours CV (contention-free)", "ours − paper")
    return markdown_table([*header, "paper QG_IMPR%", "ours QG_IMPR%"], rows, "rlrrrrr")


def _table3(ours: Ours, paper: PaperData, scenario: str = "16x16-L32") -> str:
    """The paper's Table 3 beside ours (flit level) and eq. 7 alone on the same deliveries."""
    rows = [
        [
            a.upper(),
            "—" if (p := paper.table3.get(a)) is None else fmt_ci(*p, 2),
            wormhole.ci_cell(s := ours.stat(scenario, a, 10, "latency_max"), 2),
            fmt_delta(None if s is None else s.mean, None if p is None else p[0], 2),
            wormhole.ci_cell(ours.eq7.stat(scenario, a, 10, "latency_max"), 2),
        ]
        for a in ALGORITHMS
    ]
    return markdown_table(["algorithm", "paper", "ours", "ours − paper", "eq. 7 alone"], rows, "lrrrr")


#: The per-point table's columns: header, algorithm, metric, the cell of a point's :class:`wormhole.Stat`.
POINT_COLUMNS: list[wormhole.Column] = [
    (f"{name} {a.upper()}", a, metric, cell)
    for name, metric, cell in (
        ("mean", "latency_max", partial(wormhole.ci_cell, digits=1)),
        ("max", "latency_max", lambda s: fmt(None if s is None else s.max, 0)),
        ("add. traffic", "additional_traffic", partial(wormhole.mean_cell, digits=1)),
    )
    for a in ALGORITHMS
]


NO_CP = "; CP left out (its scale hides the others)"
#: Each scenario's plots: name, y label, metric, which :class:`wormhole.Stat` field, algorithms, note.
PLOTS: tuple[tuple[str, str, str, str, Sequence[str], str], ...] = (
    ("latency_max_mean", "mean multicast latency", "latency_max", "mean", ALGORITHMS, ""),
    ("latency_max_without_cp", "mean multicast latency", "latency_max", "mean", ("dp", "mp", "qg"), NO_CP),
    ("latency_max_max", "maximum multicast latency", "latency_max", "max", ALGORITHMS, ""),
    (
        "additional_traffic",
        "additional traffic",
        "additional_traffic",
        "mean",
        ALGORITHMS,
        "; same for every L",
    ),
)


def write_plots(out: Path, ours: Ours) -> list[Path]:
    """Per scenario: mean latency (also without CP) and maximum latency; per mesh: additional traffic."""
    first = {SCENARIOS[s][0]: s for s in reversed(ours.scenarios)}  # traffic, once per mesh

    def plot(s: str, key: str, label: str, metric: str, value: str, algs: Sequence[str], extra: str) -> Path:
        name, title = (
            (SCENARIOS[s][0], _title(s).split(", L")[0]) if metric == "additional_traffic" else (s, _title(s))
        )
        stats = {a: [ours.stat(s, a, k, metric) for k in ours.ks] for a in algs}
        return plot_series(
            out / "plots" / f"{name}_{key}.png",
            [wormhole.ci_series(a.upper(), ours.ks, stats[a], COLOURS[a], value=value) for a in algs],
            f"{label}, {title}",
            "number of destinations",
            label + (" (channels)" if metric == "additional_traffic" else " (cycles)"),
            f"flit-level wormhole, each multicast alone, {ours.repeat} sets per point, 95% CI shaded{extra}",
        )

    return [
        plot(s, *p)
        for s in ours.scenarios
        for p in PLOTS
        if p[2] != "additional_traffic" or first[SCENARIOS[s][0]] == s
    ]


def build_report(
    ours: Ours,
    cs: Sequence[Claim],
    paper: PaperData,
    status: Mapping[str, wormhole.EmulationStatus],
    plots: Sequence[Path],
    out: Path,
    meta: Mapping[str, Any],
) -> str:
    """report.md's text."""
    return (
        texts(NAME)["report"].format(
            **meta,
            runs="; ".join(f"{_title(s)} ({SCENARIOS[s][2]})" for s in ours.scenarios),
            ks=", ".join(map(str, ours.ks)),
            ts=TS,
            run_status="; ".join(
                f"{s}: {st.state} (longest multicast {st.steps} cycles, {len(st.errors)} node errors)"
                for s, st in status.items()
            ),
            legend=legend(ours.repeat),
            claims="\n".join(c.markdown() for c in cs),
            cv_source=paper.cv_source,
            cv_tables=_tables(ours, partial(_cv_table, ours, paper), CLAIMS["claim-cv"]),
            t3_source=paper.table3_source,
            floor=2 * (TS + 32),
            table3=_table3(ours, paper),
            latency_tables=_tables(ours, lambda s: wormhole.point_table(ours, s, POINT_COLUMNS)),
            plots="\n".join(wormhole.plot_links(plots, out)),
        )
        + "\n"
    )


# -- command ------------------------------------------------------------------------------------
RUNTIME = runtime_option(
    registry.reference().name,
    help="where the nodes run (default model, the flit-level reference model; in-process, processes and "
    "containers give the same records but start every node anew per multicast: slow, hours at 32x32)",
)
OPTIONS = (
    Option(
        "--meshes",
        "which meshes, a comma list of 16x16, 24x24, 32x32 (default all); 16x16 runs L = 32, 64 and 128",
        default=",".join(MESHES),
    ),
    RUNTIME,
    Option("--wall-budget", "wall-clock budget per multicast's run (s)", float, 7200.0),
)


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """The meshes' scenarios; tidy.csv (flit level), tidy_models.csv (eq. 7 alone), reproduction.json."""
    meshes = names_in(args.meshes, MESHES, "--meshes")
    positive(args.wall_budget, "--wall-budget")
    scenarios = [s for s, (m, _, _) in SCENARIOS.items() if m in meshes]
    watch = Stopwatch()
    points = {m: draw_points(m, Topology.parse(MESHES[m]), KS, args.repeat, args.seed) for m in meshes}
    tasks: list[Task] = []
    for s in scenarios:
        mesh, flits, _ = SCENARIOS[s]
        settings = lockstep_settings(
            args, "all-port", contention="shared", switching="wormhole", flits=flits, ts=TS
        )
        tasks += [
            Task(s, tuple(replace(p, scenario=s) for p in points[mesh] if p.k == k), settings) for k in KS
        ]
    done = run_pool(
        run_task,
        tasks,
        args.jobs,
        ctx.progress,
        cost=Task.cost,
    )
    rows = [r for rs, _ in done for r in rs]
    wormhole.write_rows(out / "tidy.csv", (r for r in rows if r.model == "main"))
    wormhole.write_rows(out / "tidy_models.csv", (r for r in rows if r.model == "eq7"))
    status = {
        s: asdict(_merged([st for t, (_, st) in zip(tasks, done, strict=True) if t.scenario == s]))
        for s in scenarios
    }
    extra = [] if meshes == tuple(MESHES) else [f"--meshes {','.join(meshes)}"]
    extra += [] if args.runtime == RUNTIME.default else [f"--runtime {args.runtime}"]
    facts = dict(seed=args.seed, repeat=args.repeat, scenarios=scenarios, runtime=args.runtime)
    meta = run_facts(
        command_line(NAME, args, *extra), watch, **facts, multicasts=len(rows) // 2, status=status
    )
    write_json(out / "reproduction.json", meta)


def _read(out: Path) -> tuple[Ours, dict[str, wormhole.EmulationStatus], dict[str, Any]]:
    meta = json.loads((out / "reproduction.json").read_text())
    repeat = int(meta["repeat"])

    def summaries(path: Path) -> wormhole.Summaries:
        rows = wormhole.read_rows(path)
        return wormhole.Summaries(rows, wormhole.summarise_rows(rows, METRICS), KS, repeat)

    main = summaries(out / "tidy.csv")
    ours = Ours(
        main.rows, main.summary, KS, repeat, tuple(meta["scenarios"]), summaries(out / "tidy_models.csv")
    )
    return ours, {s: wormhole.EmulationStatus(**st) for s, st in meta["status"].items()}, meta


def run(args: Any, ctx: Context) -> int:
    """Emulate (unless ``--report-only``), then rebuild claims, plots and report.md from the files."""
    out = Path(args.out)
    if not args.report_only:
        _emulate(args, ctx, out)
    ours, status, meta = read_report_only("aldubai", out, _read)
    paper, cs = paper_data(), claims(ours)
    if (warning := repeat_warning(ours.repeat)) is not None:
        ctx.warn(f"aldubai: {warning}")
    write_tidy(out / "claims.csv", COLUMNS, (c.row() for c in cs))
    report = build_report(ours, cs, paper, status, write_plots(out, ours), out, meta)
    said = (
        f"aldubai: {plural(len(ours.rows), 'multicast')} in {meta['wall_s']:.1f} s; wrote {out / 'report.md'}"
    )
    return finish(ctx, out, report, said, map(Claim.markdown, cs), all(s.complete for s in status.values()))
