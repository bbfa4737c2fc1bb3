"""The in-process step barrier: it calls the due nodes' steps, and ends where the α-synchronizer would.

:meth:`node.transport.links.StepBarrier.drive` calls each due node's step from one task, as the sans-IO
:class:`node.switching.lockstep.Schedule` says. A step that fails is raised in its own node's task, and a
node cancelled while it waits takes no more steps. (Record for record against the α-synchronizer
and the other runtimes: tests/test_inprocess.py, test_emulation_vs_model.py, test_shards.py.)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import trio

from node.switching.engine import Injection
from node.switching.lockstep import Lockstep
from node.topology import Coord
from node.transport.links import StepBarrier, Stepper
from node.transport.wire import Credits, Packet

A, B, C = (0, 0), (1, 0), (2, 0)
WORK = {A: (0, 5)}
"""Steps a node has work of its own at (an injection)."""
SENDS = {(A, 0), (B, 1)}
"""A node sends a frame on ``+x`` at these steps: its neighbour there works at the next step."""
NEXT = {A: B, B: C}


class FakeEngine:
    """A scripted engine: busy from an injection until its step, sending as :data:`SENDS` says."""

    def __init__(self, node: Coord) -> None:
        self.node = node
        self.steps = 0
        self._held = False

    def credit_back(self, port: str, n: Credits) -> None:
        pass

    def receive(self, item: Any, port: str | None = None, /) -> None:
        pass

    def inject(self, inj: Injection) -> None:
        self._held = True

    def busy(self) -> bool:
        return self._held

    def step(self, t: int) -> list[tuple[str, Any]]:
        self.steps += 1
        self._held = False
        return [("+x", Packet(1, "unicast", [2, 0], 0, 0, t))] if (self.node, t) in SENDS else []

    def take_freed(self) -> dict[str, int]:
        return {}


def _clock(node: Coord, steps: tuple[int, ...] = ()) -> Lockstep:
    """``node``'s clock, with injections at ``steps`` (default: :data:`WORK`'s); every node knows the
    plan's last injection step, as in a run."""
    injections = [Injection(i, "unicast", [(2, 0)], {}, s) for i, s in enumerate(steps or WORK.get(node, ()))]
    last = max(steps or [s for work in WORK.values() for s in work])
    return Lockstep(
        FakeEngine(node), ("+x",), diameter=2, max_steps=50, injections=injections, last_injection=last
    )


def _clocks() -> dict[Coord, Lockstep]:
    return {n: _clock(n) for n in (A, B, C)}


def _do(clock: Lockstep, node: Coord, t: int) -> list[Hashable]:
    """Step ``t`` of ``node``: whom it sent a frame."""
    return [NEXT[node] for _ in clock.work(t, {})]


async def _driven(log: list[tuple[int, Coord]]) -> StepBarrier:
    barrier = StepBarrier([A, B, C])
    clocks = _clocks()

    def stepper(n: Coord) -> Stepper:
        def step(t: int) -> list[Hashable]:
            log.append((t, n))
            return _do(clocks[n], n, t)

        return step

    async with trio.open_nursery() as nursery:
        for n in (A, B, C):
            nursery.start_soon(barrier.drive, n, clocks[n], stepper(n))
    return barrier


async def test_only_the_due_nodes_step_and_the_run_ends_as_the_alpha_synchronizer_would() -> None:
    driven: list[tuple[int, Coord]] = []
    with trio.fail_after(5):
        barrier = await _driven(driven)
    assert driven == [(0, A), (1, B), (2, C), (5, A)]
    assert barrier.end == 5 + 2 + 1  # the last busy step, the diameter, one more


async def test_a_failing_step_is_raised_in_its_own_nodes_task() -> None:
    barrier = StepBarrier([A, B])
    clocks = {A: _clock(A, (0,)), B: _clock(B, (0,))}
    raised: dict[Coord, BaseException] = {}

    def step(n: Coord) -> Stepper:
        def run(t: int) -> list[Hashable]:
            if n == B:
                raise ValueError(f"node {n} fails at step {t}")
            return _do(clocks[n], n, t)

        return run

    async def node(n: Coord) -> None:
        try:
            await barrier.drive(n, clocks[n], step(n))
        except ValueError as exc:
            raised[n] = exc

    with trio.move_on_after(1) as scope:
        async with trio.open_nursery() as nursery:
            for n in (A, B):  # B joins last and drives; the failing node is B itself
                nursery.start_soon(node, n)
                await trio.sleep(0)
    assert list(raised) == [B] and "fails at step 0" in str(raised[B])
    assert scope.cancelled_caught  # A waits on until the run is stopped


async def test_a_failing_step_of_another_node_is_raised_there_and_the_driver_waits() -> None:
    barrier = StepBarrier([A, B])
    clocks = {A: _clock(A, (0,)), B: _clock(B, (0,))}
    raised: dict[Coord, BaseException] = {}

    def step(n: Coord) -> Stepper:
        def run(t: int) -> list[Hashable]:
            if n == A:
                raise ValueError(f"node {n} fails at step {t}")
            return _do(clocks[n], n, t)

        return run

    async def node(n: Coord) -> None:
        try:
            await barrier.drive(n, clocks[n], step(n))
        except ValueError as exc:
            raised[n] = exc

    with trio.move_on_after(1) as scope:
        async with trio.open_nursery() as nursery:
            for n in (A, B):  # B drives; A's step fails
                nursery.start_soon(node, n)
                await trio.sleep(0)
    assert list(raised) == [A] and "node (0, 0) fails" in str(raised[A])
    assert scope.cancelled_caught


async def test_a_node_cancelled_while_it_waits_takes_no_more_steps() -> None:
    barrier = StepBarrier([A, B, C])
    clocks = _clocks()
    log: list[tuple[int, Coord]] = []

    def stepper(n: Coord) -> Stepper:
        def step(t: int) -> list[Hashable]:
            log.append((t, n))
            return _do(clocks[n], n, t)

        return step

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            gone = trio.CancelScope()

            async def cancelled_node() -> None:
                with gone:
                    await barrier.drive(B, clocks[B], stepper(B))

            nursery.start_soon(cancelled_node)
            await trio.sleep(0)
            gone.cancel()  # B leaves before the run starts
            await trio.sleep(0)
            for n in (A, C):
                nursery.start_soon(barrier.drive, n, clocks[n], stepper(n))
    assert (1, B) not in log and (2, C) not in log and (0, A) in log and (5, A) in log
    assert barrier.end == 8


async def test_one_node_alone_drives_itself_to_the_end() -> None:
    barrier = StepBarrier([C])
    clock = _clock(C, (0, 3))
    log: list[int] = []

    def step(t: int) -> list[Hashable]:
        log.append(t)
        return _do(clock, C, t)

    with trio.fail_after(5):
        await barrier.drive(C, clock, step)
    assert log == [0, 3] and barrier.end == 3 + 2 + 1
