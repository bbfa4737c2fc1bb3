"""Writing results: run.json and tidy CSVs, written as a set and each file atomically.

:func:`write_run` writes the whole run directory into a temporary sibling and renames it into
place, so a reader sees the old run or the new one, never a mix, and no file of an earlier run
stays behind (a links.csv from an earlier ``--trace`` run). A directory holding other files
(or a mount point, which cannot be renamed) is updated file by file instead, and meshcast's own
files that the new run does not write are removed. Files get the user's umask (0666 & ~umask),
not mkstemp's 0600. An incomplete run is still written, marked as such in run.json.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coordinator.analysis.result_types import RunResult

__all__ = ["RUN_FILES", "atomic_write", "write_csv", "write_run"]

RUN_FILES = frozenset({"run.json", "multicasts.csv", "arrivals.csv", "links.csv", "raw.json"})
"""The files meshcast writes into a run directory (so a stale one can be told from the user's)."""


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _file_mode() -> int:
    """0666 & ~umask: the mode ``open`` would give a new file."""
    return 0o666 & ~_umask()


def atomic_write(path: Path, text: str | bytes) -> None:
    """Replace ``path`` with ``text`` in one rename, so readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _csv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """One CSV file, written atomically."""
    atomic_write(path, _csv(header, rows))


def _xy(c: Sequence[int] | None) -> str:
    return "" if c is None else f"{c[0]},{c[1]}"


def write_run(out: Path, result: RunResult, extra: dict[str, str | bytes] | None = None) -> list[Path]:
    """run.json (``result.to_json()``), multicasts.csv, arrivals.csv, links.csv (only with a trace)
    and ``extra`` (e.g. raw.json), written as one set into ``out``; returns the files' paths."""
    files: dict[str, str | bytes] = {"run.json": json.dumps(result.to_json(), indent=1)}
    mcs = result.multicasts
    files["multicasts.csv"] = _csv(
        ["id", "algorithm", "source", "destinations", "time", "traffic", "distinct_links",
         "additional_traffic", "mean_arrival", "cv", "cv_wall", "missing", "duplicates", "stray"],
        (
            [m.id, m.algorithm, _xy(m.source), len(m.destinations), m.time, m.traffic,
             m.distinct_links, m.additional_traffic, m.mean_arrival, m.cv, m.cv_wall,
             len(m.missing), m.duplicates, m.stray]
            for m in mcs
        ),
    )  # fmt: skip
    files["arrivals.csv"] = _csv(
        ["mc", "algorithm", "node", "step", "hops", "startups", "wall_ns"],
        (
            [m.id, m.algorithm, _xy(a.node), a.step, a.hops, a.startups, a.wall_ns]
            for m in mcs
            for a in m.arrivals
        ),
    )
    if any(m.links is not None for m in mcs):
        files["links.csv"] = _csv(
            ["mc", "algorithm", "from", "to", "step"],
            ([m.id, m.algorithm, _xy(link.frm), _xy(link.to), link.step]
             for m in mcs for link in m.links or ()),
        )  # fmt: skip
    files.update(extra or {})
    _write_set(out, files)
    return [out / name for name in files]


def _write_set(out: Path, files: dict[str, str | bytes]) -> None:
    """Replace the run directory ``out`` by exactly ``files`` (see the module docstring)."""
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    theirs = out.is_dir() and any(p.name not in RUN_FILES for p in out.iterdir())
    if not theirs and not os.path.ismount(out):
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            for name, text in files.items():
                atomic_write(tmp / name, text)
            tmp.chmod(0o777 & ~_umask())  # mkdtemp made it 0700
            old = tmp.with_name(tmp.name + ".old")
            if out.exists():
                out.rename(old)
            try:
                tmp.rename(out)
            except OSError:
                if old.exists():
                    old.rename(out)  # put the earlier run back; fall through to file by file
                raise
            shutil.rmtree(old, ignore_errors=True)
            return
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not out.is_dir():
                raise
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        atomic_write(out / name, text)
    for name in RUN_FILES - set(files):
        (out / name).unlink(missing_ok=True)
