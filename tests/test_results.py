"""Results on disk (coordinator/output/results.py): a run directory written as a set, with the
user's umask, and no file of an earlier run left behind."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator.analysis.result_types import LinkUse, RunResult
from coordinator.output.results import atomic_write, write_run
from tests.helpers import arrival_record, multicast_record, run_record


def _doc(trace: bool, n: int = 2) -> RunResult:
    mcs = []
    for i in range(n):
        m = multicast_record(
            id=i, destinations=((1, 1),), time=2, traffic=2, distinct_links=2, mean_arrival=2.0, cv=0.0,
            arrivals=(arrival_record((1, 1), 2, hops=2, startups=1, wall_ns=5),),
        )  # fmt: skip
        if trace:
            m = replace(m, links=(LinkUse(frm=(0, 0), to=(1, 0), step=1),))
        mcs.append(m)
    return run_record(multicasts=tuple(mcs))


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_a_run_directory_has_exactly_the_new_runs_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    written = write_run(out, _doc(trace=True))
    assert {p.name for p in written} == {"run.json", "multicasts.csv", "arrivals.csv", "links.csv"}
    assert (out / "links.csv").read_text().count("\n") == 3
    write_run(out, _doc(trace=False, n=3))  # a later run without --trace
    assert sorted(p.name for p in out.iterdir()) == ["arrivals.csv", "multicasts.csv", "run.json"]
    assert len(json.loads((out / "run.json").read_text())["multicasts"]) == 3
    assert not [p for p in tmp_path.iterdir() if p.name != "out"], "no temporary sibling left"


def test_extra_files_are_part_of_the_set(tmp_path: Path) -> None:
    out = tmp_path / "out"
    written = write_run(out, _doc(trace=False), {"raw.json": "{}"})
    assert out / "raw.json" in written and (out / "raw.json").read_text() == "{}"


def test_files_and_directory_follow_the_umask(tmp_path: Path, umask_027: None) -> None:
    out = tmp_path / "out"
    write_run(out, _doc(trace=True))
    for p in out.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o640, p
    assert stat.S_IMODE(out.stat().st_mode) == 0o750
    atomic_write(tmp_path / "report.md", "x")
    assert stat.S_IMODE((tmp_path / "report.md").stat().st_mode) == 0o640


def test_a_directory_with_other_files_keeps_them_and_loses_only_stale_run_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, _doc(trace=True))
    (out / "notes.txt").write_text("mine")
    write_run(out, _doc(trace=False))
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / "links.csv").exists()
    assert sorted(p.name for p in out.iterdir()) == [
        "arrivals.csv",
        "multicasts.csv",
        "notes.txt",
        "run.json",
    ]
