"""``meshcast replay`` and ``run --replay``: one offline page; refusals in one line; in a browser,
the page shows exactly the destinations each run's own arrivals.csv says were reached by a step."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli import main
from node.topology import Topology
from tests._env import CHROMEDRIVER, CHROMIUM, need_browser
from tests.test_worm_trace import worm_state

DESTS = "3,2 5,5 1,4 0,5 4,0"

MESH, TORUS = ["--topology", "mesh:6x6"], ["--topology", "torus:6x5", "--source", "2,2"]
WORMHOLE, FREE = ["--switching", "wormhole", "--flits", "4"], ["--clock", "free"]
RUNS: dict[str, list[str]] = {
    "tree-mesh": [*MESH, "--algorithm", "diag", "--dests", DESTS],
    "path-mesh-wormhole": [*MESH, "--algorithm", "dp", "--dests", DESTS, *WORMHOLE],
    "tree-torus": [*TORUS, "--algorithm", "vh", "--dests", "0,0 5,4 3,1 1,3"],
    "free-clock": ["--topology", "mesh:5x5", "--algorithm", "vh", "--dests", "4,4 0,4 2,1", *FREE],
    "two-multicasts": [*MESH, "--algorithm", "diag,dp", "--dests", DESTS],
    "trees-torus-wormhole": [*TORUS, "--algorithm", "hcm,tree", "--dests", "0,0 5,4 3,1 1,3 4,2", *WORMHOLE],
}


def make_run(out: Path, argv: list[str], replay: bool = True) -> Path:
    """One small run in this process, written to ``out`` (with its replay page unless told not to)."""
    flags = ["--replay"] if replay else []
    assert main(["run", *argv, *flags, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("replay")
    return {name: make_run(base / name, argv) for name, argv in RUNS.items()}


def arrivals(run: Path) -> dict[int, list[tuple[tuple[int, int], int]]]:
    """Each multicast's (destination, first arrival step), from the run's own arrivals.csv."""
    out: dict[int, dict[tuple[int, int], int]] = {}
    with (run / "arrivals.csv").open() as f:
        for row in csv.DictReader(f):
            x, y = (int(v) for v in row["node"].split(","))
            mine = out.setdefault(int(row["mc"]), {})
            mine[(x, y)] = min(int(row["step"]), mine.get((x, y), 1 << 30))
    return {mc: sorted(d.items()) for mc, d in out.items()}


# -- the page as a file -----------------------------------------------------------------------
def test_run_writes_an_offline_page(runs: dict[str, Path]) -> None:
    html = (runs["tree-mesh"] / "replay.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "window.replay" in html
    fetchless = html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # the SVG export's namespace: a name
    assert "http://" not in fetchless and "https://" not in fetchless and "//cdn" not in fetchless
    for ref in re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", html):
        assert ref.startswith("data:"), ref
    data = json.loads(re.search(r'id="replay-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    run = data["runs"][0]
    assert (run["cols"], run["rows"], run["torus"]) == (6, 6, False)
    mc = run["multicasts"][0]
    assert len(mc["links"]) == 3 * mc["metrics"]["traffic"] and all(isinstance(v, int) for v in mc["links"])


def test_replay_command_writes_the_page_and_two_side_by_side(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "two.html"
    assert main(["replay", str(runs["tree-mesh"]), str(runs["tree-torus"]), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    data = json.loads(re.search(r'id="replay-data">(.*?)</script>', out.read_text(), re.S).group(1))  # type: ignore[union-attr]
    assert [r["topology"] for r in data["runs"]] == ["mesh:6x6", "torus:6x5"]


def test_a_run_without_a_trace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "plain", RUNS["tree-mesh"], replay=False)
    capsys.readouterr()
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--trace" in err
    assert not (run / "replay.html").exists()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such run directory"),
        ("", "no run.json"),
        ("{not json", "cannot read"),
        ('{"run": {"topology": "mesh:4x4"}}', "not a meshcast result"),
        ('{"run": {"topology": "hex:4"}, "multicasts": [{"links": []}]}', "not a meshcast result"),
    ],
)
def test_a_missing_or_garbled_run_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, words: str
) -> None:
    run = tmp_path / "run"
    if content is not None:
        run.mkdir()
        if content:
            (run / "run.json").write_text(content)
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *RUNS["tree-mesh"], "--replay"]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["replay", "a", "b", "c"]) == 2
    assert "at most two" in capsys.readouterr().err


# -- the page in a browser ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Debian chromium for the module; Selenium Manager kept off the network."""
    need_browser()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")
        mp.setenv("SE_AVOID_STATS", "true")
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
            options.add_argument(arg)
        options.add_argument("--window-size=1300,900")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()


def open_page(driver: Any, page: Path) -> None:
    driver.get(page.absolute().as_uri())
    driver.get_log("browser")  # what an earlier page logged is not this page's


@pytest.mark.parametrize("name", list(RUNS))
def test_page_loads_offline_without_errors(browser: Any, runs: dict[str, Path], name: str) -> None:
    open_page(browser, runs[name] / "replay.html")
    browser.execute_script("window.replay.seek(3)")
    urls = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(u.startswith(("file:", "data:")) for u in urls), urls
    assert browser.execute_script("return location.protocol") == "file:"
    severe = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert severe == []


@pytest.mark.parametrize("name", list(RUNS))
def test_delivered_matches_the_recorded_arrivals(browser: Any, runs: dict[str, Path], name: str) -> None:
    open_page(browser, runs[name] / "replay.html")
    for mc, got in arrivals(runs[name]).items():
        browser.execute_script(f"window.replay.select({mc})")
        last = max(step for _, step in got)
        steps = browser.execute_script("return window.replay.state().steps")
        assert steps >= last
        for t in sorted({0, 1, 2, last // 2, last - 1, last, steps}):
            browser.execute_script(f"window.replay.seek({t})")
            state = browser.execute_script("return window.replay.state()")
            assert state["step"] == t
            assert state["delivered"] == [list(node) for node, step in got if step <= t], (mc, t)


def test_play_advances_and_slider_and_seek_agree(browser: Any, runs: dict[str, Path]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    open_page(browser, runs["tree-mesh"] / "replay.html")
    browser.execute_script("window.replay.seek(0)")
    browser.find_element("id", "speed").send_keys("5")
    browser.find_element("id", "play").click()
    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return window.replay.state().step") >= 2)
    browser.find_element("id", "play").click()  # pause
    assert browser.execute_script("return window.replay.state().playing") is False
    browser.execute_script("window.replay.seek(4)")
    slider = browser.find_element("id", "slider")
    assert slider.get_attribute("value") == "4"
    browser.execute_script("arguments[0].focus()", slider)
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
    assert browser.execute_script("return window.replay.state().step") == 5
    assert slider.get_attribute("value") == "5"
    browser.find_element("id", "back").click()
    assert browser.execute_script("return window.replay.state().step") == 4
    assert slider.get_attribute("value") == "4"
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()  # the page's own keys
    assert browser.execute_script("return window.replay.state().step") == 5
    ActionChains(browser).send_keys(" ").perform()  # on the focused back button: its click, once
    assert browser.execute_script("return window.replay.state().step") == 4


def test_all_multicasts_at_once(browser: Any, runs: dict[str, Path]) -> None:
    open_page(browser, runs["two-multicasts"] / "replay.html")
    assert browser.execute_script("return window.replay.state().selected") == "all"
    both = arrivals(runs["two-multicasts"])
    for t in (0, 5, 9, 10**6):
        t = browser.execute_script(f"return window.replay.seek({t})")
        union = sorted({node for got in both.values() for node, step in got if step <= t})
        assert browser.execute_script("return window.replay.state().delivered") == [list(n) for n in union]


def test_two_runs_side_by_side_share_the_slider(browser: Any, runs: dict[str, Path], tmp_path: Path) -> None:
    names = ["tree-mesh", "path-mesh-wormhole"]
    page = tmp_path / "two.html"
    assert main(["replay", *(str(runs[n]) for n in names), "--out", str(page)]) == 0
    open_page(browser, page)
    assert len(browser.find_elements("css selector", "canvas[id^='grid-']")) == 2  # and a timeline each
    longest = max(max(s for _, s in arrivals(runs[n])[0]) for n in names)
    assert browser.execute_script("return window.replay.state().steps") >= longest
    for t in (0, 6, 30, 60, longest):
        browser.execute_script(f"window.replay.seek({t})")
        for i, n in enumerate(names):
            state = browser.execute_script(f"return window.replay.state({i})")
            assert state["step"] == t
            assert state["delivered"] == [list(node) for node, step in arrivals(runs[n])[0] if step <= t]
    assert browser.get_log("browser") == []


def test_a_strange_directory_name_stays_text(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "{{SCRIPT}}<b>&"
    make_run(run, [*RUNS["tree-torus"], "--trace"], replay=False)
    assert main(["replay", str(run)]) == 0
    html = (run / "replay.html").read_text()
    assert html.count("window.replay =") == 1 and "<b>&" not in html


def test_an_unreached_destination_is_never_delivered(runs: dict[str, Path]) -> None:
    from coordinator.output.replay import replay_data

    doc = json.loads((runs["tree-mesh"] / "run.json").read_text())
    lost = doc["multicasts"][0]["arrivals"].pop()
    mc = replay_data(doc, "lost")["multicasts"][0]
    at = mc["dests"].index(lost["node"][0] * 6 + lost["node"][1])
    assert mc["arrive"][at] == -1 and all(t >= 0 for i, t in enumerate(mc["arrive"]) if i != at)


def test_a_free_clock_run_replays_on_its_wall_clock_latencies(browser: Any, runs: dict[str, Path]) -> None:
    """Issue 38: in wall time a destination is delivered once its measured latency has passed;
    a lockstep run offers no wall time."""
    doc = json.loads((runs["free-clock"] / "run.json").read_text())
    (m,) = doc["multicasts"]
    latency = {tuple(a["node"]): a["wall_ns"] for a in m["arrivals"]}
    assert all(w is not None and w > 0 for w in latency.values())
    open_page(browser, runs["free-clock"] / "replay.html")
    assert browser.execute_script("return window.replay.timebase('wall')") == "wall"
    ticks = browser.execute_script("return window.replay.state().steps")
    seen = set()
    for t in range(ticks + 1):
        browser.execute_script(f"window.replay.seek({t})")
        state = browser.execute_script("return window.replay.state()")
        assert state["timebase"] == "wall" and state["step"] == t
        want = sorted([list(n) for n, w in latency.items() if w <= state["wall_ns"]])
        assert state["delivered"] == want, (t, state["wall_ns"])
        seen.add(len(want))
    assert seen == set(range(len(latency) + 1))  # each destination in turn, as the latencies say
    assert browser.execute_script("return window.replay.timebase('steps')") == "steps"
    open_page(browser, runs[next(n for n in runs if n != "free-clock")] / "replay.html")
    refused = browser.execute_script(
        "try { window.replay.timebase('wall'); return ''; } catch (e) { return String(e); }"
    )
    assert "no wall-clock latencies" in refused


@pytest.mark.parametrize("name", ["path-mesh-wormhole", "trees-torus-wormhole"])
def test_worms_match_the_flit_trace(browser: Any, runs: dict[str, Path], name: str) -> None:
    """Issue 38: at cycle t, each worm's held channels, heads and buffered flits as run.json's flit
    runs imply them (worked out flit by flit in tests/test_worm_trace.py, not by the page's code)."""
    doc = json.loads((runs[name] / "run.json").read_text())
    topo, flits = Topology.parse(doc["run"]["topology"]), doc["run"]["switching"]["flits"]
    open_page(browser, runs[name] / "replay.html")
    for m in doc["multicasts"]:
        assert m["worms"], "a traced wormhole run records its worms"
        browser.execute_script(f"window.replay.select({m['id']})")
        first = min(r["first"] for r in m["worms"])
        last = max(r["first"] + r["count"] for r in m["worms"])
        busy = 0
        for t in sorted(
            {0, first, first + 1, first + 3, (first + last) // 2, last - 2, last - 1, last, last + 1}
        ):
            browser.execute_script(f"window.replay.seek({t})")
            state = browser.execute_script("return window.replay.state()")
            want = worm_state(topo, m["worms"], flits, state["step"])
            assert state["worms"] == want, (m["id"], t)
            busy += bool(want)
        assert busy >= 3  # the cycles looked at do show worms
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []


# -- sweep --replay and load --replay -----------------------------------------------------------
SWEEP = ["sweep", "--topology", "mesh:5x5", "--algorithms", "dp,mp", "--dests", "2:6:2", "--repeat", "2",
         "--jobs", "1", *WORMHOLE]  # fmt: skip
LOAD = ["load", "--topology", "mesh:5x5", "--algorithms", "dp", "--dests", "3", "--rates", "0.002,0.004",
        "--duration", "150", "--warmup", "30", "--runtime", "engines", *WORMHOLE]  # fmt: skip


def page_data(page: Path) -> dict[str, Any]:
    return json.loads(re.search(r'id="replay-data">(.*?)</script>', page.read_text(), re.S).group(1))  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def experiments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("experiments")
    assert main([*SWEEP, "--replay", "--out", str(base / "sweep")]) == 0
    assert main([*LOAD, "--replay", "--out", str(base / "load")]) == 0
    return {"sweep": base / "sweep", "load": base / "load"}


def test_sweep_replay_is_the_first_repetition_of_each_point(experiments: dict[str, Path]) -> None:
    with (experiments["sweep"] / "tidy.csv").open() as f:
        first = [r for r in csv.DictReader(f) if r["repetition"] == "0"]
    (run,) = page_data(experiments["sweep"] / "replay.html")["runs"]
    got = [(m["algorithm"], len(m["dests"]), m["metrics"]["time"]) for m in run["multicasts"]]
    assert got == [(r["algorithm"], int(r["k"]), int(r["time"])) for r in first]  # the sweep's own records
    assert all(m["worms"] for m in run["multicasts"])


def test_load_replay_is_one_whole_point(experiments: dict[str, Path]) -> None:
    with (experiments["load"] / "load.csv").open() as f:
        rows = list(csv.DictReader(f))
    (run,) = page_data(experiments["load"] / "replay.html")["runs"]
    assert len(run["multicasts"]) > 1 and run["switching"] == "wormhole"
    assert {m["algorithm"] for m in run["multicasts"]} == {"dp"} and rows


@pytest.mark.parametrize("name", ["sweep", "load"])
def test_experiment_pages_load_without_errors(browser: Any, experiments: dict[str, Path], name: str) -> None:
    open_page(browser, experiments[name] / "replay.html")
    steps = browser.execute_script("return window.replay.state().steps")
    for t in (0, steps // 3, steps // 2, steps):
        browser.execute_script(f"window.replay.seek({t})")
    ids = browser.execute_script("return Array.from(document.getElementById('mc').options).map(o => o.value)")
    assert ids[0] == "all" and len(ids) > 2
    browser.execute_script(f"window.replay.select({ids[1]}); window.replay.seek({steps // 2})")
    assert "worms" in browser.execute_script("return window.replay.state()")
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []


def test_experiment_replay_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*LOAD, "--replay"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err
    assert main([*SWEEP, "--replay"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err
    shared = [*SWEEP, "--switching", "store-and-forward", "--contention", "shared", "--replay"]
    assert main([*shared, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "isolated" in err


def test_a_load_point_too_big_for_a_page_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from coordinator.experiments import replays

    big = [*LOAD[: LOAD.index("--rates")], "--rates", "0.05", *LOAD[LOAD.index("--rates") + 2 :]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replays, "LOAD_MAX", 10)
        main([*big, "--replay", "--out", str(tmp_path / "big")])
    assert "no replay.html" in capsys.readouterr().out and not (tmp_path / "big" / "replay.html").exists()


def test_the_wormhole_model_has_no_trace_but_its_replays_run_on_engines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flit-level reference model records no trace: run refuses it, sweep replays on engines."""
    assert (
        main(
            [
                "run",
                *RUNS["path-mesh-wormhole"],
                "--runtime",
                "model",
                "--replay",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runtime engines" in err
    assert main([*SWEEP, "--runtime", "model", "--replay", "--out", str(tmp_path / "s")]) == 0
    (run,) = page_data(tmp_path / "s" / "replay.html")["runs"]
    assert run["multicasts"] and all(m["worms"] and m["links"] for m in run["multicasts"])
