"""The lockstep clock of one node, sans-IO: frames of step t-1 in, frames of step t out.

A node runs an α-synchronizer: it does step t only after it has every neighbour's frame for
t-1, and it stops by itself once no node can be busy any more (:func:`quiescent`), so every
node stops at the same step. Step t: per port in canonical order, the neighbour's credits then
its packets; then the injections of step t; then the engine's step. Credits travel in the
frames (``freed``), and so does the latest busy step the node knows (``last_busy``).

Nothing here awaits or touches a socket: the trio actor (:mod:`node.actor`) drives it over
real links, and the engines runtime drives one per node in a plain loop. It is generic over
the engine (:class:`StepEngine`: the packet engine of :mod:`node.engine`, or any engine with
the same step-in/step-out shape).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from node.engine import Injection
from node.wire import Item, StepFrame

__all__ = ["Lockstep", "StepEngine", "quiescent"]


class StepEngine(Protocol):
    """What the driver needs of an engine: arrivals, credits, injections, one step at a time."""

    def credit_back(self, port: str, n: int) -> None: ...
    def receive(self, item: Any, port: str | None = None, /) -> None: ...  # a Packet or a Flit
    def inject(self, inj: Injection) -> None: ...
    def busy(self) -> bool: ...
    def step(self, t: int) -> list[tuple[str, Any]]: ...
    def take_freed(self) -> dict[str, int]: ...


def quiescent(step: int, last_busy: int, diameter: int) -> bool:
    """True once nothing can happen any more anywhere.

    ``last_busy`` is the latest step at which this node knows any node was busy (its own
    busy steps and its neighbours' values, one step old). Information travels one hop per
    step, so once ``step - last_busy > diameter`` every busy step would have reached us:
    the network has been idle since ``last_busy``, and every node concludes so at the same
    step.
    """
    return step - last_busy > diameter


class Lockstep:
    """One node's lockstep clock around its engine."""

    def __init__(
        self,
        engine: StepEngine,
        ports: Sequence[str],
        *,
        diameter: int,
        max_steps: int,
        injections: Iterable[Injection] = (),
        last_injection: int = 0,
    ) -> None:
        self.engine = engine
        self.ports = tuple(ports)
        self.diameter = diameter
        self.max_steps = max_steps
        self._injections: dict[int, list[Injection]] = {}
        for inj in injections:
            self._injections.setdefault(inj.step, []).append(inj)
        self.last_busy = last_injection
        self.step = 0
        """The step to do next; once :attr:`finished`, the run's last step."""
        self.finished = False

    @property
    def due(self) -> int | None:
        """The step whose neighbour frames :meth:`advance` needs next (None: none, step 0)."""
        return self.step - 1 if self.step > 0 else None

    def advance(self, frames: Mapping[str, StepFrame]) -> dict[str, StepFrame] | None:
        """Do the next step with the neighbours' frames of the step before (by port).

        Returns this step's frame for every port, or None when the run is over at this step
        (every node stops at the same step, so nobody waits for a frame of it). A port with no
        frame counts as an empty one.
        """
        if self.finished:
            raise RuntimeError("the lockstep run is over")
        engine = self.engine
        t = self.step
        if t > 0:
            for p in self.ports:
                frame = frames.get(p)
                if frame is None:
                    continue
                self.last_busy = max(self.last_busy, frame.last_busy)
                engine.credit_back(p, frame.freed)
                for pkt in frame.packets:
                    engine.receive(pkt, p)
        for inj in self._injections.pop(t, ()):
            engine.inject(inj)
        was_busy = engine.busy()
        sends = engine.step(t)
        if was_busy or sends:
            self.last_busy = max(self.last_busy, t)
        if quiescent(t, self.last_busy, self.diameter) or t >= self.max_steps:
            self.finished = True
            end = getattr(engine, "end", None)  # an engine that reports what it still holds
            if end is not None:
                end(t)
            return None
        by_port: dict[str, list[Item]] = {}
        for port, pkt in sends:
            by_port.setdefault(port, []).append(pkt)
        freed = engine.take_freed()
        self.step = t + 1
        return {
            p: StepFrame(t, self.last_busy, tuple(by_port.get(p, ())), freed.get(p, 0)) for p in self.ports
        }
