"""Writes of the appmetrics app: a job's application series (into the telemetry store) and its model config.

Every write is scoped to one job (the API checks who may write: the job's user, staff or the job's own token)
and validates all it gets before it stores anything: a bad row refuses the whole batch with every problem named,
so a batch is stored whole or not at all.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone

import pandas as pd
from django.core.cache import cache
from django.db import transaction
from django.utils.timezone import now as time_now

from apps.core.timebounds import WriteWindow
from apps.telemetry.backends.base import APP_COLUMNS, canonical_app
from apps.telemetry.store import telemetry_store

from . import megatron_log, tensorboard_events
from .choices import JobModelConfigSourceChoices
from .flops import ModelConfig
from .models import MODEL_FIELDS, JobModelConfig

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$")
MAX_ROWS = 10_000  # rows per request
MAX_NAMES = 64  # names per row
# Epoch seconds accepted for "ts": 2000-01-01 .. 2200-01-01 (a millisecond stamp sent by mistake is refused).
TS_MIN, TS_MAX = 946_684_800, 7_258_118_400


SERIES_STAMP = "appmetrics:series-written:{pk}"  # cache key: when the job's series last changed


class MetricsRefused(ValueError):
    """The batch was not stored; ``problems`` are (where, message) pairs, e.g. ("rows[3].loss", "not a number")."""

    def __init__(self, message: str, problems: list[tuple[str, str]]):
        super().__init__(message)
        self.problems = problems


def _ts(value, where: str, problems: list) -> datetime | None:
    if isinstance(value, bool) or value is None:
        problems.append((where, "give the time as epoch seconds or an ISO 8601 string"))
        return None
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or not TS_MIN <= value <= TS_MAX:
            problems.append((where, f"{value!r} is not epoch seconds between 2000 and 2200 (milliseconds? divide by 1000)"))
            return None
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    if isinstance(value, str) and len(value) <= 40:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
            # The same years as epoch seconds: past 2262 no pandas Timestamp (hence no series) holds the time.
            if not TS_MIN <= moment.timestamp() <= TS_MAX:
                problems.append((where, f"{value!r} is not between 2000 and 2200"))
                return None
            return moment.astimezone(timezone.utc)
    problems.append((where, f"{str(value)[:40]!r} is not a time: give epoch seconds or an ISO 8601 string"))
    return None


def rows_frame(job, rows: list, window: WriteWindow | None = None) -> pd.DataFrame:
    """The canonical job-series frame of API rows ``[{"ts", "step", name: value, ...}]``; MetricsRefused naming
    every problem (the first 20) when one row is wrong, a ``ts`` outside ``window`` (the job's write window) too."""
    if not isinstance(rows, list):
        raise MetricsRefused("Send the rows as a JSON list (or {\"rows\": [...]}).", [("rows", "not a list")])
    if len(rows) > MAX_ROWS:
        raise MetricsRefused(f"{len(rows):,} rows in one request; send at most {MAX_ROWS:,}.", [("rows", "too many rows")])
    problems: list[tuple[str, str]] = []
    ts_out, step_out, name_out, value_out = [], [], [], []
    for index, row in enumerate(rows):
        where = f"rows[{index}]"
        if not isinstance(row, dict):
            problems.append((where, "each row is an object like {\"ts\": 1764000000, \"step\": 10, \"loss\": 2.3}"))
            continue
        moment = _ts(row.get("ts"), f"{where}.ts", problems)
        if moment is not None and window is not None and (outside := window.refusal(moment)) is not None:
            problems.append((f"{where}.ts", outside))
            moment = None
        step = row.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2**62):
            problems.append((f"{where}.step", f"{str(step)[:40]!r} is not a whole number of iterations"))
            step = None
        values = {key: value for key, value in row.items() if key not in ("ts", "step")}
        if not values:
            problems.append((where, "the row has no metric besides ts and step"))
        if len(values) > MAX_NAMES:
            problems.append((where, f"{len(values)} metrics in one row; at most {MAX_NAMES}"))
            continue
        for name, value in values.items():
            if not isinstance(name, str) or not NAME.match(name):
                problems.append((f"{where}.{str(name)[:64]}", "a metric name starts with a letter and has at most 64 letters, "
                                                              "digits or _ . : / -"))
                continue
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                problems.append((f"{where}.{name}", f"{str(value)[:40]!r} is not a finite number"))
                continue
            if moment is not None:
                ts_out.append(moment)
                step_out.append(step)
                name_out.append(name)
                value_out.append(float(value))
        if len(problems) >= 20:
            break
    if problems:
        raise MetricsRefused(f"{len(problems)} problem(s) in the rows; nothing was stored. First: {problems[0][0]}: "
                             f"{problems[0][1]}", problems)
    frame = pd.DataFrame({"ts": ts_out, "cluster": job.cluster.name, "job_id": int(job.job_id), "name": name_out,
                          "step": pd.array(step_out, dtype="Int64"), "value": value_out}, columns=APP_COLUMNS)
    return canonical_app(frame)


def series_write(job, frame: pd.DataFrame) -> int:
    """Store a canonical job-series frame of ``job`` (rows of other jobs refused)."""
    if frame.empty:
        return 0
    frame = frame.assign(cluster=job.cluster.name, job_id=int(job.job_id))
    written = telemetry_store().write_job_series(canonical_app(frame))
    mark_series_written(job)
    return written


def mark_series_written(job) -> None:
    """Record that ``job``'s application series changed: the panel's cached efficiency keys on this stamp, so rows
    sent long after the job ended show at once. Every write through this module calls it."""
    cache.set(SERIES_STAMP.format(pk=job.pk), time_now().timestamp(), None)


def metrics_ingest(job, rows: list, *, source: str = "api", window: WriteWindow | None = None) -> int:
    """Validate ``rows`` (the API's shape) and store them; MetricsRefused when any row is wrong or, with ``window``
    (the job's write window, ``Job.write_window``), dated outside it."""
    return series_write(job, rows_frame(job, rows, window))


def within_window(frame: pd.DataFrame, window: WriteWindow | None) -> tuple[pd.DataFrame, list[dict]]:
    """The rows of a canonical job-series ``frame`` dated inside ``window`` (all without one), and the error entry
    (``{"line": None, "message"}``) that counts the rest, naming the window; [] when none was dropped."""
    if window is None or frame.empty:
        return frame, []
    times = pd.to_datetime(frame["ts"], utc=True)
    keep = (times >= pd.Timestamp(window.start)) & (times <= pd.Timestamp(window.end))
    dropped = int((~keep).sum())
    if not dropped:
        return frame, []
    outside = times[~keep]
    message = (f"ts: {dropped:,} values dated {outside.min():%Y-%m-%dT%H:%M:%SZ} .. {outside.max():%Y-%m-%dT%H:%M:%SZ} "
               f"are outside the job's write window {window.words()} and were dropped")
    return frame[keep].reset_index(drop=True), [{"line": None, "message": message}]


def model_config_set(job, data: dict, *, source: str = JobModelConfigSourceChoices.API) -> JobModelConfig:
    """Create or replace the job's model config from validated ``data`` (MODEL_FIELDS); ValueError when the shape
    cannot give FLOPs (``ModelConfig.from_dict`` says which field)."""
    values = {key: data.get(key) for key in MODEL_FIELDS}
    values["swiglu"] = bool(values.get("swiglu") or False)
    ModelConfig.from_dict(values)  # refuses a shape that cannot give FLOPs, naming the field
    with transaction.atomic():
        record, _ = JobModelConfig.objects.update_or_create(job=job, defaults={**values, "source": source})
    return record


def _config_from_log(config: dict) -> dict:
    return {key: config[key] for key in MODEL_FIELDS if config.get(key) is not None}


def training_log_import(job, lines, *, window: WriteWindow | None = None) -> dict:
    """Read Megatron-LM output (an iterable of text lines, streamed) into the job's series and, when the argument
    dump gives the shape and the job has no config set through the API, its model config. Values dated outside
    ``window`` (the job's write window) are dropped, and counted in ``errors``."""
    log = megatron_log.parse_training_log(lines)
    frame, outside = within_window(megatron_log.rows_frame(log, job.cluster.name, int(job.job_id)), window)
    written = series_write(job, frame)
    config_set = False
    shape = _config_from_log(log.config)
    existing = JobModelConfig.objects.filter(job=job).values_list("source", flat=True).first()
    if shape and existing in (None, JobModelConfigSourceChoices.MEGATRON_LOG, JobModelConfigSourceChoices.DEMO):
        try:
            model_config_set(job, shape, source=JobModelConfigSourceChoices.MEGATRON_LOG)
            config_set = True
        except ValueError:
            config_set = False
    return {"rows": written, "lines": log.lines, "model_config": config_set,
            "errors": [*outside, *({"line": error.line, "message": error.message} for error in log.errors)]}


def tensorboard_import(job, data: bytes, *, window: WriteWindow | None = None) -> dict:
    """Read a TensorBoard event file's scalars into the job's series; values dated outside ``window`` (the job's write
    window) are dropped, and counted in ``errors``."""
    frame, errors = tensorboard_events.read_event_file(data)
    frame, outside = within_window(frame, window)
    written = series_write(job, frame)
    return {"rows": written, "errors": [*outside, *(error if isinstance(error, dict) else {"line": None, "message": str(error)}
                                                    for error in errors)]}
