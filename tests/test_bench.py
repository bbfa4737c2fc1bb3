"""``meshcast bench --json``: one object, the relay limit and one row per point, ratios consistent.

Figures are not asserted (no timed tests): only the shape, the workloads and the arithmetic.
"""

from __future__ import annotations

import json

import pytest

from coordinator.cli import main
from coordinator.experiments.bench import SWITCHING, bench_points, emulator_point

FIELDS = {"topology", "runtime", "clock", "switching", "nodes", "packet_hops_per_s", "steps_per_s",
          "ratio", "start_s", "peak_rss_mb"}  # fmt: skip


def test_bench_points_cover_dense_and_sparse_workloads() -> None:
    full = bench_points()
    assert ("torus:20x20", "lockstep", 100, 50) in full and ("torus:32x32", "free", 100, 50) in full
    assert ("torus:64x64", "lockstep", 1, 10) in full and ("torus:64x64", "free", 1, 10) in full
    assert ("torus:128x128", "lockstep", 100, 50) in bench_points(large=True)
    assert all(p[0] != "torus:128x128" for p in full)


@pytest.mark.parametrize("clock", ["lockstep", "free"])
def test_emulator_point_measures_a_complete_run(clock: str) -> None:
    row = emulator_point("torus:6x6", clock, 3, 4)
    assert FIELDS - {"ratio"} <= set(row)
    assert row["complete"] and row["nodes"] == 36 and row["switching"] == SWITCHING
    assert row["packet_hops"] > 0 and row["packet_hops_per_s"] > 0 and row["peak_rss_mb"] > 0
    assert (row["steps_per_s"] is None) == (clock == "free")


def test_bench_json_prints_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"relay_hops_per_s", "rows"}
    limit = doc["relay_hops_per_s"]
    assert limit > 0 and len(doc["rows"]) == len(bench_points(quick=True))
    for row in doc["rows"]:
        assert set(row) >= FIELDS, FIELDS - set(row)
        assert row["runtime"] == "in-process" and row["complete"]
        assert row["ratio"] == pytest.approx(row["packet_hops_per_s"] / limit, abs=1e-3)
