"""One colour per algorithm, the same in every plot: ``run``/``sweep``/``load`` plots and the
reproductions' figures alike.

The built-in algorithms have fixed colours (:data:`BUILT_IN`), chosen so that the algorithms one
paper compares are far apart: Malani's five keep the first five of matplotlib's ``tab10``, seed
001's comparators keep the colours its report always drew, and the path-based, grouping and
mcast families take colours of their own. A plug-in registered through the entry points takes the
next free colour of :data:`SPARE`, in name order, and any other name (a plug-in not installed
here) one of the spare colours picked by its name, so its colour does not depend on what else is
installed.
"""

from __future__ import annotations

import colorsys
import zlib
from collections.abc import Iterable, Mapping
from functools import cache

from node.routing import registry

__all__ = ["BUILT_IN", "SPARE", "algorithm_colour", "palette"]

BUILT_IN: Mapping[str, str] = {
    # Malani (seed 000): matplotlib's tab10 blue, orange, green, red, purple
    "diag": "#1f77b4",
    "pair": "#ff7f0e",
    "min": "#2ca02c",
    "vh": "#d62728",
    "dist": "#9467bd",
    # TASNEM and its comparators (seed 001)
    "tasnem": "#000000",
    "hcm": "#8c564b",
    "t2w": "#17becf",
    "uniform": "#bcbd22",
    # path-based (seeds 003 and 004): Al-Dubai's DP, MP, CP and QG
    "dp": "#e377c2",
    "mp": "#393b79",
    "cp": "#8c6d31",
    "qg": "#008856",
    # proximity grouping (seed 003)
    "group-graph": "#637939",
    "group-pattern": "#6b6ecf",
    # Herley, Pietracaprina & Pucci's mcast family
    "replicate": "#a55194",
    "tree": "#0067a5",
    "herley-tiles": "#8db600",
    "herley-random": "#e25822",
    # the baseline: one copy per destination (dor: the torus tie split as BookSim2 splits it)
    "unicast": "#7f7f7f",
    "dor": "#4a4a4a",
}
"""The built-in algorithms' colours, pairwise distinct (a test checks)."""

SPARE: tuple[str, ...] = (
    "#f3c300", "#604e97", "#f99379", "#843c39", "#b3446c", "#c2b280", "#2b3d26", "#a1caf1",
    "#654522", "#dcd300", "#882d17", "#e68fac", "#0b3d91", "#f6a600", "#ce6dbd", "#3d7a5c",
)  # fmt: skip
"""Colours for plug-ins, none of them a built-in algorithm's."""


def _generated(i: int) -> str:
    """The ``i``-th colour past :data:`SPARE`: hues a golden angle apart, mid saturation."""
    r, g, b = colorsys.hsv_to_rgb((0.11 + i * 0.618034) % 1.0, 0.55 + 0.3 * (i % 2), 0.55 + 0.2 * (i % 3) / 2)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def palette(names: Iterable[str]) -> dict[str, str]:
    """A colour for each of ``names``: the built-in ones their own, the others the spare colours
    in name order, then generated ones; pairwise distinct however many there are."""
    names = list(names)
    colours = {n: BUILT_IN[n] for n in names if n in BUILT_IN}
    taken = set(colours.values())
    spare = (c for c in (*SPARE, *(_generated(i) for i in range(10_000))) if c not in taken)
    for name in sorted(set(names) - set(colours)):
        colours[name] = next(spare)
    return colours


@cache
def _registered() -> dict[str, str]:
    return palette(registry.names())


def algorithm_colour(name: str) -> str:
    """``name``'s colour in every plot: its own for a built-in algorithm, a distinct spare one for
    every registered plug-in, and for an unknown name a spare colour picked by the name."""
    registered = _registered()
    if name in registered:
        return registered[name]
    return SPARE[zlib.crc32(name.encode()) % len(SPARE)]
