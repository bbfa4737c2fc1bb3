"""The one engine factory: a run's settings in, the node's step engine out (packets or flits).

``--switching store-and-forward`` (the default) gives :class:`node.switching.engine.Engine`;
``--switching wormhole`` gives :class:`LockstepWormhole`, the flit-level engine of
:mod:`node.switching.wormhole` as the lockstep driver (:mod:`node.switching.lockstep`) sees it.
The node actor and
the coordinator's engines runtime both build their engines here, from settings that carry the
same names from the CLI down (:class:`node.settings.NodeSettings`: the coordinator's
``RunSettings`` or a node's ``assign``).

**Deadlock, distributed.** A wormhole network can deadlock: worms hold channels and none
moves, for ever. The driver ends a run when no node has been busy for longer than the network
diameter (every node learns so at the same step). :class:`LockstepWormhole` therefore counts
as busy only while it makes progress — it moved a flit or a start-up or preparation timer is
running — within the last :data:`STALL_STEPS` + 1 steps; a node whose worms are stuck stops
counting as busy. While any node progresses the run goes on (its busy steps keep the clock
alive); once none has for that long — the network-wide stall, where the reference model
(``coordinator/runtimes/wormhole_model.py``) ends a run too — every node stops at the same step,
and a node that still holds worms reports each one as a ``deadlock`` error naming the channels it
holds and wants (:meth:`LockstepWormhole.end`), which the run's incomplete causes then name.

**The deadlock verdict** (docs/wormhole.md "Deadlock": a cycle of still worm segments in the
wait-for graph) needs the whole network's tables, which only a driver that holds every engine
has: the engines runtime builds it from :meth:`LockstepWormhole.segments` (each bound worm that
has not changed for more than :data:`STALL_STEPS` steps, and what it waits for) and
:meth:`LockstepWormhole.holder`; :meth:`LockstepWormhole.step` keeps the step each bound worm
last changed (bound, granted a channel, or a flit left its buffer). The distributed runtimes
have no verdict: they end at the stall, and go on injecting after a cycle has formed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final

from node import defaults
from node.choices import Clock, Contention, VcClasses
from node.routing import Registry
from node.settings import SWITCHINGS, NodeSettings, field_problem, settings_of
from node.switching.engine import Engine, Injection, NodeError
from node.switching.wormhole import VC_ALLOC, WormholeEngine, prep_table
from node.topology import Coord, Topology
from node.transport.wire import Flit

__all__ = [
    "STALL_STEPS",
    "SWITCHINGS",
    "AnyEngine",
    "LockstepWormhole",
    "Segment",
    "check_switching",
    "make_engine",
    "prep_table",
]

STALL_STEPS: Final = 2
"""Steps without progress a worm may sit (a returned credit needs one) before it counts as stuck."""


def check_switching(s: NodeSettings, torus: bool | None = None) -> str | None:
    """Why these settings cannot run (one line), or None when they can: the one check of a node's
    settings, beyond each field's own range and choices (:func:`node.settings.field_problem`, here
    too, for settings made in code rather than on the command line or the wire).

    ``torus``: whether the topology is a torus (virtual-channel classes need more VCs there);
    None when it is not known yet.
    """
    why = field_problem(s)
    if why is not None:
        return why
    if not s.wormhole:
        if s.vcs != defaults.VCS or s.vc_classes != defaults.VC_CLASSES or s.dateline != defaults.DATELINE:
            return "vcs, vc_classes and dateline apply to wormhole switching only"
        if not s.router_timing().is_paper:
            return "--router and the router stage settings apply to wormhole switching only"
        return None
    if s.vc_classes == VcClasses.SPLIT and s.vcs < 2:
        return (
            f"vc_classes split puts unicast and multicast on disjoint VCs: needs vcs 2 or more, got {s.vcs}"
        )
    if s.dateline != defaults.DATELINE and torus is False:
        return f"dateline {s.dateline} picks a torus ring's VC half: a mesh has no wrap link"
    if s.dateline != defaults.DATELINE and s.vcs < 2:
        return f"dateline {s.dateline} picks a torus ring's VC half: needs vcs 2 or more, got {s.vcs}"
    if s.vc_classes == VcClasses.SPLIT and torus and s.vcs < 4:
        return f"vc_classes split on a torus needs vcs 4 or more (a dateline in each class), got {s.vcs}"
    if s.contention != Contention.SHARED:
        return "wormhole switching runs shared contention only (all multicasts share the channels)"
    if s.clock != Clock.LOCKSTEP:
        return "wormhole switching runs the lockstep clock only (one step is one cycle)"
    return None


@dataclass(frozen=True, slots=True)
class Segment:
    """A still worm segment (a worm bound to an input channel that has not changed for more than
    :data:`STALL_STEPS` steps) and why it cannot move, in names a neighbour understands.

    ``held_by``: per output it still needs whose every allowed channel is held, the channels
    (inputs here) holding them, or for one draining after a tail (``wait_for_tail_credit``) its
    (port, VC): the input across holds it until that tail leaves; ``dry``: the outputs it holds
    without a credit (port, VC): it waits for the input across; ``empty_on``: its buffer is empty
    (port, VC): it waits for the input upstream that holds the output feeding it.
    ``owns``/``wants``: as :class:`Holding` names them; ``since``: the step it last changed.
    """

    channel: str
    worm: tuple[int, int, int]
    mc: int
    held_by: tuple[tuple[str | tuple[str, int], ...], ...]
    dry: tuple[tuple[str, int], ...]
    empty_on: tuple[str, int] | None
    owns: tuple[str, ...]
    wants: tuple[str, ...]
    since: int
    """The step it last changed (bound, granted a channel, a flit left its buffer)."""


class LockstepWormhole(WormholeEngine):
    """The wormhole engine under the lockstep driver: busy only while progressing; reports deadlock."""

    # Defaults, not an __init__ passing *args on: a compiled (mypyc) subclass cannot forward them.
    _done: int = -1
    """The last step done."""
    _progress: int = 0
    """The last step with progress (a flit moved, a timer ran, an injection)."""
    _still: int = -1
    """Steps without a change after which a worm is still (:meth:`watch`; -1: not watched)."""

    def error(self, kind: str, cause: str, mc: int | None = None) -> None:
        """Record a node error (the actor reports protocol and frame errors through its engine)."""
        self.errors.append(NodeError(kind, cause, mc))

    def receive(self, flit: Flit, port: str | None = None) -> None:
        """A flit from the step frame; anything else (a packet) is counted and reported, not taken."""
        if not isinstance(flit, Flit):
            self.dropped += 1
            self.error("bad-item", f"{type(flit).__name__} on {port!r} in a wormhole run", None)
            return
        super().receive(flit, port)

    def inject(self, inj: Injection) -> None:
        super().inject(inj)
        self._progress = max(self._progress, inj.step)

    def step(self, t: int) -> list[tuple[str, Flit]]:
        out = super().step(t)
        self._done = t
        if self.moved or self.timing():
            self._progress = t
        return out

    def watch(self, still: int = STALL_STEPS) -> None:
        """Keep, per bound worm, the step it last changed (bound, granted, a flit left its buffer): what
        :meth:`touched` and :meth:`segments` read (the engines runtime's deadlock verdict). A worm is
        still once it has not changed for more than ``still`` steps (:data:`STALL_STEPS` plus the
        router timing's ``settle``)."""
        self._still = still

    def last_changed_at(self, step: int) -> bool:
        """Whether a worm bound here last changed at ``step`` (watched)."""
        bind = self._bind
        return any(b.changed == step for b in (bind[c] for c in self._moving) if b is not None)

    def touched(self) -> int:
        """The last step at which a worm here was bound, released, granted a channel or moved a flit
        (watched; -1 before any)."""
        return self._touched

    def segments(self, t: int) -> list[Segment]:
        """The worms bound here that have not changed after step ``t`` − ``still`` − 1 (:meth:`watch`),
        and why each cannot move (at the end of step ``t``)."""
        out: list[Segment] = []
        if not self._bound or self._still < 0:
            return out
        names, ports, V, nv = self._names, self._ports, self.vcs, self._nv
        owner, ej_owner, credit, state = self._owner, self._ej_owner, self._credit, self._state
        still = self._still
        for c in self._moving:
            b = self._bind[c]
            assert b is not None
            if t - b.changed <= still:
                continue
            held_by: list[tuple[str | tuple[str, int], ...]] = []
            if state[c] == VC_ALLOC:
                for k in b.outs:  # draining (wait_for_tail_credit): held by the input across it
                    if k not in b.got and all(owner[o] != -1 for o in b.allowed[k]):
                        held_by.append(
                            tuple(
                                names[owner[o]] if owner[o] >= 0 else (ports[k], o - k * V)
                                for o in b.allowed[k]
                            )
                        )
                if b.eject and b.ej < 0 and all(w >= 0 for w in ej_owner):
                    held_by.append(tuple(names[w] for w in ej_owner))
            dry = tuple((ports[k], o - k * V) for k, o in b.got.items() if credit[o] <= 0)
            empty = (ports[c // V], c % V) if c < nv and not self._count[c] else None
            owns = [names[o] for o, w in enumerate(owner) if w == c]
            owns += [self._ejs[e] for e, w in enumerate(ej_owner) if w == c]
            wants = [ports[k] for k in b.outs if k not in b.got] + (["ej"] if b.eject and b.ej < 0 else [])
            out.append(
                Segment(
                    names[c],
                    b.worm,
                    b.mc,
                    tuple(held_by),
                    dry,
                    empty,
                    tuple(owns),
                    tuple(wants),
                    b.changed,
                )
            )
        return out

    def holder(self, port: str, vc: int) -> str | None:
        """The input channel holding VC ``vc`` of the output on ``port`` (None: free or no such port)."""
        k = self._port_of.get(port)
        if k is None:
            return None
        w = self._owner[k * self.vcs + vc]
        return self._names[w] if w >= 0 else None

    def stuck(self) -> bool:
        """Worms or messages here, but no progress for more than :data:`STALL_STEPS` steps."""
        return super().busy() and self._done - self._progress > STALL_STEPS

    def busy(self) -> bool:
        """Busy as the driver's quiescence sees it: holding something and still progressing."""
        return WormholeEngine.busy(self) and self._done - self._progress <= STALL_STEPS  # and not stuck()

    def end(self, t: int) -> None:
        """The run ended at step ``t``: name every worm still held here (deadlock or budget)."""
        if not super().busy():
            return
        kind = "deadlock" if self.stuck() else "unfinished"
        for h in self.holdings():
            self.error(
                kind,
                f"worm {list(h.worm)} at ({h.node[0]},{h.node[1]}) in {h.channel} "
                f"holds {list(h.owns)} and waits for {list(h.wants)} at step {t}",
                h.mc,
            )
        if not self.holdings():
            self.error(kind, f"messages wait for a start-up at ({self.here[0]},{self.here[1]}) at step {t}")


AnyEngine = Engine | LockstepWormhole


def make_engine(
    topology: Topology,
    here: Coord,
    registry: Registry,
    s: NodeSettings,
    *,
    clock_ns: Callable[[], int] | None = None,
) -> AnyEngine:
    """The engine ``s`` asks for at node ``here``; ValueError (one line) when it cannot run."""
    why = _checked(s, topology.is_torus)
    if why is not None:
        raise ValueError(why)
    if s.wormhole:
        return LockstepWormhole(topology, here, registry, s, clock_ns=clock_ns)
    return Engine(topology, here, registry, s, clock_ns=clock_ns)


_CHECKS: dict[tuple[object, ...], str | None] = {}
"""check_switching's verdicts by the settings' class and values: every node of a run is built
from the same settings, and a check per node was a fifth of an in-process node's set-up."""
_READ: dict[type, tuple[str, ...]] = {}
"""The fields check_switching reads, by settings class: NodeSettings' and every setting the class
declares (:func:`node.settings.field_problem` checks those); not an assign's node or token."""


def _checked(s: NodeSettings, torus: bool) -> str | None:
    """:func:`check_switching`, once per distinct settings (their fields are plain values)."""
    cls = type(s)
    names = _READ.get(cls)
    if names is None:
        names = _READ[cls] = tuple(
            dict.fromkeys([f.name for f in fields(NodeSettings)] + [f.name for f, _ in settings_of(cls)])
        )
    key = (cls, torus, *[getattr(s, name) for name in names])
    if key not in _CHECKS:
        if len(_CHECKS) >= 256:
            _CHECKS.clear()
        _CHECKS[key] = check_switching(s, torus)
    return _CHECKS[key]
