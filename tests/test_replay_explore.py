"""The replay page as a tool to ask a run things (issue 47), in Debian's headless chromium: hover and
click a node or a link for its details, zoom and pan, export the frame as PNG and SVG, the colour
key, the load page's contention view, per-link load of multicasts that ran alone, the arrival
timeline and Home/End, and two panels side by side each with its own list and units. Every
expectation is worked out from the run's own files (arrivals.csv, links.csv, run.json)."""

# ruff: noqa: F811  (the fixtures of tests/test_replay.py, imported, are the tests' parameters)
from __future__ import annotations

import base64
import csv
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from coordinator.cli import main
from coordinator.output.palette import algorithm_colour
from tests.test_replay import (  # noqa: F401  (fixtures)
    RUNS,
    browser,
    experiments,
    make_run,
    open_page,
    page_data,
    runs,
)


def links_csv(run: Path) -> list[tuple[int, tuple[int, int], tuple[int, int], int]]:
    """The run's links.csv rows as (mc, from, to, step)."""
    out = []
    with (run / "links.csv").open() as f:
        for row in csv.DictReader(f):
            a = tuple(int(v) for v in row["from"].split(","))
            b = tuple(int(v) for v in row["to"].split(","))
            out.append((int(row["mc"]), a, b, int(row["step"])))
    return out  # type: ignore[return-value]


def arrivals_csv(run: Path) -> dict[tuple[int, tuple[int, int]], tuple[int, int]]:
    """(mc, node) -> (first arrival step, its hops), from arrivals.csv."""
    out: dict[tuple[int, tuple[int, int]], tuple[int, int]] = {}
    with (run / "arrivals.csv").open() as f:
        for row in csv.DictReader(f):
            key = (int(row["mc"]), tuple(int(v) for v in row["node"].split(",")))
            got = (int(row["step"]), int(row["hops"]))
            if key not in out or got < out[key]:
                out[key] = got  # type: ignore[index]
    return out


def canvas_point(driver: Any, x: int, y: int, run: int = 0) -> tuple[float, float]:
    """Node (x, y)'s offset from the centre of panel ``run``'s canvas (what selenium's offsets are from)."""
    v = driver.execute_script(f"return window.replay.view({run})")
    return v["origin"][0] + x * v["cell"] - v["width"] / 2, v["origin"][1] - y * v["cell"] - v["height"] / 2


def test_inspect_a_node_and_a_link_says_what_the_records_say(browser: Any, runs: dict[str, Path]) -> None:
    run = runs["two-multicasts"]
    rows, arrived = links_csv(run), arrivals_csv(run)
    open_page(browser, run / "replay.html")
    t = browser.execute_script("return window.replay.seek(7)")
    for (mc, node), (step, hops) in arrived.items():
        got = browser.execute_script(f"return window.replay.inspect([{node[0]}, {node[1]}])")
        mine = next(d for d in got["destination"] if d["id"] == mc)
        assert (mine["arrival"], mine["hops"], mine["delivered"]) == (step, hops, step <= t)
        assert got["arrival"] == min(s for (m, n), (s, _) in arrived.items() if n == node)
        passed = {m for m, a, b, _ in rows if node in (a, b)}
        assert {p["id"] for p in got["passed"]} == passed
        for p in got["passed"]:
            assert p["in"] == sorted(s for m, _, b, s in rows if m == p["id"] and b == node)
    _, a, b, _ = rows[len(rows) // 2]
    got = browser.execute_script(f"return window.replay.inspect([{a[0]}, {a[1]}, {b[0]}, {b[1]}])")
    want = Counter((mm, aa, bb, s) for mm, aa, bb, s in rows if {aa, bb} == {a, b})
    seen = Counter(
        (c["id"], tuple(c["from"]), tuple(c["to"]), s) for c in got["crossings"] for s in c["steps"]
    )
    assert seen == want and got["crossed"] == sum(n for (_, _, _, s), n in want.items() if s <= t)
    refused = browser.execute_script(
        "try { window.replay.inspect([0, 0, 3, 3]); return ''; } catch (e) { return String(e); }"
    )
    assert "no link" in refused


def test_hover_and_click_show_the_details(browser: Any, runs: dict[str, Path]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    run = runs["tree-mesh"]
    (_, node), (step, hops) = next(iter(arrivals_csv(run).items()))
    open_page(browser, run / "replay.html")
    browser.execute_script("window.replay.seek(0)")
    canvas = browser.find_element("id", "grid-0")
    dx, dy = canvas_point(browser, *node)
    ActionChains(browser).move_to_element_with_offset(canvas, round(dx), round(dy)).perform()
    tip = browser.find_element("id", "tip")
    assert tip.is_displayed()
    assert f"node ({node[0]},{node[1]})" in tip.text and f"arrival step {step}, {hops} hops" in tip.text
    ActionChains(browser).click().perform()
    info = browser.execute_script("return document.querySelector('.info').textContent")
    assert f"node ({node[0]},{node[1]})" in info and "(waiting)" in info
    browser.execute_script(f"window.replay.seek({step})")  # the pinned details follow the slider
    assert "(delivered)" in browser.execute_script("return document.querySelector('.info').textContent")
    # a link: half way between two neighbours on the multicast's path
    _, a, b, s = links_csv(run)[0]
    (ax, ay), (bx, by) = canvas_point(browser, *a), canvas_point(browser, *b)
    ActionChains(browser).move_to_element_with_offset(
        canvas, round((ax + bx) / 2), round((ay + by) / 2)
    ).perform()
    lo, hi = sorted([a, b])  # a mesh link is named from its lower end
    assert f"link ({lo[0]},{lo[1]})\u2013({hi[0]},{hi[1]})" in tip.text
    assert f"({a[0]},{a[1]})\u2192({b[0]},{b[1]}) in steps {s}" in tip.text


def test_zoom_and_pan_keep_the_grid_under_the_pointer(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    run = make_run(
        tmp_path / "t40", ["--topology", "torus:40x40", "--algorithm", "diag", "--random-dests", "60"]
    )
    open_page(browser, run / "replay.html")
    before = browser.execute_script("return window.replay.view()")
    canvas = browser.find_element("id", "grid-0")
    px, py = canvas_point(browser, 10, 30)
    ActionChains(browser).scroll_from_origin(
        ScrollOrigin.from_element(canvas, round(px), round(py)), 0, -120
    ).perform()
    zoomed = browser.execute_script("return window.replay.view()")
    assert zoomed["zoom"] > 1 and zoomed["cell"] > before["cell"]
    qx, qy = canvas_point(browser, 10, 30)
    assert abs(qx - px) < 1.5 and abs(qy - py) < 1.5  # node (10, 30) stayed under the pointer
    ActionChains(browser).move_to_element_with_offset(canvas, 0, 0).click_and_hold().move_by_offset(
        -60, 40
    ).release().perform()
    panned = browser.execute_script("return window.replay.view()")
    assert abs(panned["origin"][0] - zoomed["origin"][0] + 60) < 1.5
    assert abs(panned["origin"][1] - zoomed["origin"][1] - 40) < 1.5
    assert browser.execute_script("return window.replay.zoom(0)")["z"] == 1
    assert browser.execute_script("return window.replay.view()")["origin"] == before["origin"]
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []


def test_export_png_and_svg_from_the_buttons(browser: Any, runs: dict[str, Path], tmp_path: Path) -> None:
    from PIL import Image

    run = runs["trees-torus-wormhole"]
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    open_page(browser, run / "replay.html")
    browser.execute_script("window.replay.seek(40)")
    for kind in ("png", "svg"):
        browser.find_element("css selector", f"button[data-x='{kind}']").click()
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline and len(list(tmp_path.glob("*.png")) + list(tmp_path.glob("*.svg"))) < 2
    ):
        time.sleep(0.2)
    (png,), (svg,) = list(tmp_path.glob("*.png")), list(tmp_path.glob("*.svg"))
    view = browser.execute_script("return [window.replay.view(), window.devicePixelRatio]")
    with Image.open(png) as im:
        assert im.size == (round(view[0]["width"] * view[1]), round(view[0]["height"] * view[1]))
        assert len(im.getcolors(1 << 20) or []) > 5  # drawn, not blank
    data = browser.execute_script("return window.replay.exportFrame('png')")
    assert base64.b64decode(data.split(",", 1)[1]) == png.read_bytes()
    text = svg.read_text()
    assert text == browser.execute_script("return window.replay.exportFrame('svg')")
    root = ET.fromstring(text)
    assert root.tag.endswith("svg") and len(root.findall(".//{http://www.w3.org/2000/svg}path")) > 20
    assert "cycle-40" in svg.name
    browser.get(svg.as_uri())  # it opens in the browser, as an image of the grid
    assert browser.execute_script("return document.documentElement.tagName") == "svg"
    box = browser.execute_script("return document.documentElement.getBBox()")
    assert box["width"] > 100 and box["height"] > 100


def test_the_colour_key_is_the_plots_colours(
    browser: Any, runs: dict[str, Path], experiments: dict[str, Path]
) -> None:
    for page in (runs["two-multicasts"] / "replay.html", experiments["sweep"] / "replay.html"):
        open_page(browser, page)
        key = browser.execute_script(
            "return Array.from(document.querySelectorAll('.algkey .alg[data-algorithm]'))"
            ".map(e => [e.dataset.algorithm, e.dataset.colour])"
        )
        algorithms = sorted({m["algorithm"] for r in page_data(page)["runs"] for m in r["multicasts"]})
        assert sorted(key) == [[a, algorithm_colour(a)] for a in algorithms]
        assert len({c for _, c in key}) == len(key)
        heat = browser.execute_script(
            "return getComputedStyle(document.querySelector('.heatbar')).backgroundImage"
        )
        for _, colour in key:  # no algorithm's colour on the link-load scale
            r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
            assert f"rgb({r}, {g}, {b})" not in heat


def per_link(
    multicasts: list[dict[str, Any]], cols_rows: tuple[int, int], t: int, how: str
) -> list[list[int]]:
    """Each link's load by step t (both directions), summed over ``multicasts`` or their max."""
    rows = cols_rows[1]
    total: Counter[tuple[int, int]] = Counter()
    for m in multicasts:
        mine: Counter[tuple[int, int]] = Counter()
        L = m["links"]
        for i in range(0, len(L), 3):
            if L[i + 2] <= t:
                mine[(min(L[i], L[i + 1]), max(L[i], L[i + 1]))] += 1
        for k, v in mine.items():
            total[k] = total[k] + v if how == "sum" else max(total[k], v)
    return sorted([*divmod(a, rows), *divmod(b, rows), k] for (a, b), k in total.items())


def test_load_page_draws_the_chosen_multicast_over_the_others(
    browser: Any, experiments: dict[str, Path]
) -> None:
    page = experiments["load"] / "replay.html"
    (run,) = page_data(page)["runs"]
    assert run["contention"] == "shared"
    open_page(browser, page)
    ms = run["multicasts"]

    def middle(m: dict[str, Any]) -> int:
        return int(m["links"][2::3][len(m["links"]) // 6])

    met = [
        m
        for m in ms
        if m["links"] and any(o is not m and min(o["links"][2::3], default=1 << 30) <= middle(m) for o in ms)
    ]
    assert met, "the load point has multicasts in the network at once"
    m = met[len(met) // 2]
    browser.execute_script(f"window.replay.select({m['id']})")
    key = browser.execute_script("return document.querySelector('.algkey').textContent")
    assert "the other multicasts' traffic" in key and "chosen" in key
    mid = browser.execute_script(f"return window.replay.seek({middle(m)})")
    got = browser.execute_script("return window.replay.linkLoad()")
    assert got == per_link(ms, (run["cols"], run["rows"]), mid, "sum")  # everyone's traffic, added up
    assert got != per_link([m], (run["cols"], run["rows"]), mid, "sum")
    # follow: the slider spans the chosen multicast's lifetime
    state = browser.execute_script("window.replay.follow(true); return window.replay.state()")
    ends = [m["injected"], *m["links"][2::3], *m["worms"][4::6]]
    last = max(
        [
            *(s + 1 for s in m["links"][2::3]),
            *(f + c for f, c in zip(m["worms"][4::6], m["worms"][5::6], strict=True)),
            *m["arrive"],
        ]
    )
    assert (state["first"], state["steps"], state["step"]) == (min(ends), last, min(ends))
    assert browser.execute_script("return document.getElementById('slider').min") == str(min(ends))
    browser.execute_script("window.replay.seek(0)")
    assert browser.execute_script("return window.replay.state().step") == min(ends)
    browser.execute_script("window.replay.follow(false)")
    assert browser.execute_script("return window.replay.state().first") == 0
    assert [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []


def test_load_pages_all_view_marks_the_messages_alive_now(browser: Any, experiments: dict[str, Path]) -> None:
    page = experiments["load"] / "replay.html"
    (run,) = page_data(page)["runs"]
    ms = run["multicasts"]
    assert len(ms) > 12, "a crowd: the load point has more than 12 messages"

    def life(m: dict[str, Any]) -> tuple[int, int]:
        starts = [m["injected"], *m["links"][2::3], *m["worms"][4::6]]
        ends = [*(s + 1 for s in m["links"][2::3]), *m["arrive"], m["injected"]]
        ends += [f + c for f, c in zip(m["worms"][4::6], m["worms"][5::6], strict=True)]
        return min(starts), max(ends)

    open_page(browser, page)
    steps = browser.execute_script("return window.replay.state().steps")
    for t in (steps // 5, steps // 2, steps):
        browser.execute_script(f"window.replay.seek({t})")
        side = browser.execute_script("return document.querySelector('.side table').textContent")
        alive = sum(lo <= t <= hi for lo, hi in map(life, ms))
        assert f"alive now{alive} (" in side


def test_a_sweeps_all_view_does_not_add_up_multicasts_that_ran_alone(
    browser: Any, experiments: dict[str, Path]
) -> None:
    page = experiments["sweep"] / "replay.html"
    (run,) = page_data(page)["runs"]
    assert run["contention"] == "isolated"
    open_page(browser, page)
    steps = browser.execute_script("return window.replay.state().steps")
    for t in (steps // 4, steps):
        browser.execute_script(f"window.replay.seek({t})")
        got = browser.execute_script("return window.replay.linkLoad()")
        assert got == per_link(run["multicasts"], (run["cols"], run["rows"]), t, "max")
    assert got != per_link(run["multicasts"], (run["cols"], run["rows"]), steps, "sum")


def test_timeline_home_and_end(browser: Any, runs: dict[str, Path]) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    run = runs["tree-mesh"]
    arrived = arrivals_csv(run)
    open_page(browser, run / "replay.html")
    browser.find_element("tag name", "h1").click()
    ActionChains(browser).send_keys(Keys.END).perform()
    state = browser.execute_script("return window.replay.state()")
    assert state["step"] == state["steps"] == state["timeline"]["step"]
    ActionChains(browser).send_keys(Keys.HOME).perform()
    assert browser.execute_script("return window.replay.state().step") == 0
    for t in (0, 3, 6, 9, 30):
        state = browser.execute_script(f"window.replay.seek({t}); return window.replay.state()")
        tl = state["timeline"]
        assert tl["step"] == state["step"]
        want = sorted(((s, n) for (_, n), (s, _) in arrived.items()))
        got = [(r["arrival"], tuple(r["node"])) for r in tl["rows"]]
        assert sorted(got) == want and [a for a, _ in got] == [a for a, _ in want]  # in order of arrival
        assert all(r["delivered"] == (r["arrival"] <= state["step"]) for r in tl["rows"])
    tl = browser.find_element("css selector", "canvas.timeline")
    ActionChains(browser).move_to_element_with_offset(tl, 0, 0).click().perform()
    half = browser.execute_script("return window.replay.state()")
    assert abs(half["step"] - half["steps"] / 2) <= 1  # a click in the middle of the timeline seeks half way


def test_two_panels_side_by_side_each_with_its_list_and_units(
    browser: Any, runs: dict[str, Path], tmp_path: Path
) -> None:
    page = tmp_path / "two.html"
    assert (
        main(["replay", str(runs["two-multicasts"]), str(runs["path-mesh-wormhole"]), "--out", str(page)])
        == 0
    )
    browser.set_window_size(1700, 1000)
    try:
        open_page(browser, page)
        boxes = browser.execute_script(
            "return Array.from(document.querySelectorAll('.panel')).map(p => p.getBoundingClientRect().top)"
        )
        assert len(boxes) == 2 and boxes[0] == boxes[1]  # side by side
        lists = browser.execute_script(
            "return ['mc', 'mc-1'].map(id => "
            "Array.from(document.getElementById(id).options).map(o => o.value))"
        )
        data = page_data(page)["runs"]
        for got, r in zip(lists, data, strict=True):
            ids = [str(m["id"]) for m in r["multicasts"]]
            assert got == (["all", *ids] if len(ids) > 1 else ids)
        browser.execute_script("window.replay.select(1, 0)")  # the left panel's #1; the right has no #1
        assert browser.execute_script(
            "return [window.replay.state(0).selected, window.replay.state(1).selected]"
        ) == [
            "1",
            "0",
        ]
        sides = browser.execute_script(
            "return Array.from(document.querySelectorAll('.side table')).map(t => t.textContent)"
        )
        assert "steps" in sides[0] and "cycles" not in sides[0]
        assert "cycles" in sides[1]
    finally:
        browser.set_window_size(1300, 900)
