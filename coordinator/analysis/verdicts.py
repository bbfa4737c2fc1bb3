"""One verdict vocabulary for every reproduction: what each verdict means and how counts decide it.

A paper's claim checked against our runs becomes a :class:`Claim` record: where the paper makes
it, the claim, one :class:`Verdict`, our evidence in a sentence and the numbers the verdict rests
on. Reports render claims with :meth:`Claim.markdown` under :func:`legend`, and write them as
``claims.csv`` (columns :data:`COLUMNS`, rows :meth:`Claim.row`, written with the reproduction
framework's ``write_tidy``) so that a test can check every verdict and the numbers it rests on.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

__all__ = [
    "COLUMNS",
    "HOLD_SHARE",
    "MEANING",
    "MIN_REPEAT",
    "Claim",
    "Verdict",
    "by_points",
    "legend",
    "read_claims",
    "repeat_warning",
]


class Verdict(StrEnum):
    """The five verdicts a claim can get; nothing else is a verdict."""

    HELD = "held"
    DIRECTION_ONLY = "held in direction only"
    NOT_HELD = "not held"
    UNTESTABLE = "untestable here"
    NOT_REPRODUCIBLE = "not reproducible"


MEANING: Final[Mapping[Verdict, str]] = {
    Verdict.HELD: "direction and size within the paper's own spread or the stated tolerance, at the "
    "stated share of points (direction alone where the paper states no size: the claim says so)",
    Verdict.DIRECTION_ONLY: "the direction holds at the stated share of points but the size does not; "
    "the ratio of our size to the paper's is given",
    Verdict.NOT_HELD: "the direction fails at more points than the stated share allows (numbers given)",
    Verdict.UNTESTABLE: "our model cannot express what the claim rests on (the reason is given)",
    Verdict.NOT_REPRODUCIBLE: "the paper does not give what a check needs, e.g. its data is only in a "
    "figure (the reason is given)",
}

HOLD_SHARE: Final = 0.8
"""A claim made over points (k, mesh size, load) holds when it holds at this share of them or more."""
MIN_REPEAT: Final = 10
"""Fewer runs per point than this: verdicts are printed with a warning that they are not meaningful."""
_TESTED = (Verdict.HELD, Verdict.DIRECTION_ONLY, Verdict.NOT_HELD)
COLUMNS: Final = ("source", "text", "verdict", "evidence", "numbers")
"""claims.csv's columns."""


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim of a paper, checked: where, what, the verdict, our evidence and its numbers."""

    source: str  # the paper's place: "Table 3", "§4.2.3", "Theorem 2"
    text: str  # the claim, as the paper makes it, in a sentence
    verdict: Verdict
    evidence: str  # our numbers, or for untestable / not reproducible the reason
    numbers: Mapping[str, float | int | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict):
            raise ValueError(f"{self.verdict!r} is not a verdict ({', '.join(Verdict)})")
        if self.verdict in _TESTED and not self.numbers:
            raise ValueError(f"a {self.verdict} claim needs the numbers it rests on: {self.text}")

    def row(self) -> dict[str, str]:
        """The claim as a row of ``claims.csv`` (numbers as a JSON object)."""
        return {**{c: str(getattr(self, c)) for c in COLUMNS[:-1]}, "numbers": json.dumps(dict(self.numbers))}

    def markdown(self) -> str:
        """The claim as one report bullet."""
        return f"- **{self.verdict}** — {self.source}: {self.text}. *Ours:* {self.evidence}"


def by_points(hits: int, points: int, *, size_ok: bool | None = None, share: float = HOLD_SHARE) -> Verdict:
    """The verdict of a claim over ``points``: its direction holds at ``hits`` of them.

    ``size_ok`` False (our size outside the paper's spread or the tolerance) turns a direction
    that holds into :attr:`Verdict.DIRECTION_ONLY`; None means the paper states no size.
    """
    if points <= 0:
        raise ValueError("a claim over no points has no verdict")
    if hits < share * points:
        return Verdict.NOT_HELD
    return Verdict.DIRECTION_ONLY if size_ok is False else Verdict.HELD


def repeat_warning(repeat: int) -> str | None:
    """A warning when ``repeat`` runs per point are too few for the verdicts to mean anything."""
    if repeat >= MIN_REPEAT:
        return None
    return (
        f"with {repeat} run(s) per point (fewer than {MIN_REPEAT}) the verdicts are not meaningful: "
        "they show the checks work, not what the paper's claims come to"
    )


def legend(repeat: int, share: float = HOLD_SHARE) -> str:
    """The report paragraph that defines the verdicts, the threshold and the repetitions behind them."""
    defs = "; ".join(f"*{v}*: {MEANING[v]}" for v in Verdict)
    text = (
        f"**Verdicts.** {defs}. A claim made over several points holds when it holds at "
        f"{share:.0%} of them or more; {repeat} run(s) per point."
    )
    warning = repeat_warning(repeat)
    return text + (f" **Warning:** {warning}." if warning else "")


def read_claims(path: Path) -> list[Claim]:
    """``claims.csv`` back as claims (an unknown verdict or missing numbers is a ValueError)."""
    with path.open(newline="") as f:
        return [
            Claim(r["source"], r["text"], Verdict(r["verdict"]), r["evidence"], json.loads(r["numbers"]))
            for r in csv.DictReader(f)
        ]
