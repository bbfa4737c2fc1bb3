"""Every example command in the README runs as written (in a scratch directory).

``meshcast`` lines are run here; any other command in a ``sh`` block must be named in
:data:`COVERED_ELSEWHERE` with the test or CI step that runs it, so a new README command that
nothing runs fails this test.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests._env import need_broker, need_docker, need_image
from tests.test_plugins import EXAMPLE, install

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
IMAGE = os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest")

COVERED_ELSEWHERE = {
    "make demo": "runs `meshcast demo` (run below as test_demo_runs)",
    "make test": "CI (.ci/run)",
    "make image": "CI (.ci/run)",
    "make compiled": "CI (.ci/run: make test-compiled builds it, then runs the fast tests on it)",
    "make plain": "tests/test_compile.py (deploy/compile.py --remove, on a scratch package)",
    "make docs": "CI (.ci/run: mkdocs build --strict)",
    "pip install --no-deps -e examples/meshcast-example-plugin": "tests/test_plugins.py (and below)",
}
PLUGIN_INSTALL = "pip install --no-deps -e examples/meshcast-example-plugin"


def _commands() -> list[str]:
    """Commands of the README's ``sh`` blocks, continuation lines joined, comments dropped."""
    text = (ROOT / "README.md").read_text()
    out: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def _meshcast(cmd: str) -> bool:
    return cmd.startswith(("meshcast ", ".venv/bin/meshcast "))


def _runnable(cmd: str) -> str:
    rest = cmd.split(" ", 1)[1]
    return f"{shlex.quote(str(BIN / 'meshcast'))} {rest}"


def test_the_readme_has_examples_and_every_other_command_is_covered() -> None:
    cmds = _commands()
    assert sum(_meshcast(c) for c in cmds) >= 10
    others = [c.removeprefix(".venv/bin/") for c in cmds if not _meshcast(c)]
    uncovered = [c for c in others if c not in COVERED_ELSEWHERE]
    assert uncovered == [], "README commands that no test runs"


@pytest.mark.slow
def test_every_meshcast_example_in_the_readme_runs(tmp_path: Path) -> None:
    cmds = [c for c in _commands() if _meshcast(c)]
    if any("--runtime processes" in c or "--runtime=processes" in c for c in cmds):
        need_broker()
    if any("containers" in c for c in cmds):
        need_docker()
        need_image(IMAGE)
    env = dict(os.environ, COLUMNS="120", MESHCAST_STATE_DIR=str(tmp_path / "state"))
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the tour's experiment files, read-only
    for cmd in _commands():
        if cmd.removeprefix(".venv/bin/") == PLUGIN_INSTALL:
            # what `pip install -e` makes visible: the package and its entry point (tests/test_plugins.py)
            site = tmp_path / "site"
            source = (EXAMPLE / "meshcast_example_plugin" / "__init__.py").read_text()
            install(site, "meshcast_example_plugin", "yx", source)
            env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
            continue
        if not _meshcast(cmd):
            continue
        proc = subprocess.run(
            _runnable(cmd), shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{cmd}\n{proc.stderr[-3000:]}"


def test_the_readme_links_and_pictures_are_files_of_this_checkout() -> None:
    """Every relative link and picture of the README names a file here (the docs site's sources)."""
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to no file"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == [], "README links to files that do not exist"


def test_demo_runs() -> None:
    proc = subprocess.run([str(BIN / "meshcast"), "demo"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()
