"""Replay pages: one self-contained HTML file that plays a traced run step by step.

``meshcast replay RUN_DIR`` and ``meshcast run --replay --out DIR`` (which traces) read the result
document (``run.json``: the topology, each multicast's metrics, arrivals and, with ``--trace``,
its link traversals) and write one HTML file holding everything it needs: the data as compact
integer arrays, the style and a hand-written script drawing on a ``<canvas>``
(``coordinator/data/replay.html`` and ``replay.js``). Nothing is fetched, so it opens offline
from disk. Steps are the recorded steps (cycles under wormhole switching, the logical steps the
free clock counted); a free-clock run can also be replayed on its measured wall-clock latencies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

from coordinator.errors import UsageError
from coordinator.output.palette import algorithm_colour
from coordinator.output.results import atomic_write
from node.topology import PORTS, Topology, TopologyError

__all__ = ["ReplayMulticast", "ReplayRun", "load_run", "page", "replay_data", "write_replay"]

_SPARE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
"""Colours of multicasts that share an algorithm (repetitions), one each, in id order."""


_IN = (*PORTS, "inj")
_OUT = (*PORTS, "ej")
"""A worm run's input and output as the page has them: a port's index, or 4 (injected, ejected)."""

_METRICS = ("time", "traffic", "distinct_links", "additional_traffic", "mean_arrival", "cv", "cv_wall")
"""The multicast's metrics the side panel shows, as the result document has them."""


class ReplayMulticast(TypedDict):
    """One multicast as the page's script reads it (``replay.js``): node ids ``x * rows + y``, steps,
    and flat int arrays (a link is from, to, step; a worm run is worm, node, in, port, first, count)."""

    id: int
    algorithm: str
    colour: str
    source: int
    injected: int
    dests: list[int]
    arrive: list[int]  # per destination its first arrival step, -1 if none
    wall: list[int]  # per destination its first arrival's wall-clock latency (ns), -1 if none
    links: list[int]
    traced: bool
    worms: list[int]
    wormIds: list[int]  # the script's spelling
    metrics: dict[str, Any]  # the result document's values of _METRICS, as they are there
    missing: int


class ReplayRun(TypedDict):
    """One run as the page's script reads it: its grid, clock and switching, last step and multicasts."""

    title: str
    topology: str
    torus: bool
    cols: int
    rows: int
    clock: str
    switching: str
    flits: int
    complete: bool
    steps: int
    multicasts: list[ReplayMulticast]


def load_run(directory: str | Path) -> dict[str, Any]:
    """The result document of run directory ``directory``, checked to hold a trace, or a UsageError."""
    path = Path(directory)
    if not path.is_dir():
        raise UsageError(f"{path}: no such run directory (give the --out directory of a meshcast run)")
    doc_path = path / "run.json"
    try:
        doc = json.loads(doc_path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no run.json here (give the --out directory of a meshcast run)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{doc_path}: cannot read the result ({exc})") from None
    try:
        Topology.parse(doc["run"]["topology"])
        multicasts = doc["multicasts"]
        if not isinstance(multicasts, list) or not multicasts:
            raise ValueError("no multicasts")
        if not any("links" in m for m in multicasts):
            raise UsageError(
                f"{path}: the run has no trace; make it again with meshcast run --trace (or --replay)"
            )
        replay_data(doc, path.name)  # every field the page reads is there and well formed
    except UsageError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, TopologyError) as exc:
        raise UsageError(f"{doc_path}: not a meshcast result ({type(exc).__name__}: {exc})") from None
    return dict(doc)


def _colours(multicasts: Sequence[Mapping[str, Any]]) -> list[str]:
    """One colour per multicast: its algorithm's, unless two share an algorithm."""
    algorithms = [str(m["algorithm"]) for m in multicasts]
    if len(set(algorithms)) == len(algorithms):
        return [algorithm_colour(a) for a in algorithms]
    return [_SPARE[i % len(_SPARE)] for i in range(len(multicasts))]


def _multicast(m: Mapping[str, Any], topo: Topology, colour: str) -> ReplayMulticast:
    """One multicast as the page reads it: node ids (x * rows + y) and steps as flat int arrays."""
    rows = topo.rows

    def nid(c: Sequence[int]) -> int:
        x, y = int(c[0]), int(c[1])
        if not (0 <= x < topo.cols and 0 <= y < rows):
            raise ValueError(f"node ({x},{y}) outside {topo.spec}")
        return x * rows + y

    first: dict[int, tuple[int, int | None]] = {}
    for a in m["arrivals"]:
        n = nid(a["node"])
        if n not in first or int(a["step"]) < first[n][0]:
            wall = a.get("wall_ns")
            first[n] = (int(a["step"]), None if wall is None else int(wall))
    dests = [nid(d) for d in m["destinations"]]
    links: list[int] = []
    for lk in m.get("links") or []:
        if lk.get("to") is None:  # a send off the grid's edge (a rule error): nothing to draw
            continue
        links += [nid(lk["from"]), nid(lk["to"]), int(lk["step"])]
    worm_ids: list[tuple[int, int, int]] = []
    index: dict[tuple[int, int, int], int] = {}
    worms: list[int] = []
    for run in m.get("worms") or []:
        wid = (int(run["worm"][0]), int(run["worm"][1]), int(run["worm"][2]))
        w = index.get(wid)
        if w is None:
            w = index[wid] = len(worm_ids)
            worm_ids.append(wid)
        if run["to"] is None and run["port"] != "ej":  # a send off the grid's edge (a rule error)
            continue
        start, count = int(run["first"]), int(run["count"])
        if start < 0 or count < 1:
            raise ValueError(f"worm run {run!r}: first step below 0 or fewer than 1 flit")
        came, port = _IN.index(run["in"]), _OUT.index(run["port"])
        worms += [w, nid(run["from"]), came, port, start, count]
    return ReplayMulticast(
        id=int(m["id"]),
        algorithm=str(m["algorithm"]),
        colour=colour,
        source=nid(m["source"]),
        injected=int(m.get("injected") or 0),
        dests=dests,
        arrive=[first[d][0] if d in first else -1 for d in dests],
        wall=[w if d in first and (w := first[d][1]) is not None else -1 for d in dests],
        links=links,
        traced="links" in m,
        worms=worms,
        wormIds=[x for wid in worm_ids for x in wid],
        metrics={k: m.get(k) for k in _METRICS},
        missing=len(m.get("missing") or []),
    )


def replay_data(doc: Mapping[str, Any], title: str) -> ReplayRun:
    """What the page needs of one result document, and nothing else."""
    run = doc["run"]
    topo = Topology.parse(run["topology"])
    multicasts = list(doc["multicasts"])
    records = [_multicast(m, topo, c) for m, c in zip(multicasts, _colours(multicasts), strict=True)]
    last = 0
    for r in records:
        last = max([last, *r["arrive"], *(s + 1 for s in r["links"][2::3])])
        w = r["worms"]
        last = max([last, *(w[i + 4] + w[i + 5] for i in range(0, len(w), 6))])
    switching = run.get("switching") or {}
    return ReplayRun(
        title=title,
        topology=topo.spec,
        torus=topo.is_torus,
        cols=topo.cols,
        rows=topo.rows,
        clock=str(run.get("clock", "lockstep")),
        switching=str(switching.get("mode", "store-and-forward")),
        flits=int(switching.get("flits") or 1),
        complete=bool(run.get("complete", True)),
        steps=last,
        multicasts=records,
    )


def page(runs: Sequence[ReplayRun]) -> str:
    """The HTML page replaying ``runs`` (from :func:`replay_data`) side by side on one slider."""
    data = json.dumps({"runs": list(runs)}, separators=(",", ":"))
    data = data.replace("<", "\\u003c")  # no "</script>" can end the data block early
    folder = resources.files("coordinator") / "data"
    template = (folder / "replay.html").read_text(encoding="utf-8")
    script = (folder / "replay.js").read_text(encoding="utf-8")
    title = " | ".join(str(r["title"]) for r in runs)
    title = title.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    fill = {"TITLE": title, "DATA": data, "SCRIPT": script}
    return re.sub(r"\{\{(TITLE|DATA|SCRIPT)\}\}", lambda m: fill[m.group(1)], template)  # one pass


def write_replay(out: Path, docs: Sequence[tuple[Mapping[str, Any], str]]) -> Path:
    """Write the replay page of ``docs`` (result document, title) into ``out``, atomically."""
    atomic_write(out, page([replay_data(doc, title) for doc, title in docs]))
    return out
