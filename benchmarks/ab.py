"""A/B guard: a named commit against the working tree, alternated, in fresh processes.

    .venv/bin/python benchmarks/ab.py REF [--bench NAME ...] [--rounds N] [--warn 0.10] [--json FILE]
    .venv/bin/python benchmarks/ab.py baseline --short     # what CI runs (a warning, never a failure)

REF is a commit, a tag or ``baseline`` (the commit written in ``benchmarks/baseline``). Its tree is
extracted with ``git archive`` into a temporary directory and run from there with this venv (the
working tree's own modules shadowed by ``PYTHONPATH``), so nothing is installed and nothing in the
checkout changes. Each round runs every chosen benchmark once on each side, the order swapped
every round so that the machine's drift falls on both alike; each run is a fresh interpreter
whose whole CPU time (user + system, start-up included) is the figure: CPU time is what a busy
shared machine disturbs least.

Prints, per benchmark, the best and the median CPU seconds of each side and the working tree's
median over REF's with a 95% CI (bootstrap over the paired rounds, seeded), and a WARNING line
for each benchmark whose median ratio is above 1 + ``--warn`` (default 10% slower). Exit status 0
whatever the figures say (it is a guard that speaks, not a test); 2 for bad arguments; with
``--short`` a REF that cannot be extracted (a shallow clone) is a warning too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BENCHES: dict[str, tuple[str, str]] = {
    "sf-20x20": ("the bench's (b) point: 100 VH multicasts × 50 on a 20×20 torus, in-process, lockstep",
                 "from coordinator.experiments.bench import emulator_point as f; "
                 "assert f('torus:20x20', 'lockstep', 100, 50).complete"),
    "sf-engines-20x20": ("(e): the same on the engines runtime",
                         "from coordinator.experiments.bench import emulator_point as f; "
                         "assert f('torus:20x20', 'lockstep', 100, 50, 1, 'engines').complete"),
    "sf-64x64": ("the sparse (b) point: 1 multicast × 10 on a 64×64 torus, in-process, 5 runs",
                 "from coordinator.experiments.bench import emulator_point as f; "
                 "assert f('torus:64x64', 'lockstep', 1, 10).complete"),
    "flit-engines": ("(f) quick: wormhole uniform load on a 10×10 mesh, engines runtime",
                     "from coordinator.experiments.bench import flit_load_point as f; "
                     "assert f('engines', True).complete"),
    "flit-model": ("(f) quick: the same on the reference model",
                   "from coordinator.experiments.bench import flit_load_point as f; "
                   "assert f('model', True).complete"),
    "malani": ("meshcast reproduce malani (packet level, issue 48's measure: about a minute a run)",
               "import sys, tempfile; from coordinator.cli import main; "
               "sys.exit(main(['reproduce', 'malani', '--out', tempfile.mkdtemp()]))"),
}  # fmt: skip
"""Each benchmark: what it is, and the Python a fresh interpreter runs for it."""
SHORT = ("sf-20x20", "flit-model")
"""``--short`` (CI): two benchmarks of a second or so each, five rounds."""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_of(tree: Path, code: str) -> float:
    """Whole-process CPU seconds of ``code`` run in a fresh interpreter from ``tree``."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    before = _children_cpu()
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{tree}: the benchmark failed: {tail}")
    return _children_cpu() - before


def check_source(tree: Path) -> None:
    """A fresh interpreter run from ``tree`` imports meshcast from ``tree`` (not the editable install)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = "import coordinator, node; print(coordinator.__file__); print(node.__file__)"
    got = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    for line in got.stdout.split():
        if not Path(line).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"{tree}: meshcast came from {line}, not from the tree under test")


def extract(ref: str, into: Path) -> str:
    """The tree of ``ref`` (``baseline``: benchmarks/baseline's commit) in ``into``; its commit."""
    if ref == "baseline":
        ref = (ROOT / "benchmarks" / "baseline").read_text().split()[0]
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True)  # fmt: skip
    if sha.returncode != 0:
        raise LookupError(f"no commit {ref!r} in this clone")
    archive = subprocess.run(
        ["git", "archive", sha.stdout.strip()], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return sha.stdout.strip()


def ratio_ci(a: Sequence[float], b: Sequence[float], draws: int = 2000) -> tuple[float, float]:
    """95% bootstrap CI of median(b) / median(a), resampling the paired rounds (seeded)."""
    rng = random.Random(1)
    n = len(a)
    ratios = []
    for _ in range(draws):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(b[i] for i in idx) / statistics.median(a[i] for i in idx))
    ratios.sort()
    return ratios[int(0.025 * draws)], ratios[min(draws - 1, int(0.975 * draws))]


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ref", help="a commit, a tag, or 'baseline' (benchmarks/baseline)")
    ap.add_argument("--bench", action="append", choices=sorted(BENCHES), help="repeatable; default: all")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (each side once a round)")
    ap.add_argument("--warn", type=float, default=0.10, help="warn above 1 + this ratio")
    ap.add_argument("--short", action="store_true", help=f"CI's form: {', '.join(SHORT)}, 5 rounds")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    benches = list(SHORT) if args.short else (args.bench or list(BENCHES))
    rounds = 5 if args.short else args.rounds
    started, load_start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="meshcast-ab-") as tmp:
        try:
            sha = extract(args.ref, Path(tmp))
        except (LookupError, OSError, subprocess.CalledProcessError) as exc:
            print(f"ab: WARNING: cannot compare with {args.ref}: {exc}", file=sys.stderr)
            return 0 if args.short else 2
        sides = {"ref": Path(tmp), "tree": ROOT}
        for path in sides.values():
            check_source(path)
        cpu: dict[str, dict[str, list[float]]] = {b: {"ref": [], "tree": []} for b in benches}
        for r in range(rounds):
            order = ("ref", "tree") if r % 2 == 0 else ("tree", "ref")
            for b in benches:
                for side in order:
                    try:
                        cpu[b][side].append(cpu_of(sides[side], BENCHES[b][1]))
                    except RuntimeError as exc:
                        print(f"ab: WARNING: {b} on {side}: {exc}", file=sys.stderr)
                        return 0 if args.short else 1
            print(f"ab: round {r + 1} of {rounds}, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    rows = []
    warnings = []
    for b in benches:
        a, t = cpu[b]["ref"], cpu[b]["tree"]
        ratio = statistics.median(t) / statistics.median(a)
        low, high = ratio_ci(a, t)
        rows.append({"bench": b, "what": BENCHES[b][0], "ref_cpu_s": a, "tree_cpu_s": t,
                     "ref_best": min(a), "ref_median": statistics.median(a), "tree_best": min(t),
                     "tree_median": statistics.median(t), "tree_over_ref": round(ratio, 3),
                     "ci95": [round(low, 3), round(high, 3)]})  # fmt: skip
        print(f"{b:>17}: {args.ref} ({sha[:7]}) best {min(a):.2f} median {statistics.median(a):.2f} CPU-s; "
              f"working tree best {min(t):.2f} median {statistics.median(t):.2f}; "
              f"tree/ref {ratio:.3f} (95% CI {low:.3f}-{high:.3f})")  # fmt: skip
        if ratio > 1 + args.warn:
            warnings.append(f"ab: WARNING: {b} is {ratio - 1:.0%} slower than {args.ref} ({sha[:7]})")
    for w in warnings:
        print(w)
    doc = {"command": "benchmarks/ab.py " + " ".join(argv), "ref": args.ref, "commit": sha, "rounds": rounds,
           "started": started, "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
           "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
