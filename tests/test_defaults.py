"""Each shared default is written once (node/defaults.py); a copy anywhere else fails here."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from coordinator.errors import UsageError
from node import defaults, protocol

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in ("node", "coordinator") for p in (ROOT / d).rglob("*.py"))

PATTERNS = {
    "the hop limit 4·size + 16": re.compile(r"4\s*\*\s*[\w.]*size\s*\+\s*16"),
    "seed 004's preparation table": re.compile(r"\{\s*\"dp\"\s*:\s*2\s*,\s*\"mp\"\s*:\s*2"),
    "the lockstep syncs": re.compile(r"\(\s*\"alpha\"\s*,\s*\"barrier\"\s*\)"),
    "the message length L in flits": re.compile(r"(?i)\bflits\s*:[^=]*=\s*(?:field\(.*default=)?64\b"),
    "the start-up time Ts": re.compile(r"(?i)\bts\s*:[^=]*=\s*(?:field\(.*default=)?33(?:\.0)?\b"),
    "one virtual channel": re.compile(r"(?i)\bvcs\s*(?::\s*\w+\s*)?=\s*(?:field\(.*default=)?1\b"),
    "shared virtual channels": re.compile(
        r"(?i)\bvc_classes\s*(?::\s*\w+\s*)?=\s*(?:field\(.*default=)?\"shared\""
    ),
    "the wormhole buffer depth": re.compile(
        r"(?i)buffer_flits\s*(?::\s*\w+\s*)?=\s*(?:field\(.*default=)?2\b"
    ),
}


@pytest.mark.parametrize("what", sorted(PATTERNS))
def test_each_default_is_written_once(what: str) -> None:
    pattern = PATTERNS[what]
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in SOURCES
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert [f for f in found if not f.startswith("node/defaults.py")] == [], f"{what} written again: {found}"
    assert found, f"{what}: the pattern no longer finds node/defaults.py's own (update the test)"


def test_the_defaults_are_used() -> None:
    from coordinator.runtimes.records import RunSettings
    from node import protocol, wormhole
    from node.topology import Topology

    assert RunSettings().buffer_flits == defaults.BUFFER_FLITS == wormhole.DEFAULT_BUFFER_FLITS
    assert protocol.Assign(run="r", topology="mesh:2x2", node=(0, 0)).buffer_flits == 2
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
        assert action.option_strings == [meta.flag]
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
        if isinstance(f.default, int) and not isinstance(f.default, bool) or meta.low is not None:
            bad += [x for x in (meta.low - 1 if meta.low is not None else None,
                                int(meta.high) + 1 if meta.high is not None else None) if x is not None]  # fmt: skip
        for value in bad:
            with pytest.raises(protocol.ProtocolError, match=rf"assign\.{f.name}: expected"):
                protocol.Assign.from_wire(wire | {f.name: value})
