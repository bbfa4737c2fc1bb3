"""The router's vocabulary, shared by the flit engine (:mod:`node.switching.wormhole`) and the
reference model (``coordinator/runtimes/wormhole_model.py``), which share no other code: the input
channels' states, the stages in their order, a deadlock report's holding and the preparation times."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

from node import defaults
from node.routing import Registry, UnknownAlgorithm
from node.routing.base import HEADER_ERRORS
from node.topology import Coord, Topology
from node.transport.wire import Worm, as_received

__all__ = ["PREP", "STAGES", "Holding", "VcState", "crosses_wrap", "prep_table", "wraps"]

PREP: Final[Mapping[str, int]] = defaults.PREP
"""Preparation time at the source in cycles (seed 004 §4.2); other algorithms spend none."""


def prep_table(prep: int | None, registry: Registry) -> Mapping[str, int]:
    """Preparation cycles per algorithm: seed 004's table (:data:`PREP`) or ``prep`` for all."""
    if prep is None:
        return PREP
    return dict.fromkeys(registry.names(), prep)


def wraps(topology: Topology, here: Coord, port: str) -> bool:
    """Whether the link from ``here`` on ``port`` is a torus wrap link (it closes its ring)."""
    nb = topology.neighbour(here, port)
    if nb is None or not topology.is_torus:
        return False
    axis = 0 if port in ("+x", "-x") else 1
    return nb[axis] < here[axis] if port[0] == "+" else nb[axis] > here[axis]


def crosses_wrap(
    topology: Topology, registry: Registry, alg: str, here: Coord, port: str, header: Any
) -> bool:
    """Whether a worm leaving ``here`` on ``port`` with ``header`` crosses that ring's wrap link before
    it turns, stops or branches off the ring: its rule is run ahead, node by node along the ring
    (pure). ``--dateline ring`` (BookSim2's ``dim_order_torus``) gives such a worm the upper VCs for
    the whole ring; a rule that fails ahead counts as not crossing (it fails again when the worm
    gets there)."""
    rule = registry.get(alg).forward
    n, h = here, as_received(header)  # each node ahead reads the header as it arrives: off the wire
    for _ in range(topology.cols if port in ("+x", "-x") else topology.rows):
        if wraps(topology, n, port):
            return True
        nxt = topology.neighbour(n, port)
        if nxt is None:
            return False
        try:
            fwd = rule(topology, nxt, h)
        except (UnknownAlgorithm, *HEADER_ERRORS):
            return False
        cont = fwd.carried if fwd.startup else len(fwd.sends)
        ahead = [h2 for p2, h2 in fwd.sends[:cont] if p2 == port]
        if not ahead:
            return False
        n, h = nxt, as_received(ahead[0])
    return False


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
