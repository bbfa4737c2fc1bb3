"""The coordinator's errors: each carries a message for the user; only ``coordinator.cli`` maps
them to exit statuses (usage 2, failed run 1, interrupted 130/143)."""

from __future__ import annotations


class MeshcastError(Exception):
    """A problem meshcast can describe in one line."""


class UsageError(MeshcastError):
    """Bad input from the user (an option, a path, a plan): nothing was started."""


class RunFailed(MeshcastError):
    """A run that started but could not complete (a lost node, a dead broker, a rule error)."""


class Interrupted(MeshcastError):
    """A run ended by SIGINT or SIGTERM; ``signum`` gives the exit status 128 + signum.

    Whatever had arrived is in ``partial`` (a runtime's RawRun, marked incomplete), or None.
    """

    def __init__(self, signum: int, partial: object = None) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum
        self.partial = partial
