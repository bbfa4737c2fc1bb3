"""Terminal output: one rich console (wide enough when output goes to a file or pipe) and the
progress bar every long command shows on a terminal. Only ``coordinator.cli`` uses rich."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

__all__ = ["Progress", "console", "plain", "progress", "progress_runner"]

Progress = Callable[[int, int], None]


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr), 150 columns wide when it is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 150)


def progress_runner(total_hint: str) -> tuple[Progress | None, Any]:
    """A rich progress bar with elapsed time and ETA on a terminal (None elsewhere), and its context."""
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as Bar

    prog = Bar(
        TextColumn(total_hint),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        transient=True,
        console=console(stderr=True),
    )
    task = prog.add_task(total_hint, total=None)

    def update(done: int, total: int) -> None:
        prog.update(task, completed=done, total=total)

    return update, prog


@contextmanager
def progress(label: str) -> Iterator[Progress | None]:
    """``with progress("deliveries") as update:`` — a callback for the logic layer, or None."""
    update, prog = progress_runner(label)
    if prog is None:
        yield None
        return
    with prog:
        yield update


def plain(doc: str | None) -> str | None:
    """A docstring for ``--help``: reST markup (``code``, :role:`x`, **bold**) as plain text."""
    if doc is None:
        return None
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    text = text.replace("``", "'").replace("**", "")
    return text
