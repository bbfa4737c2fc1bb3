"""The reproduction contract, written once: options as data, one process pool, run facts, paper data.

A reproduction is a module of :mod:`coordinator.reproduce` that defines

* ``NAME: str`` — the command-line name (``meshcast reproduce NAME``);
* ``SUMMARY: str`` — one line for ``--help`` (default: the module docstring's first line);
* ``DEFAULT_REPEAT: int`` — optional, the paper's number of runs per point (default 100);
* ``OPTIONS: tuple[Option, ...]`` — optional, its own options beyond :data:`COMMON`;
* ``USES: tuple[str, ...]`` — optional, which of the opt-in common options (``jobs``, ``quick``) apply;
* ``run(args, ctx) -> int`` — do it and return the exit status (0 done, 1 incomplete; bad input
  raises :class:`coordinator.errors.UsageError`).

Every ``run`` follows one pattern: settings → points run (in :func:`run_pool`, progress reported
through ``ctx.progress``) → tidy data written first (CSV) → claims, plots and ``report.md`` rebuilt
from the tidy data alone, which is what ``--report-only`` does from an earlier run's files. The
command line (argparse, rich) lives in :mod:`coordinator.cli.reproduce_command`; nothing here knows it.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from coordinator.errors import UsageError
from coordinator.runtimes.records import RunSettings
from node import build_name

__all__ = [
    "COMMON",
    "Context",
    "Option",
    "ProgressFn",
    "Stopwatch",
    "int_list",
    "paper_csv",
    "read_report_only",
    "read_tidy",
    "run_facts",
    "run_pool",
    "text",
    "texts",
]

ProgressFn = Callable[[int, int], None]
"""progress(done, total), supplied by the command line (a progress bar) or None."""

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Option:
    """One command-line option as data; :mod:`coordinator.cli.reproduce_command` turns it into argparse.

    ``flag`` makes it a switch (store_true), ``negatable`` a ``--x/--no-x`` pair with ``default``.
    """

    name: str
    help: str
    type: Callable[[str], Any] | None = str
    default: Any = None
    choices: Sequence[str] | None = None
    flag: bool = False
    negatable: bool = False
    required: bool = False

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


def _cpus() -> int:
    return os.cpu_count() or 1


#: The options every reproduction shares; ``jobs`` and ``quick`` only where the module USES them.
COMMON: Mapping[str, Option] = {
    "out": Option("--out", "directory for report.md, plots and CSVs", required=True),
    "repeat": Option("--repeat", "runs (random destination sets) per point", int),
    "seed": Option("--seed", "seed of the random destination sets", int, 1),
    "jobs": Option("--jobs", "worker processes (default min(2, CPUs))", int, min(2, _cpus())),
    "quick": Option("--quick", "small sizes: a smoke test", None, flag=True),
    "report-only": Option(
        "--report-only",
        "no runs: rebuild report.md and the plots from the tidy data of an earlier run in --out",
        None,
        flag=True,
    ),
}
ALWAYS = ("out", "repeat", "seed", "report-only")


def runtime_option(
    default: str = "in-process", choices: Sequence[str] | None = None, help: str = ""
) -> Option:
    """``--runtime``: where a reproduction's nodes run (any emulation runtime unless ``choices``)."""
    from coordinator.experiments.run import RUNTIMES

    text = help or f"where the nodes run (default {default}; 'model' is the reference model)"
    return Option("--runtime", text, default=default, choices=tuple(choices or RUNTIMES))


def _say(line: str) -> None:
    print(line)


@dataclass(frozen=True, slots=True)
class Context:
    """What the command line lends a reproduction: a progress callback and a way to print a line."""

    progress: ProgressFn | None = None
    say: Callable[[str], None] = field(default=_say)

    def warn(self, line: str) -> None:
        """A line on stderr (a warning or why the exit status is not 0)."""
        print(line, file=sys.stderr)


# -- running points -------------------------------------------------------------------------------
def run_pool(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    jobs: int,
    progress: ProgressFn | None = None,
    cost: Callable[[T], float] | None = None,
) -> list[R]:
    """``fn`` of every task, in ``jobs`` spawned worker processes (here if ``jobs`` is 1).

    Tasks start most costly first (by ``cost``); results come back in task order. ``fn`` and the
    tasks must pickle (a module-level function and plain data), as the workers are spawned.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    order = (
        sorted(range(len(tasks)), key=lambda i: cost(tasks[i]), reverse=True) if cost else range(len(tasks))
    )
    results: dict[int, R] = {}
    if jobs <= 1 or len(tasks) <= 1:
        for i in order:
            results[i] = fn(tasks[i])
            if progress:
                progress(len(results), len(tasks))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
            futs: dict[Future[R], int] = {pool.submit(fn, tasks[i]): i for i in order}
            pending = set(futs)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    results[futs[f]] = f.result()
                if progress:
                    progress(len(results), len(tasks))
    return [results[i] for i in range(len(tasks))]


# -- run facts --------------------------------------------------------------------------------------
def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the worker processes)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass(slots=True)
class Stopwatch:
    """Wall and CPU time since it was made."""

    t0: float = field(default_factory=time.perf_counter)
    c0: float = field(default_factory=_cpu_s)

    def wall(self) -> float:
        return time.perf_counter() - self.t0

    def cpu(self) -> float:
        return _cpu_s() - self.c0


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("meshcast", "trio", "msgpack"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def run_facts(command: str, watch: Stopwatch, **extra: Any) -> dict[str, Any]:
    """The run metadata every reproduction records: command, date, machine, wall/CPU time, versions."""
    return {
        "command": command,
        "date": time.strftime("%Y-%m-%d"),
        "cpus": _cpus(),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, {build_name()} build",
        "wall_s": round(watch.wall(), 1),
        "cpu_s": round(watch.cpu(), 1),
        "versions": _versions(),
        **extra,
    }


def command_line(name: str, args: Any, *extra: str) -> str:
    """``meshcast reproduce NAME --repeat R --seed S`` plus ``extra`` (the non-default options)."""
    parts = [f"meshcast reproduce {name} --repeat {args.repeat} --seed {args.seed}"]
    if getattr(args, "quick", False):
        parts.append("--quick")
    return " ".join([*parts, *extra])


def write_json(path: Path, doc: Any) -> Path:
    """``doc`` as indented JSON, atomically."""
    from coordinator.output.results import atomic_write

    atomic_write(path, json.dumps(doc, indent=1))
    return path


def read_report_only(what: str, out: Path, read: Callable[[Path], T]) -> T:
    """``read(out)`` for ``--report-only``; a missing or broken earlier run is a usage error."""
    try:
        return read(out)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--report-only: no earlier run to read in {out} ({what}: {exc})") from None


# -- paper data, report texts and small parsers -----------------------------------------------------
_SECTION = "<!-- text: "


@cache
def texts(name: str) -> Mapping[str, str]:
    """A reproduction's report prose from coordinator/data/reports/NAME.md, by section.

    The file is markdown split by lines ``<!-- text: KEY -->``; each section runs to the next one,
    without its trailing blank lines, and is filled in with ``str.format`` (``{{`` for a brace).
    The prose lives apart from the code so that a module keeps only its experiment, claims and tables.
    """
    path = resources.files("coordinator").joinpath("data", "reports", f"{name}.md")
    text = path.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    key: str | None = None
    for line in text.splitlines():
        if line.startswith(_SECTION) and line.rstrip().endswith("-->"):
            key = line[len(_SECTION) :].rstrip().removesuffix("-->").strip()
            if key in out:
                raise ValueError(f"reports/{name}.md: section {key!r} twice")
            out[key] = ""
        elif key is not None:
            out[key] += line + "\n"
    return {k: v.rstrip("\n") for k, v in out.items()}


def text(name: str, key: str, *parts: Mapping[str, Any], **fields: Any) -> str:
    """Section ``key`` of :func:`texts` (``name``) filled from ``parts`` and ``fields`` (later ones win)."""
    return texts(name)[key].format_map({k: v for part in (*parts, fields) for k, v in part.items()})


def paper_csv(name: str) -> tuple[str, list[dict[str, str]]]:
    """A CSV of coordinator/data (package data): its source (the comment lines) and its rows as text."""
    text = resources.files("coordinator").joinpath("data", name).read_text(encoding="utf-8")
    lines = text.splitlines()
    source = " ".join(line.lstrip("#").strip() for line in lines if line.startswith("#"))
    body = [line for line in lines if line.strip() and not line.startswith("#")]
    rows = [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(body)]
    return source.removeprefix("source:").strip(), rows


def read_csv(path: Path) -> list[dict[str, str]]:
    """A CSV's rows as text dicts."""
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _cell(text: str) -> Any:
    """A tidy CSV cell back to what was written: an empty cell is None, then an int, a float or the text."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def read_tidy(path: Path) -> list[dict[str, Any]]:
    """A tidy CSV's rows with their numbers back, each cell's type inferred (:func:`_cell`), so that
    a paper's columns are declared once, where they are written (:func:`write_tidy`)."""
    return [{k: _cell(v) for k, v in r.items()} for r in read_csv(path)]


def write_tidy(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    """Rows (dicts) as a tidy CSV of ``columns``, in that order; a missing value is an empty cell."""
    from coordinator.output.results import write_csv

    write_csv(path, columns, ([r.get(c) for c in columns] for r in rows))


def int_list(text: str, what: str, lo: int = 1, hi: int = 1 << 30) -> tuple[int, ...]:
    """A comma list of distinct integers in [lo, hi]; anything else is a usage error naming ``what``."""
    try:
        xs = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise UsageError(f"{what} {text!r}: a comma list of integers") from None
    if not xs or any(not lo <= x <= hi for x in xs) or len(set(xs)) != len(xs):
        raise UsageError(f"{what} {text!r}: distinct integers between {lo} and {hi}")
    return xs


def positive(value: float, what: str, strict: bool = True) -> None:
    """Refuse a value that is not positive (or negative, with ``strict`` False)."""
    if value < 0 or (strict and value == 0):
        raise UsageError(f"{what} must be {'positive' if strict else 'at least 0'}, got {value}")


def names_in(text: str, allowed: Iterable[str], what: str) -> tuple[str, ...]:
    """A comma list of names out of ``allowed``, in ``allowed``'s order; anything else refused."""
    allowed = tuple(allowed)
    names = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in names if a not in allowed]
    if bad or not names:
        raise UsageError(
            f"{what} {text!r}: choose from {','.join(allowed)}"
            + (f" ({', '.join(bad)} is not one)" if bad else "")
        )
    return tuple(a for a in allowed if a in names)


def lockstep_settings(args: Any, port_model: str, **extra: Any) -> RunSettings:
    """The settings of a reproduction's runs: isolated contention, lockstep clock, ``port_model``,
    and ``--seed``, ``--runtime`` and ``--wall-budget`` where the module has those options."""
    kw = {a: getattr(args, a) for a in ("seed", "runtime", "wall_budget") if hasattr(args, a)}
    return RunSettings(
        **{"port_model": port_model, "contention": "isolated", "clock": "lockstep", **kw, **extra}
    )


def finish(ctx: Context, out: Path, report: str, said: str, claims: Iterable[str], complete: bool) -> int:
    """The end of every run: write report.md, say ``said`` and the claims (plain), warn if incomplete.

    Returns the exit status: 0 when every run was complete, 1 otherwise.
    """
    from coordinator.output.results import atomic_write

    atomic_write(out / "report.md", report)
    ctx.say(said)
    for line in claims:
        ctx.say(line.replace("**", ""))
    if not complete:
        ctx.warn("meshcast: reproduction incomplete, see report.md's run status")
    return 0 if complete else 1


# -- paired comparisons (every algorithm runs on the same destination sets) --------------------------
def significance(diffs: Sequence[float], single: bool = True) -> int:
    """−1 when the paired differences a − b lie significantly below 0 (95% CI of their mean), +1 above.

    0 when the CI holds 0 or there are no differences. One difference (or all equal: no spread)
    counts by its sign, unless ``single`` is False, where fewer than two count as indistinguishable.
    """
    from coordinator.analysis.metrics import ci95

    s = ci95(diffs)
    if s["mean"] is None or (s["n"] < 2 and not single):
        return 0
    lo, hi = s["ci95"]
    return -1 if hi < 0 else (1 if lo > 0 else 0)


def sign_counts(diffs: Iterable[float]) -> tuple[int, int, int]:
    """How many of the paired differences are below 0, equal to 0 and above 0."""
    ds = list(diffs)
    return sum(1 for d in ds if d < 0), sum(1 for d in ds if d == 0), sum(1 for d in ds if d > 0)
