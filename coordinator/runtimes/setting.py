"""A run setting's command-line face, kept on its :class:`~coordinator.runtimes.records.RunSettings`
field: flag, help, range, unit and choices.

The command line's options, their range checks, the experiment files (which read the options) and
the generated CLI reference all derive from these, so a new setting is one field::

    hop_limit: int | None = setting(None, "--hop-limit", "drop packets beyond this many hops",
                                    low=1, high=MAX_COUNT, unit="hops")
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["INT64", "MAX_COUNT", "MAX_STEPS", "MAX_WALL_S", "Setting", "number", "setting", "settings_of"]

INT64 = 2**63 - 1
"""The largest integer the wire carries (msgpack int64)."""
MAX_STEPS = 10**9
MAX_WALL_S = 7 * 24 * 3600.0
MAX_COUNT = 10**6
"""The largest count a setting takes (buffers, flits, hops, shards, cycles)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """How one setting is given and checked. ``flag`` None: no option of its own (a composite such
    as the link model, or one whose choices depend on the command, added by the command)."""

    flag: str | None
    help: str
    low: float | None = None
    high: float | None = None
    unit: str | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    group: str | None = None
    """The option group it is listed under (None: the command's own options)."""
    unset: bool = False
    """The option's default is None: the value then follows from other settings (its help says how)."""
    kind: type | None = None
    """The option's type where it differs from the field's (``--ts`` is a float for the timing report)."""

    def describe(self) -> str:
        """The help line with its range and unit (the CLI's formatter adds the default)."""
        if self.low is None or self.high is None:
            return self.help
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.help} ({number(self.low)} to {number(self.high)}{unit})"


def number(x: float) -> str:
    """``x`` as a reader writes it: 2^63-1, 1,000,000, 0.001."""
    if x == INT64:
        return "2^63-1"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def setting(default: Any, flag: str | None, help: str, **meta: Any) -> Any:
    """A dataclass field with ``default`` whose metadata is its :class:`Setting`."""
    return dataclasses.field(default=default, metadata={"setting": Setting(flag, help, **meta)})


def settings_of(cls: Any) -> list[tuple[dataclasses.Field[Any], Setting]]:
    """The fields of dataclass ``cls`` that carry a :class:`Setting`, in their order."""
    return [(f, f.metadata["setting"]) for f in dataclasses.fields(cls) if "setting" in f.metadata]
