"""The sparse step barrier across shards: each shard wakes only its nodes with work, all agree.

:class:`ShardBarrier` is a :class:`node.transport.links.StepBarrier` for the nodes of one shard. Once its
nodes due at step ``t`` have done it (the barrier calls their steps), the shard sends every
other shard a marker for ``t`` (after the frames its nodes sent at ``t``, on the same
connection): the nodes it
wakes there at ``t + 1``, its own earliest due step and latest busy step, and whether it woke
anyone elsewhere. Once it has every shard's marker for ``t`` (so every frame of ``t`` is in),
each shard computes the same next step from them (the rule of :class:`node.switching.lockstep.Schedule`:
the earliest due step anywhere, unless past ``last busy + diameter + 1`` or the step budget)
and wakes its nodes due then; a shard with none does that step's round at once. The records
are those of one process's :class:`~node.transport.links.StepBarrier`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

import trio

from node.switching.lockstep import Schedule
from node.transport.links import StepBarrier

__all__ = ["ShardBarrier"]

Marker = dict[str, Any]


class ShardBarrier(StepBarrier):
    """A :class:`StepBarrier` for one shard's nodes that agrees each step with the other shards."""

    def __init__(
        self,
        nodes: Iterable[Hashable],
        index: int,
        shard_of: Callable[[Any], int],
        send: dict[int, Callable[[Marker], None]],
    ) -> None:
        """``send[j]``: queue a marker to shard ``j`` behind the link frames already queued to it."""
        super().__init__(nodes)
        self.index = index
        self.shard_of = shard_of
        self.send = send
        self._remote: dict[int, list[Any]] = {j: [] for j in send}
        self._markers: dict[int, dict[int, Marker]] = {}
        self._arrived = trio.Event()
        self._step = -1

    def marker(self, shard: int, marker: Marker) -> None:
        """A marker from ``shard`` (called by the shard's reader of that connection)."""
        self._markers.setdefault(int(marker["t"]), {})[shard] = marker
        self._arrived.set()

    def _wake_sent(self, node: Hashable, step: int) -> None:
        """A neighbour here works at ``step``; one in another shard is told with this step's marker."""
        j = self.shard_of(node)
        if j == self.index:
            super()._wake_sent(node, step)
        else:
            self._remote[j].append(node)

    async def _next(self, schedule: Schedule[Hashable]) -> set[Hashable] | None:
        """Agree on the next step with the other shards (each of them idle steps in turn): its
        nodes here, or None once the run is over."""
        while True:
            t = self._step
            due = schedule.earliest()
            woke = any(self._remote.values())
            for j, send in self.send.items():
                wakes = [list(n) for n in self._remote[j]]
                send({"t": t, "wake": wakes, "due": due, "busy": schedule.last_busy, "woke": woke})
                self._remote[j] = []
            while len(self._markers.get(t, {})) < len(self.send):
                self._arrived = trio.Event()
                await self._arrived.wait()
            candidates = [due] if due is not None else []
            candidates += [t + 1] if woke else []
            for m in self._markers.pop(t, {}).values():
                for x, y in m["wake"]:
                    schedule.wake((x, y), t + 1)
                schedule.busy(int(m["busy"]))
                candidates += [int(m["due"])] if m["due"] is not None else []
                candidates += [t + 1] if m["woke"] else []
            horizon = min(schedule.last_busy + schedule.diameter + 1, schedule.max_steps)
            step = min(candidates, default=None)
            if step is None or step > horizon:
                schedule.end = horizon
                self._current = None
                return None
            self._step = self._current = step
            nodes = schedule.take(step)
            if nodes:
                return nodes
