"""Seed 001 (TASNEM): its wormhole section (issue #12): c multicasts at once on T10 under flit-level
wormhole with contention, in the reference model; the runs, their claims, tables and plots."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.metrics import ci95, multicast_metrics
from coordinator.analysis.verdicts import Claim, Verdict, by_points
from coordinator.experiments.run import emulate
from coordinator.output.report import Series, fmt_ci, markdown_table, plot_series
from coordinator.reproduce import framework
from coordinator.reproduce._tasnem_study import COLOURS, LABELS, PAPER_ALGORITHMS
from coordinator.reproduce.framework import significance
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node import defaults
from node.topology import Topology

__all__ = [
    "DEFAULT_CONCURRENT",
    "DEFAULT_WORMHOLE_VCS",
    "WORMHOLE",
    "WORMHOLE_COLUMNS",
    "WORMHOLE_SETS",
    "WORMHOLE_TORUS",
    "Contention",
    "WormholeTask",
    "wormhole_claims",
    "wormhole_plan",
    "wormhole_rows",
    "wormhole_text",
    "write_wormhole_plots",
]


_text = partial(framework.text, "tasnem")  # reports/tasnem.md


# -- wormhole with contention (issue #12) -------------------------------------------------------
#: c multicasts at once on T10 under flit-level wormhole (docs/wormhole.md) in the reference model: one set of
#: channels shared by all, synchronous replication at tree branches, no virtual channels.
WORMHOLE_TORUS = 10
DEFAULT_CONCURRENT: tuple[int, ...] = (1, 2, 4, 8, 16)
WORMHOLE_SETS = 5  # sets per c for each --repeat (1 with --quick): a run takes ~0.1 s; most deadlock at c ≥ 4
WORMHOLE = RunSettings(port_model="all-port", contention="shared", runtime="model", switching="wormhole",
                       prep=None, max_steps=50_000)  # fmt: skip
"""L, Ts and B: the defaults (node/defaults.py, Al-Dubai et al.'s)."""
WORMHOLE_COLUMNS = ("c", "repetition", "algorithm", "multicast", "source", "status", "end", "latency",
                    "missing", "vcs")  # fmt: skip
#: The section runs once per number of virtual channels: 1 (none) and 2 (the paper's, §4; ours with the torus
#: dateline of docs/wormhole.md, every class sharing them).
DEFAULT_WORMHOLE_VCS: tuple[int, ...] = (1, 2)


def wormhole_plan(alg: str, c: int, rep: int, seed: int, k: int) -> Plan:
    """c multicasts of k destinations from c distinct sources, all at cycle 0; the draw depends on
    (seed, c, rep) only, so every algorithm gets the same sets."""
    topo = Topology.parse(f"torus:{WORMHOLE_TORUS}x{WORMHOLE_TORUS}")
    rng, nodes = random.Random(f"{seed}:{c}:{rep}"), list(topo.nodes())
    sets = [(s, tuple(rng.sample([n for n in nodes if n != s], k))) for s in rng.sample(nodes, c)]
    return Plan(topo, tuple(Multicast(i, alg, s, d) for i, (s, d) in enumerate(sets)))


@dataclass(frozen=True, slots=True)
class WormholeTask:
    """One algorithm at one concurrency ``c``: ``sets`` draws of c multicasts of k destinations, with
    ``vcs`` virtual channels per physical channel."""

    algorithm: str
    c: int
    sets: int
    seed: int
    k: int
    vcs: int = defaults.VCS


def wormhole_rows(task: WormholeTask) -> list[dict[str, Any]]:
    """One run per set, one row per multicast with its run's status."""
    alg, c, sets, seed, k, vcs = task.algorithm, task.c, task.sets, task.seed, task.k, task.vcs
    settings = replace(WORMHOLE, vcs=vcs)
    rows = []
    for rep in range(sets):
        plan = wormhole_plan(alg, c, rep, seed, k)
        raw = trio.run(emulate, plan, settings, None)
        dead = any(s.startswith("deadlock") for s in raw.incomplete)
        status = "deadlock" if dead else ("incomplete" if raw.incomplete else "ok")
        for m, rec in zip(plan.multicasts, multicast_metrics(plan, raw), strict=True):
            rows.append({"c": c, "repetition": rep, "algorithm": alg, "multicast": m.id, "status": status,
                         "source": f"{m.source[0]},{m.source[1]}", "end": raw.last_step,
                         "latency": rec.time, "missing": len(rec.missing), "vcs": vcs})  # fmt: skip
    return rows


@dataclass(frozen=True, slots=True)
class Contention:
    """The section's runs: (algorithm, c) → set → (status, its multicasts' mean latency, None unless ok)."""

    runs: Mapping[tuple[str, int], Mapping[int, tuple[str, float | None]]]
    levels: tuple[int, ...]

    @staticmethod
    def build(rows: Iterable[Mapping[str, Any]], vcs: int = defaults.VCS) -> Contention:
        """The runs with ``vcs`` virtual channels (rows without a ``vcs`` column had one)."""
        got: dict[tuple[str, int], dict[int, tuple[str, list[Any]]]] = {}
        for r in (r for r in rows if (r.get("vcs") or 1) == vcs):
            run = got.setdefault((r["algorithm"], r["c"]), {}).setdefault(r["repetition"], (r["status"], []))
            run[1].append(r["latency"])
        ok = {k: {rep: (s, statistics.fmean(v) if s == "ok" and None not in v else None)
                  for rep, (s, v) in runs.items()} for k, runs in got.items()}  # fmt: skip
        return Contention(ok, tuple(sorted({c for _, c in got})))

    def ok(self, alg: str, c: int) -> dict[int, float]:
        return {rep: v for rep, (_, v) in self.runs.get((alg, c), {}).items() if v is not None}

    def dead(self, alg: str, c: int) -> tuple[int, int]:
        """(deadlocked runs, runs) at c."""
        runs = self.runs.get((alg, c), {})
        return sum(s == "deadlock" for s, _ in runs.values()), len(runs)

    def stat(self, alg: str, c: int) -> tuple[float | None, float | None, float | None]:
        s = ci95(list(self.ok(alg, c).values()))
        return s["mean"], *s["ci95"]


def _named(pairs: Iterable[tuple[int, str]]) -> str:
    return ", ".join(f"c = {c} ({LABELS[b]})" for c, b in pairs) or "none"


def _net(vcs: int) -> str:
    """How the network of a claim or section differs from one channel per link."""
    return "" if vcs == 1 else _text("net", vcs=vcs)


def wormhole_claims(w: Contention, vcs: int = defaults.VCS) -> list[Claim]:
    """The abstract's "low latency over a wide range of traffic loads" and §3's congestion avoidance, on the
    runs with ``vcs`` virtual channels."""
    pairs = [(c, b) for c in w.levels for b in PAPER_ALGORITHMS[1:]]
    mine = {c: w.ok("tasnem", c) for c in w.levels}
    diffs = {(c, b): [mine[c][r] - v for r, v in w.ok(b, c).items() if r in mine[c]] for c, b in pairs}
    judged = [p for p in pairs if len(diffs[p]) >= 2]
    hits = [p for p in judged if statistics.fmean(diffs[p]) < 0]

    # mean latency at c over that at the smallest c, each over 2+ completed runs
    def growth(a: str, c: int) -> float | None:
        m, m1 = (w.stat(a, x)[0] if len(w.ok(a, x)) > 1 else None for x in (c, w.levels[0]))
        return m / m1 if m is not None and m1 else None

    g = {(a, c): x for a in PAPER_ALGORITHMS for c in w.levels[1:] if (x := growth(a, c))}
    grown = [(c, b) for c, b in pairs if ("tasnem", c) in g and (b, c) in g]
    each = [f"c = {c}: " + ", ".join(f"{LABELS[a]} ×{g[(a, c)]:.2f}" for a in PAPER_ALGORITHMS if (a, c) in g)
            for c in w.levels[1:] if ("tasnem", c) in g]  # fmt: skip
    out = []
    for key, n_hits, points, more in (
        ("claim_wormhole_latency", len(hits), len(judged),
         {"significant": sum(significance(diffs[p]) == -1 for p in hits), "lower": _named(hits),
          "unjudged": _named([p for p in pairs if p not in judged])}),
        ("claim_wormhole_growth", sum(g[("tasnem", c)] < g[(b, c)] for c, b in grown), len(grown),
         {"each": "; ".join(each) or "none"}),
    ):  # fmt: skip
        source, text = _text(key, net=_net(vcs)).split("\n")
        evidence = _text(f"evidence_{key[6:]}", hits=n_hits, points=points, **more)
        verdict = by_points(n_hits, points) if points else Verdict.UNTESTABLE
        nums = {"hits": n_hits, "points": points} | {k: v for k, v in more.items() if isinstance(v, int)}
        out.append(Claim(source, text, verdict, evidence if points else _text("wormhole_untested"), nums))
    return out


def wormhole_text(
    w: Contention | None, doc: Mapping[str, Any], out: Path, more: Mapping[int, Contention] | None = None
) -> str:
    """The section: its setting, latency and deadlocked runs per c (a table), the plots; then per number of
    virtual channels in ``more`` the same runs with them, beside one channel's deadlocks."""
    if w is None:
        return _text("wormhole_skipped")
    return "\n\n".join(
        [_one_vc_text(w, doc, out), *(_vcs_text(w, v, x, doc, out) for v, x in (more or {}).items())]
    )


def _vcs_text(one: Contention, vcs: int, w: Contention, doc: Mapping[str, Any], out: Path) -> str:
    """The subsection of the runs with ``vcs`` virtual channels: per c their latency and deadlocks beside one
    channel's, the totals, the plots."""

    def cell(a: str, c: int) -> str:
        d, d1 = w.dead(a, c), one.dead(a, c)
        return f"{fmt_ci(*w.stat(a, c), 0)}; {d[0]} of {d[1]} (one: {d1[0]})"

    head = ["c", *(LABELS[a] for a in PAPER_ALGORITHMS)]
    rows = [[str(c), *(cell(a, c) for a in PAPER_ALGORITHMS)] for c in w.levels]
    table = markdown_table(head, rows, ["r"] * len(head)).rstrip()

    def total(x: Contention, a: str) -> tuple[int, int]:
        d = [x.dead(a, c) for c in w.levels]
        return sum(n for n, _ in d), sum(n for _, n in d)

    dead = "; ".join(f"{LABELS[a]} {total(w, a)[0]} of {total(w, a)[1]} (one channel: {total(one, a)[0]})"
                     for a in PAPER_ALGORITHMS)  # fmt: skip
    # where both completed enough runs: the mean latency with vcs over one channel's, per (c, algorithm)
    ratio = []
    for a in PAPER_ALGORITHMS:
        for c in w.levels:
            both = [(w.ok(a, c)[r], v) for r, v in one.ok(a, c).items() if r in w.ok(a, c)]
            if len(both) >= 2:
                q = statistics.fmean(x for x, _ in both) / statistics.fmean(y for _, y in both)
                ratio.append(f"{LABELS[a]} c = {c} ×{q:.2f}")
    plots = "\n\n".join(
        f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in write_wormhole_plots(out, w, vcs)
    )
    return _text("wormhole_vcs", doc, vcs=vcs, table=table, dead=dead, plots=plots,
                 same="; ".join(ratio) or "none")  # fmt: skip


def _one_vc_text(w: Contention, doc: Mapping[str, Any], out: Path) -> str:
    """The one-channel part of the section."""

    def cell(a: str, c: int) -> str:
        return f"{fmt_ci(*w.stat(a, c), 0)}; {'{} of {}'.format(*w.dead(a, c))}"

    head = ["c", *(LABELS[a] for a in PAPER_ALGORITHMS)]
    rows = [[str(c), *(cell(a, c) for a in PAPER_ALGORITHMS)] for c in w.levels]
    alone = [f"{LABELS[a]} {d[0]} of {d[1]}" for a in PAPER_ALGORITHMS if (d := w.dead(a, w.levels[0]))[0]]
    plots = "\n\n".join(f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in write_wormhole_plots(out, w))
    totals = {a: [sum(x) for x in zip(*(w.dead(a, c) for c in w.levels), strict=True)]
              for a in PAPER_ALGORITHMS}  # fmt: skip
    dead = "; ".join(f"{LABELS[a]} {d} of {n}" for a, (d, n) in totals.items())
    table = markdown_table(head, rows, ["r"] * len(head)).rstrip()
    alone_text = "; ".join(alone) or "none"
    return _text("wormhole", doc, table=table, plots=plots, first=w.levels[0], alone=alone_text, dead=dead)


def write_wormhole_plots(out: Path, w: Contention, vcs: int = defaults.VCS) -> list[Path]:
    """Mean latency (completed runs, 95% CI) and the share of deadlocked runs against c, per algorithm
    (with ``vcs`` virtual channels: files ``wormhole_vcsN_…``)."""
    lat, dead = [], []
    for a in PAPER_ALGORITHMS:
        stats = [w.stat(a, c) for c in w.levels]
        band = ([s[1] for s in stats], [s[2] for s in stats])
        lat.append(Series(LABELS[a], w.levels, [s[0] for s in stats], colour=COLOURS[a], band=band))
        share = [100 * d / n if n else None for d, n in (w.dead(a, c) for c in w.levels)]
        dead.append(Series(LABELS[a], w.levels, share, colour=COLOURS[a]))
    sizes = f"L = {WORMHOLE.flits} flits, Ts = {WORMHOLE.ts} cycles, B = {WORMHOLE.buffer_flits}"
    note = f"T{WORMHOLE_TORUS}, {sizes}; latency: runs without deadlock"
    xlabel, p = "simultaneous multicasts c", out / "plots"
    name, what = ("wormhole", "") if vcs == 1 else (f"wormhole_vcs{vcs}", f", {vcs} virtual channels")
    return [
        plot_series(p / f"{name}_latency_vs_concurrency.png", lat, f"Multicast latency under wormhole{what}",
                    xlabel, "mean multicast latency (cycles)", note),
        plot_series(p / f"{name}_deadlocks_vs_concurrency.png", dead, f"Deadlocked runs under wormhole{what}",
                    xlabel, "deadlocked runs (%)", note),
    ]  # fmt: skip
