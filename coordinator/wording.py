"""Words for counts: ``1 multicast``, ``2 multicasts`` (never ``1 multicasts`` or ``multicast(s)``).

Imports nothing of meshcast, so every layer of the coordinator may use it.
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and ``noun`` in the number ``n`` takes: ``plural(1, "multicast") == "1 multicast"``,
    ``plural(3, "delivery", "deliveries") == "3 deliveries"`` (``nouns``: an irregular plural;
    default ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"
