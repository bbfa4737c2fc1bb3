"""``meshcast demo``: the definitions it prints, the thesis's Example 1 beside ours, and only the
built-in algorithms (an installed plug-in is named but not run)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from coordinator.cli import main
from coordinator.cli.run_command import MALANI_EXAMPLE_1, built_in, demo_algorithms
from node.routing import Algorithm, registry
from node.topology import Topology


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Algorithm:
    """A working rule registered as a plug-in would be (a copy of unicast under its own name)."""
    fake = dataclasses.replace(registry.get("unicast"), name="fake-plugin", family="fake")
    monkeypatch.setitem(registry._by_name, fake.name, fake)
    monkeypatch.setattr(registry, "_order", None)  # the cached order: register() would clear it
    assert "fake-plugin" in registry
    return fake


def test_built_in_tells_the_rules_of_node_routing_from_plug_ins(plugin: Algorithm) -> None:
    assert built_in(registry.get("vh")) and built_in(registry.get("qg")) and built_in(registry.get("unicast"))
    assert not built_in(plugin)
    for spec in ("mesh:8x8", "torus:16x16"):
        names = demo_algorithms(Topology.parse(spec))
        assert "fake-plugin" not in names and "unicast" in names
    mesh = set(demo_algorithms(Topology.parse("mesh:8x8")))
    assert {"vh", "diag", "dist", "pair", "min", "dp", "mp"} <= mesh


def test_demo_defines_its_terms_shows_the_thesis_and_leaves_plug_ins_out(
    plugin: Algorithm, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert "CV = SD / mean of one multicast's arrival steps at its destinations" in text
    assert "Al-Dubai et al.'s node-level coefficient of variation" in text
    assert "additional traffic = traffic − number of destinations" in text
    assert "Example 1, Malani's algorithms: ours beside the thesis's" in text
    for alg, (traffic, time) in MALANI_EXAMPLE_1.items():  # ours beside the thesis's, row by row
        ours_time, ours_traffic = {"dist": (12, 17)}.get(alg, (time, traffic))
        row = rf"│ {alg}\s+│\s+{ours_time} │\s+{time} │\s+{ours_traffic} │\s+{traffic} │"
        assert re.search(row, out), (alg, row)
    assert re.search(r"│ min\s+│\s+18 │\s+— │\s+20 │\s+— │", out)  # the thesis has no Example 1 MIN
    assert MALANI_EXAMPLE_1 == {"vh": (25, 12), "diag": (21, 12), "dist": (17, 17), "pair": (17, 12)}
    # the plug-in is named once, as left out, and appears in no list or table
    assert out.count("fake-plugin") == 1
    assert "installed plug-ins, not in the demo: fake-plugin" in text
