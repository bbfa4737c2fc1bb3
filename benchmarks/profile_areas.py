"""Where a run's CPU went, by area, from two py-spy raw profiles (before and after), as a markdown table.

    .venv/bin/py-spy record --subprocesses -r 100 -f raw -o A.txt -- .venv/bin/python -c \
        "import sys; from coordinator.cli import main; sys.exit(main(['reproduce','malani','--out','DIR']))"
    python3 benchmarks/profile_areas.py A.txt B.txt

Modules moved between commits, so each sample goes by names that hold across them: from the
innermost frame out, the first frame an area's rule matches takes it (a msgpack call inside the
engine counts as the wire codec). At 100 samples a second, a sample is 0.01 CPU-s.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Callable

RULES: list[
    tuple[str, Callable[[str], bool]]
] = [  # (category, test on "func (path)") checked from leaf to root; first hit wins
    (
        "garbage collection after each chunk (paused_gc)",
        lambda f: "_GeneratorContextManager.__exit__" in f and "contextlib" in f,
    ),
    (
        "plots (matplotlib)",
        lambda f: "matplotlib" in f or "spread_plots" in f or "/report.py" in f or "PIL" in f,
    ),
    (
        "metrics (per-multicast results)",
        lambda f: "/metrics.py" in f or "statistics.py" in f or "result_types" in f or "/fits.py" in f,
    ),
    (
        "tree preparation at the sources",
        lambda f: (
            re.search(r"\((.*/)?(malani|zones)\.py", f) is not None
            or ("tree.py" in f and ("encode_ids" in f or "_id_port" in f or "prepare" in f))
        ),
    ),
    ("routing rules per hop", lambda f: "/routing/" in f),
    ("wire codec (msgpack)", lambda f: "/wire.py" in f or "msgpack" in f),
    (
        "control protocol and collection",
        lambda f: any(
            x in f for x in ("/protocol.py", "/records.py", "/session.py", "/actor.py", "/leader.py")
        ),
    ),
    (
        "engine step (store-and-forward)",
        lambda f: "/switching/engine.py" in f or "/lockstep.py" in f or "/polled.py" in f,
    ),
    ("trio scheduling", lambda f: "trio/" in f),
    ("imports and start-up", lambda f: "importlib" in f or "<frozen" in f),
]


def classify(path: str) -> tuple[Counter[str], int]:
    """Samples per area, and all samples, of the raw profile at ``path``."""
    tot: Counter[str] = Counter()
    n_all = 0
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        stack, count = line.rstrip().rsplit(" ", 1)
        n = int(count)
        n_all += n
        frames = stack.split(";")
        for fr in reversed(frames):
            hit = next((c for c, rule in RULES if rule(fr)), None)
            if hit:
                tot[hit] += n
                break
        else:
            tot["other"] += n
    return tot, n_all


def main() -> None:
    a, ta = classify(sys.argv[1])
    b, tb = classify(sys.argv[2])
    print("| area | 0212063, CPU-s | share | working tree, CPU-s | share | change, CPU-s |")
    print("|---|---:|---:|---:|---:|---:|")
    for c in [r[0] for r in RULES] + ["other"]:
        before, after = a[c] / 100, b[c] / 100
        shares = f"{100 * a[c] / ta:.0f}%", f"{100 * b[c] / tb:.0f}%"
        print(f"| {c} | {before:.1f} | {shares[0]} | {after:.1f} | {shares[1]} | {after - before:+.1f} |")
    print(f"| **all** | **{ta / 100:.1f}** | | **{tb / 100:.1f}** | | **{(tb - ta) / 100:+.1f}** |")


if __name__ == "__main__":
    main()
