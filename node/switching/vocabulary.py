"""The router's vocabulary, shared by the flit engine (:mod:`node.switching.wormhole`) and the
reference model (``coordinator/runtimes/wormhole_model.py``), which share no other code: the input
channels' states, the stages in their order, a deadlock report's holding and the preparation times."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from node import defaults
from node.routing import Registry
from node.topology import Coord
from node.transport.wire import Worm

__all__ = ["PREP", "STAGES", "Holding", "VcState", "prep_table"]

PREP: Final[Mapping[str, int]] = defaults.PREP
"""Preparation time at the source in cycles (seed 004 §4.2); other algorithms spend none."""


def prep_table(prep: int | None, registry: Registry) -> Mapping[str, int]:
    """Preparation cycles per algorithm: seed 004's table (:data:`PREP`) or ``prep`` for all."""
    if prep is None:
        return PREP
    return dict.fromkeys(registry.names(), prep)


@dataclass(frozen=True, slots=True)
class Holding:
    """For a deadlock report: a worm, the input channel its front sits in, the outputs it owns/wants."""

    node: Coord
    mc: int
    worm: Worm
    channel: str
    owns: tuple[str, ...]
    wants: tuple[str, ...]


class VcState(IntEnum):
    """An input channel's state (one per VC; an injection channel has one), as BookSim2's ``VC``.

    IDLE: empty, no worm. ROUTING: flits arrived with no worm bound; route computation takes its
    front head (or drops the strays before it). VC_ALLOC: a worm is bound and waits for an output
    VC on some port it needs, or for an ejection channel (it keeps what it got: hold-and-wait).
    ACTIVE: it holds every output it needs; switch allocation lets its front flit move. The tail
    leaving makes it IDLE again, or ROUTING when the next worm's flits are behind it.
    """

    IDLE = 0
    ROUTING = 1
    VC_ALLOC = 2
    ACTIVE = 3


STAGES: Final = ("startup", "route", "vc_alloc", "sw_alloc", "traverse")
"""The router's stages, the order in which :meth:`WormholeEngine.step` runs them (the model runs the
same): start-ups at the injection channels, route computation, VC allocation, switch allocation,
switch traversal (the flit leaves on its links or into its ejection channel, a credit goes back)."""
