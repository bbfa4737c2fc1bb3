"""The defaults every layer shares, each written once: the engines, the wire, the reference
models and the command line read them from here (``tests/test_defaults.py`` checks that none is
written anywhere else)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["BUFFER_FLITS", "FLITS", "PREP", "SYNCS", "TS", "VCS", "VC_CLASSES", "hop_limit"]

FLITS: Final = 64
"""A message's length L in flits (Al-Dubai, Ould-Khaoua & Mackenzie's 64)."""
TS: Final = 33
"""The start-up time Ts in cycles (Al-Dubai, Ould-Khaoua & Mackenzie's 33)."""
BUFFER_FLITS: Final = 2
"""Wormhole: flits each input channel buffers (2: a worm moves at full rate, one flit a cycle)."""
VCS: Final = 1
"""Wormhole: virtual channels per physical channel (1: none, every record as before VCs existed)."""
VC_CLASSES: Final = "shared"
"""Wormhole: unicast and multicast worms share the virtual channels (``split``: disjoint halves)."""
PREP: Final[Mapping[str, int]] = {"dp": 2, "mp": 2, "cp": 4, "qg": 16}
"""Wormhole: preparation cycles at a multicast's source, seed 004's table (others: 0)."""
SYNCS: Final = ("alpha", "barrier")
"""Lockstep across processes: the α-synchronizer (null frames) or the coordinator-led barrier."""


def hop_limit(size: int) -> int:
    """The default hop limit of a network of ``size`` nodes: no route of a rule is longer."""
    return 4 * size + 16
