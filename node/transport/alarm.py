"""A wake-up at a given moment, to the microsecond, without spinning: Linux's timerfd under trio.

trio's own sleeps end on the I/O poll's timeout, which is whole milliseconds rounded up: a link
pump that slept until a frame's release passed it on up to 1 ms late, and one that slept until a
millisecond before and then yielded until it was due burnt a core's share per link while it
waited (64 node processes with traffic: 0.85 cores, against 0.29 sleeping). A timerfd armed for
the release wakes the poll at that moment (the thread's timer slack lowered to a microsecond),
and costs nothing while it waits.

One alarm per trio run (a run-scoped system task and one file descriptor, however many links
share it); :func:`alarm` gives None where there is no timerfd (not Linux, or
``MESHCAST_TIMERFD=0``), and the caller falls back to sleeping.
"""

from __future__ import annotations

import contextlib
import ctypes
import heapq
import math
import os
import sys
import time

import trio

__all__ = ["Alarm", "alarm"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = 0o4000
_TFD_CLOEXEC = 0o2000000
_TFD_TIMER_ABSTIME = 1
_PR_SET_TIMERSLACK = 29
_SLACK_NS = 1000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class Alarm:
    """Events set at given moments of trio's clock, by one timerfd."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._settime = libc.timerfd_settime
        self.fd = fd
        self._heap: list[tuple[float, int, trio.Event]] = []
        self._armed = math.inf
        self._seq = 0

    def at(self, deadline: float) -> trio.Event:
        """An event set once trio's clock reaches ``deadline``."""
        event = trio.Event()
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, event))
        if deadline < self._armed:
            self._arm(deadline)
        return event

    async def sleep_until(self, deadline: float) -> None:
        """Return once trio's clock reaches ``deadline`` (at once if it has)."""
        if deadline > trio.current_time():
            await self.at(deadline).wait()

    def _arm(self, deadline: float) -> None:
        # trio's clock and CLOCK_MONOTONIC tick together (perf_counter is CLOCK_MONOTONIC here);
        # the timer takes the monotonic moment the deadline stands for
        ns = max(1, time.monotonic_ns() + round((deadline - trio.current_time()) * 1e9))
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(ns // 1_000_000_000, ns % 1_000_000_000))
        if self._settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")
        self._armed = deadline

    async def run(self) -> None:
        """Set each event when its moment comes; runs for the whole trio run."""
        heap = self._heap
        try:
            while True:
                await trio.lowlevel.wait_readable(self.fd)
                with contextlib.suppress(BlockingIOError):
                    os.read(self.fd, 8)
                self._armed = math.inf
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    heapq.heappop(heap)[2].set()
                if heap:
                    self._arm(heap[0][0])
        finally:
            os.close(self.fd)


_ALARM: trio.lowlevel.RunVar[Alarm | None] = trio.lowlevel.RunVar("meshcast_alarm")
_UNAVAILABLE: list[bool] = []


def _open() -> Alarm | None:
    """A new alarm on a timerfd, or None where there is none."""
    if not sys.platform.startswith("linux") or os.environ.get("MESHCAST_TIMERFD", "1") == "0" or _UNAVAILABLE:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        libc.prctl(_PR_SET_TIMERSLACK, _SLACK_NS, 0, 0, 0)  # poll wake-ups within a microsecond
    except (OSError, AttributeError):
        _UNAVAILABLE.append(True)
        return None
    return Alarm(libc, fd)


def alarm() -> Alarm | None:
    """This trio run's alarm (made, with its task, on first use), or None without a timerfd."""
    try:
        return _ALARM.get()
    except LookupError:
        pass
    found = _open()
    _ALARM.set(found)
    if found is not None:
        trio.lowlevel.spawn_system_task(found.run, name="meshcast alarm")
    return found
