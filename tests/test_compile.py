"""The opt-in compiled build: what finds it, what refuses a stale one, what removes it.

`make compiled` itself runs in CI (`make test-compiled`, after `make test`); these tests work on a
scratch package so they hold on either build.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import cache
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

import pytest

from node import StaleBuild, check_build, compiled_modules

ROOT = Path(__file__).resolve().parent.parent
SUFFIX = EXTENSION_SUFFIXES[0]


@cache
def _compile_script() -> ModuleType:
    """deploy/compile.py as a module (loaded once)."""
    spec = importlib.util.spec_from_file_location("meshcast_compile", ROOT / "deploy" / "compile.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _package(tmp_path: Path) -> Path:
    """A package with one 'compiled' module (an extension file beside its source), one plain."""
    pkg = tmp_path / "node"
    (pkg / "routing").mkdir(parents=True)
    for name in ("__init__.py", "engine.py", "actor.py", "routing/tree.py"):
        (pkg / name).write_text("")
    for name in ("engine", "routing/tree"):
        (pkg / f"{name}{SUFFIX}").write_bytes(b"")
    (pkg / f"_mypyc__mypyc{SUFFIX}").write_bytes(b"")  # the shared runtime: no source of its own
    return pkg


def _age(path: Path, seconds: float) -> None:
    st = path.stat()
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


def test_compiled_modules_pairs_each_extension_with_its_source(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    found = compiled_modules(pkg)
    assert found == {
        "node/engine.py": pkg / f"engine{SUFFIX}",
        "node/routing/tree.py": pkg / f"routing/tree{SUFFIX}",
    }


def test_a_source_newer_than_its_extension_is_refused_by_name(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    _age(pkg / "engine.py", 10)  # sources older than their extensions: a fresh build
    _age(pkg / "routing/tree.py", 10)
    check_build(pkg)
    _age(pkg / f"routing/tree{SUFFIX}", 60)  # the source was edited after the build
    with pytest.raises(StaleBuild, match=r"node/routing/tree\.py changed after `make compiled`"):
        check_build(pkg)


def test_this_checkout_is_one_build_or_the_other() -> None:
    """Either nothing is compiled, or every module deploy/compile.py lists is (and up to date)."""
    found = compiled_modules() | compiled_modules(ROOT / "coordinator")
    check_build()
    check_build(ROOT / "coordinator")
    if found:
        assert sorted(found) == sorted(_compile_script().MODULES)


def test_plain_removes_every_extension_and_keeps_the_sources(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    gone = _compile_script().remove(tmp_path)
    assert len(gone) == 3
    assert not list(pkg.rglob(f"*{SUFFIX}"))
    assert sorted(p.name for p in pkg.rglob("*.py")) == ["__init__.py", "actor.py", "engine.py", "tree.py"]


def test_the_compile_script_refuses_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert _compile_script().main(["--fast"]) == 2
    assert "usage: compile.py [--remove]" in capsys.readouterr().err
