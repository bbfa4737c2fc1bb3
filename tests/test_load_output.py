"""``meshcast load``'s machine-readable output and BookSim2's conventions as options.

The JSON fields are checked against a run whose counts follow by hand (a 3×1 mesh, bit-complement
traffic, one message every 20 cycles from each node): the end nodes send each other 4-flit worms
over 2 hops in opposite directions (no contention), the middle node addresses itself.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli import main
from coordinator.experiments.load import Judge, Traffic, load_point, traffic_plan
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import PlanError
from node.topology import Topology

L, RATE, DURATION = 4, 0.05, 400
HAND = ["load", "--topology", "mesh:3x1", "--algorithms", "unicast", "--dests", "1", "--traffic", "bitcomp",
        "--injection", "periodic", "--rates", str(RATE), "--duration", str(DURATION),
        "--switching", "wormhole", "--flits", str(L), "--ts", "0", "--runtime", "model"]  # fmt: skip


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)  # one document and nothing else on stdout
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("judge", ["batches", "converge"])
def test_json_fields_of_a_run_counted_by_hand(
    judge: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _json([*HAND, "--judge", judge, "--warmup", "0", "--out", str(tmp_path)], capsys)
    assert json.loads((tmp_path / "load.json").read_text()) == doc  # the same document in the results
    (p,) = doc["points"]
    per_source = DURATION * RATE  # periodic: steps 0, 20, ..., 380
    network = 2 * per_source  # (0,0) -> (2,0) and (2,0) -> (0,0); (1,0) addresses itself
    assert p["self_addressed"] == per_source
    assert p["flit_hops"] == p["link_sends"] == network * L * 2
    last = (per_source - 1) / RATE
    assert p["cycles"] == last + 2 + L  # the last worm: injected at 380, its tail in 2 + L cycles later
    assert p["flits_per_packet"] == L
    assert doc["settings"]["max_steps"] == DURATION * 4  # --budget-factor 4
    assert doc["settings"]["router"] == "paper"  # how it was timed: the papers' 1-cycle router
    assert doc["settings"]["router_timing"]["link_latency"] == 1
    assert doc["settings"]["router_timing"]["vc_alloc_delay"] == 0
    lo, hi = p["window"]
    sent = 3 * (hi - lo) * RATE  # packets created in the window, all nodes
    assert p["offered_packets"] == pytest.approx(sent / (3 * (hi - lo)))
    assert p["offered_flits"] == pytest.approx(p["offered_packets"] * L)
    assert p["accepted_packets"] == pytest.approx(RATE) and p["accepted_flits"] == pytest.approx(RATE * L)
    # zero load: hops + L + Ts for the worms, Ts + L for a self-addressed message (BookSim2 delivers it)
    assert p["latency"] == pytest.approx((2 * (2 + L) + L) / 3)
    assert p["latency_ci95"][0] <= p["latency"] <= p["latency_ci95"][1]
    assert p["deadlock_cycle"] is None and p["saturated"] is None and p["ran"]
    assert p["verdict"] == ("stable" if judge == "batches" else "converged")
    if judge == "converge":  # constant latency and deliveries: the first three running periods are calm
        assert p["why"] == "converged: periods 4–6 within 5%" and p["window"] == [120, 240]
        assert [q["state"] for q in p["periods"]] == ["warming up"] * 3 + ["running"] * 3
    assert p["wall_s"] > 0 and p["cpu_s"] > 0 and p["peak_queue"] == 0  # no worm ever waits
    rows = (tmp_path / "load.csv").read_text().splitlines()
    head = (
        "algorithm,rate,offered,throughput,latency,ci95_low,ci95_high,saturated,messages,peak_queue,verdict,"
    )
    assert rows[0].startswith(head)  # today's columns first, the new ones after
    assert "max-steps = 1600" in (tmp_path / "config.toml").read_text()  # the bound the run used


def test_store_and_forward_has_no_flits(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--dests", "3", "--rates", "0.01",
            "--duration", "400"]  # fmt: skip
    (p,) = _json(argv, capsys)["points"]
    assert p["flits_per_packet"] is None and p["flit_hops"] is None and p["offered_flits"] is None
    assert p["link_sends"] > 0 and p["offered_packets"] == pytest.approx(p["offered_deliveries"])
    assert p["offered_packets"] == pytest.approx(3 * 0.01, rel=0.5)  # three packets (deliveries) a message


def test_console_gives_units_and_four_digits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*HAND, "--rates", "0.0266"]) == 0
    out = capsys.readouterr().out
    assert "rate 0.0266 packets/node/cycle" in out
    assert "(0.1064 flits)" in out or "flits)" in out
    assert "converged: periods" in out


def test_json_keeps_stdout_for_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*HAND, "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n") == 1 and "packets/node/cycle" in captured.err


@pytest.mark.parametrize(
    "timing",
    [{}, {"router": "booksim"}, {"router": "booksim", "link_latency": 2, "credit_delay": 1}],
    ids=["paper", "booksim", "booksim-long-links"],
)
def test_peak_queue_of_the_model_equals_the_engines_on_a_loaded_run(timing: dict[str, Any]) -> None:
    """Also under router timing: flits on a longer link or credits on their way are in no buffer."""
    topo = Topology.parse("torus:4x4")
    s = RunSettings(contention="shared", switching="wormhole", flits=8, ts=0, vcs=2, buffer_flits=4,
                    max_steps=4000, **timing)  # fmt: skip
    traffic = Traffic(0.06, 1, 600, seed=2)
    model = load_point(topo, "unicast", traffic, replace(s, runtime="model"), warmup=100)
    engines = load_point(topo, "unicast", traffic, replace(s, runtime="engines"), warmup=100)
    assert model.peak_queue == engines.peak_queue > 4  # worms wait in more than one buffer of a node
    assert model.link_sends == engines.link_sends > 0
    assert model == engines


def test_monotone_once_unstable_higher_rates_are_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "unicast", "--dests", "1", "--switching",
            "wormhole", "--flits", "8", "--ts", "0", "--runtime", "model", "--rates", "0.3,0.01,0.2",
            "--duration", "1000"]  # fmt: skip
    doc = _json(argv, capsys)
    got = [(p["rate"], p["ran"], p["verdict"]) for p in doc["points"]]
    assert [r for r, _, _ in got] == [0.01, 0.2, 0.3]  # from the lowest rate up
    assert got[0][2] == "converged" and got[1][:2] == (0.2, True) and got[1][2] == "unstable"
    assert got[2] == (0.3, False, "unstable") and "0.2 was unstable" in doc["points"][2]["why"]
    assert doc["points"][2]["accepted_packets"] is None and doc["points"][2]["throughput_deliveries"] is None


def test_an_overloaded_point_passes_the_latency_bound() -> None:
    topo = Topology.parse("mesh:4x4")
    s = RunSettings(
        contention="shared", switching="wormhole", flits=8, ts=0, runtime="model", max_steps=40000
    )
    p = load_point(topo, "unicast", Traffic(0.2, 1, 4000, seed=1), s, 0, judge=Judge(400, latency_bound=200))
    assert p.verdict == "unstable" and p.latency is None
    assert p.why.startswith("unstable: latency") and "> bound 200 in period" in p.why
    last = p.periods[-1]
    assert last["latency_with_in_flight"] > 200 and all(
        q["latency_with_in_flight"] <= 200 for q in p.periods[:-1]
    )


def test_deadlock_cycle_is_reported() -> None:
    topo = Topology.parse("torus:6x6")  # one VC on a torus: DOR deadlocks under load (docs/wormhole.md)
    s = RunSettings(
        contention="shared", switching="wormhole", flits=16, ts=0, runtime="model", max_steps=4000
    )
    p = load_point(topo, "unicast", Traffic(0.03, 1, 1000, seed=1), s, 100, judge=Judge(100))
    assert p.deadlock_cycle is not None and p.verdict == "unstable"
    assert f"deadlock at cycle {p.deadlock_cycle}" in p.why or "undelivered" in p.why


# -- traffic patterns, injection, self-addressed ------------------------------------------------------
MESH = Topology.parse("mesh:4x4")


def test_transpose_bitcomp_and_hotspot_send_where_booksim_does() -> None:
    for pattern, where in (
        ("transpose", lambda x, y: (y, x)),
        ("bitcomp", lambda x, y: (3 - x, 3 - y)),
        ("hotspot", lambda x, y: (1, 2)),
    ):
        made = traffic_plan(MESH, "unicast", Traffic(0.05, 1, 400, hotspot=(1, 2), pattern=pattern, seed=4))
        assert made.plan.multicasts
        for m in made.plan.multicasts:
            assert m.destinations == (where(*m.source),) and m.source != m.destinations[0]
        selves = {src for _, src in made.selves}
        assert selves == {n for n in MESH.nodes() if where(*n) == n}  # transpose: the diagonal


def test_bitcomp_is_booksims_bit_complement_of_the_node_number() -> None:
    made = traffic_plan(MESH, "unicast", Traffic(0.05, 1, 200, pattern="bitcomp", seed=1))
    for m in made.plan.multicasts:
        (sx, sy), ((dx, dy),) = m.source, m.destinations
        assert dy * 4 + dx == ~(sy * 4 + sx) & 15  # BookSim2 numbers node (x, y) y·k + x


def test_bernoulli_injection_is_at_most_one_per_step_at_the_rate() -> None:
    made = traffic_plan(MESH, "unicast", Traffic(0.3, 1, 1000, injection="bernoulli", seed=2))
    steps: dict[tuple[int, int], list[int]] = {}
    for m in made.plan.multicasts:
        steps.setdefault(m.source, []).append(m.step)
    assert all(len(v) == len(set(v)) for v in steps.values())  # one coin per step and source
    expected = 0.3 * 16 * 1000
    assert abs(len(made.plan.multicasts) - expected) < 4 * (expected * 0.7) ** 0.5


@pytest.mark.parametrize("rate", [0.25, 1.0, 2.5])
def test_periodic_injection_makes_rate_times_duration_messages_a_source(rate: float) -> None:
    """Above one message a step as below: none merged with another made at the same step."""
    made = traffic_plan(MESH, "unicast", Traffic(rate, 1, 40, injection="periodic", seed=1))
    per_source: dict[Any, int] = {}
    for m in made.plan.multicasts:
        per_source[m.source] = per_source.get(m.source, 0) + 1
    assert set(per_source.values()) == {int(40 * rate)}, per_source


def test_the_api_refuses_a_hot_spot_fraction_in_a_permutation_pattern() -> None:
    """As the CLI does (the API once ran it as if the fraction were 0)."""
    with pytest.raises(PlanError, match="uniform traffic"):
        traffic_plan(MESH, "unicast", Traffic(0.1, 1, 100, pattern="bitcomp", hotspot_fraction=0.5))


def test_pick_self_addresses_the_source_one_time_in_n() -> None:
    made = traffic_plan(MESH, "unicast", Traffic(0.1, 1, 2000, pick_self=True, seed=3))
    total = len(made.plan.multicasts) + len(made.selves)
    share = len(made.selves) / total
    assert abs(share - 1 / 16) < 4 * (share * (1 - share) / total) ** 0.5


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--topology", "mesh:4x3", "--traffic", "transpose", "--dests", "1"], "square"),
        (["--topology", "mesh:4x4", "--traffic", "hotspot", "--dests", "1"], "--hotspot"),
        (["--topology", "mesh:4x4", "--traffic", "bitcomp", "--dests", "3"], "--dests 1"),
        (["--topology", "mesh:4x4", "--injection", "bernoulli", "--rates", "1.5"], "at most 1"),
        (["--topology", "mesh:4x4", "--duration", "100", "--sample-period", "20"], "do not fit"),
    ],
)
def test_bad_load_options_name_the_cause(
    extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["load", "--algorithms", "unicast", "--rates", "0.01", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
