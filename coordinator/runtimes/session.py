"""The coordinator's side of the control protocol, the same for every runtime.

hello from every node → assign → ready from every node → plan → start → reports, until
every node is done (lockstep: nodes stop by themselves at global quiescence) or, in the
free clock, until probes find the network quiescent twice in a row. A wall-clock budget
bounds everything: when it runs out the run stops, says why and keeps what it has.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from coordinator.runtimes.records import Collector, RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.topology import Coord
from node.wire import WireError, decode_control, encode_control

__all__ = ["Session"]

SendTo = Callable[[Coord, bytes], Awaitable[None]]
Broadcast = Callable[[bytes], Awaitable[None]]

PROBE_INTERVAL = 0.02
STOP_GRACE = 5.0


class Session:
    """One run seen from the coordinator."""

    def __init__(
        self,
        plan: Plan,
        settings: RunSettings,
        send_to: SendTo,
        broadcast: Broadcast,
        inbox: trio.MemoryReceiveChannel[bytes],
        *,
        peers: Callable[[Coord], dict[str, Any]] | None = None,
        progress: Callable[[int, int], None] | None = None,
        run_id: str | None = None,
    ) -> None:
        self.plan = plan
        self.settings = settings
        self.send_to = send_to
        self.broadcast = broadcast
        self.inbox = inbox
        self.peers = peers
        self.progress = progress
        self.run_id = run_id or secrets.token_hex(4)
        self.token = secrets.token_hex(8)
        self.collector = Collector(plan)
        self._counters: dict[Coord, tuple[int, int, int]] = {}
        self._probe = 0
        self._early: dict[str, set[Coord]] = {}

    def _assign(self, node: Coord) -> dict[str, Any]:
        s = self.settings
        return {
            "type": "assign",
            "run": self.run_id,
            "topology": self.plan.topology.spec,
            "node": list(node),
            "port_model": s.port_model,
            "contention": s.contention,
            "clock": s.clock,
            "hop_limit": s.hop_limit,
            "max_steps": s.max_steps,
            "trace": s.trace,
            "buffer": s.buffer,
            "out_buffer": s.out_buffer,
            "policy": s.policy,
            "token": self.token,
            "peers": self.peers(node) if self.peers else {},
        }

    async def _next(self) -> dict[str, Any] | None:
        msg = decode_control(await self.inbox.receive())
        if isinstance(msg, WireError):
            self.collector.raw.errors.append({"node": None, "kind": "bad-control", "cause": msg.cause})
            return None
        return msg

    async def _gather(self, kind: str, nodes: set[Coord]) -> None:
        """Wait until every node in ``nodes`` has sent ``kind``.

        Over a real network a fast node can be a phase ahead (its ``ready`` arriving before a
        slow node's ``hello``): such messages are remembered for the later gather.
        A node that is already done (aborted, or reported lost) is not waited for.
        """
        waiting = set(nodes) - self._early.pop(kind, set()) - self.collector.done
        while waiting:
            msg = await self._next()
            if msg is None:
                continue
            self._handle(msg)
            waiting -= self.collector.done
            if msg["type"] != kind and msg["type"] == "ready":
                with contextlib.suppress(KeyError, TypeError, ValueError, IndexError):
                    self._early.setdefault("ready", set()).add((int(msg["node"][0]), int(msg["node"][1])))
            if msg["type"] == kind:
                try:
                    waiting.discard((int(msg["node"][0]), int(msg["node"][1])))
                except (KeyError, TypeError, ValueError, IndexError):
                    continue
                if kind == "hello":
                    n = (int(msg["node"][0]), int(msg["node"][1]))
                    if n in nodes:
                        await self.send_to(n, encode_control(self._assign(n)))

    def _handle(self, msg: dict[str, Any]) -> None:
        if msg["type"] == "counters":
            try:
                n = (int(msg["node"][0]), int(msg["node"][1]))
                self._counters[n] = (int(msg["probe"]), int(msg["sent"]), int(msg["received"]))
            except (KeyError, TypeError, ValueError, IndexError):
                pass
            return
        before = self.collector.reached
        self.collector.handle(msg)
        if self.progress and self.collector.reached != before:
            self.progress(self.collector.reached, self.collector.expected)

    async def run(self, nodes: set[Coord]) -> RawRun:
        """Drive the whole protocol; always returns, marking the run incomplete when it must."""
        raw = self.collector.raw
        phase = "waiting for nodes to say hello"
        t0 = time.perf_counter()
        with trio.move_on_after(self.settings.wall_budget) as budget:
            await self._gather("hello", nodes)
            phase = "waiting for nodes to open their links"
            await self._gather("ready", nodes)
            await self._send_plan(nodes)
            await self.broadcast(encode_control({"type": "start"}))
            t0 = time.perf_counter()
            phase = "running"
            if self.settings.clock == "lockstep":
                await self._gather("done", nodes)
            else:
                await self._free_until_quiescent(nodes)
        raw.wall_s = time.perf_counter() - t0
        if budget.cancelled_caught:
            raw.incomplete.append(
                f"wall-clock budget of {self.settings.wall_budget:g} s ran out while {phase}"
            )
        if self.collector.done != nodes:
            await self.broadcast(encode_control({"type": "stop"}))
            with trio.move_on_after(STOP_GRACE):
                await self._gather("done", nodes - self.collector.done)
            silent = sorted(nodes - self.collector.done)
            if silent:
                raw.incomplete.append(
                    "no final report from "
                    + ", ".join(f"({x},{y})" for x, y in silent[:20])
                    + (f" and {len(silent) - 20} more" if len(silent) > 20 else "")
                )
        for n, status in sorted(raw.node_status.items()):
            if status != "ok":
                raw.incomplete.append(f"node ({n[0]},{n[1]}) stopped early: {status}")
        if raw.last_step >= self.settings.max_steps and self.settings.clock == "lockstep":
            raw.incomplete.append(f"step budget of {self.settings.max_steps} steps ran out")
        return raw

    async def _send_plan(self, nodes: set[Coord]) -> None:
        """Each node gets the injections it sources (and when the last one is), before start."""
        mine: dict[Coord, list[Any]] = {n: [] for n in nodes}
        for m in self.plan.multicasts:
            mine.setdefault(m.source, []).append(m.to_wire())
        for n in sorted(nodes):
            msg = {"type": "plan", "last_step": self.plan.last_step, "multicasts": mine[n]}
            await self.send_to(n, encode_control(msg))

    async def _free_until_quiescent(self, nodes: set[Coord]) -> None:
        """Free clock: probe counters until two probes in a row agree and sent == received."""
        previous: tuple[int, int] | None = None
        while True:
            with trio.move_on_after(PROBE_INTERVAL):
                while True:
                    msg = await self._next()
                    if msg is not None:
                        self._handle(msg)
            self._probe += 1
            await self.broadcast(encode_control({"type": "probe", "probe": self._probe}))
            while not all(self._counters.get(n, (0,))[0] == self._probe for n in nodes):
                msg = await self._next()
                if msg is not None:
                    self._handle(msg)
            sent = sum(c[1] for c in self._counters.values())
            received = sum(c[2] for c in self._counters.values())
            if sent == received and previous == (sent, received):
                await self.broadcast(encode_control({"type": "stop"}))
                await self._gather("done", nodes)
                return
            previous = (sent, received)
