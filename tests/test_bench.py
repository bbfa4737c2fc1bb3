"""``meshcast bench --json``: one object, the relay limit and one row per point, ratios consistent.

Figures are not asserted (no timed tests): only the shape, the workloads and the arithmetic.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest

from coordinator.cli import main
from coordinator.experiments import bench
from coordinator.experiments.bench import (
    BOOKSIM_FLIT_HOPS_PER_CPU_S,
    FLIT_LOAD,
    SWITCHING,
    WORM_FLITS,
    BenchRow,
    bench_points,
    emulator_point,
    flit_load_point,
    flit_load_points,
    wormhole_point,
    wormhole_points,
)
from node import build_name, compiled_modules

FIELDS = {"topology", "runtime", "shards", "clock", "switching", "nodes", "packet_hops_per_s",
          "flit_hops_per_s", "steps_per_s", "ratio", "start_s", "peak_rss_mb", "packet_hops",
          "flit_hops"}  # fmt: skip


def test_bench_points_cover_dense_and_sparse_workloads() -> None:
    full = bench_points()
    assert ("torus:20x20", "lockstep", 100, 50) in full and ("torus:32x32", "free", 100, 50) in full
    assert ("torus:64x64", "lockstep", 1, 10) in full and ("torus:64x64", "free", 1, 10) in full
    assert ("torus:128x128", "lockstep", 100, 50) in bench_points(large=True)
    assert all(p[0] != "torus:128x128" for p in full)


@pytest.mark.parametrize("clock", ["lockstep", "free"])
def test_emulator_point_measures_a_complete_run(clock: str) -> None:
    row = emulator_point("torus:6x6", clock, 3, 4).to_json()
    assert FIELDS - {"ratio"} <= set(row)
    assert row["complete"] and row["nodes"] == 36 and row["switching"] == SWITCHING
    assert row["packet_hops"] > 0 and row["packet_hops_per_s"] > 0 and row["peak_rss_mb"] > 0
    assert (row["steps_per_s"] is None) == (clock == "free")
    if clock == "lockstep":  # the rate is over the span's steps: the idle tail is not in the span
        assert 0 < row["span_steps"] <= row["steps"] - 4  # a 6×6 torus's end: a diameter and one more
        rate = row["steps_per_s"]  # active_s is rounded to the millisecond
        assert abs(rate * row["active_s"] - row["span_steps"]) <= rate * 0.0005 + 1e-9
    assert row["flit_hops"] is None and row["flit_hops_per_s"] is None


def test_a_sparse_point_reports_the_median_of_its_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert emulator_point("torus:6x6", "lockstep", 2, 4).runs == 1
    spans = iter([0.5, 0.1, 0.3, 0.9, 0.2])
    real = bench._timed_run

    def timed(*args: Any) -> tuple[Any, ...]:
        raw, total, _, steps = real(*args)
        return raw, total, next(spans), steps

    monkeypatch.setattr(bench, "_timed_run", timed)
    row = emulator_point("torus:6x6", "lockstep", 1, 4)
    assert row.runs == bench.SPARSE_RUNS == 5 and row.active_s == 0.3
    assert row.packet_hops_per_s == row.packet_hops / 0.3


def test_a_sharded_point_does_the_same_work() -> None:
    one, two = (emulator_point("torus:6x6", "lockstep", 3, 4, shards=n) for n in (1, 2))
    assert (one.shards, two.shards) == (1, 2) and two.complete
    assert (two.packet_hops, two.steps) == (one.packet_hops, one.steps)
    # the shard processes' CPU is not this process's: a sharded row does not claim a CPU rate
    assert one.cpu_s is not None and one.cpu_s > 0 and (two.cpu_s, two.hops_per_cpu_s) == (None, None)


@pytest.mark.parametrize("bad", ["0", "x", "65"])
def test_bench_refuses_a_bad_shard_count(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--shards", bad]) == 2
    assert "--shards" in capsys.readouterr().err


def test_wormhole_points_run_in_process_on_the_engines_and_the_model() -> None:
    assert {p[1] for p in wormhole_points()} == {"in-process", "engines", "model"}
    assert all(p[0].startswith("mesh:") for p in wormhole_points() + wormhole_points(quick=True))


@pytest.mark.parametrize("runtime", ["in-process", "engines", "model"])
def test_wormhole_point_counts_worm_and_flit_hops(runtime: str) -> None:
    row = wormhole_point("mesh:4x4", runtime, 3, 2).to_json()
    assert FIELDS - {"ratio"} <= set(row)
    assert row["complete"] and row["switching"] == "wormhole" and row["runtime"] == runtime
    assert row["flit_hops"] == WORM_FLITS * row["packet_hops"] > 0  # every worm-hop moves L flits
    assert row["flit_hops_per_s"] == pytest.approx(WORM_FLITS * row["packet_hops_per_s"])
    assert row["steps"] > 0 and row["steps_per_s"] > 0


@pytest.mark.parametrize("runtime", ["engines", "model"])
def test_flit_load_point_runs_the_issue_workload(runtime: str) -> None:
    row = flit_load_point(runtime, quick=True).to_json()
    assert FIELDS - {"ratio"} <= set(row)
    assert (row["topology"], row["workload"], row["runtime"]) == ("mesh:10x10", "uniform load", runtime)
    assert row["complete"] and row["switching"] == "wormhole" and row["destinations"] == 1
    assert row["offered_flits_per_node_cycle"] == FLIT_LOAD.flits_per_node == 0.128
    # every message is one worm of L flits, and each of its worm-hops moves all L of them
    assert row["flit_hops"] == FLIT_LOAD.flits * row["packet_hops"] > 0
    assert row["packet_hops"] >= row["multicasts"] > 0
    # offered: 100 nodes × 0.128 / 64 messages per cycle over a quarter of the duration (Poisson, seeded)
    expected = 100 * FLIT_LOAD.flits_per_node / FLIT_LOAD.flits * FLIT_LOAD.duration / 4
    assert 0.7 * expected < row["multicasts"] < 1.3 * expected
    rate = row["flit_hops_per_s"]  # run_s is rounded to the millisecond
    assert abs(rate * row["run_s"] - row["flit_hops"]) <= rate * 0.0005 + 1e-6
    assert row["steps"] >= FLIT_LOAD.duration / 4
    # the CPU time is the process's over the run: flit hops per CPU-second, and their ratio to BookSim2's
    cpu = row["cpu_s"]
    assert cpu > 0 and abs(row["hops_per_cpu_s"] * cpu - row["flit_hops"]) <= row["hops_per_cpu_s"] * 0.0005
    assert BenchRow.from_json(row).booksim_ratio == round(
        row["hops_per_cpu_s"] / BOOKSIM_FLIT_HOPS_PER_CPU_S, 2
    )


def test_bench_json_prints_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"relay_hops_per_s", "build", "rows"}
    assert doc["build"] == build_name() == ("compiled" if compiled_modules() else "plain")
    limit = doc["relay_hops_per_s"]  # the median of the limits measured beside each point
    assert limit == statistics.median(r["relay_hops_per_s"] for r in doc["rows"]) > 0
    dense = [pt for pt in bench_points(quick=True) if pt[1] == "lockstep" and pt[2] > 1]
    assert len(doc["rows"]) == (
        len(bench_points(quick=True))
        + len(dense)
        + len(wormhole_points(quick=True))
        + len(flit_load_points(True))
    )
    for row in doc["rows"]:
        assert set(row) >= FIELDS, FIELDS - set(row)
        assert BenchRow.from_json(row).to_json() == row  # the typed row is the JSON row, key for key
        assert row["complete"]
        assert row["cpu_s"] > 0 and row["hops_per_cpu_s"] > 0  # no sharded point in a plain --quick
        if row["switching"] == SWITCHING:
            assert row["runtime"] == "in-process" or (row["runtime"], row["clock"]) == ("engines", "lockstep")
            assert row["ratio"] == pytest.approx(row["packet_hops_per_s"] / row["relay_hops_per_s"], abs=1e-3)
        else:
            assert row["switching"] == "wormhole" and row["clock"] == "lockstep"
            assert row["ratio"] == pytest.approx(row["flit_hops_per_s"] / row["relay_hops_per_s"], abs=1e-3)
    plans = [r for r in doc["rows"] if r["workload"] == "random plan"]
    worm = {(r["runtime"], r["topology"]) for r in plans if r["switching"] == "wormhole"}
    assert worm == {(rt, spec) for spec, rt, _, _ in wormhole_points(quick=True)}
    # (f): the load workload on the engines and the model, the same flits moved
    load = {r["runtime"]: r for r in doc["rows"] if r["workload"] == "uniform load"}
    assert set(load) == {"engines", "model"}
    assert load["engines"]["flit_hops"] == load["model"]["flit_hops"] > 0
    # (e): each dense lockstep point again on the engines runtime, the same packets moved
    eng = {r["topology"]: r for r in doc["rows"] if r["runtime"] == "engines" and r["switching"] == SWITCHING}
    assert set(eng) == {pt[0] for pt in dense}
    for r in doc["rows"]:
        if r["runtime"] == "in-process" and r["topology"] in eng and r["clock"] == "lockstep":
            assert r["packet_hops"] == eng[r["topology"]]["packet_hops"]
            assert r["steps"] == eng[r["topology"]]["steps"]


def _wide_row(i: int) -> dict[str, Any]:
    """A bench row with the widest values a full ``--large --shards`` bench prints."""
    return {
        "topology": "torus:128x128", "runtime": "in-process", "shards": 64, "clock": "lockstep",
        "switching": "store-and-forward", "nodes": 16384, "multicasts": 100, "destinations": 50,
        "steps": 12345, "packet_hops": 12_345_678, "start_s": 123.456, "active_s": 99.5, "run_s": 123.4,
        "peak_rss_mb": 2345.6, "packet_hops_per_s": 12_345_678.9, "flit_hops_per_s": None,
        "steps_per_s": 12345.6, "relay_hops_per_s": 1_234_567.8, "ratio": 0.555,
        "run_packet_hops_per_s": 1_234_567.8 + i, "cpu_s": 123.456, "hops_per_cpu_s": 12_345_678.9,
    }  # fmt: skip


def test_bench_tables_fit_80_columns_with_whole_headings() -> None:
    from rich.console import Console

    from coordinator.cli.bench_command import TABLES, bench_tables

    rows = [BenchRow.from_json(_wide_row(i)) for i in range(12)]
    con = Console(width=80, record=True)
    for table in bench_tables(rows):
        con.print(table)
    text = con.export_text()
    assert "…" not in text  # neither a heading nor a value cut short
    assert max(len(line) for line in text.splitlines()) <= 80
    words = set(text.split())
    for _, columns in TABLES:
        for heading, _field in columns:
            assert set(heading.split()) <= words, heading
    for value in ("torus:128x128", "store-and-forward", "in-process", "12,345,678", "100×50", "2,346"):
        assert value in words, value
    assert text.count("torus:128x128") == 12


def test_the_committed_flit_load_rows_read_back_as_bench_rows() -> None:
    """``benchmarks/flit_load_bench.py`` writes bench rows plus ``best_of``: typed, they are the same."""
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parent.parent / "benchmarks").glob("flit-load-*.json"))
    assert files
    for path in files:
        for row in json.loads(path.read_text())["rows"]:
            typed = BenchRow.from_json(row)
            assert typed.ratio is not None and typed.relay_hops_per_s is not None
            assert {**typed.to_json(), "best_of": row["best_of"]} == row
