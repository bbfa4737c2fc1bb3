"""``meshcast reproduce chen``: the proximity-set generator, the timing mapping, the worked example,
and the real setting (16×16, all 15 points, both scenarios) end to end at --repeat 2.
"""

from __future__ import annotations

import csv
import random
import re
import statistics
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import pytest

from coordinator.analysis.verdicts import Verdict, read_claims
from coordinator.cli import main
from coordinator.reproduce import _wormhole as wormhole
from coordinator.reproduce import reproductions
from coordinator.reproduce.chen import (
    ALGORITHMS,
    CYCLE_NS,
    FLIT_SETTINGS,
    FLITS,
    KS,
    READINGS,
    SCENARIOS,
    TIMING,
    agreement,
    draw_points,
    flit_claim,
    flit_rows,
    proximity_destinations,
    run_example,
    timed,
)
from coordinator.runtimes.records import RunSettings
from node.topology import Topology

PNG = b"\x89PNG\r\n\x1a\n"
MESH16 = Topology.parse("mesh:16x16")


def _spread(dests: tuple[tuple[int, int], ...]) -> float:
    return statistics.fmean(abs(a[0] - b[0]) + abs(a[1] - b[1]) for a, b in combinations(dests, 2))


def test_proximity_sets_are_seeded_valid_and_clustered() -> None:
    for k in (1, 16, 100, 255):
        a = proximity_destinations(MESH16, (3, 3), k, random.Random(7))
        assert a == proximity_destinations(MESH16, (3, 3), k, random.Random(7))
        assert len(a) == len(set(a)) == k and (3, 3) not in a and all(MESH16.contains(d) for d in a)
    # clustered sets are tighter than uniform ones of the same size
    rng = random.Random(1)
    prox = [_spread(proximity_destinations(MESH16, (0, 0), 32, rng)) for _ in range(20)]
    unif = [_spread(tuple(rng.sample([n for n in MESH16.nodes() if n != (0, 0)], 32))) for _ in range(20)]
    assert statistics.fmean(prox) < 0.8 * statistics.fmean(unif)
    with pytest.raises(ValueError):
        proximity_destinations(MESH16, (0, 0), 256, rng)


def test_points_cover_both_scenarios_with_the_same_shape() -> None:
    pts = draw_points(MESH16, (16, 32), 3, 5)
    assert [(p.scenario, p.k) for p in pts] == [(s, k) for s in SCENARIOS for k in (16, 32) for _ in range(3)]
    assert pts == draw_points(MESH16, (16, 32), 3, 5)
    # the random scenario's sets do not depend on the proximity generator's parameters
    other = draw_points(MESH16, (16, 32), 3, 5, cluster_size=4)
    assert [p for p in pts if p.scenario == "random"] == [p for p in other if p.scenario == "random"]


def test_timing_is_the_papers_section_4_mapping() -> None:
    # t_s = 1 µs, 100 flits × 5 ns per start-up; 5 ns link + 20 ns router per hop
    assert TIMING.latency(0, 10, 1) == 1000 + 100 * 5 + 10 * 25
    assert TIMING.latency(0, 10, 2) == 2 * 1500 + 250
    # the other reading of "t_r for each routing flit": every flit pays it, 3.5 µs per start-up
    assert READINGS["per-hop"] is TIMING
    assert READINGS["per-flit"].latency(0, 10, 2) == 2 * (1000 + 100 * 25) + 250


def test_worked_example_through_the_emulation() -> None:
    ex = run_example(RunSettings(port_model="all-port", runtime="model"))
    assert ex.status.complete
    assert {a: ex.rows[("per-hop", a)].traffic for a in ALGORITHMS} == {
        "dp": 23,
        "group-graph": 15,
        "group-pattern": 15,
    }
    # grouping is slower here under either reading of t_r (the report discusses it): 1.95 vs 3.20 µs per hop
    assert [ex.rows[("per-hop", a)].latency_max for a in ALGORITHMS] == [1950, 3200, 3200]
    assert [ex.rows[("per-flit", a)].latency_max for a in ALGORITHMS] == [3950, 7200, 7200]
    paper = {
        frozenset({(1, 6), (2, 6), (1, 7)}),
        frozenset({(2, 3), (1, 2), (0, 2)}),
        frozenset({(5, 2), (6, 1)}),
    }
    for a in ("group-graph", "group-pattern"):
        assert {frozenset(g) for g in ex.groups[a]} == paper
        assert ex.leaders[a] == [(2, 3), (2, 6), (5, 2)]


def test_registered_with_bad_arguments_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "chen" in reproductions()
    for argv, words in (
        (["--ks", "16,x"], "--ks"),
        (["--ks", "300"], "--ks"),
        (["--threshold", "0"], "--threshold"),
        (["--cluster-density", "2"], "--cluster-density"),
    ):
        assert main(["reproduce", "chen", "--out", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("chen")
    assert main(["reproduce", "chen", "--repeat", "2", "--out", str(out)]) == 0
    return out


def test_report_sections_tables_and_claims(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    for heading in (
        "# Reproduction of seed 003",
        "## Timing",
        "## Latency with t_r per flit",
        "## Destinations with proximity",
        "## The paper's claims, checked against our runs",
        "What drives these results: a second start-up costs",
        "## The worked example",
        "## Tables",
        "### Random destinations",
        "### Destinations with proximity",
        "## Plots",
    ):
        assert heading in text, heading
    assert "Run status: complete" in text
    # the claims: grouping vs DP on links (2 schemes × 2 scenarios) and on latency under both readings of t_r;
    # proximity vs random per algorithm and reading; the worked examples (§2.2, §3.1, §3.2)
    bullets = re.findall(
        r"^- \*\*(held|held in direction only|not held|untestable here|not reproducible)\*\* — (.+)$",
        text,
        re.M,
    )
    assert len(bullets) == 4 + 2 * 4 + 2 * 3 + 5 + 1
    assert sum("uses fewer links than" in b for _, b in bullets) == 4
    for reading in READINGS:
        assert (
            sum(f"latency is lower than Hamiltonian dual-path's (t_r {reading})" in b for _, b in bullets)
            == 4
        )
        assert sum(f'by "a great amount" (t_r {reading}; ' in b for _, b in bullets) == 3
    assert [v for v, b in bullets if "Figs. 7–9" in b] == ["not reproducible"]
    assert [v for v, b in bullets if "reduces the transmission time" in b] == ["not held"]
    assert "our invention" in text and "s·(t_s + L·(t_l + t_r)) + h·(t_l + t_r)" in text
    assert (report_dir / "claims.csv").read_text().count("\n") == len(bullets) + 1
    # the last: flits in isolation equal the per-flit formula, every multicast
    flits = bullets[-1]
    assert (
        flits[0] == "held"
        and "at 180 of 180 multicasts" in flits[1]
        and "largest difference 0 ns" in flits[1]
    )
    assert "Flit level (every multicast again" in text and "| flits Ham-Path (DP) (µs) |" in text
    # the worked example beside the paper's numbers
    assert re.search(r"\| Ham-Path \(DP\) \| — \| — \| 23 \| 23 \|", text)
    assert re.search(r"\| Graph-Based \| .+ \| 15 \| 15 \|", text)
    # one table row per k in each scenario and reading of t_r
    for k in KS:
        assert len(re.findall(rf"^\| {k} \| ", text, re.M)) == 2 * len(READINGS), k


def test_plots_are_non_empty_pngs_and_linked(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    linked = re.findall(r"!\[[^]]*\]\((plots/[^)]+\.png)\)", text)
    assert len(linked) == 6
    for rel in linked:
        data = (report_dir / rel).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, rel


def test_tidy_rows(report_dir: Path) -> None:
    with (report_dir / "tidy.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(SCENARIOS) * len(KS) * 2 * len(ALGORITHMS) * (len(READINGS) + 1)
    assert {r["model"] for r in rows} == {*READINGS, FLITS}
    # the flit-level rows: the per-flit formula's, number for number
    key = ("scenario", "algorithm", "k", "repetition")
    formula = {tuple(r[c] for c in key): r for r in rows if r["model"] == "per-flit"}
    for r in (r for r in rows if r["model"] == FLITS):
        g = formula[tuple(r[c] for c in key)]
        assert float(r["latency_max"]) == float(g["latency_max"]) and r["traffic"] == g["traffic"]
    assert all(r["complete"] == "1" for r in rows)
    # the same sets for every algorithm
    by = {(r["scenario"], r["k"], r["repetition"], r["algorithm"]): r["source"] for r in rows}
    for (s, k, rep, _), src in by.items():
        assert by[(s, k, rep, "dp")] == src


def test_flits_in_isolation_are_the_per_flit_formula() -> None:
    """The per-flit reading is a flit engine in 25 ns cycles (Ts = 40, L = 100): random and clustered sets of
    every scheme, each alone at flit level, arrive at the formula's times, delivery for delivery."""
    assert (CYCLE_NS, FLIT_SETTINGS.ts, FLIT_SETTINGS.flits, FLIT_SETTINGS.prep) == (25.0, 40, 100, 0)
    points = draw_points(MESH16, (8, 40, 200), 2, 7)
    params = {"group-graph": {"T": 0.8}}
    saf = wormhole.emulate_points(MESH16, points, ALGORITHMS, RunSettings(contention="isolated"), params)
    flit = wormhole.emulate_points(MESH16, points, ALGORITHMS, FLIT_SETTINGS, params)
    assert saf.status.complete and flit.status.complete
    formula = READINGS["per-flit"]
    for a, b in zip(saf.records, flit.records, strict=True):
        by_node = {x.node: formula.latency(0, x.hops, x.startups) for x in a.arrivals}
        assert sorted(by_node) == sorted(x.node for x in b.arrivals)
        assert all(CYCLE_NS * x.step == by_node[x.node] for x in b.arrivals)
    rows = [r for r in timed(saf) if r.model == "per-flit"]
    claim = flit_claim(flit_rows(flit), rows)
    assert claim.verdict is Verdict.HELD and claim.numbers["hits"] == claim.numbers["points"] == 36
    # an identity: one multicast 25 ns late is a failed claim, named
    late = [replace(r, latency_max=(r.latency_max or 0) + 25.0) if i == 5 else r for i, r in enumerate(rows)]
    bad = flit_claim(flit_rows(flit), late)
    assert bad.verdict is Verdict.NOT_HELD and bad.numbers["hits"] == 35 and bad.numbers["worst_ns"] == 25.0
    assert "The first such multicast:" in bad.evidence


DOCS = Path(__file__).resolve().parents[1] / "docs" / "reproductions" / "chen"


def test_committed_flits_equal_the_formula() -> None:
    """The committed run: its flit-level rows against its per-flit formula rows, rebuilt from tidy.csv, and
    the committed claim is that rebuild."""
    rows = wormhole.read_rows(DOCS / "tidy.csv")
    flits = [r for r in rows if r.model == FLITS]
    formula = [r for r in rows if r.model == "per-flit"]
    assert len(flits) == len(formula) == len(SCENARIOS) * len(KS) * 50 * len(ALGORITHMS)
    a = agreement(flits, formula)
    # the latency (the last delivery) of every multicast is the formula's; where a delivery before the last
    # differs (self-contention), it is later, never earlier
    assert a.last == a.pairs == len(flits) and a.worst == 0.0
    assert a.later == a.pairs - a.equal and a.equal > 0.95 * a.pairs
    claim = flit_claim(flits, formula)
    assert claim.verdict is Verdict.HELD
    assert claim.row() == read_claims(DOCS / "claims.csv")[-1].row()
