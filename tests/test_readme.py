"""The README's links and pictures are files of this checkout, and ``make demo``'s command runs.

Its commands, with the Guide pages', run in tests/test_guides.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


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
