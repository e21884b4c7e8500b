"""The system page (``/system/``) of the demo machine in headless Chromium, cold cache, against the server
``make run`` starts: all 2,688 nodes coloured by the running jobs' S.

The installation is ``make run``'s (``manage.py migrate`` and ``manage.py demo``) in a data directory of its
own (never ``var/``); gunicorn serves it with ``[program:web]``'s command line (bench/portal_server.py), the
demo researcher signs in through the login form, and each page is loaded in a fresh browser context (empty
cache) after the server answered it once outside the browser:

* **bytes**: the sum of CDP ``Network.loadingFinished`` ``encodedDataLength`` of every request finished
  before the page was interactive, and the number of requests (MB = 10^6 bytes, as the 2 MB target);
* **interactive**: when ``<html data-system-page-ready="true">`` was set (the page sets it once the map has
  drawn every node coloured by S); the load event for the floor;
* **colouring switch**: the "limiter" button until the map's ``data-colour`` says so, without navigation.

The floor is the job list (``/jobs/``, the same demo) loaded the same way in the same run, to its load event.
Targets: <= 2 MB transferred, interactive <= 2 s.

Run alone: ``python bench/bench_system.py [--data-dir DIR] [--repeats R]``; a kept ``--data-dir`` (or
``BENCH_SYSTEM_DATA_DIR`` under ``make bench``) reuses the demo built there before.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/bench_system.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.browser import VIEWPORT, NetworkLog, mb, ready_recorder, sign_in, warm_up
from bench.common import Figure
from bench.portal_server import BASE_DIR, PortalServer, manage, portal_python, print_table

USERNAME, PASSWORD = "demo", "belvedere-demo"  # the demo researcher (apps/accounts/demo.py)
REPEATS = 3
OWNED = "BENCH-SYSTEM-OWNED"
TARGET_BYTES, TARGET_INTERACTIVE_S = 2_000_000, 2.0
CHROMIUM = os.environ.get("BELVEDERE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [  # the browser tests' flags (tests/browser/conftest.py)
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
READY_TIMEOUT_S = 120.0

READY_RECORDER = ready_recorder("system-page-ready")

SWITCH = """
async () => {
  window.__benchMarker = "same-window";
  const map = document.getElementById("system-map");
  const started = performance.now();
  document.querySelector(".colour-mode[data-colour=limiter]").click();
  const ok = await new Promise(resolve => {
    if (map.dataset.colour === "limiter") return resolve(true);
    const observer = new MutationObserver(() => { if (map.dataset.colour === "limiter") { observer.disconnect(); resolve(true); } });
    observer.observe(map, {attributes: true, attributeFilter: ["data-colour"]});
    setTimeout(() => { observer.disconnect(); resolve(false); }, 30000);
  });
  return {ok, ms: performance.now() - started, coloured: map.data[0].marker.color.length};
}
"""

COUNTS = """
from apps.jobs.models import Job
from apps.topology.models import Node
import json
print(json.dumps({"nodes": Node.objects.count(), "running": Job.objects.filter(state="RUNNING").count()}))
"""


def prepare(data_dir: Path) -> dict:
    """``make run``'s preparation (migrate, demo) in ``data_dir``; the node and running-job counts."""
    data_dir = Path(data_dir)
    if data_dir.resolve() == (BASE_DIR / "var").resolve():
        raise RuntimeError("the system bench never runs on var/: choose another data directory")
    if data_dir.exists() and any(data_dir.iterdir()) and not (data_dir / OWNED).exists():
        raise RuntimeError(f"{data_dir} holds files this bench did not make; choose an empty or new directory")
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / OWNED).write_text("made by bench/bench_system.py (manage.py demo)\n")
    manage(data_dir, "migrate", "--noinput")
    manage(data_dir, "demo")  # as make run: builds once, then says it is loaded
    return portal_python(data_dir, COUNTS)


def cold_load(browser, state: dict, url: str, wait_ready: bool, switch: bool = False, shot: Path | None = None) -> dict:
    """One load of ``url`` in a fresh context (empty cache): bytes and requests until interactive, load event,
    interactive, and (``switch``) an in-place colouring switch."""
    context = browser.new_context(viewport=VIEWPORT, storage_state=state)
    page = context.new_page()
    page.add_init_script(READY_RECORDER)
    network = NetworkLog(context, page)
    try:
        response = page.goto(url, wait_until="load", timeout=300_000)
        if response is None or response.status != 200:
            raise RuntimeError(f"{url} answered {response.status if response else 'nothing'}")
        load_ms = page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
        ready_ms = load_ms
        if wait_ready:
            page.wait_for_function("() => window.__benchReadyAt !== undefined", timeout=1000 * READY_TIMEOUT_S)
            ready_ms = page.evaluate("() => window.__benchReadyAt")
        page.wait_for_timeout(200)  # CDP events of requests finished before that moment
        counted = network.until(url, ready_ms)
        result = {"bytes": counted["bytes"], "requests": counted["requests"], "load_s": load_ms / 1000,
                  "interactive_s": ready_ms / 1000, "largest": counted["largest"]}
        if os.environ.get("BENCH_SYSTEM_DEBUG"):
            print("  requests:", [(round(ts - counted["origin"], 3), u.split("/", 3)[-1][:40]) for ts, u, _ in network.sent.values()],
                  file=sys.stderr)
        if wait_ready:
            result["timing"] = page.evaluate("() => document.documentElement.dataset.systemTiming || ''")
            result["coloured_nodes"] = page.evaluate("() => document.getElementById('system-map').data[0].marker.color.length")
        if shot is not None:  # the page as it opens: every node coloured by S
            page.screenshot(path=str(shot), full_page=True)
        if switch:
            navigations = page.evaluate("() => performance.getEntriesByType('navigation').length")
            outcome = page.evaluate(SWITCH)
            same = page.evaluate("() => window.__benchMarker === 'same-window'") and \
                page.evaluate("() => performance.getEntriesByType('navigation').length") == navigations
            result["switch"] = {"ok": bool(outcome["ok"] and same), "seconds": outcome["ms"] / 1000}
        return result
    finally:
        context.close()


def measure(data_dir: Path, repeats: int = REPEATS, shot: Path | None = None) -> list[Figure]:
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    counts = prepare(data_dir)
    print(f"  bench_system: demo ready in {data_dir} ({time.perf_counter() - started:.0f} s; {counts['nodes']:,} nodes, "
          f"{counts['running']} running jobs)", file=sys.stderr, flush=True)
    with PortalServer(data_dir) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            state = sign_in(browser, server.base, USERNAME, PASSWORD)
            page_url, list_url = f"{server.base}/system/", f"{server.base}/jobs/"
            warm_up(state, [list_url, page_url, f"{server.base}/system/data.json"])
            pages, listing = [], []
            for number in range(repeats):  # alternating, so both pages meet the same machine
                listing.append(cold_load(browser, state, list_url, wait_ready=False))
                last = number == repeats - 1
                pages.append(cold_load(browser, state, page_url, wait_ready=True, switch=last, shot=shot if last else None))
        finally:
            browser.close()
        workers = server.workers_threads
    for load in pages:
        print(f"  bench_system: /system/ {mb(load['bytes'])}, {load['requests']} requests, load {load['load_s']:.2f} s, "
              f"interactive {load['interactive_s']:.2f} s ({load['timing']}), {load['coloured_nodes']:,} nodes coloured; largest: "
              + ", ".join(f"{mb(size)} {url.split('//', 1)[-1].split('/', 1)[-1][:50]}" for size, url in load["largest"]),
              file=sys.stderr, flush=True)
    median = lambda loads, key: statistics.median(load[key] for load in loads)  # noqa: E731
    size, list_size = int(median(pages, "bytes")), int(median(listing, "bytes"))
    floor_name = "job list (/jobs/) load event, cold, same run"
    switch = pages[-1]["switch"]
    nodes = pages[-1]["coloured_nodes"]
    return [
        Figure(f"system page, {nodes:,} nodes, cold: load event", median(pages, "load_s"), median(listing, "load_s"), floor_name,
               f"{mb(size)} in {int(median(pages, 'requests'))} requests until interactive "
               f"({'within' if size <= TARGET_BYTES else 'OVER'} the 2 MB target); job list {mb(list_size)}"),
        Figure(f"system page, {nodes:,} nodes, cold: interactive", median(pages, "interactive_s"), median(listing, "load_s"),
               floor_name, f"every node coloured by S; target <= {TARGET_INTERACTIVE_S:g} s "
               f"({'met' if median(pages, 'interactive_s') <= TARGET_INTERACTIVE_S else 'MISSED'}; {workers}, "
               f"median of {len(pages)} cold loads); colouring switch to limiter "
               + (f"{switch['seconds'] * 1000:.0f} ms in place" if switch["ok"] else "FAILED or navigated")),
    ]


def chromium_available() -> bool:
    import shutil

    return bool(Path(CHROMIUM).exists() or shutil.which(CHROMIUM))


def run(workdir: Path) -> list[Figure]:
    if not chromium_available():
        print(f"  bench_system: Chromium not found at {CHROMIUM} (apt-get install chromium); nothing measured", flush=True)
        return []
    data_dir = Path(os.environ.get("BENCH_SYSTEM_DATA_DIR") or workdir / "system" / "var")
    return measure(data_dir)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"cold loads of each page (default {REPEATS})")
    parser.add_argument("--data-dir", type=Path, help="keep the installation here (its demo is reused next time)")
    parser.add_argument("--screenshot", type=Path, help="save a full-page screenshot of the last load here")
    args = parser.parse_args(argv[1:])
    if not chromium_available():
        print(f"Chromium not found at {CHROMIUM}", file=sys.stderr)
        return 1
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="belvedere-bench-system-")) / "var"
    figures = measure(data_dir, args.repeats, args.screenshot)
    print()
    print_table(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
