"""The allowed values of every setting with choices, each defined once, as a string enum.

A member is a ``str`` (``enum.StrEnum``): it compares equal to, hashes like and serialises as the
text used on the command line, in experiment files, in results and on the wire, so a setting's
value may be the member or its text. :mod:`node.settings` takes each setting's ``choices`` from
here; the engines, the wire's decoder checks and the runtime registry read the same enums.
"""

from __future__ import annotations

import enum

__all__ = [
    "Clock",
    "Contention",
    "Dateline",
    "JitterKind",
    "Policy",
    "PortModel",
    "Router",
    "Switching",
    "Sync",
    "VcClasses",
    "values",
]


class PortModel(enum.StrEnum):
    """Ports a node may send on in one step."""

    ONE_PORT = "one-port"
    ALL_PORT = "all-port"


class Contention(enum.StrEnum):
    """Whether multicasts have the network to themselves or compete for it."""

    ISOLATED = "isolated"
    SHARED = "shared"


class Clock(enum.StrEnum):
    """Lockstep (global steps) or free (forward as soon as a packet arrives)."""

    LOCKSTEP = "lockstep"
    FREE = "free"


class Policy(enum.StrEnum):
    """What a full input buffer does: block the upstream link, or drop and count."""

    BLOCK = "block"
    DROP = "drop"


class Switching(enum.StrEnum):
    """Packet (store-and-forward) or flit-level wormhole switching."""

    STORE_AND_FORWARD = "store-and-forward"
    WORMHOLE = "wormhole"


class VcClasses(enum.StrEnum):
    """Wormhole: unicast and multicast worms share the virtual channels, or keep to disjoint halves."""

    SHARED = "shared"
    SPLIT = "split"


class Dateline(enum.StrEnum):
    """Wormhole on a torus (V ≥ 2): which worms take a ring's upper VCs (docs/wormhole.md "Virtual channels").

    ``wrap``: from the ring's wrap link on (while going straight). ``ring``: BookSim2's
    ``dim_order_torus``: a worm that will cross the wrap link takes them for its whole ring.
    """

    WRAP = "wrap"
    RING = "ring"


class Router(enum.StrEnum):
    """Wormhole: the router's stage timing preset (docs/wormhole.md "Router timing")."""

    PAPER = "paper"
    BOOKSIM = "booksim"


class Sync(enum.StrEnum):
    """Lockstep across processes: the α-synchronizer (null frames) or the coordinator-led barrier."""

    ALPHA = "alpha"
    BARRIER = "barrier"


class JitterKind(enum.StrEnum):
    """A link model's jitter distribution (node/transport/linkmodel.py)."""

    UNIFORM = "uniform"
    NORMAL = "normal"
    LOGNORMAL = "lognormal"
    EXPONENTIAL = "exponential"


def values(choices: type[enum.StrEnum]) -> tuple[str, ...]:
    """The members' texts, in declaration order (argparse's ``choices``, the wire's check)."""
    return tuple(m.value for m in choices)
