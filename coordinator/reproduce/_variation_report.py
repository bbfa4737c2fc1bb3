"""Issue 34's study, its plots and report (reports/variation.md): per condition the SDs and means against
h, the CVs, the tables and the findings in words the numbers choose."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from coordinator.analysis.fidelity import Delivery, Fidelity, judge_groups
from coordinator.analysis.fits import Fit, mean_ci
from coordinator.analysis.metrics import ci95
from coordinator.output import spread_plots
from coordinator.output.report import fmt, fmt_ci, markdown_table
from coordinator.output.spread_plots import Curve, CvBar, CvPanel, Panel
from coordinator.reproduce import framework
from coordinator.reproduce._variation_study import (
    COLOURS,
    CONDITIONS,
    DEFAULT_REPEAT,
    LABELS,
    TREES,
    ArrivalRow,
    Families,
    MulticastRow,
    NodeRow,
    Read,
    Spread,
    Stats,
    families,
    sd_by_h,
)
from node.transport.linkmodel import Jitter, LinkModel, LinkSpec

__all__ = [
    "SIGN",
    "build_report",
    "cell",
    "condition_fidelity",
    "findings",
    "title",
    "write_plots",
]

CLOSE = 0.25  # "the CV follows the CV of h": within this share of it
TAIL = 0.6  # robust SD under this share of the SD: rare slow repetitions carry the SD
HOSTS = 10.0  # a/σ above this: the link jitter is under a tenth of the SD, the hosts make the rest
_text = partial(framework.text, "variation")  # reports/variation.md


def cell(fit: Fit, digits: int = 3) -> str:
    """A fit as a table cell: its value and 95% CI."""
    return fmt_ci(fit.value, fit.lo, fit.hi, digits)


# -- plots ----------------------------------------------------------------------------------------
def title(cond: str, meta: Mapping[str, Any]) -> str:
    return _text(f"condition {cond}", meta)


def _curves(
    nodes: Sequence[NodeRow],
    cond: str,
    column: Spread,
    pools: Sequence[tuple[str, str, bool, set[str]]],
) -> list[Curve]:
    """Per pool of algorithms the values of ``column`` under ``cond`` by h: the mean and its 95% CI."""
    out = []
    for label, colour, tree, algs in pools:
        groups: dict[int, list[float]] = defaultdict(list)
        for r in nodes:
            if r["condition"] == cond and r["algorithm"] in algs and (v := r[column]) is not None:
                groups[int(r["hops"])].append(float(v))
        points = []
        for h in sorted(groups):
            ci = ci95(groups[h])
            points.append((h, float(ci["mean"]), float(ci["ci95"][0]), float(ci["ci95"][1])))
        if points:
            out.append(Curve(label, colour, tree, points))
    return out


def plot_by_h(
    path: Path,
    nodes: Sequence[NodeRow],
    meta: Mapping[str, Any],
    column: Spread,
    ylabel: str,
    reference: Callable[[float], float],
    reference_label: str,
    log: bool = False,
) -> Path:
    """Per condition ``column`` against h, per algorithm and per family (``output.spread_plots``),
    ``reference`` under the link model."""
    algorithms = tuple(meta["algorithms"])
    each = [(LABELS[a] + ("" if a in TREES else " (path)"), COLOURS[a], a in TREES, {a}) for a in algorithms]
    trees, paths = {a for a in algorithms if a in TREES}, {a for a in algorithms if a not in TREES}
    pooled = [("trees, pooled", "#1f77b4", True, trees), ("paths, pooled", "#d62728", False, paths)]
    panels = [
        Panel(
            title(cond, meta),
            _curves(nodes, cond, column, each),
            _curves(nodes, cond, column, [p for p in pooled if p[3]]),
            reference=cond == "link",
        )
        for cond in CONDITIONS
    ]
    return spread_plots.plot_by_h(
        path, panels, ylabel, reference, reference_label, _text("plot note", meta), log=log
    )


def plot_cv(path: Path, rows: Sequence[tuple[str, str, Stats]], meta: Mapping[str, Any]) -> Path:
    """Per condition each algorithm's mean node-level CV with its 95% CI and its hop-count CV."""
    panels = []
    for cond in CONDITIONS:
        mine = [(a, s) for c, a, s in rows if c == cond and s.cv.value is not None]
        bars = [
            CvBar(
                LABELS[a],
                COLOURS[a],
                a not in TREES,
                s.cv.value or 0,
                s.cv.lo or 0,
                s.cv.hi or 0,
                s.cv_hops.value,
            )
            for a, s in mine
        ]
        panels.append(CvPanel(title(cond, meta), bars))
    return spread_plots.plot_cv(path, panels, _text("cv plot note", meta))


def write_plots(out: Path, read: Read, rows: Sequence[tuple[str, str, Stats]]) -> list[Path]:
    meta, nodes = read.meta, read.nodes
    sigma, d = float(meta["jitter_sd_ms"]), float(meta["delay_ms"])
    plots = out / "plots"
    return [
        plot_by_h(
            plots / "sd_vs_h.png",
            nodes,
            meta,
            "sd_ms",
            "per-node SD of latency (ms)",
            lambda h: math.sqrt(h) * sigma,
            f"√h·σ (σ = {sigma:g} ms)",
            log=True,
        ),
        plot_by_h(
            plots / "robust_sd_vs_h.png",
            nodes,
            meta,
            "iqr_sd_ms",
            "per-node robust SD: IQR / 1.349 (ms)",
            lambda h: math.sqrt(h) * sigma,
            f"√h·σ (σ = {sigma:g} ms)",
            log=True,
        ),
        plot_by_h(
            plots / "mean_vs_h.png",
            nodes,
            meta,
            "mean_ms",
            "per-node mean latency (ms)",
            lambda h: h * d,
            f"h·d (d = {d:g} ms)",
        ),
        plot_cv(plots / "cv.png", rows, meta),
        *([p] if (p := plot_split(plots / "split_vs_h.png", read.arrivals, meta)) is not None else []),
    ]


# -- the report -----------------------------------------------------------------------------------
SIGN = {-1: "significantly below", 0: "indistinguishable from", 1: "significantly above"}


def summary_table(rows: Sequence[tuple[str, str, Stats]], cond: str) -> str:
    head = [
        "algorithm",
        "family",
        "nodes",
        "mean h",
        "max h",
        "per-node SD (ms)",
        "a: SD ≈ a·√h (ms)",
        "k: SD ∝ h^k",
        "robust SD (ms)",
        "k of robust SD",
        "ms per link",
        "node-level CV",
        "CV of h",
        "multicasts",
    ]
    body = [
        [
            LABELS[a],
            "tree" if a in TREES else "path",
            s.nodes,
            fmt(s.mean_h, 1),
            fmt(s.max_h, 0),
            cell(s.sd, 3),
            cell(s.a, 3),
            cell(s.k, 2),
            cell(s.iqr_sd, 3),
            cell(s.k_iqr, 2),
            fmt(s.ms_per_link, 3),
            cell(s.cv, 3),
            fmt(s.cv_hops.value, 3),
            s.multicasts,
        ]
        for c, a, s in rows
        if c == cond
    ]
    return markdown_table(head, body, ["l", "l"] + ["r"] * (len(head) - 2))


def h_table(nodes: Sequence[NodeRow], cond: str, algorithms: Sequence[str]) -> str:
    """Per h: the trees' and the paths' mean per-node SD and robust SD (ms), with 95% CIs, and their
    numbers of nodes."""
    trees, paths = [a for a in algorithms if a in TREES], [a for a in algorithms if a not in TREES]
    th, ph = sd_by_h(nodes, cond, trees), sd_by_h(nodes, cond, paths)
    tr, pr = sd_by_h(nodes, cond, trees, "iqr_sd_ms"), sd_by_h(nodes, cond, paths, "iqr_sd_ms")
    body = []
    for h in sorted(set(th) | set(ph)):
        t, p = mean_ci(th.get(h, [])), mean_ci(ph.get(h, []))
        body.append(
            [
                h,
                cell(t, 3),
                cell(mean_ci(tr.get(h, [])), 3),
                t.n,
                cell(p, 3),
                cell(mean_ci(pr.get(h, [])), 3),
                p.n,
            ]
        )
    head = [
        "h",
        "trees: SD (ms)",
        "trees: robust SD (ms)",
        "tree nodes",
        "paths: SD (ms)",
        "paths: robust SD (ms)",
        "path nodes",
    ]
    return markdown_table(head, body, ["r"] * len(head))


def _ratio(fit: Fit, sigma: float) -> str:
    return fmt(fit.value / sigma, 2) if fit.value is not None and sigma else "—"


def _shape(ks: Sequence[Fit]) -> str:
    """How SD grows with h, from the families' exponents: like √h, faster, or no one law."""
    ks = [k for k in ks if k.value is not None]
    if ks and all(k.holds(0.5) for k in ks):
        return "sqrt"
    if ks and all(k.n > 1 and (k.lo or 0) > 0.5 for k in ks):
        return "faster"
    return "other"


def condition_fidelity(arrivals: Iterable[ArrivalRow], condition: str, meta: Mapping[str, Any]) -> Fidelity:
    """The fidelity verdict (:mod:`coordinator.analysis.fidelity`) on one condition's kept, timed
    deliveries, per destination (set, algorithm, node) over its repetitions; the bare condition has
    no link model, so nothing the hosts could have been faithful to."""
    groups: dict[tuple[str, int, str], list[Delivery]] = defaultdict(list)
    for r in _kept(arrivals, condition):
        link, node = r.get("link_ns"), r.get("node_ns")  # absent from files of before the telemetry
        parts = (None, None) if link is None or node is None else (float(node), float(link))
        groups[(r["algorithm"], r["set"], r["node"])].append(
            (int(r["hops"]), float(r["latency_ns"] or 0), *parts)
        )
    model = None
    if condition == "link":
        model = LinkModel(
            LinkSpec(delay=float(meta["delay_ms"]) / 1e3, jitter=Jitter.parse(str(meta["link_jitter"])))
        )
    dilation = float(meta.get("time_dilation", 1.0)) if condition == "link" else 1.0
    load = (meta.get("loadavg_blocks") or {}).get(condition) or [meta.get("loadavg_after")]
    loads = [tuple(x) for x in load if x]
    worst = max(loads, key=lambda x: x[0]) if loads else None
    return judge_groups(list(groups.values()), model, dilation=dilation, loadavg=worst)


def _kept(arrivals: Iterable[ArrivalRow], condition: str) -> Iterable[ArrivalRow]:
    """One condition's timed deliveries of kept repetitions, at least one link away."""
    for r in arrivals:
        if (
            r["condition"] == condition
            and r["ok"]
            and not r["warmup"]
            and r["latency_ns"] is not None
            and int(r["hops"]) > 0
        ):
            yield r


def split_rows(arrivals: Sequence[ArrivalRow], condition: str) -> dict[int, tuple[float, float, int]]:
    """Per h: the mean link time and node time (ms) of the condition's kept deliveries h links away
    that carried telemetry, and how many there were."""
    parts: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in _kept(arrivals, condition):
        link, node = r.get("link_ns"), r.get("node_ns")
        if link is not None and node is not None:
            parts[int(r["hops"])].append((int(link), int(node)))
    return {
        h: (sum(x for x, _ in v) / len(v) / 1e6, sum(y for _, y in v) / len(v) / 1e6, len(v))
        for h, v in sorted(parts.items())
    }


def split_table(
    arrivals: Sequence[ArrivalRow], meta: Mapping[str, Any], verdicts: Mapping[str, Fidelity]
) -> str:
    """Per condition the hosts' part of a hop: latency, link and node time per hop (ms), the link
    time beyond the model's delay, the hosts' share of the per-node variance, the verdict."""
    d = float(meta["delay_ms"])
    rows = []
    for cond in CONDITIONS:
        data = split_rows(arrivals, cond)
        n = sum(c for _, _, c in data.values())
        hops = sum(h * c for h, (_, _, c) in data.items())
        if not hops:
            continue
        link = sum(lk * c for lk, _, c in data.values()) / hops
        node = sum(nd * c for _, nd, c in data.values()) / hops
        model = d if cond == "link" else 0.0
        v = verdicts.get(cond)
        share = v.hosts_share if v is not None and v.hosts_share is not None else None
        k = float(meta.get("time_dilation", 1.0)) if cond == "link" else 1.0
        verdict = "—" if v is None or v.ok is None else ("ok" if v.ok else "NOT ok")
        rows.append([
            title(cond, meta), f"{k:g}", n, fmt(link + node, 3), fmt(link, 3), fmt(model, 3),
            fmt(link - model, 3), fmt(node, 3), "—" if share is None else f"{share:.0%}", verdict,
        ])  # fmt: skip
    if not rows:
        return "No delivery carried telemetry (files of a run before it).\n"
    return markdown_table(
        ["condition", "K", "deliveries", "ms a hop", "on links", "model's d", "links beyond d",
         "in nodes", "hosts' share of the variance", "verdict"],
        rows,
        ["l", "r", "r", "r", "r", "r", "r", "r", "r", "l"],
    )  # fmt: skip


def plot_split(path: Path, arrivals: Sequence[ArrivalRow], meta: Mapping[str, Any]) -> Path | None:
    """Per condition, mean latency against h stacked: on links below, in nodes above (ms), with h·d
    under the link model; None when no delivery carried telemetry."""
    from matplotlib.figure import Figure

    data = {c: split_rows(arrivals, c) for c in CONDITIONS}
    if not any(data.values()):
        return None
    d = float(meta["delay_ms"])
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    axes = fig.subplots(1, len(CONDITIONS))
    for ax, cond in zip(axes, CONDITIONS, strict=True):
        hs = list(data[cond])
        link = [data[cond][h][0] for h in hs]
        node = [data[cond][h][1] for h in hs]
        ax.bar(hs, link, color="#1f77b4", label="on links (send to the next receive)")
        ax.bar(hs, node, bottom=link, color="#ff7f0e", label="in nodes (receive to send, or delivery)")
        if cond == "link" and hs:
            ax.plot(hs, [h * d for h in hs], color="black", linestyle=":", marker="x",
                    label=f"h·d (d = {d:g} ms)")  # fmt: skip
        k = float(meta.get("time_dilation", 1.0)) if cond == "link" else 1.0
        ax.set_title(title(cond, meta) + (f", K = {k:g}" if k != 1 else ""), fontsize="medium")
        ax.set_xlabel("h: links crossed to the destination")
        ax.set_ylabel("mean latency (ms)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left")
    fig.suptitle("where each latency went: links and nodes (per-hop telemetry)", fontsize="medium")
    path.parent.mkdir(parents=True, exist_ok=True)
    return spread_plots.save_png(fig, path)  # as every other plot: never a half-written file


def findings(
    fam: Families, rows: Sequence[tuple[str, str, Stats]], meta: Mapping[str, Any], fidelity: Fidelity
) -> str:
    """What one condition's data shows, in words the numbers choose (sections of reports/variation.md).
    Its claim about a tree's depth or a path's length is judged only when the hosts kept up
    (``fidelity.ok``); otherwise the report says it was not judged, and why."""
    t, p = fam.tree, fam.path
    ks = [s.k for c, _, s in rows if c == fam.condition and s.k.value is not None]
    sigma = float(meta["jitter_sd_ms"])
    share = [(s.iqr_sd.value or 0) / s.sd.value for s in (t, p) if s.sd.value]
    f = dict(meta) | {
        "grows": sum(k.above_zero for k in ks),
        "algorithms": len(ks),
        "tree_k": cell(t.k, 2),
        "path_k": cell(p.k, 2),
        "tree_a": cell(t.a, 3),
        "path_a": cell(p.a, 3),
        "shared": len(fam.sd.hs),
        "h_lo": fmt(min(fam.sd.hs, default=None), 0),
        "h_hi": fmt(max(fam.sd.hs, default=None), 0),
        "diff": cell(fam.sd.diff, 3),
        "above": fam.sd.above,
        "sign": SIGN[fam.sd.sign],
        "rdiff": cell(fam.iqr.diff, 3),
        "rabove": fam.iqr.above,
        "rshared": len(fam.iqr.hs),
        "rsign": SIGN[fam.iqr.sign],
        "tree_h": fmt(t.mean_h, 1),
        "path_h": fmt(p.mean_h, 1),
        "tree_max": fmt(t.max_h, 0),
        "path_max": fmt(p.max_h, 0),
        "tree_sd": cell(t.sd, 3),
        "path_sd": cell(p.sd, 3),
        "tree_r": cell(t.iqr_sd, 3),
        "path_r": cell(p.iqr_sd, 3),
        "tree_kr": cell(t.k_iqr, 2),
        "path_kr": cell(p.k_iqr, 2),
        "tree_ar": cell(t.a_iqr, 3),
        "path_ar": cell(p.a_iqr, 3),
        "tree_share": f"{share[0]:.0%}" if len(share) == 2 else "—",
        "path_share": f"{share[-1]:.0%}" if len(share) == 2 else "—",
        "tree_cv": cell(t.cv, 3),
        "path_cv": cell(p.cv, 3),
        "cv_diff": cell(fam.cv_diff, 3),
        "cv_sign": SIGN[fam.cv_sign],
        "tree_cv_h": cell(t.cv_hops, 3),
        "path_cv_h": cell(p.cv_hops, 3),
        "tree_link": fmt(t.ms_per_link, 3),
        "path_link": fmt(p.ms_per_link, 3),
        "ratio_tree": _ratio(t.a, sigma),
        "ratio_path": _ratio(p.a, sigma),
        "ratio_tree_r": _ratio(t.a_iqr, sigma),
        "ratio_path_r": _ratio(p.a_iqr, sigma),
    }
    growth = [_text("finding h", f), _text(f"finding k {_shape([t.k, p.k])}", f)]
    growth += [_text("finding ratio", f)] if fam.condition == "link" else []
    growth.append(_text(f"finding per link {fam.condition}", f))
    tail = len(share) == 2 and max(share) < TAIL
    robust = [_text("finding robust tail" if tail else "finding robust", f)]
    robust.append(_text(f"finding robust k {_shape([t.k_iqr, p.k_iqr])}", f))
    robust += [_text("finding robust ratio", f)] if fam.condition == "link" else []
    rising = t.k.above_zero or p.k.above_zero or t.k_iqr.above_zero or p.k_iqr.above_zero
    farther = (p.mean_h or 0) > (t.mean_h or 0)
    if fidelity.ok is not True:
        key = "verdict not judged"
    elif not rising:
        key = "verdict flat"
    elif fam.sd.sign != fam.iqr.sign:
        key = "verdict split"
    elif fam.sd.sign > 0:
        key = "verdict paths worse"
    elif fam.sd.sign < 0:
        key = "verdict paths better"
    elif farther and (p.sd.value or 0) > (t.sd.value or 0):
        key = "verdict h"
    else:
        key = "verdict h only"
    equal = [_text("finding equal h", f), _text(key, f, why=fidelity.line())]
    close = all(
        s.cv.value is not None and s.cv_hops.value and abs(s.cv.value / s.cv_hops.value - 1) <= CLOSE
        for s in (t, p)
    )
    cv = _text("finding cv close" if close else "finding cv apart", f, close=f"{CLOSE:.0%}")
    return "\n\n".join([" ".join(growth), " ".join(robust), " ".join(equal), cv]) + "\n"


def across(fams: Mapping[str, Families], meta: Mapping[str, Any]) -> str:
    """Whether the two conditions agree on paths against trees at equal h (reports/variation.md)."""
    bare, link = fams["bare"], fams["link"]
    sigma = float(meta["jitter_sd_ms"])
    ratios = [s.a.value / sigma for s in (link.tree, link.path) if s.a.value is not None and sigma]
    top = max(s.max_h or 0 for s in (link.tree, link.path))
    sds = [s.sd.value for f in (bare, link) for s in (f.tree, f.path) if s.sd.value is not None]
    f = dict(meta) | {
        "bare_sign": SIGN[bare.sd.sign],
        "link_sign": SIGN[link.sd.sign],
        "bare_rsign": SIGN[bare.iqr.sign],
        "link_rsign": SIGN[link.iqr.sign],
        "ratio": fmt(min(ratios, default=None), 0),
        "reference": fmt(math.sqrt(top) * sigma, 2),
        "top": top,
        "sd_lo": fmt(min(sds, default=None), 1),
        "sd_hi": fmt(max(sds, default=None), 1),
    }
    if bare.sd.sign == link.sd.sign and bare.iqr.sign == link.iqr.sign:
        return _text("across agree", f) + "\n"
    return _text("across hosts" if ratios and min(ratios) > HOSTS else "across disagree", f) + "\n"


def _repeat_note(meta: Mapping[str, Any]) -> str:
    """A sentence when the run kept fewer repetitions than the default, with what the default would cost."""
    repeat, warmup = int(meta["repeat"]), int(meta["warmup"])
    if repeat >= DEFAULT_REPEAT:
        return ""
    minutes = float(meta["wall_s"]) * (DEFAULT_REPEAT + warmup) / (repeat + warmup) / 60
    return " " + _text("repeat note", meta, default=DEFAULT_REPEAT, minutes=minutes)


def _load(avg: Sequence[float] | None) -> str:
    return "unknown" if not avg else ", ".join(f"{x:.2f}" for x in avg)


def _status(mcs: Sequence[MulticastRow], notes: Sequence[str]) -> str:
    bad = [m for m in mcs if not m["complete"]]
    if not bad:
        text = "complete: every multicast reached each of its destinations once, timed on its source's host"
    else:
        kinds = Counter(
            f"{m['condition']}, {'not started' if not m['reached'] else 'incomplete'}" for m in bad
        )
        text = (
            f"**incomplete**: {len(bad)} of {len(mcs)} multicasts ("
            + "; ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
            + "), left out of every number"
        )
    return text + ("" if not notes else ". Runs that did not complete: " + " | ".join(notes))


def build_report(out: Path, read: Read, rows: Sequence[tuple[str, str, Stats]], plots: Sequence[Path]) -> str:
    meta, mcs = read.meta, read.multicasts
    algorithms = tuple(meta["algorithms"])
    kept = [m for m in mcs if not m["warmup"]]
    f = dict(meta) | {
        "labels": ", ".join(LABELS[a] + ("" if a in TREES else " (path)") for a in algorithms),
        "multicasts": len(mcs),
        "kept": len(kept),
        "kept_complete": sum(m["complete"] for m in kept),
        "arrivals": len(read.arrivals),
        "runtime_note": _text(f"runtime {meta['runtime']}"),
        "status": _status(mcs, meta.get("notes") or []),
        "repeat_note": _repeat_note(meta),
        "load_before": _load(meta.get("loadavg_before")),
        "load_after": _load(meta.get("loadavg_after")),
        "condition_walls": ", ".join(
            f"{title(c, meta).lower()} {w:.1f} s" for c, w in meta["condition_wall_s"].items()
        ),
        "sets_table": markdown_table(
            ["set", "source", "destinations"],
            [[s["set"], s["source"], s["destinations"]] for s in read.sets],
            ["r", "l", "l"],
        ).rstrip("\n"),
    }
    parts = [_text("head", f) + "\n"]
    fams = {c: fam for c in CONDITIONS if (fam := families(read.nodes, read.cvs, c, algorithms)) is not None}
    verdicts = {c: condition_fidelity(read.arrivals, c, meta) for c in fams}
    parts += [
        _text("fidelity", f, bare=verdicts["bare"].line() if "bare" in verdicts else "—",
              link=verdicts["link"].line() if "link" in verdicts else "—") + "\n",
        split_table(read.arrivals, meta, verdicts),
    ]  # fmt: skip
    for cond, fam in fams.items():
        parts += [f"### {title(cond, meta)}\n", findings(fam, rows, meta, verdicts[cond])]
    if len(fams) == len(CONDITIONS):
        if all(v.ok is True for v in verdicts.values()):
            parts += ["### Both conditions\n", across(fams, meta)]
        else:
            parts += ["### Both conditions\n", _text("across not judged", f) + "\n"]
    parts.append(_text("tables", f) + "\n")
    for cond in CONDITIONS:
        parts += [f"### {title(cond, meta)}\n", summary_table(rows, cond)]
    parts.append(_text("h tables", f) + "\n")
    for cond in CONDITIONS:
        parts += [f"### {title(cond, meta)}: SD at equal h\n", h_table(read.nodes, cond, algorithms)]
    parts += [_text("plots", f) + "\n", *(f"![{p.stem}]({p.relative_to(out).as_posix()})\n" for p in plots)]
    parts += [_text("sets", f) + "\n", _text("files", f)]
    return "\n".join(parts) + "\n"
