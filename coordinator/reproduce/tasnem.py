"""Abd El-Baky (2015), TASNEM: latency and traffic on tori — Figs. 8–11, plus PAIR and MIN.

TASNEM, multipath-HCM, T2W and Uniform (reconstructions: ``node/routing/torus_paths.py``) and Malani's
PAIR and MIN, all-port on the same destination sets, over destinations (Figs. 8–9) and torus size (10–11).
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis import verdicts
from coordinator.analysis.metrics import multicast_metrics
from coordinator.analysis.timing import apply_timing
from coordinator.analysis.verdicts import HOLD_SHARE, Claim, Verdict, by_points
from coordinator.errors import UsageError
from coordinator.experiments.run import emulate, runtime_problem
from coordinator.experiments.sweep import parse_dests, sweep_plan
from coordinator.output.report import fmt, fmt_ci, markdown_table
from coordinator.reproduce import framework
from coordinator.reproduce._tasnem_study import (
    ALGORITHMS,
    EXTRA_ALGORITHMS,
    HOP_NS,
    LABELS,
    MEASURES,
    PAPER_ALGORITHMS,
    PAPER_TIMING,
    SUMMARY_COLUMNS,
    SWEEPS,
    TIDY_COLUMNS,
    Results,
    size_k,
    summarise,
    write_plots,
)
from coordinator.reproduce._tasnem_wormhole import (
    DEFAULT_CONCURRENT,
    DEFAULT_WORMHOLE_VCS,
    WORMHOLE,
    WORMHOLE_COLUMNS,
    WORMHOLE_SETS,
    WORMHOLE_TORUS,
    Contention,
    WormholeTask,
    wormhole_claims,
    wormhole_rows,
    wormhole_text,
)
from coordinator.reproduce.framework import Context, Option, significance
from coordinator.runtimes import registry
from coordinator.runtimes.records import RunSettings
from coordinator.wording import plural
from coordinator.workloads.plan import Plan, PlanError
from node.topology import Coord, Topology

__all__ = [
    "DEFAULT_DESTS",
    "Config",
    "Job",
    "JobResult",
    "make_jobs",
    "ordering",
    "run_job",
    "run_wormhole",
    "t2w_rows",
]

NAME = "tasnem"
SUMMARY = (
    "Abd El-Baky (2015), TASNEM: latency/traffic vs destinations and torus size (Figs. 8–11), plus PAIR/MIN"
)
DEFAULT_REPEAT = 20  # the paper does not say how many runs per point ("various numbers of random networks")
DEFAULT_SIZES: tuple[int, ...] = (5, 10, 15, 20, 25, 30, 35, 40)
DEFAULT_DEST_TORUS = 40
DEFAULT_DESTS: tuple[int, ...] = (*range(100, 1501, 100), 1599)
DEFAULT_PERCENT = 20.0
#: Tori with more columns than this go through the reference model (in-process lockstep runs
#: about 12 steps/s on 30×30 and slower beyond; a 40×40 size point alone takes ~5 min there).
DEFAULT_EMULATE_UP_TO = 30
DEFAULT_TS_NS = 1000.0


# -- jobs --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Job:
    """One run: the multicasts of ``subset`` out of one torus's whole plan (so every job shares its sets)."""

    sweep: str
    topology: str
    ks: tuple[int, ...]
    algorithms: tuple[str, ...]
    subset: tuple[str, ...]
    runtime: str
    cost: float = 0.0

    @property
    def label(self) -> str:
        what = "all algorithms" if self.subset == self.algorithms else ",".join(self.subset)
        return f"{self.sweep} sweep {self.topology} ({what}; {self.runtime})"


@dataclass(slots=True)
class JobResult:
    """A job's rows and how its run went."""

    job: Job
    rows: list[dict[str, Any]]
    incomplete: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.incomplete and all(r["missing"] == 0 for r in self.rows)

    def doc(self) -> dict[str, Any]:
        """Its entry in run.json's runs (read back by :meth:`from_doc`)."""
        j = self.job
        return {
            "label": j.label, "topology": j.topology, "sweep": j.sweep, "algorithms": list(j.subset),
            "ks": list(j.ks), "runtime": j.runtime, "multicasts": len(self.rows), "complete": self.complete,
            "incomplete": self.incomplete, "steps": self.steps, "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3), "errors": self.errors,
        }  # fmt: skip

    @staticmethod
    def from_doc(r: Mapping[str, Any], rows: list[dict[str, Any]], algorithms: tuple[str, ...]) -> JobResult:
        """A run.json entry back, with its rows out of ``rows`` (all of tidy.csv)."""
        subset, where = tuple(r["algorithms"]), (r["sweep"], r["topology"])
        mine = [x for x in rows if (x["sweep"], x["topology"]) == where and x["algorithm"] in subset]
        ks = tuple(r.get("ks") or sorted({x["k"] for x in mine}))
        job = Job(r["sweep"], r["topology"], ks, algorithms, subset, r["runtime"])
        return JobResult(
            job, mine, list(r["incomplete"]), list(r["errors"]), int(r["steps"]), float(r["wall_s"]),
            float(r.get("cpu_s", 0.0)),
        )  # fmt: skip


def _estimate(sweep_ks: Sequence[int], subset: Sequence[str], side: int, repeat: int, runtime: str) -> float:
    """A rough relative cost, to start the longest jobs first (path rules carry O(k) headers O(k) hops)."""
    per = sum(k * k if a in ("hcm", "uniform") else k * side for a in subset for k in sweep_ks)
    return per * repeat * (30.0 if registry.get(runtime).emulates else 1.0)


def make_jobs(
    dest_torus: int, dests: Sequence[int], sizes: Sequence[int], percent: float, algorithms: Sequence[str],
    repeat: int, runtime: str, emulate_up_to: int,
) -> list[Job]:  # fmt: skip
    """Every job of both sweeps, longest first; model runs split by algorithm, emulations whole."""
    algs = tuple(algorithms)
    jobs: list[Job] = []

    def add(sweep: str, side: int, ks: tuple[int, ...]) -> None:
        rt, topo = (runtime if side <= emulate_up_to else registry.reference().name), f"torus:{side}x{side}"
        emulated = registry.get(rt).emulates
        subsets = [(a,) for a in algs] if not emulated and sweep == "dests" else [algs]
        for sub in subsets:
            jobs.append(Job(sweep, topo, ks, algs, sub, rt, _estimate(ks, sub, side, repeat, rt)))

    add("dests", dest_torus, tuple(dests))
    for n in sizes:
        add("size", n, (size_k(n, percent),))
    return sorted(jobs, key=lambda j: -j.cost)


def run_job(job: Job, repeat: int, seed: int, settings: RunSettings, ts_ns: float) -> JobResult:
    """Run one job (in a worker process or here) and return one row per multicast."""
    topo = Topology.parse(job.topology)
    full, points = sweep_plan(topo, list(job.algorithms), list(job.ks), repeat, seed, None)
    index = [i for i, m in enumerate(full.multicasts) if m.algorithm in job.subset]  # renumbered 0..
    plan = Plan(full.topology, tuple(replace(full.multicasts[i], id=j) for j, i in enumerate(index)))
    t0, c0 = time.perf_counter(), time.process_time()
    raw = trio.run(emulate, plan, replace(settings, runtime=job.runtime), None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    records = apply_timing(multicast_metrics(plan, raw), PAPER_TIMING)
    with_ts = replace(PAPER_TIMING, ts=ts_ns)
    rows = []
    for m, rec, i in zip(plan.multicasts, records, index, strict=True):
        k, rep = points[i]
        arr, done = rec.arrivals, not rec.missing
        with_ts_ns = max(with_ts.latency(a.step, a.hops, a.startups) for a in arr) if done else None
        latency_ns = rec.latency.max if rec.latency is not None else None
        rows.append({
            "sweep": job.sweep, "topology": job.topology, "n": topo.cols, "k": k, "algorithm": m.algorithm,
            "repetition": rep, "source": f"{m.source[0]},{m.source[1]}", "latency_ns": latency_ns,
            "latency_ts_ns": with_ts_ns, "hops": max(a.hops for a in arr) if done else None,
            "bound_hops": max(topo.distance(m.source, d) for d in m.destinations), "time": rec.time,
            "traffic": rec.traffic, "startups": max((a.startups for a in arr), default=0),
            "missing": len(rec.missing),
        })  # fmt: skip
    return JobResult(job, rows, list(raw.incomplete), list(raw.errors)[:20], raw.last_step, wall, cpu)


#: T2W's free choices (node/routing/torus_paths.py, choices 9–12): (main path, column sweeps split both ways
#: round; (0, 0) ours), and (Ts in ns, start-ups of a delivery by a vertical path), the paper's Ts = 0 first.
T2W_PATHS = ((0, 0), (1, 0), (0, 1), (1, 1))
T2W_TIMINGS = ((0.0, 2), (250.0, 2), (250.0, 1), (1000.0, 2), (1000.0, 1))
T2W_COLUMNS = ("sweep", "n", "k", "split_row", "split_columns", "ts_ns", "vertical_startups",
               "t2w_latency_ns")  # fmt: skip


def t2w_deliveries(topo: Topology, src: Coord, dests: Iterable[Coord], split: Sequence[int]) -> list[Any]:
    """(hops, start-ups) of each T2W delivery as node/routing/torus_paths.py routes it, or with its main path
    (``split[0]``) or column sweeps (``split[1]``) split both ways, each destination the shorter way round."""
    (m, n), (xs, ys), out = (topo.cols, topo.rows), src, list[tuple[int, int]]()
    plus, minus = (max((sign * (x - xs) % m for x, _ in dests if x != xs), default=0) for sign in (1, -1))
    for x in {x for x, _ in dests}:
        col, h = [y for c, y in dests if c == x], (x - xs) * (1 if plus <= minus else -1) % m
        h = min(h, m - h) if split[0] else h
        if x != xs and ys in col:  # delivered by the main path itself
            out, col = [*out, (h, 1)], [y for y in col if y != ys]
        up, down = (max((sign * (y - ys) % n for y in col), default=0) for sign in (1, -1))
        far = [(y - ys) * (1 if up <= down else -1) % n for y in col]
        out += [(h + (min(d, n - d) if split[1] else d), 1 + (x != xs)) for d in far]
    return out


def t2w_rows(cfg: Config) -> list[dict[str, Any]]:
    """Per point, T2W variant and timing: T2W's mean latency on the run's destination sets, from its paths."""
    rows, size = [], [("size", n, (size_k(n, cfg.percent),)) for n in cfg.sizes]
    for sweep, side, ks in [("dests", cfg.dest_torus, cfg.dests), *size]:
        topo = Topology.parse(f"torus:{side}x{side}")
        plan, points = sweep_plan(topo, list(cfg.algorithms), list(ks), cfg.repeat, cfg.seed, None)
        sets = list(zip(plan.multicasts, points, strict=True))[: len(ks) * cfg.repeat]  # every algorithm's
        for k, split, (ts, ups) in itertools.product(ks, T2W_PATHS, T2W_TIMINGS):
            paths = [t2w_deliveries(topo, m.source, m.destinations, split) for m, (kk, _) in sets if kk == k]
            mean = statistics.fmean(max(HOP_NS * h + ts * min(u, ups) for h, u in p) for p in paths)
            row = (sweep, side, k, *split, ts, ups, round(mean, 6))
            rows.append(dict(zip(T2W_COLUMNS, row, strict=True)))
    return rows


@dataclass(frozen=True, slots=True)
class OrderCheck:
    """The paper's ordering on one sweep and metric: TASNEM lowest and Uniform highest, point by point."""

    sweep: str
    metric: str
    points: int
    tasnem_lowest: int
    tasnem_significant: int
    lowest_elsewhere: tuple[tuple[int, str], ...]  # (point, the lowest algorithm(s), "A = B" when tied)
    uniform_highest: int
    uniform_significant: int
    highest_elsewhere: tuple[tuple[int, str], ...]


def ordering(res: Results, sweep: str, metric: str) -> OrderCheck:
    """Check the paper's ordering among its four algorithms at every point of a sweep."""
    algs, xs = [a for a in PAPER_ALGORITHMS if a in res.algorithms], res.xs[sweep]
    tallies: list[tuple[int, int, tuple[tuple[int, str], ...]]] = []
    for alg, sign, beats, pick in (("tasnem", -1, operator.lt, min), ("uniform", 1, operator.gt, max)):
        hits, sig, others = 0, 0, [a for a in algs if a != alg]
        elsewhere = []
        for x in xs:
            known = {a: v for a in algs if (v := res.mean(sweep, a, x, metric)) is not None}
            if len(known) < len(algs):
                continue
            if all(beats(known[alg], known[a]) for a in others):
                hits += 1
                sig += all(significance(res.diffs(sweep, alg, a, x, metric)) == sign for a in others)
            else:
                extreme = pick(known.values())
                elsewhere.append((x, " = ".join(LABELS[a] for a in algs if known[a] == extreme)))
        tallies.append((hits, sig, tuple(elsewhere)))
    return OrderCheck(sweep, metric, len(xs), *tallies[0], *tallies[1])


def _x_name(sweep: str, x: int) -> str:
    return f"k = {x}" if sweep == "dests" else f"T{x}"


def _claim(key: str, hits: int, points: int, evidence: str, more: Mapping[str, Any] = {}, **kw: Any) -> Claim:
    """The claim of report text ``key`` (its source, then its text) decided by counts (:func:`by_points`)."""
    source, text = _text(key, **kw).split("\n")
    return Claim(source, text, by_points(hits, points), evidence, {"hits": hits, "points": points, **more})


def _order_claims(res: Results, span: tuple[int, int]) -> list[Claim]:
    """§4.2's ordering over both sweeps, per metric: TASNEM lowest of the four, Uniform highest."""
    claims = []
    for (metric, (what, _)), who in itertools.product(MEASURES.items(), ("tasnem", "uniform")):
        cs, low = [ordering(res, sweep, metric) for sweep in SWEEPS], who == "tasnem"
        extreme, points = "lowest" if low else "highest", sum(c.points for c in cs)
        hits, sig = (sum(getattr(c, f"{who}_{f}") for c in cs) for f in (extreme, "significant"))
        elsewhere = [(_x_name(c.sweep, x), n) for c in cs for x, n in getattr(c, f"{extreme}_elsewhere")]
        beaters = " or ".join(sorted({n for _, n in elsewhere if "TASNEM" not in n})) if low else ""
        named = ", ".join(f"{x} ({n})" for x, n in elsewhere)
        notes = [f"{extreme.capitalize()} instead: {named}."] * bool(named)
        notes += [_text("note_tie")] * any(n.count(" = ") == 3 for _, n in elsewhere)
        notes += [_text("note_reconstruction", beaters=beaters)] * bool(beaters)
        more = {"significant": sig}
        if beaters and metric == "latency_ns":
            notes.append(_text("note_span", span=span, points=points, need=math.ceil(HOLD_SHARE * points)))
            more |= {"t2w_variants_min": span[0], "t2w_variants_max": span[1]}
        evidence = _text("evidence_order", who=LABELS[who], extreme=extreme, hits=hits, points=points,
                         sig=sig, notes="".join(f" {n}" for n in notes))  # fmt: skip
        claims.append(_claim(f"claim_{who}", hits, points, evidence, more, what=what))
    return claims


@dataclass(frozen=True, slots=True)
class Trend:
    """A curve over a sweep: its first and last means (None without points: ``last`` needs two) and
    its rises, falls and steps between consecutive points."""

    first: Any
    last: Any
    rises: int
    falls: int
    steps: int


def _trend(res: Results, sweep: str, alg: str, metric: str) -> Trend:
    """The curve of ``alg``'s mean ``metric`` over a sweep, step by step."""
    known = [v for x in res.xs[sweep] if (v := res.mean(sweep, alg, x, metric)) is not None]
    steps, last = list(itertools.pairwise(known)), (known[-1] if len(known) > 1 else None)
    first = known[0] if known else None
    return Trend(first, last, sum(b > a for a, b in steps), sum(b < a for a, b in steps), len(steps))


def _trend_claim(res: Results, key: str, sweep: str, algs: Sequence[str], metric: str, up: bool) -> Claim:
    """A claim "these curves rise" (or fall), decided over the steps between consecutive points."""
    trends = {a: _trend(res, sweep, a, metric) for a in algs}
    hits = sum(t.rises if up else t.falls for t in trends.values())
    steps = sum(t.steps for t in trends.values())
    unit, xs = ("ns" if metric.startswith("latency") else "links"), res.xs[sweep]
    each = "; ".join(
        f"{LABELS[a]} {fmt(t.first, 0)} → {fmt(t.last, 0)} {unit} ({t.rises} rises, {t.falls} falls)"
        for a, t in trends.items()
    )
    ends, way = f"{_x_name(sweep, xs[0])} → {_x_name(sweep, xs[-1])}", "up" if up else "down"
    evidence = _text("evidence_trend", ends=ends, each=each, hits=hits, steps=steps, way=way)
    return _claim(key, hits, steps, evidence)


#: §4.1–4.2 on the curves: (report text, sweep, "tasnem"/"others" (the other three)/"all", metric, rising).
_CURVE_CLAIMS = (
    ("curve_tasnem_latency", "dests", "tasnem", "latency_ns", False),
    ("curve_others_latency", "dests", "others", "latency_ns", True),
    ("curve_dests_traffic", "dests", "all", "traffic", True),
    ("curve_size_latency", "size", "all", "latency_ns", True),
    ("curve_size_traffic", "size", "all", "traffic", True),
)


def _claims(res: Results, span: tuple[int, int]) -> list[Claim]:
    """Every claim: the ordering, the curves, TASNEM's start-ups, the case study."""
    claims, algs = _order_claims(res, span), [a for a in PAPER_ALGORITHMS if a in res.algorithms]
    which = {"tasnem": ["tasnem"], "others": algs[1:], "all": algs}
    claims += [_trend_claim(res, key, sweep, which[these], metric, up)
               for key, sweep, these, metric, up in _CURVE_CLAIMS if len(res.xs[sweep]) > 1]  # fmt: skip
    for key, metric in (("curve_growth", "traffic"), ("curve_growth_latency", "latency_ns")):
        trends = {a: _trend(res, "size", a, metric) for a in algs}
        ends = {a: (t.first, t.last) for a, t in trends.items() if t.first and t.last is not None}
        growth = {a: y / x for a, (x, y) in ends.items()}
        if (mine := growth.pop("tasnem", None)) and growth:
            hits, ratio = sum(1 for g in growth.values() if g > mine), mine / min(growth.values())
            each = "; ".join(f"{LABELS[a]} ×{y / x:.1f} ({x:.0f} → {y:.0f})" for a, (x, y) in ends.items())
            evidence = _text("evidence_growth", first=(ns := res.xs["size"])[0], last=ns[-1], each=each,
                             what=MEASURES[metric][1], ratio=ratio, hits=hits, n=len(growth))  # fmt: skip
            claims.append(_claim(key, hits, len(growth), evidence, {"ratio": round(ratio, 3)}))
    ups = [r["startups"] for (_, a, _, _), r in res.tidy.items() if a == "tasnem"]
    evidence = _text("evidence_startups", most=max(ups, default=0), points=len(ups))
    claims.append(_claim("claim_startups", sum(1 for u in ups if u <= 2), len(ups), evidence))
    source, text, evidence = _text("claim_case_study").split("\n")
    return [*claims, Claim(source, text, Verdict.NOT_REPRODUCIBLE, evidence)]


@dataclass(frozen=True, slots=True)
class Versus:
    """An algorithm against TASNEM over one sweep and metric, on the same destination sets."""

    points: tuple[int, ...]  # points where it is significantly lower / indistinguishable / higher
    sets: tuple[int, ...]  # destination sets where it is lower / equal / higher
    pcts: tuple[float, ...]  # per point: (alg − TASNEM) / TASNEM of the means, in %

    def row(self, sweep: str, alg: str, metric: str) -> list[str]:
        """Its line of the table of TASNEM against PAIR and MIN."""
        ps = self.pcts
        pct = f"{statistics.fmean(ps):+.1f}% on average ({min(ps):+.1f}% to {max(ps):+.1f}%)" if ps else "—"
        points, sets = (" / ".join(map(str, t)) for t in (self.points, self.sets))
        return [SWEEPS[sweep], LABELS[alg], MEASURES[metric][0], points, f"{sets} of {sum(self.sets)}", pct]


def versus(res: Results, sweep: str, alg: str, metric: str) -> Versus:
    """Compare ``alg`` with TASNEM at each point (paired CI) and over every destination set."""
    points, sets = [0, 0, 0], [0, 0, 0]
    pcts: list[float] = []
    for x in res.xs[sweep]:
        d = res.diffs(sweep, alg, "tasnem", x, metric)
        sig = significance(d)
        if sig or d:
            points[sig + 1] += 1
        sets = [s + n for s, n in zip(sets, framework.sign_counts(d), strict=True)]
        ma, mt = res.mean(sweep, alg, x, metric), res.mean(sweep, "tasnem", x, metric)
        if ma is not None and mt:
            pcts.append((ma - mt) / mt * 100)
    return Versus(tuple(points), tuple(sets), tuple(pcts))


def _bound_share(res: Results, sweeps: Sequence[str], alg: str) -> tuple[float | None, float]:
    """Of ``alg``'s multicasts: % whose longest path is the lower bound (None: none), mean excess in hops."""
    rs = [r for (s, a, _, _), r in res.tidy.items() if s in sweeps and a == alg and r["hops"] is not None]
    if not rs:
        return None, 0.0
    at = sum(1 for r in rs if r["hops"] == r["bound_hops"])
    return at / len(rs) * 100, sum(r["hops"] - r["bound_hops"] for r in rs) / len(rs)


def _tree_sentence(alg: str, what: str, vs: Sequence[Versus]) -> str:
    """How ``alg``'s latency or traffic compares with TASNEM's over every point of both sweeps."""
    pts = sum(sum(v.points) for v in vs)
    lower, higher = sum(v.points[0] for v in vs), sum(v.points[2] for v in vs)
    pcts = [statistics.fmean(v.pcts) for v in vs if v.pcts]
    avg = f"({statistics.fmean(pcts):+.0f}% on average)" if pcts else "(— on average)"
    mixed = f"below TASNEM's at {lower}, above at {higher} and indistinguishable at {pts - lower - higher}"
    every = {higher: "above", lower: "below"}.get(pts)
    where = f"{every} TASNEM's at every point" if every else f"{mixed} of {pts} points"
    return f"{LABELS[alg]}'s {what} is significantly {where} {avg}"


def _trees(res: Results) -> str:
    """TASNEM against PAIR and MIN: paired comparisons, the share at the bound, and why."""
    extras = [a for a in EXTRA_ALGORITHMS if a in res.algorithms]
    if not extras or "tasnem" not in res.algorithms:
        return "(PAIR and MIN were not run: `--no-extras`.)"
    sweeps = [s for s in SWEEPS if res.xs[s]]
    compared = {(a, s, m): versus(res, s, a, m) for s in sweeps for a in extras for m in MEASURES}
    header = ["sweep", "vs TASNEM", "metric", "points lower / same / higher", "sets lower / equal / higher"]
    table = [v.row(s, a, m) for (a, s, m), v in compared.items()]
    labels = [LABELS[a] for a in res.algorithms]
    cell = [(s, a, _bound_share(res, [s], a)) for s in sweeps for a in res.algorithms]
    bounds = [[SWEEPS[s], *(f"{p:.0f}% (+{e:.1f})" if p is not None else "—" for t, _, (p, e) in cell
                            if t == s)] for s in sweeps]  # fmt: skip
    each = [(a, m, what) for a in extras for m, (what, _) in MEASURES.items()]
    sentences = [_tree_sentence(a, what, [compared[(a, s, m)] for s in sweeps]) for a, m, what in each]
    slower = any(compared[(a, s, "latency_ns")].points[2] for a in extras for s in sweeps)
    stats = {a: _bound_share(res, list(SWEEPS), a) for a in ("tasnem", *extras)}

    def share(a: str) -> str:
        pct, excess = stats[a][0] or 0.0, stats[a][1]
        return f"{LABELS[a]} at the bound in {pct:.0f}% of the sets, {excess:.1f} hops above it on average"

    return _text(
        "trees", versus=markdown_table([*header, "mean difference"], table, ["l"] * 3 + ["r"] * 3).rstrip(),
        bounds=markdown_table(["sweep", *labels], bounds, ["l"] + ["r"] * len(labels)).rstrip(),
        sentences="; ".join(sentences), extras="; ".join(share(a) for a in extras), tasnem=share("tasnem"),
        slower=_text("some_slower" if slower else "none_slower"),
    )  # fmt: skip


def _sensitivity(res: Results, rows: Sequence[Mapping[str, Any]], ts: float) -> tuple[str, tuple[int, int]]:
    """TASNEM's lowest-latency count per T2W variant (a table; HCM's and Uniform's margins), and its range."""
    t2w = {(*(r[c] for c in T2W_COLUMNS[3:7]), r["sweep"], r["k" if r["sweep"] == "dests" else "n"]): r
           for r in rows}  # fmt: skip
    lat = {(s, x): res.mean(s, "tasnem", x, "latency_ns") or math.inf for s in SWEEPS for x in res.xs[s]}
    ratios = {(a, p): (res.mean(p[0], a, p[1], "latency_ns") or 0) / t for a in ("hcm", "uniform")
              for p, t in lat.items()}  # fmt: skip
    ahead = [p for p in lat if ratios[("hcm", p)] > 1 and ratios[("uniform", p)] > 1]  # TASNEM below both
    counts = [[sum(1 for p in ahead if lat[p] + tm[0] < t2w[(*sp, *tm, *p)]["t2w_latency_ns"])
               for tm in T2W_TIMINGS] for sp in T2W_PATHS]  # fmt: skip
    ways, n = ("one way (ours)", "both ways"), len(lat)
    table = [[ways[r], ways[c], *(f"{k} of {n}" for k in ks)]
             for (r, c), ks in zip(T2W_PATHS, counts, strict=True)]  # fmt: skip
    head = ["T2W main path", "column sweeps"]
    head += [f"Ts = {ts:g} ns" + f", {u} start-up{'s' * (u > 1)}" * (ts > 0) for ts, u in T2W_TIMINGS]
    ours = [(r["t2w_latency_ns"], res.mean(k[4], "t2w", k[5], "latency_ts_ns" if k[2] else "latency_ns"))
            for k, r in t2w.items() if (k[0], k[1], k[3]) == (0, 0, 2) and k[2] in (0, ts)]  # fmt: skip
    return _text(
        "sensitivity", table=markdown_table(head, table, ["l", "l"] + ["r"] * len(T2W_TIMINGS)).rstrip(),
        matched=sum(1 for v, m in ours if m is not None and abs(v - m) < 1e-3), checked=len(ours),
        margin=min((q - 1 for q in ratios.values() if q > 1), default=0) * 100,
        below=", ".join(f"{_x_name(*p)} ({LABELS[a]})" for (a, p), q in ratios.items() if q <= 1) or "none",
    ), (min(map(min, counts)), max(map(max, counts)))  # fmt: skip


def run_wormhole(cfg: Config, ctx: Context, out: Path) -> dict[str, Any]:
    """Run the section (algorithm × c tasks); write wormhole.csv; return its run.json entry."""
    sets = cfg.repeat * (1 if cfg.quick else WORMHOLE_SETS)
    k, watch = size_k(WORMHOLE_TORUS, cfg.percent), framework.Stopwatch()
    tasks = [
        WormholeTask(a, c, sets, cfg.seed, k, v)
        for v in cfg.wormhole_vcs
        for a in PAPER_ALGORITHMS
        for c in cfg.concurrent
    ]
    rows = framework.run_pool(wormhole_rows, tasks, cfg.jobs, ctx.progress, lambda t: t.c)
    framework.write_tidy(out / "wormhole.csv", WORMHOLE_COLUMNS, [r for rs in rows for r in rs])
    facts = framework.run_facts(cfg.command, watch, torus=f"T{WORMHOLE_TORUS}", k=k)
    return {**facts, "sets": sets, "seed": cfg.seed, "jobs": cfg.jobs, "percent": cfg.percent,
            "levels": list(cfg.concurrent), "vcs": list(cfg.wormhole_vcs),
            "settings": asdict(WORMHOLE)}  # fmt: skip


# -- report ------------------------------------------------------------------------------------
_text = partial(framework.text, NAME)


def _point_table(res: Results, sweep: str, metric: str, digits: int) -> str:
    """Its heading, then mean [95% CI] of every algorithm and the bound, one row per point of a sweep."""
    algs, rows = res.algorithms, []
    for x in res.xs[sweep]:
        topology, k = res.at(sweep, x, "topology") or "?", res.at(sweep, x, "k") or 0
        lead = [f"{x}", topology] if sweep == "dests" else [f"T{x}", str(k)]
        cells = (fmt_ci(res.mean(sweep, a, x, metric), *res.ci(sweep, a, x, metric), digits) for a in algs)
        rows.append([*lead, *cells, fmt(res.bound(sweep, x, metric), digits)])
    head = ["k", "torus"] if sweep == "dests" else ["torus", "k"]
    table = markdown_table([*head, *(LABELS[a] for a in algs), "bound"], rows, ["r"] * (len(algs) + 3))
    return f"### {MEASURES[metric][1]} vs {SWEEPS[sweep]}\n\n{table.rstrip()}"


def _consistency(res: Results) -> dict[str, str]:
    """The start-ups per algorithm, and whether the lockstep time equals the longest path."""
    rows = list(res.tidy.values())
    ups = {a: max((r["startups"] for r in rows if r["algorithm"] == a), default=0) for a in res.algorithms}
    total = sum(1 for r in rows if r["hops"] is not None)
    differ = [r for r in rows if r["hops"] is not None and r["time"] != r["hops"]]
    algs = ", ".join(LABELS[a] for a in sorted({r["algorithm"] for r in differ}, key=ALGORITHMS.index))
    lockstep = _text(f"lockstep_{'differs' if differ else 'equal'}", n=len(differ), total=total, algs=algs)
    return {"ups": ", ".join(f"{LABELS[a]} {n}" for a, n in ups.items()), "lockstep": lockstep}


@dataclass(frozen=True, slots=True)
class Config:
    """The parameters of one reproduction run (echoed in the report and run.json)."""

    repeat: int
    seed: int
    dest_torus: int
    dests: tuple[int, ...]
    sizes: tuple[int, ...]
    percent: float
    algorithms: tuple[str, ...]
    runtime: str
    emulate_up_to: int
    ts_ns: float
    jobs: int
    concurrent: tuple[int, ...] = DEFAULT_CONCURRENT  # the wormhole section's c values; () skips it
    quick: bool = False
    wormhole_vcs: tuple[int, ...] = DEFAULT_WORMHOLE_VCS  # the section's virtual channels, one run of each

    @property
    def command(self) -> str:
        """The command line of this run: the non-default options only."""
        opts = (
            (self.dest_torus != DEFAULT_DEST_TORUS, f"--dest-torus {self.dest_torus}"),
            (self.dests != DEFAULT_DESTS, f"--dests {','.join(map(str, self.dests))}"),
            (self.sizes != DEFAULT_SIZES, f"--sizes {','.join(map(str, self.sizes))}"),
            (self.percent != DEFAULT_PERCENT, f"--percent {self.percent:g}"),
            (self.algorithms != ALGORITHMS, "--no-extras"),
            (self.runtime != RUNTIME.default, f"--runtime {self.runtime}"),
            (self.emulate_up_to != DEFAULT_EMULATE_UP_TO, f"--emulate-up-to {self.emulate_up_to}"),
            (self.ts_ns != DEFAULT_TS_NS, f"--ts {self.ts_ns:g}"),
            (not self.concurrent, "--no-wormhole"),
            (
                self.concurrent not in ((), DEFAULT_CONCURRENT),
                f"--concurrent {','.join(map(str, self.concurrent))}",
            ),
            (
                bool(self.concurrent) and self.wormhole_vcs != DEFAULT_WORMHOLE_VCS,
                f"--wormhole-vcs {','.join(map(str, self.wormhole_vcs))}",
            ),
        )
        return framework.command_line(NAME, self, *(o for on, o in opts if on))


def _runs_text(results: Sequence[JobResult], cfg: Config) -> str:
    """Which tori ran in the emulation and which through the reference model, and why."""

    def tori(model: bool) -> str:
        sides = {int(r.job.topology.split("x")[1]) for r in results
                 if registry.get(r.job.runtime).emulates != model}  # fmt: skip
        return ", ".join(f"T{n}" for n in sorted(sides))

    emu, mod = tori(False), tori(True)
    parts = [f"{emu} in the emulation ({cfg.runtime}, one emulation per torus)"] * bool(emu)
    return "; ".join(parts + [_text("model_runs", tori=mod, up=cfg.emulate_up_to)] * bool(mod))


def _run_status(results: Sequence[JobResult]) -> str:
    """``Run status: …``: complete or not, then every run's steps and times."""

    def one(r: JobResult) -> str:
        state = "ok" if r.complete else "INCOMPLETE — " + "; ".join(r.incomplete)
        errors = f", {len(r.errors)} node errors" if r.errors else ""
        return f"{r.job.label}: {state}, {r.steps} steps, {r.wall_s:.1f} s ({r.cpu_s:.1f} s CPU){errors}"

    runs = sorted(results, key=lambda r: (r.job.sweep, r.job.topology, r.job.subset))
    status = "complete" if all(r.complete for r in results) else "**INCOMPLETE**"
    return f"Run status: {status}. " + "; ".join(map(one, runs)) + "."


def build_report(
    results: Sequence[JobResult], res: Results, plots: Sequence[Path], out: Path, cfg: Config,
    meta: Mapping[str, Any],
) -> str:  # fmt: skip
    """report.md's text: reports/tasnem.md's template filled in (``meta`` with the claims and sensitivity)."""
    heads = [(s, m, d) for s in SWEEPS if res.xs[s] for m, d in (("latency_ns", 0), ("traffic", 1))]
    tables = [_point_table(res, s, m, d) for s, m, d in heads]
    rebuilt, cpu = meta.get("rebuilt"), [r.cpu_s for r in results]
    fields = {
        **asdict(cfg), **meta, "command": cfg.command, "n_mc": sum(len(r.rows) for r in results),
        "n_runs": len(results), "cpu_s": sum(cpu), "hop": HOP_NS, "legend": verdicts.legend(cfg.repeat),
        "idle": max(sum(cpu) / max(1, cfg.jobs), max(cpu, default=0.0)),  # the runs on idle CPUs
        "rebuilt_note": f" Report rebuilt from the CSVs on {rebuilt} (`--report-only`)." if rebuilt else "",
        "algorithms": ", ".join(LABELS[a] for a in cfg.algorithms), "dests": ", ".join(map(str, cfg.dests)),
        "sizes": ", ".join(f"T{n}" for n in cfg.sizes), "runs": _runs_text(results, cfg),
        "size_ks": ", ".join(str(size_k(n, cfg.percent)) for n in cfg.sizes), "trees": _trees(res),
        **_consistency(res), "run_status": _run_status(results), "tables": "\n\n".join(tables),
        "plots": "\n\n".join(f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in plots),
        "wormhole": wormhole_text(
            meta.get("contention"), meta.get("wormhole", {}), out, meta.get("contention_vcs")
        ),
    }  # fmt: skip
    return _text("report", **fields) + "\n"


# -- reading a finished run back (--report-only) ----------------------------------------------------


def load_run(out: Path) -> tuple[list[JobResult], Config, dict[str, Any]]:
    """The runs, configuration and metadata of a finished run (run.json, tidy.csv), for ``--report-only``."""
    doc = json.loads((out / "run.json").read_text(encoding="utf-8"))
    conf: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["config"].items()}
    cfg = Config(**conf)
    rows = framework.read_tidy(out / "tidy.csv")
    results = [JobResult.from_doc(r, rows, cfg.algorithms) for r in doc["runs"]]
    meta = {k: doc[k] for k in ("date", "cpus", "machine", "wall_s", "load")}
    if "wormhole" in doc:
        rows = framework.read_tidy(out / "wormhole.csv")
        vcs = sorted({int(r.get("vcs") or 1) for r in rows} - {1})
        meta |= {"wormhole": doc["wormhole"], "contention": Contention.build(rows),
                 "contention_vcs": {v: Contention.build(rows, v) for v in vcs}}  # fmt: skip
    return results, cfg, meta


# -- command -----------------------------------------------------------------------------------
def _int_list(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(parse_dests(text))
    except PlanError as exc:
        raise UsageError(str(exc).replace("--dests", what)) from None


USES = ("jobs", "quick")
RUNTIME = framework.runtime_option(help="where the tori's nodes run (default in-process; 'model' for all)")
#: --quick: (dest torus, destinations, sizes, c values) unless given.
QUICK = (10, (10, 50, 99), (5, 10), (1, 2, 4))
OPTIONS = (
    Option("--dest-torus", f"side n of the Tn torus of the destinations sweep (default {DEFAULT_DEST_TORUS})",
           int),
    Option("--dests", "numbers of destinations of that sweep: start:stop:step or a comma list "
           "(default 100:1500:100 and 1599)"),
    Option("--sizes", "torus sides of the size sweep: start:stop:step or a comma list (default 5:40:5)"),
    Option("--percent", f"destinations of the size sweep, in %% of the nodes (default {DEFAULT_PERCENT:g})",
           float, DEFAULT_PERCENT),
    Option("--extras", "also run Malani's PAIR and MIN on the same sets (default: yes)", None, True,
           negatable=True),
    RUNTIME,
    Option("--emulate-up-to", "largest torus side run in the emulation; larger ones go through the "
           f"reference model (default {DEFAULT_EMULATE_UP_TO})", int, DEFAULT_EMULATE_UP_TO),
    Option("--ts", f"start-up time (ns) of the sensitivity check (default {DEFAULT_TS_NS:g})", float,
           DEFAULT_TS_NS),
    Option("--wall-budget", "wall-clock budget per emulation (s)", float, 1800.0),
    Option("--wormhole", f"also run TASNEM and its comparators under wormhole with contention on "
           f"T{WORMHOLE_TORUS} (default: yes)", None, True, negatable=True),
    Option("--concurrent", "simultaneous multicasts of that section: a comma list (default 1,2,4,8,16)"),
    Option("--wormhole-vcs", "virtual channels of that section's runs: a comma list, one run each "
           "(default 1,2; 2 and more with the torus dateline)"),
    Option("--wormhole-only", "run only the wormhole section into an earlier run's --out (with its --repeat "
           "and --seed)", None, flag=True),
)  # fmt: skip


def _config(args: Any) -> Config:
    """The run's parameters from the options, each checked."""
    torus, dests, sizes, conc = QUICK if args.quick else (DEFAULT_DEST_TORUS, DEFAULT_DESTS, DEFAULT_SIZES,
                                                          DEFAULT_CONCURRENT)  # fmt: skip
    args.dest_torus = torus if args.dest_torus is None else args.dest_torus
    dests = dests if args.dests is None else _int_list(args.dests, "--dests")
    sizes = sizes if args.sizes is None else _int_list(args.sizes, "--sizes")
    conc = conc if args.concurrent is None else framework.int_list(args.concurrent, "--concurrent", 1, 50)
    vcs = DEFAULT_WORMHOLE_VCS
    if args.wormhole_vcs is not None:
        vcs = tuple(sorted(set(framework.int_list(args.wormhole_vcs, "--wormhole-vcs", 1, 16))))
    if args.dest_torus < 3:
        raise UsageError(f"--dest-torus must be at least 3 (a torus needs 3×3), got {args.dest_torus}")
    if small := [n for n in sizes if n < 3]:
        raise UsageError(f"--sizes: a torus needs at least 3×3, got {small[0]}")
    n, others = args.dest_torus, args.dest_torus**2 - 1
    if over := [k for k in dests if k > others]:
        raise UsageError(f"--dests: T{n} has {others} nodes besides the source, asked for {over[0]}")
    if not 0 < args.percent < 100:
        raise UsageError(f"--percent must be between 0 and 100, got {args.percent:g}")
    framework.positive(args.wall_budget, "--wall-budget")
    framework.positive(args.ts, "--ts", strict=False)
    return Config(
        args.repeat, args.seed, args.dest_torus, tuple(sorted(dests)), tuple(sorted(sizes)), args.percent,
        ALGORITHMS if args.extras else PAPER_ALGORITHMS, args.runtime, args.emulate_up_to, args.ts, args.jobs,
        tuple(sorted(conc)) if args.wormhole else (), args.quick, vcs,
    )  # fmt: skip


_load = getattr(os, "getloadavg", lambda: (0.0,))  # (0,) where the platform has none


def run(args: Any, ctx: Context) -> int:
    """Run the sweeps and the wormhole section (``--wormhole-only``: that alone, into an earlier run; neither
    with ``--report-only``), then plots and report.md from the CSVs and run.json."""
    out = Path(args.out)
    if args.wormhole_only and not args.report_only:
        doc = framework.read_report_only("tasnem", out, lambda o: json.loads((o / "run.json").read_text()))
        new = _config(args)
        cfg = replace(
            load_run(out)[1], concurrent=new.concurrent or DEFAULT_CONCURRENT, wormhole_vcs=new.wormhole_vcs
        )
        doc["config"], doc["wormhole"] = asdict(cfg), run_wormhole(replace(cfg, jobs=args.jobs), ctx, out)
        framework.write_json(out / "run.json", doc)
    elif not args.report_only:
        _emulate(args, ctx, out)
    results, cfg, meta = framework.read_report_only("tasnem", out, load_run)
    if args.report_only or args.wormhole_only:  # the sweeps' report rebuilt from their CSVs
        meta = {**meta, "rebuilt": time.strftime("%Y-%m-%d")}
    rows = [r for res in results for r in res.rows]
    res = Results.build(rows, cfg.algorithms, cfg.repeat)
    plots = write_plots(out, res, cfg.percent)
    t2w = framework.read_report_only("tasnem", out, lambda o: framework.read_tidy(o / "t2w_variants.csv"))
    sensitivity, span = _sensitivity(res, t2w, cfg.ts_ns)
    claims = _claims(res, span) + (wormhole_claims(meta["contention"]) if "contention" in meta else [])
    claims += [c for v, w in meta.get("contention_vcs", {}).items() for c in wormhole_claims(w, v)]
    framework.write_tidy(out / "claims.csv", verdicts.COLUMNS, (c.row() for c in claims))
    if warning := verdicts.repeat_warning(cfg.repeat):
        ctx.warn(f"meshcast: {warning}")
    said = (
        f"tasnem: {plural(len(rows), 'multicast')} ({meta['wall_s']:.1f} s); wrote {out}/report.md, "
        f"{plural(len(plots), 'plot')}"
    )
    bullets = [c.markdown() for c in claims]
    report = build_report(
        results, res, plots, out, cfg, {**meta, "claims": "\n".join(bullets), "sensitivity": sensitivity}
    )
    return framework.finish(ctx, out, report, said, bullets, all(r.complete for r in results))


def _emulate(args: Any, ctx: Context, out: Path) -> None:
    """Run every job; write tidy.csv, summary.csv and run.json."""
    cfg = _config(args)
    if problem := runtime_problem(cfg.runtime):
        raise UsageError(problem)
    settings = framework.lockstep_settings(args, "all-port", seed=cfg.seed, runtime=cfg.runtime)
    jobs = make_jobs(cfg.dest_torus, cfg.dests, cfg.sizes, cfg.percent, cfg.algorithms, cfg.repeat,
                     cfg.runtime, cfg.emulate_up_to)  # fmt: skip
    watch, load0 = framework.Stopwatch(), _load()[0]
    try:
        one = partial(run_job, repeat=cfg.repeat, seed=cfg.seed, settings=settings, ts_ns=cfg.ts_ns)
        results = framework.run_pool(one, jobs, cfg.jobs, ctx.progress)
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    meta = {**framework.run_facts(cfg.command, watch, load=(load0, _load()[0])), "wall_s": watch.wall()}
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for res in results for r in res.rows]
    rows.sort(key=lambda r: (r["sweep"], r["n"], r["k"], ALGORITHMS.index(r["algorithm"]), r["repetition"]))
    framework.write_tidy(out / "tidy.csv", TIDY_COLUMNS, rows)
    rounded = ({k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()} for r in summarise(rows))
    framework.write_tidy(out / "summary.csv", SUMMARY_COLUMNS, rounded)
    framework.write_tidy(out / "t2w_variants.csv", T2W_COLUMNS, t2w_rows(cfg))
    worm = {"wormhole": run_wormhole(cfg, ctx, out)} if cfg.concurrent else {}
    framework.write_json(
        out / "run.json",
        {"config": asdict(cfg), "settings": asdict(settings), "timing": asdict(PAPER_TIMING), **meta,
         "complete": all(r.complete for r in results), "runs": [r.doc() for r in results], **worm},
    )  # fmt: skip
