"""Warm-up repetitions (``run --warmup-repeats``): run first, then left out of every result.

The first repetitions of a multicast may run cold; a warm-up repetition is emulated like the
others (the raw run holds it) and the results hold only the repetitions after it. In lockstep the
kept repetitions' records equal those of a run without warm-up.
"""

from __future__ import annotations

import argparse
import json

import pytest
import trio

from coordinator.cli import main
from coordinator.cli.run_command import plan_from
from coordinator.experiments.run import emulate, emulate_apart, result_document
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import explicit
from node.topology import Topology

DESTS = "0,0 7,7 1,6 6,1 4,4 0,5"
RUN = ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--source", "3,3", "--dests", DESTS]


def _without_clock(record: dict[str, object]) -> dict[str, object]:
    """A multicast record without its id and what the wall clock decides."""
    out = {k: v for k, v in record.items() if k not in ("id", "cv_wall")}
    out["arrivals"] = [
        {k: v for k, v in a.items() if k not in ("wall_ns", "host")}
        for a in record["arrivals"]  # type: ignore[attr-defined]
    ]
    return out


def test_warmup_marks_the_first_repetitions_of_each_algorithm() -> None:
    topo = Topology.parse("mesh:8x8")
    plan = explicit(topo, ["vh", "dist"], (3, 3), [(0, 0), (7, 7)], repeat=3, warmup=2)
    assert len(plan.multicasts) == 10 and plan.warmup_repeats == 2
    assert plan.warmup == {0, 1, 5, 6}
    assert [m.algorithm for m in plan.multicasts if m.id in plan.warmup] == ["vh", "vh", "dist", "dist"]
    assert explicit(topo, ["vh"], (3, 3), [(0, 0)], repeat=3).warmup == frozenset()


def test_warmup_repetitions_run_first_and_are_discarded() -> None:
    """The raw run holds every repetition; the document only the ones after the warm-up."""
    topo = Topology.parse("mesh:8x8")
    plan = explicit(topo, ["vh"], (3, 3), [(0, 0), (7, 7), (1, 6)], repeat=3, warmup=2)
    settings = RunSettings(clock="free")
    raw = trio.run(emulate_apart, plan, settings)
    assert set(raw.injected) == {0, 1, 2, 3, 4}  # the warm-up ran
    doc = result_document(plan, settings, raw)
    assert [m["id"] for m in doc["multicasts"]] == [2, 3, 4]
    assert (doc["run"]["warmup_repeats"], doc["run"]["warmup_discarded"]) == (2, 2)
    cold = max(raw.injected[i][0] for i in (0, 1))
    assert all(raw.injected[i][0] > cold for i in (2, 3, 4)), "a kept repetition ran before the warm-up"
    assert {j["repetitions"] for j in doc["jitter"]} == {3}
    assert doc["summary"]["time"]["n"] == 3 and doc["summary"]["cv_wall"]["n"] == 3
    assert doc["run"]["complete"]


@pytest.mark.parametrize("apart", [True, False])
def test_lockstep_records_after_a_warmup_equal_a_run_without(apart: bool) -> None:
    topo = Topology.parse("mesh:8x8")
    dests = [(0, 0), (7, 7), (1, 6), (6, 1), (4, 4), (0, 5)]
    settings = RunSettings()  # lockstep, in-process
    docs = []
    for warmup in (0, 3):
        plan = explicit(topo, ["vh", "dist"], (3, 3), dests, repeat=4, warmup=warmup)
        raw = trio.run(emulate_apart if apart else emulate, plan, settings)
        docs.append(result_document(plan, settings, raw))
    plain, warmed = docs
    assert warmed["run"]["warmup_discarded"] == 6 and plain["run"]["warmup_discarded"] == 0
    assert [_without_clock(m) for m in warmed["multicasts"]] == [
        _without_clock(m) for m in plain["multicasts"]
    ]
    assert [m["id"] for m in warmed["multicasts"]] == [3, 4, 5, 6, 10, 11, 12, 13]
    for key in ("time", "traffic", "additional_traffic", "mean_arrival", "cv"):
        assert warmed["summary"][key] == plain["summary"][key]
    strip = ("wall_ns_", "host")
    rows = [[{k: v for k, v in j.items() if not k.startswith(strip)} for j in d["jitter"]] for d in docs]
    assert rows[0] == rows[1] and len(rows[0]) == 12


def test_warmup_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """1 when --dests is repeated, none for a single multicast unless asked for."""
    cases = [(["--repeat", "1"], (0, 0), 1), (["--repeat", "2"], (1, 1), 2),
             (["--repeat", "1", "--warmup-repeats", "2"], (2, 2), 1),
             (["--repeat", "3", "--warmup-repeats", "0"], (0, 0), 3)]  # fmt: skip
    for extra, (n, gone), kept in cases:
        assert main([*RUN, *extra, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert (doc["run"]["warmup_repeats"], doc["run"]["warmup_discarded"]) == (n, gone), extra
        assert len(doc["multicasts"]) == kept
    random = ["run", "--topology", "mesh:6x6", "--algorithm", "vh", "--random-dests", "3", "--repeat", "3"]
    assert main([*random, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["warmup_discarded"] == 0


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("-1", "--warmup-repeats must be at least 0, got -1"),
        ("1.5", "argument --warmup-repeats: invalid int value: '1.5'"),
        ("two", "argument --warmup-repeats: invalid int value: 'two'"),
        ("100001", "--warmup-repeats must be at most 100,000"),
    ],
)
def test_bad_warmup_repeats_exit_2_with_one_line(
    value: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*RUN, "--repeat", "3", f"--warmup-repeats={value}"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert needle in line


def test_warmup_repeats_need_a_repeated_multicast(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "run",
        "--topology",
        "mesh:6x6",
        "--algorithm",
        "vh",
        "--random-dests",
        "3",
        "--warmup-repeats",
        "1",
    ]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "--warmup-repeats applies to repetitions of one --dests multicast" in line


def test_commands_without_the_option_get_no_warmup() -> None:
    """``coordinate`` and ``compose`` build their plan with plan_from but offer no --warmup-repeats."""
    args = argparse.Namespace(algorithm="vh", repeat=3, random_dests=None, seed=1, param=[],
                              source="3,3", dests=DESTS, mcast_set=None)  # fmt: skip
    plan = plan_from(args, Topology.parse("mesh:8x8"))
    assert len(plan.multicasts) == 3 and plan.warmup == frozenset() and plan.warmup_repeats == 0
    args.warmup_repeats = None  # run's default
    assert plan_from(args, Topology.parse("mesh:8x8")).warmup == {0}
