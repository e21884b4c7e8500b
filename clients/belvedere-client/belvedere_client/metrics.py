"""Application metrics from the training loop to the Belvedere portal, in the background.

Plain Python: no Django, standard library only (it runs inside users' training jobs, Python >= 3.8).

::

    import belvedere_client as bv
    for step in range(steps):
        ...
        bv.log(step=step, tokens_per_s=tps, iteration_s=dt, loss=loss.item(), lr=lr)

``log()`` puts one row ``{"ts", "step", name: value}`` into a bounded in-memory queue and returns; a daemon
thread posts the rows in batches (every ``interval_s`` seconds, or at once when ``batch_rows`` are waiting) as
``{"rows": [...]}`` to ``POST {url}/api/v1/jobs/{cluster}/{job_id}/metrics/`` with ``Authorization: JobToken
{token}``. Why it is built this way: the training loop must never wait for, or fail because of, the portal.
So ``log()`` never touches the network and never raises; a failed post keeps its batch and is retried with
exponential backoff (capped); when the queue is full the oldest rows are dropped and counted; at exit the
queue is flushed for at most ``flush_deadline_s`` seconds. Problems are reported once each via ``warnings``.

Configuration (``configure(...)`` wins over the environment):

* ``BELVEDERE_URL``: the portal (else derived from ``BELVEDERE_JOB_URL``, which the portal's Slurm TaskProlog sets);
* ``BELVEDERE_JOB_TOKEN`` (else the file named by ``BELVEDERE_JOB_TOKEN_FILE``, also set by the TaskProlog);
* ``BELVEDERE_CLUSTER`` (else from ``BELVEDERE_JOB_URL``, else ``SLURM_CLUSTER_NAME``);
* ``BELVEDERE_JOB_ID`` (else from ``BELVEDERE_JOB_URL``, else ``SLURM_JOB_ID``);
* ``BELVEDERE_RUN`` (optional): the training run the job belongs to, sent with each batch as ``"run"``; the portal
  joins the jobs of one run (one account) into a campaign, as ``sbatch --comment run=NAME`` does.

Without a URL, token, cluster or job id ``log()`` records nothing and warns once.

Ranks: only one process should send a job's metrics (rows of many ranks would interleave in one series). By
default only rank 0 sends: a process whose ``RANK`` (torchrun) or, without it, ``SLURM_PROCID`` (srun) is set
and is not ``0`` records nothing, silently. ``configure(all_ranks=True)`` (or ``BELVEDERE_ALL_RANKS=1``) sends
from every process that calls ``log()``.
"""
from __future__ import annotations

import atexit
import collections
import json
import math
import numbers
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any, Deque, Dict, List, Mapping, Optional

__all__ = ["Config", "MetricsClient", "configure", "log", "event", "flush", "stats", "config_from_environment"]

#: A metric name the portal accepts (the same pattern as the API's).
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$")
MAX_NAMES_PER_ROW = 64  # the portal refuses a row with more
EVENT_KINDS = ("checkpoint", "evaluation", "restart")
_USER_AGENT = "belvedere-client"


class BelvedereMetricsWarning(UserWarning):
    """What the helper could not do (bad names or values, rows dropped, the portal refusing); said once each."""


def _warn(message: str) -> None:
    """Say it as a warning at the user's line (the first frame outside this module); never raise."""
    try:
        level, frame = 1, sys._getframe(0)
        while frame.f_back is not None and frame.f_code.co_filename == __file__:
            frame, level = frame.f_back, level + 1
        warnings.warn("belvedere_client: " + message, BelvedereMetricsWarning, stacklevel=level)
    except Exception:  # warnings turned into errors must not reach the training loop
        pass


class Config:
    """Where and how to send. ``url``/``token``/``cluster``/``job_id`` empty: nothing is sent."""

    def __init__(self, url: str = "", token: str = "", cluster: str = "", job_id: str = "", *,
                 interval_s: float = 10.0, batch_rows: int = 500, max_queue: int = 100_000, timeout_s: float = 5.0,
                 backoff_s: float = 1.0, backoff_max_s: float = 300.0, flush_deadline_s: float = 5.0,
                 all_ranks: bool = False, run: str = ""):
        self.url = (url or "").strip().rstrip("/")
        # the training run this job belongs to (BELVEDERE_RUN): the portal joins the jobs of one run into a campaign
        self.run = (run or "").strip()
        if self.run and not RUN_NAME.match(self.run):
            _warn("BELVEDERE_RUN {!r} is not 1-100 characters of A-Z a-z 0-9 . _ / + - (starting with a letter or digit): "
                  "not sent".format(self.run))
            self.run = ""
        self.token = (token or "").strip()
        self.cluster = (cluster or "").strip()
        self.job_id = str(job_id or "").strip()
        self.interval_s = max(0.01, float(interval_s))
        self.batch_rows = max(1, int(batch_rows))
        self.max_queue = max(self.batch_rows, int(max_queue))
        self.timeout_s = max(0.01, float(timeout_s))
        self.backoff_s = max(0.01, float(backoff_s))
        self.backoff_max_s = max(self.backoff_s, float(backoff_max_s))
        self.flush_deadline_s = max(0.0, float(flush_deadline_s))
        self.all_ranks = bool(all_ranks)

    def missing(self) -> List[str]:
        """The settings without which nothing can be sent, by their environment names."""
        names = [("BELVEDERE_URL", self.url), ("BELVEDERE_JOB_TOKEN", self.token),
                 ("BELVEDERE_CLUSTER", self.cluster), ("BELVEDERE_JOB_ID", self.job_id)]
        return [name for name, value in names if not value]

    @property
    def endpoint(self) -> str:
        return "{}/api/v1/jobs/{}/{}/metrics/".format(self.url, urllib.parse.quote(self.cluster, safe=""),
                                                      urllib.parse.quote(self.job_id, safe=""))


RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}$")


def _job_url_parts(job_url: str) -> Dict[str, str]:
    """``https://portal/jobs/<cluster>/<id>/`` (the TaskProlog's BELVEDERE_JOB_URL) -> url, cluster, job_id."""
    match = re.match(r"^(https?://.+?)/jobs/([^/]+)/(\d+)/?$", (job_url or "").strip())
    if not match:
        return {}
    return {"url": match.group(1), "cluster": match.group(2), "job_id": match.group(3)}


def _read_token_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return ""


def config_from_environment(environ: Optional[Mapping[str, str]] = None, **overrides: Any) -> Config:
    """The configuration from ``environ`` (default ``os.environ``); ``overrides`` that are not None win."""
    env = os.environ if environ is None else environ
    from_job_url = _job_url_parts(env.get("BELVEDERE_JOB_URL", ""))
    values: Dict[str, Any] = {
        "url": env.get("BELVEDERE_URL") or from_job_url.get("url", ""),
        "token": env.get("BELVEDERE_JOB_TOKEN") or "",
        "cluster": env.get("BELVEDERE_CLUSTER") or from_job_url.get("cluster") or env.get("SLURM_CLUSTER_NAME", ""),
        "job_id": env.get("BELVEDERE_JOB_ID") or from_job_url.get("job_id") or env.get("SLURM_JOB_ID", ""),
        "all_ranks": env.get("BELVEDERE_ALL_RANKS", "").strip().lower() in ("1", "true", "yes"),
        "run": env.get("BELVEDERE_RUN") or "",
    }
    if not values["token"] and overrides.get("token") is None and env.get("BELVEDERE_JOB_TOKEN_FILE"):
        values["token"] = _read_token_file(env["BELVEDERE_JOB_TOKEN_FILE"])
    values.update({key: value for key, value in overrides.items() if value is not None})
    return Config(**values)


def is_sending_rank(environ: Optional[Mapping[str, str]] = None) -> bool:
    """True unless ``RANK`` (or, without it, ``SLURM_PROCID``) says this process is not rank 0."""
    env = os.environ if environ is None else environ
    rank = env.get("RANK") or env.get("SLURM_PROCID")
    return rank is None or rank.strip() in ("", "0")


def _number(value: Any) -> Optional[float]:
    """A finite float of a real number (ints, floats, numpy scalars), else None. Booleans are not numbers here."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return number if math.isfinite(number) else None


class MetricsClient:
    """One queue and one sender thread. ``log()`` only appends (under a lock nobody holds across network I/O)."""

    def __init__(self, config: Config):
        self.config = config
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: Deque[dict] = collections.deque()
        self._pending: Optional[List[dict]] = None  # the batch being sent or waiting for its retry
        self._flush_requested = False
        self._closed = False
        self._thread: Optional[threading.Thread] = None
        self._warned: set = set()
        self.counts = {"logged": 0, "sent": 0, "dropped": 0, "bad_names": 0, "bad_values": 0, "refused": 0,
                       "failed_posts": 0}
        self.last_error = ""

    # -- the training loop's side: cheap, never raises, never waits for the network -----------------------------
    def log(self, step: Any = None, values: Optional[Mapping[str, Any]] = None) -> None:
        row: Dict[str, Any] = {"ts": time.time()}
        if step is not None:
            if isinstance(step, bool) or not isinstance(step, numbers.Integral) or int(step) < 0:
                self._count("bad_values", "step", "step={!r} is not a whole number >= 0; the row is kept without "
                                                  "its step".format(step))
            else:
                row["step"] = int(step)
        for name, value in (values or {}).items():
            if value is None:
                continue
            if not isinstance(name, str) or not NAME.match(name) or name in ("ts", "step"):
                self._count("bad_names", "name", "metric name {!r} was dropped: a name starts with a letter and has at most "
                                                  "64 letters, digits or _ . : / -".format(name))
                continue
            number = _number(value)
            if number is None:
                self._count("bad_values", "value", "{}={!r} was dropped: values are finite numbers (for a tensor, "
                                                    "log tensor.item())".format(name, value)[:300])
                continue
            if len(row) - ("step" in row) - 1 >= MAX_NAMES_PER_ROW:
                self._count("bad_names", "too-many", "a row has more than {} metrics; the rest were dropped"
                            .format(MAX_NAMES_PER_ROW))
                continue
            row[name] = number
        if len(row) == 1 + ("step" in row):
            return  # nothing but ts and step: the portal refuses such a row
        self._enqueue(row)

    def _enqueue(self, row: dict) -> None:
        dropped = 0
        with self._lock:
            while len(self._queue) >= self.config.max_queue:
                self._queue.popleft()
                dropped += 1
            self._queue.append(row)
            self.counts["logged"] += 1
            self.counts["dropped"] += dropped
            if len(self._queue) >= self.config.batch_rows:
                self._wake.notify()
        if dropped:
            self._warn_once("dropped", "the metrics queue is full ({} rows; the portal is unreachable or slow: {}); "
                                       "the oldest rows are dropped".format(self.config.max_queue, self.last_error or "?"))
        self._start()

    def _count(self, counter: str, kind: str, message: str) -> None:
        with self._lock:
            self.counts[counter] += 1
        self._warn_once(kind, message)

    def _warn_once(self, kind: str, message: str) -> None:
        if kind in self._warned:
            return
        self._warned.add(kind)
        _warn(message)

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="belvedere-metrics", daemon=True)
                    self._thread.start()

    # -- the sender thread -----------------------------------------------------------------------------------
    def _run(self) -> None:
        delay = self.config.interval_s
        backoff = self.config.backoff_s
        while True:
            with self._lock:
                deadline = time.monotonic() + delay
                while not (self._closed or self._flush_requested
                           or (self._pending is None and len(self._queue) >= self.config.batch_rows)):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._wake.wait(left)
                if self._closed and self._pending is None and not self._queue:
                    return
                self._flush_requested = False
                if self._pending is None and self._queue:
                    count = min(self.config.batch_rows, len(self._queue))
                    self._pending = [self._queue.popleft() for _ in range(count)]
                batch = self._pending
            if batch is None:
                delay = self.config.interval_s
                continue
            outcome = self._post(batch)
            with self._lock:
                if outcome != "retry":
                    self._pending = None
                    if outcome == "sent":
                        self.counts["sent"] += len(batch)
                    else:
                        self.counts["refused"] += len(batch)
                    backoff = self.config.backoff_s
                    more = len(self._queue) >= self.config.batch_rows
                    delay = 0.0 if more else self.config.interval_s
                else:
                    self.counts["failed_posts"] += 1
                    delay = backoff
                    backoff = min(backoff * 2, self.config.backoff_max_s)
                self._wake.notify_all()  # flush() waiters look again
                if self._closed and outcome == "retry":
                    return

    def _post(self, batch: List[dict]) -> str:
        """"sent", "refused" (the portal will never take this batch: drop it) or "retry"."""
        body = json.dumps({"rows": batch, **({"run": self.config.run} if self.config.run else {})},
                          separators=(",", ":")).encode()
        request = urllib.request.Request(self.config.endpoint, data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": "JobToken " + self.config.token,
            "User-Agent": _USER_AGENT})
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                response.read(65536)
            self.last_error = ""
            return "sent"
        except urllib.error.HTTPError as error:
            detail = _error_detail(error)
            self.last_error = "HTTP {} from {}: {}".format(error.code, self.config.endpoint, detail)
            # 404: the portal may not know the job yet (it learns of jobs from Slurm a little later); 408/429/5xx:
            # it is busy or restarting. Anything else (400, 401, 403, 413, ...) will not change: drop the batch.
            if error.code in (404, 408, 425, 429) or error.code >= 500:
                return "retry"
            self._warn_once("refused-{}".format(error.code), "the portal refused a batch of {} rows ({}); it is dropped"
                            .format(len(batch), self.last_error))
            return "refused"
        except Exception as error:  # unreachable, timed out, reset: the portal may come back
            self.last_error = "{} ({})".format(self.config.endpoint, error)[:300]
            return "retry"

    # -- flush and close ----------------------------------------------------------------------------------------
    def flush(self, timeout: Optional[float] = None) -> bool:
        """Ask for an immediate send and wait until the queue is empty, at most ``timeout`` seconds (default the
        config's ``flush_deadline_s``). True when everything logged so far was sent or refused."""
        limit = self.config.flush_deadline_s if timeout is None else max(0.0, float(timeout))
        deadline = time.monotonic() + limit
        self._start()
        with self._lock:
            self._flush_requested = True
            self._wake.notify_all()
            while self._queue or self._pending is not None:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return False
                self._wake.wait(min(left, 0.1))
                if self._pending is None and self._queue:
                    self._flush_requested = True
                    self._wake.notify_all()
            return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Flush (bounded) and stop the sender; rows logged later are ignored."""
        done = self.flush(timeout)
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        return done

    def take_queue(self) -> List[dict]:
        """The rows not yet sent (for a client that replaces this one)."""
        with self._lock:
            rows = list(self._pending or []) + list(self._queue)
            self._queue.clear()
            self._pending = None
            self._closed = True
            self._wake.notify_all()
            return rows


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(error.read(65536).decode("utf-8", "replace"))
        return str(data.get("detail") or data)[:200]
    except Exception:
        return str(error.reason)[:200]


# -- the module-level helper ----------------------------------------------------------------------------------------
_client_lock = threading.Lock()
_off_warned = False


class _Off:
    """Stands in for a client when nothing can be sent (no config, or not rank 0)."""


_OFF = _Off()
_state: Any = None  # None: not decided yet; _OFF; or a MetricsClient


def configure(url: Optional[str] = None, token: Optional[str] = None, cluster: Optional[str] = None,
              job_id: Optional[Any] = None, **options: Any) -> Optional[MetricsClient]:
    """Set where and how to send (unset arguments come from the environment); call it before the first ``log()``.

    ``options``: interval_s (10), batch_rows (500), max_queue (100,000), timeout_s (5), backoff_s (1),
    backoff_max_s (300), flush_deadline_s (5), all_ranks (False), run ("": the training run, see BELVEDERE_RUN).
    Rows logged before are carried over.
    Returns the client, or None when nothing will be sent (settings missing, or not rank 0)."""
    global _state
    config = config_from_environment(url=url, token=token, cluster=cluster,
                                     job_id=None if job_id is None else str(job_id), **options)
    with _client_lock:
        carried = _state.take_queue() if isinstance(_state, MetricsClient) else []
        _state = _decide(config)
        if isinstance(_state, MetricsClient):
            for row in carried:
                _state._enqueue(row)
            return _state
        return None


def _decide(config: Config) -> Any:
    global _off_warned
    if not config.all_ranks and not is_sending_rank():
        return _OFF
    missing = config.missing()
    if missing:
        if not _off_warned:
            _off_warned = True
            _warn("application metrics are not sent ({} not set); log() records nothing".format(", ".join(missing)))
        return _OFF
    return MetricsClient(config)


def _current() -> Any:
    global _state
    if _state is None:
        with _client_lock:
            if _state is None:
                _state = _decide(config_from_environment())
    return _state


def log(step: Any = None, tokens_per_s: Any = None, iteration_s: Any = None, loss: Any = None, grad_norm: Any = None,
        lr: Any = None, **custom: Any) -> None:
    """Record one row of the job's application metrics (None values are left out); returns at once, never raises.

    Canonical names: tokens_per_s (the whole job's tokens/s), iteration_s, loss, grad_norm, lr, and e.g.
    loss_scale, tflops_per_gpu, eval_loss, skipped_iterations, consumed_samples; any other name matching
    ``^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$`` is kept as a custom series (pass dotted names as ``**{"a.b": 1}``)."""
    try:
        client = _current()
        if not isinstance(client, MetricsClient):
            return
        values = {"tokens_per_s": tokens_per_s, "iteration_s": iteration_s, "loss": loss, "grad_norm": grad_norm,
                  "lr": lr}
        values.update(custom)
        client.log(step, values)
    except Exception:  # never into the training loop
        pass


def event(kind: str, seconds: Any = None, step: Any = None) -> None:
    """Mark something the application did now: "checkpoint" (a save started; ``seconds`` it took, when known),
    "evaluation" or "restart". The portal explains throughput dips with these markers."""
    if kind not in EVENT_KINDS:
        _warn("event kind {!r} is not one of {}".format(kind, ", ".join(EVENT_KINDS)))
        return
    number = _number(seconds) if seconds is not None else None
    log(step=step, **{"event." + kind: number if number is not None and number > 0 else 1.0})


def flush(timeout: Optional[float] = None) -> bool:
    """Send what is queued now and wait at most ``timeout`` seconds (default 5); True when all of it went."""
    try:
        client = _state
        return client.flush(timeout) if isinstance(client, MetricsClient) else True
    except Exception:
        return False


def stats() -> Dict[str, int]:
    """Counters: logged, sent, dropped (queue full), refused (by the portal), bad_names, bad_values, failed_posts."""
    client = _state
    return dict(client.counts) if isinstance(client, MetricsClient) else {}


def _after_fork_in_child() -> None:
    """A forked child (a data-loader worker) has the parent's queue but no sender thread: it starts afresh."""
    global _state, _client_lock
    _client_lock = threading.Lock()
    _state = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _at_exit() -> None:
    client = _state
    if isinstance(client, MetricsClient):
        try:
            client.close()
        except Exception:
            pass
