"""Replay pages: one self-contained HTML file that plays a traced run step by step.

``meshcast replay RUN_DIR`` and ``meshcast run --replay --out DIR`` (which traces) read the result
document (``run.json``: the topology, each multicast's metrics, arrivals and, with ``--trace``,
its link traversals) and write one HTML file holding everything it needs: the data as compact
integer arrays, the style and a hand-written script drawing on a ``<canvas>``
(``coordinator/data/replay.html`` and ``replay.js``). Nothing is fetched, so it opens offline
from disk. Steps are the recorded steps (cycles under wormhole switching, the logical steps the
free clock counted); a free-clock run can also be replayed on its measured wall-clock latencies.
A malformed result (a link between nodes that are not neighbours, a negative step, a field of the
wrong kind) or a links.csv that disagrees with run.json is refused in one line (exit 2), not drawn.
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

__all__ = [
    "ReplayMulticast",
    "ReplayRun",
    "check_links_csv",
    "load_run",
    "page",
    "replay_data",
    "write_replay",
]

_BAD = (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError, TopologyError)
"""What a malformed result document raises while it is read: each becomes one line, exit 2."""

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
    hops: list[int]  # per destination its first arrival's hops, -1 if none or not recorded
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
    contention: str  # "shared": the multicasts met in one network (a load run); "isolated": each alone
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
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise UsageError(f"{doc_path}: cannot read the result ({type(exc).__name__}: {exc})") from None
    try:
        if not isinstance(doc, dict) or not isinstance(doc.get("run"), dict):
            raise ValueError("no run settings")
        Topology.parse(doc["run"]["topology"])
        multicasts = doc["multicasts"]
        if not isinstance(multicasts, list) or not multicasts:
            raise ValueError("no multicasts")
        if not all(isinstance(m, dict) for m in multicasts):
            raise ValueError("a multicast is not an object")
        if not any("links" in m for m in multicasts):
            raise UsageError(
                f"{path}: the run has no trace; make it again with meshcast run --trace (or --replay)"
            )
        replay_data(doc, path.name)  # every field the page reads is there and well formed
    except UsageError:
        raise
    except _BAD as exc:
        raise UsageError(f"{doc_path}: not a meshcast result ({type(exc).__name__}: {_short(exc)})") from None
    if (path / "links.csv").exists():
        check_links_csv(path / "links.csv", doc)
    return dict(doc)


def _short(exc: BaseException) -> str:
    """An exception's message on one line and at most 160 characters (a fuzzed value can be long)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else text[:157] + "..."


def _cell(text: str) -> tuple[int, int] | None:
    """A links.csv node ("x,y"), or None for an empty cell (a send off the grid's edge)."""
    if text == "":
        return None
    x, y = text.split(",")
    return int(x), int(y)


def check_links_csv(path: Path, doc: Mapping[str, Any]) -> None:
    """Refuse (UsageError) a links.csv that is malformed or says other than run.json's traces: the
    page draws run.json, so a links.csv that disagrees means one of them was damaged."""
    import csv

    want: list[tuple[int, tuple[int, int] | None, tuple[int, int] | None, int]] = []
    for m in doc["multicasts"]:
        for lk in m.get("links") or []:
            frm, to = lk["from"], lk.get("to")
            want.append((
                int(m["id"]), (int(frm[0]), int(frm[1])), None if to is None else (int(to[0]), int(to[1])),
                int(lk["step"]),
            ))  # fmt: skip
    got: list[tuple[int, tuple[int, int] | None, tuple[int, int] | None, int]] = []
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header != ["mc", "algorithm", "from", "to", "step"]:
                raise ValueError(f"header {header!r}, not mc,algorithm,from,to,step")
            for row in reader:
                if len(row) != 5:
                    raise ValueError(f"line {reader.line_num}: {len(row)} fields, not 5")
                try:
                    got.append((int(row[0]), _cell(row[2]), _cell(row[3]), int(row[4])))
                except ValueError:
                    raise ValueError(
                        f"line {reader.line_num}: {_short(ValueError(row))} is not mc, node, node, step"
                    ) from None
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise UsageError(f"{path}: a malformed links.csv ({_short(exc)})") from None
    if sorted(got, key=repr) != sorted(want, key=repr):
        extra = len(set(got) - set(want)) or len(set(want) - set(got))
        raise UsageError(
            f"{path}: links.csv disagrees with run.json ({len(got)} rows, run.json has {len(want)} "
            f"link traversals; {extra} differ): one of them was damaged; make the run again"
        )


def _adjacent(topo: Topology, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether a link joins nodes ``a`` and ``b`` of ``topo`` (wrap-around links on a torus)."""
    dx, dy = abs(a[0] - b[0]), abs(a[1] - b[1])
    if topo.is_torus:
        dx, dy = min(dx, topo.cols - dx), min(dy, topo.rows - dy)
    return dx + dy == 1


def _steps(value: Any, what: str) -> int:
    """A step of the trace: an int at least 0 (a negative or fractional one is refused, not drawn)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what}: step {value!r} is not a whole number")
    if not 0 <= value < 1 << 31:
        raise ValueError(f"{what}: step {value} below 0" if value < 0 else f"{what}: step {value} past 2^31")
    return value


def _multicast(m: Mapping[str, Any], topo: Topology, colour: str) -> ReplayMulticast:
    """One multicast as the page reads it: node ids (x * rows + y) and steps as flat int arrays;
    a link between non-adjacent nodes or a negative step is refused (ValueError), not drawn."""
    rows = topo.rows

    def pair(c: Any) -> tuple[int, int]:
        if not isinstance(c, list) or len(c) != 2 or not all(type(v) is int for v in c):
            raise ValueError(f"node {c!r} is not [x, y]")
        return c[0], c[1]

    def nid(c: Any) -> int:
        x, y = pair(c)
        if not (0 <= x < topo.cols and 0 <= y < rows):
            raise ValueError(f"node ({x},{y}) outside {topo.spec}")
        return x * rows + y

    for key in ("arrivals", "destinations"):
        if not isinstance(m[key], list):
            raise ValueError(f"multicast {m.get('id')!r}: {key} is not a list")
    for key in ("links", "worms"):
        if m.get(key) is not None and not isinstance(m[key], list):
            raise ValueError(f"multicast {m.get('id')!r}: {key} is a {type(m[key]).__name__}, not a list")

    first: dict[int, tuple[int, int | None, int]] = {}
    for a in m["arrivals"]:
        n = nid(a["node"])
        at = _steps(a["step"], f"multicast {m['id']}: arrival at {a['node']}")
        if n not in first or at < first[n][0]:
            wall, hops = a.get("wall_ns"), a.get("hops")
            first[n] = (at, None if wall is None else int(wall), -1 if hops is None else int(hops))
    dests = [nid(d) for d in m["destinations"]]
    links: list[int] = []
    for lk in m.get("links") or []:
        if lk.get("to") is None:  # a send off the grid's edge (a rule error): nothing to draw
            continue
        a, b = nid(lk["from"]), nid(lk["to"])
        if not _adjacent(topo, pair(lk["from"]), pair(lk["to"])):
            raise ValueError(f"multicast {m['id']}: link {lk['from']} -> {lk['to']} joins no neighbours")
        links += [a, b, _steps(lk["step"], f"multicast {m['id']}: link {lk['from']} -> {lk['to']}")]
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
        if run["to"] is not None and not _adjacent(topo, pair(run["from"]), pair(run["to"])):
            raise ValueError(
                f"multicast {m['id']}: worm run {run['from']} -> {run['to']} joins no neighbours"
            )
        start, count = _steps(run["first"], f"worm run {run!r}"), int(run["count"])
        if count < 1 or count > 1 << 31:
            raise ValueError(f"worm run {run!r}: count {count}, fewer than 1 flit or past 2^31")
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
        hops=[first[d][2] if d in first else -1 for d in dests],
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
    records = [_multicast(m, topo, algorithm_colour(str(m["algorithm"]))) for m in multicasts]
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
        contention=str(run.get("contention") or "isolated"),
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
    try:
        runs = [replay_data(doc, title) for doc, title in docs]
    except _BAD as exc:  # run --replay, sweep/load --replay: their own documents, well formed
        raise UsageError(f"{out}: cannot replay this result ({type(exc).__name__}: {_short(exc)})") from None
    atomic_write(out, page(runs))
    return out
