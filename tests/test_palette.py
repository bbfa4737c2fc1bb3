"""output.palette: one colour per algorithm, distinct, the same in every plot."""

from __future__ import annotations

import pytest

from coordinator.output import palette as palette_mod
from coordinator.output.palette import BUILT_IN, SPARE, algorithm_colour, palette
from node.routing import registry


def test_every_registered_algorithm_has_its_own_colour() -> None:
    colours = {name: algorithm_colour(name) for name in registry.names()}
    assert len(set(colours.values())) == len(colours), colours
    assert colours["dp"] != colours["mp"]  # both were the same grey in run and load plots


def test_every_built_in_algorithm_has_a_fixed_colour() -> None:
    from coordinator.cli.run_command import built_in

    assert set(BUILT_IN) == {a.name for a in registry if built_in(a)}
    assert len(set(BUILT_IN.values())) == len(BUILT_IN)
    assert not set(SPARE) & set(BUILT_IN.values()) and len(set(SPARE)) == len(SPARE)


@pytest.mark.parametrize("plugins", [1, len(SPARE), len(SPARE) + 25])
def test_plug_ins_take_distinct_colours_however_many(plugins: int, monkeypatch: pytest.MonkeyPatch) -> None:
    names = [*registry.names(), *(f"plugin-{i}" for i in range(plugins))]
    monkeypatch.setattr(registry, "names", lambda: names)
    palette_mod._registered.cache_clear()
    try:
        colours = [algorithm_colour(n) for n in names]
    finally:
        palette_mod._registered.cache_clear()
    assert len(set(colours)) == len(names)
    assert all(algorithm_colour(n) == BUILT_IN[n] for n in BUILT_IN)
    assert palette(["plugin-0", "dp"]) == {"dp": BUILT_IN["dp"], "plugin-0": SPARE[0]}


def test_an_unknown_name_gets_a_spare_colour_that_stays_the_same() -> None:
    assert algorithm_colour("not-installed") == algorithm_colour("not-installed") in SPARE


def test_the_reproductions_draw_with_the_same_palette() -> None:
    from coordinator.reproduce import _tasnem_study, aldubai, chen, herley

    for mod in (aldubai, chen, herley, _tasnem_study):
        assert dict(mod.COLOURS) == {a: algorithm_colour(a) for a in mod.ALGORITHMS}, mod.__name__
