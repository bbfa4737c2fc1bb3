"""The defaults every layer shares, each written once: the engines, the wire, the reference
models and the command line read them from here (``tests/test_defaults.py`` checks that none is
written anywhere else)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from node.choices import Dateline, Router, Sync, VcClasses, values

__all__ = [
    "BUFFER_FLITS",
    "DATELINE",
    "FLITS",
    "FLIT_BYTES",
    "LEASE",
    "PREP",
    "ROUTER",
    "ROUTERS",
    "SHAPER_APPROACH_US",
    "SYNCS",
    "TELEMETRY",
    "TS",
    "VCS",
    "VC_CLASSES",
    "hop_limit",
]

FLITS: Final = 64
"""A message's length L in flits (Al-Dubai, Ould-Khaoua & Mackenzie's 64)."""
FLIT_BYTES: Final = 4
"""The bytes of one flit: a link model's rate serialises a message as L × this (β·L), a 32-bit flit."""
TS: Final = 33
"""The start-up time Ts in cycles (Al-Dubai, Ould-Khaoua & Mackenzie's 33)."""
BUFFER_FLITS: Final = 2
"""Wormhole: flits each input channel buffers (2: a worm moves at full rate, one flit a cycle)."""
VCS: Final = 1
"""Wormhole: virtual channels per physical channel (1: none, every record as before VCs existed)."""
VC_CLASSES: Final = VcClasses.SHARED
"""Wormhole: unicast and multicast worms share the virtual channels (``split``: disjoint halves)."""
DATELINE: Final = Dateline.WRAP
"""Wormhole on a torus: the upper VCs from a ring's wrap link on (``ring``: BookSim2's choice)."""
PREP: Final[Mapping[str, int]] = {"dp": 2, "mp": 2, "cp": 4, "qg": 16}
"""Wormhole: preparation cycles at a multicast's source, seed 004's table (others: 0)."""
ROUTER: Final = Router.PAPER
"""Wormhole: the router's stage timing preset (paper: the 1-cycle router of the papers)."""
ROUTERS: Final[Mapping[str, Mapping[str, int]]] = {
    Router.PAPER: {
        "routing_delay": 0,
        "vc_alloc_delay": 0,
        "sw_alloc_delay": 0,
        "st_delay": 0,
        "link_latency": 1,
        "credit_delay": 0,
        "wait_for_tail_credit": 0,
        "input_speedup": 0,
    },
    Router.BOOKSIM: {
        "routing_delay": 0,
        "vc_alloc_delay": 1,
        "sw_alloc_delay": 1,
        "st_delay": 1,
        "link_latency": 1,
        "credit_delay": 0,
        "wait_for_tail_credit": 1,
        "input_speedup": 1,
    },
}
"""Wormhole: each router preset's stage settings (cycles; docs/wormhole.md "Router timing").
``paper``: a head routes, is allocated and crosses in the cycle it arrives, one cycle a hop.
``booksim``: BookSim2's input-queued router as /work/shared/booksim's configs set it up."""
SHAPER_APPROACH_US: Final = 150
"""Free clock: microseconds before a frame's release at which a link's pump stops sleeping and
yields until it is due: a timerfd's wake-up on this machine kind's idle virtual cores is about
0.1 ms late (without a timerfd the pump also stops a poll tick, 1 ms, earlier)."""
LEASE: Final = 6
"""Seconds a node waits for a silent coordinator before it leaves the run (the coordinator says it
is alive every third of it): long enough for a coordinator starved of CPU on a shared machine."""
TELEMETRY: Final = True
"""Free clock: packets carry per-hop receive and send times (cost: docs/measurements/telemetry.md)."""
SYNCS: Final = values(Sync)
"""Lockstep across processes: the α-synchronizer (null frames) or the coordinator-led barrier."""


def hop_limit(size: int) -> int:
    """The default hop limit of a network of ``size`` nodes: no route of a rule is longer."""
    return 4 * size + 16
