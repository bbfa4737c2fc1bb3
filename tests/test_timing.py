import pytest

from coordinator.analysis.timing import Timing, apply_timing
from coordinator.cli import main
from tests.helpers import arrival_record, multicast_record


def test_wormhole_is_seed_004_equation_7() -> None:
    t = Timing("wormhole", ts=33, beta=1, flits=64)
    assert t.latency(step=99, hops=18, startups=1) == 33 + 64 + 18
    assert t.latency(step=99, hops=5, startups=2) == 2 * (33 + 64) + 5


def test_store_and_forward_counts_steps() -> None:
    t = Timing("store-and-forward", beta=2, flits=10, router=3)
    assert t.latency(step=4, hops=99, startups=9) == 4 * (10 * 2 + 3)


def test_apply_timing_per_multicast() -> None:
    recs = [multicast_record(arrivals=(arrival_record((1, 0), 1, 1, 1), arrival_record((3, 0), 3, 3, 1)))]
    (timed,) = apply_timing(recs, Timing("wormhole", ts=0, beta=1, flits=1))
    assert timed.latency is not None
    assert timed.latency.to_json() == {"model": "wormhole", "max": 4, "mean": 3, "cv": pytest.approx(1 / 3)}
    assert [a.latency for a in timed.arrivals] == [2, 4]


def test_bad_timing_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "run",
        "--topology",
        "mesh:4x4",
        "--algorithm",
        "dp",
        "--random-dests",
        "3",
        "--timing",
        "wormhole",
    ]
    assert main([*argv, "--flits", "0"]) == 2
    assert "--flits" in capsys.readouterr().err
