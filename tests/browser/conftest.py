"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright against a live server."""
import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls made by fixtures in the
# same thread are safe because nothing else runs concurrently in it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("BELVEDERE_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]


class PageProblems:
    """Console errors, uncaught exceptions and failed requests seen by one page."""

    def __init__(self, page):
        self.items: list[str] = []
        page.on("console", lambda message: message.type == "error" and self.items.append(f"console: {message.text}"))
        page.on("pageerror", lambda error: self.items.append(f"exception: {error}"))
        page.on("requestfailed", self._request_failed)
        page.on("response", lambda response: response.status >= 400 and self.items.append(f"HTTP {response.status}: {response.url}"))

    def _request_failed(self, request) -> None:
        # ERR_ABORTED is the browser cancelling a load because the page navigated away (a click that
        # leaves the page while an image is still loading): not a fault of the server or the page.
        # Refused connections, resets and timeouts are still problems; HTTP errors are caught above.
        if "ERR_ABORTED" not in (request.failure or ""):
            self.items.append(f"request failed: {request.url} {request.failure}")

    def take(self) -> list[str]:
        items, self.items = self.items, []
        return items


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.problems = PageProblems(page)
    yield page
    context.close()


@pytest.fixture
def screenshot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
