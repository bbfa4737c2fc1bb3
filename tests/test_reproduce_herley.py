"""``meshcast reproduce herley`` (seed 002): claims from data, and a quick run's report shape."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from coordinator.analysis.verdicts import Verdict
from coordinator.cli import main
from coordinator.reproduce import reproductions
from coordinator.reproduce.herley import (
    ALGORITHMS,
    FULL,
    QUICK,
    Key,
    Setup,
    check_claims,
    exponent,
    points,
    primitive_steps,
    summarise,
)

PNG = b"\x89PNG\r\n\x1a\n"


def test_exponent_fits_a_power_law() -> None:
    xs = [1.0, 2.0, 4.0, 8.0]
    assert exponent(xs, [3 * x**0.5 for x in xs]) == pytest.approx(0.5)
    assert exponent(xs, [7.0, 7.0, 7.0, 7.0]) == pytest.approx(0.0)
    assert exponent([2.0], [1.0]) is None and exponent(xs, [None, None, 1.0, None]) is None


def test_points_cover_the_four_sweeps_once() -> None:
    ps = points(FULL, [1, 2], ALGORITHMS)
    assert len(ps) == len(set(ps))
    keys = {(p.side, p.kind, p.d, p.c) for p in ps}
    assert (16, "random", 64, 64) in keys and (32, "random", 16, 16) in keys and (16, "worst", 1, 16) in keys
    assert {p.seed for p in ps} == {1, 2} and {p.algorithm for p in ps} == set(ALGORITHMS)


def _synthetic(s: Setup, under: float = 1.0) -> dict[Key, dict[str, float | None]]:
    """A summary where the Herley rules take √(cn), replicate c·√n, and buffers c or a constant.

    ``under`` < 1 makes `tree` finish in that fraction of the lower bound.
    """
    rows = []
    for side, kind, d, c in (
        {(s.side, k, c, c) for k in ("random", "worst") for c in s.cs}
        | {(x, "random", c, c) for x in s.sides for c in s.n_cs}
        | {(s.side, "worst", d, s.d_c) for d in s.ds}
    ):
        n = side * side
        for a in ALGORITHMS:
            t = {"replicate": c * math.sqrt(n) / 2, "tree": 1.1 * math.sqrt(c * n)}.get(
                a, 1.3 * math.sqrt(c * n)
            )
            peak = {"herley-random": 9, "tree": 5}.get(a, 2 * c)
            t = under * 0.4 * math.sqrt(c * n) if a == "tree" and under < 1 else t
            rows.append(
                {
                    "side": side,
                    "kind": kind,
                    "d": d,
                    "c": c,
                    "seed": 1,
                    "algorithm": a,
                    "time": t,
                    "time_over_sqrt_cn": t / math.sqrt(c * n),
                    "lower_bound": 0.4 * math.sqrt(c * n),
                    "sqrt_cn": math.sqrt(c * n),
                    "peak_buffer": peak,
                    "busiest_mean_occupancy": 1.0,
                    "busiest_copies": d - 1,
                    "traffic": 1,
                    "actual_c": c,
                    "messages": n,
                    "deliveries": n * d,
                }
            )
    return summarise(rows)


def _verdicts(claims: list) -> dict[str, Verdict]:
    """Each claim's verdict by its source, with " buffers" / " charged" for the second claims of a theorem."""
    tags = {"needs buffers": " buffers", "paper's charges": " charged", "independent of d": " independence"}
    return {c.source + next((t for k, t in tags.items() if k in c.text), ""): c.verdict for c in claims}


def test_claims_follow_the_data() -> None:
    claims = check_claims(_synthetic(FULL), FULL)
    verdicts = _verdicts(claims)
    assert len(verdicts) == len(claims) == 12
    for source in ("Theorem 1", "§1", "§1.2", "§1.2 independence", "Theorem 2", "Theorem 3"):
        assert verdicts[source] is Verdict.HELD, source
    for source in ("Theorem 2", "Theorem 3"):
        assert verdicts[f"{source} charged"] is Verdict.HELD and verdicts[f"{source} buffers"] is Verdict.HELD
    assert verdicts["Lemma 1"] is Verdict.UNTESTABLE and verdicts["Theorem 4"] is Verdict.NOT_REPRODUCIBLE
    assert "lower bound" in claims[0].text and "consistent" in claims[0].evidence
    assert all(c.evidence for c in claims)
    assert all(c.numbers["points"] for c in claims if c.verdict is Verdict.HELD)


def test_claims_fail_when_the_data_says_so() -> None:
    # `tree` beats the lower bound: Theorem 1 is contradicted
    assert _verdicts(check_claims(_synthetic(FULL, under=0.5), FULL))["Theorem 1"] is Verdict.NOT_HELD
    # herley-random's buffers grow like c: not O(1)
    grown = _synthetic(FULL)
    for key, rec in grown.items():
        if key[4] == "herley-random":
            rec["peak_buffer"] = 3.0 * key[3]
    assert _verdicts(check_claims(grown, FULL))["Theorem 3 buffers"] is Verdict.NOT_HELD
    # the optimal rules' time grows with d on the d sweep: like d^0.3 it rises less than √(dcn) does at
    # every doubling but is not independent of d (|exponent| > 0.15); like d^0.7 even the direction fails
    for power, verdict in ((0.3, Verdict.DIRECTION_ONLY), (0.7, Verdict.NOT_HELD)):
        by_d = _synthetic(FULL)
        for (_side, kind, d, c, a), rec in by_d.items():
            if a in ("herley-tiles", "herley-random") and kind == "worst" and c == FULL.d_c:
                rec["time"] *= (d / FULL.d_c) ** power
        claims = check_claims(by_d, FULL)
        assert _verdicts(claims)["§1.2 independence"] is verdict, power
        independent = next(c for c in claims if "independent of d" in c.text)
        assert independent.numbers["exponent_d herley-tiles"] == pytest.approx(power, abs=1e-3)


def test_primitives_are_charged_to_the_rules_that_use_them() -> None:
    assert primitive_steps("replicate", 256, 16, 16) == primitive_steps("tree", 256, 16, 16) == 0
    tiles, rand = primitive_steps("herley-tiles", 256, 16, 16), primitive_steps("herley-random", 256, 16, 16)
    assert tiles == pytest.approx(3 * math.sqrt(256 / 16) + 4)
    # one phase of 16 tiles: 5 whole-mesh primitives, then 16 rounds of 2 migrations of (1 + 5·3)·4 steps
    assert rand == pytest.approx(5 * 3 * 16 + 16 * 2 * 16 * 4)


def test_quick_reproduction_writes_report_plots_and_csvs(tmp_path: Path) -> None:
    assert "herley" in reproductions()
    out = tmp_path / "herley"
    assert main(["reproduce", "herley", "--quick", "--repeat", "1", "--jobs", "1", "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    for needle in (
        "## The paper's claims",
        "Theorem 1",
        "Theorem 2",
        "Theorem 3",
        "## Results",
        "Where we simplify the paper",
        "every run delivered every message exactly once",
    ):
        assert needle in report, needle
    plots = sorted((out / "plots").glob("*.png"))
    assert {p.name for p in plots} >= {
        "time_vs_c_random.png",
        "buffer_vs_c_random.png",
        "time_vs_d_worst.png",
    }
    for p in plots:
        assert p.read_bytes().startswith(PNG) and p.stat().st_size > 5000
        assert f"plots/{p.name}" in report
    rows = list(csv.DictReader((out / "points.csv").open()))
    assert len(rows) == len(points(QUICK, [1], ALGORITHMS))
    assert all(r["missing"] == "0" and r["time"] for r in rows)
    # the report can be rebuilt from the CSVs alone
    (out / "report.md").unlink()
    assert main(["reproduce", "herley", "--report-only", "--out", str(out)]) == 0
    assert (out / "report.md").read_text().split("\n", 3)[3] == report.split("\n", 3)[3]
