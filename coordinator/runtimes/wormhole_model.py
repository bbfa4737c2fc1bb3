"""The centralised cycle-level reference model of flit-level wormhole switching.

It implements the conventions of ``docs/wormhole.md`` (and ``node/wormhole.py``'s docstring) as
one loop over cycles with network-wide tables — channel owners, buffers, credits keyed by
(node, channel) — and shares no code with the node engine: only the routing rules and the
topology. Headers go through msgpack at every hop, as on the wire. Agreement of its arrival
records with the engines' lockstep network (``tests/test_wormhole.py``) is evidence, not an echo.

A run that stalls — worms in flight, no flit moved and no start-up or preparation counting
down for more than two cycles — ends as deadlocked: ``RawRun.incomplete`` says so and
``RawRun.errors`` holds one ``deadlock`` entry per worm naming the channels it holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import msgpack

from coordinator.runtimes.records import Arrival, RawRun
from coordinator.workloads.plan import Plan
from node.routing import UnknownAlgorithm, registry
from node.routing.base import HeaderError
from node.topology import PORTS, Coord

__all__ = ["SEED004_PREP", "run_wormhole_model"]

SEED004_PREP: Mapping[str, int] = {"dp": 2, "mp": 2, "cp": 4, "qg": 16}

# a flit: (is_head, is_tail, mc, worm, alg, header, hops, startups); worm = (x, y, n)
Fl = tuple[bool, bool, int, tuple[int, int, int], str, Any, int, int]
Key = tuple[Coord, str]  # (node, channel)


def _wire(obj: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(obj, use_bin_type=True), raw=False)


def run_wormhole_model(
    plan: Plan,
    *,
    port_model: str = "all-port",
    flits: int = 64,
    ts: int = 33,
    buffer_flits: int = 2,
    prep: Mapping[str, int] | None = None,
    hop_limit: int | None = None,
    max_steps: int = 100_000,
) -> RawRun:
    """Run ``plan`` flit by flit on the whole network at once; arrivals as the lockstep nodes record them."""
    topo = plan.topology
    prep = SEED004_PREP if prep is None else prep
    one = port_model == "one-port"
    limit = hop_limit if hop_limit is not None else 4 * topo.size + 16
    raw = RawRun()
    nodes = sorted(topo.nodes())
    links = {n: [p for p in PORTS if topo.neighbour(n, p) is not None] for n in nodes}
    injs = ["inj"] if one else ["inj" + p for p in PORTS]
    ejs = ["ej"] if one else ["ej0", "ej1", "ej2", "ej3"]
    order = {n: links[n] + injs for n in nodes}  # the round-robin order of input channels

    buf: dict[Key, deque[Fl]] = {(n, c): deque() for n in nodes for c in order[n]}
    # route[(node, input)] =
    #   [worm, mc, outs {port: (header, hops, st)}, absorb, deliver, later, alg, hops, st, ej]
    route: dict[Key, list[Any]] = {}
    owner: dict[Key, str] = {}  # (node, output or ejection channel) -> input channel holding it
    last: dict[Key, int] = {}  # round-robin pointer per (node, output) and (node, "ej")
    credit: dict[Key, int] = {(n, p): buffer_flits for n in nodes for p in links[n]}
    waiting: dict[Key, deque[list[Any]]] = {(n, c): deque() for n in nodes for c in injs}  # messages
    startup_end: dict[Key, tuple[int, list[Any]]] = {}
    counter = dict.fromkeys(nodes, 0)
    arriving: list[tuple[Key, Fl]] = []
    credits_back: list[tuple[Key, int]] = []
    by_step: dict[int, list[Any]] = {}
    for m in plan.multicasts:
        by_step.setdefault(m.step, []).append(m)
    last_inj = max(by_step, default=0)

    def err(node: Coord, kind: str, cause: str, mc: int) -> None:
        raw.errors.append({"node": list(node), "kind": kind, "cause": cause, "mc": mc})

    def queue_msg(
        node: Coord, mc: int, alg: str, port: str, header: Any, hops: int, st: int, ready: int
    ) -> None:
        if port not in links[node]:
            err(node, "bad-send", port, mc)
            return
        waiting[(node, "inj" if one else "inj" + port)].append(
            [mc, alg, port, _wire(header), hops, st, ready]
        )

    t = 0
    stalled = 0
    while True:
        for key, back in credits_back:
            credit[key] = min(credit[key] + back, buffer_flits)
        for key, fl in arriving:
            buf[key].append(fl)
        arriving, credits_back = [], []
        for m in by_step.get(t, ()):
            try:
                sends = registry.get(m.algorithm).prepare(topo, m.source, list(m.destinations), m.params)
            except (UnknownAlgorithm, ValueError, TypeError, KeyError, IndexError) as exc:
                err(m.source, "bad-injection", str(exc), m.id)
                continue
            for port, header in sends:
                queue_msg(m.source, m.id, m.algorithm, port, header, 1, 1, t + prep.get(m.algorithm, 0))
        moved = 0
        for n in nodes:
            # start-ups: a free injection channel takes its next ready message; Ts later it is in
            for c in injs:
                k = (n, c)
                if (
                    k not in startup_end
                    and not buf[k]
                    and k not in route
                    and waiting[k]
                    and waiting[k][0][6] <= t
                ):
                    startup_end[k] = (t + ts, waiting[k].popleft())
                if k in startup_end and startup_end[k][0] <= t:
                    mc, alg, port, header, hops, st, _ = startup_end.pop(k)[1]
                    worm = (n[0], n[1], counter[n])
                    counter[n] += 1
                    for i in range(flits):
                        buf[k].append((i == 0, i == flits - 1, mc, worm, alg, header, hops, st))
                    route[k] = [worm, mc, {port: (header, hops, st)}, False, False, [], alg, hops, st, None]
            # routing: once per head at the front of an unbound input
            for c in order[n]:
                k = (n, c)
                if k in route or not buf[k] or not buf[k][0][0]:
                    continue
                _, _, mc, worm, alg, header, hops, st = buf[k][0]
                entry: list[Any] = [worm, mc, {}, False, False, [], alg, hops, st, None]
                route[k] = entry
                if hops > limit:
                    err(n, "hop-limit", "", mc)
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
                    continue
                n_cont = fwd.carried if fwd.startup else len(fwd.sends)
                for i, (port, h) in enumerate(fwd.sends):
                    st_i = st + (1 if fwd.startup and i >= fwd.carried else 0)
                    if port not in links[n]:
                        err(n, "bad-send", port, mc)
                    elif i >= n_cont:
                        entry[5].append((port, h, st_i))
                    elif port in entry[2]:
                        err(n, "bad-send", port, mc)
                    else:
                        entry[2][port] = (_wire(h), hops + 1, st_i)
                entry[4] = fwd.deliver
                entry[3] = fwd.deliver or bool(entry[5])
            # arbitration: each free output to the next requester after its last winner
            ins = order[n]
            for o in links[n]:
                if (n, o) in owner:
                    continue
                start = last.get((n, o), -1)
                for j in range(1, len(ins) + 1):
                    i = (start + j) % len(ins)
                    r = route.get((n, ins[i]))
                    if r is not None and o in r[2]:
                        owner[(n, o)] = ins[i]
                        last[(n, o)] = i
                        break
            for e in ejs:
                if (n, e) in owner:
                    continue
                start = last.get((n, "ej"), -1)
                for j in range(1, len(ins) + 1):
                    i = (start + j) % len(ins)
                    r = route.get((n, ins[i]))
                    if r is not None and r[3] and r[9] is None:
                        owner[(n, e)] = ins[i]
                        r[9] = e
                        last[(n, "ej")] = i
                        break
            # flit movement
            for c in ins:
                k = (n, c)
                r = route.get(k)
                if r is None or not buf[k]:
                    continue
                outs = r[2]
                if r[3] and r[9] is None:
                    continue
                if not all(owner.get((n, o)) == c and credit[(n, o)] > 0 for o in outs):
                    continue
                head, tail, mc, worm, alg, _, _, _ = buf[k].popleft()
                moved += 1
                if c in links[n]:
                    nb = topo.neighbour(n, c)
                    assert nb is not None
                    credits_back.append(((nb, topo.opposite(c)), 1))
                for o, (h, hops_o, st_o) in outs.items():
                    credit[(n, o)] -= 1
                    nb = topo.neighbour(n, o)
                    assert nb is not None
                    arriving.append(((nb, topo.opposite(o)), (head, tail, mc, worm, alg, h, hops_o, st_o)))
                    raw.link_sends[(n, o)] = raw.link_sends.get((n, o), 0) + 1
                    if head:
                        raw.traffic[mc] = raw.traffic.get(mc, 0) + 1
                        raw.links.setdefault(mc, set()).add((n, o))
                if tail:
                    for o in outs:
                        del owner[(n, o)]
                    if r[9] is not None:
                        del owner[(n, r[9])]
                    if r[4]:
                        raw.arrivals.append(Arrival(mc, n, t + 1, r[7], r[8]))
                    for port, h, st_i in r[5]:
                        queue_msg(n, mc, alg, port, h, r[7] + 1, st_i, t + 1)
                    del route[k]
        timers = bool(startup_end) or any(w and not buf[k] and k not in route for k, w in waiting.items())
        busy = bool(route) or bool(arriving) or any(buf.values()) or any(waiting.values()) or timers
        stalled = 0 if moved or timers else stalled + 1
        if t >= last_inj and not busy:
            break
        if busy and stalled > 2:
            raw.incomplete.append(f"deadlock at cycle {t}: {len(route)} worms hold channels and none moves")
            for (n, c), r in sorted(route.items()):
                held = sorted(o for (m, o), who in owner.items() if m == n and who == c)
                raw.errors.append(
                    {
                        "node": list(n),
                        "kind": "deadlock",
                        "cause": f"worm {list(r[0])} in {c} holds {held}",
                        "mc": r[1],
                    }
                )
            break
        if t >= max_steps:
            raw.incomplete.append(f"step budget of {max_steps} cycles ran out")
            break
        t += 1
    raw.last_step = t
    return raw
