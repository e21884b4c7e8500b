"""50 signed-in users at once against the server ``make run`` starts, for 60 s.

The installation is ``make run``'s, in a data directory of this bench's own (never ``var/``):
``manage.py migrate`` and ``manage.py demo``, then gunicorn with the command line of ``[program:web]`` in
deploy/supervisord.conf (2 workers x 4 threads, ``--preload``). The Celery worker and beat are not
started: none of the requests measured waits on a task (they read the database and product files).

Each user signs in through the login form (its own session) and loops, until the time is up, over
the job list (``/jobs/``), the page of the largest demo job (the running 128-node Megatron job: its
HTML only) and that job's saturation heatmap API
(``?metric=S&encoding=u8&rows=auto&bins=240``; where the server answers 400 to those parameters, the
plain ``?metric=S&bins=240``, and the output says so). Requests are sent as a browser sends them:
``Accept-Encoding: gzip``, and ``If-None-Match`` once an answer carried an ETag.

Per endpoint: requests, p50, p95, max, errors (an exception, a time-out or a status other than 200
and 304) and the bytes of an answer on the wire; the target is p95 <= 1 s with 0 errors. The floor is
the same request by one user with no one else (median of 3, full answers). The load generator (httpx,
asyncio) runs on the same machine as the server and takes CPU from it: on the 2-core machine that
is part of the figure.

Run alone: ``python bench/bench_load.py [--quick] [--users N] [--seconds S] [--data-dir DIR]``
(``--quick``: 10 users for 10 s).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/bench_load.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure
from bench.portal_server import BASE_DIR, PortalServer, manage, portal_python, print_table

USERS, SECONDS = 50, 60.0
QUICK_USERS, QUICK_SECONDS = 10, 10.0
USERNAME, PASSWORD = "demo", "belvedere-demo"  # the demo researcher (apps/accounts/demo.py)
REQUEST_TIMEOUT_S = 300.0
SIGN_IN_AT_ONCE = 4
TARGET_P95_S = 1.0
OWNED = "BENCH-LOAD-OWNED"
NOTE_INDENT = 76  # where bench/run.py's table starts a note
HEATMAP_QUERY = "?metric=S&encoding=u8&rows=auto&bins=240"
HEATMAP_PLAIN_QUERY = "?metric=S&bins=240"

LARGEST_JOB = """
import json
from django.contrib.auth import get_user_model
from apps.jobs.selectors import job_list_for_user
from apps.saturation.models import JobSaturation
user = get_user_model().objects.get(username=%r)
visible = job_list_for_user(user)
scored = JobSaturation.objects.filter(status="ready", job__in=visible).select_related("job", "job__cluster")
job = max((s.job for s in scored), key=lambda j: (j.gpus or 0, j.node_count or 0, j.job_id))
print(json.dumps({"cluster": job.cluster.name, "job_id": job.job_id, "gpus": job.gpus, "nodes": job.node_count, "state": job.state}))
"""


@dataclass
class Endpoint:
    name: str
    path: str
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retries: int = 0  # GETs sent again after the server closed a kept-alive connection under them
    full: list[int] = field(default_factory=list)  # bytes on the wire of 200 answers
    not_modified: int = 0
    encodings: set[str] = field(default_factory=set)
    content_type: str = ""
    floor_s: float = 0.0

    def numbers(self) -> dict:
        ordered = sorted(self.latencies)
        return {"requests": len(ordered), "errors": len(self.errors), "retries": self.retries,
                "p50_s": _quantile(ordered, 0.50), "p95_s": _quantile(ordered, 0.95), "max_s": ordered[-1] if ordered else 0.0,
                "bytes_per_answer": int(statistics.median(self.full)) if self.full else 0, "not_modified": self.not_modified}


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted values (0 when empty)."""
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class LoadReport:
    users: int
    seconds: float
    job: dict
    endpoints: list[Endpoint]
    notes: list[str]
    server: str

    def figures(self) -> list[Figure]:
        figures = []
        for endpoint in self.endpoints:
            n = endpoint.numbers()
            encoding = "/".join(sorted(endpoint.encodings)) or "identity"
            figures.append(Figure(
                f"{self.users} users: {endpoint.name} p95", n["p95_s"], endpoint.floor_s,
                "the same request by one user alone (median of 3)",
                f"{n['requests']:,} requests, p50 {_seconds(n['p50_s'])}, max {_seconds(n['max_s'])}, {n['errors']} errors "
                f"({n['retries']} sent again on a new connection, as a browser does), "
                f"{_size(n['bytes_per_answer'])} per answer ({encoding}), {n['not_modified']:,} x 304; target p95 <= 1 s, 0 errors"))
        last = figures[-1]  # the run's circumstances, one line each under the last endpoint
        figures[-1] = Figure(last.name, last.seconds, last.floor_seconds, last.floor_name,
                             "\n".join([last.note, *(f"{' ' * NOTE_INDENT}{note}" for note in self.notes)]))
        return figures


def _seconds(value: float) -> str:
    return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"


def _size(count: int) -> str:
    return f"{count / 1e6:.3g} MB" if count >= 1_000_000 else f"{count / 1e3:.3g} kB" if count >= 1000 else f"{count} B"


# -- the installation ---------------------------------------------------------------------------------


def prepare(data_dir: Path, username: str = USERNAME, demo: bool = True) -> dict:
    """``make run``'s preparation (migrate, demo) in ``data_dir``; the largest scored job ``username`` sees.
    ``demo=False`` takes an installation prepared otherwise (the smoke test's small bench job)."""
    data_dir = Path(data_dir)
    if demo:
        if data_dir.resolve() == (BASE_DIR / "var").resolve():
            raise RuntimeError("the load bench never runs on var/: choose another data directory")
        if data_dir.exists() and any(data_dir.iterdir()) and not (data_dir / OWNED).exists():
            raise RuntimeError(f"{data_dir} holds files this bench did not make; choose an empty or new directory")
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / OWNED).write_text("made by bench/bench_load.py (manage.py demo)\n")
        manage(data_dir, "migrate", "--noinput")
        manage(data_dir, "demo")  # as make run: builds once, then says it is loaded
    return portal_python(data_dir, LARGEST_JOB % username)


# -- the users ----------------------------------------------------------------------------------------------


def _client(base: str):
    import httpx

    return httpx.AsyncClient(base_url=base, headers={"Accept-Encoding": "gzip", "User-Agent": "belvedere-bench-load"},
                             timeout=httpx.Timeout(REQUEST_TIMEOUT_S), follow_redirects=False)


async def sign_in(client, login: tuple[str, str]) -> None:
    form = await client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    if form.status_code != 200 or token is None:
        raise RuntimeError(f"the login page answered {form.status_code} without a CSRF token")
    answer = await client.post("/accounts/login/", data={"username": login[0], "password": login[1],
                                                         "csrfmiddlewaretoken": token.group(1), "next": "/jobs/"},
                               headers={"Referer": f"{client.base_url}/accounts/login/"})
    if answer.status_code != 302 or "/accounts/login" in answer.headers.get("location", ""):
        raise RuntimeError(f"signing in as {login[0]} failed: {answer.status_code} {answer.headers.get('location', '')}")


async def fetch(client, endpoint: Endpoint, etags: dict | None, record: bool) -> tuple[int, float]:
    """One request as a browser makes it; recorded into ``endpoint`` when ``record``. Returns (status, seconds)."""
    import httpx

    headers = {"If-None-Match": etags[endpoint.path]} if etags is not None and endpoint.path in etags else {}
    started = time.perf_counter()
    try:
        for attempt in (1, 2):
            try:
                async with client.stream("GET", endpoint.path, headers=headers) as response:
                    async for _ in response.aiter_raw():
                        pass
                    elapsed = time.perf_counter() - started
                    status, wire = response.status_code, response.num_bytes_downloaded
                break
            except (httpx.RemoteProtocolError, httpx.ReadError):
                # A kept-alive connection the server closed just as this request went out (gunicorn closes
                # idle ones after its keep-alive): browsers send such a GET again on a new connection, once.
                # Counted and printed; a second failure is an error.
                if attempt == 2:
                    raise
                endpoint.retries += 1
    except httpx.HTTPError as exc:
        elapsed = time.perf_counter() - started
        if record:
            endpoint.latencies.append(elapsed)
            endpoint.errors.append(f"{type(exc).__name__}: {exc}")
        return 0, elapsed
    if status == 200:
        endpoint.content_type = response.headers.get("content-type", "")
    if record:
        endpoint.latencies.append(elapsed)
        if status == 200:
            endpoint.full.append(wire)
            endpoint.encodings.add(response.headers.get("content-encoding", "identity"))
        elif status == 304:
            endpoint.not_modified += 1
        else:
            endpoint.errors.append(f"HTTP {status}")
    if etags is not None and status == 200 and response.headers.get("etag"):
        etags[endpoint.path] = response.headers["etag"]
    return status, elapsed


async def _load(base: str, endpoints: list[Endpoint], users: int, seconds: float, login: tuple[str, str]) -> list[str]:
    # Not a line per request: under bench/run.py, Django's logging configuration would print httpx's.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    notes: list[str] = []
    clients = [_client(base) for _ in range(users)]
    try:
        gate = asyncio.Semaphore(SIGN_IN_AT_ONCE)

        async def signed_in(client):
            async with gate:
                await sign_in(client, login)

        started = time.perf_counter()
        await asyncio.gather(*(signed_in(client) for client in clients))
        print(f"  bench_load: {users} users signed in ({time.perf_counter() - started:.1f} s)", file=sys.stderr, flush=True)

        # The heatmap's compact parameters, or the plain URL where this server refuses them.
        heatmap = endpoints[-1]
        status, _ = await fetch(clients[0], heatmap, None, record=False)
        if status == 400:
            heatmap.path = heatmap.path.split("?")[0] + HEATMAP_PLAIN_QUERY
            notes.append(f"heatmap: the server answered 400 to encoding=u8&rows=auto, so the plain {HEATMAP_PLAIN_QUERY} was used")

        for endpoint in endpoints:  # the floor: one user alone, full answers
            timings = []
            for _ in range(3):
                status, elapsed = await fetch(clients[0], endpoint, None, record=False)
                if status != 200:
                    raise RuntimeError(f"{endpoint.path} answered {status} to a signed-in user")
                timings.append(elapsed)
            endpoint.floor_s = statistics.median(timings)

        deadline = time.perf_counter() + seconds

        async def user(client, first: int):
            # Users start at different endpoints, so each endpoint is asked from the first second on.
            etags: dict[str, str] = {}
            turn = first
            while time.perf_counter() < deadline:
                await fetch(client, endpoints[turn % len(endpoints)], etags, record=True)
                turn += 1

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(user(client, number) for number, client in enumerate(clients)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"  bench_load: {users} users for {seconds:.0f} s (last answers after {elapsed:.1f} s)", file=sys.stderr, flush=True)
        notes.append(f"the load generator itself used {cpu:.0f} CPU-seconds of the {(os.cpu_count() or 1) * elapsed:.0f} "
                     f"this machine had in those {elapsed:.0f} s")
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    return notes


def measure(data_dir: Path, users: int = USERS, seconds: float = SECONDS, login: tuple[str, str] = (USERNAME, PASSWORD),
            demo: bool = True) -> LoadReport:
    """Prepare (``demo``: migrate and the demo, as make run), serve, sign ``users`` in as ``login`` and load."""
    started = time.perf_counter()
    job = prepare(data_dir, login[0], demo)
    print(f"  bench_load: {'demo' if demo else 'installation'} ready in {data_dir} ({time.perf_counter() - started:.0f} s); largest job "
          f"{job['cluster']}/{job['job_id']} ({job['gpus']} GPUs, {job['state']})", file=sys.stderr, flush=True)
    page = f"/jobs/{job['cluster']}/{job['job_id']}/"
    endpoints = [Endpoint("job list", "/jobs/"), Endpoint(f"job page ({job['gpus']} GPUs)", page),
                 Endpoint("heatmap API", f"/api/v1/jobs/{job['cluster']}/{job['job_id']}/saturation/heatmap/{HEATMAP_QUERY}")]
    with PortalServer(data_dir) as server:
        notes = asyncio.run(_load(server.base, endpoints, users, seconds, login))
    errors = [e for endpoint in endpoints for e in endpoint.errors]
    if errors:
        print(f"  bench_load: first errors: {errors[:5]}", file=sys.stderr, flush=True)
    notes += [f"gunicorn {server.workers_threads} as make run starts it; worker and beat not started (no measured request "
              f"waits on a task); the load generator runs on the same {os.cpu_count()}-core machine",
              f"heatmap answers are {endpoints[-1].content_type or 'unknown'}"]
    return LoadReport(users=users, seconds=seconds, job=job, endpoints=endpoints, notes=notes,
                      server=f"gunicorn {server.workers_threads}")


def run(workdir: Path) -> list[Figure]:
    return measure(Path(os.environ.get("BENCH_LOAD_DATA_DIR") or workdir / "load" / "var")).figures()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_USERS} users for {QUICK_SECONDS:.0f} s")
    parser.add_argument("--users", type=int, help=f"concurrent users (default {USERS})")
    parser.add_argument("--seconds", type=float, help=f"how long they loop (default {SECONDS:.0f} s)")
    parser.add_argument("--data-dir", type=Path, help="keep the installation here (its demo is reused next time)")
    args = parser.parse_args(argv[1:])
    users = args.users or (QUICK_USERS if args.quick else USERS)
    seconds = args.seconds or (QUICK_SECONDS if args.quick else SECONDS)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="belvedere-bench-load-")) / "var"
    report = measure(data_dir, users, seconds)
    print()
    print_table(report.figures())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
