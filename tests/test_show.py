"""``meshcast show``: pictures are written (PNG, SVG, mesh, torus); bad arguments give one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.experiments.show import show
from coordinator.runtimes.records import RunSettings
from node.topology import Topology

EXAMPLE_2 = "3,2 9,3 8,5 4,7 7,7 2,8 5,8 9,8"  # ALGORITHMS.md, seed 000 Example 2
EXAMPLE_3 = "4,7 7,5 0,3 2,3 5,1 6,3 1,0 3,0"  # ALGORITHMS.md, seed 000 Example 3 (torus)


def test_png_of_example_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pair.png"
    argv = ["show", "--topology", "mesh:10x9", "--algorithm", "pair", "--source", "0,0", "--dests", EXAMPLE_2]
    assert main([*argv, "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert "pair: time 17, traffic 34" in capsys.readouterr().err


def test_svg_on_a_torus_with_link_steps(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "min.svg"
    argv = ["show", "--topology", "torus:8x8", "--algorithm", "min", "--dests", EXAMPLE_3, "--link-steps"]
    assert main([*argv, "--out", str(out), "--title", "Example 3"]) == 0
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "Example 3" in text


def test_random_destinations(tmp_path: Path) -> None:
    out = tmp_path / "r.png"
    argv = ["show", "--topology", "torus:12x10", "--algorithm", "dist", "--source", "5,4"]
    assert main([*argv, "--random-dests", "15", "--seed", "4", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000


def test_record_has_the_traced_links() -> None:
    (rec,) = show(Topology.parse("mesh:10x9"), "pair", (0, 0), [(3, 2), (9, 3)], RunSettings()).multicasts
    assert rec.links is not None and rec.traffic == len(rec.links) and rec.missing == ()
    assert all(
        lk.to is not None and abs(lk.frm[0] - lk.to[0]) + abs(lk.frm[1] - lk.to[1]) == 1 for lk in rec.links
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"--out": "x.jpg"}, ".png or .svg"),
        ({"--dests": "3,2 10,3"}, "outside"),
        ({"--dests": "0,0 3,2"}, "source itself"),
        ({"--dests": "3,2 3,2"}, "twice"),
        ({"--dests": "3;2"}, "cannot read coordinate"),
        ({"--algorithm": "nosuch"}, "unknown algorithm"),
        ({"--algorithm": "pair,min"}, "one algorithm"),
        ({"--algorithm": "tasnem"}, "torus"),
        ({"--topology": "mesh:0x4"}, "at least 1"),
        ({"--source": "a,b"}, "integers"),
        ({"--dests": None}, "--dests"),
        ({"--random-dests": "500", "--dests": None}, "between 1 and 89"),
        ({"--random-dests": "3"}, "not both"),
        ({"--dpi": "5"}, "--dpi"),
        ({"--port-model": "two-port"}, "invalid choice"),
    ],
)
def test_bad_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, str | None], words: str
) -> None:
    args: dict[str, str | None] = {
        "--topology": "mesh:10x9",
        "--algorithm": "pair",
        "--dests": "3,2 9,3",
        "--out": str(tmp_path / "o.png"),
    }
    args.update(change)
    argv = ["show"] + [t for k, v in args.items() if v is not None for t in (k, v)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert words in err
    assert not (tmp_path / "o.png").exists()
