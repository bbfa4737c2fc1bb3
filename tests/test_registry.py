"""The runtime registry describes its runtimes, and nothing else asks a runtime by its name.

Every question about a runtime (needs a broker? shardable? network modes? deployable, and where
its nodes live? records a trace? warm repetitions?) is an attribute of its
:class:`~coordinator.runtimes.registry.Runtime` entry. An AST walk over every module of
``coordinator/`` and ``node/`` finds no comparison, membership test or ``match`` against a
runtime's name written as a literal outside the registry; a checker that is itself tested on
planted snippets. A new runtime is one entry plus its runner module: a test adds one and runs it.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.errors import UsageError
from coordinator.runtimes import containers, deployments
from coordinator.runtimes import registry as runtimes
from coordinator.runtimes.records import RunSettings
from node.switching.factory import SWITCHINGS

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "coordinator" / "runtimes" / "registry.py"
NAMES = frozenset(runtimes.RUNTIMES)


def _literals(node: ast.AST, aliases: dict[str, str]) -> set[str]:
    """The strings ``node`` spells out: a literal, a name bound to one, or a tuple/list/set
    (or ``set(...)``/``frozenset(...)``/``tuple(...)`` of one) of those."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name) and node.id in aliases:
        return {aliases[node.id]}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_literals(e, aliases) for e in node.elts))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("set", "frozenset", "tuple", "list")
        and len(node.args) == 1
    ):
        return _literals(node.args[0], aliases)
    return set()


def name_checks(source: str, names: frozenset[str] = NAMES) -> list[tuple[int, str]]:
    """(line, code) of every comparison (``==``, ``!=``, ``is``, ``in``, ``not in``) or ``match``
    case against a runtime name in ``source``, the names bound to such a literal included."""
    tree = ast.parse(source)
    aliases = {
        t.id: n.value.value
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and isinstance(n.value, ast.Constant)
        and n.value.value in names
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    found: list[tuple[int, str]] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            if any(_literals(x, aliases) & names for x in (n.left, *n.comparators)):
                found.append((n.lineno, ast.unparse(n)))
        elif isinstance(n, ast.match_case):
            values = [p.value for p in ast.walk(n.pattern) if isinstance(p, ast.MatchValue)]
            if any(_literals(v, aliases) & names for v in values):
                found.append((n.pattern.lineno, f"case {ast.unparse(n.pattern)}"))
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        'if runtime == "processes":\n    pass',
        'ok = settings.runtime != "in-process"',
        'ok = "model" == r.job.runtime',
        'ok = s.runtime in ("processes", "containers")',
        'ok = s.runtime not in {"engines"}',
        'ok = s.runtime in frozenset(["model"])',
        'ok = dep.runtime is "containers"',
        'match runtime:\n    case "containers":\n        pass',
        'match runtime:\n    case "x" | "engines":\n        pass',
        'MODEL = "model"\n\ndef f(rt: str) -> bool:\n    return rt == MODEL',
    ],
)
def test_the_checker_finds_a_planted_runtime_name_check(snippet: str) -> None:
    assert len(name_checks(snippet)) == 1, snippet


@pytest.mark.parametrize(
    "snippet",
    [
        'RunSettings(runtime="model")',  # naming a runtime to run on is no question about one
        'x = row["model"]',
        'ok = kind == "mesh"',
        "ok = runtimes.get(s.runtime).needs_broker",
        'match kind:\n    case "mesh":\n        pass',
    ],
)
def test_the_checker_passes_what_asks_no_runtime_by_name(snippet: str) -> None:
    assert name_checks(snippet) == []


def test_no_runtime_name_is_compared_outside_the_registry() -> None:
    offenders = []
    paths = sorted([*(ROOT / "coordinator").rglob("*.py"), *(ROOT / "node").rglob("*.py")])
    assert REGISTRY in paths and len(paths) > 100  # the walk sees the whole code
    assert {"in-process", "engines", "model", "processes", "containers"} <= NAMES
    for path in paths:
        if path == REGISTRY:
            continue
        found = name_checks(path.read_text())
        offenders += [f"{path.relative_to(ROOT)}:{line}: {code}" for line, code in found]
    why = "ask the registry (coordinator/runtimes/registry.py) instead"
    assert offenders == [], why + ":\n" + "\n".join(offenders)


# -- what the entries say ---------------------------------------------------------------------------
def test_the_reference_model_is_the_one_runtime_without_nodes() -> None:
    ref = runtimes.reference()
    assert not ref.emulates and ref.nodes is runtimes.Nodes.NONE
    assert [r.name for r in runtimes.RUNTIMES.values() if not r.emulates] == [ref.name]


def test_a_runtime_without_a_trace_names_one_with_the_same_records_that_keeps_it() -> None:
    for r in runtimes.RUNTIMES.values():
        missing = set(SWITCHINGS) - set(r.trace_switchings)
        if not missing:
            continue
        assert r.traced_by in runtimes.RUNTIMES, r.name
        keeper = runtimes.get(r.traced_by)
        assert missing <= set(keeper.trace_switchings), r.name
        s = RunSettings(runtime=r.name, switching=sorted(missing)[0], contention="shared", trace=True)
        assert f"use --runtime {keeper.name}" in (runtimes.problem(s) or ""), r.name
        assert keeper.problem(dataclasses.replace(s, runtime=keeper.name)) is None


def test_network_modes_come_from_the_runner_module() -> None:
    offered = [r for r in runtimes.RUNTIMES.values() if r.network_modes]
    assert offered and all(r.nodes is runtimes.Nodes.CONTAINERS for r in offered)
    assert all(r.network_modes == containers.NETWORK_MODES for r in offered)
    for r in runtimes.RUNTIMES.values():
        s = RunSettings(runtime=r.name, network="bridge")
        refused = runtimes.problem(s)
        assert (refused is None) == bool(r.networks), (r.name, refused)


def test_shards_only_where_the_registry_says() -> None:
    for r in runtimes.RUNTIMES.values():
        refused = runtimes.problem(RunSettings(runtime=r.name, shards=2))
        assert (refused is None) == r.shardable, (r.name, refused)
        assert refused is None or refused.startswith("--shards applies to the ")


def test_every_deployable_runtime_can_be_deployed_and_no_other() -> None:
    assert runtimes.deployable()
    for r in runtimes.RUNTIMES.values():
        if r.deployable:
            assert r.needs_broker and r.nodes in (runtimes.Nodes.PROCESSES, runtimes.Nodes.CONTAINERS)
            continue
        with pytest.raises(UsageError, match="cannot be deployed"):
            deployments.deploy(r.name, "never-made", None)  # type: ignore[arg-type]


def test_warm_repetitions_name_a_function_of_the_runner_module() -> None:
    for r in runtimes.RUNTIMES.values():
        if r.parts:
            assert callable(getattr(importlib.import_module(r.module), r.parts)), r.name
    # what is, today: node processes stay up between repetitions by their own runner; containers
    # on a deployment made for the condition (coordinator/runtimes/warm.py), which needs deploy
    assert [r.nodes for r in runtimes.RUNTIMES.values() if r.parts] == [runtimes.Nodes.PROCESSES]
    warm = [r for r in runtimes.RUNTIMES.values() if r.warm_by_deployment]
    assert [r.nodes for r in warm] == [runtimes.Nodes.CONTAINERS] and all(r.deployable for r in warm)


def test_a_new_runtime_is_one_registry_entry(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry added to the registry alone is offered by ``--runtime``, runs, names itself in the
    result and is refused where its entry says (its runner here: the engines runtime's)."""
    engines = runtimes.get("engines")
    new = dataclasses.replace(engines, name="new-loop", summary="a new runtime")
    monkeypatch.setitem(runtimes.RUNTIMES, new.name, new)
    argv = ["run", "--topology", "mesh:3x3", "--algorithm", "vh", "--source", "0,0", "--dests", "2,2 0,2"]
    assert main([*argv, "--runtime", "new-loop", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["runtime"] == "new-loop" and doc["run"]["complete"]
    assert main([*argv, "--runtime", "new-loop", "--clock", "free"]) == 2
    assert "the new-loop runtime runs the lockstep clock only" in capsys.readouterr().err
