"""The timerfd alarm the link pumps sleep on: never early, every waiter woken, one per run."""

from __future__ import annotations

import random
import sys

import pytest
import trio

from node.transport import alarm as alarm_module
from node.transport.alarm import alarm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")


async def test_every_waiter_wakes_at_or_after_its_moment_whatever_the_order() -> None:
    a = alarm()
    assert a is not None and alarm() is a  # one per run
    rng = random.Random(3)
    woke: dict[int, float] = {}
    deadlines = {i: trio.current_time() + rng.uniform(0.001, 0.03) for i in range(40)}

    async def wait(i: int) -> None:
        await a.sleep_until(deadlines[i])
        woke[i] = trio.current_time()

    async with trio.open_nursery() as nursery:
        for i in rng.sample(sorted(deadlines), len(deadlines)):  # armed out of order
            nursery.start_soon(wait, i)
    assert sorted(woke) == sorted(deadlines)
    assert all(woke[i] >= deadlines[i] for i in deadlines)


async def test_a_cancelled_waiter_leaves_the_others_on_time() -> None:
    a = alarm()
    assert a is not None
    start = trio.current_time()
    with trio.move_on_after(0.005):
        await a.sleep_until(start + 10)  # the earliest armed moment is far: a later one must rearm
    await a.sleep_until(trio.current_time() + 0.01)
    assert trio.current_time() - start < 5


async def test_a_moment_already_past_returns_at_once() -> None:
    a = alarm()
    assert a is not None
    before = trio.current_time()
    await a.sleep_until(before - 1)
    assert trio.current_time() - before < 1


def test_no_timerfd_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESHCAST_TIMERFD", "0")

    async def main() -> object:
        return alarm()

    assert trio.run(main) is None
    assert alarm_module._open() is None
