"""benchmarks/ab.py, the A/B guard: a commit extracted runs from its own tree; the CI holds the ratio."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ab() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ab", ROOT / "benchmarks" / "ab.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_ci_of_a_ratio_holds_it_and_narrows_with_agreeing_rounds() -> None:
    ab = _ab()
    a = [1.0, 1.1, 0.9, 1.05, 0.95]
    low, high = ab.ratio_ci(a, [2 * x for x in a])
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)  # every round says exactly 2
    low, high = ab.ratio_ci(a, [1.2, 0.8, 1.3, 0.9, 1.0])
    assert low < 1.0 < high


def test_a_commit_is_extracted_and_runs_from_its_own_tree(tmp_path: Path) -> None:
    ab = _ab()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert ab.extract("HEAD", tmp_path) == head.stdout.strip()
    assert (tmp_path / "coordinator" / "cli" / "__init__.py").is_file()
    ab.check_source(tmp_path)  # raises if the editable install shadowed the extracted tree
    assert ab.cpu_of(tmp_path, "import coordinator") > 0


def test_the_baseline_names_a_commit_and_an_unknown_ref_is_refused(tmp_path: Path) -> None:
    ab = _ab()
    first = (ROOT / "benchmarks" / "baseline").read_text().split()[0]
    assert len(first) == 40 and int(first, 16) >= 0
    with pytest.raises(LookupError, match="no commit"):
        ab.extract("no-such-ref", tmp_path)
