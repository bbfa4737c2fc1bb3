"""The result tree (coordinator/analysis/result_types.py) reads back the documents meshcast writes.

``RunResult.from_json(doc).to_json() == doc`` on real ``--json`` documents (key order included,
so run.json's text is unchanged), and ``from_json(to_json(r)) == r`` for records hypothesis draws.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.analysis.result_types import (
    CI,
    ArrivalResult,
    JitterResult,
    LinkUse,
    MulticastLatency,
    MulticastResult,
    RunResult,
    Spread,
    Summary,
)
from coordinator.cli import main

SRC = ["--source", "2,2", "--dests", "0,0 5,5 1,4"]
COMMANDS = {
    "random sets, two algorithms": ["--algorithm", "vh,pair", "--random-dests", "6", "--repeat", "3"],
    "jitter (repetitions apart)": ["--algorithm", "vh", *SRC, "--repeat", "3"],
    "free clock": ["--algorithm", "vh", *SRC, "--repeat", "2", "--clock", "free"],
    "trace": ["--algorithm", "pair", *SRC, "--trace"],
    "timing": [
        "--algorithm",
        "vh,pair",
        "--random-dests",
        "5",
        "--repeat",
        "2",
        "--latency-model",
        "wormhole",
    ],
    "wormhole switching": [
        "--algorithm",
        "vh",
        "--random-dests",
        "4",
        "--repeat",
        "2",
        "--switching",
        "wormhole",
    ],
    "wormhole trace (worms)": [
        "--algorithm",
        "dp",
        *SRC,
        "--switching",
        "wormhole",
        "--flits",
        "8",
        "--trace",
    ],
    "together": ["--algorithm", "vh", *SRC, "--repeat", "3", "--together"],
    "incomplete": ["--algorithm", "vh", *SRC, "--max-steps", "2"],
    "link model, predict": [
        "--algorithm",
        "vh",
        *SRC,
        "--repeat",
        "3",
        "--clock",
        "free",
        "--link-delay",
        "0.0005",
        "--predict",
    ],
    "mcast set": ["--algorithm", "vh", "--mcast-set", "random", "--d", "3", "--c", "2"],
}


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_run_document_reads_back_unchanged(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    main(["run", "--topology", "mesh:6x6", *args, "--json"])
    text = capsys.readouterr().out
    doc = json.loads(text)
    again = RunResult.from_json(doc).to_json()
    assert again == doc
    assert json.dumps(again) == text.strip()  # the same keys in the same order


coords = st.tuples(st.integers(0, 31), st.integers(0, 31))
maybe_float = st.none() | st.floats(allow_nan=False)
cis = st.builds(CI, mean=maybe_float, low=maybe_float, high=maybe_float, n=st.integers(0, 100))
arrivals = st.builds(
    ArrivalResult,
    node=coords,
    step=st.integers(0, 10**6),
    hops=st.integers(0, 100),
    startups=st.integers(0, 10),
    wall_ns=st.none() | st.integers(0, 10**12),
    host=st.none() | st.text(max_size=5),
    latency=maybe_float,
)
multicasts = st.builds(
    MulticastResult,
    id=st.integers(0, 10**6),
    algorithm=st.sampled_from(["vh", "pair", "dp"]),
    source=coords,
    destinations=st.lists(coords, max_size=5).map(tuple),
    injected=st.integers(0, 100),
    time=st.none() | st.integers(0, 1000),
    traffic=st.integers(0, 1000),
    distinct_links=st.integers(0, 1000),
    additional_traffic=st.integers(-10, 1000),
    mean_arrival=maybe_float,
    cv=maybe_float,
    cv_wall=maybe_float,
    missing=st.lists(coords, max_size=3).map(tuple),
    duplicates=st.integers(0, 3),
    stray=st.integers(0, 3),
    arrivals=st.lists(arrivals, max_size=4).map(tuple),
    links=st.none()
    | st.lists(st.builds(LinkUse, frm=coords, to=st.none() | coords, step=st.integers(0, 99))).map(tuple),
    latency=st.none()
    | st.builds(
        MulticastLatency, model=st.just("wormhole"), max=maybe_float, mean=maybe_float, cv=maybe_float
    ),
)
spreads = st.builds(
    Spread,
    mean=maybe_float,
    sd=maybe_float,
    median=maybe_float,
    iqr=maybe_float,
    p95=maybe_float,
    p99=maybe_float,
    median_ci=st.none() | st.tuples(st.floats(allow_nan=False), st.floats(allow_nan=False)),
    sd_ci=st.none() | st.tuples(st.floats(allow_nan=False), st.floats(allow_nan=False)),
)


@given(multicasts)
def test_a_multicast_record_survives_json(m: MulticastResult) -> None:
    assert MulticastResult.from_json(json.loads(json.dumps(m.to_json()))) == m


@given(
    st.builds(Summary, time=cis, traffic=cis, additional_traffic=cis, mean_arrival=cis, cv=cis, cv_wall=cis)
)
def test_a_summary_survives_json(s: Summary) -> None:
    assert Summary.from_json(json.loads(json.dumps(s.to_json()))) == s


@given(
    st.builds(
        JitterResult,
        algorithm=st.just("vh"),
        source=coords,
        node=coords,
        repetitions=st.integers(2, 50),
        steps=spreads,
        wall_ns=spreads,
        host=st.none() | st.just("vm"),
    )
)
def test_a_jitter_row_survives_json(j: JitterResult) -> None:
    assert JitterResult.from_json(json.loads(json.dumps(j.to_json()))) == j
