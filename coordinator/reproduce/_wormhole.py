"""What the path-based wormhole reproductions (``chen``, ``aldubai``) share: one emulation of every set ×
algorithm, its deliveries timed afterwards by a latency model, summaries, paired comparisons, tidy rows.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import trio

from coordinator.analysis.metrics import ci95, multicast_metrics
from coordinator.analysis.result_types import MulticastResult
from coordinator.experiments.run import emulate, emulate_apart
from coordinator.output.report import Series, fmt, fmt_ci, markdown_table
from coordinator.reproduce.framework import ProgressFn, read_tidy, significance, write_tidy
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Coord, Topology

__all__ = [
    "Column",
    "Comparison",
    "EmulationStatus",
    "LatencyFn",
    "McRow",
    "Point",
    "Stat",
    "Summaries",
    "ci_cell",
    "ci_series",
    "compare_text",
    "emulate_points",
    "mc_rows",
    "mean_cell",
    "paired",
    "plot_links",
    "point_table",
    "read_rows",
    "summarise_rows",
    "write_rows",
]

LatencyFn = Callable[[str, int, int, int], float]
"""latency(algorithm, step, hops, startups) of one delivery."""
PointKey = tuple[str, str, int]  # a point of an experiment: (scenario, algorithm, k)


@dataclass(frozen=True, slots=True)
class Point:
    """One destination set of an experiment: its scenario, size k, repetition, source, destinations."""

    scenario: str
    k: int
    rep: int
    source: Coord
    destinations: tuple[Coord, ...]


@dataclass(frozen=True, slots=True)
class McRow:
    """One multicast's numbers, keyed by scenario, algorithm, k and repetition."""

    scenario: str
    algorithm: str
    k: int
    rep: int
    source: Coord
    traffic: int
    distinct_links: int
    additional_traffic: int
    steps: int | None
    latency_max: float | None
    latency_mean: float | None
    cv: float | None
    queued: int
    complete: bool
    model: str = "main"
    groups: int | None = None

    def get(self, metric: str) -> float | None:
        """A metric by name (``latency_max``, ``traffic``, …) as a float, None if missing."""
        v = getattr(self, metric)
        return None if v is None else float(v)


@dataclass(frozen=True, slots=True)
class EmulationStatus:
    """How the one emulation went: complete?, why not, lockstep steps, wall time, node errors."""

    complete: bool
    incomplete: list[str]
    steps: int
    wall_s: float
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state(self) -> str:
        """``complete``, or ``INCOMPLETE — why``."""
        why = "; ".join(self.incomplete) or "missing deliveries"
        return "complete" if self.complete else f"INCOMPLETE — {why}"


@dataclass(frozen=True, slots=True)
class Emulated:
    """One emulation of points × algorithms: which (point, algorithm) each multicast is, its record."""

    index: list[tuple[Point, str]]
    records: list[MulticastResult]
    status: EmulationStatus


def emulate_points(
    topology: Topology,
    points: Sequence[Point],
    algorithms: Sequence[str],
    settings: RunSettings,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: ProgressFn | None = None,
    apart: bool = False,
) -> Emulated:
    """Every point × algorithm (the same sets for every algorithm) as one multicast each, in one emulation
    (``apart``: each in an emulation of its own, injected at step 0 into an idle network)."""
    params = params or {}
    index = [(p, a) for p in points for a in algorithms]
    plan = Plan(
        topology,
        tuple(
            Multicast(i, a, p.source, p.destinations, 0, dict(params.get(a, {})))
            for i, (p, a) in enumerate(index)
        ),
    )
    raw = trio.run(emulate_apart if apart else emulate, plan, settings, progress)
    records = multicast_metrics(plan, raw)
    complete = not raw.incomplete and all(_delivered(r) for r in records)
    status = EmulationStatus(complete, list(raw.incomplete), raw.last_step, raw.wall_s, list(raw.errors))
    return Emulated(index, records, status)


def _delivered(record: MulticastResult) -> bool:
    """Did a multicast reach every destination exactly once and no other node?"""
    return not record.missing and not record.duplicates and not record.stray


def mc_rows(emulated: Emulated, latency: LatencyFn, model: str = "main") -> list[McRow]:
    """One row per multicast, its deliveries timed by ``latency``: the last destination's (None if one is
    missing), the mean, the CV (population SD / mean), and ``queued``, the steps they waited for a port."""

    def row(p: Point, alg: str, rec: MulticastResult) -> McRow:
        lats = [latency(alg, a.step, a.hops, a.startups) for a in rec.arrivals]
        complete = _delivered(rec)
        mean = statistics.fmean(lats) if lats else None
        return McRow(
            algorithm=alg,
            **{f: getattr(p, f) for f in ("scenario", "k", "rep", "source")},
            traffic=rec.traffic,
            distinct_links=rec.distinct_links,
            additional_traffic=rec.additional_traffic,
            steps=rec.time,
            latency_max=max(lats) if lats and complete else None,
            latency_mean=mean,
            cv=statistics.pstdev(lats) / mean if lats and mean else None,
            queued=sum(a.step - a.hops for a in rec.arrivals),
            complete=complete,
            model=model,
        )

    return [row(p, alg, rec) for (p, alg), rec in zip(emulated.index, emulated.records, strict=True)]


# -- aggregates -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Stat:
    """Mean, 95% CI of the mean (Student t), maximum and sample size of one metric at one point."""

    mean: float | None
    lo: float | None
    hi: float | None
    max: float | None
    n: int


def _stat(values: Iterable[float | None]) -> Stat:
    vals = [v for v in values if v is not None]
    s = ci95(vals)
    return Stat(s["mean"], s["ci95"][0], s["ci95"][1], max(vals) if vals else None, s["n"])


def summarise_rows(rows: Iterable[McRow], metrics: Sequence[str]) -> dict[PointKey, dict[str, Stat]]:
    """Per (scenario, algorithm, k): a :class:`Stat` for each metric."""
    groups: dict[PointKey, list[McRow]] = defaultdict(list)
    for r in rows:
        groups[(r.scenario, r.algorithm, r.k)].append(r)
    return {key: {m: _stat(r.get(m) for r in rs) for m in metrics} for key, rs in groups.items()}


@dataclass(frozen=True, slots=True)
class Comparison:
    """Algorithm ``a`` against ``b`` on the same sets: the points where the 95% CI of the paired differences
    a − b lies below 0, holds 0, lies above 0; and a's mean relative to b's (%), averaged over the points."""

    a: str
    b: str
    metric: str
    lower: list[int]
    same: list[int]
    higher: list[int]
    overall_pct: float | None

    @property
    def points(self) -> int:
        return len(self.lower) + len(self.same) + len(self.higher)


def paired(rows: Sequence[McRow], scenario: str, a: str, b: str, metric: str) -> Comparison:
    """Compare ``a`` with ``b`` on ``metric`` point by point over ``scenario``'s sets."""
    by = {
        (r.algorithm, r.k, r.rep): r.get(metric)
        for r in rows
        if r.scenario == scenario and r.algorithm in (a, b)
    }
    split: tuple[list[int], list[int], list[int]] = ([], [], [])  # lower, same, higher
    rel: list[float] = []
    for k in sorted({k for (_, k, _) in by}):
        pairs = [
            (x, y)
            for (alg, kk, rep), x in sorted(by.items())
            if alg == a and kk == k and x is not None and (y := by.get((b, k, rep))) is not None
        ]
        if not pairs:
            continue
        split[significance([x - y for x, y in pairs]) + 1].append(k)
        mb = statistics.fmean(y for _, y in pairs)
        if mb:
            rel.append((statistics.fmean(x for x, _ in pairs) - mb) / mb * 100)
    return Comparison(a, b, metric, *split, statistics.fmean(rel) if rel else None)


def compare_text(c: Comparison, label_a: str, label_b: str, what: str) -> str:
    """One sentence: where ``a`` is significantly lower / indistinguishable / higher than ``b``."""
    if not c.points:
        return f"no data to compare {label_a} with {label_b} on {what}"
    pct = "" if (p := c.overall_pct) is None else f" ({'+' if p >= 0 else '−'}{abs(p):.1f}% on average)"
    return (
        f"{label_a}'s {what} is significantly lower than {label_b}'s at {len(c.lower)} of {c.points} points, "
        f"indistinguishable at {len(c.same)}, higher at {len(c.higher)}{pct}"
    )


# -- output -------------------------------------------------------------------------------------
ROW_COLUMNS = tuple("repetition" if f.name == "rep" else f.name for f in fields(McRow))


def write_rows(path: Path, rows: Iterable[McRow]) -> Path:
    """The per-multicast rows as a CSV (one line per multicast; floats at full precision)."""
    cells = (
        asdict(r) | {"repetition": r.rep, "source": ",".join(map(str, r.source)), "complete": int(r.complete)}
        for r in rows
    )
    write_tidy(path, ROW_COLUMNS, cells)
    return path


def read_rows(path: Path) -> list[McRow]:
    """:func:`write_rows`' CSV back into rows (for ``--report-only``)."""
    out = []
    for r in read_tidy(path):
        x, y = r.pop("source").split(",")
        complete, rep = r.pop("complete") == 1, r.pop("repetition")
        out.append(McRow(**r, rep=rep, source=(int(x), int(y)), complete=complete))
    return out


# -- what both reports draw from the summaries --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Summaries:
    """The per-multicast rows and, per (scenario, algorithm, k), a :class:`Stat` of each metric."""

    rows: list[McRow]
    summary: Mapping[PointKey, Mapping[str, Stat]]
    ks: tuple[int, ...]
    repeat: int

    def stat(self, scenario: str, alg: str, k: int, metric: str) -> Stat | None:
        """One point's :class:`Stat` of ``metric``, None if the point was not run."""
        return None if (s := self.summary.get((scenario, alg, k))) is None else s[metric]

    def mean(self, scenario: str, alg: str, k: int, metric: str) -> float | None:
        """One point's mean of ``metric``, None if the point was not run."""
        return None if (s := self.stat(scenario, alg, k, metric)) is None else s.mean


def _scaled(v: float | None, scale: float) -> float | None:
    return None if v is None else v / scale


def ci_cell(s: Stat | None, digits: int, scale: float = 1.0) -> str:
    """A table cell ``mean [lo, hi]`` (each divided by ``scale``); an em dash for a missing point."""
    if s is None:
        return "—"
    return fmt_ci(_scaled(s.mean, scale), _scaled(s.lo, scale), _scaled(s.hi, scale), digits)


def ci_series(
    label: str,
    xs: Sequence[int],
    stats: Sequence[Stat | None],
    colour: str,
    scale: float = 1.0,
    value: str = "mean",
) -> Series:
    """A curve of one :class:`Stat` field over ``xs`` (divided by ``scale``); a mean gets its CI band."""

    def ys(name: str) -> list[float | None]:
        return [None if s is None else _scaled(getattr(s, name), scale) for s in stats]

    band = (ys("lo"), ys("hi")) if value == "mean" else None
    return Series(label, list(xs), ys(value), False, colour, band)


def mean_cell(s: Stat | None, digits: int) -> str:
    """A table cell of a point's mean alone; an em dash for a missing point."""
    return fmt(None if s is None else s.mean, digits)


Column = tuple[str, str, str, Callable[[Stat | None], str]]
"""One column of a per-point table: header, algorithm, metric, and the cell of that point's Stat."""


def point_table(ours: Summaries, scenario: str, columns: Sequence[Column]) -> str:
    """A markdown table with a row per k and a cell per column of ``scenario``'s points."""
    head = ["k", *(c[0] for c in columns)]
    rows = [[str(k), *(cell(ours.stat(scenario, a, k, m)) for _, a, m, cell in columns)] for k in ours.ks]
    return markdown_table(head, rows, ["r"] * len(head))


def plot_links(plots: Sequence[Path], out: Path) -> list[str]:
    """The report's image links, one paragraph each."""
    return [f"![{p.stem}]({p.relative_to(out).as_posix()})\n" for p in plots]
