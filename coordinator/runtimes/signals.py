"""SIGINT and SIGTERM end every runtime the same way: a short grace, teardown, then Interrupted.

:func:`run_interruptible` wraps a runtime's run. The first SIGINT or SIGTERM starts a grace of
:data:`GRACE` seconds in which arrivals already in flight are still collected; then the run's
cancel scope is cancelled, so every child process, broker and container of the run is torn
down by its own ``finally`` (trio terminates a cancelled child process, then kills it). A second
signal ends the grace at once. Afterwards :class:`coordinator.errors.Interrupted` is raised,
carrying the signal and the partial RawRun marked incomplete ("interrupted by SIGTERM"), instead
of the KeyboardInterrupt traceback trio would otherwise wrap in an exception group.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import trio

from coordinator.errors import Interrupted
from coordinator.runtimes.records import RawRun

__all__ = ["GRACE", "SIGNALS", "interrupted_note", "run_interruptible"]

T = TypeVar("T")

GRACE: Final = 1.0
"""Seconds between the first signal and the end of the run: what is in flight may still arrive."""
SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def interrupted_note(signum: int) -> str:
    """The line a run ended by ``signum`` carries in ``RawRun.incomplete``."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"interrupted by {name}"


async def run_interruptible(
    run: Callable[[], Awaitable[T]],
    partial: Callable[[], RawRun],
    *,
    grace: float = GRACE,
    on_signal: Callable[[int], None] | None = None,
) -> T:
    """``await run()``; on SIGINT/SIGTERM cancel it after ``grace`` s and raise Interrupted.

    ``on_signal`` is called at the first signal, while the run's connections are still up (a
    deployment's coordinator tells its nodes to abandon the run then).
    ``partial`` is called once ``run`` has been torn down and returns what had arrived. The
    run's own exceptions come out as they are (not in an exception group). Outside the main
    thread (where signals cannot be received) ``run`` is simply awaited.
    """
    if threading.current_thread() is not threading.main_thread():
        return await run()
    got: list[int] = []
    box: list[T] = []
    failure: list[Exception] = []
    body = trio.CancelScope()
    with trio.open_signal_receiver(*SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def end_after_grace() -> None:
                await trio.sleep(grace)
                body.cancel()

            async def watch() -> None:
                async for signum in signals:
                    if not got:
                        got.append(signum)
                        if on_signal is not None:
                            on_signal(signum)
                        nursery.start_soon(end_after_grace)
                    else:
                        body.cancel()

            async def runner() -> None:
                with body:
                    try:
                        box.append(await run())
                    except Exception as exc:  # re-raised below, outside the nursery
                        failure.append(exc)
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            nursery.start_soon(runner)
    if got:
        raw = partial()
        raw.incomplete.append(interrupted_note(got[0]))
        raise Interrupted(got[0], raw)
    if failure:
        raise failure[0]
    return box[0]
