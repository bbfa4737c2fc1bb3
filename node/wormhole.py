"""Flit-level wormhole switching at one node, sans-IO: the wormhole twin of :mod:`node.engine`.

A driver steps every node in lockstep exactly as it steps :class:`node.engine.Engine`: before
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

**Cycle conventions** (what makes seed 004 eq. 7, β = 1, exact). Step t at a node:

1. injection channels begin start-ups (the channel is free, its next message is ready), and a
   start-up begun at s puts the whole message into its injection channel at s + Ts;
2. every unbound input channel whose front flit is a head runs the routing rule once
   (``node.routing``'s ``forward``; an injection channel's message already carries its port);
3. each free output channel is granted to one requesting input channel, round-robin over the
   input channels in the fixed order ``+x, -x, +y, -y`` (network ports) then the injection
   channels (same port order), starting after the input that won that output last; ejection
   channels are one pool with one such pointer. A head holds what it got while it waits for
   the rest (hold-and-wait);
4. every bound input channel whose front flit is present moves it iff it owns all its outputs
   and each network output has a credit (synchronous replication: a branching tree worm, or a
   path worm absorbed at a destination — which copies to an ejection channel and goes on —
   moves a flit only when every branch can take it). A flit sent at t is in the neighbour's
   input buffer at t+1 and may move on at t+1, so a hop costs one cycle; a flit copied to an
   ejection channel at t has been received by the processor at t+1. The tail releases every
   channel it held; they are granted again from the next step.

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
port has V buffers (channels ``+x``, ``+x.1``, …) with their own credits. After routing, each
output port grants its free VCs round-robin over the inputs (after the last one granted
there), each requester taking the lowest free VC its class (``vc_classes="split"``: unicast
worms the lower half) and, on a torus, its dateline half allow (upper from a ring's wrap link
on, while going straight); a worm holds them until its tail passes. Then a switch allocator
lets one flit cross each link per cycle: the inputs are visited round-robin from after the
first winner of the last cycle with one, and a ready input wins if none of its links is taken.
Flits carry their VC on the wire, credits return per VC; with V = 1 neither appears.

**Deadlock** is a network property: the engine reports :attr:`WormholeEngine.moved` (flits it
moved in its last step), :meth:`WormholeEngine.timing` (a start-up or preparation is counting
down) and :meth:`WormholeEngine.holdings` (which worm holds which channels); a driver that sees
worms in flight but no flit moving and no timer running anywhere for more than two steps (a
credit needs one) declares the run deadlocked. Contention is shared (all multicasts share the
channels).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from node import defaults
from node.engine import PORT_MODELS, Delivery, Injection, NodeError
from node.routing import Registry, UnknownAlgorithm
from node.routing.base import HeaderError
from node.topology import PORT_BITS, PORTS, Coord, Topology
from node.wire import MAX_VCS, Credits, Flit, Worm, decode_flit

__all__ = [
    "DEFAULT_BUFFER_FLITS",
    "DEFAULT_FLITS",
    "DEFAULT_TS",
    "PREP",
    "VC_CLASSES",
    "Flit",
    "Holding",
    "WormholeEngine",
    "decode_flit",
    "vc_problem",
]

DEFAULT_FLITS: Final = 64
DEFAULT_TS: Final = 33
DEFAULT_BUFFER_FLITS: Final = defaults.BUFFER_FLITS
PREP: Final[Mapping[str, int]] = defaults.PREP
"""Preparation time at the source in cycles (seed 004 §4.2); other algorithms spend none."""
VC_CLASSES: Final = ("shared", "split")
"""``--vc-classes``: unicast and multicast worms share the virtual channels, or keep to disjoint halves."""


@dataclass(frozen=True, slots=True)
class Holding:
    """For a deadlock report: a worm, the input channel its front sits in, the outputs it owns/wants."""

    node: Coord
    mc: int
    worm: Worm
    channel: str
    owns: tuple[str, ...]
    wants: tuple[str, ...]


@dataclass(slots=True)
class _Msg:
    """A message waiting for an injection channel: its first port and header, ready step."""

    mc: int
    alg: str
    port: str
    header: Any
    hops: int
    startups: int
    ready: int


@dataclass(slots=True)
class _Bind:
    """An input channel's worm: the outputs it needs (with each head copy's header) and its fate here."""

    worm: Worm
    mc: int
    outs: dict[str, tuple[Any, int, int]]  # port -> (header, hops, start-ups) of the head sent there
    eject: bool  # absorbed here: needs an ejection channel
    deliver: bool = False
    later: list[tuple[str, Any, int]] = field(default_factory=list)  # new messages after the tail
    alg: str = ""
    hops: int = 0
    startups: int = 0
    ej: str | None = None  # the ejection channel granted
    allowed: dict[str, tuple[str, ...]] | None = None  # port -> output VCs it may take (VCs > 1)
    got: dict[str, str] = field(default_factory=dict)  # port -> the output VC it holds there
    copies: dict[str, tuple[Flit, Flit]] = field(default_factory=dict)
    """VCs > 1: port -> the body and tail flit sent there (made once, with that port's VC)."""


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
    """One node's router: input buffers, channel bindings, arbitration, injection and ejection.

    Work is kept proportional to what moves: a buffer is a queue of runs (:class:`_Run`: a
    worm's flits as a count), routing visits only inputs a flit reached or a tail left
    (``_unrouted``), arbitration runs only after a worm was bound or released channels here
    (``_rearbitrate``: otherwise it would grant nothing new), movement visits only bound inputs,
    and :meth:`busy`, :meth:`timing` and the occupancy are counters, not scans.
    """

    def __init__(
        self,
        topology: Topology,
        here: Coord,
        registry: Registry,
        *,
        port_model: str = "all-port",
        flits: int = DEFAULT_FLITS,
        ts: int = DEFAULT_TS,
        buffer_flits: int = DEFAULT_BUFFER_FLITS,
        prep: Mapping[str, int] | None = None,
        hop_limit: int | None = None,
        contention: str = "shared",
        trace: bool = False,
        clock_ns: Any = None,
        vcs: int = defaults.VCS,
        vc_classes: str = defaults.VC_CLASSES,
    ) -> None:
        if contention != "shared":
            raise ValueError(f"wormhole switching runs shared contention only, not {contention!r}")
        if port_model not in PORT_MODELS:
            raise ValueError(f"unknown port model {port_model!r}: use one of {', '.join(PORT_MODELS)}")
        if flits < 1 or buffer_flits < 1 or ts < 0:
            raise ValueError("flits and buffer_flits must be at least 1 and ts non-negative")
        why = vc_problem(vcs, vc_classes, topology.is_torus)
        if why is not None:
            raise ValueError(why)
        self.topology = topology
        self.here = here
        self.registry = registry
        self.one_port = port_model == "one-port"
        self.flits = flits
        self.ts = ts
        self.buffer_flits = buffer_flits
        self.prep = dict(PREP if prep is None else prep)
        self.hop_limit = hop_limit if hop_limit is not None else defaults.hop_limit(topology.size)
        self._clock = clock_ns
        self.trace = trace
        self._ports = [p for p in PORTS if p in topology.ports(here)]
        self._injs = ["inj"] if self.one_port else [f"inj{p}" for p in PORTS]
        self._ejs = ["ej"] if self.one_port else [f"ej{i}" for i in range(4)]
        self.vcs = vcs
        self._one_vc = vcs == 1
        self._split = vc_classes == "split"
        self._dateline = topology.is_torus and vcs > 1
        # a port's VC v is the channel named "+x" (v = 0) or "+x.v": with one VC, the port's name
        self._vc_names: dict[str, tuple[str, ...]] = {
            p: tuple(_vc_name(p, v) for v in range(vcs)) for p in self._ports
        }
        self._vc_of = {_vc_name(p, v): (p, v) for p in self._ports for v in range(vcs)}
        self._wrap: dict[str, bool] = {p: _wraps(topology, here, p) for p in self._ports}
        net = [c for p in self._ports for c in self._vc_names[p]]
        self._inputs = net + self._injs  # the fixed arbitration order (port by port, VC by VC)
        self._runs: dict[str, deque[_Run]] = {c: deque() for c in self._inputs}
        self._count: dict[str, int] = dict.fromkeys(self._inputs, 0)  # flits buffered per input
        self._bind: dict[str, _Bind | None] = dict.fromkeys(self._inputs)
        self._owner: dict[str, str | None] = dict.fromkeys(net + self._ejs)
        self._rr: dict[str, int] = dict.fromkeys([*self._ports, "ej"], -1)
        self._sa = -1  # switch allocation (VCs > 1): the input that won first in the last cycle any won
        self._credit: dict[str, int] = dict.fromkeys(net, buffer_flits)
        self._queue: dict[str, deque[_Msg]] = {c: deque() for c in self._injs}
        self._loading: dict[str, tuple[int, _Msg] | None] = dict.fromkeys(self._injs)
        self._worms = 0
        # counters that stand for scans of the tables above
        self._flits_in = 0  # flits in all input buffers
        self._held = 0  # flits in the network input buffers (the occupancy)
        self._bound = 0  # input channels bound to a worm
        self._queued = 0  # messages waiting for an injection channel
        self._loads = 0  # start-ups counting down
        self._moving: list[str] = []  # the bound inputs, in the fixed order
        self._unrouted: set[str] = set()  # inputs whose front may be a head with no worm bound yet
        self._rearbitrate = False  # a worm was bound or released channels since the last arbitration
        self.freed: dict[str, int] = {}
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
        self.copies = 0  # outputs beyond the first of each message or worm head (as node.engine counts)
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

    def _channel(self, port: str) -> str:
        return "inj" if self.one_port else f"inj{port}"

    def _enqueue(
        self, mc: int, alg: str, port: str, header: Any, hops: int, startups: int, ready: int
    ) -> None:
        if port not in self._ports:
            self.errors.append(
                NodeError("bad-send", f"rule {alg!r} sent on {port!r}, not a link of {self.here}", mc)
            )
            return
        self._queue[self._channel(port)].append(_Msg(mc, alg, port, header, hops, startups, ready))
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
            self._enqueue(inj.mc, inj.alg, port, header, 1, 1, ready)

    def receive(self, flit: Flit, port: str | None = None) -> None:
        """A flit arrived on ``port`` (sent at the previous step); credits keep the buffer from filling."""
        self.received += 1
        if port is None or port not in self._vc_names:
            self.dropped += 1
            self.errors.append(NodeError("bad-port", f"flit on {port!r}, not a link of {self.here}", flit.mc))
            return
        c = port
        if flit.vc:
            if flit.vc >= self.vcs:
                self.dropped += 1
                self.errors.append(
                    NodeError(
                        "bad-vc",
                        f"flit on virtual channel {flit.vc} of {port}, which has {self.vcs}",
                        flit.mc,
                    )
                )
                return
            c = self._vc_names[port][flit.vc]
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
        if self._bind[c] is None:
            self._unrouted.add(c)

    def _pop(self, c: str) -> Flit:
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
        if c in self._credit:  # a network input: one credit back to the upstream node
            self._held -= 1
            self.freed[c] = self.freed.get(c, 0) + 1
        return flit

    def credit_back(self, port: str, n: Credits) -> None:
        """The neighbour across ``port`` moved ``n`` of our flits out of its input buffer (per VC, a list)."""
        if port not in self._credit:
            return
        if isinstance(n, int):
            self._credit[port] = min(self._credit[port] + n, self.buffer_flits)
            return
        for oc, k in zip(self._vc_names[port], n, strict=False):  # extra counts name no VC of ours
            self._credit[oc] = min(self._credit[oc] + k, self.buffer_flits)

    def take_freed(self) -> dict[str, Credits]:
        """Per input port, the flits moved out since the last call (credits upstream; per VC above one)."""
        freed, self.freed = self.freed, {}
        if self.vcs == 1:
            return dict(freed)
        return {
            p: tuple(freed.get(c, 0) for c in names)
            for p, names in self._vc_names.items()
            if any(c in freed for c in names)
        }

    # -- state -------------------------------------------------------------------------
    def busy(self) -> bool:
        """Flits buffered, worms bound, start-ups running or messages waiting here."""
        return self._flits_in > 0 or self._bound > 0 or self._queued > 0 or self._loads > 0

    def timing(self) -> bool:
        """A start-up or a preparation time is counting down (progress without moving flits)."""
        if self._loads:
            return True
        if not self._queued:
            return False
        return any(q and not self._count[c] and self._bind[c] is None for c, q in self._queue.items())

    def holdings(self) -> list[Holding]:
        """Every worm bound here: the channel its front is in, the outputs it owns and still wants."""
        out = []
        for c in self._inputs:
            b = self._bind[c]
            if b is None:
                continue
            mine = [o for o, w in self._owner.items() if w == c]
            wants = [o for o in b.outs if o not in b.got] + (["ej"] if b.eject and b.ej is None else [])
            out.append(Holding(self.here, b.mc, b.worm, c, tuple(mine), tuple(wants)))
        return out

    # -- lockstep ----------------------------------------------------------------------
    def _bind_to(self, c: str, b: _Bind) -> None:
        self._bind[c] = b
        self._bound += 1
        self._rearbitrate = True
        self._moving = [i for i in self._inputs if self._bind[i] is not None]

    def _release(self, c: str, b: _Bind, t: int) -> None:
        """The tail of ``b`` left input ``c`` at ``t``: free every channel it held."""
        for oc in b.got.values():
            self._owner[oc] = None
        if b.ej is not None:
            self._owner[b.ej] = None
        if b.eject:
            self._finish(b, t)
        self._bind[c] = None
        self._bound -= 1
        self._rearbitrate = True
        self._moving = [i for i in self._inputs if self._bind[i] is not None]
        if self._count[c]:
            self._unrouted.add(c)  # the next worm's head may be right behind the tail

    def _route(self, c: str, head: Flit) -> _Bind:
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
        except (HeaderError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            self.errors.append(NodeError("bad-header", f"{head.alg}: {type(exc).__name__}: {exc}", head.mc))
            return sink
        sts = fwd.startups_of(head.startups)
        cont = fwd.carried if fwd.startup else len(fwd.sends)
        b = _Bind(head.worm, head.mc, {}, False, fwd.deliver, [], head.alg, head.hops, head.startups)
        self.copies += max(0, len(fwd.sends) + fwd.deliver - 1)
        for i, ((port, header), st) in enumerate(zip(fwd.sends, sts, strict=True)):
            if port not in self._ports:
                self.errors.append(
                    NodeError(
                        "bad-send", f"rule {head.alg!r} sent on {port!r}, not a link of {self.here}", head.mc
                    )
                )
            elif i >= cont:
                b.later.append((port, header, st))
            elif port in b.outs:
                self.errors.append(
                    NodeError("bad-send", f"rule {head.alg!r} sent twice on {port!r} at {self.here}", head.mc)
                )
            else:
                b.outs[port] = (header, head.hops + 1, st)
        b.eject = fwd.deliver or bool(b.later)
        self._allow(b, c)
        return b

    def _allow(self, b: _Bind, c: str) -> None:
        """The output VCs worm ``b`` (its head in input ``c``) may take on each of its ports, lowest first.

        Its class (``--vc-classes split``: unicast worms the lower half, others the upper) and, on
        a torus, the dateline: within its class's VCs a worm keeps to the lower half until it
        crosses the wrap link of the ring it travels on, the upper half from that link on while
        it goes straight on; a turn (or a new message) starts in the lower half again.
        """
        if self._one_vc:
            return  # the port itself: nothing to choose
        b.allowed = allowed = {}
        lo, hi = 0, self.vcs
        if self._split:
            lo, hi = (0, self.vcs // 2) if b.alg == "unicast" else (self.vcs // 2, self.vcs)
        came = self._vc_of.get(c)  # (input port, VC) for a network input, None for an injection channel
        for p in b.outs:
            names = self._vc_names[p]
            if not self._dateline:
                allowed[p] = names[lo:hi]
                continue
            mid = lo + (hi - lo) // 2
            # past the dateline: this link is a wrap link, or it goes straight on from an upper VC
            crossed = self._wrap[p] or (came is not None and _TRAVEL[came[0]] == p and came[1] >= mid)
            allowed[p] = names[mid:hi] if crossed else names[lo:mid]

    def _start_injections(self, t: int) -> None:
        for c in self._injs:
            q = self._queue[c]
            if (
                self._loading[c] is None
                and not self._count[c]
                and self._bind[c] is None
                and q
                and q[0].ready <= t
            ):
                self._loading[c] = (t + self.ts, q.popleft())
                self._queued -= 1
                self._loads += 1
            ld = self._loading[c]
            if ld is not None and ld[0] <= t:
                m = ld[1]
                self._loading[c] = None
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
                self._bind_to(c, b)

    def _arbitrate(self) -> None:
        n = len(self._inputs)
        owner = self._owner
        one = self._one_vc
        for o in self._ports:
            if one:  # one VC: the port itself, to the first requester after its last winner
                if owner[o] is not None:
                    continue
                for k in range(1, n + 1):
                    i = (self._rr[o] + k) % n
                    b = self._bind[self._inputs[i]]
                    if b is not None and o in b.outs:
                        owner[o] = self._inputs[i]
                        b.got[o] = o
                        self._rr[o] = i
                        break
                continue
            names = self._vc_names[o]
            if all(owner[oc] is not None for oc in names):
                continue
            # VC allocation: round-robin over the input channels after the last one granted a VC
            # of this port; each requester takes the lowest free VC its class and dateline allow
            start = self._rr[o]
            for k in range(1, n + 1):
                i = (start + k) % n
                b = self._bind[self._inputs[i]]
                if b is None or o not in b.outs or o in b.got:
                    continue
                assert b.allowed is not None  # set when it was routed (VCs > 1)
                oc = next((v for v in b.allowed[o] if owner[v] is None), None)
                if oc is None:
                    continue
                owner[oc] = self._inputs[i]
                b.got[o] = oc
                self._rr[o] = i
                if all(owner[v] is not None for v in names):
                    break
        for e in self._ejs:
            if self._owner[e] is not None:
                continue
            for k in range(1, n + 1):
                i = (self._rr["ej"] + k) % n
                b = self._bind[self._inputs[i]]
                if b is not None and b.eject and b.ej is None:
                    self._owner[e] = self._inputs[i]
                    b.ej = e
                    self._rr["ej"] = i
                    break

    def _ready(self, c: str) -> bool:
        """Input ``c`` could move its front flit: it holds an output VC with a credit on each of its ports."""
        b = self._bind[c]
        if b is None or not self._count[c] or self._runs[c][0].worm != b.worm or (b.eject and b.ej is None):
            return False
        return len(b.got) == len(b.outs) and all(self._credit[oc] > 0 for oc in b.got.values())

    def _switch(self) -> set[str]:
        """Switch allocation (VCs > 1): the inputs that move a flit this cycle, one per physical link.

        The inputs are visited round-robin, starting after the first winner of the last cycle in
        which any input won; a ready input wins when none of its links is taken yet this cycle
        (a branching worm takes all of its links or none).
        """
        n = len(self._inputs)
        taken: set[str] = set()
        won: set[str] = set()
        first = -1
        for k in range(1, n + 1):
            i = (self._sa + k) % n
            c = self._inputs[i]
            if not self._ready(c):
                continue
            b = self._bind[c]
            assert b is not None
            if any(p in taken for p in b.outs):
                continue
            taken.update(b.outs)
            won.add(c)
            if first < 0:
                first = i
        if first >= 0:
            self._sa = first
        return won

    def _finish(self, b: _Bind, t: int) -> None:
        """The tail of absorbed worm ``b`` left the buffer at ``t``: the processor has it at t+1."""
        if b.deliver:
            self.deliveries.append(Delivery(b.mc, t + 1, b.hops, b.startups, self._now()))
            self.delivered += 1
        for port, header, st in b.later:
            self._enqueue(b.mc, b.alg, port, header, b.hops + 1, st, t + 1)

    def _trace_flit(self, b: _Bind, c: str, t: int) -> None:
        """Replay trace hook (``trace`` on): a flit of worm ``b`` left input ``c`` at ``t``, onto each of
        ``b``'s outputs and, absorbed here, its ejection channel; extends that run or opens one."""
        runs = self._worm_run
        came = self._vc_of[c][0] if c in self._vc_of else "inj"
        for o in (*b.outs, "ej") if b.ej is not None else b.outs:
            key = (b.worm, came, o)
            run = runs.get(key)
            if run is not None and run[6] + run[7] == t:
                run[7] += 1
            else:
                run = runs[key] = [b.mc, *b.worm, came, o, t, 1]
                self.worm_trace.append(run)

    def _copy(self, b: _Bind, flit: Flit, o: str, header: Any, hops: int, st: int) -> Flit:
        """``flit`` as sent on output ``o``: a head with that output's header, on the VC ``b`` holds there."""
        if self._one_vc:  # one VC: the port is the channel, and a body or tail flit goes on as it is
            return flit.copy_as(header, hops, st)
        vc = self._vc_of[b.got[o]][1]
        if flit.head:
            return Flit(flit.kind, flit.mc, flit.worm, flit.alg, header, hops, st, vc)
        made = b.copies.get(o)
        if made is None or made[0].mc != flit.mc:
            made = b.copies[o] = (Flit("B", flit.mc, flit.worm, vc=vc), Flit("T", flit.mc, flit.worm, vc=vc))
        return made[1] if flit.tail else made[0]

    def step(self, t: int) -> list[tuple[str, Flit]]:
        """Do step ``t`` (flits and credits of t−1 and injections of t already given); the flits sent now."""
        if self._queued or self._loads:
            self._start_injections(t)
        if self._unrouted:
            unrouted, self._unrouted = self._unrouted, set()
            for c in self._inputs:
                if c not in unrouted:
                    continue
                runs = self._runs[c]
                while (
                    runs and self._bind[c] is None and not runs[0].front().head
                ):  # no head before it: a stray
                    self.dropped += 1
                    self.errors.append(
                        NodeError("stray-flit", f"{self._pop(c).kind} flit on {c} without a head", None)
                    )
                if self._bind[c] is None and runs:
                    self._bind_to(c, self._route(c, runs[0].front()))
        if self._rearbitrate:
            self._rearbitrate = False
            self._arbitrate()
        won = self._switch() if self.vcs > 1 and self._bound else None
        out: list[tuple[str, Flit]] = []
        moved = 0
        if self._bound:
            credit = self._credit
            count = self._count
            runs_of = self._runs
            bind = self._bind
            one = self._one_vc
            link_sends = self.link_sends
            freed = self.freed
            held = self._held
            for c in self._moving:  # a snapshot: a tail below releases its input
                b = bind[c]
                if b is None or not count[c]:
                    continue
                runs = runs_of[c]
                run = runs[0]
                if run.worm != b.worm:
                    self._held = held
                    bad = self._pop(c)  # a peer lost a tail: not this worm's flit
                    held = self._held
                    self.dropped += 1
                    self.errors.append(
                        NodeError(
                            "worm-mismatch", f"flit of worm {bad.worm} in the channel of {b.worm}", bad.mc
                        )
                    )
                    continue
                got = b.got
                if won is not None:
                    if c not in won:
                        continue
                elif len(got) != len(b.outs) or (b.eject and b.ej is None):
                    continue  # it does not own every output it needs yet
                else:
                    blocked = False
                    for oc in got.values():
                        if credit[oc] <= 0:
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
                if c in credit:  # a network input: a credit back upstream
                    held -= 1
                    freed[c] = freed.get(c, 0) + 1
                moved += 1
                if self.trace:  # replay trace hook
                    self._trace_flit(b, c, t)
                for o, (header, hops, st) in b.outs.items():
                    # the one place a flit is sent on an output
                    credit[got[o]] -= 1
                    out.append((o, flit if one and not head else self._copy(b, flit, o, header, hops, st)))
                    link_sends[o] = link_sends.get(o, 0) + 1
                    if head:
                        self.traffic[b.mc] = self.traffic.get(b.mc, 0) + 1
                        self.links_used[b.mc] = self.links_used.get(b.mc, 0) | PORT_BITS[o]
                        if self.trace:
                            self.link_trace.append((b.mc, o, t))
                if tail:
                    self._release(c, b, t)
            self._flits_in -= moved
            self._held = held
            self.sent += len(out)
        self.moved = moved
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


def _wraps(topology: Topology, here: Coord, port: str) -> bool:
    """Whether the link from ``here`` on ``port`` is a torus wrap link (it closes its ring)."""
    nb = topology.neighbour(here, port)
    if nb is None or not topology.is_torus:
        return False
    axis = 0 if port in ("+x", "-x") else 1
    return nb[axis] < here[axis] if port[0] == "+" else nb[axis] > here[axis]


def vc_problem(vcs: int, vc_classes: str, torus: bool | None = None) -> str | None:
    """Why these virtual-channel settings cannot run (one line; ``torus`` None: either topology), or None."""
    if not 1 <= vcs <= MAX_VCS:
        return f"vcs must be between 1 and {MAX_VCS}, got {vcs}"
    if vc_classes not in VC_CLASSES:
        return f"unknown vc_classes {vc_classes!r}: use one of {', '.join(VC_CLASSES)}"
    if vc_classes == "split" and vcs < 2:
        return f"vc_classes split puts unicast and multicast on disjoint VCs: needs vcs 2 or more, got {vcs}"
    if vc_classes == "split" and torus and vcs < 4:
        return f"vc_classes split on a torus needs vcs 4 or more (a dateline in each class), got {vcs}"
    return None
