"""Refreshers for tests/core/test_refresh.py: they log what ran, when and in which process, wait while a
hold file exists, and fail when a boom file exists (files in $REFRESH_PROBE_DIR, per job pk).

Imported by the probe worker (``celery worker --include tests.core.refresh_probe``), which registers
them at import; the in-process tests call :func:`register` inside a fixture that restores the registry."""
import json
import os
import time
from pathlib import Path

from apps.core.refresh import JobRefresher, register_job_refresher

NAMES = ("probe-first", "probe-boom", "probe-last")


def folder() -> Path:
    return Path(os.environ["REFRESH_PROBE_DIR"])


def log(job, name: str, event: str) -> None:
    line = json.dumps({"job": job.pk, "name": name, "event": event, "t": time.time(), "pid": os.getpid()})
    with open(folder() / "log.jsonl", "a") as handle:
        handle.write(line + "\n")


def entries(job_pk: int | None = None) -> list[dict]:
    path = folder() / "log.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if job_pk is None or row["job"] == job_pk]


def first(job, report):
    log(job, "probe-first", "start")
    report(50, "probing")
    deadline = time.monotonic() + 60
    while (folder() / f"hold-{job.pk}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    log(job, "probe-first", "end")


def boom(job, report):
    log(job, "probe-boom", "start")
    if (folder() / f"boom-{job.pk}").exists():
        raise RuntimeError("the probe refresher failed on purpose")


def last(job, report):
    log(job, "probe-last", "start")


def register() -> None:
    register_job_refresher(JobRefresher(name="probe-first", order=1, refresh="tests.core.refresh_probe.first"))
    register_job_refresher(JobRefresher(name="probe-boom", order=2, refresh="tests.core.refresh_probe.boom"))
    register_job_refresher(JobRefresher(name="probe-last", order=3, refresh="tests.core.refresh_probe.last"))


if os.environ.get("REFRESH_PROBE_DIR"):
    register()
