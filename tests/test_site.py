"""The documentation site opens from disk: every guide page by a click, and the site's search.

A newcomer opens ``site/index.html`` without a server (``file://``). With directory URLs a link
such as ``guide/runs/`` showed Chromium's file listing, and the search index, fetched by a web
worker, never loaded; mkdocs.yml's offline plugin makes every link a page and the index a script.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_replay import browser  # noqa: F401  (the module's headless chromium)

ROOT = Path(__file__).resolve().parent.parent


def _guide_pages() -> list[str]:
    """The Guide section of mkdocs.yml's nav: each page's source (``guide/runs.md``, ...)."""

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("tag:", lambda loader, suffix, node: None)  # !!python/name tags
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    (guide,) = [entry["Guide"] for entry in nav if isinstance(entry, dict) and "Guide" in entry]
    return [next(iter(page.values())) for page in guide]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``make docs`` builds it (strict), into a scratch directory."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def test_every_guide_page_opens_from_disk_by_a_click(browser: Any, site: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    pages = _guide_pages()
    assert len(pages) >= 10, pages
    for source in pages:
        target = source.removesuffix(".md") + ".html"
        browser.get((site / "index.html").as_uri())
        links = [
            a for a in browser.find_elements(By.CSS_SELECTOR, "a[href]")
            if (a.get_attribute("href") or "").endswith("/" + target)
        ]  # fmt: skip
        assert links, f"no link to {target} on the home page"
        browser.execute_script("arguments[0].click()", links[0])
        assert browser.current_url == (site / target).as_uri(), (source, browser.current_url)
        assert "Index of" not in browser.title, source  # a page, not a file listing
        headings = browser.find_elements(By.CSS_SELECTOR, "article h1")
        assert headings and headings[0].text.strip(), f"{target}: no heading"


def test_the_search_finds_a_word_from_disk(browser: Any, site: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get((site / "index.html").as_uri())
    box = browser.find_element(By.CSS_SELECTOR, "input.md-search__input")  # in the header (wide window)
    WebDriverWait(browser, 10).until(lambda d: box.is_enabled() and box.is_displayed())
    box.click()
    box.send_keys("wormhole")
    results = WebDriverWait(browser, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item") or False
    )
    texts = " ".join(r.text.lower() for r in results)
    assert "wormhole" in texts, texts[:500]
