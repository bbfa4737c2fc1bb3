"""The centralised cycle-level reference model of flit-level wormhole switching.

It implements the conventions of ``docs/wormhole.md`` (and ``node/wormhole.py``'s docstring) as
one loop over cycles with network-wide tables — channel owners, buffers, credits — and shares no
code with the node engine: only the routing rules and the topology. Headers go through msgpack
at every hop, as on the wire. Agreement of its arrival records with the engines' lockstep
network (``tests/test_wormhole.py``) is evidence, not an echo.

Only active nodes are visited, in sorted order, and at each only the channels an event touched:
start-ups when a wait or a ready step has come or an injection channel was freed, routing for an
input a head reached, arbitration after a route appeared or a tail freed channels, movement for
an input that got a flit, a credit or a grant (or moved a flit the cycle before). Everywhere
else the rules would do nothing, so the records equal those of visiting every node and channel
every cycle, and an idle node costs nothing. The tables are lists indexed by channel numbers:
input channel ``r * S + i`` is the i-th of node r's round-robin order, output ``r * 4 + j`` its
port ``PORTS[j]`` (r: the node's rank in sorted order). An input buffer is a queue of runs
``[flit, count]``: a start-up puts a worm in as three runs (head, L − 2 body flits, tail), and
the body flits one hop sends are one tuple, so those arriving behind each other add to one count.

With ``vcs`` V > 1 an output number is a VC of a link (``o // V`` the link, ``o % V`` the VC)
and input channel ``r * S + i`` is the i-th of node r's order: each link's V VCs, then the
injection channels; VC allocation, the dateline, classes and the switch allocator follow
``docs/wormhole.md`` "Virtual channels" (written here without the engine's code).

A run that stalls — worms in flight, no flit moved and no start-up or preparation counting
down for more than two cycles — ends as deadlocked: ``RawRun.incomplete`` says so and
``RawRun.errors`` holds one ``deadlock`` entry per worm naming the channels it holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from coordinator.runtimes.records import Arrival, RawRun
from coordinator.workloads.plan import Plan
from node import defaults
from node.routing import UnknownAlgorithm, registry
from node.routing.base import HeaderError
from node.topology import PORTS, Coord

__all__ = ["SEED004_PREP", "run_wormhole_model"]

SEED004_PREP: Mapping[str, int] = defaults.PREP

# a flit: (is_head, is_tail, mc, worm, alg, header, hops, startups); worm = (x, y, n)
Fl = tuple[bool, bool, int, tuple[int, int, int], str, Any, int, int]
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


class _Bits(dict[int, tuple[int, ...]]):
    """A mask's channels in order, computed once per mask (too many channels for a full table)."""

    def __missing__(self, m: int) -> tuple[int, ...]:
        got = self[m] = tuple(i for i in range(m.bit_length()) if m >> i & 1)
        return got


def _vc_name(port: str, v: int) -> str:
    return port if v == 0 else f"{port}.{v}"


def _wire(obj: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(obj, use_bin_type=True), raw=False)


def run_wormhole_model(
    plan: Plan,
    *,
    port_model: str = "all-port",
    flits: int = defaults.FLITS,
    ts: int = defaults.TS,
    buffer_flits: int = defaults.BUFFER_FLITS,
    prep: Mapping[str, int] | None = None,
    hop_limit: int | None = None,
    max_steps: int = 100_000,
    vcs: int = defaults.VCS,
    vc_classes: str = defaults.VC_CLASSES,
) -> RawRun:
    """Run ``plan`` flit by flit on the whole network at once; arrivals as the lockstep nodes record them.

    ``vcs`` virtual channels per link (each with ``buffer_flits`` slots and its own credits):
    an output VC is granted round-robin per port (after the input granted last there), the
    lowest free one of the worm's class (``vc_classes="split"``: unicast the lower half) and,
    on a torus, of its dateline half (upper from a ring's wrap link on, while going straight);
    a link carries one flit per cycle, to the first ready input in the node's round-robin order
    after the first one that won in the last cycle with a winner (all its links or none).
    """
    topo = plan.topology
    prep = SEED004_PREP if prep is None else prep
    one = port_model == "one-port"
    limit = hop_limit if hop_limit is not None else defaults.hop_limit(topo.size)
    raw = RawRun()
    nodes = sorted(topo.nodes())
    rank = {n: r for r, n in enumerate(nodes)}
    links = [[p for p in PORTS if topo.neighbour(n, p) is not None] for n in nodes]
    injs = ["inj"] if one else ["inj" + p for p in PORTS]
    ejs = ["ej"] if one else ["ej0", "ej1", "ej2", "ej3"]
    V = vcs
    # the round-robin order of input channels: each link's VCs ("+x", "+x.1", ...), then injection
    order = [[_vc_name(p, v) for p in links[r] for v in range(V)] + injs for r in range(len(nodes))]
    in_port = [[p for p in links[r] for _ in range(V)] for r in range(len(nodes))]  # network input -> port
    S, P, E = len(PORTS) * V + len(injs), len(PORTS), len(ejs)  # channel numbers per node
    PV = P * V  # output VCs per node
    inj_chs = [[r * S + i for i in range(len(links[r]) * V, len(order[r]))] for r in range(len(nodes))]
    # output VC o = (r * P + j) * V + v: node r's port PORTS[j], VC v; o // V is the link
    across = [-1] * (len(nodes) * P * V)  # output VC -> the input channel it feeds
    up = [-1] * (len(nodes) * S)  # network input channel -> the output VC feeding it (credits)
    for r, n in enumerate(nodes):
        for p in links[r]:
            nb = topo.neighbour(n, p)
            assert nb is not None
            first = rank[nb] * S + order[rank[nb]].index(topo.opposite(p))
            for v in range(V):
                across[(r * P + PORTS.index(p)) * V + v] = first + v
                up[first + v] = (r * P + PORTS.index(p)) * V + v
    bits: list[tuple[int, ...]] | _Bits = (  # a mask's channels, in order
        [tuple(i for i in range(S) if m >> i & 1) for m in range(1 << S)] if S <= 12 else _Bits()
    )

    def wrap_link(n: Coord, p: str) -> bool:
        """The link leaving ``n`` on ``p`` closes a torus ring (from the last column or row to the first)."""
        if not topo.is_torus:
            return False
        return {"+x": n[0] == topo.cols - 1, "-x": n[0] == 0, "+y": n[1] == topo.rows - 1, "-y": n[1] == 0}[p]

    def may_take(r: int, i: int, alg: str, p: str) -> list[int]:
        """The output VCs on ``p`` a head of ``alg`` in input ``i`` of node ``r`` may take, lowest first."""
        base = (r * P + PORTS.index(p)) * V
        if V == 1:
            return [base]
        a, b = 0, V
        if vc_classes == "split":
            a, b = (0, V // 2) if alg == "unicast" else (V // 2, V)
        if topo.is_torus:
            half = a + (b - a) // 2
            after = wrap_link(nodes[r], p)
            if i < len(links[r]) * V:  # came over a link: past the dateline if it goes straight on
                came_on, v_in = in_port[r][i], i % V
                after = after or (topo.opposite(came_on) == p and v_in >= half)
            a, b = (half, b) if after else (a, half)
        return [base + v for v in range(a, b)]

    buf: list[deque[Run]] = [deque() for _ in range(len(nodes) * S)]
    node_of = [ch // S for ch in range(len(nodes) * S)]  # input channel -> its node
    bit_of = [1 << (ch % S) for ch in range(len(nodes) * S)]  # ... and its bit in the node's masks
    route: dict[int, _Route] = {}  # input channel -> the worm bound to it
    owner = [-1] * (len(nodes) * P * V)  # output VC -> position of the input channel holding it
    ej_owner = [-1] * (len(nodes) * E)
    last = [-1] * (len(nodes) * P)  # round-robin pointer per link (VC allocation) ...
    last_ej = [-1] * len(nodes)  # ... and per node's ejection channels
    last_sw = [-1] * len(nodes)  # switch allocation (VCs > 1): the first winner of the last cycle with one
    credit = [buffer_flits] * (len(nodes) * P * V)
    waiting: dict[int, deque[Msg]] = {ch: deque() for chs in inj_chs for ch in chs}
    queued: set[int] = set()  # injection channels with waiting messages
    startup_end: dict[int, tuple[int, Msg]] = {}
    counter = [0] * len(nodes)
    buffered = 0  # flits in all input buffers
    sent = [0] * (len(nodes) * P)  # flits per link (RawRun.link_sends, in order of first use)
    first_used: list[int] = []
    arriving: list[tuple[int, Fl]] = []
    credits_back: list[int] = []
    # the work ahead, kept by the events that can make a rule act
    wake: dict[int, set[int]] = {}  # cycle -> nodes whose start-ups may act then
    to_route = [0] * len(nodes)  # per node, a mask of inputs whose front may be an unbound head
    to_move = [0] * len(nodes)  # per node, a mask of inputs that may move a flit
    to_arbitrate = [False] * len(nodes)  # a route appeared or a channel was freed
    active_next: set[int] = set()  # nodes with work marked for the next cycle
    by_step: dict[int, list[Any]] = {}
    for m in plan.multicasts:
        by_step.setdefault(m.step, []).append(m)
    last_inj = max(by_step, default=0)
    t = 0

    def err(node: Coord, kind: str, cause: str, mc: int) -> None:
        raw.errors.append({"node": list(node), "kind": kind, "cause": cause, "mc": mc})

    def at(step: int, r: int) -> None:
        wake.setdefault(max(step, t), set()).add(r)

    def queue_msg(r: int, mc: int, alg: str, port: str, header: Any, hops: int, st: int, ready: int) -> None:
        if port not in links[r]:
            err(nodes[r], "bad-send", port, mc)
            return
        ch = r * S + order[r].index("inj" if one else "inj" + port)
        waiting[ch].append([mc, alg, port, _wire(header), hops, st, ready])
        queued.add(ch)
        at(ready, r)

    def bind(ch: int, rt: _Route) -> None:
        """Bind ``rt`` to input ``ch`` with the VCs it may take per output; it may move once it holds them."""
        r, i = divmod(ch, S)
        if V > 1:
            rt.may = {p: may_take(r, i, rt.alg, p) for p in rt.outs}
        rt.granted = not rt.outs  # a worm with nowhere to go (a failed route) drains at once
        route[ch] = rt
        to_arbitrate[r] = True
        to_move[r] |= 1 << i

    def switch(r: int, mask: int) -> int:
        """Switch allocation at node ``r``: of the inputs in ``mask``, those that move (one flit per link).

        Inputs that could move but lose a link stay marked for the next cycle.
        """
        ins_n = len(order[r])
        taken: set[str] = set()
        won = 0
        first = -1
        for j in range(1, ins_n + 1):
            i = (last_sw[r] + j) % ins_n
            if not mask >> i & 1:
                continue
            rt = route.get(r * S + i)
            b = buf[r * S + i]
            if rt is None or not b or (rt.absorb and rt.ej < 0) or b[0][0][3] != rt.worm:
                continue
            if not rt.granted or not all(credit[o] > 0 for o, _, _, _ in rt.sends):
                continue
            if taken.intersection(rt.outs):
                to_move[r] |= 1 << i  # ready, but a link is taken this cycle: try again next cycle
                continue
            taken.update(rt.outs)
            won |= 1 << i
            if first < 0:
                first = i
        if first >= 0:
            last_sw[r] = first
        return won

    stalled = 0
    while True:
        active, active_next = active_next, set()
        for o in credits_back:
            if credit[o] < buffer_flits:
                credit[o] += 1
            if owner[o] >= 0:
                r = o // PV
                to_move[r] |= 1 << owner[o]
                active.add(r)
        for ch, fl in arriving:
            b = buf[ch]
            if b and b[-1][0] is fl:  # the next body flit of the worm the run holds
                b[-1][1] += 1
            else:
                b.append([fl, 1])
            r = node_of[ch]
            if ch in route:
                to_move[r] |= bit_of[ch]
            else:
                to_route[r] |= bit_of[ch]
            active.add(r)
        buffered += len(arriving)
        arriving, credits_back = [], []
        for m in by_step.get(t, ()):
            try:
                sends = registry.get(m.algorithm).prepare(topo, m.source, list(m.destinations), m.params)
            except (UnknownAlgorithm, ValueError, TypeError, KeyError, IndexError) as exc:
                err(m.source, "bad-injection", str(exc), m.id)
                continue
            for port, header in sends:
                queue_msg(rank[m.source], m.id, m.algorithm, port, header, 1, 1, t + prep.get(m.algorithm, 0))
        starting = wake.pop(t, set())
        moved = 0
        for r in sorted(active | starting):
            n, ins = nodes[r], order[r]
            # start-ups: a free injection channel takes its next ready message; Ts later it is in
            for ch in inj_chs[r] if r in starting else ():
                w = waiting[ch]
                if ch not in startup_end and not buf[ch] and ch not in route and w and w[0][6] <= t:
                    startup_end[ch] = (t + ts, w.popleft())
                    if not w:
                        queued.discard(ch)
                    if ts > 0:
                        at(t + ts, r)
                if ch in startup_end and startup_end[ch][0] <= t:
                    mc, alg, port, header, hops, st, _ = startup_end.pop(ch)[1]
                    worm = (n[0], n[1], counter[r])
                    counter[r] += 1
                    buf[ch].append([(True, flits == 1, mc, worm, alg, header, hops, st), 1])
                    if flits > 2:
                        buf[ch].append([(False, False, mc, worm, alg, header, hops, st), flits - 2])
                    if flits > 1:
                        buf[ch].append([(False, True, mc, worm, alg, header, hops, st), 1])
                    buffered += flits
                    bind(ch, _Route(worm, mc, alg, hops, st, {port: (header, hops, st)}))
            # routing: once per head at the front of an unbound input
            mask, to_route[r] = to_route[r], 0
            for i in bits[mask]:
                ch = r * S + i
                if ch in route or not buf[ch] or not buf[ch][0][0][0]:
                    continue
                _, _, mc, worm, alg, header, hops, st = buf[ch][0][0]
                rt = _Route(worm, mc, alg, hops, st)
                if hops > limit:
                    err(n, "hop-limit", "", mc)
                    bind(ch, rt)
                    continue
                try:
                    fwd = registry.get(alg).forward(topo, n, header)
                except (
                    UnknownAlgorithm,
                    HeaderError,
                    ValueError,
                    TypeError,
                    KeyError,
                    IndexError,
                    AttributeError,
                ) as exc:
                    err(n, "bad-header", str(exc), mc)
                    bind(ch, rt)
                    continue
                n_cont = fwd.carried if fwd.startup else len(fwd.sends)
                for k, (port, h) in enumerate(fwd.sends):
                    st_k = st + (1 if fwd.startup and k >= fwd.carried else 0)
                    if port not in links[r]:
                        err(n, "bad-send", port, mc)
                    elif k >= n_cont:
                        rt.later.append((port, h, st_k))
                    elif port in rt.outs:
                        err(n, "bad-send", port, mc)
                    else:
                        rt.outs[port] = (_wire(h), hops + 1, st_k)
                rt.deliver = fwd.deliver
                rt.absorb = fwd.deliver or bool(rt.later)
                bind(ch, rt)
            # arbitration: each free output to the next requester after its last winner (where
            # no route appeared and no channel was freed since the last time, nothing changes)
            if to_arbitrate[r]:
                to_arbitrate[r] = False
                for p in links[r]:
                    link = r * P + PORTS.index(p)
                    if V == 1:
                        free = 1 if owner[link] < 0 else 0
                    else:
                        free = sum(1 for o in range(link * V, link * V + V) if owner[o] < 0)
                    after = last[link]
                    for j in range(1, len(ins) + 1):
                        if not free:
                            break
                        i = (after + j) % len(ins)
                        cand = route.get(r * S + i)
                        if cand is None or p not in cand.outs or p in cand.held:
                            continue
                        o = link if cand.may is None else next((o for o in cand.may[p] if owner[o] < 0), -1)
                        if o < 0:
                            continue
                        owner[o] = i
                        last[link] = i
                        free -= 1
                        cand.held[p] = o
                        if len(cand.held) == len(cand.outs):  # its flits' copies, once per worm
                            for q, (h, hops_o, st_o) in cand.outs.items():
                                oq = cand.held[q]
                                body = (False, False, cand.mc, cand.worm, cand.alg, h, hops_o, st_o)
                                cand.sends.append((oq, across[oq], body, oq // V))
                            cand.granted = True
                        to_move[r] |= 1 << i
                for e in range(r * E, r * E + E):
                    if ej_owner[e] >= 0:
                        continue
                    for j in range(1, len(ins) + 1):
                        i = (last_ej[r] + j) % len(ins)
                        cand = route.get(r * S + i)
                        if cand is not None and cand.absorb and cand.ej < 0:
                            ej_owner[e] = last_ej[r] = i
                            cand.ej = e - r * E
                            to_move[r] |= 1 << i
                            break
            # flit movement: an input moves its front flit iff it holds every output it needs,
            # each with a credit, and its ejection channel if it needs one
            mask, to_move[r] = to_move[r], 0
            if V > 1 and mask:
                mask = switch(r, mask)
            for i in bits[mask]:
                ch = r * S + i
                b = buf[ch]
                bound = route.get(ch)
                if bound is None or not b or (bound.absorb and bound.ej < 0):
                    continue
                if not bound.granted:
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
                buffered -= 1
                moved += 1
                active_next.add(r)
                if up[ch] >= 0:
                    credits_back.append(up[ch])
                if not (head or tail):
                    for o, into, body, link in bound.sends:
                        credit[o] -= 1
                        arriving.append((into, body))
                        sent[link] += 1
                        # (a link's first flit is a head: its first use is counted below)
                    if b:  # more to move (an empty buffer waits for an arrival, which marks it)
                        to_move[r] |= 1 << i
                    continue
                mc, alg = fl[2], fl[4]
                for o, into, body, link in bound.sends:
                    credit[o] -= 1
                    arriving.append((into, (head, tail, *body[2:])))
                    if not sent[link]:
                        first_used.append(link)
                    sent[link] += 1
                    if head:
                        raw.traffic[mc] = raw.traffic.get(mc, 0) + 1
                        raw.links.setdefault(mc, set()).add((n, PORTS[link - r * P]))
                if not tail:
                    if b:  # more to move (an empty buffer waits for an arrival, which marks it)
                        to_move[r] |= 1 << i
                    continue
                for o, _, _, _ in bound.sends:
                    owner[o] = -1
                if bound.ej >= 0:
                    ej_owner[r * E + bound.ej] = -1
                if bound.deliver:
                    raw.arrivals.append(Arrival(mc, n, t + 1, bound.hops, bound.st))
                for port, h, st_k in bound.later:
                    queue_msg(r, mc, alg, port, h, bound.hops + 1, st_k, t + 1)
                del route[ch]
                to_route[r] |= 1 << i  # the next worm's head may be right behind the tail
                to_arbitrate[r] = True
                if up[ch] < 0:
                    at(t + 1, r)  # an injection channel is free for its next start-up
        if moved or startup_end or any(not buf[ch] and ch not in route for ch in queued):
            stalled = 0
        else:
            stalled += 1
        busy = bool(route or arriving or buffered or queued or startup_end)
        if t >= last_inj and not busy:
            break
        if busy and stalled > 2:
            raw.incomplete.append(f"deadlock at cycle {t}: {len(route)} worms hold channels and none moves")
            for ch in sorted(route, key=lambda ch: (nodes[ch // S], order[ch // S][ch % S])):
                r, i = divmod(ch, S)
                rt = route[ch]
                held = [_vc_name(p, o % V) for p, o in rt.held.items()]
                held += [ejs[rt.ej]] if rt.ej >= 0 else []
                raw.errors.append(
                    {
                        "node": list(nodes[r]),
                        "kind": "deadlock",
                        "cause": f"worm {list(rt.worm)} in {order[r][i]} holds {sorted(held)}",
                        "mc": rt.mc,
                    }
                )
            break
        if t >= max_steps:
            raw.incomplete.append(f"step budget of {max_steps} cycles ran out")
            break
        t += 1
    raw.link_sends = {(nodes[o // P], PORTS[o % P]): sent[o] for o in first_used}
    raw.last_step = t
    return raw
