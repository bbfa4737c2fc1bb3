"""The one verdict vocabulary: how counts decide, what a claim must carry, and every report using it.

Each committed report is rebuilt from its committed tidy data (``--report-only`` into a copy);
its ``claims.csv`` must give every claim a verdict of the vocabulary, the numbers a tested claim
rests on, and the same bullet in report.md.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coordinator.analysis.verdicts import Claim, Verdict, by_points, legend, read_claims, repeat_warning
from coordinator.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reproductions"
REPORTS = ["malani", "chen", "tasnem", "herley", "aldubai", "load"]


def test_counts_decide_the_verdict() -> None:
    assert by_points(8, 10) is Verdict.HELD
    assert by_points(7, 10) is Verdict.NOT_HELD
    assert by_points(10, 10, size_ok=False) is Verdict.DIRECTION_ONLY
    assert by_points(3, 10, size_ok=False) is Verdict.NOT_HELD
    assert by_points(1, 2, share=0.5) is Verdict.HELD
    with pytest.raises(ValueError, match="no points"):
        by_points(0, 0)


def test_a_tested_claim_needs_its_numbers() -> None:
    with pytest.raises(ValueError, match="numbers"):
        Claim("Table 3", "QG is fastest", Verdict.HELD, "fastest at 8 of 8 points")
    with pytest.raises(ValueError, match="not a verdict"):
        Claim("Table 3", "QG is fastest", "supported", "…", {"hits": 8})  # type: ignore[arg-type]
    why = Claim("Fig. 9", "the trace matches", Verdict.NOT_REPRODUCIBLE, "the data is only in the figure")
    assert why.markdown() == (
        "- **not reproducible** — Fig. 9: the trace matches. *Ours:* the data is only in the figure"
    )


def test_legend_defines_every_verdict_and_warns_on_few_runs() -> None:
    text = legend(3)
    assert all(f"*{v}*:" in text for v in Verdict)
    assert "80%" in text and "Warning" in text
    assert repeat_warning(10) is None and "Warning" not in legend(10)


@pytest.mark.parametrize("name", REPORTS)
def test_every_claim_of_a_report_has_a_verdict_and_its_numbers(name: str, tmp_path: Path) -> None:
    copy = tmp_path / name
    shutil.copytree(DOCS / name, copy)
    assert main(["reproduce", name, "--report-only", "--out", str(copy)]) == 0
    claims = read_claims(copy / "claims.csv")  # a verdict outside the vocabulary raises here
    assert claims, f"{name}: no claims"
    report = (copy / "report.md").read_text()
    assert "**Verdicts.**" in report
    for c in claims:
        assert c.markdown() in report, c.text
    assert (copy / "claims.csv").read_text() == (DOCS / name / "claims.csv").read_text()
    for c in claims:  # a verdict over counted points is the one the counts give
        if {"hits", "points"} <= set(c.numbers) and c.verdict in (Verdict.HELD, Verdict.NOT_HELD):
            assert by_points(int(c.numbers["hits"] or 0), int(c.numbers["points"] or 0)) is c.verdict, c.text
        if c.verdict is Verdict.DIRECTION_ONLY and "points" in c.numbers:
            assert int(c.numbers["hits"] or 0) >= 0.8 * int(c.numbers["points"] or 0), c.text
