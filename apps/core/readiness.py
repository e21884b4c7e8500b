"""Liveness and readiness checks behind ``/healthz`` and ``/readyz``.

A readiness check is a callable returning a :class:`CheckResult`. Critical checks decide the
HTTP status; informational ones (beat) are reported but never make the portal "not ready".
Apps add their own (e.g. the telemetry backend) with :func:`register_readiness_check` from
their ``AppConfig.ready()``.
"""
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Callable

from django.conf import settings
from django.db import connection
from django.utils import timezone

STATUS_OK = "ok"
STATUS_FAIL = "fail"
STATUS_WARN = "warn"


@dataclass
class CheckResult:
    status: str
    message: str = ""
    details: dict = field(default_factory=dict)
    critical: bool = True

    def as_dict(self) -> dict:
        data = asdict(self)
        data.update(data.pop("details"))
        return data


@dataclass(frozen=True)
class ReadinessCheck:
    name: str
    run: Callable[[], CheckResult]


_checks: dict[str, ReadinessCheck] = {}


def register_readiness_check(name: str, run: Callable[[], CheckResult]) -> None:
    _checks[name] = ReadinessCheck(name, run)


def check_database() -> CheckResult:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not ready"; say which
        return CheckResult(STATUS_FAIL, f"database unreachable: {exc.__class__.__name__}: {exc}")
    return CheckResult(
        STATUS_OK,
        f"{connection.vendor} answered",
        {"vendor": connection.vendor, "latency_ms": round((time.perf_counter() - started) * 1000, 1)},
    )


_pending_ping: dict[str, tuple] = {}


def check_broker_round_trip() -> CheckResult:
    """Send ``core.ping`` through the broker and wait for a worker process to answer it.

    While no worker runs, pings wait in the queue: each expires (``READYZ_PING_EXPIRES``), so a worker
    that comes back discards them instead of running them, and a web process re-sends none while its
    previous ping is still queued and unexpired; it waits on that one instead. So /readyz polled
    every second during an outage leaves a few pings behind, not one per call."""
    from .tasks import ping_task

    timeout = settings.READYZ_BROKER_TIMEOUT
    expires = max(settings.READYZ_PING_EXPIRES, timeout)
    started = time.perf_counter()
    pending = _pending_ping.get(settings.READYZ_PING_QUEUE)
    try:
        if pending and time.monotonic() - pending[2] < expires - timeout:
            result, nonce, _sent = pending
        else:
            nonce = uuid.uuid4().hex
            result = ping_task.apply_async(args=[nonce], queue=settings.READYZ_PING_QUEUE, expires=expires)
            _pending_ping[settings.READYZ_PING_QUEUE] = (result, nonce, time.monotonic())
        answer = result.get(timeout=timeout, interval=0.05, propagate=True)
    except Exception as exc:
        name = exc.__class__.__name__
        if name == "TimeoutError":
            message = (
                f"no worker answered within {timeout:g} s: start one with "
                "`celery -A portal worker` (make run starts it for you)"
            )
            building = _demo_building()
            if building:
                message = f"no worker answered within {timeout:g} s: make run starts it once the demo is built ({building})"
            busy = _workers_answering_control()
            if busy:
                # The workers live but every pool process is busy: the ping waits behind their tasks. Web can
                # still serve; saying "not ready" would have a load balancer take it out for a busy worker.
                return CheckResult(
                    STATUS_WARN,
                    f"worker {', '.join(busy)} is alive (it answered a control ping) but the ping task waited over "
                    f"{timeout:g} s behind other tasks: the workers are busy",
                    {"broker": _broker_display(), "worker_hostnames": busy},
                    critical=False,
                )
        else:
            _pending_ping.pop(settings.READYZ_PING_QUEUE, None)
            message = f"broker round-trip failed: {name}: {exc}"
        return CheckResult(STATUS_FAIL, message, {"broker": _broker_display()})
    _pending_ping.pop(settings.READYZ_PING_QUEUE, None)
    round_trip_ms = round((time.perf_counter() - started) * 1000, 1)
    same_process = answer.get("pid") == os.getpid() and answer.get("hostname") == socket.gethostname()
    if answer.get("nonce") != nonce or same_process:
        return CheckResult(
            STATUS_FAIL,
            "the ping ran inside the web process (eager mode), not on a worker",
            {"broker": _broker_display()},
        )
    return CheckResult(
        STATUS_OK,
        f"worker {answer['hostname']} (pid {answer['pid']}) answered in {round_trip_ms} ms",
        {
            "broker": _broker_display(),
            "worker_hostname": answer["hostname"],
            "worker_pid": answer["pid"],
            "round_trip_ms": round_trip_ms,
        },
    )


def check_beat() -> CheckResult:
    from .models import Heartbeat

    expected = settings.BEAT_HEARTBEAT_SECONDS
    heartbeat = Heartbeat.objects.filter(name="beat").first()
    if heartbeat is None:
        return CheckResult(STATUS_WARN, "no beat heartbeat yet: is `celery -A portal beat` running?", critical=False)
    age = (timezone.now() - heartbeat.last_seen).total_seconds()
    details = {"last_seen": heartbeat.last_seen.isoformat(), "age_s": round(age, 1)}
    if age > 3 * expected:
        return CheckResult(STATUS_WARN, f"last beat heartbeat {age:.0f} s ago (expected every {expected} s)", details, False)
    return CheckResult(STATUS_OK, f"last beat heartbeat {age:.0f} s ago", details, critical=False)


def _workers_answering_control() -> list[str]:
    """Hostnames of the workers whose main process answers a broadcast ping: a worker answers it
    even while every pool process runs a task. Empty where none answers or the transport cannot
    broadcast."""
    from celery import current_app

    if settings.READYZ_CONTROL_PING_TIMEOUT <= 0:
        return []
    try:
        replies = current_app.control.ping(timeout=settings.READYZ_CONTROL_PING_TIMEOUT) or []
    except Exception:
        return []
    return sorted(name for reply in replies for name in reply)


def _demo_building() -> str:
    """"part 7 of 18 (network)" while make run builds the demo (worker and beat start after it), else ""."""
    from .demo_progress import BUILDING, read_progress

    if settings.BELVEDERE_PROFILE == "production":
        return ""
    progress = read_progress(settings.DEMO_PROGRESS_FILE)
    return progress.part if progress is not None and progress.state == BUILDING else ""


def _broker_display() -> str:
    # Never echo credentials from the broker URL into a public endpoint.
    url = settings.CELERY_BROKER_URL
    scheme = url.split("://", 1)[0]
    return scheme


def check_public_url() -> CheckResult:
    """Informational: whether links in mail reach people (BELVEDERE_BASE_URL; see ``checks.public_url_problem``)."""
    from .checks import HINT, public_url_problem

    problem = public_url_problem()
    details = {"url": settings.BELVEDERE_BASE_URL}
    if problem:
        return CheckResult(STATUS_WARN, f"{problem}. {HINT}", details, critical=False)
    return CheckResult(STATUS_OK, f"links in mail point to {settings.BELVEDERE_BASE_URL}", details, critical=False)


register_readiness_check("database", check_database)
register_readiness_check("broker", check_broker_round_trip)
register_readiness_check("beat", check_beat)
register_readiness_check("public_url", check_public_url)


_cache: dict[str, tuple[float, dict, bool]] = {}


def readiness_report() -> tuple[dict, bool]:
    """Run every registered check; return the JSON report and whether the portal is ready."""
    max_age = settings.READYZ_CACHE_SECONDS
    cached = _cache.get("report")
    if cached and time.monotonic() - cached[0] < max_age:
        return cached[1], cached[2]
    results = {name: check.run() for name, check in _checks.items()}
    ready = all(result.status == STATUS_OK for result in results.values() if result.critical)
    report = {
        "status": STATUS_OK if ready else STATUS_FAIL,
        "profile": settings.BELVEDERE_PROFILE,
        "time": timezone.now().isoformat(),
        "checks": {name: result.as_dict() for name, result in results.items()},
    }
    _cache["report"] = (time.monotonic(), report, ready)
    return report, ready

