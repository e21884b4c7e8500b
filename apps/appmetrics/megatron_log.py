"""Read a Megatron-LM job's training progress from its output: iteration lines, validation, checkpoints,
restarts and the model config of the argument dump.

Plain Python: no Django. The import service and the epilog upload call :func:`parse_training_log` with the
lines of a job's output and store :func:`rows_frame` as job-scoped series.

What is read (the formats of ``megatron/training/training.py`` and ``checkpointing.py``):

* iteration lines, printed by the last rank every ``--log-interval`` iterations::

     [2026-11-24 10:00:00.123456] iteration      100/  500000 | consumed samples:        51200 | elapsed time per
     iteration (ms): 5234.1 | throughput per GPU (TFLOP/s/GPU): 420.3 | learning rate: 3.000000E-04 | global
     batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.321 | number of skipped
     iterations:   0 | number of nan iterations:   0 |

  (one line). Older versions print no timestamp and no throughput, ``learning rate: 3.000E-04``; newer ones
  may add ``skipped samples``, ``energy per GPU (J/iter/GPU)``, ``power per GPU (W/GPU)``, ``params norm``,
  ``num zeros`` and MoE losses (``load_balancing_loss: ...``). Known fields become the canonical series
  (``iteration_s`` = elapsed ms / 1000, ``tflops_per_gpu``, ``lr``, ``global_batch``, ``loss`` from ``lm loss``,
  ``loss_scale``, ``grad_norm``, ``skipped_iterations``, ``nan_iterations``, ``consumed_samples``); other numeric
  fields are kept under a sanitised name (``load_balancing_loss``, ``params_norm``). ``tokens_per_s`` =
  global batch x seq_length / iteration_s when both are known. A value that is nan or inf (a diverged loss)
  is left out of the row: the store holds finite values only.
* `` validation loss at iteration 1000 | lm loss value: 2.1E+00 | lm loss PPL: 8.2E+00 |`` -> an ``eval_loss``
  row and an ``event.evaluation`` marker. The evaluation runs right after the iteration line of the same
  step: when that line has a timestamp, the marker starts there and its value is the seconds until the
  result was printed; otherwise it sits at the result's timestamp with value 1.
* ``saving checkpoint at iteration 250 to /ckpt in torch_dist format`` and ``successfully saved checkpoint
  from iteration 250 to /ckpt [ t 1/4, p 1/1 ]`` (``at iteration`` in older versions) -> ``event.checkpoint``
  at the first line's time. Its value: the ``save-checkpoint`` timer that follows (``(min, max) time across
  ranks (ms)`` block; the max, the time the job was held), else the seconds between the two lines when both
  have timestamps, else 1. An asynchronous save prints its "successfully saved" line later, so the timer is
  the better measure of the pause.
* the argument dump (``---- arguments ----`` ... ``---- end of arguments ----``) -> ``config``; a second dump, or
  an iteration number lower than the one before, is a restart -> ``event.restart`` (a marker that has no
  timestamp of its own takes the next one the log shows).

Tolerated: CRLF, ANSI colour codes, timestamps in front of lines (``[2026-11-24 10:00:00]``,
``2026-11-24T10:00:00.123Z``; without an offset they are read as UTC unless ``tz`` says otherwise), ``srun -l``
labels, and other ranks' lines in between. A malformed iteration, validation or argument line is a
:class:`LineError` (1-based line number, what is wrong, the text) and the good lines around it are kept.
Memory: lines are read one at a time; what is kept grows with the number of iteration lines, not the log;
at most ``max_errors`` errors are kept (``errors_dropped`` counts the rest).
"""
from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Iterable, NamedTuple

import pandas as pd

from apps.ranks.logparse import ARGS_END_RE, ARGS_START_RE, argument_pair, clean_line, split_line_prefix

__all__ = ["LineError", "TrainingLog", "parse_training_log", "rows_frame", "CANONICAL_FIELDS", "CONFIG_ARGUMENTS"]

MAX_LINE_CHARS = 20_000  # a longer "line" is binary or several lines run together: skipped, with an error
MAX_ROWS = 1_000_000  # iteration lines kept (a row is about 1 kB): past this, one error and the rest unread
MAX_TEXT_CHARS = 160  # of a line, in a LineError

# Iteration-line field -> canonical series name and the factor to its unit.
CANONICAL_FIELDS: dict[str, tuple[str, float]] = {
    "consumed samples": ("consumed_samples", 1.0),
    "elapsed time per iteration (ms)": ("iteration_s", 1e-3),
    "throughput per GPU (TFLOP/s/GPU)": ("tflops_per_gpu", 1.0),
    "learning rate": ("lr", 1.0),
    "global batch size": ("global_batch", 1.0),
    "lm loss": ("loss", 1.0),
    "loss scale": ("loss_scale", 1.0),
    "grad norm": ("grad_norm", 1.0),
    "number of skipped iterations": ("skipped_iterations", 1.0),
    "number of nan iterations": ("nan_iterations", 1.0),
    "skipped samples": ("skipped_samples", 1.0),
    "energy per GPU (J/iter/GPU)": ("energy_per_gpu_j", 1.0),
    "power per GPU (W/GPU)": ("power_per_gpu_w", 1.0),
    "params norm": ("params_norm", 1.0),
    "num zeros": ("num_zeros", 1.0),
}

# Argument dump name -> config key (ModelConfig's names, plus the layout).
CONFIG_ARGUMENTS: dict[str, str] = {
    "num_layers": "layers",
    "hidden_size": "hidden",
    "ffn_hidden_size": "ffn_hidden",
    "num_attention_heads": "heads",
    "num_query_groups": "kv_heads",  # only with group_query_attention True
    "seq_length": "seq_len",
    "padded_vocab_size": "vocab",  # preferred: the logits layer multiplies with the padded vocabulary
    "vocab_size": "vocab",
    "global_batch_size": "global_batch",
    "swiglu": "swiglu",
    "num_experts": "moe_experts",
    "moe_router_topk": "moe_topk",
    "moe_ffn_hidden_size": "moe_ffn_hidden",
    "world_size": "world_size",
    "tensor_model_parallel_size": "tp",
    "pipeline_model_parallel_size": "pp",
    "data_parallel_size": "dp",
}
_BOOL_ARGUMENTS = {"swiglu", "group_query_attention"}

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$")
_ITERATION_HEAD_RE = re.compile(r"^iteration\s+(\d{1,12})\s*/\s*(\d{1,12})\s*$")
_VALIDATION_RE = re.compile(r"^validation loss at iteration\s+(\d{1,12})\b([^|]*)\|(.*)$")
_SAVE_START_RE = re.compile(r"^saving checkpoint at iteration\s+(\d{1,12})\b")
_SAVE_END_RE = re.compile(r"^successfully saved checkpoint (?:from|at) iteration\s+(\d{1,12})\b")
_SAVE_TIMER_RE = re.compile(
    r"^save-checkpoint(?:-non-persistent)? \.*: (?:\(\s*([0-9.]+),\s*([0-9.]+)\)|([0-9.]+))\s*$"
)
_NUMBER_RE = re.compile(r"^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|nan|inf|-inf)$", re.IGNORECASE)
_OFFSET_RE = re.compile(r"(?:Z|[+-]\d\d:?\d\d|UTC)\]?:?$")
_STAMP_RE = re.compile(
    r"^\[?(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?\s?(Z|[+-]\d\d:?\d\d|UTC)?\]?:?$"
)


class LineError(NamedTuple):
    """A line that looks like Megatron's but cannot be read: ``line`` 1-based, ``message`` what is wrong,
    ``text`` the line (cut to 160 characters)."""

    line: int
    message: str
    text: str


@dataclass
class TrainingLog:
    """What :func:`parse_training_log` read.

    ``rows``: one dict per iteration line and per validation result, in log order, each with ``ts`` (aware
    datetime in UTC, or None when the line had no timestamp), ``step`` (the iteration) and the series read
    (canonical names). ``markers``: ``{"name", "ts", "step", "value"}`` dicts (``event.checkpoint``,
    ``event.evaluation``, ``event.restart``). ``config``: ModelConfig keys and ``world_size``, ``tp``, ``pp``,
    ``dp`` from the last argument dump. ``errors``: LineError list (at most ``max_errors``); ``errors_dropped``:
    how many more there were. ``lines``: lines read.
    """

    rows: list = field(default_factory=list)
    markers: list = field(default_factory=list)
    config: dict = field(default_factory=dict)
    errors: list = field(default_factory=list)
    errors_dropped: int = 0
    lines: int = 0


def _number(text: str) -> float | None:
    text = text.strip()
    if not text or len(text) > 40 or not _NUMBER_RE.match(text):
        return None
    return float(text)


def _custom_name(key: str) -> str | None:
    name = re.sub(r"[^A-Za-z0-9_.:/-]+", "_", key.strip()).strip("_")
    if name and not name[0].isalpha():
        name = "m_" + name
    name = name[:64]
    return name if _NAME_RE.match(name) else None


def _parse_stamp(text: str, tz: tzinfo) -> datetime | None:
    match = _STAMP_RE.match(text.strip())
    if match is None:
        return None
    day, clock, fraction, offset = match.groups()
    try:
        value = datetime.fromisoformat(f"{day}T{clock}")
    except ValueError:
        return None
    if fraction:
        value += timedelta(microseconds=int(fraction[:6].ljust(6, "0")))
    if offset is None:
        value = value.replace(tzinfo=tz)
    elif offset in ("Z", "UTC"):
        value = value.replace(tzinfo=timezone.utc)
    else:
        sign = 1 if offset[0] == "+" else -1
        digits = offset[1:].replace(":", "")
        value = value.replace(tzinfo=timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))))
    return value.astimezone(timezone.utc)


class _Reader:
    """The state of one pass over the lines."""

    def __init__(self, max_errors: int, tz: tzinfo) -> None:
        self.log = TrainingLog()
        self.max_errors = max_errors
        self.tz = tz
        self.in_dump = False
        self.dump_label: int | None = None
        self.dump_values: dict = {}
        self.dumps = 0
        self.last_step: int | None = None
        self.last_iteration: dict | None = None  # the latest iteration row
        self.save_start: dict | None = None  # marker of a save that has not printed its end or timer yet
        self.untimed: list = []  # markers waiting for the next timestamp
        self.refused_rows = False

    # -- errors ---------------------------------------------------------------------------------
    def error(self, number: int, message: str, text: str) -> None:
        if len(self.log.errors) < self.max_errors:
            self.log.errors.append(LineError(number, message, text.strip()[:MAX_TEXT_CHARS]))
        else:
            self.log.errors_dropped += 1

    # -- markers --------------------------------------------------------------------------------
    def marker(self, name: str, ts: datetime | None, step: int | None, value: float = 1.0) -> dict:
        entry = {"name": name, "ts": ts, "step": step, "value": value}
        self.log.markers.append(entry)
        if ts is None:
            self.untimed.append(entry)
        return entry

    def saw_time(self, ts: datetime) -> None:
        for entry in self.untimed:
            entry["ts"] = ts
        self.untimed.clear()

    # -- one line ---------------------------------------------------------------------------------
    def line(self, number: int, raw: str) -> None:
        if len(raw) > MAX_LINE_CHARS:
            if "iteration" in raw[:2000]:
                self.error(number, f"the line is {len(raw):,} characters long (several lines run together?): "
                           "skipped", raw)
            return
        label, stamps, rest = split_line_prefix(clean_line(raw))
        ts = self.timestamp(stamps)
        rest = rest.strip()
        if self.in_dump and self.dump_line(number, label, rest):
            return
        if ts is not None and self.untimed:
            self.saw_time(ts)
        if rest.startswith("iteration ") and "|" in rest:
            self.iteration(number, ts, rest)
        elif rest.startswith("validation loss at "):
            self.validation(number, ts, rest)
        elif rest.startswith("saving checkpoint at iteration"):
            self.checkpoint_start(number, ts, rest)
        elif rest.startswith("successfully saved checkpoint"):
            self.checkpoint_end(ts, rest)
        elif rest.startswith("save-checkpoint"):
            self.checkpoint_timer(rest)
        elif ARGS_START_RE.match(rest):
            self.start_dump(number, label, ts)

    def timestamp(self, stamps: list[str]) -> datetime | None:
        """The first timestamp with an offset, else the first one (a wrapper's, before Megatron's own)."""
        parsed = [(stamp, _parse_stamp(stamp, self.tz)) for stamp in stamps]
        parsed = [(stamp, value) for stamp, value in parsed if value is not None]
        if not parsed:
            return None
        with_offset = [value for stamp, value in parsed if _OFFSET_RE.search(stamp)]
        return with_offset[0] if with_offset else parsed[0][1]

    # -- the argument dump ------------------------------------------------------------------------
    def start_dump(self, number: int, label: int | None, ts: datetime | None) -> None:
        self.dumps += 1
        if self.dumps > 1:
            self.marker("event.restart", ts, None)
            self.last_step = None  # the next iteration line starts the new run
        self.in_dump, self.dump_label, self.dump_values = True, label, {}

    def dump_line(self, number: int, label: int | None, rest: str) -> bool:
        """Inside the dump: True when the line belonged to it."""
        if self.dump_label is not None and label != self.dump_label:
            return False
        if ARGS_END_RE.match(rest):
            self.end_dump()
            return True
        pair = argument_pair(rest)
        if pair is None:
            if ARGS_START_RE.match(rest):
                self.end_dump()
                return False  # a new dump: handled as one
            return False
        name, value = pair
        if name in CONFIG_ARGUMENTS or name in _BOOL_ARGUMENTS:
            self.dump_value(number, name, value, rest)
        return True

    def dump_value(self, number: int, name: str, value: str, text: str) -> None:
        if value == "None":
            return
        if name in _BOOL_ARGUMENTS:
            if value not in ("True", "False"):
                self.error(number, f"{name} is {value[:40]!r} in the argument dump, not True or False", text)
                return
            self.dump_values[name] = value == "True"
            return
        if not (value.isascii() and value.isdigit() and len(value) <= 12) or int(value) < 1:
            self.error(number, f"{name} is {value[:40]!r} in the argument dump, not a positive whole number", text)
            return
        self.dump_values[name] = int(value)

    def end_dump(self) -> None:
        self.in_dump = False
        values = self.dump_values
        config: dict = {}
        for name, key in CONFIG_ARGUMENTS.items():
            if name not in values or key in config:
                continue
            if name == "num_query_groups" and not values.get("group_query_attention"):
                continue  # printed (1) by every run; used only with grouped-query attention
            if name in ("moe_router_topk", "moe_ffn_hidden_size") and "num_experts" not in values:
                continue  # printed (top-k 2) by dense runs too
            config[key] = values[name]
        if config:
            self.log.config = config

    # -- iteration lines --------------------------------------------------------------------------
    def iteration(self, number: int, ts: datetime | None, rest: str) -> None:
        parts = rest.split("|")
        if parts[-1].strip():
            self.error(number, "the line does not end with '|': cut, or mixed with other output", rest)
            return
        head = _ITERATION_HEAD_RE.match(parts[0].strip())
        if head is None:
            self.error(number, f"expected 'iteration N/ TOTAL' before the first '|', found {parts[0].strip()[:40]!r}",
                       rest)
            return
        step = int(head.group(1))
        row: dict = {"ts": ts, "step": step}
        for part in parts[1:-1]:
            key, colon, value = part.strip().rpartition(":")
            key = key.strip()
            if not colon or not key:
                self.error(number, f"field {part.strip()[:40]!r} has no 'name: value'", rest)
                return
            parsed = _number(value)
            if parsed is None:
                self.error(number, f"{key} is {value.strip()[:40]!r}, not a number", rest)
                return
            if not math.isfinite(parsed):
                continue
            if key in CANONICAL_FIELDS:
                name, factor = CANONICAL_FIELDS[key]
                row[name] = parsed * factor
            else:
                name = _custom_name(key)
                if name is not None and name not in row:
                    row[name] = parsed
        if "iteration_s" in row and row["iteration_s"] <= 0:
            self.error(number, f"elapsed time per iteration is {row['iteration_s'] * 1000:g} ms, not above zero", rest)
            return
        if self.last_step is not None and step < self.last_step:
            self.marker("event.restart", ts, step)
        self.last_step = step
        seq_len = self.log.config.get("seq_len")
        if seq_len and "global_batch" in row and "iteration_s" in row:
            row["tokens_per_s"] = row["global_batch"] * seq_len / row["iteration_s"]
        if len(self.log.rows) >= MAX_ROWS:
            if not self.refused_rows:
                self.error(number, f"more than {MAX_ROWS:,} rows: the rest of the log is not read", rest)
                self.refused_rows = True
            return
        self.log.rows.append(row)
        self.last_iteration = row

    # -- validation -------------------------------------------------------------------------------
    def validation(self, number: int, ts: datetime | None, rest: str) -> None:
        match = _VALIDATION_RE.match(rest)
        if match is None:
            if rest.startswith("validation loss at iteration"):
                self.error(number, "expected 'validation loss at iteration N | lm loss value: X |'", rest)
            return  # "validation loss at the end of training ...": no step
        step = int(match.group(1))
        values = {}
        for part in match.group(3).split("|"):
            key, colon, value = part.strip().rpartition(" value:")
            if not colon:
                continue
            parsed = _number(value)
            if parsed is None:
                self.error(number, f"{key.strip()} value is {value.strip()[:40]!r}, not a number", rest)
                return
            values[key.strip()] = parsed
        loss = values.get("lm loss", next(iter(values.values()), None)) if values else None
        if loss is None:
            self.error(number, "the validation line has no 'lm loss value: X'", rest)
            return
        if math.isfinite(loss):
            self.log.rows.append({"ts": ts, "step": step, "eval_loss": loss})
        start, seconds = ts, 1.0
        began = self.iteration_time(step)
        if began is not None:
            start = began
            if ts is not None:
                seconds = max((ts - began).total_seconds(), 0.0) or 1.0
        self.marker("event.evaluation", start, step, seconds)

    def iteration_time(self, step: int) -> datetime | None:
        """When the iteration line of ``step`` was printed, if it is the latest one: evaluation and checkpoint
        saving start right after it."""
        previous = self.last_iteration
        if previous is not None and previous["step"] == step:
            return previous["ts"]
        return None

    # -- checkpoints ------------------------------------------------------------------------------
    def checkpoint_start(self, number: int, ts: datetime | None, rest: str) -> None:
        match = _SAVE_START_RE.match(rest)
        if match is None:
            self.error(number, "expected 'saving checkpoint at iteration N to PATH'", rest)
            return
        step = int(match.group(1))
        entry = self.marker("event.checkpoint", ts if ts is not None else self.iteration_time(step), step)
        entry["_timed"] = False
        self.save_start = entry

    def checkpoint_end(self, ts: datetime | None, rest: str) -> None:
        match = _SAVE_END_RE.match(rest)
        entry = self.save_start
        if match is None or entry is None or entry["step"] != int(match.group(1)):
            return
        if entry["ts"] is not None and ts is not None and not entry["_timed"]:
            entry["value"] = max((ts - entry["ts"]).total_seconds(), 0.0) or 1.0
            entry["_by_stamps"] = True

    def checkpoint_timer(self, rest: str) -> None:
        match = _SAVE_TIMER_RE.match(rest)
        entry = self.save_start
        if match is None or entry is None or entry["_timed"]:
            return
        milliseconds = float(match.group(2) or match.group(3))
        if milliseconds > 0:
            entry["value"] = milliseconds / 1000
            entry["_timed"] = True

    # -- end ----------------------------------------------------------------------------------------
    def finish(self) -> TrainingLog:
        if self.in_dump:
            self.end_dump()
        seq_len = self.log.config.get("seq_len")
        if seq_len:
            for row in self.log.rows:
                if "tokens_per_s" not in row and "global_batch" in row and "iteration_s" in row:
                    row["tokens_per_s"] = row["global_batch"] * seq_len / row["iteration_s"]
        for entry in self.log.markers:
            entry.pop("_timed", None)
            entry.pop("_by_stamps", None)
        return self.log


def parse_training_log(lines: Iterable[str] | str | bytes, *, max_errors: int = 50,
                       tz: tzinfo = timezone.utc) -> TrainingLog:
    """Read Megatron-LM output line by line (see the module docstring).

    ``lines``: any iterable of lines (an open file, a list); a whole text (str or bytes) is read line by line
    too. ``tz``: the time zone of timestamps written without an offset (Megatron prints the node's local
    time). Never raises for the log's content: what cannot be read is in ``errors``."""
    if max_errors < 0:
        raise ValueError("max_errors must be 0 or more")
    if isinstance(lines, (bytes, bytearray)):
        lines = io.StringIO(bytes(lines).decode("utf-8", errors="replace"))
    elif isinstance(lines, str):
        lines = io.StringIO(lines)
    reader = _Reader(max_errors, tz)
    number = 0
    for number, raw in enumerate(lines, 1):
        if isinstance(raw, (bytes, bytearray)):
            raw = bytes(raw).decode("utf-8", errors="replace")
        if number == 1 and raw.startswith("\ufeff"):
            raw = raw[1:]
        reader.line(number, raw.rstrip("\n"))
    reader.log.lines = number
    return reader.finish()


def rows_frame(log: TrainingLog, cluster: str, job_id: int, *, start: datetime | None = None):
    """The log's rows and markers as a DataFrame in the telemetry store's APP_COLUMNS (ts, cluster, job_id,
    name, step, value), one row per series value.

    Rows without a timestamp are placed from ``start`` (the job's start) when given: each iteration line
    after the previous one (the first after iteration 0) by (steps since it) x its iteration_s, a validation
    row at the iteration before it. An estimate: it leaves out start-up, evaluation and checkpoint pauses, and
    a run resumed from a checkpoint counts from iteration 0. Without ``start`` such rows are left out. Markers without a
    timestamp are left out."""
    columns = ["ts", "cluster", "job_id", "name", "step", "value"]
    records: list = []
    clock, clock_step = (start.astimezone(timezone.utc) if start is not None else None), 0
    for row in log.rows:
        ts = row.get("ts")
        step = row.get("step")
        if ts is None and clock is not None:
            if "iteration_s" in row:
                steps = step - clock_step if step is not None and step > clock_step else 1
                clock = clock + timedelta(seconds=row["iteration_s"] * steps)
                clock_step = step if step is not None else clock_step
            ts = clock
        if ts is None:
            continue
        for name, value in row.items():
            if name in ("ts", "step") or value is None or not math.isfinite(value):
                continue
            records.append((ts, cluster, job_id, name, step, float(value)))
    for entry in log.markers:
        if entry["ts"] is not None:
            records.append((entry["ts"], cluster, job_id, entry["name"], entry["step"], float(entry["value"])))
    frame = pd.DataFrame.from_records(records, columns=columns)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True).astype("datetime64[ns, UTC]")
    frame["cluster"] = frame["cluster"].astype(str)
    frame["job_id"] = frame["job_id"].astype("int64")
    frame["name"] = frame["name"].astype(str)
    frame["step"] = frame["step"].astype("Int64")
    frame["value"] = frame["value"].astype("float64")
    return frame
