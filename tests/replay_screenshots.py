"""Remakes the replay screenshots in docs/examples/replay/: ``python -m tests.replay_screenshots``.

Two runs (DIAG on a 16x16 mesh; DP under wormhole switching on a 10x10 mesh) are made with the
CLI, their replay pages opened in Debian's headless chromium, and each photographed at three
steps; then (:data:`EXPLORE`) DIAG on a 64x64 torus, whole and zoomed in on its source, and a
``load`` page with one multicast chosen over the others' traffic. Needs ``apt-get install
chromium chromium-driver`` and selenium; nothing is downloaded.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

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

TORUS64 = ["--topology", "torus:64x64", "--algorithm", "diag", "--source", "20,30", "--random-dests", "300",
           "--seed", "7"]  # fmt: skip
LOAD8 = ["--topology", "mesh:8x8", "--algorithms", "dp", "--dests", "4", "--rates", "0.003,0.006",
         "--duration", "300", "--warmup", "50", "--runtime", "engines", "--switching", "wormhole",
         "--flits", "8", "--seed", "7"]  # fmt: skip
EXPLORE: dict[str, tuple[list[str], str]] = {
    "torus64": (["run", *TORUS64], "window.replay.seek(40)"),
    "torus64-zoom": (["run", *TORUS64], "window.replay.seek(40); window.replay.pin([22, 30]);"
                     "const v = window.replay.view(); window.replay.zoom(5, 0, [v.origin[0] + 20 * v.cell, "
                     "v.origin[1] - 30 * v.cell])"),
    "load-contention": (["load", *LOAD8], "window.replay.select(BUSY); window.replay.follow(true);"
                        "window.replay.seek(MIDDLE)"),
}  # fmt: skip
"""Name -> (command line, the script that sets the page up): issue 47's screenshots. In the load
page's script BUSY is the multicast with the most link crossings whose crossings overlap others' in
time and MIDDLE the step of its middle crossing."""


def _busy(driver: Any) -> tuple[int, int]:
    """Of the load page's multicasts, one met by others in the network and the step half way through it."""
    return tuple(
        driver.execute_script(
            "const ms = JSON.parse(document.getElementById('replay-data').textContent).runs[0].multicasts;"
            "const mid = (m) => m.links[3 * Math.floor(m.links.length / 6) + 2];"
            "const met = ms.filter((m) => m.links.length && ms.some((o) => o !== m && o.links.length &&"
            "  Math.min(...o.links.filter((_, i) => i % 3 === 2)) <= mid(m) &&"
            "  Math.max(...o.links.filter((_, i) => i % 3 === 2)) >= mid(m)));"
            "met.sort((p, q) => q.links.length - p.links.length);"
            "return [met[0].id, mid(met[0])];"
        )
    )


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
            driver.set_window_size(1300, 1250)
            for name, (argv, setup) in EXPLORE.items():
                run = Path(tmp) / argv[0]
                if not (run / "replay.html").exists() and main([*argv, "--replay", "--out", str(run)]) != 0:
                    raise SystemExit(f"the {name} {argv[0]} did not complete")
                driver.get((run / "replay.html").as_uri())
                if "BUSY" in setup:
                    busy, middle = _busy(driver)
                    setup = setup.replace("BUSY", str(busy)).replace("MIDDLE", str(middle))
                driver.execute_script(setup)
                path = out / f"{name}.png"
                driver.find_element("css selector", ".panel").screenshot(str(path))
                written.append(path)
    finally:
        driver.quit()
    return written


def measure(repeats: int = 7) -> None:
    """Print the 64x64 torus page's size and how long Chromium takes to open it (``--measure``):
    navigation start to the load event, which includes parsing the data and drawing the first
    frame, and the time to draw one step; medians of ``repeats`` fresh loads."""
    import gzip
    import statistics

    os.environ["SE_OFFLINE"] = "true"
    os.environ["SE_AVOID_STATS"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,950"):
        options.add_argument(arg)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "torus64"
        if main(["run", *TORUS64, "--replay", "--out", str(run)]) != 0:
            raise SystemExit("the torus64 run did not complete")
        page = run / "replay.html"
        raw = page.read_bytes()
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        opens, steps = [], []
        try:
            for _ in range(repeats):
                driver.get("about:blank")
                driver.get(page.as_uri())
                opens.append(
                    driver.execute_script(
                        "const n = performance.getEntriesByType('navigation')[0];"
                        "return n.loadEventEnd - n.startTime"
                    )
                )
                steps.append(
                    driver.execute_script(
                        "const t = performance.now(); for (let s = 1; s <= 20; s++) window.replay.seek(s);"
                        "return (performance.now() - t) / 20"
                    )
                )
        finally:
            driver.quit()
    print(f"torus:64x64 page: {len(raw):,} bytes ({len(gzip.compress(raw)):,} gzipped)")
    print(
        f"open (navigation start to load event): median {statistics.median(opens):.0f} ms "
        f"(min {min(opens):.0f}, max {max(opens):.0f}, {repeats} loads)"
    )
    print(f"one step drawn: median {statistics.median(steps):.1f} ms")
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--measure"]:
        measure()
    else:
        for p in shoot(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
            print(p)
