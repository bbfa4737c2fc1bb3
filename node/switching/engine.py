"""The port discipline of one node, sans-IO: queues, one-port / all-port, isolated / shared.

The actor feeds it arrivals and asks it what to send at each step; it calls the routing rules
and keeps the node's records. Nothing here awaits, so the same engine runs under any runtime.

Step t at a node (lockstep):
1. packets sent to it at t-1 join its input buffer (canonical port order);
2. multicasts injected here at t run ``prepare`` and queue their sends;
3. it takes in packets from the input buffer — all under all-port, one per step under
   one-port — and runs ``forward`` on each (a delivery is recorded at step t);
4. it sends: one packet in total under one-port, one per output link under all-port.
Under ``isolated`` contention each multicast has its own buffers and port capacity; under
``shared`` all multicasts share them.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from node import defaults
from node.choices import Clock, Contention, Policy
from node.routing import Registry, UnknownAlgorithm
from node.routing.base import HEADER_ERRORS
from node.settings import NodeSettings
from node.topology import PORT_BITS, PORTS, Coord, Topology
from node.transport.wire import TEL_HEAD, TEL_SEND, Credits, Packet

__all__ = ["Arrival", "Delivery", "Engine", "Injection", "NodeError"]


@dataclass(slots=True, unsafe_hash=True)  # not frozen (4x faster __init__, paid per delivery); hashable
class Delivery:
    """A packet delivered at this node: multicast, logical step, hops, start-ups, wall clock, and
    under the free clock's telemetry the packet's path (:attr:`Packet.tel`) with this node's
    ``node id, receive ns`` after it (its delivery time is ``wall_ns``)."""

    mc: int
    step: int
    hops: int
    startups: int
    wall_ns: int
    tel: bytes | None

    def __init__(
        self, mc: int, step: int, hops: int, startups: int, wall_ns: int, tel: bytes | None = None
    ) -> None:
        # Written out, not generated: mypyc compiles this one (the dataclass's is interpreted).
        self.mc = mc
        self.step = step
        self.hops = hops
        self.startups = startups
        self.wall_ns = wall_ns
        self.tel = tel


@dataclass(frozen=True, slots=True)
class NodeError:
    """Something dropped at this node, with its kind and cause (reported, never raised)."""

    kind: str
    cause: str
    mc: int | None = None

    def __reduce__(self) -> tuple[type[NodeError], tuple[str, str, int | None]]:
        """Pickle by its fields: a compiled (mypyc) frozen class cannot be restored field by field."""
        return (NodeError, (self.kind, self.cause, self.mc))


_Queued = tuple[str, int, str, Any, int, int]
"""A send waiting for its output port: (port, mc, algorithm, header, hops, start-ups).

A plain tuple, not a dataclass: one is made for every packet-hop, and tuple building is the
cheapest allocation Python has.
"""


@dataclass(slots=True)
class _Domain:
    """Buffers of one contention domain (one multicast when isolated, all when shared)."""

    inbox: deque[tuple[str | None, Packet]]
    out: dict[str, deque[_Queued]]
    n_out: int
    """Sends waiting in ``out`` (kept up to date, so no step sums the queues)."""
    # free clock: next step at which the input / each output can be used
    in_free: int
    out_free: dict[str, int]

    def __init__(self) -> None:
        # Written out, not generated: mypyc compiles this one (one domain per multicast a node holds).
        self.inbox = deque()
        self.out = {}
        self.n_out = 0
        self.in_free = 0
        self.out_free = {}

    def queued(self) -> int:
        return len(self.inbox) + self.n_out

    def outgoing(self) -> int:
        return self.n_out


_NO_CREDITS: Mapping[str, int] = MappingProxyType({})
"""What :meth:`Engine.take_freed` returns when no packet was taken in (read-only: it is shared)."""

_SPARE: dict[int, list[_Domain]] = {}
"""Emptied domains for reuse, by thread: shared by the engines made in one thread (lockstep: a
multicast's domain comes and goes with its packets; a sparse run's node sees one packet or two,
and takes the domain an earlier node emptied instead of making one). By thread, because a test
and a pop of one list from two threads could meet. At most :data:`_SPARE_CAP` a thread."""
_SPARE_CAP = 4096


def _spare_pool() -> list[_Domain]:
    """This thread's pool of emptied domains."""
    return _SPARE.setdefault(threading.get_ident(), [])


Arrival = tuple[int, str, Any, int, int]
"""A packet for :meth:`Engine.take_each`: multicast, algorithm, header, hops, start-ups."""


def _by_multicast(arrival: Arrival) -> int:
    return arrival[0]


def _port_rank(send: tuple[str, list[Any]]) -> int:
    """A send's place in :data:`PORTS` (all-port: the order the output queues are visited)."""
    return PORT_BITS[send[0]]


_ONE_QUEUE: tuple[str] = ("*",)
"""The output queues' keys under one-port: all sends share one queue (all-port: :data:`PORTS`)."""


@dataclass(slots=True)
class Injection:
    mc: int
    alg: str
    destinations: list[Coord]
    params: Mapping[str, Any]
    step: int = 0


class Engine:
    """One node's buffers and port discipline; deterministic given its inputs."""

    # Slots: a node's attributes in one small block, not a dict of 40 (a sparse run touches each
    # node once or twice, from memory the cache no longer holds; a 64×64 run has 4,096 of them)
    __slots__ = (
        "_clock", "_credit", "_domains", "_forwards", "_held", "_node_id", "_port_set", "_ports",
        "_spare", "_tel", "copies", "delivered", "deliveries", "drop_when_full", "dropped", "errors",
        "freed", "here", "hop_limit", "in_capacity", "injected", "isolated", "link_sends", "link_trace",
        "links_used", "occupancy_sum", "one_port", "out_capacity", "peak_in", "peak_out", "peak_queue",
        "received", "registry", "sent", "steps", "telemetry", "topology", "trace", "traffic",
    )  # fmt: skip

    def __init__(
        self,
        topology: Topology,
        here: Coord,
        registry: Registry,
        settings: NodeSettings,
        *,
        clock_ns: Any = None,
    ) -> None:
        """The node ``here`` under ``settings`` (checked where they were made: the command line, the
        wire's decoder, :func:`node.switching.factory.check_switching`); they are read once, here."""
        self.topology = topology
        self.here = here
        self.registry = registry
        self.one_port = settings.one_port
        self.isolated = settings.contention == Contention.ISOLATED
        # Bounded buffers exist only where multicasts share them (shared contention): input /
        # output buffer capacity in packets (None: unbounded).
        self.in_capacity = None if self.isolated else settings.buffer
        self.out_capacity = None if self.isolated else settings.out_buffer
        self.drop_when_full = settings.policy == Policy.DROP
        hop_limit, trace = settings.hop_limit, settings.trace
        self.hop_limit = hop_limit if hop_limit is not None else defaults.hop_limit(topology.size)
        self.trace = trace
        self._clock = clock_ns
        self.telemetry = settings.telemetry and settings.clock == Clock.FREE
        """Free clock: stamp each packet with this node's receive and send times (``--telemetry``)."""
        self._node_id = here[0] * topology.rows + here[1]
        self._tel: bytes | None = None
        """While a free-clock packet is taken in: its path so far and this node's id and receive time."""
        self._ports = topology.ports(here)
        self._port_set = frozenset(self._ports)
        # each rule's forward function by name, looked up once a process (Registry.forwards)
        self._forwards: dict[str, Any] = registry.forwards
        # credit-based flow control: packets each downstream input buffer can still take
        self._credit: dict[str, int] | None = (
            {p: self.in_capacity for p in self._ports}
            if self.in_capacity is not None and not self.drop_when_full
            else None
        )
        self.freed: dict[str, int] = {}
        self._held: dict[str, int] = {}  # packets waiting in each input link's buffer
        self.link_sends: dict[str, int] = {}
        self.dropped = 0
        self.steps = 0
        self.occupancy_sum = 0
        self.peak_in = 0
        self.peak_out = 0
        self._domains: dict[int, _Domain] = {}
        self._spare = _spare_pool()
        self.deliveries: list[Delivery] = []
        self.delivered = 0
        """Deliveries over the whole run (the final report says it, so lost reports show)."""
        self.errors: list[NodeError] = []
        self.injected: dict[int, int] = {}
        self.traffic: dict[int, int] = {}
        self.links_used: dict[int, int] = {}
        """The ports each multicast left this node on, by multicast: a set of :data:`PORT_BITS`."""
        self.link_trace: list[tuple[int, str, int]] = []
        self.sent = 0
        self.received = 0
        self.peak_queue = 0
        self.copies = 0
        """Copies this node made: each output (send or delivery) beyond the first of a packet taken in."""

    # -- helpers -----------------------------------------------------------------------
    def _now(self) -> int:
        return int(self._clock()) if self._clock is not None else 0

    def _domain(self, mc: int) -> _Domain:
        key = mc if self.isolated else 0
        d = self._domains.get(key)
        if d is None:
            d = self._domains[key] = self._spare.pop() if self._spare else _Domain()
        return d

    def busy(self) -> bool:
        for d in self._domains.values():  # noqa: SIM110 (a loop, not any(): no generator per node-step)
            if d.inbox or d.n_out:
                return True
        return False

    def error(self, kind: str, cause: str, mc: int | None = None) -> None:
        self.errors.append(NodeError(kind, cause, mc))

    def _queue(self, dom: _Domain, items: list[_Queued]) -> None:
        """Put ``items`` in their output queues (one queue under one-port, one per port else)."""
        out = dom.out
        if self.one_port:  # one queue for every port: the items in order, at once
            q = out.get("*")
            if q is None:
                q = out["*"] = deque()
            q.extend(items)
        else:
            for item in items:
                key = item[0]
                q = out.get(key)
                if q is None:
                    q = out[key] = deque()
                q.append(item)
        dom.n_out += len(items)

    def _enqueue_sends(
        self,
        mc: int,
        alg: str,
        sends: list[tuple[str, Any]],
        hops: int,
        first: int,
        bumped: int,
        carried: int,
    ) -> list[_Queued]:
        """Items for ``sends``: the first ``carried`` carry ``first`` start-ups, the rest ``bumped``.

        Sends on a missing port are errors. (The start-up counts are :meth:`Forward.startups_of`'s,
        computed without building its list.)
        """
        items: list[_Queued] = []
        ports = self._port_set
        for i, (port, header) in enumerate(sends):
            if port not in ports:
                self.error("bad-send", f"rule {alg!r} sent on {port!r}, not a link of {self.here}", mc)
                continue
            items.append((port, mc, alg, header, hops, bumped if i >= carried else first))
        return items

    # -- inputs ------------------------------------------------------------------------
    def _prepare(self, inj: Injection) -> tuple[_Domain, list[_Queued]]:
        dom = self._domain(inj.mc)
        try:
            algorithm = self.registry.get(inj.alg)
            sends = algorithm.prepare(self.topology, self.here, inj.destinations, inj.params)
        except (UnknownAlgorithm, ValueError, TypeError, KeyError, IndexError) as exc:
            self.error("bad-injection", f"{type(exc).__name__}: {exc}", inj.mc)
            return dom, []
        self.injected[inj.mc] = self._now()
        if len(sends) > 1:
            self.copies += len(sends) - 1
        return dom, self._enqueue_sends(inj.mc, inj.alg, sends, 1, 1, 1, 0)

    def inject(self, inj: Injection) -> None:
        """Lockstep: start multicast ``inj`` here (the source) at this step."""
        dom, items = self._prepare(inj)
        self._queue(dom, items)

    def receive(self, packet: Packet, port: str | None = None) -> None:
        """A packet arrived on ``port`` (lockstep): it waits in the input buffer for the next step.

        With a bounded input buffer and the drop policy, a packet that finds it full is dropped
        and counted; with the blocking policy the sender's credits keep that from happening.
        """
        self.received += 1
        key = packet.mc if self.isolated else 0  # _domain, inline: once a packet-hop
        dom = self._domains.get(key)
        if dom is None:
            dom = self._domains[key] = self._spare.pop() if self._spare else _Domain()
        if self.in_capacity is not None and port is not None:
            if self._held.get(port, 0) >= self.in_capacity:
                self.dropped += 1
                self.error("buffer-full", f"input buffer of {port} full ({self.in_capacity})", packet.mc)
                return
            self._held[port] = self._held.get(port, 0) + 1
        dom.inbox.append((port, packet))

    def credit_back(self, port: str, n: Credits) -> None:
        """The neighbour across ``port`` took ``n`` of our packets out of its input buffer."""
        if not isinstance(n, int):  # per virtual channel: packets have none, so count them all
            n = sum(n)
        if self._credit is not None and port in self._credit:
            self._credit[port] = min(self._credit[port] + n, self.in_capacity or 0)

    def take_freed(self) -> Mapping[str, int]:
        """Per input port, the packets taken in since the last call (credits for upstream).

        Always empty without credit flow (unbounded or dropping input buffers, the same at every
        node): a frame that carried only such credits would wake its receiver for nothing. Then
        it is one shared empty mapping, not a new dict a node-step.
        """
        freed = self.freed
        if not freed:
            return _NO_CREDITS
        self.freed = {}
        return freed

    def _route(self, packet: Packet) -> Any:
        """The rule's :class:`Forward` for ``packet``, or the NodeError that drops it."""
        return self._forward(packet.mc, packet.alg, packet.header, packet.hops)

    def _forward(self, mc: int, alg: str, header: Any, hops: int) -> Any:
        """The rule's :class:`Forward` for a packet of these fields, or the NodeError that drops it."""
        if hops > self.hop_limit:
            return NodeError("hop-limit", f"packet exceeded the hop limit {self.hop_limit}", mc)
        try:
            forward = self._forwards.get(alg)
            if forward is None:
                forward = self._forwards[alg] = self.registry.get(alg).forward
            return forward(self.topology, self.here, header)
        except UnknownAlgorithm as exc:
            return NodeError("unknown-algorithm", str(exc), mc)
        except HEADER_ERRORS as exc:
            return NodeError("bad-header", f"{alg}: {type(exc).__name__}: {exc}", mc)

    def _take_in(self, packet: Packet, step: int, fwd: Any = None) -> list[_Queued]:
        """Run the rule on one packet taken in at ``step``; return the sends it produced."""
        if fwd is None:
            fwd = self._route(packet)
        if isinstance(fwd, NodeError):
            self.errors.append(fwd)
            return []
        if fwd.deliver:
            self.deliveries.append(
                Delivery(packet.mc, step, packet.hops, packet.startups, self._now(), self._tel)
            )
            self.delivered += 1
        if not fwd.sends:
            return []
        if len(fwd.sends) + fwd.deliver > 1:
            self.copies += len(fwd.sends) + fwd.deliver - 1
        st = packet.startups
        return self._enqueue_sends(
            packet.mc, packet.alg, fwd.sends, packet.hops + 1, st, st + 1 if fwd.startup else st, fwd.carried
        )

    def _emit(self, item: _Queued, step: int) -> tuple[str, Packet]:
        port, mc, alg, header, hops, startups = item
        self.sent += 1
        link_sends = self.link_sends
        link_sends[port] = link_sends.get(port, 0) + 1
        if self._credit is not None:
            self._credit[port] -= 1
        traffic = self.traffic
        traffic[mc] = traffic.get(mc, 0) + 1
        used = self.links_used
        used[mc] = used.get(mc, 0) | PORT_BITS[port]
        if self.trace:
            self.link_trace.append((mc, port, step))
        return port, Packet(mc, alg, header, hops, startups, step)

    # -- lockstep ----------------------------------------------------------------------
    def step(self, t: int) -> list[tuple[str, Packet]]:
        """Do step ``t`` (arrivals and injections already given); return what goes out now.

        Every packet-hop of a lockstep run passes here, so what :meth:`_take_in`,
        :meth:`_enqueue_sends`, :meth:`_queue` and :meth:`_emit` do (the free clock calls them)
        is written out inline: four calls a packet-hop, a fifth of the engine's own time.
        """
        out: list[tuple[str, Packet]] = []
        credit = self._credit
        one_port = self.one_port
        out_capacity = self.out_capacity
        domains = self._domains
        ports = self._port_set
        out_keys = _ONE_QUEUE if one_port else PORTS
        link_sends, traffic, used, trace = self.link_sends, self.traffic, self.links_used, self.trace
        sent = 0
        occ_in = occ_out = 0
        peak_queue = self.peak_queue
        for key in sorted(domains) if len(domains) > 1 else list(domains):
            dom = domains[key]
            inbox = dom.inbox
            # isolated contention: one domain per multicast here, most with nothing come in
            for _ in range(0 if not inbox else 1 if one_port else len(inbox)):
                if not inbox:
                    break
                port_in, packet = inbox[0]
                fwd = self._route(packet)
                failed = type(fwd) is NodeError
                if (
                    out_capacity is not None
                    and not failed
                    and dom.n_out
                    and dom.n_out + len(fwd.sends) > out_capacity
                ):
                    break  # FIFO: the head waits for room in the output buffer, and so do the rest
                inbox.popleft()
                if port_in is not None:
                    if credit is not None:  # no credit flow, no credits to return (nor frames for them)
                        self.freed[port_in] = self.freed.get(port_in, 0) + 1
                    if port_in in self._held:
                        self._held[port_in] -= 1
                if failed:
                    self.errors.append(fwd)
                    continue
                # _take_in, inline
                deliver = fwd.deliver
                if deliver:
                    self.deliveries.append(
                        Delivery(packet.mc, t, packet.hops, packet.startups, self._now(), self._tel)
                    )
                    self.delivered += 1
                sends = fwd.sends
                if not sends:
                    continue
                n = len(sends)
                if n + deliver > 1:
                    self.copies += n + deliver - 1
                mc, alg, hops, first = packet.mc, packet.alg, packet.hops + 1, packet.startups
                bumped = first + 1 if fwd.startup else first
                carried = fwd.carried
                # _enqueue_sends and _queue, inline
                q = dom.out.get("*") if one_port else None
                queued = 0
                for i, (port, header) in enumerate(sends):
                    if port not in ports:
                        self.error(
                            "bad-send", f"rule {alg!r} sent on {port!r}, not a link of {self.here}", mc
                        )
                        continue
                    item = (port, mc, alg, header, hops, bumped if i >= carried else first)
                    if not one_port:
                        q = dom.out.get(port)
                    if q is None:
                        q = dom.out["*" if one_port else port] = deque()
                    q.append(item)
                    queued += 1
                dom.n_out += queued
            n_in = len(inbox)
            n_out = dom.n_out
            if n_in + n_out > peak_queue:
                peak_queue = n_in + n_out
            if n_out:  # the sends: one queue under one-port, one per port else (_emit, inline)
                queues = dom.out
                for key_out in out_keys:
                    q = queues.get(key_out)
                    if q and (credit is None or credit[q[0][0]] > 0):
                        port, mc, alg, header, hops, startups = q.popleft()
                        n_out -= 1
                        sent += 1
                        link_sends[port] = link_sends.get(port, 0) + 1
                        if credit is not None:
                            credit[port] -= 1
                        traffic[mc] = traffic.get(mc, 0) + 1
                        used[mc] = used.get(mc, 0) | PORT_BITS[port]
                        if trace:
                            self.link_trace.append((mc, port, t))
                        out.append((port, Packet(mc, alg, header, hops, startups, t)))
                dom.n_out = n_out
            occ_in += n_in
            occ_out += n_out
            if not n_in and not n_out:
                del domains[key]
                if len(self._spare) < _SPARE_CAP:
                    self._spare.append(dom)  # empty, and nothing of the free clock in it (lockstep)
        self.peak_queue = peak_queue
        self.sent += sent
        self.steps += 1
        self.occupancy_sum += occ_in + occ_out
        if occ_in > self.peak_in:
            self.peak_in = occ_in
        if occ_out > self.peak_out:
            self.peak_out = occ_out
        return out

    @property
    def fusable(self) -> bool:
        """Whether :meth:`take_each` may stand for arrivals and a step now: the node holds nothing
        and no buffer is bounded (no credits to return, no input buffer to count)."""
        return not self._domains and self._credit is None and self.in_capacity is None

    def take_each(self, t: int, packets: list[Arrival]) -> list[tuple[str, list[Any]]]:
        """Step ``t`` of an idle node (:attr:`fusable` holds) whose arrivals are ``packets``: one,
        or one per multicast under isolated contention (each its own domain, none waiting for
        another). What :meth:`receive` of each then :meth:`step` do, with the sends as their wire
        lists (``Packet.to_wire``), not packets. Most packet-hops of a lockstep run in one process
        pass here; the tests hold it equal to the general step, state and sends."""
        self.received += len(packets)
        self.steps += 1
        if len(packets) > 1:  # the domains are visited in multicast order
            packets = sorted(packets, key=_by_multicast)
        ports = self._port_set
        one_port = self.one_port
        link_sends, traffic, used = self.link_sends, self.traffic, self.links_used
        out: list[tuple[str, list[Any]]] = []
        left = 0
        for mc, alg, header, hops, startups in packets:
            fwd = self._forward(mc, alg, header, hops)
            if type(fwd) is NodeError:
                self.errors.append(fwd)
                continue
            deliver = fwd.deliver
            if deliver:
                self.deliveries.append(Delivery(mc, t, hops, startups, self._now(), self._tel))
                self.delivered += 1
            sends = fwd.sends
            if not sends:
                continue
            n = len(sends)
            if n + deliver > 1:
                self.copies += n + deliver - 1
            hops += 1
            bumped = startups + 1 if fwd.startup else startups
            carried = fwd.carried
            if n == 1 and sends[0][0] in ports:  # one send: it leaves now (most hops)
                port, header = sends[0]
                if self.peak_queue < 1:
                    self.peak_queue = 1
                link_sends[port] = link_sends.get(port, 0) + 1
                used[mc] = used.get(mc, 0) | PORT_BITS[port]
                if self.trace:
                    self.link_trace.append((mc, port, t))
                traffic[mc] = traffic.get(mc, 0) + 1
                self.sent += 1
                out.append((port, [mc, alg, header, hops, startups if carried > 0 else bumped, t]))
                continue
            going: list[tuple[str, list[Any]]] = []
            rest: list[_Queued] = []
            taken: set[str] = set()  # all-port: the ports a send leaves on this step
            for i, (port, header) in enumerate(sends):
                if port not in ports:
                    self.error("bad-send", f"rule {alg!r} sent on {port!r}, not a link of {self.here}", mc)
                    continue
                st = bumped if i >= carried else startups
                if (going and one_port) or port in taken:
                    rest.append((port, mc, alg, header, hops, st))
                else:
                    taken.add(port)
                    going.append((port, [mc, alg, header, hops, st, t]))
            queued = len(going) + len(rest)
            if queued > self.peak_queue:
                self.peak_queue = queued
            if len(going) > 1:  # all-port: the sends leave in port order, as the queues are visited
                going.sort(key=_port_rank)
            for port, _ in going:
                link_sends[port] = link_sends.get(port, 0) + 1
                used[mc] = used.get(mc, 0) | PORT_BITS[port]
                if self.trace:
                    self.link_trace.append((mc, port, t))
            if going:
                traffic[mc] = traffic.get(mc, 0) + len(going)
                self.sent += len(going)
                out += going
            if rest:
                self._queue(self._domain(mc), rest)
                left += len(rest)
        if left:
            self.occupancy_sum += left
            if left > self.peak_out:
                self.peak_out = left
        return out

    # -- free clock --------------------------------------------------------------------
    def _schedule_free(self, dom: _Domain, items: Sequence[_Queued], ready: int) -> list[tuple[str, Packet]]:
        out = []
        out_free = dom.out_free
        tel = self._tel
        for it in items:
            key = "*" if self.one_port else it[0]
            t = max(ready, out_free.get(key, 0))
            out_free[key] = t + 1
            sent = self._emit(it, t)
            if tel is not None:  # each copy its own path: this node's send time closes its triple
                sent[1].tel = tel + TEL_SEND.pack(self._now())
            out.append(sent)
        return out

    def inject_free(self, inj: Injection) -> list[tuple[str, Packet]]:
        """Free clock: inject now; sends leave at once with their logical send steps."""
        dom, items = self._prepare(inj)
        if self.telemetry and inj.mc in self.injected:  # the path starts at the injection
            self._tel = TEL_HEAD.pack(self._node_id, self.injected[inj.mc])
        try:
            return self._schedule_free(dom, items, inj.step)
        finally:
            self._tel = None

    def take_free(
        self, mc: int, alg: str, header: Any, hops: int, startups: int, sent: int, tel: bytes | None, rx: int
    ) -> list[tuple[str, list[Any]]]:
        """Free clock: :meth:`receive_free` of the packet these fields make (``rx``: when it came
        off the link, telemetry), with its sends as their wire lists (``Packet.to_wire``), not
        packets: :meth:`_take_in`, :meth:`_schedule_free` and :meth:`_emit` written out, since
        every free-clock packet-hop passes here. The tests hold it equal to receive_free."""
        if self.telemetry:
            self._tel = (tel or b"") + TEL_HEAD.pack(self._node_id, rx or self._now())
        self.received += 1
        dom = self._domain(mc)
        t = sent + 1
        if self.one_port and dom.in_free > t:
            t = dom.in_free
        dom.in_free = t + 1
        try:
            fwd = self._forward(mc, alg, header, hops)
            if type(fwd) is NodeError:
                self.errors.append(fwd)
                return []
            deliver = fwd.deliver
            if deliver:
                self.deliveries.append(Delivery(mc, t, hops, startups, self._now(), self._tel))
                self.delivered += 1
            sends = fwd.sends
            if not sends:
                return []
            n = len(sends)
            if n + deliver > 1:
                self.copies += n + deliver - 1
            bumped = startups + 1 if fwd.startup else startups
            carried = fwd.carried
            ports = self._port_set
            for port, _ in sends:  # _enqueue_sends: every bad send named before any leaves
                if port not in ports:
                    self.error("bad-send", f"rule {alg!r} sent on {port!r}, not a link of {self.here}", mc)
            hops += 1
            one_port, credit, tel_now = self.one_port, self._credit, self._tel
            out_free, link_sends, traffic, used = dom.out_free, self.link_sends, self.traffic, self.links_used
            out: list[tuple[str, list[Any]]] = []
            for i, (port, header) in enumerate(sends):
                if port not in ports:
                    continue
                key = "*" if one_port else port
                at = out_free.get(key, 0)
                if at < t:
                    at = t
                out_free[key] = at + 1
                self.sent += 1
                link_sends[port] = link_sends.get(port, 0) + 1
                if credit is not None:
                    credit[port] -= 1
                traffic[mc] = traffic.get(mc, 0) + 1
                used[mc] = used.get(mc, 0) | PORT_BITS[port]
                if self.trace:
                    self.link_trace.append((mc, port, at))
                wire = [mc, alg, header, hops, bumped if i >= carried else startups, at]
                if tel_now is not None:  # each copy its own path: this node's send time closes its triple
                    wire.append(tel_now + TEL_SEND.pack(self._now()))
                out.append((port, wire))
            return out
        finally:
            self._tel = None

    def receive_free(self, packet: Packet) -> list[tuple[str, Packet]]:
        """Free clock: take a packet in at once (Lamport time) and return its sends."""
        if self.telemetry:  # this node's receive time: when its reader took the frame off the link
            self._tel = (packet.tel or b"") + TEL_HEAD.pack(self._node_id, packet.rx or self._now())
        self.received += 1
        dom = self._domain(packet.mc)
        arrival = packet.sent + 1
        t = max(arrival, dom.in_free) if self.one_port else arrival
        dom.in_free = t + 1
        try:
            return self._schedule_free(dom, self._take_in(packet, t), t)
        finally:
            self._tel = None
