"""Whether a run completed, honestly: every destination reached exactly once, no rule or node error.

A run whose runtime finished cleanly can still be incomplete: a rule that raised dropped its
packets (the destinations behind them were never reached), a node did not know the algorithm,
a node was lost. :func:`completion` gives the verdict and one line per kind of cause.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from coordinator.analysis.result_types import MulticastResult
from coordinator.wording import plural

__all__ = ["POLICY_DROPS", "RULE_ERRORS", "completion"]

RULE_ERRORS = {
    "bad-injection": "rule error at the source",
    "bad-header": "rule error on the way",
    "bad-send": "rule sent on a port that is not a link",
    "unknown-algorithm": "unknown algorithm on a node",
}
"""Node error kinds caused by the routing rule (or its absence on a node)."""
POLICY_DROPS = frozenset({"hop-limit", "buffer-full"})
"""Drops the user asked for (--hop-limit, --policy drop): counted, not errors of the run by themselves."""


def completion(
    incomplete: Sequence[str], errors: Iterable[Mapping[str, Any]], records: Sequence[MulticastResult]
) -> tuple[bool, list[str]]:
    """``(complete, causes)``: the runtime's own causes, then one line per kind of shortfall or error."""
    causes = list(incomplete)
    missing = [r for r in records if r.missing]
    if missing:
        n = sum(len(r.missing) for r in missing)
        causes.append(f"{plural(n, 'destination')} of {plural(len(missing), 'multicast')} not reached")
    dup = [r for r in records if r.duplicates]
    if dup:
        n = sum(r.duplicates for r in dup)
        deliveries = plural(n, "duplicate delivery", "duplicate deliveries")
        causes.append(f"{deliveries} in {plural(len(dup), 'multicast')}")
    by_kind: Counter[str] = Counter()
    first: dict[str, str] = {}
    for e in errors:
        kind = str(e.get("kind", "error"))
        if kind in POLICY_DROPS or kind in ("undelivered", "duplicate", "stray"):
            continue
        by_kind[kind] += 1
        first.setdefault(kind, str(e.get("cause", "")))
    for kind, n in sorted(by_kind.items()):
        what = RULE_ERRORS.get(kind, f"node error ({kind})")
        causes.append(f"{what}: {plural(n, 'time')}, first: {first[kind]}")
    return not causes, causes
