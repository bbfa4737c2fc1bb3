"""Counts in words: "1 multicast", "2 multicasts", never "1 multicasts" or "multicast(s)"."""

from __future__ import annotations

import pytest

from coordinator.analysis.completion import completion
from coordinator.cli import main
from coordinator.wording import plural
from tests.helpers import multicast_record


@pytest.mark.parametrize(
    ("n", "noun", "nouns", "said"),
    [
        (0, "multicast", None, "0 multicasts"),
        (1, "multicast", None, "1 multicast"),
        (2, "multicast", None, "2 multicasts"),
        (1, "delivery", "deliveries", "1 delivery"),
        (42000, "delivery", "deliveries", "42000 deliveries"),
    ],
)
def test_plural(n: int, noun: str, nouns: str | None, said: str) -> None:
    assert plural(n, noun, nouns) == said


def test_run_summary_says_1_multicast(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--dests", "4,6 6,6 0,2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "— 1 multicast," in out and "1 multicasts" not in out
    assert main([*argv[:4], "vh,dp", *argv[5:]]) == 0
    assert "— 2 multicasts," in capsys.readouterr().out


def test_completion_causes_count_in_words() -> None:
    records = [multicast_record(missing=((1, 1),), duplicates=1), multicast_record()]
    errors = [{"kind": "bad-header", "cause": "x"}]
    complete, causes = completion([], errors, records)
    assert not complete
    assert causes == [
        "1 destination of 1 multicast not reached",
        "1 duplicate delivery in 1 multicast",
        "rule error on the way: 1 time, first: x",
    ]
    assert "(s)" not in " ".join(causes)
