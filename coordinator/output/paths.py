"""Output paths checked before a run starts: a run that cannot write its results must not start.

``prepare_out_dir`` is shared by every command with an ``--out`` directory (run, sweep, load,
reproduce); ``prepare_out_file`` by those that write one file (show).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from coordinator.errors import UsageError

__all__ = ["prepare_out_dir", "prepare_out_file"]


def _probe(directory: Path, flag: str) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".meshcast-probe-", dir=directory)
    except OSError as exc:
        raise UsageError(f"{flag} {directory}: cannot write there ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(name)


def prepare_out_dir(path: str | os.PathLike[str], flag: str = "--out", force: bool = True) -> Path:
    """Create directory ``path`` (and its parents) and check it is writable, or a UsageError.

    Without ``force`` a directory that already holds files is refused: results never clobber
    earlier results unless the user says so (``--force``).
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{flag} {out}: exists and is not a directory")
    if not force and out.is_dir() and any(out.iterdir()):
        raise UsageError(f"{flag} {out}: not empty (choose a new directory, or add --force to write into it)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {out}: cannot create the directory ({exc.strerror or exc})") from None
    _probe(out, flag)
    return out


def prepare_out_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Check file ``path`` can be written (its directory created and writable), or a UsageError."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{flag} {out}: is a directory, not a file")
    prepare_out_dir(out.parent if str(out.parent) else Path("."), flag)
    return out
