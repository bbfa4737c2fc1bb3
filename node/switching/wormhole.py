"""Flit-level wormhole switching at one node, sans-IO: the wormhole twin of :mod:`node.switching.engine`.

A driver steps every node in lockstep exactly as it steps :class:`node.switching.engine.Engine`: before
step t it hands each node the flits its neighbours sent at t−1 (:meth:`WormholeEngine.receive`)
and their returned credits (:meth:`WormholeEngine.credit_back`), injects the multicasts of step
t (:meth:`WormholeEngine.inject`), calls :meth:`WormholeEngine.step` and ships what it returns
(and :meth:`WormholeEngine.take_freed`) to arrive at t+1. Nothing here awaits or touches a socket.

**Model.** One step is one cycle. A message is ``flits`` flits (L, default 64): the head carries
the routing header, body and tail flits only their multicast and worm ids. A link carries at
most one flit per direction per cycle. Each network input channel has a buffer of
``buffer_flits`` flits (B) with credit flow control.

**Buffer depth.** A credit freed at step t reaches the upstream node with the step-t frame, so
it is usable at t+1 at the earliest — the slot a flit takes at step t (sent) is free again for a
send at t+2. Two credits therefore sustain one flit per cycle and one does not (it halves the
rate): the default B = 2 is the smallest depth that streams at full rate under the lockstep
credit delay. The paper (seed 004 §4.2) uses single-flit buffers with a same-cycle handshake;
with B = 2 and one frame of credit delay an uncontended worm moves exactly as it does there (one
flit per cycle, one cycle per hop), so the contention-free timings agree.

**Cycle conventions** (what makes seed 004 eq. 7, β = 1, exact). Step t at a node runs the
stages of :data:`STAGES` in order; each input channel is in one :class:`VcState`:

1. ``startup``: an IDLE injection channel begins the start-up of its next ready message, and a
   start-up begun at s puts the whole message into its injection channel at s + Ts, bound to
   its worm (VC_ALLOC: the message already carries its port);
2. ``route``: every ROUTING input channel (flits in, no worm) runs the routing rule once for
   the head at its front (``node.routing``'s ``forward``) and is VC_ALLOC;
3. ``vc_alloc``: each free output channel is granted to one VC_ALLOC input channel that needs
   it, round-robin over the input channels in the fixed order ``+x, -x, +y, -y`` (network
   ports) then the injection channels (same port order), starting after the input that won
   that output last; ejection channels are one pool with one such pointer. A head holds what
   it got while it waits for the rest (hold-and-wait); holding all, the input is ACTIVE;
4. ``sw_alloc``: an ACTIVE input channel whose front flit is present may move it iff each
   network output it holds has a credit (synchronous replication: a branching tree worm, or a
   path worm absorbed at a destination — which copies to an ejection channel and goes on —
   moves a flit only when every branch can take it). With one VC every such input moves (its
   outputs are its own: the trivial allocator); with more, see below;
5. ``traverse``: the winners' front flits leave. A flit sent at t is in the neighbour's
   input buffer at t+1 and may move on at t+1, so a hop costs one cycle; a flit copied to an
   ejection channel at t has been received by the processor at t+1. The tail releases every
   channel it held (the input is IDLE, or ROUTING if the next worm is behind it); they are
   granted again from the next step.

Hence an uncontended worm whose start-up begins at s delivers its tail h hops away at
s + Ts + L + h. The source of a multicast injected at t0 first spends the algorithm's
preparation time ``prep[alg]`` (seed 004 §4.2: DP 2, MP 2, CP 4, QG 16 cycles; 0 otherwise),
so its messages are ready at t0 + prep. Injection channels: one per output port under
all-port (a message takes the channel of its first port, the project's existing reading of
eq. 13's λ: a port's j-th worm waits j·(Ts + L)), one under one-port; each takes its messages in
order, and begins the next start-up the step after the previous tail left. A node that must
start new messages from a worm (the rule's ``startup`` sends past ``carried``) absorbs the worm
and queues them, ready at the step its tail was received (no preparation time there). Ejection
channels: as many as injection channels. The port model limits only these processor channels;
the router forwards on every link at once. One multicast in an idle network thus delivers at
t0 + prep + Σ over its chain's messages (wait for the injection channel + Ts + L) + hops.

**Virtual channels** (``vcs`` V > 1, docs/wormhole.md "Virtual channels"): each network input
port has V buffers (channels ``+x``, ``+x.1``, … in reports; numbered ``port·V + vc`` inside)
with their own credits. In ``vc_alloc`` each output port grants its free VCs round-robin
over the inputs (after the last one granted there), each requester taking the lowest free VC
its class (``vc_classes="split"``: unicast worms the lower half) and, on a torus, its dateline
half allow (upper from a ring's wrap link on, while going straight); a worm holds them until
its tail passes. In ``sw_alloc`` one flit crosses each link per cycle: the ready inputs are
visited round-robin from after the first winner of the last cycle with one, and a ready input
wins if none of its links is taken.
Flits carry their VC on the wire, credits return per VC; with V = 1 neither appears.

**Router timing** (``--router``, docs/wormhole.md "Router timing"): the stages above may take
cycles, named as BookSim2's ``IQRouter::_InternalStep`` names them. ``routing_delay`` (its
``_RouteEvaluate``/``_RouteUpdate``): a head at the front of its input since step e is routed at e +
routing_delay. ``vc_alloc_delay`` (``_VCAllocEvaluate``/``_VCAllocUpdate``): a worm that holds all
it needs at t is switch-allocated from t + vc_alloc_delay. ``sw_alloc_delay``
(``_SWAllocEvaluate``/``_SWAllocUpdate``, where the flit leaves its buffer and its credit goes
back), ``st_delay`` (``st_final_delay``, ``_SwitchEvaluate``/``_SwitchUpdate``) and ``link_latency``
(the channel after ``_OutputQueuing``): a flit that wins switch allocation at t is in the next input
buffer at t + sw_alloc_delay + st_delay + link_latency (the engine holds it and hands it to the
driver one step before that, as a send of step t + SA + ST + link − 1, so every lockstep driver
carries it unchanged), and one copied to an ejection channel is at the processor at t +
sw_alloc_delay + st_delay + 1. ``credit_delay``: a credit goes upstream that many steps later.
``wait_for_tail_credit`` (BookSim2's ``BufferState``): a tail's output VC is granted again only once
all its credits are back. ``input_speedup`` k > 0: switch allocation grants at most k flits per
input port a cycle. The defaults (``--router paper``) are the cycle conventions above: every stage
in the cycle the head arrives, links of one cycle. A worm whose start-up begins at s then delivers
its tail h hops away at s + Ts + (h + 1)·(routing + VC alloc. + switch alloc. + traversal) +
h·link_latency + 1 + L − 1.

**Deadlock** is a network property: the engine reports :attr:`WormholeEngine.moved` (flits it
moved in its last step), :meth:`WormholeEngine.timing` (a start-up or preparation is counting
down), :meth:`WormholeEngine.holdings` (which worm holds which channels) and, per bound worm, the
step it last changed (``_Bind.changed``: bound, granted a channel, a flit out). The engines
runtime judges a deadlock from these as a closed set of still worms in the wait-for graph
(docs/wormhole.md "Deadlock", :mod:`node.switching.factory`); the distributed runtimes' drivers
end a run when no flit has moved and no timer run anywhere for more than two steps (a credit
needs one). Contention is shared (all multicasts share the channels).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from node import defaults
from node.choices import Dateline, VcClasses
from node.routing import Registry, UnknownAlgorithm
from node.routing.base import HEADER_ERRORS
from node.routing.unicast import UNICASTS
from node.settings import NodeSettings
from node.switching.engine import Delivery, Injection, NodeError
from node.switching.vocabulary import PREP, STAGES, Holding, VcState, crosses_wrap, prep_table, wraps
from node.topology import PORT_BITS, PORTS, Coord, Topology
from node.transport.wire import Credits, Flit, Worm, decode_flit

__all__ = [
    "PREP",
    "STAGES",
    "Flit",
    "Holding",
    "VcState",
    "WormholeEngine",
    "decode_flit",
    "prep_table",
]

# the states as plain ints for the hot loops (an enum attribute lookup costs more than a global)
IDLE: Final = int(VcState.IDLE)
ROUTING: Final = int(VcState.ROUTING)
VC_ALLOC: Final = int(VcState.VC_ALLOC)
ACTIVE: Final = int(VcState.ACTIVE)
DRAINING: Final = -2
"""An output VC's owner while its tail's credit is still coming back (wait_for_tail_credit); -1: free."""


@dataclass(slots=True)
class _Msg:
    """A message waiting for an injection channel: its first port (an index into the node's ports) and
    header, ready step."""

    mc: int
    alg: str
    port: int
    header: Any
    hops: int
    startups: int
    ready: int


@dataclass(slots=True)
class _Bind:
    """An input channel's worm: the outputs it needs (with each head copy's header) and its fate here.

    Ports are indices into the node's ports, output VCs ``port * V + vc`` (VC ``vc`` of the link
    on that port), ejection channels indices into the node's.
    """

    worm: Worm
    mc: int
    outs: dict[int, tuple[Any, int, int]]  # port -> (header, hops, start-ups) of the head sent there
    eject: bool  # absorbed here: needs an ejection channel
    deliver: bool = False
    later: list[tuple[int, Any, int]] = field(default_factory=list)  # new messages after the tail
    alg: str = ""
    hops: int = 0
    startups: int = 0
    ej: int = -1  # the ejection channel granted
    allowed: dict[int, tuple[int, ...]] = field(default_factory=dict)  # port -> output VCs it may take
    got: dict[int, int] = field(default_factory=dict)  # port -> the output VC it holds there
    missing: int = 0  # outputs (and the ejection channel) still to be granted: ACTIVE at 0
    sa_from: int = 0  # the first step switch allocation takes it (ACTIVE + vc_alloc_delay)
    changed: int = 0  # the step it was bound, last granted a channel or last moved a flit out
    # filled once ACTIVE, in ``outs`` order: what switch allocation and traversal read
    ovcs: list[int] = field(default_factory=list)  # the output VCs it holds
    links: int = 0  # the ports it sends on, as a bit mask (switch allocation: one flit per link)
    heads: list[tuple[str, int, int, Any, int, int, int]] = field(default_factory=list)
    """Per output: port name, output VC, VC number, the head's header, hops and start-ups, port bit."""
    flows: list[tuple[str, int, tuple[Flit, Flit] | None]] = field(default_factory=list)
    """Per output: port name, output VC, and with V > 1 the body and tail flit sent there (made
    once, with that output's VC; with one VC the flits go on as they are)."""


@dataclass(slots=True)
class _Run:
    """Consecutive flits of one worm in an input buffer, kept as a count, not flit by flit.

    The run is ``n`` flits: ``head`` first while it is still there, then body flits (all alike:
    ``body`` stands for each), then ``tail`` if the run ends with the worm's tail (a one-flit
    worm's ``W`` is its head and its tail).
    """

    worm: Worm
    mc: int
    n: int
    head: Flit | None
    body: Flit | None
    tail: Flit | None

    def front(self) -> Flit:
        """The flit at the front of the run."""
        if self.head is not None:
            return self.head
        if self.n == 1 and self.tail is not None:
            return self.tail
        assert self.body is not None  # a run's middle flits are body flits
        return self.body


class WormholeEngine:
    """One node's router: input VCs with explicit states, the stages of :data:`STAGES`, injection, ejection.

    Channels are numbered: input channel ``c`` is port ``c // V``'s VC ``c % V`` for ``c`` below
    ``P·V`` (the node's ports in the order ``+x, -x, +y, -y``), then the injection channels;
    output VC ``k·V + v`` is VC v of the link on port k. Names ("+x.1", "inj+x") are made only
    at the edges: wire frames, errors, traces and deadlock reports.

    Work is kept proportional to what moves: a buffer is a queue of runs (:class:`_Run`: a
    worm's flits as a count), route computation runs only while an input is ROUTING, VC
    allocation only after a worm was bound or released channels (otherwise it would grant
    nothing new), switch allocation visits only bound inputs, and :meth:`busy`, :meth:`timing`
    and the occupancy are counters, not scans.
    """

    def __init__(
        self,
        topology: Topology,
        here: Coord,
        registry: Registry,
        settings: NodeSettings,
        *,
        clock_ns: Any = None,
    ) -> None:
        """The node ``here`` under ``settings``: flits L, Ts, buffer depth B, preparation, VCs and
        the port model, read once here (checked where they were made: the command line, the wire's
        decoder, :func:`node.switching.factory.check_switching`; the channels are shared)."""
        flits, ts, buffer_flits = settings.flits, settings.ts, settings.buffer_flits
        hop_limit, trace, vcs = settings.hop_limit, settings.trace, settings.vcs
        self.topology = topology
        self.here = here
        self.registry = registry
        self.one_port = settings.one_port
        self.flits = flits
        self.ts = ts
        self.buffer_flits = buffer_flits
        self.prep = dict(prep_table(settings.prep, registry))
        self.hop_limit = hop_limit if hop_limit is not None else defaults.hop_limit(topology.size)
        self._clock = clock_ns
        self.trace = trace
        timing = settings.router_timing()  # the stages of docs/wormhole.md "Router timing"
        self._rd = timing.routing_delay
        self._va = timing.vc_alloc_delay
        self._pipe_at = timing.pipe  # a flit switch-allocated at t is in the next buffer at t + this
        self._eject_at = timing.eject  # ... and, copied to an ejection channel, at the processor
        self._cd = timing.credit_delay
        self._wtc = bool(timing.wait_for_tail_credit)
        self._isp = timing.input_speedup
        self._ports = [p for p in PORTS if p in topology.ports(here)]  # port k's name (edges only)
        self._port_of: dict[str, int] = {p: k for k, p in enumerate(self._ports)}
        self._first_vc: dict[str | None, int] = {
            p: k * vcs for k, p in enumerate(self._ports)
        }  # port name -> its VC 0's channel
        self._injs = ["inj"] if self.one_port else [f"inj{p}" for p in PORTS]
        self._ejs = ["ej"] if self.one_port else [f"ej{i}" for i in range(4)]
        self.vcs = vcs
        self._split = settings.vc_classes == VcClasses.SPLIT
        self._dateline = topology.is_torus and vcs > 1
        self._ring = self._dateline and settings.dateline == Dateline.RING
        nv = len(self._ports) * vcs
        self._nv = nv  # network input VCs 0 .. nv-1 (port by port, VC by VC), injection channels after
        self._names = [_vc_name(p, v) for p in self._ports for v in range(vcs)] + self._injs
        """Channel ``c``'s name: ``+x`` (VC 0, or the port with one VC), ``+x.1``, ..., ``inj+x``."""
        n = len(self._names)
        self._n = n
        # port k's injection channel (its messages' first port picks it) and the port straight on from it
        self._inj_of = [nv + (0 if self.one_port else PORTS.index(p)) for p in self._ports]
        self._straight = [self._port_of.get(_TRAVEL[p], -1) for p in self._ports]
        self._wrap = [wraps(topology, here, p) for p in self._ports]
        self._bits = [PORT_BITS[p] for p in self._ports]
        self._runs: list[deque[_Run]] = [deque() for _ in range(n)]
        self._count = [0] * n  # flits buffered per input
        self._bind: list[_Bind | None] = [None] * n
        self._state = [IDLE] * n
        self._owner = [-1] * nv  # output VC -> the input holding it
        self._ej_owner = [-1] * len(self._ejs)
        self._rr = [-1] * len(self._ports)  # VC allocation: per port, the input granted there last
        self._rr_ej = -1  # ... and for the ejection channels, one pool
        self._sa = -1  # switch allocation (V > 1): the input that won first in the last cycle any won
        self._credit = [buffer_flits] * nv  # per output VC
        self._queue: list[deque[_Msg]] = [deque() for _ in self._injs]  # per injection channel
        self._loading: list[tuple[int, _Msg] | None] = [None] * len(self._injs)
        self._worms = 0
        # counters that stand for scans of the tables above
        self._flits_in = 0  # flits in all input buffers
        self._held = 0  # flits in the network input buffers (the occupancy)
        self._bound = 0  # input channels bound to a worm
        self._queued = 0  # messages waiting for an injection channel
        self._loads = 0  # start-ups counting down
        self._routing = 0  # input channels in state ROUTING
        self._moving: list[int] = []  # the bound inputs, in the fixed order
        self._touched = -1  # the last step a worm here was bound, granted a channel or moved a flit
        self._reallocate = False  # a worm was bound or released channels since the last VC allocation
        # router timing (all idle under the paper's 1-cycle router)
        self._since = [0] * n  # a ROUTING input: the step its head reached the front (-1: this step)
        self._pipe: dict[int, list[tuple[str, Flit]]] = {}  # step -> the flits that go on the wire then
        self._cpipe: dict[int, dict[str, int]] = {}  # step -> the credits that go upstream then
        self._gate = -1  # the latest step at which a delayed route or switch allocation may act
        self._t = -1  # the last step done
        self.freed: dict[str, int] = {}
        """Flits moved out of each network input VC since :meth:`take_freed`, by channel name: the
        credits upstream, as they go on the wire."""
        self.moved = 0
        self.deliveries: list[Delivery] = []
        self.delivered = 0
        """Deliveries over the whole run (the final report says it, so lost reports show)."""
        self.errors: list[NodeError] = []
        self.injected: dict[int, int] = {}
        self.traffic: dict[int, int] = {}
        self.links_used: dict[int, int] = {}
        """The ports each multicast left this node on, by multicast: a set of :data:`PORT_BITS`."""
        self.link_sends: dict[str, int] = {}
        self.sent = 0
        self.received = 0
        self.dropped = 0
        self.steps = 0
        self.peak_queue = 0
        self.copies = 0  # outputs beyond the first of each message or worm head (as engine.py counts)
        self.peak_in = 0
        self.peak_out = 0  # no output buffers: flits wait only in input buffers
        self.occupancy_sum = 0
        self.link_trace: list[tuple[int, str, int]] = []  # (mc, port, step) of each head sent
        # -- replay trace hook (--trace only; see _trace_flit) --
        self.worm_trace: list[list[Any]] = []
        """Runs of flits (``trace`` on): [mc, worm x, worm y, worm n, input port or "inj", output port
        or "ej", first step, count]."""
        self._worm_run: dict[tuple[Worm, str, str], list[Any]] = {}

    # -- inputs ------------------------------------------------------------------------
    def _now(self) -> int:
        return int(self._clock()) if self._clock is not None else 0

    def _enqueue(
        self, mc: int, alg: str, port: int, header: Any, hops: int, startups: int, ready: int
    ) -> None:
        """Queue a message for port ``port``'s injection channel (one channel under one-port)."""
        self._queue[self._inj_of[port] - self._nv].append(_Msg(mc, alg, port, header, hops, startups, ready))
        self._queued += 1

    def inject(self, inj: Injection) -> None:
        """Lockstep: start multicast ``inj`` here at step ``inj.step``; its messages wait for ``prep``."""
        try:
            sends = self.registry.get(inj.alg).prepare(self.topology, self.here, inj.destinations, inj.params)
        except (UnknownAlgorithm, ValueError, TypeError, KeyError, IndexError) as exc:
            self.errors.append(NodeError("bad-injection", f"{type(exc).__name__}: {exc}", inj.mc))
            return
        self.injected[inj.mc] = self._now()
        ready = inj.step + self.prep.get(inj.alg, 0)
        self.copies += max(0, len(sends) - 1)
        for port, header in sends:
            k = self._port_of.get(port) if isinstance(port, str) else None
            if k is None:
                self.errors.append(
                    NodeError(
                        "bad-send", f"rule {inj.alg!r} sent on {port!r}, not a link of {self.here}", inj.mc
                    )
                )
                continue
            self._enqueue(inj.mc, inj.alg, k, header, 1, 1, ready)

    def receive(self, flit: Flit, port: str | None = None) -> None:
        """A flit arrived on ``port`` (sent at the previous step); credits keep the buffer from filling."""
        self.received += 1
        try:
            c = self._first_vc[port]  # None or a port not here: KeyError
        except KeyError:
            self.dropped += 1
            self.errors.append(NodeError("bad-port", f"flit on {port!r}, not a link of {self.here}", flit.mc))
            return
        vc = flit.vc
        if vc:
            if vc >= self.vcs:
                self.dropped += 1
                self.errors.append(
                    NodeError(
                        "bad-vc", f"flit on virtual channel {vc} of {port}, which has {self.vcs}", flit.mc
                    )
                )
                return
            c += vc
        count = self._count
        if count[c] >= self.buffer_flits:
            self.dropped += 1
            self.errors.append(
                NodeError("buffer-full", f"input buffer of {port} full ({self.buffer_flits})", flit.mc)
            )
            return
        # onto the back of the buffer: onto its last run when the flit continues that worm
        runs = self._runs[c]
        kind = flit.kind
        if kind == "H" or kind == "W":
            runs.append(_Run(flit.worm, flit.mc, 1, flit, None, flit if kind == "W" else None))
        else:
            last = runs[-1] if runs else None
            if last is not None and last.tail is None and last.worm == flit.worm and last.mc == flit.mc:
                last.n += 1
                if kind == "T":
                    last.tail = flit
                elif last.body is None:
                    last.body = flit
            elif kind == "T":
                runs.append(_Run(flit.worm, flit.mc, 1, None, None, flit))
            else:
                runs.append(_Run(flit.worm, flit.mc, 1, None, flit, None))
        count[c] += 1
        self._flits_in += 1
        self._held += 1
        if self._state[c] == IDLE:
            self._state[c] = ROUTING
            self._routing += 1
            self._since[c] = -1  # its head reached the front: routed from the coming step on

    def _pop(self, c: int) -> Flit:
        """Take the front flit of input ``c`` (not empty) and return a credit for it upstream."""
        runs = self._runs[c]
        run = runs[0]
        flit = run.front()
        run.head = None
        run.n -= 1
        if run.n == 0:
            runs.popleft()
        self._count[c] -= 1
        self._flits_in -= 1
        if c < self._nv:  # a network input: one credit back to the upstream node
            self._held -= 1
            name = self._names[c]
            self.freed[name] = self.freed.get(name, 0) + 1
        return flit

    def credit_back(self, port: str, n: Credits) -> None:
        """The neighbour across ``port`` moved ``n`` of our flits out of its input buffer (per VC, a list)."""
        try:
            base = self._first_vc[port]
        except KeyError:
            return
        credit = self._credit
        if isinstance(n, int):
            credit[base] = min(credit[base] + n, self.buffer_flits)
            if self._wtc:
                self._drained(base)
            return
        for v, got in zip(range(self.vcs), n, strict=False):  # extra counts name no VC of ours
            credit[base + v] = min(credit[base + v] + got, self.buffer_flits)
            if self._wtc:
                self._drained(base + v)

    def _drained(self, o: int) -> None:
        """wait_for_tail_credit: output VC ``o``, released by its tail, is free once its credits are back."""
        if self._owner[o] == DRAINING and self._credit[o] >= self.buffer_flits:
            self._owner[o] = -1
            self._reallocate = True

    def take_freed(self) -> dict[str, Credits]:
        """Per input port, the flits moved out since the last call (credits upstream; per VC above one)."""
        freed, self.freed = self.freed, {}
        V = self.vcs
        if V == 1:
            return dict(freed)
        names = self._names
        return {
            p: tuple(freed.get(names[c], 0) for c in range(k * V, k * V + V))
            for k, p in enumerate(self._ports)
            if any(names[c] in freed for c in range(k * V, k * V + V))
        }

    # -- state -------------------------------------------------------------------------
    def busy(self) -> bool:
        """Flits buffered, worms bound, start-ups running or messages waiting here."""
        return (
            self._flits_in > 0
            or self._bound > 0
            or self._queued > 0
            or self._loads > 0
            or bool(self._pipe)
            or bool(self._cpipe)
        )

    def timing(self) -> bool:
        """A start-up, a preparation time or a router stage delay is counting down, or flits or credits
        are in the switch and link pipeline (progress without moving flits)."""
        if self._loads or self._pipe or self._cpipe or self._gate > self._t:
            return True
        if not self._queued:
            return False
        state, nv = self._state, self._nv
        return any(q and state[nv + j] == IDLE for j, q in enumerate(self._queue))

    def states(self) -> dict[str, VcState]:
        """Every input channel's state, by name (for tests and reports; the router reads ints)."""
        return {name: VcState(s) for name, s in zip(self._names, self._state, strict=True)}

    def holdings(self) -> list[Holding]:
        """Every worm bound here: the channel its front is in, the outputs it owns and still wants."""
        out = []
        names = self._names
        for c in range(self._n):
            b = self._bind[c]
            if b is None:
                continue
            mine = [names[o] for o, w in enumerate(self._owner) if w == c]
            mine += [self._ejs[e] for e, w in enumerate(self._ej_owner) if w == c]
            wants = [self._ports[k] for k in b.outs if k not in b.got] + (
                ["ej"] if b.eject and b.ej < 0 else []
            )
            out.append(Holding(self.here, b.mc, b.worm, names[c], tuple(mine), tuple(wants)))
        return out

    # -- state changes -----------------------------------------------------------------
    def _bind_to(self, c: int, b: _Bind, t: int) -> None:
        """Bind worm ``b`` to input ``c``: VC_ALLOC, or ACTIVE at once when it needs no output."""
        self._bind[c] = b
        self._bound += 1
        self._reallocate = True
        b.changed = self._touched = t
        b.missing = len(b.outs) + b.eject
        if b.missing:
            self._state[c] = VC_ALLOC
        else:
            self._activate(c, b, t)
        bind = self._bind
        self._moving = [i for i in range(self._n) if bind[i] is not None]

    def _activate(self, c: int, b: _Bind, t: int) -> None:
        """Worm ``b`` in input ``c`` holds every output it needs at ``t``: ACTIVE, with what its flits'
        sends read; switch allocation takes it from t + vc_alloc_delay on."""
        self._state[c] = ACTIVE
        if self._va:
            b.sa_from = t + self._va
            if b.sa_from > self._gate:
                self._gate = b.sa_from
        V = self.vcs
        names = self._ports
        for k, (header, hops, st) in b.outs.items():
            o = b.got[k]
            vc = o - k * V
            b.ovcs.append(o)
            b.links |= 1 << k
            b.heads.append((names[k], o, vc, header, hops, st, self._bits[k]))
            if V == 1:  # one VC: body and tail flits go on as they are
                b.flows.append((names[k], o, None))
            else:
                b.flows.append(
                    (names[k], o, (Flit("B", b.mc, b.worm, vc=vc), Flit("T", b.mc, b.worm, vc=vc)))
                )

    def _release(self, c: int, b: _Bind, t: int) -> None:
        """The tail of ``b`` left input ``c`` at ``t``: free every channel it held; IDLE, or ROUTING if
        the next worm's flits are behind it."""
        owner = self._owner
        free = DRAINING if self._wtc else -1  # wait_for_tail_credit: free once its credits are back
        for o in b.ovcs:
            owner[o] = free
        if b.ej >= 0:
            self._ej_owner[b.ej] = -1
        if b.eject:
            self._finish(b, t)
        self._bind[c] = None
        self._bound -= 1
        self._reallocate = True
        bind = self._bind
        self._moving = [i for i in range(self._n) if bind[i] is not None]
        if self._count[c]:
            self._state[c] = ROUTING  # the next worm's head may be right behind the tail
            self._routing += 1
            self._since[c] = t + 1
        else:
            self._state[c] = IDLE

    def _finish(self, b: _Bind, t: int) -> None:
        """The tail of absorbed worm ``b`` left the buffer at ``t``: the processor has it at t+1."""
        if b.deliver:
            self.deliveries.append(Delivery(b.mc, t + self._eject_at, b.hops, b.startups, self._now()))
            self.delivered += 1
        for port, header, st in b.later:
            self._enqueue(b.mc, b.alg, port, header, b.hops + 1, st, t + self._eject_at)

    def _route_head(self, c: int, head: Flit) -> _Bind:
        """Run the rule once for the head at the front of input ``c``; a failure binds a sink."""
        sink = _Bind(head.worm, head.mc, {}, False)
        if head.hops > self.hop_limit:
            self.errors.append(
                NodeError("hop-limit", f"worm exceeded the hop limit {self.hop_limit}", head.mc)
            )
            return sink
        try:
            fwd = self.registry.get(head.alg).forward(self.topology, self.here, head.header)
        except UnknownAlgorithm as exc:
            self.errors.append(NodeError("unknown-algorithm", str(exc), head.mc))
            return sink
        except HEADER_ERRORS as exc:
            self.errors.append(NodeError("bad-header", f"{head.alg}: {type(exc).__name__}: {exc}", head.mc))
            return sink
        sts = fwd.startups_of(head.startups)
        cont = fwd.carried if fwd.startup else len(fwd.sends)
        b = _Bind(head.worm, head.mc, {}, False, fwd.deliver, [], head.alg, head.hops, head.startups)
        self.copies += max(0, len(fwd.sends) + fwd.deliver - 1)
        for i, ((port, header), st) in enumerate(zip(fwd.sends, sts, strict=True)):
            k = self._port_of.get(port) if isinstance(port, str) else None
            if k is None:
                self.errors.append(
                    NodeError(
                        "bad-send", f"rule {head.alg!r} sent on {port!r}, not a link of {self.here}", head.mc
                    )
                )
            elif i >= cont:
                b.later.append((k, header, st))
            elif k in b.outs:
                self.errors.append(
                    NodeError("bad-send", f"rule {head.alg!r} sent twice on {port!r} at {self.here}", head.mc)
                )
            else:
                b.outs[k] = (header, head.hops + 1, st)
        b.eject = fwd.deliver or bool(b.later)
        self._allow(b, c)
        return b

    def _allow(self, b: _Bind, c: int) -> None:
        """The output VCs worm ``b`` (its head in input ``c``) may take on each of its ports, lowest first.

        Its class (``--vc-classes split``: unicast worms the lower half, others the upper) and, on
        a torus, the dateline: within its class's VCs a worm keeps to the lower half until it
        crosses the wrap link of the ring it travels on, the upper half from that link on while
        it goes straight on; a turn (or a new message) starts in the lower half again. With
        ``--dateline ring`` (BookSim2's): at a turn or a new message, the upper half when the worm
        will cross the ring's wrap link (:func:`crosses_wrap`), and the same half while it goes
        straight on. With one VC: the port's only one.
        """
        V = self.vcs
        lo, hi = 0, V
        if self._split:
            lo, hi = (0, V // 2) if b.alg in UNICASTS else (V // 2, V)
        allowed = b.allowed
        for k in b.outs:
            base = k * V
            if not self._dateline:
                allowed[k] = tuple(range(base + lo, base + hi))
                continue
            mid = lo + (hi - lo) // 2
            straight = c < self._nv and self._straight[c // V] == k
            if self._ring:  # the half chosen where the worm entered this ring
                crossed = c % V >= mid if straight else self._crosses(b, k)
            else:  # past the dateline: this link is a wrap link, or it goes straight on from an upper VC
                crossed = self._wrap[k] or (straight and c % V >= mid)
            allowed[k] = (
                tuple(range(base + mid, base + hi)) if crossed else tuple(range(base + lo, base + mid))
            )

    def _crosses(self, b: _Bind, k: int) -> bool:
        """``--dateline ring``: whether worm ``b``, entering a ring on port ``k``, crosses its wrap link."""
        return crosses_wrap(self.topology, self.registry, b.alg, self.here, self._ports[k], b.outs[k][0])

    # -- the stages (STAGES), in the order step() runs them -----------------------------
    def _startup(self, t: int) -> None:
        """Start-ups: an IDLE injection channel takes its next ready message; Ts later its worm is in."""
        nv, state = self._nv, self._state
        for j, q in enumerate(self._queue):
            c = nv + j
            if self._loading[j] is None and state[c] == IDLE and q and q[0].ready <= t:
                self._loading[j] = (t + self.ts, q.popleft())
                self._queued -= 1
                self._loads += 1
            ld = self._loading[j]
            if ld is not None and ld[0] <= t:
                m = ld[1]
                self._loading[j] = None
                self._loads -= 1
                worm = (self.here[0], self.here[1], self._worms)
                self._worms += 1
                L = self.flits
                if L == 1:
                    whole = Flit("W", m.mc, worm, m.alg, m.header, m.hops, m.startups)
                    run = _Run(worm, m.mc, 1, whole, None, whole)
                else:
                    head = Flit("H", m.mc, worm, m.alg, m.header, m.hops, m.startups)
                    body = Flit("B", m.mc, worm) if L > 2 else None
                    run = _Run(worm, m.mc, L, head, body, Flit("T", m.mc, worm))
                self._runs[c].append(run)
                self._count[c] += L
                self._flits_in += L
                b = _Bind(worm, m.mc, {m.port: (m.header, m.hops, m.startups)}, False, False, [], m.alg)
                self._allow(b, c)
                self._bind_to(c, b, t)

    def _route(self, t: int) -> None:
        """Route computation: each ROUTING input whose head has been at the front for routing_delay
        steps drops the strays before it, then binds the head's worm (VC_ALLOC); one left empty is IDLE."""
        self._routing = 0
        state = self._state
        rd = self._rd
        since = self._since
        for c in range(self._n):
            if state[c] != ROUTING:
                continue
            if rd:
                if since[c] < 0:
                    since[c] = t
                if t < since[c] + rd:  # still computing its route
                    self._routing += 1
                    if since[c] + rd > self._gate:
                        self._gate = since[c] + rd
                    continue
            runs = self._runs[c]
            while runs and not runs[0].front().head:  # no head before it: a stray
                self.dropped += 1
                self.errors.append(
                    NodeError(
                        "stray-flit", f"{self._pop(c).kind} flit on {self._names[c]} without a head", None
                    )
                )
            if runs:
                self._bind_to(c, self._route_head(c, runs[0].front()), t)
            else:
                state[c] = IDLE

    def _vc_alloc(self, t: int) -> None:
        """VC allocation: each output port grants its free VCs round-robin over the inputs in VC_ALLOC
        (after the input granted there last), each taking the lowest free VC it is allowed; then the
        ejection channels, one pool. With one VC this is the port itself to the next requester."""
        n = self._n
        V = self.vcs
        owner = self._owner
        bind = self._bind
        state = self._state
        rr = self._rr
        for k in range(len(self._ports)):
            free = 0
            for o in range(k * V, k * V + V):
                if owner[o] == -1:
                    free += 1
            if not free:
                continue
            start = rr[k]
            for j in range(1, n + 1):
                i = (start + j) % n
                if state[i] != VC_ALLOC:
                    continue
                b = bind[i]
                assert b is not None  # VC_ALLOC: a worm is bound
                if k not in b.outs or k in b.got:
                    continue
                o = -1
                for v in b.allowed[k]:
                    if owner[v] == -1:
                        o = v
                        break
                if o < 0:
                    continue
                owner[o] = i
                b.got[k] = o
                rr[k] = i
                b.changed = self._touched = t
                b.missing -= 1
                if not b.missing:
                    self._activate(i, b, t)
                free -= 1
                if not free:
                    break
        ej_owner = self._ej_owner
        for e in range(len(ej_owner)):
            if ej_owner[e] >= 0:
                continue
            for j in range(1, n + 1):
                i = (self._rr_ej + j) % n
                if state[i] != VC_ALLOC:
                    continue
                b = bind[i]
                assert b is not None
                if b.eject and b.ej < 0:
                    ej_owner[e] = i
                    b.ej = e
                    self._rr_ej = i
                    b.changed = self._touched = t
                    b.missing -= 1
                    if not b.missing:
                        self._activate(i, b, t)
                    break

    def _sw_alloc(self, t: int) -> list[int]:
        """Switch allocation: the inputs granted the switch this cycle, in the fixed order.

        With one VC every bound input is granted (the trivial allocator: its outputs are its
        own, no two inputs compete for a link); :meth:`_traverse` moves those that are ready.
        With more, one flit crosses each link per cycle: the ready inputs (ACTIVE, a flit of
        their worm in front, a credit on each output VC held) are visited round-robin from after
        the first winner of the last cycle with one, and an input wins when none of its links
        is taken yet (a branching worm takes all of them or none).
        """
        if self.vcs == 1:
            return self._moving  # replaced, not changed, when a tail releases an input
        ready: list[int] = []
        count = self._count
        runs_of = self._runs
        bind = self._bind
        state = self._state
        credit = self._credit
        va = self._va
        for c in self._moving:
            if not count[c]:
                continue
            b = bind[c]
            assert b is not None  # _moving holds the bound inputs
            if runs_of[c][0].worm != b.worm:
                self._mismatch(c, b)
                continue
            if state[c] != ACTIVE or (va and b.sa_from > t):
                continue
            for o in b.ovcs:
                if credit[o] <= 0:
                    break
            else:
                ready.append(c)
        if not ready:
            return ready
        n = len(ready)
        start = 0
        while start < n and ready[start] <= self._sa:
            start += 1
        taken = 0
        won: list[int] = []
        isp, nv, V = self._isp, self._nv, self.vcs
        sends = [0] * len(self._ports) if isp else []  # input_speedup: flits granted per input port
        for j in range(n):
            c = ready[(start + j) % n]
            b = bind[c]
            assert b is not None
            if b.links & taken:
                continue
            if isp and c < nv:
                if sends[c // V] >= isp:
                    continue
                sends[c // V] += 1
            taken |= b.links
            won.append(c)
        self._sa = won[0]
        won.sort()
        return won

    def _mismatch(self, c: int, b: _Bind) -> None:
        """The front flit of bound input ``c`` is not worm ``b``'s (a peer lost a tail): drop it."""
        bad = self._pop(c)
        self.dropped += 1
        self.errors.append(
            NodeError("worm-mismatch", f"flit of worm {bad.worm} in the channel of {b.worm}", bad.mc)
        )

    def _traverse(self, won: list[int], t: int, out: list[tuple[str, Flit]]) -> int:
        """Switch traversal: each granted input that is ready (ACTIVE, a flit of its worm in front, a
        credit on each output VC it holds) moves its front flit out of its buffer (a credit back
        upstream) onto every link it holds and into its ejection channel; a tail releases the
        input's channels. A bound input whose front flit is another worm's drops it. The flits
        sent go to ``out``; returns how many flits left buffers."""
        credit = self._credit
        count = self._count
        runs_of = self._runs
        bind = self._bind
        state = self._state
        link_sends = self.link_sends
        va = self._va  # vc_alloc_delay: a worm switch-allocated from its sa_from step on
        moved = 0
        for c in won:
            b = bind[c]
            if b is None or not count[c]:
                continue
            runs = runs_of[c]
            run = runs[0]
            if run.worm != b.worm:
                self._mismatch(c, b)
                continue
            if state[c] != ACTIVE or (va and b.sa_from > t):
                continue  # it does not own every output it needs yet, or its VC allocation is not over
            blocked = False
            for o in b.ovcs:
                if credit[o] <= 0:
                    blocked = True
                    break
            if blocked:
                continue
            # the front flit leaves the buffer (the run's head, a body flit or its tail)
            flit = run.head
            if flit is not None:
                run.head = None
                head = True
            elif run.n == 1 and run.tail is not None:
                flit = run.tail
                head = False
            else:
                flit = run.body
                assert flit is not None
                head = False
            tail = flit is run.tail
            run.n -= 1
            if not run.n:
                runs.popleft()
            count[c] -= 1
            b.changed = t
            if c < self._nv:  # a network input: a credit back upstream
                self._held -= 1
                name = self._names[c]
                freed = self.freed
                freed[name] = freed.get(name, 0) + 1
            moved += 1
            if self.trace:  # replay trace hook
                self._trace_flit(b, c, t)
            # the one place a flit is sent on an output
            if head:
                for name, o, vc, header, hops, st, bit in b.heads:
                    credit[o] -= 1
                    out.append((name, Flit(flit.kind, flit.mc, flit.worm, flit.alg, header, hops, st, vc)))
                    link_sends[name] = link_sends.get(name, 0) + 1
                    self.traffic[b.mc] = self.traffic.get(b.mc, 0) + 1
                    self.links_used[b.mc] = self.links_used.get(b.mc, 0) | bit
                    if self.trace:
                        self.link_trace.append((b.mc, name, t))
            else:
                for name, o, copies in b.flows:
                    credit[o] -= 1
                    out.append((name, flit if copies is None else copies[tail]))  # [True]: the tail
                    link_sends[name] = link_sends.get(name, 0) + 1
            if tail:
                self._release(c, b, t)
        if moved:
            self._touched = t
        return moved

    def _trace_flit(self, b: _Bind, c: int, t: int) -> None:
        """Replay trace hook (``trace`` on): a flit of worm ``b`` left input ``c`` at ``t``, onto each of
        ``b``'s outputs and, absorbed here, its ejection channel; extends that run or opens one."""
        runs = self._worm_run
        came = self._ports[c // self.vcs] if c < self._nv else "inj"
        outs = [self._ports[k] for k in b.outs]
        for o in (*outs, "ej") if b.ej >= 0 else outs:
            key = (b.worm, came, o)
            run = runs.get(key)
            if run is not None and run[6] + run[7] == t:
                run[7] += 1
            else:
                run = runs[key] = [b.mc, *b.worm, came, o, t, 1]
                self.worm_trace.append(run)

    def step(self, t: int) -> list[tuple[str, Flit]]:
        """Do step ``t`` (flits and credits of t−1 and injections of t already given); the flits sent now.

        The stages of :data:`STAGES` in order, each skipped when it has nothing to do.
        """
        self._t = t
        if self._queued or self._loads:
            self._startup(t)
        if self._routing:
            self._route(t)
        if self._reallocate:
            self._reallocate = False
            self._vc_alloc(t)
        out: list[tuple[str, Flit]] = []
        if self._bound:
            moved = self._traverse(self._sw_alloc(t), t, out)
            self._flits_in -= moved
            self.moved = moved
            self.sent += len(out)
        else:
            self.moved = 0
        if self._pipe_at > 1:  # switch allocation, traversal and the link: on the wire pipe - 1 steps later
            if out:
                self._pipe[t + self._pipe_at - 1] = out
            out = self._pipe.pop(t, [])
        if self._cd:  # credit_delay: this step's credits go upstream that many steps later
            if self.freed:
                self._cpipe[t + self._cd] = self.freed
            self.freed = self._cpipe.pop(t, {})
        self.steps += 1
        held = self._held
        if held > self.peak_in:
            self.peak_queue = self.peak_in = held
        self.occupancy_sum += held
        return out


_TRAVEL: Final = {"+x": "-x", "-x": "+x", "+y": "-y", "-y": "+y"}
"""The port a worm that arrived on an input port leaves by when it goes straight on."""


def _vc_name(port: str, vc: int) -> str:
    """The channel name of ``port``'s virtual channel ``vc``: the port itself for VC 0."""
    return port if vc == 0 else f"{port}.{vc}"
