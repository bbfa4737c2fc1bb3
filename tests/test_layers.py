"""The house plan holds: no import cycle among node/ and coordinator/ modules, counting the
modules a module loads by name (importlib), and no argparse/rich outside the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def _source(module: str) -> str:
    """A module's Python source, found by its name (an extension from ``make compiled`` may shadow it)."""
    base = ROOT.joinpath(*module.split("."))
    return (base / "__init__.py" if base.is_dir() else base.with_suffix(".py")).read_text()


def _graph() -> dict[str, set[str]]:
    """Static imports (grimp, function-level ones included) plus imports by name."""
    g = grimp.build_graph("coordinator", "node")
    edges = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    for m in g.modules:
        src = _source(m)
        if "import_module" not in src:
            continue
        names = {n.value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant)}
        edges[m] |= {str(n) for n in names if n in g.modules and n != m}
        if "__path__" in src or "iter_modules" in src:  # a package loading all its modules
            edges[m] |= {c for c in g.find_children(m)}
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_counting_modules_loaded_by_name() -> None:
    edges = _graph()
    # the by-name loads are seen: the routing registry loads every family, the runtime registry every runner
    assert "node.routing.herley" in edges["node.routing"]
    assert "coordinator.runtimes.processes" in edges["coordinator.runtimes.registry"]
    assert _cycles(edges) == []


def test_argparse_and_rich_live_only_in_the_cli() -> None:
    offenders = []
    for path in sorted((ROOT / "coordinator").rglob("*.py")):
        if "cli" in path.relative_to(ROOT / "coordinator").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            mods = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [
                f"{path.relative_to(ROOT)}: {m}" for m in mods if m.split(".")[0] in ("argparse", "rich")
            ]
    assert offenders == []


def test_no_two_coordinator_modules_share_a_name() -> None:
    """The coordinator's modules are named for what they hold, each name once (CLI commands end
    in ``_command``); node/routing's family modules may share a paper's name with its reproduction."""
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / "coordinator").rglob("*.py")):
        if path.name != "__init__.py":
            names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}


def test_no_module_holds_more_than_a_thousand_lines() -> None:
    """A module over 1,000 lines holds more than its name says (issue 43): split it by what it holds."""
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("coordinator", "node")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > 1000
    }
    assert long == {}
