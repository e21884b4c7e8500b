"""Import of TensorBoard event files: the scalars a training run wrote, as job-scoped application series.

An event file is a sequence of TFRecords (little-endian ``uint64 length``, ``uint32 masked CRC-32C`` of the
length, ``length`` bytes of a serialised ``tensorboard.compat.proto.event_pb2.Event``, ``uint32 masked
CRC-32C`` of the data). This module walks the records itself, checking both checksums with the tensorboard
package's ``masked_crc32c``, so that a damaged file keeps every record before the damage and the error
says at which record and byte it stopped (tensorboard's own loaders only log "truncated record" and stop).
Events are decoded with the tensorboard package's protos and ``tensor_util``.

Two kinds of scalar are read:

* legacy summaries: ``Summary.Value.simple_value`` (what ``torch.utils.tensorboard`` and tensorboardX
  write, and TF1's ``tf.summary.scalar``);
* scalar tensors: ``Summary.Value.tensor`` of the scalars plugin (what ``tensorboard.summary.Writer`` and
  TF2 write). The plugin name comes with the first value of a tag only, so it is remembered per tag; a
  0-d numeric tensor of a tag with no plugin is read as a scalar too. Histograms, images, text and other
  plugins' data are skipped.

Tag names are mapped to the canonical series names (``TAG_NAMES``): Megatron-LM's ``training_log`` tags
("lm loss", "lm loss validation", "iteration-time" (seconds), "throughput" (TFLOP/s/GPU), "learning-rate",
"grad-norm", "loss-scale", "batch-size") and common ones ("train/loss", "eval/loss", "tokens_per_sec",
"train/learning_rate", "train/grad_norm", ...), compared in lower case with spaces and "-" read as "_" and
a leading "train/" or "train_" ignored. The first tag that claims a canonical name keeps it; a later
different tag for the same name stays under its own custom name, with "tb/" in front where that custom
name is taken too ("loss" after "train/loss" took ``loss`` becomes ``tb/loss``). Every other tag is kept as a
custom name, sanitised to ``^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$`` (other characters become "_", a name that
does not start with a letter gets "tb_" in front, 64 characters at most).

Megatron writes each scalar a second time against consumed samples ("lm loss vs samples": the step is
the sample count). Those duplicates are not series of their own; one of them ("learning-rate vs samples"
when present, else the first seen) gives ``consumed_samples``, its k-th value paired with the k-th step of
its base tag when both have the same number of values (else the step is unknown).

A ``SessionLog`` START event (a run that (re)started writing) becomes the marker ``event.restart``.
Wall time becomes ``ts`` (UTC), the event's step ``step``. Values that are not finite (a NaN loss) cannot
be stored; they are counted and reported as one error per series.

Plain Python: no Django (numpy, pandas and the tensorboard package).
"""
from __future__ import annotations

import os
import re
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.util import tensor_util

APP_COLUMNS = ["ts", "cluster", "job_id", "name", "step", "value"]  # as apps.telemetry.backends.base
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$")
MAX_BYTES = 256 * 1024 * 1024  # an event file of scalars is a few MB; reading is about 10 MB/s (CRC in Python)
MAX_ERRORS = 50
SCALARS_PLUGIN = "scalars"
VS_SAMPLES = " vs samples"
PREFERRED_SAMPLES_TAG = "learning-rate vs samples"

# Normalised tag (see normalise_tag) -> canonical name.
TAG_NAMES: dict[str, str] = {
    # Megatron-LM training_log / evaluate_and_print_results
    "lm_loss": "loss",
    "lm_loss_validation": "eval_loss",
    "iteration_time": "iteration_s",
    "throughput": "tflops_per_gpu",
    "learning_rate": "lr",
    "grad_norm": "grad_norm",
    "loss_scale": "loss_scale",
    "batch_size": "global_batch",
    # common names (Hugging Face Trainer, Lightning, hand-written loops)
    "loss": "loss",
    "loss/train": "loss",
    "eval/loss": "eval_loss",
    "eval_loss": "eval_loss",
    "val/loss": "eval_loss",
    "val_loss": "eval_loss",
    "valid/loss": "eval_loss",
    "validation/loss": "eval_loss",
    "validation_loss": "eval_loss",
    "loss/validation": "eval_loss",
    "loss/val": "eval_loss",
    "lr": "lr",
    "gradient_norm": "grad_norm",
    "tokens_per_s": "tokens_per_s",
    "tokens_per_sec": "tokens_per_s",
    "tokens_per_second": "tokens_per_s",
    "tokens/s": "tokens_per_s",
    "throughput/tokens_per_sec": "tokens_per_s",
    "iteration_s": "iteration_s",
    "step_time": "iteration_s",
    "tflops_per_gpu": "tflops_per_gpu",
    "skipped_iterations": "skipped_iterations",
    "nan_iterations": "nan_iterations",
    "consumed_samples": "consumed_samples",
    "global_batch": "global_batch",
    "global_batch_size": "global_batch",
}
MARKERS = ("event.checkpoint", "event.evaluation", "event.restart")


@dataclass
class _Series:
    """The values read for one tag, in file order."""

    wall: list[float] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    non_finite: int = 0


def normalise_tag(tag: str) -> str:
    """The form tags are compared in: lower case, spaces and "-" as "_", a leading "train/" or "train_" dropped."""
    text = re.sub(r"[\s\-]+", "_", tag.strip().lower())
    for prefix in ("train/", "train_", "training/"):
        if text.startswith(prefix) and len(text) > len(prefix):
            return text[len(prefix):]
    return text


def sanitise_name(tag: str) -> str:
    """A custom series name for ``tag`` that matches the name pattern ("" when nothing is left)."""
    text = re.sub(r"[^A-Za-z0-9_.:/-]+", "_", tag.strip()).strip("_")
    if not text:
        return ""
    if not text[0].isalpha() or not text[0].isascii():
        text = "tb_" + text
    return text[:64]


def read_event_file(path_or_bytes: str | os.PathLike | bytes, *, max_bytes: int = MAX_BYTES,
                    max_errors: int = MAX_ERRORS) -> tuple[pd.DataFrame, list[str]]:
    """The scalars of one event file as rows in APP_COLUMNS (cluster and job_id left empty: <NA>), and errors.

    Never raises on bad content: a truncated or corrupt file gives the rows read before the damage and an
    error naming the record and byte offset. A missing file raises FileNotFoundError.
    """
    data, errors = _load(path_or_bytes, max_bytes)
    series: dict[str, _Series] = defaultdict(_Series)
    restarts: list[tuple[float, int]] = []
    tag_plugin: dict[str, str] = {}
    for number, offset, record, problem in _records(data):
        if problem:
            errors.append(problem)
            if problem.startswith("stopped"):
                break
            continue
        try:
            event = event_pb2.Event.FromString(record)
        except DecodeError as exc:
            errors.append(f"record {number} at byte {offset}: not a TensorBoard event ({exc}); skipped")
            continue
        if event.HasField("session_log") and event.session_log.status == event_pb2.SessionLog.START:
            restarts.append((event.wall_time, event.step))
        if event.HasField("summary"):
            _read_summary(event, series, tag_plugin, errors, number, offset)
    frame = _frame(series, restarts, errors)
    if len(errors) > max_errors:
        errors = errors[:max_errors] + [f"... and {len(errors) - max_errors} more errors"]
    return frame, errors


def _load(path_or_bytes: str | os.PathLike | bytes, max_bytes: int) -> tuple[bytes, list[str]]:
    """The bytes to read, at most ``max_bytes`` of them, and an error when the input was longer."""
    errors: list[str] = []
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        where = "the upload"
    else:
        path = Path(path_or_bytes)
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
        where = str(path)
    if len(data) > max_bytes:
        errors.append(f"{where} is longer than {max_bytes} bytes: only the records in its first {max_bytes} "
                      f"bytes are read")
        data = data[:max_bytes]
    return data, errors


def _records(data: bytes):
    """Yield (record number, byte offset, payload, problem) for each TFRecord of ``data``.

    ``problem`` is None for a good record; an error that starts with "stopped" ends the walk (a truncated
    record or a bad length checksum leave no way to find the next record); a bad data checksum skips the
    one record (its length was checked, so the next record is found).
    """
    offset, number, size = 0, 1, len(data)
    while offset < size:
        where = f"record {number} at byte {offset}"
        if size - offset < 12:
            yield number, offset, b"", (f"stopped at {where}: truncated: the record header needs 12 bytes, "
                                        f"{size - offset} remain")
            return
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        if masked_crc32c(header) != length_crc:
            yield number, offset, b"", f"stopped at {where}: the length checksum does not match (corrupt data)"
            return
        end = offset + 12 + length + 4
        if end > size:
            yield number, offset, b"", (f"stopped at {where}: truncated: the record needs {length + 16} bytes, "
                                        f"{size - offset} remain")
            return
        payload = data[offset + 12:offset + 12 + length]
        (data_crc,) = struct.unpack("<I", data[end - 4:end])
        if masked_crc32c(payload) != data_crc:
            yield number, offset, b"", f"{where}: the data checksum does not match (corrupt data); skipped"
        else:
            yield number, offset, payload, None
        offset, number = end, number + 1


def _read_summary(event, series: dict[str, _Series], tag_plugin: dict[str, str], errors: list[str],
                  number: int, offset: int) -> None:
    """Add the scalar values of one summary event to ``series`` (by tag)."""
    for value in event.summary.value:
        tag = value.tag
        if value.HasField("metadata") and value.metadata.plugin_data.plugin_name:
            tag_plugin.setdefault(tag, value.metadata.plugin_data.plugin_name)
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            number_value = _float32(value.simple_value)
        elif kind == "tensor":
            plugin = tag_plugin.get(tag)
            if plugin not in (None, SCALARS_PLUGIN):
                continue
            try:
                array = tensor_util.make_ndarray(value.tensor)
            except (ValueError, TypeError) as exc:
                errors.append(f"record {number} at byte {offset}: tag {tag!r}: unreadable tensor ({exc}); skipped")
                continue
            if array.size != 1 or not np.issubdtype(array.dtype, np.number):
                if plugin == SCALARS_PLUGIN:
                    errors.append(f"record {number} at byte {offset}: tag {tag!r}: a scalar of shape "
                                  f"{array.shape}, dtype {array.dtype}; skipped")
                continue
            number_value = _float32(array) if array.dtype == np.float32 else float(array.reshape(()))
        else:
            continue
        entry = series[tag]
        if not np.isfinite(number_value):
            entry.non_finite += 1
            continue
        entry.wall.append(event.wall_time)
        entry.step.append(event.step)
        entry.value.append(number_value)


def _float32(value) -> float:
    """A float32 as the shortest decimal that reads back to it (2.9, not 2.9000000953674316)."""
    return float(str(np.float32(np.asarray(value).reshape(()))))


def _names(tags: list[str]) -> dict[str, str]:
    """Series name per tag (tags in file order): canonical when mapped and not claimed yet, else custom."""
    names: dict[str, str] = {}
    used: set[str] = set()
    for tag in tags:
        canonical = tag if tag in MARKERS else TAG_NAMES.get(normalise_tag(tag))
        name = canonical if canonical and canonical not in used else sanitise_name(tag)
        while name and name in used:  # "loss" after "train/loss" took the name loss
            name = ("tb/" + name)[:64]
        names[tag] = name
        used.add(name)
    return names


def _frame(series: dict[str, _Series], restarts: list[tuple[float, int]], errors: list[str]) -> pd.DataFrame:
    """Rows in APP_COLUMNS from the series read (vs-samples duplicates folded into consumed_samples)."""
    samples_tags = [tag for tag in series if tag.endswith(VS_SAMPLES)]
    plain_tags = [tag for tag in series if not tag.endswith(VS_SAMPLES)]
    names = _names(plain_tags)
    parts: list[pd.DataFrame] = []
    for tag in plain_tags:
        entry = series[tag]
        name = names[tag]
        if entry.non_finite:
            errors.append(f"tag {tag!r}: {entry.non_finite} values that are not finite (NaN or infinite) skipped")
        if not name:
            errors.append(f"tag {tag!r}: no usable series name; skipped")
            continue
        if entry.value:
            parts.append(_part(name, entry.wall, entry.step, entry.value))
    if samples_tags and "consumed_samples" not in names.values():
        source = PREFERRED_SAMPLES_TAG if PREFERRED_SAMPLES_TAG in series else samples_tags[0]
        parts.append(_consumed_samples(series[source], series.get(source[:-len(VS_SAMPLES)])))
    if restarts:
        wall, step = zip(*restarts)
        parts.append(_part("event.restart", list(wall), list(step), [1.0] * len(wall)))
    parts = [part for part in parts if len(part)]
    if not parts:
        return empty_frame()
    frame = pd.concat(parts, ignore_index=True)
    return frame.sort_values(["name", "ts"], kind="stable", ignore_index=True)[APP_COLUMNS]


def _consumed_samples(samples: _Series, base: _Series | None) -> pd.DataFrame:
    """consumed_samples from a Megatron "X vs samples" tag, whose step is the sample count."""
    steps: list[int | None]
    if base is not None and len(base.step) == len(samples.step):
        steps = list(base.step)
    else:
        steps = [None] * len(samples.step)
    return _part("consumed_samples", samples.wall, steps, [float(step) for step in samples.step])


def _part(name: str, wall: list[float], step: list, value: list[float]) -> pd.DataFrame:
    ts = pd.to_datetime(np.asarray(wall, dtype="float64") * 1e9, unit="ns", utc=True).as_unit("ns")
    return pd.DataFrame({
        "ts": ts,
        "cluster": pd.Series([pd.NA] * len(value), dtype="string"),
        "job_id": pd.Series([pd.NA] * len(value), dtype="Int64"),
        "name": name,
        "step": pd.array(step, dtype="Int64"),
        "value": np.asarray(value, dtype="float64"),
    })


def empty_frame() -> pd.DataFrame:
    """No rows, the columns and dtypes of read_event_file's answer."""
    return _part("", [], [], []).iloc[0:0]
