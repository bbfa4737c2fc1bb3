"""The fused lockstep step's share of a dense in-process run, and what it saves: node-step times.

Runs one of the bench's dense in-process lockstep points (100 VH multicasts × 50 destinations)
with the fused step on and off (:data:`node.sync.polled.FUSED`), in turn, and times each
node-step the barrier calls: those :func:`node.sync.polled.fused_step` took, those it declined
(its checks cost), and those :func:`node.sync.polled.layered_step` did. Prints, per run, each
kind's count and mean µs, and the sum over all node-steps (the figure to compare between on
and off). Plain build only (the compiled one binds its calls). The timers add about 0.2 µs each.

Usage: ``.venv/bin/python benchmarks/fused_split.py [TOPOLOGY] [ROUNDS]`` (default torus:32x32 3).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from coordinator.experiments.bench import emulator_point
from node.sync import polled

NS: Counter[str] = Counter()
COUNT: Counter[str] = Counter()


def _timed(kind: Callable[[Any], str], fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any) -> Any:
        a = time.perf_counter_ns()
        got = fn(*args)
        k = kind(got)
        NS[k] += time.perf_counter_ns() - a
        COUNT[k] += 1
        return got

    return wrapper


def main(argv: list[str]) -> None:
    spec = argv[0] if argv else "torus:32x32"
    rounds = int(argv[1]) if len(argv) > 1 else 3
    polled.fused_step = _timed(lambda got: "declined" if got is None else "fused", polled.fused_step)  # type: ignore[assignment]
    polled.layered_step = _timed(lambda _: "layered", polled.layered_step)  # type: ignore[assignment]
    for mode in ("on", "off") * rounds:
        polled.FUSED = mode == "on"
        NS.clear()
        COUNT.clear()
        assert emulator_point(spec, "lockstep", 100, 50).complete
        parts = ", ".join(f"{k} {COUNT[k]} × {NS[k] / COUNT[k] / 1e3:.1f} µs" for k in sorted(COUNT))
        print(f"{spec} fused {mode}: {parts}; all node-steps {sum(NS.values()) / 1e6:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
