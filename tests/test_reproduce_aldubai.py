"""``meshcast reproduce aldubai``: the paper's data, the latency model, and the report end to end.

The real setting (16×16 and 32×32, k = 10…80, four algorithms) runs at --repeat 2 on the reference
model (the 32×32 lockstep emulation alone takes about a minute in-process); the 16×16 part also
runs in-process at --repeat 1 and must give the very same rows (emulation = model).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from coordinator.analysis.verdicts import read_claims
from coordinator.cli import main
from coordinator.reproduce import reproductions
from coordinator.reproduce.aldubai import (
    ALGORITHMS,
    CV_KS,
    KS,
    MESHES,
    PREP,
    TIMING,
    latency_model,
    paper_data,
)

PNG = b"\x89PNG\r\n\x1a\n"


def test_paper_data_is_package_data() -> None:
    p = paper_data()
    assert "seed 004_c7b862cc5ccdf13b.txt" in p.cv_source and "Tables 4 and 5" in p.cv_source
    assert set(p.cv) == {(m, k, a) for m in MESHES for k in CV_KS for a in ALGORITHMS}
    assert p.cv[("16x16", 20, "qg")] == pytest.approx(0.264)
    assert p.cv[("32x32", 80, "cp")] == pytest.approx(0.696)
    assert "Table 3" in p.table3_source and set(p.table3) == set(ALGORITHMS)
    for mean, lo, hi in p.table3.values():
        assert lo < mean < hi


def test_latency_model_terms() -> None:
    per = TIMING.ts + TIMING.flits * TIMING.beta
    eq7 = latency_model(TIMING, None, serialise=False)
    assert eq7("cp", 12, 10, 1) == TIMING.latency(12, 10, 1) == per + 10
    full = latency_model(TIMING)
    # a source worm queued behind two others pays their start-ups and injections
    assert full("cp", 12, 10, 1) == PREP["cp"] + per + 10 + 2 * per
    # after a second start-up (a leader's group worm) a wait costs nothing
    assert full("qg", 13, 12, 2) == PREP["qg"] + 2 * per + 12
    assert full("dp", 7, 7, 1) == PREP["dp"] + per + 7


def test_registered_with_bad_arguments_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert reproductions()["aldubai"].default_repeat == 40
    for argv, words in ((["--meshes", "8x8"], "--meshes"), (["--wall-budget", "0"], "--wall-budget")):
        assert main(["reproduce", "aldubai", "--out", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aldubai")
    assert main(["reproduce", "aldubai", "--repeat", "2", "--runtime", "model", "--out", str(out)]) == 0
    return out


def test_report_sections_tables_and_claims(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    for heading in (
        "# Reproduction of seed 004",
        "**Read this first.**",
        "## Timing",
        "## The paper's claims, checked against our runs",
        "## Coefficient of variation: the paper's Tables 4–5 beside ours",
        "### Table 4: 16×16 mesh",
        "### Table 5: 32×32 mesh",
        "## Table 3",
        "## Latency and traffic per point",
        "## Plots",
    ):
        assert heading in text, heading
    assert "interarrival time of 250 cycles" in text and "load issue" in text
    assert text.count(": complete (") == 2
    claims = read_claims(report_dir / "claims.csv")
    assert all(c.markdown() in text.splitlines() for c in claims)
    names = [c.text for c in claims]
    assert sum(n.startswith("QG has the lowest coefficient of variation") for n in names) == 2
    assert sum(n.startswith("DP and MP have the lowest latency at light load") for n in names) == 1
    assert sum(n.startswith("QG has a lower latency than DP and MP on the larger mesh") for n in names) == 1
    assert sum(n.startswith("QG generates the least additional traffic") for n in names) == 2
    assert sum(n.startswith("CP has the highest latency") for n in names) == 2
    assert all(
        c.numbers["points"] in (2, 4, 8) and c.evidence.startswith("judged contention-free") for c in claims
    )
    # the CV tables: 4 ks × 4 algorithms per mesh, the paper's value beside ours
    assert len(re.findall(r"^\| (20|40|60|80) \| (DP|MP|CP|QG) \| 0\.\d+ \| ", text, re.M)) == 2 * 4 * 4
    # Table 3 beside ours
    assert re.search(r"^\| MP \| 92\.23 \[87\.62, 96\.84\] \| ", text, re.M)


def test_plots_are_non_empty_pngs_and_linked(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    linked = re.findall(r"!\[[^]]*\]\((plots/[^)]+\.png)\)", text)
    assert len(linked) == len(MESHES) * 5
    for rel in linked:
        data = (report_dir / rel).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, rel


def _tidy(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_tidy_rows(report_dir: Path) -> None:
    rows = _tidy(report_dir / "tidy.csv")
    assert len(rows) == len(MESHES) * len(KS) * 2 * len(ALGORITHMS)
    assert all(r["complete"] == "1" for r in rows)
    # only CP ever queues a worm behind another at the source
    assert all(int(r["queued"]) == 0 for r in rows if r["algorithm"] in ("dp", "mp"))


def test_the_emulation_gives_the_models_rows(tmp_path: Path) -> None:
    a, b = tmp_path / "emulation", tmp_path / "model"
    common = ["--repeat", "1", "--meshes", "16x16"]
    assert main(["reproduce", "aldubai", *common, "--out", str(a)]) == 0
    assert main(["reproduce", "aldubai", *common, "--runtime", "model", "--out", str(b)]) == 0
    assert _tidy(a / "tidy.csv") == _tidy(b / "tidy.csv")
    assert "### Table 5" not in (a / "report.md").read_text()
