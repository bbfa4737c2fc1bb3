"""The seed papers' reproductions, one module each, found by name (``meshcast reproduce NAME``).

The contract a module meets is written in :mod:`coordinator.reproduce.framework`. Modules whose
names start with ``_`` and ``framework`` are helpers, not reproductions. A module that fails to
import is reported when ``reproduce`` runs; it does not break the rest of the command line.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from coordinator.reproduce.framework import ALWAYS, COMMON, Context, Option

__all__ = ["load_errors", "reproductions"]


@dataclass(frozen=True, slots=True)
class Reproduction:
    """A registered reproduction: its name, one-line summary, default repeat, options and module."""

    name: str
    summary: str
    default_repeat: int
    module: ModuleType

    @property
    def options(self) -> tuple[Option, ...]:
        """Every option: the common ones it uses, then its own."""
        uses = ALWAYS + tuple(getattr(self.module, "USES", ()))
        return tuple(COMMON[u] for u in COMMON if u in uses) + tuple(getattr(self.module, "OPTIONS", ()))

    def run(self, args: Any, ctx: Context | None = None) -> int:
        return int(self.module.run(args, ctx or Context()))


#: Modules that could not be loaded, as "module: cause" lines.
load_errors: list[str] = []
_registry: dict[str, Reproduction] | None = None


def _load(mod: ModuleType) -> Reproduction:
    for attr in ("NAME", "run"):
        if not hasattr(mod, attr):
            raise TypeError(f"defines no {attr}")
    name = mod.NAME
    if not isinstance(name, str) or not name:
        raise TypeError(f"NAME must be a non-empty string, got {name!r}")
    doc = (mod.__doc__ or "").strip().splitlines()
    summary = getattr(mod, "SUMMARY", None) or (doc[0] if doc else name)
    return Reproduction(name, str(summary), int(getattr(mod, "DEFAULT_REPEAT", 100)), mod)


def reproductions() -> dict[str, Reproduction]:
    """Every reproduction of this package by name (loaded once; duplicate names refused)."""
    global _registry
    if _registry is None:
        found: dict[str, Reproduction] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            if info.name.startswith("_") or info.name == "framework":
                continue
            modname = f"{__name__}.{info.name}"
            try:
                rep = _load(importlib.import_module(modname))
            except Exception as exc:  # a broken contribution must not take the CLI down
                load_errors.append(f"{modname}: {type(exc).__name__}: {exc}")
                continue
            if rep.name in found:
                load_errors.append(
                    f"{modname}: reproduction name {rep.name!r} is already taken by "
                    f"{found[rep.name].module.__name__}"
                )
                continue
            found[rep.name] = rep
        _registry = found
    return _registry
