"""Routing rules, one module per algorithm family, and the registry that names them.

Each :class:`Algorithm` declares the parameters it reads (:class:`Param`: name, type, default,
range, help); :meth:`Registry.check_params` checks a user's ``--param`` values against them.

Third-party rules register through the entry-point group ``meshcast.algorithms``: each entry
point loads an :class:`Algorithm` or an iterable of them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from importlib import metadata
from types import ModuleType
from typing import Any

from node.routing.base import (
    Algorithm,
    Forward,
    Header,
    HeaderError,
    Param,
    Params,
    PlanError,
    Send,
    check_params,
)

__all__ = [
    "Algorithm",
    "Forward",
    "Header",
    "HeaderError",
    "Param",
    "PlanError",
    "Registry",
    "Send",
    "UnknownAlgorithm",
    "registry",
]

_SUPPORT_MODULES = frozenset({"base", "tree", "zones"})
ENTRY_POINT_GROUP = "meshcast.algorithms"


def _families() -> list[ModuleType]:
    """Every module of this package that defines ``ALGORITHMS`` (one module per family)."""
    mods = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _SUPPORT_MODULES or info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "ALGORITHMS"):
            mods.append(mod)
    return mods


class UnknownAlgorithm(KeyError):
    """An algorithm name that no rule is registered under."""

    def __str__(self) -> str:
        return str(self.args[0])


class Registry:
    """Algorithms by name; refuses a duplicate name."""

    def __init__(self) -> None:
        self._by_name: dict[str, Algorithm] = {}
        self._order: tuple[str, ...] | None = None
        self.forwards: dict[str, Any] = {}
        """Each rule's forward function by name, filled on a node's first packet of that rule and
        shared by every node of the process (a registered name never changes): a sparse run's
        node takes one packet or two, and each looked its rule up anew."""

    def register(self, algorithm: Algorithm) -> None:
        if algorithm.name in self._by_name:
            raise ValueError(f"algorithm {algorithm.name!r} is already registered")
        self._by_name[algorithm.name] = algorithm
        self._order = None

    def in_order(self) -> tuple[str, ...]:
        """The names in iteration order (family, name), sorted once per set of algorithms: every node
        of a run lists them in its hello."""
        if self._order is None:
            self._order = tuple(a.name for a in self)
        return self._order

    def get(self, name: str) -> Algorithm:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name))
            raise UnknownAlgorithm(f"unknown algorithm {name!r}; known: {known}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Algorithm]:
        return iter(sorted(self._by_name.values(), key=lambda a: (a.family, a.name)))

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def check_params(self, name: str, values: Params) -> dict[str, Any]:
        """``values`` checked against algorithm ``name``'s declared parameters (PlanError if bad)."""
        return check_params(self.get(name), values, self._by_name)


def _load_entry_points(reg: Registry) -> list[str]:
    """Register third-party algorithms; return one message per entry point that failed."""
    problems: list[str] = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            algs = [obj] if isinstance(obj, Algorithm) else list(obj)
            for a in algs:
                if not isinstance(a, Algorithm):
                    raise TypeError(f"{a!r} is not an Algorithm")
                reg.register(a)
        except Exception as exc:  # a broken plug-in must not break the built-in rules
            problems.append(f"entry point {ep.name!r}: {exc}")
    return problems


def _build() -> tuple[Registry, list[str]]:
    reg = Registry()
    families = _families()
    for family in families:
        for a in family.ALGORITHMS:
            reg.register(a)
    problems = _load_entry_points(reg)
    for family in families:  # rules that wrap other rules look them up here, not by importing us
        if hasattr(family, "bind_registry"):
            family.bind_registry(reg.get)
    return reg, problems


registry, plugin_errors = _build()
