"""meshcast node: topology, wire format, routing rules and the trio actor of one router."""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

__all__ = ["StaleBuild", "build_name", "check_build", "compiled_modules"]

_HERE = Path(__file__).parent


class StaleBuild(ImportError):
    """A module compiled by ``make compiled`` is older than its source: the edit would be ignored."""


def compiled_modules(package: Path = _HERE) -> dict[str, Path]:
    """The modules compiled in place by ``make compiled`` (their source → the extension).

    Empty on the plain build. An extension sits beside its source and Python imports it first.
    """
    found: dict[str, Path] = {}
    for suffix in EXTENSION_SUFFIXES[:1]:  # the interpreter's own tag (".cpython-311-x86_64-linux-gnu.so")
        for ext in package.rglob(f"*{suffix}"):
            src = ext.with_name(ext.name[: -len(suffix)] + ".py")
            if src.exists():
                found[str(src.relative_to(package.parent))] = ext
    return found


def build_name() -> str:
    """Which build of the node this checkout runs: ``"compiled"`` (``make compiled``) or ``"plain"``."""
    return "compiled" if compiled_modules() else "plain"


def check_build(package: Path = _HERE) -> None:
    """Refuse to run a compiled module whose source changed after it was compiled (StaleBuild)."""
    for src, ext in compiled_modules(package).items():
        if (package.parent / src).stat().st_mtime > ext.stat().st_mtime:
            raise StaleBuild(
                f"{src} changed after `make compiled`: run `make compiled` again, "
                f"or `make plain` to run the sources"
            )


check_build()
