"""Seed 004 (Al-Dubai, Ould-Khaoua & Mackenzie): DP, MP, CP and QG on 16×16 and 32×32 meshes.

Contention-free latency, traffic and CV beside the paper's Tables 3–5; prose in data/reports/aldubai.md.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.analysis.timing import Timing
from coordinator.analysis.verdicts import COLUMNS, Claim, by_points, legend, repeat_warning
from coordinator.output.report import Series, fmt, fmt_ci, fmt_delta, markdown_table, plot_series
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
    runtime_option,
    text,
    texts,
    write_json,
    write_tidy,
)
from node.topology import Topology

__all__ = ["ALGORITHMS", "CV_KS", "KS", "MESHES", "PREP", "TIMING", "latency_model", "paper_data"]

NAME = "aldubai"
SUMMARY = (
    "seed 004 (Al-Dubai et al.): DP, MP, CP, QG on 16×16 and 32×32 meshes — latency, traffic, CV (Tables 3–5)"
)
DEFAULT_REPEAT = 40  # "averaging values obtained from at least 40 experiments in each case"

MESHES: Mapping[str, str] = {"16x16": "mesh:16x16", "32x32": "mesh:32x32"}
KS: tuple[int, ...] = tuple(range(10, 81, 10))
CV_KS: tuple[int, ...] = (20, 40, 60, 80)
ALGORITHMS = ("dp", "mp", "cp", "qg")
COLOURS: Mapping[str, str] = {"dp": "#1f77b4", "mp": "#ff7f0e", "cp": "#2ca02c", "qg": "#d62728"}
TIMING = Timing("wormhole", ts=33.0, beta=1.0, flits=64, router=0.0)
TABLE3_FLITS = 32
PREP: Mapping[str, float] = {"dp": 2.0, "mp": 2.0, "cp": 4.0, "qg": 16.0}  # §4.2, cycles
METRICS = ("latency_max", "additional_traffic", "cv")
METRIC_NAMES: Mapping[str, str] = {
    "latency_max": "mean multicast latency (cycles)",
    "latency_max_max": "maximum multicast latency (cycles)",
    "latency_max_without_cp": "mean multicast latency without CP (cycles)",
    "additional_traffic": "additional traffic (channels)",
    "cv": "coefficient of variation",
}


def latency_model(
    timing: Timing, prep: Mapping[str, float] | None = PREP, serialise: bool = True
) -> wormhole.LatencyFn:
    """Per delivery: eq. 7, plus the preparation time (``prep`` None: none) and the source's
    serialisation (``serialise`` False: none), the two terms eq. 7 leaves out."""
    per_message = timing.ts + timing.flits * timing.beta

    def latency(algorithm: str, step: int, hops: int, startups: int) -> float:
        queued = (step - hops) * per_message if serialise and startups == 1 else 0.0
        return timing.latency(step, hops, startups) + (prep or {}).get(algorithm, 0.0) + queued

    return latency


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
    """``repeat`` sets per k: a uniformly random source, then k uniformly random other nodes."""
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
class Ours(wormhole.Summaries):
    """The main model's rows and summaries, the meshes run, and the comparison models' summaries:
    ``eq7`` (eq. 7 alone), ``t3`` and ``t3_eq7`` (both at Table 3's 32 flits, 16×16, k = 10)."""

    meshes: tuple[str, ...]
    models: Mapping[str, wormhole.Summaries]


# -- claims -------------------------------------------------------------------------------------
def _claim(key: str, hits: int, points: int, **fields: Any) -> Claim:
    """A claim over ``points`` that held at ``hits``: source, text, evidence from reports/aldubai.md."""
    numbers = {"hits": hits, "points": points}
    source, said, evidence = text(NAME, key, numbers, fields).split("\n")
    return Claim(source, said, by_points(hits, points), evidence, numbers)


def _compare(
    ours: Ours, mesh: str, pairs: Iterable[tuple[str, str]], metric: str, what: str = "mean latency"
) -> tuple[list[wormhole.Comparison], str]:
    """Each (a, b) of ``pairs`` compared on ``metric`` over ``mesh``'s sets, and their sentences."""
    cs = [wormhole.paired(ours.rows, mesh, a, b, metric) for a, b in pairs]
    return cs, "; ".join(wormhole.compare_text(c, c.a.upper(), c.b.upper(), what) for c in cs)


def _ks(ks: Sequence[int]) -> str:
    """`` (k = 10, 20)`` naming the points, nothing when there are none."""
    return f" (k = {', '.join(map(str, ks))})" if ks else ""


Extreme = tuple[str, str, str, Callable[..., str], bool, str]
#: "ALG has the lowest / highest METRIC" per mesh: text, algorithm, metric, min or max, at CV_KS only?, what.
EXTREMES: tuple[Extreme, ...] = (
    ("claim-cv", "qg", "cv", min, True, "CV"),
    ("claim-traffic", "qg", "additional_traffic", min, False, "additional traffic"),
    ("claim-cp", "cp", "latency_max", max, False, "mean latency"),
)


def _extreme_claim(ours: Ours, mesh: str, extreme: Extreme) -> Claim:
    """Where on ``mesh`` an algorithm has the lowest (highest) mean of a metric, and how QG compares."""
    key, alg, metric, pick, cv, what = extreme

    def best(k: int) -> str | None:
        known = {a: v for a in ALGORITHMS if (v := ours.mean(mesh, a, k, metric)) is not None}
        return pick(known, key=lambda a: known[a]) if known else None

    winner = {k: best(k) for k in ours.ks if not cv or k in CV_KS}
    hits = [k for k, a in winner.items() if a == alg]
    winners = ", ".join(f"k={k}: {(a or '—').upper()}" for k, a in winner.items())
    _, sig = _compare(ours, mesh, [("qg", a) for a in ALGORITHMS if a != "qg"], metric, what)
    fields = dict(mesh=mesh.replace("x", "×"), n=len(ours.ks), ks=_ks(hits), winners=winners, sig=sig)
    return _claim(key, len(hits), len(winner), **fields)


def _light_claim(ours: Ours, mesh: str = "16x16") -> Claim:
    """DP and MP both below both QG and CP at light load (k ≤ 20) on the small mesh."""
    light = [k for k in ours.ks if k <= 20]
    lat = {k: {a: ours.mean(mesh, a, k, "latency_max") for a in ALGORITHMS} for k in light}

    def side(k: int, pick: Callable[..., float], algs: str, missing: float) -> float:  # a missing one fails
        return pick(missing if (v := lat[k][a]) is None else v for a in algs.split())

    hits = sum(side(k, max, "dp mp", float("inf")) < side(k, min, "qg cp", -float("inf")) for k in light)
    values = "; ".join(
        f"k={k}: " + ", ".join(f"{a.upper()} {fmt(v, 1)}" for a, v in lat[k].items()) + " cycles"
        for k in light
    )
    _, sig = _compare(ours, mesh, [("dp", "qg"), ("mp", "qg")], "latency_max")
    return _claim("claim-light", hits, len(light), values=values, sig=sig)


def _large_claim(ours: Ours, mesh: str = "32x32") -> Claim:
    """QG beats DP and MP on the larger mesh."""
    cs, sig = _compare(ours, mesh, [("qg", "dp"), ("qg", "mp")], "latency_max")
    both = sorted(set(cs[0].lower) & set(cs[1].lower))
    return _claim("claim-large", len(both), len(ours.ks), ks=_ks(both), sig=sig)


def claims(ours: Ours) -> list[Claim]:
    """The paper's comparative claims, each checked against our contention-free data."""
    out = [_extreme_claim(ours, mesh, EXTREMES[0]) for mesh in ours.meshes]
    out += [_light_claim(ours)] if "16x16" in ours.meshes else []
    out += [_large_claim(ours)] if "32x32" in ours.meshes else []
    return out + [_extreme_claim(ours, mesh, e) for e in EXTREMES[1:] for mesh in ours.meshes]


# -- report ----------------------------------------------------------------------------------------
def _mesh_tables(ours: Ours, table: Callable[[str], str], numbers: Mapping[str, str] | None = None) -> str:
    """A table per mesh run, each under a heading ``### 16×16 mesh`` (after the paper's table ``numbers``)."""
    return "\n".join(
        f"### {(numbers or {}).get(m, '')}{m.replace('x', '×')} mesh\n\n{table(m)}" for m in ours.meshes
    )


def _cv_table(ours: Ours, paper: PaperData, mesh: str) -> str:
    """Table 4 or 5: per k and algorithm, the paper's CV and QG_IMPR% (% above QG's CV) beside ours."""
    rows = []
    for k, a in ((k, a) for k in CV_KS if k in ours.ks for a in ALGORITHMS):
        p, o = paper.cv.get((mesh, k, a)), ours.mean(mesh, a, k, "cv")
        qg = paper.cv.get((mesh, k, "qg")), ours.mean(mesh, "qg", k, "cv")
        impr = [
            None if a == "qg" or v is None or not q else (v - q) / q * 100
            for v, q in zip((p, o), qg, strict=True)
        ]
        cell = wormhole.ci_cell(ours.stat(mesh, a, k, "cv"), 3)
        rows.append([k, a.upper(), fmt(p, 3), cell, fmt_delta(o, p, 3), *(fmt(x, 1) for x in impr)])
    header = ("k", "algorithm", "paper CV (loaded)", "ours CV (contention-free)", "ours − paper")
    return markdown_table([*header, "paper QG_IMPR%", "ours QG_IMPR%"], rows, "rlrrrrr")


def _table3(ours: Ours, paper: PaperData) -> str:
    """The paper's Table 3 beside ours, under our model and under eq. 7 alone."""
    rows = [
        [
            a.upper(),
            "—" if (p := paper.table3.get(a)) is None else fmt_ci(*p, 2),
            wormhole.ci_cell(s := ours.models["t3"].stat("16x16", a, 10, "latency_max"), 2),
            fmt_delta(None if s is None else s.mean, None if p is None else p[0], 2),
            wormhole.ci_cell(ours.models["t3_eq7"].stat("16x16", a, 10, "latency_max"), 2),
        ]
        for a in ALGORITHMS
    ]
    return markdown_table(["algorithm", "paper", "ours", "ours − paper", "ours, eq. 7 alone"], rows, "lrrrr")


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
#: The paper's number of each mesh's CV table.
CV_TABLES = {"16x16": "Table 4: ", "32x32": "Table 5: "}


def _overall(ours: Ours) -> str:
    """Per mesh and algorithm, mean latency / CV averaged over the points: eq. 7 alone, then ours."""

    def avg(s: wormhole.Summaries, mesh: str, a: str) -> str:
        known = (
            [v for k in ours.ks if (v := s.mean(mesh, a, k, m)) is not None] for m in ("latency_max", "cv")
        )
        lat, cv = (statistics.fmean(vs) if vs else None for vs in known)
        return f"{fmt(lat, 1)} / {fmt(cv, 3)}"

    return "; ".join(
        f"{mesh} {a.upper()} {avg(ours.models['eq7'], mesh, a)} (ours {avg(ours, mesh, a)})"
        for mesh in ours.meshes
        for a in ALGORITHMS
    )


NO_CP = "; CP left out (its scale hides the others)"
#: The plots of each mesh: name, metric, which :class:`wormhole.Stat` field, algorithms, what the note adds.
PLOTS: tuple[tuple[str, str, str, Sequence[str], str], ...] = (
    ("latency_max", "latency_max", "mean", ALGORITHMS, ""),
    ("latency_max_without_cp", "latency_max", "mean", ("dp", "mp", "qg"), NO_CP),
    ("latency_max_max", "latency_max", "max", ALGORITHMS, ""),
    ("additional_traffic", "additional_traffic", "mean", ALGORITHMS, ""),
    ("cv", "cv", "mean", ALGORITHMS, "; paper: Tables 4–5, with background load (interarrival 250 cycles)"),
)


def write_plots(out: Path, ours: Ours, paper: PaperData) -> list[Path]:
    """Per mesh: mean latency (also without CP), maximum latency, additional traffic, CV (paper's dashed)."""

    def curves(mesh: str, a: str, metric: str, value: str) -> list[Series]:
        """Ours for one algorithm, then the paper's CVs beside them."""
        stats = [ours.stat(mesh, a, k, metric) for k in ours.ks]
        mine = wormhole.ci_series(f"{a.upper()} (ours)", ours.ks, stats, COLOURS[a], value=value)
        if metric != "cv":
            return [mine]
        cvs = [paper.cv.get((mesh, k, a)) for k in CV_KS]
        return [mine, Series(f"{a.upper()} (paper, loaded)", list(CV_KS), cvs, True, COLOURS[a])]

    return [
        plot_series(
            out / "plots" / f"{mesh}_{key}.png",
            [c for a in algs for c in curves(mesh, a, metric, value)],
            f"{METRIC_NAMES[key].split(' (')[0]}, {mesh.replace('x', '×')} mesh, L = {TIMING.flits}",
            "number of destinations",
            METRIC_NAMES[key],
            f"ours: contention-free, {ours.repeat} sets per point, 95% CI shaded{extra}",
        )
        for mesh in ours.meshes
        for key, metric, value, algs, extra in PLOTS
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
            **{**meta, "meshes": ", ".join(m.replace("x", "×") for m in ours.meshes)},
            ks=", ".join(map(str, ours.ks)),
            t=TIMING,
            per=TIMING.ts + TIMING.flits * TIMING.beta,
            run_status="; ".join(
                f"{m}: {s.state} ({s.steps} lockstep steps, {len(s.errors)} node errors)"
                for m, s in status.items()
            ),
            overall=_overall(ours),
            legend=legend(ours.repeat),
            claims="\n".join(c.markdown() for c in cs),
            cv_source=paper.cv_source,
            cv_tables=_mesh_tables(ours, partial(_cv_table, ours, paper), CV_TABLES),
            t3_source=paper.table3_source,
            floor=2 * (TIMING.ts + TABLE3_FLITS * TIMING.beta),
            table3=_table3(ours, paper),
            latency_tables=_mesh_tables(ours, lambda m: wormhole.point_table(ours, m, POINT_COLUMNS)),
            plots="\n".join(wormhole.plot_links(plots, out)),
        )
        + "\n"
    )


# -- command ------------------------------------------------------------------------------------
OPTIONS = (
    Option(
        "--meshes", "which meshes, a comma list of 16x16 and 32x32 (default both)", default=",".join(MESHES)
    ),
    runtime_option(),
    Option("--wall-budget", "wall-clock budget per emulation (s)", float, 7200.0),
)
#: The latency models timing one emulation: the main one, eq. 7 alone, and both at Table 3's 32 flits.
_T3 = Timing("wormhole", TIMING.ts, TIMING.beta, TABLE3_FLITS, TIMING.router)
MODELS: Mapping[str, wormhole.LatencyFn] = {
    "main": latency_model(TIMING),
    "eq7": latency_model(TIMING, None, serialise=False),
    "t3": latency_model(_T3),
    "t3_eq7": latency_model(_T3, None, serialise=False),
}


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """One emulation per mesh; tidy.csv (main model), tidy_models.csv (the others), reproduction.json."""
    meshes = names_in(args.meshes, MESHES, "--meshes")
    positive(args.wall_budget, "--wall-budget")
    settings = lockstep_settings(args, "all-port")
    watch = Stopwatch()
    rows: list[wormhole.McRow] = []
    others: list[wormhole.McRow] = []
    status: dict[str, dict[str, Any]] = {}
    for mesh in meshes:
        topo = Topology.parse(MESHES[mesh])
        points = draw_points(mesh, topo, KS, args.repeat, args.seed)
        em = wormhole.emulate_points(topo, points, ALGORITHMS, settings, None, ctx.progress)
        status[mesh] = asdict(em.status)
        rows += wormhole.mc_rows(em, MODELS["main"])
        others += wormhole.mc_rows(em, MODELS["eq7"], "eq7")
        if mesh == "16x16":
            others += [r for m in ("t3", "t3_eq7") for r in wormhole.mc_rows(em, MODELS[m], m) if r.k == 10]
    wormhole.write_rows(out / "tidy.csv", rows)
    wormhole.write_rows(out / "tidy_models.csv", others)
    extra = [] if meshes == tuple(MESHES) else [f"--meshes {','.join(meshes)}"]
    facts = dict(seed=args.seed, repeat=args.repeat, meshes=list(meshes), runtime=args.runtime)
    meta = run_facts(command_line(NAME, args, *extra), watch, **facts, multicasts=len(rows), status=status)
    write_json(out / "reproduction.json", meta)


def _read(out: Path) -> tuple[Ours, dict[str, wormhole.EmulationStatus], dict[str, Any]]:
    meta = json.loads((out / "reproduction.json").read_text())
    repeat, others = int(meta["repeat"]), wormhole.read_rows(out / "tidy_models.csv")

    def summaries(rows: list[wormhole.McRow]) -> wormhole.Summaries:
        return wormhole.Summaries(rows, wormhole.summarise_rows(rows, METRICS), KS, repeat)

    models = {m: summaries([r for r in others if r.model == m]) for m in ("eq7", "t3", "t3_eq7")}
    main = summaries(wormhole.read_rows(out / "tidy.csv"))
    ours = Ours(main.rows, main.summary, KS, repeat, tuple(meta["meshes"]), models)
    return ours, {m: wormhole.EmulationStatus(**s) for m, s in meta["status"].items()}, meta


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
    report = build_report(ours, cs, paper, status, write_plots(out, ours, paper), out, meta)
    said = f"aldubai: {len(ours.rows)} multicasts in {meta['wall_s']:.1f} s; wrote {out / 'report.md'}"
    return finish(ctx, out, report, said, map(Claim.markdown, cs), all(s.complete for s in status.values()))
