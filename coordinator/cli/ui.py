"""Terminal output helpers: one rich console, wide enough when output goes to a file or pipe."""

from __future__ import annotations

import sys

from rich.console import Console

__all__ = ["console"]


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 150)
