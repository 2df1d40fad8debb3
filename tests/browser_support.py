"""A real browser for the web tests: Debian's Chromium driven by Playwright.

Import the fixtures into a test module (``from browser_support import browser, page``).
On a machine without Chromium the tests skip with the command that installs it;
``.ci/run`` installs it, so CI always runs them. Playwright's own browser download is
never used: it cannot work offline, and the system package is what a reviewer has.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = ("browser", "chromium_path", "page", "screenshot_dir")

INSTALL_HINT = (
    "Chromium is not installed: `apt-get update && apt-get install -y chromium` "
    "(Debian/Ubuntu), or set VSH_AI_CHROMIUM to a Chromium binary; .ci/run installs it"
)


def chromium_path() -> str | None:
    """The Chromium binary to drive: ``$VSH_AI_CHROMIUM``, else ``chromium`` on PATH."""
    configured = os.environ.get("VSH_AI_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where tests save screenshots for review: ``$VSH_AI_SCREENSHOTS`` or a temp folder."""
    configured = os.environ.get("VSH_AI_SCREENSHOTS")
    folder = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module (skips, with the install hint, if missing)."""
    binary = chromium_path()
    if binary is None:
        pytest.skip(INSTALL_HINT)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=binary, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context (no cookies shared between tests) and one page in it."""
    context = browser.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()
