"""Under CI (MESHCAST_REQUIRE_BROKER / _DOCKER / _BROWSER set) no test may skip at all.

The distributed and browser tests already fail instead of skipping when what they need is missing
(tests/_env.py); this catches any other skip, so a green CI run has run every test.
"""

from __future__ import annotations

import os

import pytest

_REQUIRED = ("MESHCAST_REQUIRE_BROKER", "MESHCAST_REQUIRE_DOCKER", "MESHCAST_REQUIRE_BROWSER")


def _required() -> bool:
    return any(os.environ.get(v, "") not in ("", "0") for v in _REQUIRED)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if anything skipped while the distributed tests are required."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    if _required() and skipped and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if reporter is not None:
            reporter.write_line(
                f"ci: {skipped} test(s) skipped while {' / '.join(_REQUIRED)} is set", red=True
            )
