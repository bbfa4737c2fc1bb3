"""A figure the docs quote in more than one place is the same in each: the places are listed here
with the source they quote (issue: the reproductions index once gave a run's wall time its own
report no longer did)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.reproduce import reproductions

DOCS = Path(__file__).resolve().parent.parent / "docs"
NUMBERS = {"five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}

QUOTED = [
    # (page, pattern of the quote, source page, pattern of the source): group 1 of each
    (
        "reproductions/index.md",
        r"took (\d[\d,.]*) s wall with two\s+workers",
        "reproductions/load/report.md",
        r"wall time (\d[\d,.]*?)(?:\.\d)? s with 2 worker",
    ),
]


def _find(page: str, pattern: str) -> str:
    m = re.search(pattern, (DOCS / page).read_text())
    assert m is not None, f"{page}: no match for {pattern!r}"
    return m.group(1).replace(",", "")


@pytest.mark.parametrize(("page", "pattern", "source", "source_pattern"), QUOTED)
def test_a_quoted_figure_equals_its_source(page: str, pattern: str, source: str, source_pattern: str) -> None:
    assert _find(page, pattern) == _find(source, source_pattern), f"{page} quotes {source} wrongly"


def test_the_index_counts_the_reproductions() -> None:
    word = _find("reproductions/index.md", r"reproduce --help\s+# the (\w+), one line each")
    assert NUMBERS[word] == len(reproductions())


def test_the_replay_guides_commands_make_its_screenshots() -> None:
    """The replay guide's runs are the ones its screenshots were taken of (tests/replay_screenshots.py):
    the same topology, algorithm, source, destinations and seed."""
    from tests.replay_screenshots import SHOTS

    text = " ".join((DOCS / "guide" / "replay.md").read_text().replace("\\\n", " ").split())
    for name, (args, _) in SHOTS.items():
        pairs = [f"{args[i]} {args[i + 1]}" for i in range(0, len(args), 2)]
        assert all(p in text for p in pairs), f"{name}: {[p for p in pairs if p not in text]}"
