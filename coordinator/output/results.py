"""Writing results: run.json and tidy CSVs, each written atomically (temp file, then rename).

A crash mid-write never leaves a half file behind; an incomplete run is still written,
marked as such in run.json.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "write_csv", "write_run"]


def atomic_write(path: Path, text: str | bytes) -> None:
    """Replace ``path`` with ``text`` in one rename, so readers see the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    atomic_write(path, buf.getvalue())


def _xy(c: Sequence[int] | None) -> str:
    return "" if c is None else f"{c[0]},{c[1]}"


def write_run(out: Path, doc: dict[str, Any]) -> list[Path]:
    """run.json, multicasts.csv, arrivals.csv and links.csv (links only with a trace)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "run.json", json.dumps(doc, indent=1))
    mcs = doc["multicasts"]
    write_csv(
        out / "multicasts.csv",
        ["id", "algorithm", "source", "destinations", "time", "traffic", "distinct_links",
         "additional_traffic", "mean_arrival", "cv", "missing", "duplicates", "stray"],
        (
            [m["id"], m["algorithm"], _xy(m["source"]), len(m["destinations"]), m["time"], m["traffic"],
             m["distinct_links"], m["additional_traffic"], m["mean_arrival"], m["cv"], len(m["missing"]),
             m["duplicates"], m["stray"]]
            for m in mcs
        ),
    )  # fmt: skip
    write_csv(
        out / "arrivals.csv",
        ["mc", "algorithm", "node", "step", "hops", "startups", "wall_ns"],
        (
            [m["id"], m["algorithm"], _xy(a["node"]), a["step"], a["hops"], a["startups"], a["wall_ns"]]
            for m in mcs
            for a in m["arrivals"]
        ),
    )
    written = [out / "run.json", out / "multicasts.csv", out / "arrivals.csv"]
    if any("links" in m for m in mcs):
        write_csv(
            out / "links.csv",
            ["mc", "algorithm", "from", "to", "step"],
            ([m["id"], m["algorithm"], _xy(link["from"]), _xy(link["to"]), link["step"]]
             for m in mcs for link in m.get("links", [])),
        )  # fmt: skip
        written.append(out / "links.csv")
    return written
