"""``meshcast reproduce aldubai``: the paper's data, the flit-level latencies, and the report end to end.

Every scenario (16×16 at L = 32, 64, 128; 24×24 and 32×32 at L = 64; k = 10…80, four algorithms)
runs at --repeat 2 on the reference model; a few sets also run in-process and must give the very
same rows (emulation = model).
"""

from __future__ import annotations

import csv
import re
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator.analysis.verdicts import Verdict, read_claims
from coordinator.cli import main
from coordinator.reproduce import _wormhole as wormhole
from coordinator.reproduce import reproductions
from coordinator.reproduce.aldubai import (
    ALGORITHMS,
    CV_KS,
    KS,
    MESHES,
    PREP,
    SCENARIOS,
    TS,
    Task,
    _read,
    draw_points,
    eq7_agreement,
    eq7_claim,
    paper_data,
    run_task,
)
from coordinator.runtimes.records import RunSettings
from node.routing import registry
from node.topology import Topology

PNG = b"\x89PNG\r\n\x1a\n"


def test_paper_data_is_package_data() -> None:
    p = paper_data()
    assert "seed 004_c7b862cc5ccdf13b.txt" in p.cv_source and "Tables 4 and 5" in p.cv_source
    assert set(p.cv) == {(m, k, a) for m in ("16x16", "32x32") for k in CV_KS for a in ALGORITHMS}
    assert p.cv[("16x16", 20, "qg")] == pytest.approx(0.264)
    assert p.cv[("32x32", 80, "cp")] == pytest.approx(0.696)
    assert "Table 3" in p.table3_source and set(p.table3) == set(ALGORITHMS)
    for mean, lo, hi in p.table3.values():
        assert lo < mean < hi


def _settings(flits: int, runtime: str = "model") -> RunSettings:
    return RunSettings(
        port_model="all-port",
        contention="shared",
        clock="lockstep",
        runtime=runtime,
        switching="wormhole",
        flits=flits,
        ts=TS,
    )


def _points(scenario: str, k: int, repeat: int) -> tuple[wormhole.Point, ...]:
    mesh = SCENARIOS[scenario][0]
    pts = draw_points(mesh, Topology.parse(MESHES[mesh]), (k,), repeat, 7)
    return tuple(replace(p, scenario=scenario) for p in pts)


def test_isolated_latency_is_eq7_plus_prep_plus_injection_waits() -> None:
    """Every delivery, computed independently: prep + (j + 1)·(Ts + L) + hops for the j-th worm on its
    source port (one start-up), prep + 2·(Ts + L) + hops for QG's second level; rows agree."""
    scenario, flits = "16x16-L32", 32
    per = TS + flits
    points = _points(scenario, 10, 3)
    topo = Topology.parse(MESHES["16x16"])
    em = wormhole.emulate_points(topo, points, ALGORITHMS, _settings(flits), apart=True)
    rows, status = run_task(Task(scenario, points, _settings(flits)))
    assert status.complete
    flit = [r for r in rows if r.model == "main"]
    eq7 = [r for r in rows if r.model == "eq7"]
    waited = 0
    for (p, alg), rec, row, e in zip(em.index, em.records, flit, eq7, strict=True):
        slot: dict[tuple[int, int], int] = {}
        on_port: dict[str, int] = {}
        for port, header in registry.get(alg).prepare(topo, p.source, list(p.destinations), {}):
            j = on_port[port] = on_port.get(port, -1) + 1
            for d in header if alg != "qg" else ():
                slot[tuple(d)] = j
        expected = []
        for a in rec.arrivals:
            wait = slot.get(a.node, 0) * per if a.startups == 1 else 0
            expected.append(PREP[alg] + wait + a.startups * per + a.hops)
            waited += wait
            assert a.step == expected[-1], (alg, p, a)
        assert row.latency_max == max(expected) == row.steps
        assert row.queued == sum(slot.get(a.node, 0) * per for a in rec.arrivals if a.startups == 1)
        assert e.latency_max == max(a.startups * per + a.hops for a in rec.arrivals)
    assert waited > 0  # CP's worms queue on the source's ports
    # isolation matters: the same multicasts injected together contend, and some arrive later
    together = wormhole.emulate_points(topo, points, ALGORITHMS, _settings(flits))
    assert sum(r.time or 0 for r in together.records) > sum(r.latency_max or 0 for r in flit)


def test_the_emulation_gives_the_models_rows() -> None:
    points = _points("16x16-L128", 20, 2)
    model = run_task(Task("16x16-L128", points, _settings(128)))
    inproc = run_task(Task("16x16-L128", points, _settings(128, "in-process")))
    assert model[0] == inproc[0] and model[1].complete and inproc[1].complete


def test_registered_with_bad_arguments_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert reproductions()["aldubai"].default_repeat == 40
    for argv, words in ((["--meshes", "8x8"], "--meshes"), (["--wall-budget", "0"], "--wall-budget")):
        assert main(["reproduce", "aldubai", "--out", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aldubai")
    # two spawned workers: the flit runs go outside the coverage tracer (inline they took 133 s of CI)
    assert main(["reproduce", "aldubai", "--repeat", "2", "--jobs", "2", "--out", str(out)]) == 0
    return out


def test_report_sections_tables_and_claims(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    for heading in (
        "# Reproduction of seed 004",
        "**Read this first.**",
        "## The model",
        "**Isolation.**",
        "## The paper's claims, checked against our runs",
        "## Table 3",
        "## Coefficient of variation: the paper's Tables 4–5 beside ours",
        "### Table 4: 16×16 mesh, L = 64 flits",
        "### Table 5: 32×32 mesh, L = 64 flits",
        "## Latency and traffic per point",
        "### Fig. 12: 24×24 mesh, L = 64 flits",
        "## Plots",
    ):
        assert heading in text, heading
    assert "interarrival time of 250 cycles" in text and "`load` reproduction" in text
    assert text.count(": complete (longest multicast") == len(SCENARIOS)
    claims = read_claims(report_dir / "claims.csv")
    assert all(c.markdown() in text.splitlines() for c in claims)
    names = [c.text for c in claims]
    for start, n in (
        ("QG has the lowest coefficient of variation", 2),
        ("DP and MP have the lowest latency at light load", 2),
        ("QG has a lower latency than DP and MP on the larger meshes", 2),
        ("QG generates the least additional traffic", 2),
        ("CP has the highest latency", 4),
    ):
        assert sum(name.startswith(start) for name in names) == n, start
    *compared, eq7 = claims
    assert all(
        c.numbers["points"] in (2, 4, 8) and c.evidence.startswith("judged contention-free") for c in compared
    )
    # the last claim: flits in isolation against eq. 7, every multicast of every scenario
    assert eq7.source.startswith("§4.1, eq. 7") and eq7.verdict is Verdict.HELD
    n = len(SCENARIOS) * len(KS) * 2
    assert eq7.numbers == {"hits": 4 * n, "points": 4 * n, "exact": 3 * n, "whole": n}
    assert {c.source.split(" (")[0] for c in claims} >= {"Table 4", "Table 5", "§4.2.1, §5, Fig. 12"}
    # the CV tables: 4 ks × 4 algorithms per mesh, the paper's value beside ours
    assert len(re.findall(r"^\| (20|40|60|80) \| (DP|MP|CP|QG) \| 0\.\d+ \| ", text, re.M)) == 2 * 4 * 4
    # Table 3 beside ours
    assert re.search(r"^\| MP \| 92\.23 \[87\.62, 96\.84\] \| ", text, re.M)


def test_plots_are_non_empty_pngs_and_linked(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    linked = re.findall(r"!\[[^]]*\]\((plots/[^)]+\.png)\)", text)
    assert len(linked) == len(SCENARIOS) * 3 + len(MESHES)  # latency per scenario, traffic per mesh
    for rel in linked:
        data = (report_dir / rel).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, rel


def _tidy(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_tidy_rows(report_dir: Path) -> None:
    rows, eq7 = _tidy(report_dir / "tidy.csv"), _tidy(report_dir / "tidy_models.csv")
    assert len(rows) == len(eq7) == len(SCENARIOS) * len(KS) * 2 * len(ALGORITHMS)
    assert all(r["complete"] == "1" and r["latency_max"] == r["steps"] for r in rows)
    # DP and MP never wait for an injection channel (one worm per port); CP does
    assert all(int(r["queued"]) == 0 for r in rows if r["algorithm"] in ("dp", "mp"))
    assert all(int(r["queued"]) > 0 for r in rows if r["algorithm"] == "cp" and int(r["k"]) >= 30)
    # flit level ≥ eq. 7 alone; traffic does not depend on L
    assert all(float(r["latency_max"]) >= float(e["latency_max"]) for r, e in zip(rows, eq7, strict=True))
    traffic: dict[tuple[str, ...], set[str]] = {}
    for r in rows:
        traffic.setdefault((r["scenario"][:5], r["algorithm"], r["k"], r["repetition"]), set()).add(
            r["traffic"]
        )
    assert len(traffic) == len(MESHES) * len(KS) * 2 * len(ALGORITHMS)
    assert all(len(v) == 1 for v in traffic.values())


DOCS = Path(__file__).resolve().parents[1] / "docs" / "reproductions" / "aldubai"


def test_committed_runs_agree_with_eq7_multicast_by_multicast() -> None:
    """The committed run, re-read from its CSVs: DP, MP and QG arrive exactly at preparation + eq. 7 at every
    delivery, CP above it by whole start-ups queued on the source's ports; the committed claim says so."""
    ours, _, meta = _read(DOCS)
    n = len(meta["scenarios"]) * len(KS) * int(meta["repeat"])
    assert eq7_agreement(ours) == {"dp": (n, 0, n), "mp": (n, 0, n), "cp": (0, n, n), "qg": (n, 0, n)}
    claim = eq7_claim(ours)
    assert claim.verdict is Verdict.HELD and claim.numbers["points"] == 4 * n == 6400
    assert claim.row() in [c.row() for c in read_claims(DOCS / "claims.csv")]


def test_eq7_claim_fails_when_one_multicast_is_off() -> None:
    """An identity: one DP multicast a cycle late (or a CP one off by less than a start-up) is not held."""
    ours, _, _ = _read(DOCS)
    for alg in ("dp", "cp"):
        i = next(i for i, r in enumerate(ours.rows) if r.algorithm == alg)
        r = ours.rows[i]
        bad = (
            replace(r, latency_max=(r.latency_max or 0) + 1.0)
            if alg == "dp"
            else replace(r, queued=r.queued + 1)
        )
        rows = [*ours.rows[:i], bad, *ours.rows[i + 1 :]]
        claim = eq7_claim(replace(ours, rows=rows))
        assert claim.verdict is Verdict.NOT_HELD and claim.numbers["hits"] == 6399, alg
