"""Remakes the replay screenshots in docs/examples/replay/: ``python -m tests.replay_screenshots``.

Two runs (DIAG on a 16x16 mesh; DP under wormhole switching on a 10x10 mesh) are made with the
CLI, their replay pages opened in Debian's headless chromium, and each photographed at three
steps. Needs ``apt-get install chromium chromium-driver`` and selenium; nothing is downloaded.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from coordinator.cli import main
from tests._env import CHROMEDRIVER, CHROMIUM

OUT = Path(__file__).resolve().parent.parent / "docs" / "examples" / "replay"

SHOTS: dict[str, tuple[list[str], tuple[float, ...]]] = {
    "diag-mesh16": (
        [
            "--topology",
            "mesh:16x16",
            "--algorithm",
            "diag",
            "--source",
            "3,4",
            "--random-dests",
            "20",
            "--seed",
            "7",
        ],
        (0.25, 0.55, 1.0),
    ),
    "dp-wormhole-mesh10": (
        [
            "--topology",
            "mesh:10x10",
            "--algorithm",
            "dp",
            "--source",
            "4,4",
            "--random-dests",
            "8",
            "--seed",
            "7",
        ],
        (0.4, 0.8, 1.0),
    ),
}
"""Name -> (run arguments, the steps to photograph as fractions of the run's last step)."""

WORMHOLE = ["--switching", "wormhole", "--flits", "8"]


def shoot(out: Path = OUT) -> list[Path]:
    """Make the runs and their pages; write one PNG per (run, step) into ``out``."""
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never reach the network
    os.environ["SE_AVOID_STATS"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(arg)
    options.add_argument("--window-size=1000,800")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    written: list[Path] = []
    out.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, (argv, fractions) in SHOTS.items():
                run = Path(tmp) / name
                extra = WORMHOLE if "wormhole" in name else []
                if main(["run", *argv, *extra, "--seed", "7", "--replay", "--out", str(run)]) != 0:
                    raise SystemExit(f"the {name} run did not complete")
                driver.get((run / "replay.html").as_uri())
                size = driver.execute_script(
                    "const b = document.body.getBoundingClientRect();"
                    "return [Math.ceil(b.width) + 40, Math.ceil(b.height) + 40];"
                )
                driver.set_window_size(max(900, size[0]), size[1] + 160)
                last = driver.execute_script("return window.replay.state().steps")
                for f in fractions:
                    step = round(f * last)
                    driver.execute_script(f"window.replay.seek({step})")
                    path = out / f"{name}-{step:03d}.png"
                    driver.find_element("tag name", "body").screenshot(str(path))
                    written.append(path)
    finally:
        driver.quit()
    return written


if __name__ == "__main__":
    for p in shoot(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(p)
