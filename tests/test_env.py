"""The skip policy (tests/_env.py, tests/conftest.py): a test that needs a broker or an engine
skips on a laptop without them, and fails instead when CI asks for them, so CI can never pass by
skipping; under CI any other skip fails the run too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _env

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")


@pytest.mark.parametrize("variable", ["MESHCAST_REQUIRE_BROKER", "MESHCAST_REQUIRE_DOCKER"])
def test_a_missing_need_skips_unless_ci_requires_it(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    for unset in ("", "0"):
        monkeypatch.setenv(variable, unset)
        with pytest.raises(pytest.skip.Exception, match="no engine here"):
            _env._missing("no engine here", variable)
    monkeypatch.setenv(variable, "1")
    with pytest.raises(pytest.fail.Exception, match=f"no engine here, and {variable} is set"):
        _env._missing("no engine here", variable)


def test_a_missing_broker_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_env.shutil, "which", lambda _: None)
    monkeypatch.setattr(_env.os, "access", lambda *_: False)
    monkeypatch.setenv("MESHCAST_REQUIRE_BROKER", "1")
    with pytest.raises(pytest.fail.Exception, match="mosquitto is not installed"):
        _env.need_broker()


@pytest.mark.parametrize(("required", "status"), [("", 0), ("1", 1)])
def test_under_ci_any_skip_fails_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, required: str, status: int
) -> None:
    """tests/conftest.py turns a run with a skip into a failed run while CI's variables are set."""
    for other in ("MESHCAST_REQUIRE_BROKER", "MESHCAST_REQUIRE_BROWSER"):  # CI sets them all
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv("MESHCAST_REQUIRE_DOCKER", required)
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile("import pytest\n\ndef test_skips():\n    pytest.skip('no engine')\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    assert result.ret == status
    if required:
        result.stdout.fnmatch_lines(["*ci: 1 test(s) skipped while*"])
