"""Every command of the README and of the Guide pages runs as written, in a fresh shell, from a
scratch folder, and leaves the checkout as it was (``git status``).

Each page's ``sh`` blocks run in order in a scratch folder of their own (a page's later commands
read what its earlier ones wrote), through ``bash -c`` with the venv's ``bin`` first on PATH (the
Guide's bare ``meshcast``) and ``.venv`` and ``examples`` linked to the checkout's (the README's
``.venv/bin/meshcast`` and ``examples/...``: the README says how they resolve from elsewhere).
A command that cannot run here is named in :data:`NOT_HERE` with the reason and what covers it, so
a new command that nothing runs fails :func:`test_every_command_runs_here_or_says_why_not`.

Slow and marked; the pages with containers also need Docker and the image, the ones with node
processes a broker (skipped without them, failing under CI's MESHCAST_REQUIRE_*). In CI's run on
the 2-core machine (6 Dec 2026, `.ci/run`): README 74 s, runtimes 50 s, load 39 s, deploy 33 s,
every other page under 30 s.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests._env import need_broker, need_docker, need_image
from tests.test_plugins import EXAMPLE, install

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
IMAGE = os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest")
PLUGIN_INSTALL = ".venv/bin/pip install --no-deps -e examples/meshcast-example-plugin"

SWARM_LAB = (
    "tests/test_swarm_runs.py runs the same lab (up 3 with the image, swarm runs with the lab's hosts, down,"
    " check) with more runs on it: a second lab here would add a minute to CI"
)
NOT_HERE = {
    "make demo": "tests/test_readme.py::test_demo_runs runs `meshcast demo`",
    "make test": "CI (.ci/run) runs it; it is this suite",
    "make coverage": "this suite again under a coverage tracer (make test is the same tests without it)",
    "make image": "CI (.ci/run) builds the image before the suite",
    "make compiled": "CI (.ci/run: make test-compiled builds it, then runs the fast tests on it)",
    "make plain": "tests/test_compile.py (deploy/compile.py --remove, on a scratch package)",
    "make docs": "CI (.ci/run: mkdocs build --strict); tests/test_site.py builds and browses it",
    "make ab": "CI (.ci/run runs it after the docs); tests/test_ab.py extracts a commit and runs from it",
    "docs/wormhole.md|tar xzf booksim2-src.tgz -C /tmp/bs && make -C /tmp/bs/src": (
        "BookSim2's source is the project's shared reference, not in the checkout (the page says where)"
    ),
    "docs/wormhole.md|.venv/bin/python benchmarks/booksim_speed.py --repeat 3 --booksim /tmp/bs/src/booksim"
    " --config m10b8.cfg > benchmarks/booksim/speed-DATE-plain.json": (
        "needs the BookSim2 build above; the figures it wrote are in benchmarks/booksim/"
    ),
    "apt-get update && apt-get install -y mmdebstrap": "CI (.ci/run) installs it as root",
    "docker compose -f my-compose.yaml build": "compose v2 is not on this machine (v1 lines run)",
    "docker compose -f my-compose.yaml up --abort-on-container-exit --exit-code-from coordinator": (
        "compose v2 is not on this machine; docs/guide/compose.md's v1 line runs the same file"
    ),
    "docker compose -f my-compose.yaml down -v --remove-orphans": "compose v2 (the v1 line runs)",
    "docs/deploy.md|ls results/compose/": "follows the v2 lines (the v1 page runs it)",
    "meshcast run ... --runtime processes --broker mqtt://127.0.0.1:1883": "a pattern (...), not a command",
    "python -m node --broker mqtt://broker:1883 --run-id r1 --node 2,3 --listen 0.0.0.0:7000": (
        "a node waits for its coordinator at a broker named broker: "
        "tests/test_processes.py runs `python -m node` nodes"
    ),
    "meshcast node ...": "a pattern (...), not a command",
    "docs/guide/load.md|meshcast load --deployment lab --topology torus:3x3 --algorithms vh --dests 3 "
    "--rates 0.05 --duration 300 --warmup 50 --out results/load": (
        "needs the deployment lab: docs/deploy.md runs the same line after its `meshcast deploy --name lab`"
    ),
    "docs/guide/swarm.md|export DOCKER_HOST=ssh://you@manager-host": (
        "a real swarm's manager: the page's lab block runs on the lab's"
    ),
    "docs/guide/swarm.md|export MESHCAST_SWARM_HOSTS=ssh://you@h1,ssh://you@h2,ssh://you@h3": (
        "a real swarm's hosts: the page's lab block runs the same with the lab's"
    ),
    "docs/guide/swarm.md|deploy/swarm-lab.sh up 3 --image meshcast-local/meshcast:latest": SWARM_LAB,
    "docs/guide/swarm.md|. /tmp/meshcast-swarm-lab/hosts.env && DOCKER_HOST=$LAB_MANAGER "
    "MESHCAST_SWARM_HOSTS=$LAB_DOCKER_HOSTS meshcast run --topology torus:4x4 --algorithm vh "
    "--random-dests 6 --repeat 2 --runtime swarm": SWARM_LAB,
    "docs/guide/swarm.md|deploy/swarm-lab.sh down": SWARM_LAB,
    "docs/guide/swarm.md|deploy/swarm-lab.sh check": SWARM_LAB,
    "docs/guide/swarm.md|meshcast run --topology torus:8x8 --algorithm vh --random-dests 10 --repeat 5 "
    "--runtime swarm --out results/": "needs the real swarm above: the page's lab block runs a swarm run",
}
"""Commands not run here (by command, or by ``page|command`` for one page's), and why."""


def guide_pages() -> list[Path]:
    """The README and the Guide section of the site's navigation (mkdocs.yml), in order."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    guide = next(item["Guide"] for item in nav if isinstance(item, dict) and "Guide" in item)
    return [ROOT / "README.md", *(ROOT / "docs" / next(iter(e.values())) for e in guide)]


def commands(page: Path) -> list[str]:
    """The commands of ``page``'s ``sh`` blocks: continuation lines joined (also inside quotes),
    comments dropped (``#`` outside quotes)."""
    out: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S):
        pending = ""
        for raw in block.splitlines():
            line = pending + raw
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1] + " "
                continue
            pending = ""
            lex = shlex.shlex(line, posix=True, punctuation_chars=False)
            lex.whitespace_split = True
            lex.commenters = "#"
            try:
                words = list(lex)
            except ValueError:  # an open quote: a multi-line command (python -c "...")
                pending = line + "\n"
                continue
            if words:
                out.append(_strip_comment(line).strip())
    return out


def _strip_comment(line: str) -> str:
    """``line`` without a ``#`` comment that stands outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _reason(page: Path, cmd: str) -> str | None:
    key = " ".join(cmd.split())
    rel = page.relative_to(ROOT).as_posix()
    return NOT_HERE.get(f"{rel}|{key}") or NOT_HERE.get(key)


def _runnable_pages() -> list[Path]:
    """The pages with a command to run here (a page without one, such as the experiment-file
    guide, is not a test: CI allows no skip)."""
    return [p for p in guide_pages() if any(_reason(p, c) is None for c in commands(p))]


def test_every_command_runs_here_or_says_why_not() -> None:
    """The parse finds the pages' commands, and every command not run names why."""
    pages = guide_pages()
    assert len(pages) >= 10 and pages[0].name == "README.md"
    every = [(p, c) for p in pages for c in commands(p)]
    assert len(every) >= 60
    assert any("\n" in c for _, c in every)  # the multi-line python -c of the wormhole page
    skipped = [c for p, c in every if _reason(p, c) is not None]
    assert len(skipped) < len(every) // 3
    keys = {" ".join(c.split()) for _, c in every} | {
        f"{p.relative_to(ROOT).as_posix()}|{' '.join(c.split())}" for p, c in every
    }
    stale = [k for k in NOT_HERE if k not in keys]
    assert stale == [], "NOT_HERE names commands no page has"


def _git_status() -> str | None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    proc = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_of_the_page_runs_from_a_scratch_folder(page: Path, tmp_path: Path) -> None:
    cmds = [c for c in commands(page) if _reason(page, c) is None]
    if any("containers" in c or "docker" in c or "swarm" in c for c in cmds):
        need_docker()
        need_image(IMAGE)
    if any("processes" in c for c in cmds):
        need_broker()
    before = _git_status()
    env = dict(
        os.environ,
        COLUMNS="120",
        MESHCAST_STATE_DIR=str(tmp_path / "state"),
        PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    )
    (tmp_path / ".venv").symlink_to(BIN.parent)
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # the tour's experiment files, read-only
    (tmp_path / "deploy").symlink_to(ROOT / "deploy")  # the swarm page's lab script
    try:
        for cmd in cmds:
            if cmd.removeprefix(".venv/bin/") == PLUGIN_INSTALL.removeprefix(".venv/bin/"):
                # what `pip install -e` makes visible, without changing the shared venv
                site = tmp_path / "site"
                source = (EXAMPLE / "meshcast_example_plugin" / "__init__.py").read_text()
                install(site, "meshcast_example_plugin", "yx", source)
                env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
                continue
            proc = subprocess.run(
                ["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
            )
            assert proc.returncode == 0, f"{page.name}: {cmd}\n{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}"
    finally:
        _clean_up(tmp_path, env)
    assert _git_status() == before, f"{page.name}'s commands changed the checkout"


def _clean_up(scratch: Path, env: dict[str, str]) -> None:
    """Whatever a page's commands left running: a compose file's containers, a deployment."""
    if (scratch / "my-compose.yaml").exists() and shutil.which("docker-compose"):
        subprocess.run(
            ["docker-compose", "-f", "my-compose.yaml", "down", "-v", "--remove-orphans", "-t", "2"],
            cwd=scratch, env=env, capture_output=True, timeout=300,
        )  # fmt: skip
    if (scratch / "state").exists():
        subprocess.run(
            [str(BIN / "meshcast"), "destroy", "lab"], cwd=scratch, env=env, capture_output=True, timeout=300
        )
