"""Compile the node's hot modules and the flit-level reference model with mypyc, in place
(``make compiled``; ``make plain`` undoes it).

The compiled modules are C extensions next to their sources (``node/switching/engine.cpython-*.so`` beside
``node/switching/engine.py``); Python imports an extension before a source of the same name, so every
runtime that imports ``node`` from this checkout runs them. ``node/__init__.py`` (and, for the
model, ``coordinator/runtimes/__init__.py``) refuses to import once a source is newer than its
compiled module, so an edit is never silently ignored.

The build runs in a scratch copy (``build/compiled``): mypyc's setuptools step reads the
``pyproject.toml`` of the directory it runs in, and the scratch copy keeps a failed build from
leaving half the modules compiled. Needs a C compiler and the Python headers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "build" / "compiled"

MODULES = [
    "node/switching/engine.py",
    "node/switching/lockstep.py",
    "node/transport/wire.py",
    "node/topology.py",
    "node/switching/factory.py",
    "node/switching/wormhole.py",
    "node/transport/links.py",
    "node/sync/polled.py",
    "node/sync/shardstep.py",  # ShardBarrier extends links.StepBarrier: only compiled classes may
    *sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "node" / "routing").glob("*.py")
        if p.name != "__init__.py"  # the registry: an exception subclass of KeyError, not worth it
    ),
    "coordinator/runtimes/wormhole_model.py",
]
"""What runs per packet-hop or per node-step: the engines, the clocks, the in-process links and
step barrier, the wire and the rules (not the trio actor, the control protocol or MQTT); and the
flit-level reference model's per-flit loops (issue 45's speed beside BookSim2)."""

PACKAGES = ("node", "coordinator")
"""The packages the compiled modules live in (copied to the scratch build, searched and cleaned)."""

GROUP = "node._mypyc"
"""The compiled modules share one runtime library; inside ``node`` it is importable wherever
``node`` is (a top-level library would need the checkout's root on ``sys.path``)."""

OPT = os.environ.get("MESHCAST_MYPYC_OPT", "3")
"""The C compiler's optimisation level (mypyc's ``opt_level``). CI sets 0: it checks the compiled
build's behaviour, not its speed, and gcc at -O0 takes 56 s where -O3 takes 116 (7 Dec 2026)."""

SETUP = f"""
from setuptools import setup
from mypyc.build import mypycify
setup(name="meshcast-compiled", ext_modules=mypycify({MODULES!r}, group_name={GROUP!r}, opt_level={OPT!r}),
      script_args=["build_ext", "--inplace"])
"""


def compiled_files(root: Path) -> list[Path]:
    """The extension modules under ``root/node`` and ``root/coordinator`` (by the interpreter's own tag,
    as node.compiled_modules looks them up; this script cannot import ``node``, whose stale-build
    check it must get past)."""
    return sorted(f for pkg in PACKAGES for f in (root / pkg).rglob(f"*{EXTENSION_SUFFIXES[0]}"))


def remove(root: Path = ROOT) -> list[Path]:
    """Remove the compiled modules from the checkout (back to the plain build)."""
    gone = compiled_files(root)
    for f in gone:
        f.unlink()
    return gone


def build() -> int:
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, SCRATCH / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    print(f"compile: mypyc on {len(MODULES)} modules in {SCRATCH.relative_to(ROOT)} (about a minute)")
    done = subprocess.run(
        [sys.executable, "-c", SETUP], cwd=SCRATCH, check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        print("compile: mypyc failed (above); the checkout is unchanged (plain build)", file=sys.stderr)
        return done.returncode
    remove()
    built = compiled_files(SCRATCH)
    for f in built:
        target = ROOT / f.relative_to(SCRATCH)
        shutil.copy2(f, target)
        target.touch()  # newer than its source: the staleness checks (node/, coordinator/runtimes/)
    print(f"compile: {len(built)} extension modules in node/ and coordinator/ (make plain removes them)")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--remove"]:
        gone = remove()
        print(f"compile: removed {len(gone)} extension modules (plain build)")
        return 0
    if argv:
        print("usage: compile.py [--remove]", file=sys.stderr)
        return 2
    return build()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
