"""Browser fixtures: Playwright driving the machine's Chromium (never a downloaded
browser). Every test here is skipped, with the reason, where either is missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pgtimers.http.settings import HttpSettings
from tests.conftest import Database
from tests.integration.http.conftest import (  # noqa: F401 (basic, basic_roles, runner: fixtures)
    TOKEN,
    Served,
    basic,
    basic_roles,
    runner,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _chromium() -> str | None:
    found = os.environ.get("PGTIMERS_CHROMIUM")
    if found and Path(found).exists():
        return found
    for name in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if Path(name).exists():
            return name
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per module: Playwright's sync API keeps an event loop running in
    this thread while it is open, which later tests' asyncio.run() would trip over."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright; no browser download)")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    pg.on("dialog", lambda dialog: dialog.accept())
    yield pg
    context.close()


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Callable[[Any, str], Path]:
    """shot(page, "step"): a screenshot under test-artifacts/browser/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(pg: Any, step: str) -> Path:
        path = ARTIFACTS / f"{request.node.name}-{step}.png"
        pg.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def console(db: Database) -> Iterator[str]:
    """The console's URL, of an HTTP server with a token serving the test's database."""
    served = Served("127.0.0.1:0", [db.dsn], HttpSettings(token=TOKEN))
    try:
        yield f"http://127.0.0.1:{served.port}/"
    finally:
        served.close()
