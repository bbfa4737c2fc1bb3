"""Sweeps: destination-count parsing, one emulation per sweep, same sets for every algorithm, CSVs."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import coordinator.experiments.sweep as sweep_mod
from coordinator.analysis.metrics import ci95
from coordinator.cli import main
from coordinator.experiments.sweep import SUMMARY_COLUMNS, TIDY_COLUMNS, parse_dests, run_sweep, sweep_plan
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import PlanError
from node.topology import Topology

ALGS = ["diag", "pair", "min"]


@pytest.mark.parametrize(
    ("text", "ks"),
    [
        ("20:380:20", list(range(20, 381, 20))),
        ("5:9:2", [5, 7, 9]),
        ("5:10:2", [5, 7, 9]),
        ("7:7:1", [7]),
        ("5,10,20", [5, 10, 20]),
        (" 12 ", [12]),
    ],
)
def test_parse_dests(text: str, ks: list[int]) -> None:
    assert parse_dests(text) == ks


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("1:2", "start:stop:step"),
        ("a:5:1", "integers"),
        ("5:10:0", "step"),
        ("0:10:5", "at least 1"),
        ("10:5:1", "below start"),
        ("5,x", "not an integer"),
        ("5,5", "twice"),
        ("-3", "at least 1"),
    ],
)
def test_parse_dests_refuses(text: str, words: str) -> None:
    with pytest.raises(PlanError, match=words):
        parse_dests(text)


def test_same_sets_for_every_algorithm() -> None:
    plan, points = sweep_plan(Topology.parse("mesh:8x8"), ALGS, [3, 10], 4, 7, (0, 0))
    assert len(plan.multicasts) == len(ALGS) * 2 * 4
    sets: dict[tuple[int, int], dict[str, Any]] = defaultdict(dict)
    for m, (k, rep) in zip(plan.multicasts, points, strict=True):
        assert len(m.destinations) == k
        sets[(k, rep)][m.algorithm] = (m.source, m.destinations)
    assert len(sets) == 8
    for by_alg in sets.values():
        assert set(by_alg) == set(ALGS)
        assert len(set(by_alg.values())) == 1
    # the repetitions are different draws
    assert len({v["diag"] for v in sets.values()}) == 8


def test_run_sweep_is_one_emulation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = sweep_mod.emulate

    async def counting(plan: Any, settings: Any, progress: Any = None) -> Any:
        calls.append(len(plan.multicasts))
        return await real(plan, settings, progress)

    monkeypatch.setattr(sweep_mod, "emulate", counting)
    seen: list[tuple[int, int]] = []
    tidy, summary = run_sweep(
        "mesh:6x6", ALGS, [2, 5, 9], 3, 11, (0, 0), RunSettings(), lambda d, t: seen.append((d, t))
    )
    assert calls == [len(ALGS) * 3 * 3]
    assert len(tidy) == 27 and len(summary) == 9
    assert seen and seen[-1][0] == seen[-1][1] == sum(k for k in (2, 5, 9)) * 3 * len(ALGS)
    for r in tidy:
        assert r["missing"] == 0
        assert r["additional_traffic"] == r["traffic"] - r["k"]
        assert r["time"] >= 1
    # summary = mean and CI of the tidy rows
    for s in summary:
        rows = [r for r in tidy if (r["algorithm"], r["k"]) == (s["algorithm"], s["k"])]
        assert s["n"] == s["complete"] == 3
        c = ci95([r["traffic"] for r in rows])
        assert s["traffic_mean"] == pytest.approx(c["mean"], abs=1e-6)
        assert s["traffic_ci_low"] == pytest.approx(c["ci95"][0], abs=1e-6)


def test_random_source_is_shared_too() -> None:
    plan, points = sweep_plan(Topology.parse("torus:5x5"), ["vh", "pair"], [4], 6, 2, None)
    by_set: dict[tuple[int, int], set[Any]] = defaultdict(set)
    for m, p in zip(plan.multicasts, points, strict=True):
        by_set[p].add((m.source, m.destinations))
    assert all(len(v) == 1 for v in by_set.values())
    assert len({next(iter(v))[0] for v in by_set.values()}) > 1  # sources do vary


def test_shared_contention_refused() -> None:
    with pytest.raises(PlanError, match="isolated"):
        run_sweep("mesh:4x4", ["vh"], [2], 1, 1, (0, 0), RunSettings(contention="shared"))


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def test_sweep_command_writes_csvs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sw"
    rc = main(
        [
            "sweep",
            "--topology",
            "mesh:7x7",
            "--algorithms",
            "diag,pair,min",
            "--dests",
            "4:12:4",
            "--repeat",
            "5",
            "--seed",
            "3",
            "--source",
            "0,0",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    header, tidy = _read(out / "tidy.csv")
    assert tuple(header) == TIDY_COLUMNS
    assert len(tidy) == 3 * 3 * 5
    assert {(r["algorithm"], r["k"], r["repetition"]) for r in tidy} == {
        (a, str(k), str(rep)) for a in ALGS for k in (4, 8, 12) for rep in range(5)
    }
    assert all(r["source"] == "0,0" and r["missing"] == "0" and r["topology"] == "mesh:7x7" for r in tidy)
    sheader, summary = _read(out / "summary.csv")
    assert tuple(sheader) == SUMMARY_COLUMNS
    assert len(summary) == 9
    for s in summary:
        rows = [r for r in tidy if (r["algorithm"], r["k"]) == (s["algorithm"], s["k"])]
        assert int(s["n"]) == len(rows) == 5
        for metric in ("time", "traffic", "additional_traffic", "mean_arrival", "cv"):
            c = ci95([float(r[metric]) for r in rows])
            assert float(s[f"{metric}_mean"]) == pytest.approx(c["mean"], abs=1e-5)
            assert float(s[f"{metric}_ci_low"]) == pytest.approx(c["ci95"][0], abs=1e-5)
            assert float(s[f"{metric}_ci_high"]) == pytest.approx(c["ci95"][1], abs=1e-5)
            assert float(s[f"{metric}_ci_low"]) <= float(s[f"{metric}_mean"]) <= float(s[f"{metric}_ci_high"])
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["complete"] and meta["ks"] == [4, 8, 12] and meta["multicasts"] == 45
    assert not math.isnan(float(summary[0]["cv_mean"]))
    assert "mean time / traffic" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--dests", "5:1:1"], "below start"),
        (["--dests", "40"], "between 1 and 15"),
        (["--contention", "shared"], "isolated"),
        (["--algorithms", "diag,nosuch"], "unknown algorithm"),
        (["--algorithms", "diag,diag"], "twice"),
        (["--source", "9,9"], "outside"),
        (["--repeat", "0"], "at least 1"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--chunk", "-5"], "--chunk must be at least 0"),
        (["--topology", "ring:4"], "cannot read topology"),
    ],
)
def test_sweep_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], words: str
) -> None:
    args = {"--topology": "mesh:4x4", "--algorithms": "diag", "--dests": "2", "--out": str(tmp_path / "x")}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        args[flag] = value
    argv = ["sweep"] + [t for kv in args.items() for t in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err
    assert not (tmp_path / "x").exists()


def test_chunks_and_jobs_change_no_number() -> None:
    """Isolated contention: dealing a sweep into emulations, in this process or in workers, is exact."""
    args = ("torus:6x5", ["vh", "pair", "min"], [3, 7, 12], 4, 5, (2, 1), RunSettings())
    whole = sweep_mod.sweep(*args, chunk=0)
    dealt = sweep_mod.sweep(*args, chunk=7)
    pooled = sweep_mod.sweep(*args, chunk=10, jobs=2)
    assert whole.emulations == 1 and dealt.emulations == 6 and pooled.emulations == 4
    assert whole.tidy == dealt.tidy == pooled.tidy
    assert whole.summary == dealt.summary == pooled.summary
    assert whole.complete and dealt.complete and pooled.complete


def test_progress_counts_every_delivery_across_emulations() -> None:
    seen: list[tuple[int, int]] = []
    res = sweep_mod.sweep(
        "mesh:5x5",
        ["vh", "diag"],
        [2, 6],
        3,
        1,
        (0, 0),
        RunSettings(),
        lambda d, t: seen.append((d, t)),
        chunk=5,
    )
    assert res.emulations == 3
    total = (2 + 6) * 3 * 2
    assert all(t == total for _, t in seen) and seen[-1][0] == total
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.parametrize(("jobs", "chunk", "words"), [(0, 10, "--jobs"), (1, -1, "--chunk")])
def test_sweep_refuses_bad_jobs_and_chunk(jobs: int, chunk: int, words: str) -> None:
    with pytest.raises(PlanError, match=words):
        sweep_mod.sweep("mesh:4x4", ["vh"], [2], 1, 1, (0, 0), RunSettings(), jobs=jobs, chunk=chunk)


def test_the_progress_bar_label_names_what_it_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar counts deliveries: its label says so, and the count it reaches is the label's."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from coordinator.cli import sweep_command
    from coordinator.cli.sweep_command import progress_label

    assert progress_label(["a", "b", "c"], [100, 300], 35) == (
        "sweep: 42000 deliveries of 210 multicasts",
        42000,
    )
    assert progress_label(["vh"], [1], 1) == ("sweep: 1 delivery of 1 multicast", 1)
    labels: list[str] = []
    counts: list[tuple[int, int]] = []

    @contextmanager
    def bar(label: str) -> Iterator[Any]:
        labels.append(label)
        yield lambda done, total: counts.append((done, total))

    monkeypatch.setattr(sweep_command, "progress", bar)
    argv = ["sweep", "--topology", "mesh:6x6", "--algorithms", "vh,dp", "--dests", "3,5", "--repeat", "2",
            "--jobs", "1", "--out", str(tmp_path / "s")]  # fmt: skip
    assert main(argv) == 0
    label, total = progress_label(["vh", "dp"], [3, 5], 2)
    assert labels == [label] == ["sweep: 32 deliveries of 8 multicasts"]
    assert counts and {t for _, t in counts} == {total} and counts[-1] == (total, total)
