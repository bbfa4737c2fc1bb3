"""The fidelity verdict (issue 42, item 2): a run that the hosts outran says so, a faithful one says ok."""

from __future__ import annotations

import csv
import gzip
import random
from collections import defaultdict
from pathlib import Path

import pytest
import trio

from coordinator.analysis.fidelity import Delivery, judge, judge_groups
from coordinator.experiments.run import emulate_apart, measured, run_result
from coordinator.runtimes.hostload import parse_cpu
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology
from node.transport.linkmodel import Jitter, LinkModel, LinkSpec

STUDY = Path(__file__).resolve().parent.parent / "docs" / "reproductions" / "variation"
OLD_STUDY = Path(__file__).resolve().parent / "data" / "variation-2026-11-28-link.csv.gz"


def _model(d: float, sd: float) -> LinkModel:
    return LinkModel(LinkSpec(delay=d, jitter=Jitter("normal", sd)))


def _synthetic(host_sd_ns: float, host_mean_ns: float, seed: int = 3) -> list[list[Delivery]]:
    """Per destination, 30 repetitions of h draws of the link (1 ms, SD 0.25 ms) plus host time."""
    rng = random.Random(seed)
    groups = []
    for h in (1, 3, 6, 10):
        rows: list[Delivery] = []
        for _ in range(30):
            link = sum(max(0.0, rng.gauss(1e6, 0.25e6)) for _ in range(h))
            host = max(0.0, rng.gauss(h * host_mean_ns, host_sd_ns))
            rows.append((h, link + host, host, link))
        groups.append(rows)
    return groups


def test_hosts_that_add_little_are_ok_and_hosts_that_swamp_the_links_are_not() -> None:
    model = _model(0.001, 0.00025)
    ok = judge_groups(_synthetic(host_sd_ns=20e3, host_mean_ns=20e3), model)
    assert ok.ok is True and ok.hosts_share is not None and ok.hosts_share < 0.1
    assert ok.line().startswith("fidelity: ok")
    bad = judge_groups(_synthetic(host_sd_ns=5e6, host_mean_ns=3e6), model)
    assert bad.ok is False and bad.hosts_share is not None and bad.hosts_share > 0.9
    assert bad.line().startswith("fidelity: NOT ok") and "--time-dilation" in bad.line()
    assert ok.advised_dilation is None and bad.advised_dilation is not None
    assert bad.advised_dilation >= 2 and f"try --time-dilation {bad.advised_dilation:g} " in bad.line()


def test_the_thresholds_are_settings_and_dilation_divides_the_host_time() -> None:
    model = _model(0.001, 0.00025)
    groups = _synthetic(host_sd_ns=0.3e6, host_mean_ns=0.4e6)
    base = judge_groups(groups, model)
    assert base.ok is False  # 0.4 ms a hop over 25% of a 1 ms link
    assert judge_groups(groups, model, per_hop_max=1.0, share_max=1.0).ok is True
    # under dilation K the link model acts K times slower and the records are divided by K: the
    # same host time is K times smaller in them
    dilated: list[list[Delivery]] = []
    for g in groups:
        rows: list[Delivery] = []
        for h, _, host, link in g:
            assert host is not None and link is not None
            rows.append((h, (link * 10 + host) / 10, host / 10, link))
        dilated.append(rows)
    judged = judge_groups(dilated, model, dilation=10)
    assert judged.ok is True and "--time-dilation 10" in judged.line()


def test_no_link_model_is_named_not_judged() -> None:
    f = judge_groups(_synthetic(0, 0), None)
    assert f.ok is None and "hosts' own" in f.line()


def test_the_variation_study_of_28_nov_reads_not_ok() -> None:
    """The variation study as committed on 28 Nov 2026 (issue 42's anomaly; its link condition's
    kept deliveries kept in tests/data): its link-model runs were the hosts'."""
    groups: dict[tuple[str, ...], list[Delivery]] = defaultdict(list)
    with gzip.open(OLD_STUDY, "rt", newline="") as f:
        for r in csv.DictReader(f):
            key = (r["algorithm"], r["set"], r["node"])
            groups[key].append((int(r["hops"]), float(r["latency_ns"]), None, None))
    assert len(groups) > 200
    f_ = judge_groups(list(groups.values()), _model(0.001, 0.00025))
    assert f_.ok is False and f_.hosts_share is not None and f_.hosts_share > 0.9, f_.line()


def test_proc_stat_is_read_as_idle_and_total() -> None:
    text = "cpu  100 5 50 800 20 0 5 0 0 0\ncpu0 1 2 3 4\n"
    assert parse_cpu(text) == (820, 980)
    assert parse_cpu("intr 1 2 3\n") is None


def test_an_idle_in_process_physics_run_reads_ok() -> None:
    """Links slow against the hosts (100 ms, SD 30 ms) on an idle machine: the verdict is ok. (At
    20 ms, SD 5 ms an idle machine sat at the threshold: the sleeping shaper's timer lateness,
    1-1.5 ms a hop, made 25% of the per-node variance; at 50 ms, SD 15 ms, CI's machine on 7 Dec,
    idle but for a load average of 4.8 left by the tests before, was late 2.1 ms a hop: 28%.)"""
    mesh = Topology.parse("mesh:4x4")
    plan = Plan(mesh, tuple(Multicast(i, "vh", (0, 0), ((3, 3), (0, 3), (2, 1)), 0) for i in range(12)))
    settings = RunSettings(clock="free", port_model="all-port", link_model=_model(0.1, 0.03))
    raw = trio.run(measured, emulate_apart, plan, settings)
    result = run_result(plan, settings, raw)
    f = result.fidelity
    assert f is not None and f.cpu_idle_mean is not None and f.loadavg is not None
    if f.cpu_idle_mean < 0.4:  # other work had the CPUs: not this test's case (its line names the load)
        assert "CPU idle" in f.line()
        pytest.skip(
            f"the machine was busy (CPU idle {f.cpu_idle_mean:.0%}): an idle-machine test; {f.line()}"
        )
    assert f.ok is True, f.line()
    again = type(result).from_json(result.to_json())
    assert again.fidelity == result.fidelity


@pytest.mark.parametrize("dilation", [1.0, 4.0])
def test_judge_reads_results_records(dilation: float) -> None:
    assert judge([], _model(0.001, 0.0), dilation=dilation).ok is None  # nothing repeated to judge


def test_a_free_clock_sweep_carries_its_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from coordinator.cli import main

    out = tmp_path / "sweep"
    argv = ["sweep", "--topology", "mesh:4x4", "--algorithms", "vh", "--dests", "3", "--repeat", "2"]
    assert main([*argv, "--clock", "free", "--link-delay", "2ms", "--out", str(out)]) == 0
    assert "fidelity: " in capsys.readouterr().out
    doc = json.loads((out / "sweep.json").read_text())
    (verdict,) = doc["fidelity"]
    assert verdict["link_mean_ns"] == pytest.approx(2e6) and verdict["line"].startswith("fidelity: ")
