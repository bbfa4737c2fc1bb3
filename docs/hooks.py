"""Pages of the docs site generated from the code at build time, so they never go stale.

mkdocs runs this file as a hook (``hooks:`` in ``mkdocs.yml``); its ``on_files`` adds three
generated pages to the site:

- ``reference/cli.md``: every command and option of ``coordinator.cli.build_parser()``, with its
  help and default;
- ``reference/algorithms.md``: every built-in routing rule of the registry (``node.routing``),
  its family, topologies, parameters and source;
- ``measurements/index.md``: one table per bench run, read from the committed
  ``benchmarks/*.json`` files and described (date, machine, command) by
  ``docs/measurements/runs.toml``.

``python docs/hooks.py DIR`` writes the same pages into DIR, to read them without building.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "measurements" / "runs.toml"

SEED_PAPERS = {
    "seed 000": "Malani",
    "seed 001": "Abd El-Baky (TASNEM)",
    "seed 002": "Herley, Pietracaprina, Pucci",
    "seed 003": "Chen, Chang, Sheu",
    "seed 004": "Al-Dubai, Ould-Khaoua, Mackenzie",
}
"""The seed papers, as the code's help and sources name them (see algorithms.md for titles)."""


def _cell(text: object) -> str:
    """``text`` safe inside a Markdown table cell: one line, pipes, asterisks and angles escaped."""
    s = " ".join(str(text).split())
    for ch in ("\\", "|", "*", "_", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    # angles as entities: Python-Markdown keeps the backslash of "\<" ("0 \< T" on the page)
    return s.replace("<", "&lt;").replace(">", "&gt;")


# --- the command line -------------------------------------------------------------------------


def _default(action: argparse.Action) -> str:
    d = action.default
    if d in (None, False, argparse.SUPPRESS, []) or not action.option_strings:
        return ""
    if isinstance(action, argparse._HelpAction):
        return ""
    return f"`{d}`"


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes = action.nargs != 0
    meta = ""
    if takes:
        if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
            meta = " {" + ",".join(str(c) for c in action.choices) + "}"
        elif action.metavar is not None:
            meta = f" {action.metavar}"
        else:
            meta = f" {action.dest.upper()}"
    return ", ".join(f"`{o}{meta}`" for o in action.option_strings)


def _commands(
    parser: argparse.ArgumentParser, prog: str
) -> Iterable[tuple[str, str, argparse.ArgumentParser]]:
    """(full name, one-line help, parser) of every command below ``parser``, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: _help(a, prog) for a in action._choices_actions}
            for name, sub in action.choices.items():
                full = f"{prog} {name}"
                yield full, helps.get(name, ""), sub
                yield from _commands(sub, full)


def _help(action: argparse.Action, prog: str) -> str:
    """An action's help as argparse prints it (``%(default)s`` filled in, ``%%`` a percent sign)."""
    text = action.help or ""
    try:
        return text % {**vars(action), "prog": prog}
    except (KeyError, TypeError, ValueError):
        return text


def cli_markdown() -> str:
    """The command-line reference, its usage lines wrapped at 100 columns on every machine."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return _cli_markdown()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _cli_markdown() -> str:
    from coordinator.cli import build_parser
    from coordinator.cli.config import COMMANDS as CONFIG_COMMANDS
    from coordinator.cli.config import LEFT_OUT

    parser = build_parser()
    out = [
        "# Command-line reference",
        "",
        "Generated from the argparse parsers (`coordinator.cli.build_parser()`) when the site is "
        "built, so it is the command line of this checkout. `meshcast COMMAND --help` prints the "
        "same. Every bad argument ends in one line naming the cause and exit status 2; an "
        "incomplete run exits 1. An empty default means the option is off, or that its value "
        "follows from other options (its help says how).",
        "",
        f"**Experiment files.** `{'`, `'.join(CONFIG_COMMANDS)}` take `--config FILE.toml`: every "
        "option below is a key of the file's `[options]` table under its long name without the "
        'dashes (`--link-delay 1ms` is `link-delay = "1ms"`), and options on the command line '
        "override the file. Not kept in a file: `--"
        + "`, `--".join(sorted(n.replace("_", "-") for n in LEFT_OUT if n not in ("command", "help")))
        + "`. See [Experiment files](../guide/experiment-files.md).",
        "",
        "The help texts name the seed papers by number: "
        + "; ".join(f"{s}: {a}" for s, a in SEED_PAPERS.items())
        + " ([algorithms and their sources](algorithms.md)).",
        "",
        "## meshcast",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    commands = list(_commands(parser, "meshcast"))
    for full, help_, _ in commands:
        anchor = full.replace(" ", "-")
        out.append(f"| [`{full.removeprefix('meshcast ')}`](#{anchor}) | {_cell(help_)} |")
    for full, help_, sub in commands:
        anchor = full.replace(" ", "-")
        out += ["", f"## {full} {{#{anchor}}}", ""]
        if help_:
            out += [_cell(help_).replace("\\", "") + ".", ""] if not help_.endswith(".") else [help_, ""]
        out += ["```text", sub.format_usage().strip(), "```", ""]
        if sub.description:
            out += ["```text", sub.description.strip(), "```", ""]
        for group in sub._action_groups:
            actions = [
                a
                for a in group._group_actions
                if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
            ]
            if not actions:
                continue
            title = group.title or "options"
            if title not in ("options", "optional arguments", "positional arguments"):
                out += [f"**{_cell(title)}**", ""]
                if group.description:
                    out += [_cell(group.description), ""]
            out += ["| option | default | help |", "|---|---|---|"]
            for a in actions:
                if isinstance(a, argparse._SubParsersAction):
                    names = ", ".join(f"`{c}`" for c in a.choices)
                    out.append(f"| `{a.metavar or a.dest}` | | one of {names} (each below) |")
                    continue
                out.append(f"| {_names(a)} | {_default(a)} | {_cell(_help(a, sub.prog))} |")
            out.append("")
    return "\n".join(out) + "\n"


# --- the algorithms ---------------------------------------------------------------------------


def algorithms_markdown() -> str:
    from node.routing import registry

    built_in = [a for a in registry if getattr(a.prepare, "__module__", "").startswith("node.routing")]
    built_in.sort(key=lambda a: (a.family, a.name))
    out = [
        "# Algorithms and their sources",
        "",
        "Generated from the routing registry (`node/routing/`) when the site is built: the rules "
        "`meshcast algorithms` lists, less any installed plug-in. The source column is the rule's "
        "own declaration; the seed papers it names are:",
        "",
        "| seed | paper |",
        "|---|---|",
        "| seed 000 | Malani, *Efficient Multicast Algorithms for Mesh and Torus Networks* (thesis) |",
        "| seed 001 | Abd El-Baky, *A tree-based algorithm for multicasting in 2D torus networks* (TASNEM) |",
        "| seed 002 | Herley, Pietracaprina and Pucci, *Store-and-Forward Multicast Routing on the Mesh* |",
        "| seed 003 | Chen, Chang and Sheu, *Efficient path-based multicast in wormhole-routed mesh "
        "networks* |",
        "| seed 004 | Al-Dubai, Ould-Khaoua and Mackenzie, *Trade-Offs between Latency, Complexity, "
        "and Load Balancing with Multicast Algorithms* |",
        "",
        "Lin, McKinley and Ni's dual-path and multipath rules are used as seeds 003 and 004 use "
        "them. Each module's docstring says how the rule reads its paper and where it is a "
        "reconstruction.",
        "",
        "| algorithm | family | topologies | parameters | source | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for a in built_in:
        params = "<br>".join(
            f"`{p.name}`={p.default!r}: {_cell(p.allowed())}; {_cell(p.help)}" for p in a.params
        )
        out.append(
            f"| `{a.name}` | {a.family} | {', '.join(a.kinds)} | {params or '-'} | "
            f"{_cell(a.source)} | {_cell(a.summary)} |"
        )
    return "\n".join(out) + "\n" + _ALGORITHMS_TAIL


_ALGORITHMS_TAIL = """
## A rule is two pure functions

A rule lives in `node/routing/<family>.py` (`node/routing/base.py` defines the interface); it
imports no trio, sockets or clocks:

```
prepare(topology, source, destinations, params) -> [(port, header), ...]   # at the source
forward(topology, here, header) -> Forward(deliver, [(port, header), ...], startup, carried)
```

The order of the sends is the one-port priority. `startup` marks a new message-passing step
(counted per delivery for the wormhole timing model); `carried` says how many of the first sends
continue the incoming message rather than start a new one (a leader passing the level-1 worm on
while starting its group's paths).

The tree rules (Malani's DIAG, DIST, PAIR, MIN, VH on a torus, Herley's `tree`) compute the
whole tree at the source, and each packet carries its branch's subtree as one `bytes` record (a
head byte, then a port and a length per branch, then the branches: `node/routing/tree.py`). A
node passes each branch on as a slice, so a hop costs msgpack a few objects whatever the
subtree's size; `tree_lists(header)` gives the readable form `[deliver, [[port, subtree], ...]]`,
which `forward` also accepts.

Every worked example of the seed papers is a test, run through the emulation and through the
reference model (`tests/test_examples.py`); where a paper's number is not reproduced by a
faithful reading, the test asserts ours and the docstring gives the paper's. Third-party rules
plug in through the entry-point group `meshcast.algorithms`: see [Plug-ins](../guide/plugins.md).
"""


# --- measurements -----------------------------------------------------------------------------


def _num(v: Any, digits: int = 0) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and digits:
        return f"{v:,.{digits}f}"
    return f"{round(v):,}" if isinstance(v, (int, float)) else str(v)


def _bench_table(doc: dict[str, Any]) -> list[str]:
    rows = doc.get("rows", [])
    out = [
        "| topology | runtime | clock | switching | workload | hops/s | steps/s | relay hops/s | ratio "
        "| start + run s | peak RSS MB |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        wormhole = r.get("switching") == "wormhole"
        rate = r.get("flit_hops_per_s") if wormhole else r.get("packet_hops_per_s")
        unit = " flit" if wormhole else ""
        shards = f" ×{r['shards']} shards" if r.get("shards", 1) not in (1, None) else ""
        runs = f", median of {r['runs']}" if r.get("runs", 1) not in (1, None) else ""
        runs += f", best of {r['best_of']}" if r.get("best_of") else ""
        workload = f"{r.get('multicasts', '?')} × {r.get('destinations', '?')}{runs}"
        steps = "—" if r.get("clock") == "free" else _num(r.get("steps_per_s"), 1)
        relay = r.get("relay_hops_per_s", doc.get("relay_hops_per_s"))
        ratio = r.get("ratio")
        out.append(
            f"| {r.get('topology')} | {r.get('runtime')}{shards} | {r.get('clock')} | "
            f"{'wormhole' if wormhole else 'S&F'} | {workload} | {_num(rate)}{unit} | {steps} | "
            f"{_num(relay)} | {'—' if ratio is None else f'{ratio:.3f}'} | "
            f"{r.get('start_s', 0):.1f} + {r.get('run_s', 0):.1f} | {_num(r.get('peak_rss_mb'))} |"
        )
    return out


def measurements_markdown() -> str:
    meta = tomllib.loads(RUNS.read_text())
    out = [meta["intro"].strip(), ""]
    runs = meta["run"]  # newest first, as runs.toml lists them
    described = {r["file"] for r in runs}
    committed = {p.name for p in (ROOT / "benchmarks").glob("*.json")}
    if committed != described:
        raise ValueError(
            f"docs/measurements/runs.toml must describe exactly the bench JSON files: "
            f"not described {sorted(committed - described)}, missing {sorted(described - committed)}"
        )
    dates = list(dict.fromkeys(r["date"] for r in runs))
    for date in dates:
        out += [f"## {date}", ""]
        for run in (r for r in runs if r["date"] == date):
            doc = json.loads((ROOT / "benchmarks" / run["file"]).read_text())
            build = doc.get("build", "plain")  # older files predate the compiled build
            when = f"{run['time']} UTC" if ":" in run["time"] else f"in the {run['time']}"
            out += [
                f"### {date} {when}, {build} build",
                "",
                f"- **Machine:** {meta['machines'][run.get('machine', 'dev')]}",
                f"- **Command:** `{run['command']}`",
                f"- **JSON:** `benchmarks/{run['file']}` (relay chain, median of the rows': "
                f"{_num(doc.get('relay_hops_per_s'))} hops/s)",
            ]
            if run.get("note"):
                out.append(f"- **Note:** {run['note'].strip()}")
            out += ["", *_bench_table(doc), ""]
    return "\n".join(out) + "\n"


# --- the hook -------------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_markdown,
    "reference/algorithms.md": algorithms_markdown,
    "measurements/index.md": measurements_markdown,
}


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python docs/hooks.py DIR   (writes the generated pages into DIR)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    for uri, make in PAGES.items():
        path = Path(argv[0]) / uri
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make())
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
