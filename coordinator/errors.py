"""The coordinator's errors: each carries a message for the user; only ``coordinator.cli`` maps
them to exit statuses (usage 2, failed run 1, interrupted 130/143)."""

from __future__ import annotations


class MeshcastError(Exception):
    """A problem meshcast can describe in one line."""


class UsageError(MeshcastError):
    """Bad input from the user (an option, a path, a plan): nothing was started."""


class RunFailed(MeshcastError):
    """A run that started but could not complete (a lost node, a dead broker, a rule error)."""
