"""The containers runtime's network modes, apart from the runtime: the command line offers them
without importing Docker's plumbing (a command imports only what it runs)."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_NETWORK", "NETWORK_ENV", "NETWORK_MODES"]

NETWORK_ENV: Final = "MESHCAST_CONTAINER_NETWORK"
"""The fallback of ``--network`` (``RunSettings.network``) for plumbing that builds a run without
the CLI (benchmarks, scripts): read only when the option is not given."""
NETWORK_MODES: Final = ("bridge", "pod", "host")
"""``bridge`` (the default: a compose network, a namespace and an address per container), ``pod``
(one private namespace for the run's containers) or ``host`` (the host's namespace)."""
DEFAULT_NETWORK: Final = "bridge"
