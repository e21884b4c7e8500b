"""The job page of a 4,096-GPU job in headless Chromium, cold cache, against the server ``make run`` starts.

The bench job is the one bench_saturation.py scores (1,024 GH200 nodes, 3 h at 10 s, the demo's Megatron
profile with its planted problems), built with its saturation and telemetry products into a data
directory of its own (SQLite, store, products; never ``var/``), with 49 small jobs beside it so the job
list has a full page. gunicorn then serves it with ``make run``'s command line (deploy/supervisord.conf),
a user who owns the job signs in through the login form, and Chromium (Debian's, the browser tests'
flags) loads each page in a fresh context (an empty cache) with the session cookie:

* **bytes**: the sum of ``encodedDataLength`` of CDP ``Network.loadingFinished`` for every request that
  finished before the page was interactive, and the number of requests sent until then;
* **load event** (``loadEventEnd`` of the navigation) and **interactive**: the moment
  ``document.documentElement.dataset.jobPageReady`` became ``"true"`` (the page sets it when the first
  screen and the panels in view have drawn). A page without that marker is taken as interactive at its
  load event, and the output says so;
* **metric switch**: another value chosen in ``#smetric`` until ``#saturation-heatmap`` has
  ``data-rendered-metric`` equal to it, with no navigation (same window, same navigation entries). Where
  the heatmap has no ``data-rendered-metric`` the switch is "not available" (and, where the form still has
  a submit button, the reload it costs today is measured instead, for reference).

The floor is the job list (``/jobs/``, 50 rows) loaded the same way in the same run; the metric switch's
floor is the API requests the switch made, asked again from the page without the cache (the plain heatmap
URL of that metric where it made none): the server's and the network's part of a switch.
Targets: <= 2 MB, interactive <= 2 s, metric switch <= 300 ms.

Run alone: ``python bench/bench_jobpage.py [--nodes N] [--hours H] [--repeats R] [--data-dir DIR]``; a kept
``--data-dir`` (or ``BENCH_JOBPAGE_DATA_DIR`` under ``make bench``) reuses the job built there before.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/bench_jobpage.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.browser import VIEWPORT, NetworkLog, mb, ready_recorder, sign_in, warm_up
from bench.common import Figure
from bench.portal_server import BASE_DIR, PortalServer, manage, portal_env, print_table

NODES, HOURS, REPEATS = 1024, 3.0, 3
USERNAME, PASSWORD = "bench-pages", "bench-pages-password-1"
CLUSTER, JOB_ID = "alps", 4096
LIST_ROWS = 50
OWNED = "BENCH-JOBPAGE-OWNED"
TARGET_BYTES, TARGET_INTERACTIVE_S, TARGET_SWITCH_S = 2_000_000, 2.0, 0.3
CHROMIUM = os.environ.get("BELVEDERE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [  # the browser tests' flags (tests/browser/conftest.py)
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
READY_GRACE_S = 10.0  # how long after the load event a page may take to set its marker before it counts as absent
READY_TIMEOUT_S = 120.0  # a page that announced the marker ("false") must set it within this
SWITCH_TIMEOUT_S = 30.0

# Runs before any script of the page: note when the page marks itself ready.
READY_RECORDER = ready_recorder("job-page-ready")

# One in-place metric switch, timed in the page. Resolves with what happened; never navigates by itself.
SWITCH = """
async ({target, timeoutMs}) => {
  const select = document.querySelector("#smetric");
  const rendered = () => document.querySelector("#saturation-heatmap")?.dataset.renderedMetric;
  window.__benchMarker = "same-window";
  const navigations = performance.getEntriesByType("navigation").length;
  const started = performance.now();
  select.value = target;
  select.dispatchEvent(new Event("input", {bubbles: true}));
  select.dispatchEvent(new Event("change", {bubbles: true}));
  const ok = await new Promise(resolve => {
    if (rendered() === target) return resolve(true);
    const observer = new MutationObserver(() => { if (rendered() === target) { observer.disconnect(); resolve(true); } });
    observer.observe(document.body, {subtree: true, childList: true, attributes: true, attributeFilter: ["data-rendered-metric"]});
    setTimeout(() => { observer.disconnect(); resolve(false); }, timeoutMs);
  });
  return {ok, ms: performance.now() - started, navigations};
}
"""

FETCH = """
async (url) => {
  const started = performance.now();
  const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
  await response.arrayBuffer();
  return {status: response.status, ms: performance.now() - started};
}
"""


# -- the bench job ------------------------------------------------------------------------------------


def build(data_dir: Path, nodes: int, hours: float) -> dict:
    """Build (or reuse) the bench job in ``data_dir``: migrate, reference topology, user, job with its
    Megatron layout, synthetic telemetry, telemetry and saturation products, 49 small jobs. Runs the
    work in a subprocess with Django on that data directory."""
    data_dir = Path(data_dir)
    made = data_dir / "bench-job.json"
    if made.exists():
        info = json.loads(made.read_text())
        if info.get("nodes") == nodes and info.get("hours") == hours:
            manage(data_dir, "migrate", "--noinput")  # the code may have moved on since the job was built
            info["reused"] = True
            return info
    if data_dir.resolve() == (BASE_DIR / "var").resolve():
        raise RuntimeError("the bench job is never built into var/: choose another data directory")
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / OWNED).exists():
            raise RuntimeError(f"{data_dir} holds files this bench did not make; choose an empty or new directory")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / OWNED).write_text("made by bench/bench_jobpage.py; removed and rebuilt when the bench job changes\n")
    import subprocess

    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "build-inside", str(nodes), str(hours)],
                          cwd=BASE_DIR, env=portal_env(data_dir), capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"building the bench job failed ({done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    info = json.loads(done.stdout.strip().splitlines()[-1])
    made.write_text(json.dumps(info))
    info["reused"] = False
    return info


def _build_inside(nodes: int, hours: float) -> dict:
    """In a process whose Django is set up on the bench data directory."""
    import django

    django.setup()
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.ranks.models import JobLayout
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.services import job_telemetry_refresh
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import job_chunks

    started = time.perf_counter()
    quiet = open(os.devnull, "w")
    call_command("migrate", verbosity=0, stdout=quiet)
    call_command("import_topology", "--preset", "alps", stdout=quiet)
    hosts = [f"nid{n:06d}" for n in range(1, nodes + 1)]
    end = timezone.now().replace(microsecond=0)
    start = end - timedelta(seconds=hours * 3600)
    get_user_model().objects.create_user(USERNAME, password=PASSWORD)
    cluster, _ = Cluster.objects.get_or_create(name=CLUSTER)
    job = Job.objects.create(cluster=cluster, job_id=JOB_ID, name="megatron-bench", user_name=USERNAME, account="bench",
                             state="COMPLETED", submit_time=start, start_time=start, end_time=end, node_list=hosts,
                             node_count=nodes, gpus=4 * nodes)
    if nodes * 4 % 32 == 0:
        JobLayout.objects.create(job=job, tp=4, pp=8, dp=4 * nodes // 32, world_size=4 * nodes, tasks_per_node=4, source="sizes")
    Job.objects.bulk_create([
        Job(cluster=cluster, job_id=JOB_ID + 1 + i, name=f"small-{i}", user_name=USERNAME, account="bench", state="COMPLETED",
            submit_time=start - timedelta(hours=i + 1), start_time=start - timedelta(hours=i + 1),
            end_time=start - timedelta(hours=i), node_list=[hosts[i % nodes]], node_count=1, gpus=4)
        for i in range(LIST_ROWS - 1)])
    store = telemetry_store()
    samples = 0
    for chunk in job_chunks("megatron", hosts, start, hours * 3600, seed=11, elapsed_before_s=3600, hosts_per_chunk=64):
        samples += store.write(chunk)
    telemetry = job_telemetry_refresh(job)
    saturation = job_saturation_refresh(job)
    return {"nodes": nodes, "hours": hours, "gpus": 4 * nodes, "cluster": CLUSTER, "job_id": JOB_ID, "samples": samples,
            "telemetry": telemetry.status, "saturation": saturation.status, "build_s": time.perf_counter() - started}


# -- measuring in the browser -----------------------------------------------------------------------------


@dataclass
class Load:
    """One cold load of one page."""
    url: str
    bytes: int
    requests: int
    html_bytes: int
    load_s: float
    interactive_s: float
    marker: str  # "ready" (jobPageReady set), "absent" (no marker: interactive = load event)
    largest: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class PageReport:
    gpus: int
    job: list[Load]
    job_list: list[Load]
    switch: dict
    build: dict
    server: str

    @staticmethod
    def _median(loads: list[Load], key: str) -> float:
        return statistics.median(getattr(load, key) for load in loads)

    def numbers(self) -> dict:
        job, listing = self.job, self.job_list
        return {
            "job_bytes": int(self._median(job, "bytes")), "job_requests": int(self._median(job, "requests")),
            "job_html_bytes": int(self._median(job, "html_bytes")),
            "job_load_s": self._median(job, "load_s"), "job_interactive_s": self._median(job, "interactive_s"),
            "job_marker": "ready" if all(load.marker == "ready" for load in job) else "absent",
            "list_bytes": int(self._median(listing, "bytes")), "list_requests": int(self._median(listing, "requests")),
            "list_load_s": self._median(listing, "load_s"),
            "switch": self.switch,
        }

    def figures(self) -> list[Figure]:
        n = self.numbers()
        label = f"job page, {self.gpus:,} GPUs, cold"
        floor_name = f"job list ({LIST_ROWS} rows) load event, cold, same run"
        ready = n["job_marker"] == "ready"
        figures = [
            Figure(f"{label}: load event", n["job_load_s"], n["list_load_s"], floor_name,
                   f"{mb(n['job_bytes'])} in {n['job_requests']} requests (HTML {mb(n['job_html_bytes'])}) until "
                   f"{'interactive' if ready else 'the load event'}; job list {mb(n['list_bytes'])} in {n['list_requests']} "
                   f"requests ({n['job_bytes'] / max(n['list_bytes'], 1):.1f}x); target <= 2 MB"),
            Figure(f"{label}: interactive", n["job_interactive_s"], n["list_load_s"], floor_name,
                   ("jobPageReady set" if ready else "no jobPageReady marker on the page yet: interactive = load event")
                   + f"; target <= 2 s ({self.server}, median of {len(self.job)} cold loads)"),
        ]
        switch = n["switch"]
        if switch.get("available"):
            figures.append(Figure(f"job page: metric switch {switch['from']} -> {', '.join(switch['to'])}", switch["seconds"],
                                  switch["fetch_seconds"], "the API requests of the switch, again, from the page",
                                  f"in place, no navigation (median of {switch['switches']}); target <= 300 ms"
                                  + (f"; the page's own split: {' | '.join(switch['splits'])}" if switch.get("splits") else "")))
        else:
            reload = switch.get("reload_seconds")
            figures[-1] = Figure(figures[-1].name, figures[-1].seconds, figures[-1].floor_seconds, figures[-1].floor_name,
                                 figures[-1].note + f"; metric switch: not available ({switch.get('why')})"
                                 + (f", by the form's reload today {reload:.2f} s" if reload is not None else ""))
        return figures


def chromium_available() -> bool:
    return bool(Path(CHROMIUM).exists() or shutil.which(CHROMIUM))


def cold_load(browser, state: dict, url: str, wait_ready: bool, keep_open: bool = False):
    """Load ``url`` in a fresh context (empty cache) signed in with ``state``. Returns the Load (and the
    open page and context when ``keep_open``)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport=VIEWPORT, storage_state=state)
    page = context.new_page()
    page.add_init_script(READY_RECORDER)
    network = NetworkLog(context, page)
    response = page.goto(url, wait_until="load", timeout=300_000)
    if response is None or response.status != 200:
        raise RuntimeError(f"{url} answered {response.status if response else 'nothing'}")
    timing = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0]; return {load: n.loadEventEnd}; }")
    load_ms = timing["load"]
    marker = "absent"
    ready_ms = None
    if wait_ready:
        announced = page.evaluate("() => document.documentElement.dataset.jobPageReady !== undefined")
        try:
            page.wait_for_function("() => window.__benchReadyAt !== undefined",
                                   timeout=1000 * (READY_TIMEOUT_S if announced else READY_GRACE_S))
            ready_ms = page.evaluate("() => window.__benchReadyAt")
            marker = "ready"
        except PlaywrightTimeout:  # the page has no marker (yet)
            if announced:
                raise RuntimeError(f"{url} announced data-job-page-ready but did not set it to true "
                                   f"within {READY_TIMEOUT_S:.0f} s") from None
    interactive_ms = ready_ms if ready_ms is not None else load_ms
    page.wait_for_timeout(200)  # let CDP events of requests finished before that moment arrive
    counted = network.until(url, interactive_ms)
    result = Load(url=url, bytes=counted["bytes"], requests=counted["requests"], html_bytes=counted["html_bytes"],
                  load_s=load_ms / 1000, interactive_s=interactive_ms / 1000, marker=marker, largest=counted["largest"])
    if keep_open:
        return result, page, context
    context.close()
    return result


def metric_switch(page, base: str, info: dict, wait_rendered: bool) -> dict:
    """Switch the saturation heatmap's metric in place (up to three times, each to another metric)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    if page.query_selector("#smetric") is None:
        return {"available": False, "why": "no #smetric on the page"}
    if page.query_selector("#saturation-heatmap") is None:
        return {"available": False, "why": "no #saturation-heatmap on the page"}
    page.evaluate("() => document.querySelector('#saturation-heatmap').scrollIntoView()")
    has_attribute = "() => document.querySelector('#saturation-heatmap')?.dataset.renderedMetric !== undefined"
    try:
        page.wait_for_function(has_attribute, timeout=1000 * (SWITCH_TIMEOUT_S if wait_rendered else 0.5))
    except PlaywrightTimeout:
        outcome = {"available": False, "why": "#saturation-heatmap has no data-rendered-metric"}
        outcome.update(_reload_switch(page))
        return outcome
    options = page.eval_on_selector_all("#smetric option", "options => options.filter(o => !o.disabled).map(o => o.value)")
    current = page.evaluate("() => document.querySelector('#saturation-heatmap').dataset.renderedMetric")
    targets = [value for value in options if value != current][:3]
    if not targets:
        return {"available": False, "why": "#smetric offers one metric only"}
    timings, fetches, splits, first = [], [], [], current
    cluster, job_id = info["cluster"], info["job_id"]
    asked: list[str] = []
    page.on("request", lambda request: "/api/" in request.url and asked.append(request.url))
    for target in targets:
        asked.clear()
        try:
            outcome = page.evaluate(SWITCH, {"target": target, "timeoutMs": SWITCH_TIMEOUT_S * 1000})
        except Exception as exc:  # noqa: BLE001 - the page navigated while switching: the context is gone
            return {"available": False, "why": f"switching to {target} navigated away ({str(exc).splitlines()[0]})"}
        switch_asked = list(asked)
        same_window = page.evaluate("() => window.__benchMarker === 'same-window'")
        entries = page.evaluate("() => performance.getEntriesByType('navigation').length")
        # A new document would lose the window's marker and add a navigation entry; history.replaceState
        # (the page keeping its URL in step with the view) is no navigation and is allowed.
        if not same_window or entries != outcome["navigations"]:
            return {"available": False, "why": f"switching to {target} reloaded the page"}
        if not outcome["ok"]:
            return {"available": False, "why": f"data-rendered-metric did not become {target} within {SWITCH_TIMEOUT_S:.0f} s"}
        timings.append(outcome["ms"] / 1000)
        splits.append(page.evaluate("() => document.querySelector('#saturation-heatmap').dataset.timing || ''"))
        # The floor: the API requests the switch made, asked again (no cache); the plain heatmap URL when it made none.
        urls = switch_asked or [f"{base}/api/v1/jobs/{cluster}/{job_id}/saturation/heatmap/?metric={target}&bins=240"]
        fetches.append(sum(page.evaluate(FETCH, url)["ms"] for url in urls) / 1000)
    return {"available": True, "from": first, "to": targets, "switches": len(timings),
            "seconds": statistics.median(timings), "fetch_seconds": statistics.median(fetches), "splits": splits}


def _reload_switch(page) -> dict:
    """Today's page: the metric changes by submitting the form (a full reload). Its cost, for reference."""
    submit = page.query_selector("form:has(#smetric) [type=submit]")
    options = page.eval_on_selector_all("#smetric option", "options => options.map(o => o.value)")
    current = page.eval_on_selector("#smetric", "select => select.value")
    others = [value for value in options if value != current]
    if submit is None or not others:
        return {}
    started = time.perf_counter()
    with page.expect_navigation(wait_until="load", timeout=300_000):
        page.select_option("#smetric", others[0])
        submit.click()
    return {"reload_seconds": time.perf_counter() - started}


def measure(data_dir: Path, nodes: int = NODES, hours: float = HOURS, repeats: int = REPEATS) -> PageReport:
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    info = build(data_dir, nodes, hours)
    print(f"  bench_jobpage: {info['gpus']:,}-GPU job {'reused' if info['reused'] else 'built'} in "
          f"{data_dir} ({time.perf_counter() - started:.0f} s; saturation {info['saturation']}, telemetry {info['telemetry']})",
          file=sys.stderr, flush=True)
    with PortalServer(data_dir) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            state = sign_in(browser, server.base, USERNAME, PASSWORD)
            job_url = f"{server.base}/jobs/{info['cluster']}/{info['job_id']}/"
            list_url = f"{server.base}/jobs/"
            warm_up(state, [list_url, job_url])  # each web process's first answers (imports, caches) are not measured
            listing, job = [], []
            for number in range(repeats):  # alternating, so both pages meet the same machine
                listing.append(cold_load(browser, state, list_url, wait_ready=False))
                if number < repeats - 1:
                    job.append(cold_load(browser, state, job_url, wait_ready=True))
            # The last job page stays open for the metric switch.
            last, page, context = cold_load(browser, state, job_url, wait_ready=True, keep_open=True)
            job.append(last)
            try:
                switch = metric_switch(page, server.base, info, wait_rendered=last.marker == "ready")
            finally:
                context.close()
        finally:
            browser.close()
    for load in job:
        print(f"  bench_jobpage: job page {mb(load.bytes)}, {load.requests} requests, load {load.load_s:.2f} s, "
              f"interactive {load.interactive_s:.2f} s ({load.marker}); largest: "
              + ", ".join(f"{mb(size)} {url.split('//', 1)[-1].split('/', 1)[-1][:60]}" for size, url in load.largest),
              file=sys.stderr, flush=True)
    return PageReport(gpus=info["gpus"], job=job, job_list=listing, switch=switch, build=info,
                      server=f"gunicorn {server.workers_threads}")


def run(workdir: Path) -> list[Figure]:
    if not chromium_available():
        print(f"  bench_jobpage: Chromium not found at {CHROMIUM} (apt-get install chromium); nothing measured", flush=True)
        return []
    data_dir = Path(os.environ.get("BENCH_JOBPAGE_DATA_DIR") or workdir / "jobpage" / "var")
    return measure(data_dir).figures()


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "build-inside":
        print(json.dumps(_build_inside(int(argv[2]), float(argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes of the bench job (4 GPUs each; default {NODES})")
    parser.add_argument("--hours", type=float, default=HOURS, help=f"its duration (default {HOURS:g} h)")
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"cold loads of each page (default {REPEATS})")
    parser.add_argument("--data-dir", type=Path, help="keep the bench installation here (reused when it holds the same job)")
    args = parser.parse_args(argv[1:])
    if not chromium_available():
        print(f"Chromium not found at {CHROMIUM}", file=sys.stderr)
        return 1
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="belvedere-bench-jobpage-")) / "var"
    report = measure(data_dir, args.nodes, args.hours, args.repeats)
    print()
    print_table(report.figures())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
