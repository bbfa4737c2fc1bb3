"""Jitter: repetitions of one multicast never overlap, and the reported SD does not grow with them.

Injected together into one free-clock emulation, repetitions queue behind each other and a
node's wall-clock SD grows with their number (it measured the queue). Run apart (the default for
a repeated ``--dests``), each repetition is an emulation of its own, one after another.
"""

from __future__ import annotations

import csv
import itertools
import json
import statistics
from pathlib import Path

import pytest
import trio

from coordinator.analysis.metrics import jitter
from coordinator.cli import main
from coordinator.experiments.run import emulate_apart, result_document, run_result
from coordinator.output.report import JITTER_COLUMNS
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import explicit
from node.topology import Topology

DESTS = "0,0 7,7 1,6 6,1 4,4 0,5"
RUN = ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--source", "3,3", "--dests", DESTS]


def test_repetitions_apart_do_not_overlap_in_real_time() -> None:
    """Each repetition's injection comes after the previous repetition's last delivery."""
    topo = Topology.parse("mesh:8x8")
    plan = explicit(topo, ["vh"], (3, 3), [(0, 0), (7, 7), (1, 6), (6, 1)], repeat=6)
    raw = trio.run(emulate_apart, plan, RunSettings(clock="free"))
    spans = []
    for m in plan.multicasts:
        start = raw.injected[m.id][0]
        ends = [a.wall_ns for a in raw.arrivals if a.mc == m.id and a.wall_ns is not None]
        assert len(ends) == 4
        spans.append((start, max(ends)))
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start > end, "a repetition started before the previous one finished"
    doc = result_document(plan, RunSettings(clock="free"), raw)
    assert doc["run"]["complete"]
    assert {j["repetitions"] for j in doc["jitter"]} == {6}


def _median_sd(repeat: int) -> float:
    topo = Topology.parse("mesh:8x8")
    dests = [tuple(map(int, d.split(","))) for d in DESTS.split()]
    plan = explicit(topo, ["vh"], (3, 3), dests, repeat=repeat)  # type: ignore[arg-type]
    settings = RunSettings(clock="free")
    raw = trio.run(emulate_apart, plan, settings)
    sds = [j.wall_ns.sd for j in jitter(run_result(plan, settings, raw).multicasts)]
    measured = [s for s in sds if s is not None]
    assert len(measured) == len(sds) == len(dests)
    return statistics.median(measured)


def test_wall_clock_sd_does_not_grow_with_repetitions() -> None:
    """SD at 40 repetitions within a generous factor of SD at 5 (robust to a loaded machine).

    Injected together, SD grows about in proportion to the queue (measured 5 ms at 5, 17 ms at
    40). Apart, every repetition is a fresh sample of the same distribution; scheduling noise on
    a loaded machine makes a 5-sample SD vary, so the reference is the largest of three, with a
    floor of 2 ms, and the factor is 3. One preemption of ~20 ms among 40 samples alone adds
    ~3 ms of SD (a CI run at load 5 saw 3.4 ms), and noise only ever inflates an SD, so the 40's
    is the smaller of two runs; queueing (17 ms) still fails the bound of 6 ms.
    """
    sd5 = max(_median_sd(5) for _ in range(3))
    sd40 = min(_median_sd(40) for _ in range(2))
    assert sd40 <= 3 * max(sd5, 2_000_000), (sd5, sd40)


def test_run_prints_and_writes_jitter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main([*RUN, "--repeat", "4", "--clock", "free", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "jitter" in text and "repetitions apart" in text
    assert "median µs [95%" in text and "IQR µs" in text and "SD µs [95%" in text
    words = " ".join(text.split())  # the caption wraps
    assert "p95 needs 20 kept repetitions and p99 100" in words and "n = kept repetitions (4 here)" in words
    assert "the first 1 repetition of each multicast was run and discarded" in text
    with (out / "jitter.csv").open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == JITTER_COLUMNS
        rows = list(reader)
    assert len(rows) == 6
    assert {r["repetitions"] for r in rows} == {"4"}
    for r in rows:
        assert float(r["wall_us_sd"]) >= 0 and r["host"]
        assert float(r["wall_us_median"]) > 0 and r["wall_us_p95"] == r["wall_us_p99"] == "—"  # 4 kept
        assert r["wall_us_median_ci95_low"] == "—" and float(r["wall_us_sd_ci95_high"]) >= float(
            r["wall_us_sd"]
        )
        assert float(r["wall_us_iqr"]) >= 0 and float(r["step_iqr"]) == 0  # one path: same steps
    for name in ("jitter.png", "latency-hops.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((out / "run.json").read_text())
    assert doc["run"]["repetitions"] == "apart"
    assert (doc["run"]["warmup_repeats"], doc["run"]["warmup_discarded"]) == (1, 1)
    assert [m["id"] for m in doc["multicasts"]] == [1, 2, 3, 4]  # id 0, the warm-up, left out


def test_inject_every_spaces_lockstep_repetitions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--repeat", "3", "--inject-every", "50", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # the warm-up repetition (1 by default) is injected at step 0 and left out of the results
    assert [m["injected"] for m in doc["multicasts"]] == [50, 100, 150]
    assert doc["run"]["warmup_discarded"] == 1
    assert doc["run"]["repetitions"] == "every 50 steps"
    assert {m["time"] for m in doc["multicasts"]} == {8}
    assert all(j["step_sd"] == 0 and j["step_mean"] > 0 for j in doc["jitter"])


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--clock", "free", "--inject-every", "10"], "free clock does not follow"),
        (["--inject-every", "10", "--together"], "not both"),
        (["--inject-every", "0"], "--inject-every must be at least 1"),
    ],
)
def test_inject_every_misuse(extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--repeat", "2", *extra]) == 2
    assert needle in capsys.readouterr().err


def test_out_refuses_a_non_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "old.txt").write_text("earlier results")
    assert main([*RUN, "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err and not (tmp_path / "run.json").exists()
    assert main([*RUN, "--out", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "run.json").exists() and (tmp_path / "old.txt").exists()
