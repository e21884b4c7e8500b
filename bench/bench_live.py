"""A running 4,096-GPU job kept live (issue 18): incremental updates, scoring split over worker processes,
and the latency from a posted minute of samples to the heatmap.

The bench job is bench_saturation.py's (1,024 GH200 nodes, the demo's Megatron profile with its planted
problems, 4 GPUs per node) but *running*: it started 3 h ago and its samples reach the moment they were
written. It lives in an installation of its own (``bench/portal_server.py``: SQLite, filesystem broker,
embedded store in the run's throw-away folder, never ``var/``); everything runs in processes on it.

(a) **Incremental update**: the job is scored from scratch once in one process (``job_saturation_refresh``,
    which also writes its score state), then three times a minute of samples for every GPU is written to the
    store and ``job_saturation_update`` brings the product up to date: the median update is the figure, its
    floor fetching the samples of the window it read (a bare DuckDB read into numpy), and the full
    rescoring of the same run is set beside it (target: the update at least 20 times cheaper).
(b) **Scale out**: the job scored from scratch as ``make run``'s worker does it for a job of at least
    ``SATURATION_SPLIT_MIN_NODES`` nodes — a chord of node blocks (``SATURATION_BLOCK_NODES``) and a merge —
    on ``celery -A portal worker --concurrency=1`` and then ``--concurrency=2`` started for it: from the
    dispatch to the end of the merge (its TaskRun). The 1-process figure's floor is (a)'s scoring in one
    process; the 2-process figure's floor is the 1-process time (the ratio is the speed-up's inverse; this
    machine has 2 cores and the embedded store lets one process read at a time).
(c) **Latency**: with ``make run``'s web server (gunicorn, ``[program:web]``), a worker (2 processes) and beat
    running, one minute of samples for all 4,096 GPUs (the collector's fields, 10 s apart, 442,368 values)
    is POSTed to ``/api/v1/telemetry/samples/`` with the job's token, in batches of at most
    ``TELEMETRY_MAX_SAMPLES_PER_REQUEST``; then the saturation heatmap API (``encoding=u8``, the window of
    the last minutes) is asked every 0.25 s until its ``coverage`` reaches the minute's last sample. The
    figure is from the first POST to that answer (target <= 30 s), its floor the POSTs themselves. The
    path: ingestion marks the job dirty, ``core.refresh_job`` runs ``JOB_REFRESH_DEBOUNCE_SECONDS`` later and
    calls the registered refreshers (the telemetry cube, then the saturation update).

Run alone: ``python bench/bench_live.py [--nodes N] [--hours H] [--no-latency]`` prints the same table.
Sizes for ``make bench``: ``BENCH_LIVE_NODES`` (default 1,024).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/bench_live.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Figure
from bench.portal_server import BASE_DIR, PortalServer, portal_env, print_table

NODES, HOURS = 1024, 3.0
CLUSTER, JOB_ID = "alps", 4096
OWNED = "BENCH-LIVE-OWNED"
UPDATE_ROUNDS = 5
TARGET_RATIO, TARGET_LATENCY_S = 20.0, 30.0
POLL_S = 0.25


# -- processes on the bench installation --------------------------------------------------------------


def inside(data_dir: Path, phase: str, timeout: float = 1800, **arguments) -> dict:
    """Run ``phase`` of this module in a process whose Django is set up on the installation at ``data_dir``."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "inside", phase, json.dumps(arguments)],
                          cwd=BASE_DIR, env=portal_env(data_dir), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"bench_live {phase} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class CeleryProcess:
    """``celery -A portal worker|beat`` on the bench installation, in its own process group (stopped with
    everything it started); its log next to the installation."""

    def __init__(self, data_dir: Path, name: str, args: list[str], ready: str, timeout: float = 120):
        self.log_path = Path(data_dir).parent / f"{name}.log"
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen([sys.executable, "-m", "celery", "-A", "portal", *args], cwd=BASE_DIR,
                                        env=portal_env(data_dir), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.started = self.log_path.stat().st_size if self.log_path.exists() else 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready in self.log_text():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"celery {' '.join(args[:2])} did not start:\n{self.log_text()[-3000:]}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def worker(data_dir: Path, processes: int) -> CeleryProcess:
    return CeleryProcess(data_dir, f"worker-{processes}", ["worker", f"--concurrency={processes}", "--pool=prefork",
                                                           "--without-mingle", "--without-gossip", "--loglevel=INFO",
                                                           f"--hostname=bench-live-{processes}-{os.getpid()}@%h"], " ready.")


def beat(data_dir: Path) -> CeleryProcess:
    return CeleryProcess(data_dir, "beat", ["beat", "--loglevel=INFO"], "beat: Starting")


# -- the phases, inside the installation ------------------------------------------------------------------


def _job():
    from apps.jobs.models import Job

    return Job.objects.select_related("cluster").get(cluster__name=CLUSTER, job_id=JOB_ID)


def _write_minute(hosts: list[str], minute_start, hours: float) -> int:
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import default_planted, job_chunks

    store = telemetry_store()
    return sum(store.write(chunk) for chunk in job_chunks("megatron", hosts, minute_start, 60, seed=int(minute_start.timestamp()),
                                                          elapsed_before_s=hours * 3600, hosts_per_chunk=256,
                                                          planted=default_planted(hosts)))


def _minute_start():
    """The last whole minute on the 10 s grid: its samples land on the same keys if written again."""
    from datetime import datetime, timedelta, timezone as dt_timezone

    now = datetime.now(dt_timezone.utc).replace(microsecond=0)
    return now.replace(second=now.second // 10 * 10) - timedelta(seconds=60)


def phase_build(nodes: int, hours: float) -> dict:
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.jobs.services import job_token_issue
    from apps.ranks.models import JobLayout
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import job_chunks

    started = time.perf_counter()
    quiet = open(os.devnull, "w")
    call_command("migrate", verbosity=0, stdout=quiet)
    call_command("import_topology", "--preset", "alps", stdout=quiet)
    hosts = [f"nid{n:06d}" for n in range(1, nodes + 1)]
    start = timezone.now().replace(microsecond=0) - timedelta(seconds=hours * 3600)
    cluster, _ = Cluster.objects.get_or_create(name=CLUSTER)
    job = Job.objects.create(cluster=cluster, job_id=JOB_ID, name="megatron-live", user_name="bench-live", account="bench",
                             state="RUNNING", submit_time=start, start_time=start, node_list=hosts, node_count=nodes,
                             gpus=4 * nodes)
    if nodes * 4 % 32 == 0:
        JobLayout.objects.create(job=job, tp=4, pp=8, dp=4 * nodes // 32, world_size=4 * nodes, tasks_per_node=4, source="sizes")
    store = telemetry_store()
    samples = sum(store.write(chunk) for chunk in job_chunks("megatron", hosts, start, hours * 3600, seed=11,
                                                             elapsed_before_s=3600, hosts_per_chunk=64))
    return {"nodes": nodes, "hours": hours, "gpus": 4 * nodes, "samples": samples, "token": job_token_issue(job, "bench"),
            "build_s": time.perf_counter() - started}


def phase_update(rounds: int = UPDATE_ROUNDS) -> dict:
    import duckdb

    from apps.saturation.services import job_saturation_refresh, job_saturation_update
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import default_planted

    job = _job()
    started = time.perf_counter()
    full = job_saturation_refresh(job)
    full_s = time.perf_counter() - started
    hosts, hours = list(job.node_list), (full.window_end - full.window_start).total_seconds() / 3600
    results = []
    for _ in range(rounds):
        minute = _minute_start()
        written = _write_minute(hosts, minute, hours)
        started = time.perf_counter()
        record = job_saturation_update(job)
        seconds = time.perf_counter() - started
        read = getattr(record, "last_read", {})
        if read.get("mode") != "incremental":
            raise RuntimeError(f"the update scored {read.get('mode') or 'nothing'} instead of incrementally: {record.message}")
        connection = duckdb.connect(str(telemetry_store().file), read_only=True)
        lo, hi = int(read["start"].timestamp() * 1e9), int(read["end"].timestamp() * 1e9)
        fetch = time.perf_counter()
        connection.execute("SELECT series, field, ts, value FROM samples WHERE ts >= ? AND ts < ?", [lo, hi]).fetchnumpy()
        fetch_s = time.perf_counter() - fetch
        connection.close()
        results.append({"seconds": seconds, "floor_s": fetch_s, "written": written, "columns": read["columns"],
                        "samples": read["samples"], "score": record.score})
        time.sleep(1.0)
    planted = default_planted(hosts)
    found = {(s["level"], s["host"], s["gpu"]) for s in record.stragglers}
    expected = {("gpu", *planted.throttled), ("gpu", *planted.hot), ("node", planted.slow_nic, None)}
    middle = sorted(results, key=lambda r: r["seconds"])[len(results) // 2]
    return {"full_s": full_s, "full_samples": full.samples, "step_s": full.step_seconds, "gpus": len(full.per_gpu),
            "rounds": results, "median": middle, "stragglers": "all 3 planted found" if found == expected else sorted(map(str, found))}


def phase_split(block_nodes: int | None = None, timeout: float = 1500) -> dict:
    from django.utils import timezone

    from apps.core.models import TaskRun
    from apps.saturation.models import JobSaturation
    from apps.saturation.services import SPLIT_PREFIX, read_plan
    from apps.saturation.tasks import start_split_scoring

    job = _job()
    dispatched = timezone.now()
    scoring_id = start_split_scoring(job, reason="bench", block_nodes=block_nodes)
    if scoring_id is None:
        raise RuntimeError("a split scoring of the bench job already runs")
    blocks = (read_plan(job, scoring_id) or {}).get("blocks")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = TaskRun.objects.filter(name="saturation.score_blocks", celery_task_id=f"{SPLIT_PREFIX}{scoring_id}").first()
        if run is not None and run.status in ("succeeded", "failed"):
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"the split scoring did not end within {timeout:.0f} s")
    if run.status != "succeeded":
        raise RuntimeError(f"the split scoring failed: {run.message}")
    record = JobSaturation.objects.get(job=job)
    return {"seconds": (run.finished - dispatched).total_seconds(), "blocks": blocks, "score": record.score,
            "stragglers": len(record.stragglers)}


def phase_prepare_live() -> dict:
    """Bring every registered product of the job up to date, as the live refresh keeps a running job."""
    from django.utils.module_loading import import_string

    from apps.core.refresh import job_refreshers

    job = _job()
    started = time.perf_counter()
    for refresher in job_refreshers():
        import_string(refresher.refresh)(job, lambda done, message="": None)
    return {"seconds": time.perf_counter() - started, "refreshers": [r.name for r in job_refreshers()]}


def phase_refresh_runs(since: float) -> dict:
    """The live refresh runs of the job after ``since`` (epoch seconds): their number and durations."""
    from datetime import datetime, timezone as dt_timezone

    from apps.core.models import TaskRun

    after = datetime.fromtimestamp(since, tz=dt_timezone.utc)
    runs = TaskRun.objects.filter(name="core.refresh_job", subject__contains=f"{CLUSTER}/{JOB_ID}", created__gte=after)
    return {"runs": [{"status": run.status, "seconds": (run.finished - run.started).total_seconds() if run.finished and run.started
                      else None, "message": run.message} for run in runs.order_by("created")]}


PHASES = {"build": phase_build, "update": phase_update, "split": phase_split, "prepare_live": phase_prepare_live,
          "refresh_runs": phase_refresh_runs}


# -- (c): posting a minute and waiting for it in the heatmap ------------------------------------------------


def _minute_bodies(nodes: int, hours: float, per_request: int) -> tuple[list[bytes], int, str, str]:
    """JSON bodies of one minute of samples for every GPU (the last whole minute), at most ``per_request``
    samples each; with the minute's first and last sample time (ISO, UTC)."""
    import pandas as pd

    from apps.telemetry.synthetic_jobs import default_planted, job_chunks

    hosts = [f"nid{n:06d}" for n in range(1, nodes + 1)]
    minute = _minute_start()
    frame = pd.concat(list(job_chunks("megatron", hosts, minute, 60, seed=7, elapsed_before_s=hours * 3600, hosts_per_chunk=256,
                                      planted=default_planted(hosts))), ignore_index=True)
    frame = frame[["ts", "host", "gpu", "field", "value"]]
    samples_per_node = max(1, len(frame) // nodes)
    nodes_per_request = max(1, per_request // samples_per_node)
    bodies = []
    for first in range(0, nodes, nodes_per_request):
        part = frame[frame["host"].isin(hosts[first:first + nodes_per_request])]
        bodies.append(part.to_json(orient="records", date_format="iso", date_unit="us").encode())
    iso = lambda t: pd.Timestamp(t).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    return bodies, len(frame), iso(frame["ts"].min()), iso(frame["ts"].max())


def _request(url: str, token: str, body: bytes | None = None, timeout: float = 300) -> dict:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                     headers={"Authorization": f"JobToken {token}", "Accept": "application/json",
                                              **({"Content-Type": "application/json"} if body is not None else {})})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def latency(data_dir: Path, info: dict, timeout: float = 180) -> dict:
    """POST one minute for every GPU; seconds until the saturation heatmap covers it."""
    per_request = int(os.environ.get("TELEMETRY_MAX_SAMPLES_PER_REQUEST", 200_000))
    prepared = inside(data_dir, "prepare_live")
    with PortalServer(data_dir) as server, worker(data_dir, 2), beat(data_dir):
        time.sleep(5.0)  # beat's first round of due tasks goes out
        bodies, samples, first_ts, last_ts = _minute_bodies(info["nodes"], info["hours"], per_request)
        whole = f"{server.base}/api/v1/jobs/{CLUSTER}/{JOB_ID}/saturation/heatmap/?metric=S&encoding=u8&bins=300"
        end = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 120))
        heatmap = f"{whole}&start={first_ts[:-1]}&end={end}"  # the minute's window: the bins the page would zoom to
        before = _request(whole, info["token"]).get("coverage", {}).get("last")
        since = time.time()
        started = time.perf_counter()
        accepted = 0
        for body in bodies:
            accepted += _request(f"{server.base}/api/v1/telemetry/samples/", info["token"], body)["accepted"]
        posted_s = time.perf_counter() - started
        polls, seen = 0, None
        while time.perf_counter() - started < timeout:
            polls += 1
            seen = _request(heatmap, info["token"]).get("coverage", {}).get("last")
            if seen and seen > last_ts:
                break
            time.sleep(POLL_S)
        else:
            raise RuntimeError(f"the posted minute (to {last_ts}) did not reach the heatmap within {timeout:.0f} s "
                               f"(coverage ends {seen}; before the POST {before})")
        seconds = time.perf_counter() - started
        time.sleep(1.0)
    runs = inside(data_dir, "refresh_runs", since=since)["runs"]
    return {"seconds": seconds, "posted_s": posted_s, "samples": samples, "accepted": accepted, "requests": len(bodies),
            "polls": polls, "before": before, "last_ts": last_ts, "seen": seen, "prepare_s": prepared["seconds"], "runs": runs}


# -- the report ------------------------------------------------------------------------------------------


@dataclass
class LiveReport:
    info: dict
    update: dict
    split: dict = field(default_factory=dict)  # processes -> phase_split's answer
    latency: dict | None = None
    latency_skipped: str = ""

    def figures(self) -> list[Figure]:
        gpus = f"{self.info['gpus']:,}-GPU"
        up, middle = self.update, self.update["median"]
        ratio = up["full_s"] / middle["seconds"]
        figures = [Figure(
            f"live: update +1 min of a {gpus}, {self.info['hours']:g} h job", middle["seconds"], middle["floor_s"],
            f"fetching the {middle['columns']} columns it read from the store (bare DuckDB read)",
            f"full rescoring in the same run {up['full_s']:.1f} s = {ratio:.0f}x the update (target >= {TARGET_RATIO:.0f}x); "
            f"median of {len(up['rounds'])} (" + ", ".join(f"{r['seconds']:.2f}" for r in up["rounds"]) + " s); "
            f"{middle['samples']:,} samples read; score {middle['score']}, stragglers {up['stragglers']}")]
        one, two = self.split.get(1), self.split.get(2)
        if one:
            figures.append(Figure(f"live: from scratch, {one['blocks']} blocks, 1 worker process", one["seconds"], up["full_s"],
                                  "(a)'s scoring from scratch in one process, no Celery",
                                  f"chord of saturation.score_block + merge_blocks; score {one['score']}, {one['stragglers']} straggler findings"))
        if one and two:
            figures.append(Figure(f"live: from scratch, {two['blocks']} blocks, 2 worker processes", two["seconds"], one["seconds"],
                                  "the same on 1 worker process",
                                  f"speed-up {one['seconds'] / two['seconds']:.2f}x on {os.cpu_count()} cores; score {two['score']}"))
        if self.latency:
            lat = self.latency
            refresh = [f"{r['seconds']:.1f} s" for r in lat["runs"] if r.get("seconds") is not None]
            figures.append(Figure(
                "live: POST 1 min -> visible in heatmap", lat["seconds"], lat["posted_s"],
                f"the {lat['requests']} POSTs of {lat['samples']:,} samples themselves",
                f"target <= {TARGET_LATENCY_S:.0f} s; gunicorn + worker (2 processes) + beat; core.refresh_job runs: "
                f"{', '.join(refresh) or 'none recorded'}; coverage {lat['before']} -> {lat['seen']}"))
        elif self.latency_skipped:
            figures[0] = Figure(figures[0].name, figures[0].seconds, figures[0].floor_seconds, figures[0].floor_name,
                                figures[0].note + f"; latency not measured: {self.latency_skipped}")
        return figures


def measure(data_dir: Path, nodes: int = NODES, hours: float = HOURS, *, block_nodes: int | None = None,
            processes: tuple[int, ...] = (1, 2), with_latency: bool = True, rounds: int = UPDATE_ROUNDS) -> LiveReport:
    data_dir = Path(data_dir)
    if data_dir.resolve() == (BASE_DIR / "var").resolve():
        raise RuntimeError("the live bench never runs in var/: choose another data directory")
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / OWNED).exists():
            raise RuntimeError(f"{data_dir} holds files this bench did not make; choose an empty or new directory")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / OWNED).write_text("made by bench/bench_live.py; removed at its next run\n")
    say = lambda text: print(f"  bench_live: {text}", file=sys.stderr, flush=True)  # noqa: E731
    info = inside(data_dir, "build", nodes=nodes, hours=hours)
    say(f"built the running {info['gpus']:,}-GPU job, {info['samples']:,} samples, in {info['build_s']:.0f} s")
    update = inside(data_dir, "update", rounds=rounds)
    say(f"full rescoring {update['full_s']:.1f} s; updates " + ", ".join(f"{r['seconds']:.2f} s" for r in update["rounds"]))
    report = LiveReport(info=info, update=update)
    for count in processes:
        with worker(data_dir, count):
            report.split[count] = inside(data_dir, "split", block_nodes=block_nodes)
        say(f"from scratch on {count} worker process(es): {report.split[count]['seconds']:.1f} s")
    if with_latency:
        missing = _live_refresh_missing()
        if missing:
            report.latency_skipped = missing
            say(f"latency not measured: {missing}")
        else:
            report.latency = latency(data_dir, info)
            say(f"POST -> heatmap {report.latency['seconds']:.1f} s (POSTs {report.latency['posted_s']:.1f} s)")
    return report


def _live_refresh_missing() -> str:
    """Why the event-driven refresh cannot carry a posted minute to the product (empty when it can)."""
    core = BASE_DIR / "apps" / "core" / "live.py"
    if not core.exists() or "core.refresh_job" not in core.read_text():
        return "the event-driven refresh (core.refresh_job) is not in this tree"
    return ""


def run(workdir: Path) -> list[Figure]:
    data_dir = Path(os.environ.get("BENCH_LIVE_DATA_DIR") or Path(workdir) / "live" / "var")
    return measure(data_dir, int(os.environ.get("BENCH_LIVE_NODES", NODES)), HOURS).figures()


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] == "inside":
        import django

        django.setup()
        print(json.dumps(PHASES[argv[2]](**json.loads(argv[3])), default=str))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes of the bench job (4 GPUs each; default {NODES})")
    parser.add_argument("--hours", type=float, default=HOURS, help=f"how long it has run (default {HOURS:g} h)")
    parser.add_argument("--block-nodes", type=int, help="nodes per block of the split scoring (default SATURATION_BLOCK_NODES)")
    parser.add_argument("--no-latency", action="store_true", help="skip (c), the POST-to-heatmap latency")
    parser.add_argument("--data-dir", type=Path, help="the bench installation (emptied first)")
    args = parser.parse_args(argv[1:])
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="belvedere-bench-live-")) / "var"
    report = measure(data_dir, args.nodes, args.hours, block_nodes=args.block_nodes, with_latency=not args.no_latency)
    print()
    print_table(report.figures())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
