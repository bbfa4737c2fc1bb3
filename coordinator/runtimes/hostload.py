"""How busy this machine was while a run lasted: CPU idle each second and the load average.

The fidelity verdict (:mod:`coordinator.analysis.fidelity`) names the host's load beside what the
telemetry measured. Every runtime on one machine shares the CPUs, so the coordinator's own view
of ``/proc/stat`` covers in-process, processes, containers and deployments alike. Where there is
no ``/proc/stat`` (not Linux) nothing is sampled and the verdict says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import trio

__all__ = ["HostLoad", "parse_cpu", "sample_host"]

PROC_STAT = Path("/proc/stat")


def parse_cpu(text: str) -> tuple[int, int] | None:
    """(idle, total) jiffies from the ``cpu`` line of ``/proc/stat`` (idle counts iowait), or None."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            if len(values) < 4:
                return None
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            return idle, sum(values[:8])  # guest time is already in user
    return None


def _read() -> tuple[int, int] | None:
    try:
        return parse_cpu(PROC_STAT.read_text())
    except OSError:
        return None


@dataclass
class HostLoad:
    """CPU idle (a fraction of all CPUs) over each interval of a run, and the load average at its end."""

    idle: list[float] = field(default_factory=list)
    loadavg: tuple[float, float, float] | None = None

    def finish(self) -> None:
        try:
            self.loadavg = os.getloadavg()
        except OSError:
            self.loadavg = None


async def sample_host(load: HostLoad, interval: float = 1.0) -> None:
    """Append the CPU idle fraction of every ``interval`` to ``load.idle`` until cancelled."""
    last = _read()
    if last is None:
        return
    while True:
        await trio.sleep(interval)
        now = _read()
        if now is None:
            return
        d_idle, d_total = now[0] - last[0], now[1] - last[1]
        if d_total > 0:
            load.idle.append(max(0.0, min(1.0, d_idle / d_total)))
        last = now
