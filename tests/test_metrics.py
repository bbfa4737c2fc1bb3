"""Per-multicast metrics and per-node jitter statistics (coordinator/analysis/metrics.py):
quantiles by linear interpolation, median, IQR and tails over repetitions, the CV in wall clock."""

from __future__ import annotations

import csv
import json
import math
import random
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.analysis.metrics import (
    chi2_quantile,
    jitter,
    median_ci,
    pstdev,
    quantile,
    sample_sd,
    sd_ci,
    spread,
)
from coordinator.analysis.result_types import MulticastResult
from coordinator.cli import main
from tests.helpers import arrival_record, multicast_record

RUN = ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--source", "3,3",
       "--dests", "0,0 7,7 1,6 6,1 4,4 0,5"]  # fmt: skip


@given(st.lists(st.integers(min_value=-(10**15), max_value=10**15), min_size=1, max_size=60))
def test_pstdev_of_integers_is_the_standard_librarys_float(values: list[int]) -> None:
    """The CV's standard deviation, computed with integers, is bit for bit statistics.pstdev's."""
    assert pstdev(values) == statistics.pstdev(values)


def test_pstdev_of_other_numbers_is_the_standard_librarys() -> None:
    assert pstdev([1.5, 2.5, 2.5, 2.75, 3.25, 4.75]) == statistics.pstdev([1.5, 2.5, 2.5, 2.75, 3.25, 4.75])
    assert pstdev([True, 2, 3]) == statistics.pstdev([True, 2, 3])


def test_quantiles_of_a_known_list() -> None:
    """Linear interpolation (type 7): h = (n − 1)·p between the order statistics."""
    xs = [7.0, 1.0, 10.0, 4.0, 2.0, 9.0, 3.0, 8.0, 6.0, 5.0]  # 1..10, unsorted
    assert quantile(xs, 0.5) == pytest.approx(5.5)
    assert quantile(xs, 0.25) == pytest.approx(3.25)  # h = 2.25
    assert quantile(xs, 0.75) == pytest.approx(7.75)  # h = 6.75
    assert quantile(xs, 0.95) == pytest.approx(9.55)  # h = 8.55
    assert quantile(xs, 0.99) == pytest.approx(9.91)  # h = 8.91
    assert (quantile(xs, 0.0), quantile(xs, 1.0)) == (1.0, 10.0)
    cuts = statistics.quantiles(xs, n=100, method="inclusive")
    assert [quantile(xs, i / 100) for i in range(1, 100)] == pytest.approx(cuts)
    assert quantile([3.0], 0.99) == 3.0
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile(xs, 1.5)


def test_spread_of_a_known_list() -> None:
    s = spread([2, 4, 4, 4, 5, 5, 7, 9])
    # the sample SD: Σ(x − x̄)² = 32, n − 1 = 7
    assert s["mean"] == 5 and s["sd"] == pytest.approx(math.sqrt(32 / 7))
    assert s["median"] == 4.5
    assert s["iqr"] == pytest.approx(5.5 - 4.0)  # p75 at h = 5.25, p25 at h = 1.75
    assert s["p95"] is None and s["p99"] is None  # 8 values: the tails would be the maximum renamed
    assert s["median_ci"] == (2, 9)  # n = 8: [x(1), x(8)], P(B ≤ 0) = 1/256; P(B ≤ 1) = 9/256 > 0.025


def test_tails_need_20_and_100_repetitions() -> None:
    """p95 from 20 values on, p99 from 100: below, "—" (None), whatever the values."""
    for n, has95, has99 in ((19, False, False), (20, True, False), (99, True, False), (100, True, True)):
        xs = [float(i) for i in range(1, n + 1)]
        s = spread(xs)
        assert (s["p95"] is not None, s["p99"] is not None) == (has95, has99), n
        if has95:
            assert s["p95"] == pytest.approx(1 + 0.95 * (n - 1))  # type 7: h = (n − 1)·p over 1..n
        if has99:
            assert s["p99"] == pytest.approx(1 + 0.99 * (n - 1))


@pytest.mark.parametrize(
    ("df", "low", "high"),
    # two-sided 95% chi-square points from the published tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.4)
    [(1, 0.000982, 5.024), (9, 2.700, 19.023), (19, 8.907, 32.852), (29, 16.047, 45.722),
     (99, 73.361, 128.422)],
)  # fmt: skip
def test_chi_square_quantiles_match_the_tables(df: int, low: float, high: float) -> None:
    assert chi2_quantile(0.025, df) == pytest.approx(low, abs=5e-4 if df > 1 else 5e-7)
    assert chi2_quantile(0.975, df) == pytest.approx(high, abs=5e-4)


@pytest.mark.parametrize(
    ("n", "ranks"),
    # the order statistics of the 95% CI of the median, from the binomial(n, ½) tables
    [(5, None), (6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (30, (10, 21)), (100, (40, 61))],
)
def test_the_median_ci_is_the_tabled_order_statistics(n: int, ranks: tuple[int, int] | None) -> None:
    xs = [float(i) for i in range(1, n + 1)]
    random.Random(n).shuffle(xs)  # order statistic k of 1..n is k
    assert median_ci(xs) == (None if ranks is None else (float(ranks[0]), float(ranks[1])))


def test_the_sd_ci_is_chi_square() -> None:
    """n = 10: [s·√(9/19.023), s·√(9/2.700)] (table values)."""
    xs = [2.0 * v for v in (-1.5, -1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.5, 0.0, 0.0)]
    s = statistics.stdev(xs)
    ci = sd_ci(xs)
    assert ci is not None
    assert ci == pytest.approx((s * math.sqrt(9 / 19.023), s * math.sqrt(9 / 2.700)), rel=1e-4)
    assert sd_ci([1.0]) is None and sd_ci([3.0, 3.0]) == (0.0, 0.0)


def test_the_cis_cover_95_percent_of_normal_samples() -> None:
    """4,000 seeded samples of 20 normal values: each CI holds the true median and SD in 95% of
    them (within ±1.5%, about 4.5 binomial SEs); the median's, exact for n = 20, covers 95.86%."""
    rng = random.Random(42)
    hits_median = hits_sd = 0
    trials = 4000
    for _ in range(trials):
        xs = [rng.gauss(10.0, 2.0) for _ in range(20)]
        m, s = median_ci(xs), sd_ci(xs)
        assert m is not None and s is not None
        hits_median += m[0] <= 10.0 <= m[1]
        hits_sd += s[0] <= 2.0 <= s[1]
    assert abs(hits_median / trials - 0.9586) <= 0.015, hits_median / trials
    assert abs(hits_sd / trials - 0.95) <= 0.015, hits_sd / trials


def test_the_sample_sd_divides_by_n_minus_one() -> None:
    """One definition for every table: √(Σ(x − x̄)² / (n − 1)), nothing below two values."""
    assert sample_sd([1.0, 3.0]) == pytest.approx(math.sqrt(2.0))  # Σ = 2, n − 1 = 1
    assert sample_sd([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(math.sqrt(32 / 7))
    assert sample_sd([5.0]) is None and sample_sd([]) is None
    assert spread([5.0])["sd"] is None


def _record(rep: int, wall_us: float | None, step: int = 5) -> MulticastResult:
    wall = None if wall_us is None else int(wall_us * 1000)
    arrival = arrival_record((2, 3), step, hops=5, startups=1, wall_ns=wall, host="h")
    return multicast_record(id=rep, destinations=((2, 3),), arrivals=(arrival,))


def test_jitter_rows_carry_median_iqr_and_tails() -> None:
    """One slow repetition moves the SD a lot and the median and IQR little."""
    (row,) = jitter([_record(i, us) for i, us in enumerate([100, 200, 300, 1000])])
    assert row.repetitions == 4
    wall = row.wall_ns
    assert wall.median == pytest.approx(250_000)
    assert wall.iqr == pytest.approx(475_000 - 175_000)  # h = 2.25 and 0.75
    assert wall.p95 is None and wall.p99 is None  # 4 repetitions: too few for either tail
    assert wall.mean == pytest.approx(400_000)
    assert wall.sd == pytest.approx(statistics.stdev([100_000, 200_000, 300_000, 1_000_000]))
    assert (row.steps.mean, row.steps.sd, row.steps.median, row.steps.iqr) == (5, 0, 5, 0)
    assert (row.steps.p95, row.steps.p99) == (None, None)
    assert wall.median_ci is None and wall.sd_ci is not None  # the median's CI needs 6
    assert row.to_json()["wall_ns_median"] == wall.median  # the --json keys are prefixed
    (none,) = jitter([_record(i, None) for i in range(3)])
    assert none.wall_ns.median is None and none.wall_ns.iqr is None and none.wall_ns.sd is None


def test_cv_wall_is_seed_004s_cv_of_wall_clock_latency(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--repeat", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for m in doc["multicasts"]:
        walls = [a["wall_ns"] for a in m["arrivals"]]
        assert m["cv_wall"] == pytest.approx(statistics.pstdev(walls) / statistics.fmean(walls))
    assert doc["summary"]["cv_wall"]["n"] == 2
    assert main([*RUN, "--runtime", "model", "--json"]) == 0  # the model keeps no wall clock
    doc = json.loads(capsys.readouterr().out)
    assert doc["multicasts"][0]["cv_wall"] is None and doc["summary"]["cv_wall"]["n"] == 0


def test_json_jitter_rows_have_every_statistic(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--repeat", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    stats = ("mean", "sd", "median", "iqr", "p95", "p99", "median_ci95", "sd_ci95")
    keys = {f"{unit}_{k}" for unit in ("step", "wall_ns") for k in stats}
    tails = {f"{unit}_{k}" for unit in ("step", "wall_ns") for k in ("p95", "p99", "median_ci95")}
    assert len(doc["jitter"]) == 6
    for row in doc["jitter"]:
        assert keys <= set(row)
        assert all(row[k] is not None for k in keys - tails)
        assert all(row[k] is None for k in tails)  # 3 repetitions: too few for a tail or the median's CI


def test_json_and_csv_carry_the_cis_and_the_tail_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """20 kept repetitions: p95 and the median's CI are there, p99 is null in the JSON and "—" in
    jitter.csv and the table, whose caption says why; each CI is its statistic's, recomputed."""
    out = tmp_path / "out"
    assert main([*RUN, "--repeat", "20", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    words = " ".join(text.split())  # the caption wraps
    assert "p95 needs 20 kept repetitions and p99 100" in words and "n = kept repetitions (20 here)" in words
    doc = json.loads((out / "run.json").read_text())
    walls: dict[str, list[int]] = {}
    for m in doc["multicasts"]:
        for a in m["arrivals"]:
            walls.setdefault(f"{a['node'][0]},{a['node'][1]}", []).append(a["wall_ns"])
    for row in doc["jitter"]:
        xs = walls[f"{row['node'][0]},{row['node'][1]}"]
        assert row["repetitions"] == len(xs) == 20
        assert row["wall_ns_p95"] == pytest.approx(quantile(xs, 0.95)) and row["wall_ns_p99"] is None
        assert row["wall_ns_median_ci95"] == [sorted(xs)[5], sorted(xs)[14]]  # x(6) and x(15)
        assert row["wall_ns_sd_ci95"] == pytest.approx(list(sd_ci(xs) or ()))
    with (out / "jitter.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["wall_us_p99"] for r in rows} == {"—"} and {r["step_p99"] for r in rows} == {"—"}
    for r in rows:
        assert (
            float(r["wall_us_median_ci95_low"])
            <= float(r["wall_us_median"])
            <= float(r["wall_us_median_ci95_high"])
        )
        assert float(r["wall_us_sd_ci95_low"]) <= float(r["wall_us_sd"]) <= float(r["wall_us_sd_ci95_high"])


@given(
    rows=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 3), st.integers(0, 3)), max_size=25
    ),  # (step, x, y): repeats are duplicates, nodes outside the destinations strays
)
def test_first_arrivals_without_order_when_each_destination_comes_once(
    rows: list[tuple[int, int, int]],
) -> None:
    """:func:`_first_arrivals` gives the ordered reading's first arrivals and counts, whether the
    arrivals are unique (no sort made) or not."""
    from coordinator.analysis.metrics import _first_arrivals, _ordered_first_arrivals
    from coordinator.runtimes.records import Arrival

    dests = {(x, y) for x in range(3) for y in range(3)}
    arrivals = [Arrival(1, (x, y), step, 1, 1) for step, x, y in rows]
    assert _first_arrivals(dests, arrivals) == _ordered_first_arrivals(dests, arrivals)
