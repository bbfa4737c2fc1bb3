"""Injection plans: which multicasts start where, when, with which algorithm; validated up front.

Every user input is checked here before anything starts, and a bad one raises
:class:`PlanError` with a message that names it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from node.routing import UnknownAlgorithm, registry
from node.routing.base import PlanError
from node.topology import Coord, Topology, TopologyError

__all__ = ["Multicast", "Plan", "PlanError", "explicit", "random_plan", "validate"]


class _Record(Protocol):
    @property
    def id(self) -> int: ...


_R = TypeVar("_R", bound=_Record)


@dataclass(frozen=True, slots=True)
class Multicast:
    """One multicast of a plan."""

    id: int
    algorithm: str
    source: Coord
    destinations: tuple[Coord, ...]
    step: int = 0
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_wire(self) -> list[Any]:
        return [
            self.id,
            self.algorithm,
            list(self.source),
            [list(d) for d in self.destinations],
            self.step,
            dict(self.params),
        ]


@dataclass(frozen=True, slots=True)
class Plan:
    """Multicasts to emulate; ``warmup`` names those emulated only to warm the runtime up.

    Warm-up multicasts run like any other (the raw run holds their records) and are then left
    out of every result: summaries, jitter, CSVs and plots (see ``kept``).
    """

    topology: Topology
    multicasts: tuple[Multicast, ...]
    warmup: frozenset[int] = frozenset()
    """Ids of the warm-up multicasts."""
    warmup_repeats: int = 0
    """Warm-up repetitions of each multicast set (``warmup`` holds that many per set)."""

    def kept(self, records: Sequence[_R]) -> list[_R]:
        """``records`` (one per multicast, with its ``id``) without the warm-up multicasts'."""
        return [r for r in records if r.id not in self.warmup]

    @property
    def last_step(self) -> int:
        return max((m.step for m in self.multicasts), default=0)

    def to_wire(self) -> dict[str, Any]:
        return {
            "last_step": self.last_step,
            "multicasts": [m.to_wire() for m in self.multicasts],
        }


def check_algorithm(name: str, topology: Topology) -> None:
    try:
        alg = registry.get(name)
    except UnknownAlgorithm as exc:
        raise PlanError(str(exc)) from None
    why = alg.unsupported(topology)
    if why:
        raise PlanError(why)


def validate(
    topology: Topology, algorithm: str, source: Coord, destinations: Sequence[Coord]
) -> tuple[Coord, ...]:
    """Check one multicast; return its destinations as a tuple of coordinates."""
    check_algorithm(algorithm, topology)
    try:
        src = topology.check(source, "source")
        dests = tuple(topology.check(d, "destination") for d in destinations)
    except TopologyError as exc:
        raise PlanError(str(exc)) from None
    if not dests:
        raise PlanError("a multicast needs at least one destination")
    if src in dests:
        raise PlanError(f"destination ({src[0]},{src[1]}) is the source itself")
    seen: set[Coord] = set()
    for d in dests:
        if d in seen:
            raise PlanError(f"destination ({d[0]},{d[1]}) is listed twice")
        seen.add(d)
    return dests


def explicit(
    topology: Topology,
    algorithms: Sequence[str],
    source: Coord,
    destinations: Sequence[Coord],
    repeat: int = 1,
    params: Mapping[str, Any] | None = None,
    inject_every: int = 0,
    warmup: int = 0,
) -> Plan:
    """The same multicast ``repeat`` times for each algorithm, the i-th injected at step i·``inject_every``.

    ``inject_every`` 0 injects them all at step 0; a spacing longer than one multicast's time
    keeps repetitions apart under the lockstep clock (the free clock does not follow steps).
    ``warmup`` more repetitions come first for each algorithm, marked as the plan's warm-up: they
    run, and the results leave them out. Ids and injection steps count every repetition in
    plan order, warm-up ones included.
    """
    if repeat < 1:
        raise PlanError(f"--repeat must be at least 1, got {repeat}")
    if inject_every < 0:
        raise PlanError(f"--inject-every must be at least 0, got {inject_every}")
    if warmup < 0:
        raise PlanError(f"--warmup-repeats must be at least 0, got {warmup}")
    dests: tuple[Coord, ...] = ()
    for a in algorithms:
        dests = validate(topology, a, source, destinations)
    mcs: list[Multicast] = []
    cold: set[int] = set()
    for a in algorithms:
        for i in range(warmup + repeat):
            if i < warmup:
                cold.add(len(mcs))
            step = len(mcs) * inject_every
            mcs.append(Multicast(len(mcs), a, tuple(source), dests, step, dict(params or {})))  # type: ignore[arg-type]
    return Plan(topology, tuple(mcs), frozenset(cold), warmup)


def random_plan(
    topology: Topology,
    algorithms: Sequence[str],
    k: int | Sequence[int],
    repeat: int = 1,
    seed: int = 1,
    source: Coord | None = None,
    params: Mapping[str, Any] | None = None,
) -> Plan:
    """``repeat`` destination sets of each size in ``k`` (uniform, seeded), shared by every algorithm.

    The source is ``source`` or, if None, drawn uniformly for each set. Each algorithm gets the
    very same sets, as the seed papers compared them.
    """
    ks = [k] if isinstance(k, int) else list(k)
    if repeat < 1:
        raise PlanError(f"--repeat must be at least 1, got {repeat}")
    for a in algorithms:
        check_algorithm(a, topology)
    if source is not None:
        try:
            source = topology.check(source, "source")
        except TopologyError as exc:
            raise PlanError(str(exc)) from None
    for kk in ks:
        if not 1 <= kk <= topology.size - 1:
            raise PlanError(
                f"cannot pick {kk} destinations on {topology.spec}: between 1 and {topology.size - 1}"
            )
    rng = random.Random(seed)
    nodes = list(topology.nodes())
    sets: list[tuple[Coord, tuple[Coord, ...]]] = []
    for kk in ks:
        for _ in range(repeat):
            src = source if source is not None else rng.choice(nodes)
            others = [n for n in nodes if n != src]
            sets.append((src, tuple(rng.sample(others, kk))))
    mcs: list[Multicast] = []
    for a in algorithms:
        for src, dests in sets:
            mcs.append(Multicast(len(mcs), a, src, dests, 0, dict(params or {})))
    return Plan(topology, tuple(mcs))
