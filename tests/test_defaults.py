"""Each shared default is written once (node/defaults.py); a copy anywhere else fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from node import defaults

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in ("node", "coordinator") for p in (ROOT / d).rglob("*.py"))

PATTERNS = {
    "the hop limit 4·size + 16": re.compile(r"4\s*\*\s*[\w.]*size\s*\+\s*16"),
    "seed 004's preparation table": re.compile(r"\{\s*\"dp\"\s*:\s*2\s*,\s*\"mp\"\s*:\s*2"),
    "the lockstep syncs": re.compile(r"\(\s*\"alpha\"\s*,\s*\"barrier\"\s*\)"),
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
    assert protocol.Assign("r", "mesh:2x2", (0, 0), "one-port", "isolated", "lockstep", 10).buffer_flits == 2
    assert defaults.hop_limit(Topology.parse("mesh:4x4").size) == 80
