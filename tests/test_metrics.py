"""Per-multicast metrics and per-node jitter statistics (coordinator/analysis/metrics.py):
quantiles by linear interpolation, median, IQR and tails over repetitions, the CV in wall clock."""

from __future__ import annotations

import json
import statistics

import pytest

from coordinator.analysis.metrics import jitter, quantile, spread
from coordinator.analysis.result_types import MulticastResult
from coordinator.cli import main
from tests.helpers import arrival_record, multicast_record

RUN = ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--source", "3,3",
       "--dests", "0,0 7,7 1,6 6,1 4,4 0,5"]  # fmt: skip


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
    assert s["mean"] == 5 and s["sd"] == 2  # population SD
    assert s["median"] == 4.5
    assert s["iqr"] == pytest.approx(5.5 - 4.0)  # p75 at h = 5.25, p25 at h = 1.75
    assert s["p95"] == pytest.approx(7 + 0.65 * 2) and s["p99"] == pytest.approx(7 + 0.93 * 2)


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
    assert wall.p95 == pytest.approx(895_000) and wall.p99 == pytest.approx(979_000)
    assert wall.mean == pytest.approx(400_000)
    assert wall.sd == pytest.approx(statistics.pstdev([100_000, 200_000, 300_000, 1_000_000]))
    assert (row.steps.mean, row.steps.sd, row.steps.median, row.steps.iqr) == (5, 0, 5, 0)
    assert (row.steps.p95, row.steps.p99) == (5, 5)
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
    keys = {
        f"{unit}_{k}" for unit in ("step", "wall_ns") for k in ("mean", "sd", "median", "iqr", "p95", "p99")
    }
    assert len(doc["jitter"]) == 6
    for row in doc["jitter"]:
        assert keys <= set(row)
        assert all(row[k] is not None for k in keys)
