"""The centralised cycle-level reference model of flit-level wormhole switching.

It implements the conventions of ``docs/wormhole.md`` (and ``node/switching/wormhole.py``'s docstring) as
one loop over cycles with network-wide tables — channel owners, buffers, credits — and shares no
code with the node engine: only the routing rules, the topology, the wire's codec and the router's
vocabulary (the
VC states of :class:`~node.switching.wormhole.VcState` and the stage names of
:data:`~node.switching.wormhole.STAGES`). Headers go through msgpack at every hop, as on the wire.
Agreement of its arrival records with the engines' lockstep network (``tests/test_wormhole.py``)
is evidence, not an echo.

A cycle is :meth:`_Model.deliver` (the flits and credits sent the cycle before arrive), the
cycle's injections, then the stages in the engine's order, each over every node with work for it:
:meth:`_Model.startup`, :meth:`_Model.route`, :meth:`_Model.vc_alloc`, :meth:`_Model.sw_alloc`,
:meth:`_Model.traverse`. A stage at one node never touches another node's tables in the same
cycle (what it sends arrives the next), so running each stage over all nodes equals running all
stages node by node.

Only active nodes are visited, in sorted order, and at each only the channels an event touched:
start-ups when a wait or a ready step has come or an injection channel was freed, routing for an
input a head reached, VC allocation after a route appeared or a tail freed channels, switch
allocation for an input that got a flit, a credit or a grant (or moved a flit the cycle before).
Everywhere else the rules would do nothing, so the records equal those of visiting every node and
channel every cycle, and an idle node costs nothing. The tables are lists indexed by channel
numbers: input channel ``r * S + i`` is the i-th of node r's round-robin order, output ``r * 4 + j``
its port ``PORTS[j]`` (r: the node's rank in sorted order). An input buffer is a queue of runs
``[flit, count]``: a start-up puts a worm in as three runs (head, L − 2 body flits, tail), and
the body flits one hop sends are one tuple, so those arriving behind each other add to one count.

With ``vcs`` V > 1 an output number is a VC of a link (``o // V`` the link, ``o % V`` the VC)
and input channel ``r * S + i`` is the i-th of node r's order: each link's V VCs, then the
injection channels; VC allocation, the dateline, classes and the switch allocator follow
``docs/wormhole.md`` "Virtual channels" (written here without the engine's code). With one VC
switch allocation is trivial: every ready input moves.

**Deadlock.** At the end of every cycle at which some bound worm becomes still (unchanged for
more than two cycles), :meth:`_Model.verdict` looks for a cycle of still worms in the wait-for graph
(docs/wormhole.md "Deadlock"), from this model's own tables; the first cycle it finds one is the
verdict (``RawRun.incomplete``'s line naming its worms), after which no injection is made. A run
ends when it drains or stalls — worms in flight, no flit moved and no start-up or preparation
counting down for more than two cycles — and a stall leaves one ``deadlock`` entry in
``RawRun.errors`` per worm naming the channels it holds.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from coordinator.runtimes.records import Arrival, RawRun
from coordinator.workloads.plan import Multicast, Plan
from node import defaults
from node.routing import UnknownAlgorithm, registry
from node.routing.base import HEADER_ERRORS
from node.routing.unicast import UNICASTS
from node.settings import NodeSettings, RouterTiming
from node.switching.wormhole import VcState
from node.topology import PORTS, Coord
from node.transport.wire import as_received

__all__ = ["SEED004_PREP", "run_wormhole_model"]

SEED004_PREP: Mapping[str, int] = defaults.PREP

_RULE_ERRORS: Final = (UnknownAlgorithm, *HEADER_ERRORS)
"""What a rule may raise on a bad header: the worm's error, never the model's."""

_STILL: Final = 2
"""Cycles a worm may go without moving before it counts as still: a credit or a flit sent at t is
usable at t + 1, so after two quiet cycles none of its own is still on its way."""

# the VC states as plain ints for the loops (Final: constants in the compiled build, not lookups)
IDLE: Final = int(VcState.IDLE)
ROUTING: Final = int(VcState.ROUTING)
VC_ALLOC: Final = int(VcState.VC_ALLOC)
ACTIVE: Final = int(VcState.ACTIVE)

# a flit: (is_head, is_tail, mc, worm, alg, header, hops, startups); worm = (x, y, n). Typed as
# a tuple of anything: the compiled build checks a typed tuple's every item (and the worm's) each
# time one is read from a list, which cost a third of the model's time
Fl = tuple[Any, ...]
# a run in an input buffer: [flit, count], that many flits alike in a row (a worm's body flits on
# one hop are one tuple, so a body is one run however long the worm)
Run = list[Any]
# a message waiting for its injection channel: [mc, alg, port, header, hops, startups, ready]
Msg = list[Any]


@dataclass(slots=True)
class _Route:
    """A worm bound to an input channel: where its flits go and what it leaves at this node."""

    worm: tuple[int, int, int]
    mc: int
    alg: str
    hops: int
    st: int
    outs: dict[str, tuple[Any, int, int]] = field(default_factory=dict)  # port -> (header, hops, st)
    absorb: bool = False  # needs an ejection channel: delivers here or starts messages here
    deliver: bool = False
    later: list[tuple[str, Any, int]] = field(default_factory=list)  # (port, header, st) to start here
    ej: int = -1  # the ejection channel it holds (index into the node's)
    sends: list[tuple[int, int, Fl, int]] = field(default_factory=list)
    """Per output, in ``outs`` order: the output VC, the input it feeds, the body flit sent there
    and the link (filled in once it holds a VC on every output it needs)."""
    granted: bool = False  # it holds a VC on every output it needs (``sends`` is complete)
    may: dict[str, list[int]] | None = None
    """Per port: the output VCs its class and the dateline let it take, lowest first (VCs > 1)."""
    held: dict[str, int] = field(default_factory=dict)  # port -> output VC granted
    sa_from: int = 0  # the first cycle switch allocation takes it: ACTIVE + vc_alloc_delay
    moved: int = 0  # flits it sent on each of its links (counted into the links' totals when it goes)
    since: int = -1  # the cycle it was bound, granted a channel or moved a flit out (deadlock verdict)


class _Bits(dict[int, tuple[int, ...]]):
    """A mask's channels in order, computed once per mask (too many channels for a full table)."""

    def __missing__(self, m: int) -> tuple[int, ...]:
        got = self[m] = tuple(i for i in range(m.bit_length()) if m >> i & 1)
        return got


def _vc_name(port: str, v: int) -> str:
    return port if v == 0 else f"{port}.{v}"


class _Model:
    """The whole network's tables, and the router's stages over them (one method each)."""

    def __init__(
        self,
        plan: Plan,
        port_model: str,
        flits: int,
        ts: int,
        buffer_flits: int,
        prep: Mapping[str, int],
        limit: int,
        vcs: int,
        vc_classes: str,
        dateline: str,
        timing: RouterTiming,
    ) -> None:
        topo = self.topo = plan.topology
        # router timing (docs/wormhole.md "Router timing"); the paper's router: all 0, pipe 1
        self.rd, self.va, self.cd = timing.routing_delay, timing.vc_alloc_delay, timing.credit_delay
        self.pipe = timing.sw_alloc_delay + timing.st_delay + timing.link_latency
        self.eject = timing.sw_alloc_delay + timing.st_delay + 1  # the ejection channel: one cycle
        self.wtc, self.isp = bool(timing.wait_for_tail_credit), timing.input_speedup
        self.still = _STILL + timing.settle  # cycles without a change before a worm is still
        self.flight: dict[int, list[tuple[int, Fl]]] = {}  # cycle -> flits that reach their buffers after it
        self.cflight: dict[int, list[int]] = {}  # cycle -> credits that reach their output VCs after it
        self.gate = -1  # the latest cycle at which a delayed route or switch allocation may act
        self.routed: set[int] = set()  # nodes that routed a head held back by routing_delay this cycle
        self.flits, self.ts, self.buffer_flits, self.prep, self.limit = flits, ts, buffer_flits, prep, limit
        self.split = vc_classes == "split"
        self.ring = dateline == "ring"
        self.raw = RawRun()
        one = self.one = port_model == "one-port"
        nodes = self.nodes = sorted(topo.nodes())
        self.rank = rank = {n: r for r, n in enumerate(nodes)}
        links = self.links = [[p for p in PORTS if topo.neighbour(n, p) is not None] for n in nodes]
        injs = ["inj"] if one else ["inj" + p for p in PORTS]
        self.ejs = ["ej"] if one else ["ej0", "ej1", "ej2", "ej3"]
        V = self.V = vcs
        # the round-robin order of input channels: each link's VCs ("+x", "+x.1", ...), then injection
        order = self.order = [
            [_vc_name(p, v) for p in links[r] for v in range(V)] + injs for r in range(len(nodes))
        ]
        self.in_port = [[p for p in links[r] for _ in range(V)] for r in range(len(nodes))]  # input -> port
        S, P, E = self.S, self.P, self.E = len(PORTS) * V + len(injs), len(PORTS), len(self.ejs)
        self.PV = P * V  # output VCs per node
        self.inj_chs = [
            [r * S + i for i in range(len(links[r]) * V, len(order[r]))] for r in range(len(nodes))
        ]
        # output VC o = (r * P + j) * V + v: node r's port PORTS[j], VC v; o // V is the link
        across = self.across = [-1] * (len(nodes) * P * V)  # output VC -> the input channel it feeds
        up = self.up = [-1] * (len(nodes) * S)  # network input channel -> the output VC feeding it (credits)
        for r, n in enumerate(nodes):
            for p in links[r]:
                nb = topo.neighbour(n, p)
                assert nb is not None
                first = rank[nb] * S + order[rank[nb]].index(topo.opposite(p))
                for v in range(V):
                    across[(r * P + PORTS.index(p)) * V + v] = first + v
                    up[first + v] = (r * P + PORTS.index(p)) * V + v
        self.bits: list[tuple[int, ...]] | _Bits = (  # a mask's channels, in order
            [tuple(i for i in range(S) if m >> i & 1) for m in range(1 << S)] if S <= 12 else _Bits()
        )
        self.buf: list[deque[Run]] = [deque() for _ in range(len(nodes) * S)]
        self.state = [IDLE] * (len(nodes) * S)  # input channel -> its VcState
        self.since = [0] * (len(nodes) * S)  # a ROUTING input -> the cycle its head reached the front
        self.node_of = [ch // S for ch in range(len(nodes) * S)]  # input channel -> its node
        self.bit_of = [1 << (ch % S) for ch in range(len(nodes) * S)]  # ... and its bit in the node's masks
        self.route_of: dict[int, _Route] = {}  # input channel -> the worm bound to it
        self.bound: list[_Route | None] = [None] * (len(nodes) * S)  # the same, a list for the per-flit loops
        self.owner = [-1] * (len(nodes) * P * V)  # output VC -> position of the input channel holding it
        self.ej_owner = [-1] * (len(nodes) * E)
        self.last = [-1] * (len(nodes) * P)  # round-robin pointer per link (VC allocation) ...
        self.last_ej = [-1] * len(nodes)  # ... and per node's ejection channels
        self.last_sw = [-1] * len(
            nodes
        )  # switch allocation (V > 1): the first winner of the last cycle with one
        self.credit = [buffer_flits] * (len(nodes) * P * V)
        self.waiting: dict[int, deque[Msg]] = {ch: deque() for chs in self.inj_chs for ch in chs}
        self.queued: set[int] = set()  # injection channels with waiting messages
        self.startup_end: dict[int, tuple[int, Msg]] = {}
        self.counter = [0] * len(nodes)
        self.buffered = 0  # flits in all input buffers
        self.sent = [0] * (len(nodes) * P)  # flits per link (RawRun.link_sends, in order of first use) ...
        self.used = [False] * (len(nodes) * P)  # ... of the worms that went; the links used so far
        self.first_used: list[int] = []
        self.arriving: list[tuple[int, Fl]] = []
        self.credits_back: list[int] = []
        # the work ahead, kept by the events that can make a stage act
        self.wake: dict[int, set[int]] = {}  # cycle -> nodes whose start-ups may act then
        self.to_route = [0] * len(nodes)  # per node, a mask of its ROUTING inputs
        self.routing: set[int] = set()  # ... the nodes with one
        self.to_move = [0] * len(nodes)  # per node, a mask of inputs that may move a flit
        self.to_allocate: set[int] = set()  # nodes where a route appeared or a channel was freed
        self.active_next: set[int] = set()  # nodes with work marked for the next cycle
        self.next_still = 0  # the earliest cycle a bound worm may become still (deadlock verdict)
        # peak_queue as the engines measure it: per node, the most flits in its network input buffers
        # at the end of a cycle (a flit counts from its delivery to the cycle it leaves)
        self.held = [0] * len(nodes)
        self.peak = [0] * len(nodes)
        self.t = 0

    # -- helpers -----------------------------------------------------------------------
    def err(self, node: Coord, kind: str, cause: str, mc: int) -> None:
        self.raw.errors.append({"node": list(node), "kind": kind, "cause": cause, "mc": mc})

    def at(self, step: int, r: int) -> None:
        self.wake.setdefault(max(step, self.t), set()).add(r)

    def queue_msg(
        self, r: int, mc: int, alg: str, port: str, header: Any, hops: int, st: int, ready: int
    ) -> None:
        if port not in self.links[r]:
            self.err(self.nodes[r], "bad-send", port, mc)
            return
        ch = r * self.S + self.order[r].index("inj" if self.one else "inj" + port)
        self.waiting[ch].append([mc, alg, port, as_received(header), hops, st, ready])
        self.queued.add(ch)
        self.at(ready, r)

    def may_take(self, r: int, i: int, rt: _Route, p: str) -> list[int]:
        """The output VCs on ``p`` worm ``rt`` (its head in input ``i`` of node ``r``) may take, lowest
        first."""
        alg = rt.alg
        V, topo = self.V, self.topo
        base = (r * self.P + PORTS.index(p)) * V
        a, b = 0, V
        if self.split:
            a, b = (0, V // 2) if alg in UNICASTS else (V // 2, V)
        if topo.is_torus:
            half = a + (b - a) // 2
            n = self.nodes[r]
            straight = i < len(self.links[r]) * V and topo.opposite(self.in_port[r][i]) == p
            if self.ring:  # BookSim2's: the upper half for a whole ring the worm will cross the wrap link of
                after = i % V >= half if straight else self.crosses(n, p, alg, rt.outs[p][0])
            else:  # past the dateline: this link is a wrap link, or it goes straight on from an upper VC
                after = self.closes_ring(n, p) or (straight and i % V >= half)
            a, b = (half, b) if after else (a, half)
        return [base + v for v in range(a, b)]

    def closes_ring(self, n: Coord, p: str) -> bool:
        """Whether the link leaving ``n`` on ``p`` closes a torus ring (from the last column or row to
        the first, or back)."""
        axis = 0 if p[1] == "x" else 1
        return n[axis] == ((self.topo.cols if axis == 0 else self.topo.rows) - 1 if p[0] == "+" else 0)

    def crosses(self, n: Coord, p: str, alg: str, header: Any) -> bool:
        """``--dateline ring``: whether a worm leaving ``n`` on ``p`` with ``header`` takes that ring's
        wrap link before it turns, stops or leaves the ring (its rule run ahead, node by node, on
        headers as they arrive; a rule that fails ahead: no)."""
        topo, forward = self.topo, registry.get(alg).forward
        axis, sign = (0 if p[1] == "x" else 1), (1 if p[0] == "+" else -1)
        h = header
        for _ in range(topo.cols if axis == 0 else topo.rows):
            if self.closes_ring(n, p):
                return True
            n = (n[0] + sign, n[1]) if axis == 0 else (n[0], n[1] + sign)
            try:
                fwd = forward(topo, n, h)
            except _RULE_ERRORS:
                return False
            cont = fwd.carried if fwd.startup else len(fwd.sends)
            on = [h2 for p2, h2 in fwd.sends[:cont] if p2 == p]
            if not on:
                return False
            h = as_received(on[0])
        return False

    def bind(self, ch: int, rt: _Route) -> None:
        """Bind ``rt`` to input ``ch`` (VC_ALLOC) with the VCs it may take per output; ACTIVE at once
        when it needs none (a failed route drains)."""
        r, i = divmod(ch, self.S)
        if self.V > 1:
            rt.may = {p: self.may_take(r, i, rt, p) for p in rt.outs}
        rt.granted = not rt.outs
        rt.since = self.t
        self.route_of[ch] = rt
        self.bound[ch] = rt
        self.state[ch] = ACTIVE if rt.granted and not rt.absorb else VC_ALLOC
        if self.state[ch] == ACTIVE:
            self.activated(rt)
        self.to_allocate.add(r)
        self.to_move[r] |= 1 << i

    def activated(self, rt: _Route) -> None:
        """``rt`` holds all it needs this cycle: switch allocation takes it vc_alloc_delay cycles on."""
        rt.sa_from = self.t + self.va
        self.gate = max(self.gate, rt.sa_from)

    def ship(self) -> None:
        """End of a cycle: what traversal sent enters the pipeline of switch and link (it reaches its
        buffer ``pipe`` cycles after its switch allocation), credits theirs (``credit_delay`` more)."""
        t = self.t
        if self.pipe > 1:
            if self.arriving:
                self.flight[t + self.pipe - 1] = self.arriving
            self.arriving = self.flight.pop(t, [])
        if self.cd:
            if self.credits_back:
                self.cflight[t + self.cd] = self.credits_back
            self.credits_back = self.cflight.pop(t, [])

    # -- a cycle -----------------------------------------------------------------------
    def deliver(self) -> set[int]:
        """The credits and flits sent the cycle before arrive; the nodes they reached."""
        active, self.active_next = self.active_next, set()
        credit, owner, to_move, buffer_flits, PV = (
            self.credit,
            self.owner,
            self.to_move,
            self.buffer_flits,
            self.PV,
        )
        for o in self.credits_back:
            if credit[o] < buffer_flits:
                credit[o] += 1
            if owner[o] == -2 and credit[o] == buffer_flits:  # wait_for_tail_credit: the tail's came back
                owner[o] = -1
                self.to_allocate.add(o // PV)
                active.add(o // PV)
            if owner[o] >= 0:
                r = o // PV
                to_move[r] |= 1 << owner[o]
                active.add(r)
        buf, state, node_of, bit_of, held = self.buf, self.state, self.node_of, self.bit_of, self.held
        for ch, fl in self.arriving:
            b = buf[ch]
            if b and b[-1][0] is fl:  # the next body flit of the worm the run holds
                b[-1][1] += 1
            else:
                b.append([fl, 1])
            r = node_of[ch]
            held[r] += 1
            if state[ch] >= VC_ALLOC:  # a worm is bound: its flit may move
                to_move[r] |= bit_of[ch]
            else:
                if state[ch] == IDLE:
                    self.since[ch] = self.t
                state[ch] = ROUTING
                self.to_route[r] |= bit_of[ch]
                self.routing.add(r)
            active.add(r)
        self.buffered += len(self.arriving)
        self.arriving, self.credits_back = [], []
        return active

    def inject(self, multicasts: list[Multicast]) -> None:
        """Each multicast's messages, ready at the source after its preparation time."""
        t = self.t
        for m in multicasts:
            try:
                sends = registry.get(m.algorithm).prepare(self.topo, m.source, list(m.destinations), m.params)
            except (UnknownAlgorithm, ValueError, TypeError, KeyError, IndexError) as exc:
                self.err(m.source, "bad-injection", str(exc), m.id)
                continue
            r, ready = self.rank[m.source], t + self.prep.get(m.algorithm, 0)
            for port, header in sends:
                self.queue_msg(r, m.id, m.algorithm, port, header, 1, 1, ready)

    def startup(self, starting: list[int]) -> None:
        """Start-ups: an IDLE injection channel takes its next ready message; Ts later its worm is in."""
        t, ts, flits = self.t, self.ts, self.flits
        buf, state, waiting, startup_end = self.buf, self.state, self.waiting, self.startup_end
        for r in starting:
            n = self.nodes[r]
            for ch in self.inj_chs[r]:
                w = waiting[ch]
                if ch not in startup_end and state[ch] == IDLE and w and w[0][6] <= t:
                    startup_end[ch] = (t + ts, w.popleft())
                    if not w:
                        self.queued.discard(ch)
                    if ts > 0:
                        self.at(t + ts, r)
                if ch in startup_end and startup_end[ch][0] <= t:
                    mc, alg, port, header, hops, st, _ = startup_end.pop(ch)[1]
                    worm = (n[0], n[1], self.counter[r])
                    self.counter[r] += 1
                    buf[ch].append([(True, flits == 1, mc, worm, alg, header, hops, st), 1])
                    if flits > 2:
                        buf[ch].append([(False, False, mc, worm, alg, header, hops, st), flits - 2])
                    if flits > 1:
                        buf[ch].append([(False, True, mc, worm, alg, header, hops, st), 1])
                    self.buffered += flits
                    self.bind(ch, _Route(worm, mc, alg, hops, st, {port: (header, hops, st)}))

    def route(self) -> None:
        """Route computation: once per head at the front of a ROUTING input (then VC_ALLOC)."""
        S, buf, limit, topo = self.S, self.buf, self.limit, self.topo
        later: set[int] = set()  # nodes with a route still being computed (routing_delay)
        for r in sorted(self.routing):
            n, links = self.nodes[r], self.links[r]
            mask, self.to_route[r] = self.to_route[r], 0
            for i in self.bits[mask]:
                ch = r * S + i
                if self.rd:
                    if self.t < self.since[ch] + self.rd:
                        self.to_route[r] |= 1 << i
                        later.add(r)
                        self.gate = max(self.gate, self.since[ch] + self.rd)
                        continue
                    self.routed.add(r)  # no flit reached it this cycle: switch allocation must visit it
                assert buf[ch] and buf[ch][0][0][0]  # a ROUTING input's front is a head
                _, _, mc, worm, alg, header, hops, st = buf[ch][0][0]
                rt = _Route(worm, mc, alg, hops, st)
                if hops > limit:
                    self.err(n, "hop-limit", "", mc)
                    self.bind(ch, rt)
                    continue
                try:
                    fwd = registry.get(alg).forward(topo, n, header)
                except _RULE_ERRORS as exc:
                    self.err(n, "bad-header", str(exc), mc)
                    self.bind(ch, rt)
                    continue
                n_cont = fwd.carried if fwd.startup else len(fwd.sends)
                for k, (port, h) in enumerate(fwd.sends):
                    st_k = st + (1 if fwd.startup and k >= fwd.carried else 0)
                    if port not in links:
                        self.err(n, "bad-send", port, mc)
                    elif k >= n_cont:
                        rt.later.append((port, h, st_k))
                    elif port in rt.outs:
                        self.err(n, "bad-send", port, mc)
                    else:
                        rt.outs[port] = (as_received(h), hops + 1, st_k)
                rt.deliver = fwd.deliver
                rt.absorb = fwd.deliver or bool(rt.later)
                self.bind(ch, rt)
        self.routing = later

    def vc_alloc(self) -> None:
        """VC allocation: each free output VC to the next requester after its port's last winner (a
        VC_ALLOC input without a VC there), then the ejection channels; ACTIVE once it holds all."""
        S, P, V, E = self.S, self.P, self.V, self.E
        owner, ej_owner, last, route_of, state, to_move = (
            self.owner, self.ej_owner, self.last, self.route_of, self.state, self.to_move,
        )  # fmt: skip
        for r in sorted(self.to_allocate):
            ins = len(self.order[r])
            for p in self.links[r]:
                link = r * P + PORTS.index(p)
                free = sum(1 for o in range(link * V, link * V + V) if owner[o] == -1)
                after = last[link]
                for j in range(1, ins + 1):
                    if not free:
                        break
                    i = (after + j) % ins
                    ch = r * S + i
                    if state[ch] != VC_ALLOC:
                        continue
                    cand = route_of[ch]
                    if p not in cand.outs or p in cand.held:
                        continue
                    o = link if cand.may is None else next((o for o in cand.may[p] if owner[o] == -1), -1)
                    if o < 0:
                        continue
                    owner[o] = i
                    last[link] = i
                    free -= 1
                    cand.held[p] = o
                    cand.since = self.t  # a change: not still (deadlock verdict)
                    if len(cand.held) == len(cand.outs):  # its flits' copies, once per worm
                        for q, (h, hops_o, st_o) in cand.outs.items():
                            oq = cand.held[q]
                            body = (False, False, cand.mc, cand.worm, cand.alg, h, hops_o, st_o)
                            cand.sends.append((oq, self.across[oq], body, oq // V))
                        cand.granted = True
                        if not cand.absorb or cand.ej >= 0:
                            state[ch] = ACTIVE
                            self.activated(cand)
                    to_move[r] |= 1 << i
            for e in range(r * E, r * E + E):
                if ej_owner[e] >= 0:
                    continue
                for j in range(1, ins + 1):
                    i = (self.last_ej[r] + j) % ins
                    waits = route_of.get(r * S + i)
                    if waits is not None and waits.absorb and waits.ej < 0:
                        ej_owner[e] = self.last_ej[r] = i
                        waits.ej = e - r * E
                        waits.since = self.t
                        if waits.granted:
                            state[r * S + i] = ACTIVE
                            self.activated(waits)
                        to_move[r] |= 1 << i
                        break
        self.to_allocate.clear()

    def sw_alloc(self, nodes: list[int]) -> list[tuple[int, int]]:
        """Switch allocation: per node, the mask of inputs granted the switch this cycle.

        With one VC every input that may move is granted (the trivial allocator: its outputs are
        its own, no two inputs compete for a link). With more, a link carries one flit: the
        ready inputs are visited round-robin after the first winner of the last cycle with one,
        and each wins when none of its links is taken (all its links or none); the losers stay
        marked for the next cycle.
        """
        V, to_move = self.V, self.to_move
        won: list[tuple[int, int]] = []
        for r in nodes:
            mask = to_move[r]
            if not mask:
                continue
            to_move[r] = 0
            if V > 1:
                mask = self.separable(r, mask)
            if mask:
                won.append((r, mask))
        return won

    def separable(self, r: int, mask: int) -> int:
        """Of node ``r``'s inputs in ``mask``, the ready ones (ACTIVE, a flit, a credit on every output
        VC held) that win a link (V > 1); ready losers are marked again."""
        S, buf, state, credit, route_of = self.S, self.buf, self.state, self.credit, self.route_of
        ins_n = len(self.order[r])
        taken: set[str] = set()
        won = 0
        first = -1
        per_port: dict[str, int] = {}  # input_speedup: flits granted per input port
        net_ins = len(self.links[r]) * self.V
        for j in range(1, ins_n + 1):
            i = (self.last_sw[r] + j) % ins_n
            if not mask >> i & 1:
                continue
            ch = r * S + i
            if state[ch] != ACTIVE or not buf[ch]:
                continue
            rt = route_of[ch]
            if rt.sa_from > self.t:  # VC allocation not over: again next cycle
                self.to_move[r] |= 1 << i
                self.active_next.add(r)
                continue
            if not all(credit[o] > 0 for o, _, _, _ in rt.sends):
                continue
            if taken.intersection(rt.outs):
                self.to_move[r] |= 1 << i  # ready, but a link is taken this cycle: try again next cycle
                continue
            if self.isp and i < net_ins:
                port = self.in_port[r][i]
                if per_port.get(port, 0) >= self.isp:
                    self.to_move[r] |= 1 << i  # its input port sent its share this cycle
                    self.active_next.add(r)
                    continue
                per_port[port] = per_port.get(port, 0) + 1
            taken.update(rt.outs)
            won |= 1 << i
            if first < 0:
                first = i
        if first >= 0:
            self.last_sw[r] = first
        return won

    def traverse(self, won: list[tuple[int, int]]) -> int:
        """Switch traversal: each granted input that is ready (ACTIVE, a flit, a credit on every
        output VC it holds) moves its front flit (a credit back upstream) onto its links and
        ejection channel; a tail frees its channels (IDLE, or ROUTING with flits behind). The
        number of flits moved."""
        t, S, P, E = self.t, self.S, self.P, self.E
        buf, state, credit, route_of, up, bits, bound_at = (
            self.buf,
            self.state,
            self.credit,
            self.route_of,
            self.up,
            self.bits,
            self.bound,
        )
        arriving, credits_back, sent, used, to_move, raw = (
            self.arriving, self.credits_back, self.sent, self.used, self.to_move, self.raw,
        )  # fmt: skip
        moved = 0
        held = self.held
        for r, mask in won:
            was = moved
            for i in bits[mask]:
                ch = r * S + i
                b = buf[ch]
                if state[ch] != ACTIVE or not b:
                    continue
                bound = bound_at[ch]
                assert bound is not None
                if bound.sa_from > t:  # VC allocation not over: again next cycle
                    to_move[r] |= 1 << i
                    self.active_next.add(r)
                    continue
                ready = True
                for o, _, _, _ in bound.sends:
                    if credit[o] <= 0:
                        ready = False
                        break
                if not ready:
                    continue
                front = b[0]
                fl = front[0]
                head, tail = fl[0], fl[1]
                front[1] -= 1
                if not front[1]:
                    b.popleft()
                moved += 1
                bound.since = t
                bound.moved += 1
                if up[ch] >= 0:
                    credits_back.append(up[ch])
                    held[r] -= 1
                if not (head or tail):
                    for o, into, body, _ in bound.sends:
                        credit[o] -= 1
                        arriving.append((into, body))
                        # (a link's flits are counted when the worm goes; its first use below)
                    if b:  # more to move (an empty buffer waits for an arrival, which marks it)
                        to_move[r] |= 1 << i
                    continue
                n = self.nodes[r]
                mc, alg = fl[2], fl[4]
                for o, into, body, link in bound.sends:
                    credit[o] -= 1
                    arriving.append((into, (head, tail, *body[2:])))
                    if not used[link]:
                        used[link] = True
                        self.first_used.append(link)
                    if tail:
                        sent[link] += bound.moved
                    if head:
                        raw.traffic[mc] = raw.traffic.get(mc, 0) + 1
                        raw.links.setdefault(mc, set()).add((n, PORTS[link - r * P]))
                if not tail:
                    if b:  # more to move (an empty buffer waits for an arrival, which marks it)
                        to_move[r] |= 1 << i
                    continue
                for o, _, _, _ in bound.sends:
                    self.owner[o] = -2 if self.wtc else -1  # -2: until the tail's credit is back
                if bound.ej >= 0:
                    self.ej_owner[r * E + bound.ej] = -1
                if bound.deliver:
                    raw.arrivals.append(Arrival(mc, n, t + self.eject, bound.hops, bound.st))
                for port, h, st_k in bound.later:
                    self.queue_msg(r, mc, alg, port, h, bound.hops + 1, st_k, t + self.eject)
                del route_of[ch]
                bound_at[ch] = None
                if b:  # the next worm's head is right behind the tail
                    state[ch] = ROUTING
                    self.since[ch] = t + 1
                    self.to_route[r] |= 1 << i
                    self.routing.add(r)
                else:
                    state[ch] = IDLE
                self.to_allocate.add(r)
                if up[ch] < 0:
                    self.at(t + 1, r)  # an injection channel is free for its next start-up
            if moved > was:
                self.active_next.add(r)
        self.buffered -= moved
        return moved

    def verdict(self, t: int) -> str | None:
        """The deadlock verdict at the end of this cycle (docs/wormhole.md "Deadlock"): None, or the
        ``incomplete`` line naming the worms bound to the input channels on its cycles. ``t``: this cycle, or
        a later one in a network that has stopped (the tables stand still). A worm bound to an input channel
        is still when it was not bound, granted a channel or moved a flit for more than ``self.still`` cycles
        (:data:`_STILL` plus the router timing's ``settle``); it waits for: the channels holding every VC it
        may take of an output (or every ejection channel) it still needs, the input across an output VC it
        holds without a credit, the input holding the output that feeds its empty buffer. The deadlocked ones:
        the largest set of still ones each waiting for some of these inside it.
        """
        route_of = self.route_of
        # From the worms that became still now (every new cycle has one: without one the still
        # worms and their waits would be last cycle's, and last cycle found no deadlock), the
        # still worms their waits reach.
        still = self.still
        if t < self.next_still:  # no worm can have become still since the last scan
            return None
        todo: list[int] = []
        nxt = t + still + 2  # a worm changed after this cycle becomes still at this cycle or later
        for ch, rt in route_of.items():
            at = rt.since + still + 1  # the cycle it becomes still unless it changes first
            if at == t:
                todo.append(ch)
            elif t < at < nxt:
                nxt = at
        self.next_still = nxt
        if not todo:
            return None
        S, P, E, PV = self.S, self.P, self.E, self.PV
        state, owner, ej_owner, credit, across, up, buf = (
            self.state, self.owner, self.ej_owner, self.credit, self.across, self.up, self.buf,
        )  # fmt: skip
        seen = set(todo)
        waits: dict[int, list[tuple[int, ...]]] = {}
        while todo:
            ch = todo.pop()
            rt = route_of[ch]
            r = ch // S
            rs: list[tuple[int, ...]] = []
            if state[ch] == VC_ALLOC:
                for p in rt.outs:
                    if p in rt.held:
                        continue
                    alts = [r * P + PORTS.index(p)] if rt.may is None else rt.may[p]
                    if all(owner[o] != -1 for o in alts):  # -2, draining: the input across holds it
                        rs.append(tuple(r * S + owner[o] if owner[o] >= 0 else across[o] for o in alts))
                ejs = ej_owner[r * E : r * E + E]
                if rt.absorb and rt.ej < 0 and all(w >= 0 for w in ejs):
                    rs.append(tuple(r * S + w for w in ejs))
            for o in rt.held.values():
                if credit[o] <= 0:
                    rs.append((across[o],))
            feed = up[ch]
            if feed >= 0 and not buf[ch] and owner[feed] >= 0:
                rs.append(((feed // PV) * S + owner[feed],))
            if not rs:
                continue
            waits[ch] = rs
            for w in rs:
                for x in w:
                    if x not in seen:
                        seen.add(x)
                        other = route_of.get(x)
                        if other is not None and t - other.since > still:
                            todo.append(x)
        # the largest set in which each has a wait inside it: drop, and drop what then has none
        missing: dict[tuple[int, int], int] = {}  # (channel, its wait's index) -> members outside
        alive: dict[int, int] = {}  # channel -> its waits with no member outside
        users: dict[int, list[tuple[int, int]]] = {}  # channel -> the waits it is a member of
        for ch, all_w in waits.items():
            alive[ch] = 0
            for j, w in enumerate(all_w):
                out = sum(1 for x in w if x not in waits)
                missing[(ch, j)] = out
                alive[ch] += not out
                for x in w:
                    users.setdefault(x, []).append((ch, j))
        gone = [ch for ch, n in alive.items() if not n]
        stuck = set(waits).difference(gone)
        while gone:
            for ch, j in users.get(gone.pop(), ()):
                missing[(ch, j)] += 1
                if missing[(ch, j)] == 1 and ch in stuck:
                    alive[ch] -= 1
                    if not alive[ch]:
                        stuck.discard(ch)
                        gone.append(ch)
        if not stuck:
            return None
        after = {ch: {x for w in waits[ch] if stuck.issuperset(w) for x in w} for ch in stuck}
        cycle = []
        for ch in stuck:  # on a cycle: it reaches itself
            reach: set[int] = set()
            todo = [ch]
            while todo:
                for x in after[todo.pop()]:
                    if x not in reach:
                        reach.add(x)
                        todo.append(x)
            if ch in reach:
                cycle.append(ch)
        nodes, order, V = self.nodes, self.order, self.V
        cycle.sort(key=lambda ch: (nodes[ch // S], order[ch // S][ch % S]))
        parts = []
        for ch in cycle:
            r, i = divmod(ch, S)
            rt = route_of[ch]
            held = [_vc_name(p, o % V) for p, o in rt.held.items()]
            held += [self.ejs[rt.ej]] if rt.ej >= 0 else []
            wants = [p for p in rt.outs if p not in rt.held] + (["ej"] if rt.absorb and rt.ej < 0 else [])
            n = nodes[r]
            parts.append(
                f"worm {list(rt.worm)} at ({n[0]},{n[1]}) in {order[r][i]} holds {sorted(held)} "
                f"and waits for {sorted(wants)}"
            )
        worms = {route_of[ch].worm for ch in cycle}
        head = f"deadlock at cycle {t}: {len(worms)} worms wait for each other in a cycle: "
        return head + "; ".join(parts)

    def deadlock(self, named: bool) -> None:
        """Name every worm still holding channels (the run stalled); ``named``: the verdict already
        said deadlock, else the stall is the verdict."""
        raw, nodes, order, S, V = self.raw, self.nodes, self.order, self.S, self.V
        if not named:
            raw.incomplete.append(
                f"deadlock at cycle {self.t}: {len(self.route_of)} worms hold channels and none moves"
            )
        for ch in sorted(self.route_of, key=lambda ch: (nodes[ch // S], order[ch // S][ch % S])):
            r, i = divmod(ch, S)
            rt = self.route_of[ch]
            held = [_vc_name(p, o % V) for p, o in rt.held.items()]
            held += [self.ejs[rt.ej]] if rt.ej >= 0 else []
            raw.errors.append(
                {
                    "node": list(nodes[r]),
                    "kind": "deadlock",
                    "cause": f"worm {list(rt.worm)} in {order[r][i]} holds {sorted(held)}",
                    "mc": rt.mc,
                }
            )


def run_wormhole_model(plan: Plan, settings: NodeSettings) -> RawRun:
    """Run ``plan`` flit by flit on the whole network at once; arrivals as the lockstep nodes record them.

    ``vcs`` virtual channels per link (each with ``buffer_flits`` slots and its own credits):
    an output VC is granted round-robin per port (after the input granted last there), the
    lowest free one of the worm's class (``vc_classes="split"``: unicast the lower half) and,
    on a torus, of its dateline half (``--dateline wrap``: upper from a ring's wrap link on, while
    going straight; ``ring``: upper for the whole ring when the worm will cross its wrap link);
    a link carries one flit per cycle, to the first ready input in the node's round-robin order
    after the first one that won in the last cycle with a winner (all its links or none).
    """
    topo = plan.topology
    flits, ts, buffer_flits = settings.flits, settings.ts, settings.buffer_flits
    hop_limit, max_steps = settings.hop_limit, settings.max_steps
    limit = hop_limit if hop_limit is not None else defaults.hop_limit(topo.size)
    prep = SEED004_PREP if settings.prep is None else dict.fromkeys(registry.names(), settings.prep)
    net = _Model(
        plan,
        settings.port_model,
        flits,
        ts,
        buffer_flits,
        prep,
        limit,
        settings.vcs,
        settings.vc_classes,
        settings.dateline,
        settings.router_timing(),
    )
    raw = net.raw
    by_step: dict[int, list[Multicast]] = {}
    for m in plan.multicasts:
        by_step.setdefault(m.step, []).append(m)
    last_inj = max(by_step, default=0)
    inj_steps = sorted(by_step)
    stalled = 0
    held, peak = net.held, net.peak
    verdict: str | None = None
    while True:
        t = net.t
        active = net.deliver()
        if verdict is None:  # after a deadlock the injections still to come are not made
            net.inject(by_step.get(t, []))
        starting = net.wake.pop(t, set())
        # the stages (node.switching.wormhole.STAGES), each over the nodes with work for it
        if starting:
            net.startup(sorted(starting))
        if net.routing:
            net.route()
        if net.to_allocate:
            net.vc_alloc()
        if net.routed:
            active |= net.routed
            net.routed = set()
        moved = net.traverse(net.sw_alloc(sorted(active | starting)))
        # peak_queue: a node's count rises only as flits arrive (every node they reached is in
        # ``active``), so its peak is at the end of such a cycle
        for r in active:
            if held[r] > peak[r]:
                peak[r] = held[r]
        net.ship()
        state = net.state
        timers = net.startup_end or net.flight or net.cflight or net.gate > t
        if moved or timers or any(state[ch] == IDLE for ch in net.queued):
            stalled = 0
        else:
            stalled += 1
        if verdict is None and net.route_of:
            verdict = net.verdict(t)
            if verdict is not None:
                raw.incomplete.append(verdict)
        busy = bool(
            net.route_of or net.arriving or net.buffered or net.queued or net.startup_end or net.flight
        )
        if (t >= last_inj or verdict is not None) and not busy:
            break
        if busy and stalled > 2:
            # the network has stopped; a worm granted a channel in the last cycles becomes still
            # later, and with it the verdict (the tables stand still: judged at those cycles, up
            # to the next injection's, which is made, as the engines runtime makes it, before
            # that cycle is judged)
            coming = None
            if verdict is None:
                k = bisect.bisect_right(inj_steps, t)
                coming = inj_steps[k] if k < len(inj_steps) else None
            last = t + net.still + 1 if coming is None else min(t + net.still + 1, coming - 1)
            for at in range(t + 1, last + 1):
                if verdict is None:
                    verdict = net.verdict(at)
                    if verdict is not None:
                        raw.incomplete.append(verdict)
            if verdict is not None or coming is None:
                net.deadlock(verdict is not None)
                break
        if t >= max_steps:
            raw.incomplete.append(f"step budget of {max_steps} cycles ran out")
            break
        net.t += 1
    P, nodes = net.P, net.nodes
    for rt in net.route_of.values():  # the flits of the worms still bound (a run cut short) count too
        for _, _, _, link in rt.sends:
            net.sent[link] += rt.moved
    raw.link_sends = {(nodes[o // P], PORTS[o % P]): net.sent[o] for o in net.first_used}
    raw.last_step = net.t
    raw.peak_queue = dict(zip(nodes, peak, strict=True))
    return raw
