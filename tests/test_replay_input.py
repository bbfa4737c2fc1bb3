"""``meshcast replay`` on bad input (issue 47): every malformed run.json or links.csv gives one line
and exit 2, never a traceback; a link between non-adjacent nodes or a negative step is refused,
not drawn. Fuzzed with hypothesis from a real traced run."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.cli import main
from tests.test_replay import RUNS, make_run

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A traced two-multicast run (run.json, links.csv) to damage."""
    return make_run(
        tmp_path_factory.mktemp("input") / "two", [*RUNS["two-multicasts"], "--trace"], replay=False
    )


def replay(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["replay", str(run)])
    return code, capsys.readouterr().err


def copy_with(traced: Path, dest: Path, doc: Any = None, links: str | None = None) -> Path:
    """``traced`` copied to ``dest`` with run.json replaced by ``doc`` and/or links.csv by ``links``."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copy(traced / "run.json", dest / "run.json")
    shutil.copy(traced / "links.csv", dest / "links.csv")
    if doc is not None:
        (dest / "run.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    if links is not None:
        (dest / "links.csv").write_text(links)
    return dest


def one_line(code: int, err: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err


def page_links(run: Path) -> list[list[int]]:
    html = (run / "replay.html").read_text()
    data = json.loads(re.search(r'id="replay-data">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    return [m["links"] for r in data["runs"] for m in r["multicasts"]]


def damaged(doc: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    m = out["multicasts"][0]
    if where == "links":
        m["links"] = value
    elif where == "link":
        m["links"][0] = value
    elif where == "link.from":
        m["links"][0]["from"] = value
    elif where == "link.step":
        m["links"][0]["step"] = value
    elif where == "arrival.step":
        m["arrivals"][0]["step"] = value
    elif where == "arrivals":
        m["arrivals"] = value
    elif where == "destinations":
        m["destinations"] = value
    elif where == "multicasts":
        out["multicasts"] = value
    elif where == "topology":
        out["run"]["topology"] = value
    return out


@pytest.mark.parametrize(
    ("where", "value", "words"),
    [
        ("links", "0,0 1,0", "links is a str, not a list"),  # the traceback
        ("links", {"from": [0, 0]}, "not a list"),
        ("link.step", -1, "below 0"),
        ("link.step", 2.5, "not a whole number"),
        ("arrival.step", -3, "below 0"),
        ("link.from", [5, 5], "joins no neighbours"),
        ("link.from", [9, 0], "outside mesh:6x6"),
        ("link", "0,0", "AttributeError"),
        ("destinations", "3,2", "not a list"),
        ("multicasts", [1, 2], "not an object"),
        ("topology", 7, "not a meshcast result"),
    ],
)
def test_a_malformed_run_json_is_one_line_and_exit_2(
    traced: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, value: Any, words: str
) -> None:
    doc = json.loads((traced / "run.json").read_text())
    run = copy_with(traced, tmp_path / "bad", damaged(doc, where, value), links="mc,algorithm,from,to,step\n")
    (run / "links.csv").unlink()  # run.json alone: its own errors
    code, err = replay(run, capsys)
    one_line(code, err)
    assert words in err and "run.json" in err
    assert not (run / "replay.html").exists()


def test_a_wrap_around_link_is_a_link_on_a_torus_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(0, y) -> (cols - 1, y) joins neighbours on a torus and is drawn; on a mesh it is refused."""
    run = make_run(tmp_path / "torus", [*RUNS["tree-torus"], "--trace"], replay=False)
    doc = json.loads((run / "run.json").read_text())
    doc["multicasts"][0]["links"][0].update({"from": [0, 1], "to": [5, 1]})
    (run / "run.json").write_text(json.dumps(doc))
    (run / "links.csv").unlink()
    assert main(["replay", str(run)]) == 0
    assert page_links(run)[0][:2] == [0 * 5 + 1, 5 * 5 + 1]
    doc["run"]["topology"] = "mesh:6x5"
    (run / "run.json").write_text(json.dumps(doc))
    code, err = replay(run, capsys)
    one_line(code, err)
    assert "joins no neighbours" in err


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [("to", [5, 5], "joins no neighbours"), ("first", -2, "below 0"), ("port", "up", "not in tuple"),
     ("count", 0, "fewer than 1 flit")],
)  # fmt: skip
def test_a_malformed_worm_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: Any, words: str
) -> None:
    run = make_run(tmp_path / "worms", [*RUNS["path-mesh-wormhole"], "--trace"], replay=False)
    doc = json.loads((run / "run.json").read_text())
    worm = next(w for w in doc["multicasts"][0]["worms"] if w["to"] is not None)
    worm[field] = value
    (run / "run.json").write_text(json.dumps(doc))
    code, err = replay(run, capsys)
    one_line(code, err)
    assert words in err


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda t: t.replace("mc,algorithm", "mc;algorithm", 1), "malformed links.csv"),
        (lambda t: t + "0,diag,1,1\n", "4 fields"),
        (lambda t: t + "0,diag,x,1,2,3\n", "6 fields"),
        (lambda t: t + "zero,diag,0,0,1,0,3\n", "malformed links.csv"),
        (lambda t: t + '0,diag,"0,0","1,0",99\n', "disagrees with run.json"),
        (lambda t: "\n".join(t.splitlines()[:-1]) + "\n", "disagrees with run.json"),
        (lambda t: t.replace(",", ",,", 1), "malformed links.csv"),
        (lambda t: "\x00\xff" + t, "malformed links.csv"),
    ],
)
def test_a_damaged_links_csv_is_named(
    traced: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, words: str
) -> None:
    run = copy_with(traced, tmp_path / "bad", links=change((traced / "links.csv").read_text()))
    code, err = replay(run, capsys)
    one_line(code, err)
    assert words in err and "links.csv" in err


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=8,
)
PLACES = st.sampled_from(
    [
        "links",
        "link",
        "link.from",
        "link.step",
        "arrival.step",
        "arrivals",
        "destinations",
        "multicasts",
        "topology",
    ]
)


@SETTINGS
@given(where=PLACES, value=JSON)
def test_fuzzed_run_json(
    traced: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, value: Any
) -> None:
    """Any value anywhere the page reads: exit 2 in one line, or a page whose links all join
    neighbours at steps from 0."""
    doc = damaged(json.loads((traced / "run.json").read_text()), where, value)
    run = copy_with(traced, tmp_path / "fuzz", doc)
    (run / "links.csv").unlink()
    code, err = replay(run, capsys)
    if code == 0:
        for links in page_links(run):
            assert all(s >= 0 for s in links[2::3])
            for a, b in zip(links[0::3], links[1::3], strict=True):
                (ax, ay), (bx, by) = divmod(a, 6), divmod(b, 6)
                assert abs(ax - bx) + abs(ay - by) == 1
    else:
        one_line(code, err)


@SETTINGS
@given(data=st.data())
def test_fuzzed_links_csv(
    traced: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: Any
) -> None:
    """A links.csv with a line cut, replaced, doubled or garbled: exit 2 in one line unless its
    rows still say exactly what run.json says."""
    lines = (traced / "links.csv").read_text().splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    how = data.draw(st.sampled_from(["cut", "replace", "double", "truncate"]))
    if how == "cut":
        del lines[i]
    elif how == "replace":
        lines[i] = data.draw(st.text(max_size=30).filter(lambda t: "\n" not in t and "\r" not in t))
    elif how == "double":
        lines.insert(i, lines[i])
    else:
        lines[i] = lines[i][: data.draw(st.integers(0, max(0, len(lines[i]) - 1)))]
    text = "\n".join(lines) + "\n"
    run = copy_with(traced, tmp_path / "fuzz", links=text)
    code, err = replay(run, capsys)
    if code == 0:  # the same rows as the original, in a spelling csv reads the same way
        assert sorted(text.splitlines()[1:]) != [] and (run / "replay.html").exists()
    else:
        one_line(code, err)
        assert "links.csv" in err
    if how in ("cut", "double") and i > 0:
        assert code == 2  # a row lost or repeated is always named
