"""What the page benchmarks (bench_jobpage, bench_system) share in headless Chromium: signing in through the
login form, warming the web processes, the script that notes when a page marks itself ready, and counting
the bytes and requests the page needed until a moment (CDP ``Network`` events)."""
from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

VIEWPORT = {"width": 1280, "height": 800}


def mb(count: int) -> str:
    """Bytes in MB (10^6 bytes, as the 2 MB targets) or kB, 3 significant digits."""
    return f"{count / 1e6:.3g} MB" if count >= 100_000 else f"{count / 1e3:.3g} kB"


def ready_recorder(attribute: str) -> str:
    """An init script that sets ``window.__benchReadyAt`` (ms since navigation) when ``<html data-{attribute}>``
    first reads "true"; it runs before any script of the page."""
    dataset = "".join(part.capitalize() if i else part for i, part in enumerate(attribute.split("-")))
    return """
(() => {
  const mark = () => {
    const root = document.documentElement;
    if (root && root.dataset.%s === "true" && window.__benchReadyAt === undefined) window.__benchReadyAt = performance.now();
  };
  new MutationObserver(mark).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-%s"]});
  document.addEventListener("DOMContentLoaded", mark);
})();
""" % (dataset, attribute)


def sign_in(browser, base: str, username: str, password: str) -> dict:
    """Sign in through the login form; the context's cookies, for fresh (cold) contexts."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("form:has(input[name=password]) [type=submit]")
    if "/accounts/login" in page.url:
        raise RuntimeError(f"signing in as {username} failed: still on {page.url}")
    state = context.storage_state()
    context.close()
    return state


def warm_up(state: dict, urls: list[str]) -> None:
    """Ask for each URL twice at once with the session (likely once from each web process), outside the browser:
    each web process's first answers (imports, caches) are not measured."""
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in state["cookies"])

    def get(url: str) -> None:
        request = urllib.request.Request(url, headers={"Cookie": cookie})
        with urllib.request.urlopen(request, timeout=600) as response:
            response.read()

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(get, [url for url in urls for _ in range(2)]))


class NetworkLog:
    """The requests of one page, from CDP: when each was sent and finished, and its bytes on the wire."""

    def __init__(self, context, page):
        self.sent: dict[str, tuple[float, str, str]] = {}
        self.finished: dict[str, tuple[float, int]] = {}
        cdp = context.new_cdp_session(page)
        cdp.on("Network.requestWillBeSent",
               lambda e: self.sent.setdefault(e["requestId"], (e["timestamp"], e["request"]["url"], e.get("type", ""))))
        cdp.on("Network.loadingFinished",
               lambda e: self.finished.__setitem__(e["requestId"], (e["timestamp"], int(e["encodedDataLength"]))))
        cdp.send("Network.enable")

    def document(self, url: str) -> str | None:
        """The request id of the page's own document."""
        return next((rid for rid, (_, u, kind) in self.sent.items() if kind == "Document" and u.startswith(url.split("?")[0])),
                    None)

    def until(self, url: str, ms: float) -> dict:
        """Bytes and requests finished within ``ms`` of the document's request (CDP timestamps are monotonic
        seconds; the document's request is about the navigation's start), the four largest, the HTML's bytes."""
        document = self.document(url)
        origin = self.sent[document][0] if document else min(ts for ts, _, _ in self.sent.values())
        cutoff = origin + ms / 1000 + 0.001
        counted = {rid: size for rid, (ts, size) in self.finished.items() if ts <= cutoff}
        return {"bytes": sum(counted.values()), "requests": sum(1 for ts, _, _ in self.sent.values() if ts <= cutoff),
                "largest": sorted(((size, self.sent.get(rid, (0, "?", ""))[1]) for rid, size in counted.items()), reverse=True)[:4],
                "html_bytes": self.finished.get(document, (0, 0))[1] if document else 0, "origin": origin}
