"""Each setting's default and allowed values are declared once, and everything reads them there.

Structural, not textual: :func:`test_every_consumer_sees_a_changed_declaration` changes each
declaration in a copy of the sources and asks every consumer (settings, wire, engines, models,
reproductions, ``--help``, ``--print-config``) in a fresh interpreter; a copy planted anywhere
makes it fail (:func:`test_a_planted_copy_is_caught`). :func:`test_no_literal_stands_for_a_default`
scans the sources' syntax trees for a literal equal to a default, given under that setting's name.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.errors import UsageError
from node import defaults, protocol
from tests._env import need_broker

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in ("node", "coordinator") for p in (ROOT / d).rglob("*.py"))
PROBE = Path(__file__).with_name("settings_probe.py")

PORT_DECLARATION = 'ONE_PORT,\n        "--port-model"'
DECLARATIONS: list[tuple[str, str, str]] = [
    ("node/defaults.py", "FLITS: Final = 64", "FLITS: Final = 65"),
    ("node/defaults.py", "TS: Final = 33", "TS: Final = 34"),
    ("node/defaults.py", "BUFFER_FLITS: Final = 2", "BUFFER_FLITS: Final = 3"),
    ("node/defaults.py", "VCS: Final = 1", "VCS: Final = 2"),
    ("node/defaults.py", "VC_CLASSES: Final = VcClasses.SHARED", "VC_CLASSES: Final = VcClasses.SPLIT"),
    ("node/defaults.py", '{"dp": 2, "mp": 2, "cp": 4, "qg": 16}', '{"dp": 3, "mp": 5, "cp": 7, "qg": 17}'),
    ("node/defaults.py", "4 * size + 16", "4 * size + 17"),
    ("node/settings.py", PORT_DECLARATION, PORT_DECLARATION.replace("ONE", "ALL")),
    ("node/settings.py", '10_000,\n        "--max-steps"', '10_001,\n        "--max-steps"'),
    ("node/settings.py", 'Policy.BLOCK,\n        "--policy"', 'Policy.DROP,\n        "--policy"'),
    ("coordinator/runtimes/records.py", '600.0,\n        "--wall-budget"', '601.0,\n        "--wall-budget"'),
]
"""(file, a default's one declaration, the same declaring another value)."""
CHANGED: dict[str, Any] = {
    "flits": 65, "ts": 34, "buffer_flits": 3, "vcs": 2, "vc_classes": "split",
    "prep": {"dp": 3, "mp": 5, "cp": 7, "qg": 17}, "hop_limit": 4 * 16 + 17, "port_model": "all-port",
    "max_steps": 10_001, "policy": "drop", "wall_budget": 601.0,
}  # fmt: skip
"""What every consumer must then see (hop_limit: of a 4x4 mesh)."""


def _copy(tmp: Path, edits: list[tuple[str, str, str]]) -> Path:
    """The sources (node, coordinator) copied under ``tmp`` with ``edits`` made; each edit's old
    text must be there once (else the declaration moved: update the test)."""
    for package in ("node", "coordinator"):
        shutil.copytree(ROOT / package, tmp / package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for rel, old, new in edits:
        path = tmp / rel
        text = path.read_text()
        assert text.count(old) == 1, f"{rel}: {old!r} is not there once (it moved: update the test)"
        path.write_text(text.replace(old, new))
    return tmp


def _python(tree: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` in a fresh interpreter that imports the sources of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, *argv],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _probe(tree: Path) -> subprocess.CompletedProcess[str]:
    return _python(tree, str(PROBE), json.dumps(CHANGED))


def test_every_consumer_sees_a_changed_declaration(tmp_path: Path) -> None:
    """Change each default where it is declared, and the settings, the wire, the engines, the
    models, the reproductions, ``--help`` and ``--print-config`` all say the new value."""
    got = _probe(_copy(tmp_path, DECLARATIONS))
    assert got.returncode == 0, got.stdout + got.stderr


WORMHOLE_INIT = "flits, ts, buffer_flits = settings."
PLANTS: dict[str, list[tuple[str, str, str]]] = {
    "FLITS_DEFAULT = 64 in the wormhole engine": [
        ("node/switching/wormhole.py", WORMHOLE_INIT + "flits,", "flits, ts, buffer_flits = FLITS_DEFAULT,"),
        ("node/switching/wormhole.py", "\nclass WormholeEngine:",
         "\nFLITS_DEFAULT = 64\n\n\nclass WormholeEngine:"),
    ],
    "dict(vcs=(1), ts=33.0) in a reproduction": [
        ("coordinator/reproduce/_tasnem_wormhole.py", "max_steps=50_000)",
         "max_steps=50_000, **dict(vcs=(1), ts=33.0))"),
    ],
    "MY_VCS = 1 as the engines' VCs": [
        ("node/switching/factory.py", "LockstepWormhole(topology, here, registry, s,",
         "LockstepWormhole(topology, here, registry, replace(s, vcs=MY_VCS),"),
        ("node/switching/factory.py", "\nSTALL_STEPS: Final = 2", "\nMY_VCS = 1\nSTALL_STEPS: Final = 2"),
        ("node/switching/factory.py", "from typing import Final",
         "from dataclasses import replace\nfrom typing import Final"),
    ],
    "a default of its own in the wormhole model": [
        ("coordinator/runtimes/wormhole_model.py", WORMHOLE_INIT + "flits,", "flits, ts, buffer_flits = 64,"),
    ],
    "a help line written by hand": [
        ("coordinator/cli/options.py", "help=meta.describe() +",
         "help=meta.describe().replace('(1 to', '(default: 64) (1 to') +"),
    ],
}  # fmt: skip
"""Copies of a default planted in the copied sources (each is one that was once in the code)."""


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_copy_is_caught(plant: str, tmp_path: Path) -> None:
    """A copy of a default written anywhere a consumer reads it: the probe names the consumer."""
    got = _probe(_copy(tmp_path, DECLARATIONS + PLANTS[plant]))
    assert got.returncode == 1 and got.stdout.strip(), got.stdout + got.stderr


ROUNDS = [
    ("node/settings.py", "\n    @property\n    def one_port(self)",
     '\n    rounds: int = setting(1, "--rounds", "allocator iterations per cycle", low=1, high=16)\n'
     "\n    @property\n    def one_port(self)"),
    ("node/switching/factory.py", "    why = _checked(s, topology.is_torus)\n",
     "    why = _checked(s, topology.is_torus)\n"
     "    s = s if s.rounds == 4 else replace(s, hop_limit=1)\n"),
    ("node/switching/factory.py", "from typing import Final",
     "from dataclasses import replace\nfrom typing import Final"),
    ("coordinator/runtimes/model.py", "    if settings.wormhole:\n",
     "    settings = settings if settings.rounds == 4 else replace(settings, hop_limit=1)\n"
     "    if settings.wormhole:\n"),
    ("coordinator/runtimes/model.py", "from collections import deque",
     "from collections import deque\nfrom dataclasses import replace"),
]  # fmt: skip
"""A new node setting, added by one field; its use: a node's engine and the model drop every packet
past its first hop unless it is 4."""
RUN = "import sys; from coordinator.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("runtime", ["in-process", "engines", "model", "processes"])
def test_a_setting_added_in_one_field_reaches_the_nodes_of_every_runtime(
    runtime: str, tmp_path: Path
) -> None:
    """``--rounds`` comes with its field, and its value reaches every node's engine (or the
    model): a run given 4 completes; given 3, it does not (its destinations are two hops away)."""
    if runtime == "processes":
        need_broker()
    tree = _copy(tmp_path, ROUNDS)
    argv = ["-c", RUN, "run", "--topology", "mesh:3x3", "--algorithm", "vh", "--source", "0,0",
            "--dests", "1,1 2,2", "--runtime", runtime, "--wall-budget", "60", "--json"]  # fmt: skip
    good = _python(tree, *argv, "--rounds", "4")
    assert good.returncode == 0 and json.loads(good.stdout)["run"]["complete"], good.stdout + good.stderr
    bad = _python(tree, *argv, "--rounds", "3")
    assert bad.returncode == 1 and not json.loads(bad.stdout)["run"]["complete"], bad.stdout + bad.stderr


# -- the syntax-tree scan -----------------------------------------------------------------------------
SCANNED = (
    "flits",
    "ts",
    "buffer_flits",
    "vcs",
    "vc_classes",
    "port_model",
    "max_steps",
    "wall_budget",
    "policy",
    "flit_bytes",
    "shaper_approach_us",
)
"""The settings whose default no literal may stand for (the others' defaults are common words and
numbers that a reproduction chooses for itself: isolated contention, the lockstep clock, seed 1)."""
ALLOWED = {
    ("coordinator/experiments/bench.py", "flits"): "issue #36's speed workload is L = 64 by definition",
}
"""(file, setting) -> why a literal equal to the default there is the file's own value."""


def _defaults() -> dict[str, Any]:
    from coordinator.runtimes.records import RunSettings

    return {f.name: f.default for f in fields(RunSettings) if f.name in SCANNED}


def _same(node: ast.AST, default: Any) -> bool:
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool) or node.value is None:
        return False
    if isinstance(default, str):
        return isinstance(node.value, str) and node.value == str(default)
    return isinstance(node.value, int | float) and node.value == default


def _named(name: str, setting: str) -> bool:
    """``name`` holds ``setting``'s words (``FLITS_DEFAULT``, ``MY_VCS``, ``DEFAULT_TS``: flits, vcs, ts)."""
    words, want = name.upper().split("_"), setting.upper().split("_")
    return any(words[i : i + len(want)] == want for i in range(len(words) - len(want) + 1))


def _given(tree: ast.AST) -> Iterator[tuple[str, ast.AST, bool]]:
    """(name, value, exact) for each value given under a name: keyword arguments, parameter
    defaults, dict keys (exact), and assignments to names (holding the setting's words)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg:
            yield node.arg, node.value, True
        elif isinstance(node, ast.arguments):
            args = node.posonlyargs + node.args
            positional = zip(args[len(args) - len(node.defaults) :], node.defaults, strict=True)
            yield from ((a.arg, d, True) for a, d in positional)
            keywords = zip(node.kwonlyargs, node.kw_defaults, strict=True)
            yield from ((a.arg, d, True) for a, d in keywords if d is not None)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    yield k.value, v, True
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    yield target.id, node.value, False
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    yield from (
                        (t.id, v, False)
                        for t, v in zip(target.elts, node.value.elts, strict=False)
                        if isinstance(t, ast.Name)
                    )


def literal_defaults(source: str, where: str = "<source>") -> list[str]:
    """Each literal in ``source`` equal to a scanned setting's default and given under its name."""
    found = []
    for name, value, exact in _given(ast.parse(source)):
        for setting, default in _defaults().items():
            by_name = name.lower() == setting if exact or isinstance(default, str) else _named(name, setting)
            if by_name and _same(value, default) and (where, setting) not in ALLOWED:
                found.append(
                    f"{where}:{getattr(value, 'lineno', 0)}: {name} = {ast.unparse(value)} ({setting})"
                )
    return found


def test_no_literal_stands_for_a_default() -> None:
    """Outside the one declaration, no literal equal to a default is given under the setting's name."""
    found = [
        hit
        for path in SOURCES
        if path.relative_to(ROOT).as_posix() != "node/defaults.py"
        for hit in literal_defaults(path.read_text(), path.relative_to(ROOT).as_posix())
    ]
    assert found == []
    assert literal_defaults((ROOT / "node/defaults.py").read_text()), (
        "the scan no longer sees the declarations"
    )


@pytest.mark.parametrize(
    "planted",
    [
        "FLITS_DEFAULT = 64",
        "MY_VCS = 1",
        "x = dict(vcs=(1), ts=33.0)",
        "def engine(topology, flits: int = 64) -> None: ...",
        "WORMHOLE = RunSettings(vc_classes='shared')",
        "DEFAULT_TS, L = 33, 64",
        "s = {'max_steps': 10_000}",
        "def run(port_model='one-port'): ...",
    ],
)
def test_the_scan_catches_a_planted_copy(planted: str) -> None:
    assert literal_defaults(planted), planted


def test_the_scan_leaves_other_values_alone() -> None:
    assert literal_defaults("FLITS = 32\nx = dict(vcs=2, ts=0)\nBUFFER_FLITS_PER_PORT = 8\nn = 64\n") == []


# -- the wire form --------------------------------------------------------------------------------------
def _field_values(f: Any, meta: Any, hint: Any) -> st.SearchStrategy[Any]:
    """Valid values of one setting, from its declaration."""
    from typing import get_args

    base = next((t for t in (get_args(hint) or (hint,)) if t is not type(None)), hint)
    if meta.choices:
        values: st.SearchStrategy[Any] = st.sampled_from(meta.choices)
    elif base is bool:
        values = st.booleans()
    elif base is int:
        values = st.integers(int(meta.low if meta.low is not None else -(2**63)), int(meta.high or 2**63 - 1))
    elif base is float:
        values = st.floats(meta.low, meta.high, allow_nan=False, allow_infinity=False)
    else:
        values = st.text(max_size=20)
    return st.none() | values if type(None) in get_args(hint) else values


@st.composite
def run_settings(draw: st.DrawFn) -> Any:
    """Random settings, each field valid as its declaration says; a random link model."""
    from typing import get_type_hints

    from coordinator.runtimes.records import RunSettings
    from node.settings import settings_of
    from node.transport.linkmodel import Jitter, LinkModel, LinkSpec

    hints = get_type_hints(RunSettings)
    kw = {f.name: draw(_field_values(f, meta, hints[f.name])) for f, meta in settings_of(RunSettings)}
    seconds = st.floats(0, 10, allow_nan=False)
    spec = st.builds(
        LinkSpec, seconds, st.none() | st.builds(Jitter, st.sampled_from(["uniform", "normal"]), seconds),
        st.none() | st.floats(1, 1e12),
    )  # fmt: skip
    links = st.lists(st.tuples(st.tuples(st.integers(0, 9), st.integers(0, 9)), spec), max_size=2)
    model = st.none() | st.builds(LinkModel, spec, links.map(tuple), st.just(()), st.integers(0, 2**32))
    return RunSettings(**kw, run_dir=draw(st.none() | st.text(max_size=10)), link_model=draw(model))


@given(run_settings())
def test_the_wire_form_of_any_settings_round_trips(s: Any) -> None:
    """Through JSON (a coordinator container's MESHCAST_SETTINGS) and through msgpack (a node's
    ``assign``), the settings come back equal, checked by the decoder the nodes use."""
    from coordinator.runtimes.records import RunSettings
    from node.settings import NodeSettings

    assert RunSettings.from_wire(json.loads(json.dumps(s.to_wire()))) == s
    assert RunSettings.from_wire(s.to_wire(changed=True)) == s
    node = {f.name: getattr(s, f.name) for f in fields(NodeSettings)}
    assign = protocol.Assign(run="r", topology="mesh:4x4", node=(0, 0), **node)
    back = protocol.decode(protocol.encode(assign))
    assert back == assign and {k: getattr(back, k) for k in node} == node


def test_the_wire_decoder_refuses_what_a_field_refuses() -> None:
    from coordinator.runtimes.records import RunSettings

    bads = [({"vcs": 0}, "settings.vcs"), ({"port_model": "some-port"}, "settings.port_model"),
            ({"wall_budget": float("nan")}, "settings.wall_budget"), ({"rounds": 2}, "unknown setting"),
            ({"link_model": {"default": {"speed": 1}}}, "settings.link_model")]  # fmt: skip
    for bad, says in bads:
        with pytest.raises(protocol.ProtocolError, match=re.escape(says)):
            RunSettings.from_wire(bad)


def test_the_defaults_are_used() -> None:
    from coordinator.runtimes.records import RunSettings
    from node.topology import Topology

    assert RunSettings().buffer_flits == defaults.BUFFER_FLITS
    assert protocol.Assign(run="r", topology="mesh:2x2", node=(0, 0)).buffer_flits == defaults.BUFFER_FLITS
    assert defaults.hop_limit(Topology.parse("mesh:4x4").size) == 80


def _parser(settings: object = None) -> argparse.ArgumentParser:
    from coordinator.cli.options import add_run_options

    p = argparse.ArgumentParser(exit_on_error=False)
    if settings is None:
        add_run_options(p)
    else:
        add_run_options(p, settings=settings)
    return p


def test_every_option_of_a_setting_comes_from_its_field() -> None:
    """Flag, default, choices and range: what the field says is what the command line offers."""
    from coordinator.cli.options import validate_settings
    from coordinator.runtimes.records import RunSettings
    from node.settings import settings_of

    actions = {a.dest: a for a in _parser()._actions}
    flagged = [(f, meta) for f, meta in settings_of(RunSettings) if meta.flag is not None]
    assert len(flagged) >= 15
    for f, meta in flagged:
        action = actions[f.name]
        negative = [f"--no-{str(meta.flag)[2:]}"] if isinstance(f.default, bool) else []
        assert action.option_strings == [meta.flag, *negative]  # a boolean: --x and --no-x
        assert action.default == (None if meta.unset else f.default), f.name
        assert action.choices == meta.choices, f.name
        if meta.low is not None and meta.high is not None:
            with pytest.raises(UsageError, match=re.escape(str(meta.flag))):
                too_big: Any = (float if isinstance(f.default, float) else int)(meta.high) + 1
                validate_settings(replace(RunSettings(), **{f.name: too_big}))


def test_a_new_setting_is_one_field() -> None:
    """A field with a flag and a range is at once an option, with its default and its range check."""
    from coordinator.cli.options import validate_settings
    from coordinator.runtimes.records import RunSettings
    from node.settings import setting

    @dataclass(frozen=True)
    class WithRounds(RunSettings):  # the slots of the base stay; this adds one field
        rounds: int = setting(1, "--rounds", "allocator iterations per cycle", low=1, high=16, unit="rounds")

    p = _parser(WithRounds)
    assert p.parse_args([]).rounds == 1 and p.parse_args(["--rounds", "4"]).rounds == 4
    assert "allocator iterations per cycle (1 to 16 rounds)" in " ".join(p.format_help().split())
    assert validate_settings(WithRounds(rounds=16)) == WithRounds(rounds=16)
    with pytest.raises(UsageError, match=r"--rounds must be at most 16, got 17"):
        validate_settings(WithRounds(rounds=17))


def test_a_node_setting_reaches_the_wire_checked_from_its_field() -> None:
    """Every node setting is an ``assign`` field the session fills in by name, and the node's
    decoder refuses what the field's range and choices refuse, naming the field."""
    from dataclasses import fields

    from coordinator.runtimes.records import RunSettings
    from coordinator.runtimes.session import ASSIGNED
    from node.settings import NodeSettings, settings_of

    names = [f.name for f in fields(NodeSettings)]
    assert list(ASSIGNED) == names and len(names) >= 15
    assert set(names) <= {f.name for f in fields(RunSettings)}
    wire = protocol.Assign(run="r", topology="mesh:2x2", node=(0, 0)).to_wire()
    assert protocol.decode(protocol.encode(protocol.Assign.from_wire(wire))).to_wire() == wire
    for f, meta in settings_of(NodeSettings):
        bad: list[Any] = ["nonsense"] if meta.choices else []
        if meta.low is not None:
            bad.append(int(meta.low) - 1)
        if meta.high is not None:
            bad.append(int(meta.high) + 1)
        for value in bad:
            with pytest.raises(protocol.ProtocolError, match=rf"assign\.{f.name}: expected"):
                protocol.Assign.from_wire(wire | {f.name: value})
