"""``meshcast sweep``: every point (number of destinations) × repetition × algorithm in ONE emulation.

A sweep draws ``repeat`` random destination sets for each point ``k`` (seeded), gives the very
same sets to every algorithm (as the seed papers compared them), and runs all the multicasts at
once in *isolated* contention: each multicast sees an idle network, so they do not affect each
other's numbers and a whole sweep costs one emulation instead of one per point. It writes

* ``tidy.csv``: one row per multicast (topology, algorithm, k, repetition, source, time,
  traffic, additional_traffic, mean_arrival, cv, missing);
* ``summary.csv``: per algorithm × k, the mean and 95% confidence interval of each metric;
* ``sweep.json``: the parameters, run status and errors, for provenance.

Shared contention is refused: multicasts that compete for ports and links would measure the
load of the whole sweep, not each point, so there is no single-emulation equivalent (run such
experiments with ``meshcast run`` one point at a time).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from coordinator.experiment import emulate
from coordinator.metrics import SUMMARY_FIELDS, ci95, multicast_metrics
from coordinator.plan import Plan, PlanError, random_plan
from coordinator.records import RunSettings
from coordinator.results import atomic_write, write_csv
from node.topology import Coord, Topology, TopologyError, parse_coord

__all__ = [
    "COMMANDS",
    "SUMMARY_COLUMNS",
    "TIDY_COLUMNS",
    "SweepResult",
    "add_command",
    "parse_dests",
    "run_sweep",
    "summarise_tidy",
    "sweep",
    "sweep_async",
    "sweep_plan",
    "write_sweep",
]

Progress = Callable[[int, int], None]

TIDY_COLUMNS = (
    "topology",
    "algorithm",
    "k",
    "repetition",
    "source",
    "time",
    "traffic",
    "additional_traffic",
    "mean_arrival",
    "cv",
    "missing",
)
SUMMARY_COLUMNS = (
    "topology",
    "algorithm",
    "k",
    "n",
    "complete",
    *(f"{m}_{s}" for m in SUMMARY_FIELDS for s in ("mean", "ci_low", "ci_high")),
)


def parse_dests(text: str) -> list[int]:
    """Destination counts from ``start:stop:step`` (stop included) or a comma list ``5,10,20``."""
    t = text.strip()
    if not t:
        raise PlanError("--dests is empty: give start:stop:step (e.g. 20:380:20) or a list (5,10,20)")
    if ":" in t:
        parts = t.split(":")
        if len(parts) != 3:
            raise PlanError(f"--dests {text!r}: a range is start:stop:step, e.g. 20:380:20")
        try:
            start, stop, step = (int(p) for p in parts)
        except ValueError:
            raise PlanError(f"--dests {text!r}: start, stop and step must be integers") from None
        if step < 1:
            raise PlanError(f"--dests {text!r}: the step must be at least 1, got {step}")
        if start < 1:
            raise PlanError(f"--dests {text!r}: a multicast needs at least 1 destination, got {start}")
        if stop < start:
            raise PlanError(f"--dests {text!r}: stop {stop} is below start {start}")
        return list(range(start, stop + 1, step))
    out: list[int] = []
    for item in t.split(","):
        try:
            k = int(item)
        except ValueError:
            raise PlanError(f"--dests {text!r}: {item.strip()!r} is not an integer") from None
        if k < 1:
            raise PlanError(f"--dests {text!r}: a multicast needs at least 1 destination, got {k}")
        if k in out:
            raise PlanError(f"--dests {text!r}: {k} is listed twice")
        out.append(k)
    return out


def sweep_plan(
    topology: Topology,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    params: Mapping[str, Any] | None = None,
) -> tuple[Plan, list[tuple[int, int]]]:
    """The sweep's plan and, per multicast id, its (k, repetition).

    ``source`` None draws a source per destination set (the same for every algorithm).
    """
    if not algorithms:
        raise PlanError("a sweep needs at least one algorithm")
    if len(set(algorithms)) != len(algorithms):
        raise PlanError(f"an algorithm is listed twice in {','.join(algorithms)}")
    if not ks:
        raise PlanError("a sweep needs at least one number of destinations")
    plan = random_plan(topology, algorithms, list(ks), repeat, seed, source, params)
    sets = len(ks) * repeat
    points: list[tuple[int, int]] = []
    for i, m in enumerate(plan.multicasts):
        j = i % sets
        k, rep = ks[j // repeat], j % repeat
        if m.id != i or len(m.destinations) != k:  # random_plan's documented order, checked
            raise RuntimeError(f"multicast {m.id} does not match sweep point k={k}, repetition {rep}")
        points.append((k, rep))
    return plan, points


@dataclass(frozen=True, slots=True)
class SweepResult:
    """A sweep's rows and how its emulation went."""

    tidy: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    incomplete: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    wall_s: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.incomplete and all(r["missing"] == 0 for r in self.tidy)


def _round(v: float | None, digits: int = 6) -> float | None:
    return None if v is None else round(v, digits)


def _tidy(
    plan: Plan, points: Sequence[tuple[int, int]], records: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = []
    for m, (k, rep), r in zip(plan.multicasts, points, records, strict=True):
        rows.append(
            {
                "topology": plan.topology.spec,
                "algorithm": m.algorithm,
                "k": k,
                "repetition": rep,
                "source": f"{m.source[0]},{m.source[1]}",
                "time": r["time"],
                "traffic": r["traffic"],
                "additional_traffic": r["additional_traffic"],
                "mean_arrival": _round(r["mean_arrival"]),
                "cv": _round(r["cv"]),
                "missing": len(r["missing"]),
            }
        )
    return rows


def summarise_tidy(tidy: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean and 95% CI of every metric per topology × algorithm × k, in first-seen order."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in tidy:
        groups[(r["topology"], r["algorithm"], r["k"])].append(r)
    out = []
    for (topo, alg, k), rows in groups.items():
        row: dict[str, Any] = {
            "topology": topo,
            "algorithm": alg,
            "k": k,
            "n": len(rows),
            "complete": sum(1 for r in rows if r["missing"] == 0),
        }
        for m in SUMMARY_FIELDS:
            s = ci95([r[m] for r in rows if r[m] is not None])
            row[f"{m}_mean"] = _round(s["mean"])
            row[f"{m}_ci_low"] = _round(s["ci95"][0])
            row[f"{m}_ci_high"] = _round(s["ci95"][1])
        out.append(row)
    return out


def _check_settings(settings: RunSettings) -> None:
    if settings.contention != "isolated":
        raise PlanError(
            f"a sweep runs all its multicasts in one emulation, which needs --contention isolated "
            f"(got {settings.contention!r}); shared-contention experiments measure the load of "
            "everything injected together, so run them point by point with 'meshcast run'"
        )


async def sweep_async(
    topology: Topology | str,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    settings: RunSettings,
    progress: Progress | None = None,
    params: Mapping[str, Any] | None = None,
) -> SweepResult:
    """Run a sweep inside trio (see :func:`sweep`)."""
    _check_settings(settings)
    topo = Topology.parse(topology) if isinstance(topology, str) else topology
    plan, points = sweep_plan(topo, algorithms, ks, repeat, seed, source, params)
    raw = await emulate(plan, settings, progress)
    tidy = _tidy(plan, points, multicast_metrics(plan, raw))
    return SweepResult(
        tidy, summarise_tidy(tidy), list(raw.incomplete), list(raw.errors), raw.last_step, raw.wall_s
    )


def sweep(
    topology: Topology | str,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    settings: RunSettings,
    progress: Progress | None = None,
    params: Mapping[str, Any] | None = None,
) -> SweepResult:
    """Run a sweep (one isolated emulation) and return its rows and run status."""
    return trio.run(sweep_async, topology, algorithms, ks, repeat, seed, source, settings, progress, params)


def run_sweep(
    topology: Topology | str,
    algorithms: Sequence[str],
    ks: Sequence[int],
    repeat: int,
    seed: int,
    source: Coord | None,
    settings: RunSettings,
    progress: Progress | None = None,
    params: Mapping[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(tidy_rows, summary_rows)`` of a sweep; an incomplete multicast shows as ``missing`` > 0."""
    res = sweep(topology, algorithms, ks, repeat, seed, source, settings, progress, params)
    return res.tidy, res.summary


def write_sweep(out: Path, result: SweepResult, meta: Mapping[str, Any]) -> list[Path]:
    """tidy.csv, summary.csv and sweep.json in ``out``, each written atomically."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "tidy.csv", TIDY_COLUMNS, ([r[c] for c in TIDY_COLUMNS] for r in result.tidy))
    write_csv(out / "summary.csv", SUMMARY_COLUMNS, ([r[c] for c in SUMMARY_COLUMNS] for r in result.summary))
    doc = {
        **meta,
        "complete": result.complete,
        "incomplete": result.incomplete,
        "steps": result.steps,
        "wall_s": round(result.wall_s, 3),
        "multicasts": len(result.tidy),
        "errors": result.errors[:100],
        "error_count": len(result.errors),
    }
    atomic_write(out / "sweep.json", json.dumps(doc, indent=1))
    return [out / "tidy.csv", out / "summary.csv", out / "sweep.json"]


# -- command line ------------------------------------------------------------------------------
def add_command(sub: Any) -> None:
    """Register ``meshcast sweep``."""
    from coordinator.cli import add_run_options

    p = sub.add_parser(
        "sweep",
        help="sweep the number of destinations: same random sets for every algorithm, one emulation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--topology", required=True, help="mesh:MxN or torus:MxN (M columns, N rows)")
    p.add_argument(
        "--algorithms",
        "--algorithm",
        dest="algorithms",
        required=True,
        help="comma-separated names from 'meshcast algorithms', e.g. diag,pair,min",
    )
    p.add_argument(
        "--dests",
        required=True,
        help="numbers of destinations: start:stop:step (stop included) "
        "or a comma list, e.g. 20:380:20 or 5,10,20",
    )
    p.add_argument("--repeat", type=int, default=10, help="random destination sets per point (default 10)")
    p.add_argument("--source", default="0,0", help="x,y of the source, or 'random' for one per set")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="algorithm parameter")
    p.add_argument("--out", required=True, help="directory for tidy.csv, summary.csv and sweep.json")
    add_run_options(p)


def _print_summary(result: SweepResult, algorithms: Sequence[str]) -> None:
    from rich.table import Table

    from coordinator.ui import console

    by = {(r["algorithm"], r["k"]): r for r in result.summary}
    ks = sorted({r["k"] for r in result.summary})
    table = Table(title="mean time / traffic per point")
    table.add_column("k", justify="right")
    for a in algorithms:
        table.add_column(a, justify="right")
    for k in ks:
        cells = []
        for a in algorithms:
            r = by.get((a, k))
            t, tr = (r["time_mean"], r["traffic_mean"]) if r else (None, None)
            cells.append("-" if t is None else f"{t:.2f} / {tr:.1f}")
        table.add_row(str(k), *cells)
    console().print(table)


def cmd_sweep(args: argparse.Namespace) -> int:
    from coordinator.cli import UsageError, _params, progress_runner, settings_from

    try:
        topo = Topology.parse(args.topology)
        algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
        if not algorithms:
            raise UsageError("--algorithms is empty")
        ks = parse_dests(args.dests)
        source = None if args.source.strip().lower() == "random" else parse_coord(args.source)
    except (PlanError, TopologyError) as exc:
        raise UsageError(str(exc)) from None
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    settings = settings_from(args)
    params = _params(args.param)
    try:
        _check_settings(settings)
        sweep_plan(topo, algorithms, ks, 1, args.seed, source, params)  # validate before the run
    except PlanError as exc:
        raise UsageError(str(exc)) from None
    total = len(algorithms) * len(ks) * args.repeat
    update, prog = progress_runner(f"sweep of {total} multicasts")
    if prog is not None:
        with prog:
            result = sweep(topo, algorithms, ks, args.repeat, args.seed, source, settings, update, params)
    else:
        result = sweep(topo, algorithms, ks, args.repeat, args.seed, source, settings, None, params)
    meta = {
        "command": "sweep",
        "topology": topo.spec,
        "algorithms": algorithms,
        "ks": ks,
        "repeat": args.repeat,
        "seed": args.seed,
        "source": None if source is None else list(source),
        "params": params,
        "settings": asdict(settings),
    }
    written = write_sweep(Path(args.out), result, meta)
    _print_summary(result, algorithms)
    print("wrote " + ", ".join(str(w) for w in written), file=sys.stderr)
    if not result.complete:
        missing = sum(1 for r in result.tidy if r["missing"])
        why = "; ".join(result.incomplete) or f"{missing} multicast(s) missed destinations"
        print(f"meshcast: sweep incomplete: {why}", file=sys.stderr)
        return 1
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"sweep": cmd_sweep}
