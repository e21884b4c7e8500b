"""Import of TensorBoard event files (apps.appmetrics.tensorboard_events).

The files are written here by the tensorboard package itself: ``tensorboard.summary.Writer`` (scalar
tensors of the scalars plugin, as TF2 writes them) and, for the legacy ``simple_value`` scalars that
torch.utils.tensorboard writes, Event protos from ``tensorboard.compat.proto`` framed by tensorboard's own
``RecordWriter``. Damaged files are made by cutting or flipping bytes of such a file.
"""
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.summary import Writer
from tensorboard.summary.writer.record_writer import RecordWriter

from apps.appmetrics.tensorboard_events import APP_COLUMNS, read_event_file, sanitise_name

WALL0 = 1_767_600_000.0  # 2026-01-05 08:00:00 UTC
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$")

MEGATRON_TAGS = {  # tag Megatron-LM's training_log writes -> canonical name
    "lm loss": "loss",
    "learning-rate": "lr",
    "iteration-time": "iteration_s",
    "throughput": "tflops_per_gpu",
    "grad-norm": "grad_norm",
    "loss-scale": "loss_scale",
    "batch-size": "global_batch",
}


def megatron_file(directory: Path) -> Path:
    """An event file as Megatron-LM writes it (through tensorboard.summary.Writer): iterations 10..50."""
    writer = Writer(str(directory))
    for k in range(1, 6):
        iteration, wall = 10 * k, WALL0 + 60 * k
        samples = iteration * 512
        writer.add_scalar("learning-rate", 3e-4 * k / 5, iteration, wall_time=wall)
        writer.add_scalar("learning-rate vs samples", 3e-4 * k / 5, samples, wall_time=wall)
        writer.add_scalar("batch-size", 512, iteration, wall_time=wall)
        writer.add_scalar("lm loss", 3.0 - 0.1 * k, iteration, wall_time=wall)
        writer.add_scalar("lm loss vs samples", 3.0 - 0.1 * k, samples, wall_time=wall)
        writer.add_scalar("loss-scale", 1.0, iteration, wall_time=wall)
        writer.add_scalar("grad-norm", 0.25 + 0.01 * k, iteration, wall_time=wall)
        writer.add_scalar("num-zeros", 0, iteration, wall_time=wall)
        writer.add_scalar("forward-backward-time", 5.0, iteration, wall_time=wall)
        writer.add_scalar("iteration-time", 5.25, iteration, wall_time=wall)
        writer.add_scalar("throughput", 420.5, iteration, wall_time=wall)
    writer.add_scalar("lm loss validation", 2.75, 50, wall_time=WALL0 + 330)
    writer.add_scalar("lm loss validation ppl", 15.6, 50, wall_time=WALL0 + 330)
    writer.close()
    [path] = directory.glob("events.out.tfevents.*")
    return path


def legacy_event(wall: float, step: int, **values: float) -> event_pb2.Event:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)
                                         for tag, value in values.items()])
    return event_pb2.Event(wall_time=wall, step=step, summary=summary)


def legacy_file(path: Path) -> Path:
    """Legacy scalars (simple_value), a restart, a histogram and a text tensor, as torch writes them."""
    events = [event_pb2.Event(wall_time=WALL0, file_version="brain.Event:2"),
              event_pb2.Event(wall_time=WALL0 + 1, step=0,
                              session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))]
    for step in range(1, 4):
        events.append(legacy_event(WALL0 + 10 * step, step, **{
            "train/loss": 2.5 - 0.5 * step, "loss": 9.0, "tokens_per_sec": 1.25e6, "train/learning_rate": 1e-4,
            "train/grad_norm": 0.5, "my metric #1": float(step), "2nd/metric": 7.0}))
    events.append(legacy_event(WALL0 + 40, 4, **{"train/loss": float("nan"), "eval/loss": 1.75}))
    histogram = summary_pb2.HistogramProto(min=0, max=1, num=2, sum=1, sum_squares=1, bucket_limit=[1],
                                           bucket=[2])
    text = summary_pb2.Summary.Value(tag="notes", tensor=TensorProto(dtype=7, string_val=[b"hello"]),
                                     metadata=summary_pb2.SummaryMetadata(
                                         plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text")))
    events.append(event_pb2.Event(wall_time=WALL0 + 50, step=5, summary=summary_pb2.Summary(value=[
        summary_pb2.Summary.Value(tag="weights", histo=histogram), text])))
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        for event in events:
            writer.write(event.SerializeToString())
    return path


def series(frame: pd.DataFrame, name: str) -> list[tuple]:
    rows = frame[frame["name"] == name]
    return [(ts.timestamp(), None if pd.isna(step) else int(step), value)
            for ts, step, value in zip(rows["ts"], rows["step"], rows["value"])]


def test_a_megatron_file_written_by_tensorboard_maps_to_canonical_names(tmp_path):
    frame, errors = read_event_file(megatron_file(tmp_path))
    assert errors == []
    assert list(frame.columns) == APP_COLUMNS
    assert str(frame["ts"].dtype) == "datetime64[ns, UTC]"
    assert frame["cluster"].isna().all() and frame["job_id"].isna().all()
    names = set(frame["name"])
    assert set(MEGATRON_TAGS.values()) <= names
    assert {"eval_loss", "consumed_samples", "num-zeros", "forward-backward-time", "lm_loss_validation_ppl"} <= names
    assert not any("vs samples" in name or "vs_samples" in name for name in names)
    assert series(frame, "loss") == [(WALL0 + 60 * k, 10 * k, pytest.approx(3.0 - 0.1 * k)) for k in range(1, 6)]
    assert series(frame, "iteration_s")[0] == (WALL0 + 60, 10, 5.25)
    assert series(frame, "tflops_per_gpu")[-1] == (WALL0 + 300, 50, 420.5)
    assert series(frame, "global_batch")[0][2] == 512
    assert series(frame, "eval_loss") == [(WALL0 + 330, 50, 2.75)]
    # consumed samples come from "learning-rate vs samples": its step is the sample count, paired with the
    # iteration of the k-th "learning-rate" value
    assert series(frame, "consumed_samples") == [(WALL0 + 60 * k, 10 * k, 10 * k * 512) for k in range(1, 6)]
    assert frame["value"].map(np.isfinite).all()


def test_a_legacy_simple_value_file_with_common_tags(tmp_path):
    frame, errors = read_event_file(legacy_file(tmp_path / "events.out.tfevents.1.host"))
    assert errors == ["tag 'train/loss': 1 values that are not finite (NaN or infinite) skipped"]
    assert series(frame, "loss") == [(WALL0 + 10, 1, 2.0), (WALL0 + 20, 2, 1.5), (WALL0 + 30, 3, 1.0)]
    assert series(frame, "tb/loss") == [(WALL0 + 10 * s, s, 9.0) for s in (1, 2, 3)]  # "loss" came second
    assert series(frame, "tokens_per_s")[0] == (WALL0 + 10, 1, 1.25e6)
    assert series(frame, "lr")[0][2] == 1e-4  # the float32 read as the decimal written, not 9.99999974e-05
    assert series(frame, "grad_norm")[0][2] == 0.5
    assert series(frame, "eval_loss") == [(WALL0 + 40, 4, 1.75)]
    assert series(frame, "my_metric_1") == [(WALL0 + 10 * s, s, float(s)) for s in (1, 2, 3)]
    assert series(frame, "tb_2nd/metric")[0][2] == 7.0
    assert series(frame, "event.restart") == [(WALL0 + 1, 0, 1.0)]
    assert not {"weights", "notes"} & set(frame["name"])  # histograms and text are not scalars
    assert all(NAME.match(name) for name in frame["name"])


def test_bytes_read_like_the_file(tmp_path):
    path = megatron_file(tmp_path)
    from_path, _ = read_event_file(path)
    from_bytes, errors = read_event_file(path.read_bytes())
    assert errors == []
    pd.testing.assert_frame_equal(from_path, from_bytes)


def test_a_truncated_file_keeps_the_rows_before_the_cut_and_says_where(tmp_path):
    data = legacy_file(tmp_path / "events").read_bytes()
    full, _ = read_event_file(data)
    cut = data[:-40]  # into the last record (the histogram event)
    frame, errors = read_event_file(cut)
    assert len(frame) == len(full)  # the histogram record held no scalar
    record, byte = re.match(r"stopped at record (\d+) at byte (\d+): truncated: the record needs (\d+) bytes",
                            errors[0]).groups()[:2]
    assert int(record) == 7  # file version, session log, 3 steps, step 4, histogram
    assert 0 < int(byte) < len(cut)
    # cut inside step 4's record: steps 1-3 stay, step 4 (eval/loss) is lost
    frame, errors = read_event_file(data[:int(byte) - 30])
    assert "eval_loss" not in set(frame["name"])
    assert series(frame, "loss")[-1] == (WALL0 + 30, 3, 1.0)
    assert errors[0].startswith("stopped at record 6 at byte ")


def test_a_corrupt_record_is_skipped_and_named(tmp_path):
    data = bytearray(legacy_file(tmp_path / "events").read_bytes())
    offsets, offset = [], 0
    while offset < len(data):
        offsets.append(offset)
        offset += 12 + int.from_bytes(data[offset:offset + 8], "little") + 4
    data[offsets[3] + 20] ^= 0xFF  # a byte of record 4's data (step 2)
    frame, errors = read_event_file(bytes(data))
    assert errors[0] == f"record 4 at byte {offsets[3]}: the data checksum does not match (corrupt data); skipped"
    assert [step for _, step, _ in series(frame, "loss")] == [1, 3]
    data[offsets[4]] ^= 0xFF  # record 5's length: nothing after it can be found
    frame, errors = read_event_file(bytes(data))
    assert errors[1] == f"stopped at record 5 at byte {offsets[4]}: the length checksum does not match (corrupt data)"
    assert [step for _, step, _ in series(frame, "loss")] == [1]


def test_not_an_event_file_and_an_empty_one(tmp_path):
    frame, errors = read_event_file(b"step,loss\n1,2.5\n2,2.4\n")
    assert frame.empty and list(frame.columns) == APP_COLUMNS
    assert errors == ["stopped at record 1 at byte 0: the length checksum does not match (corrupt data)"]
    frame, errors = read_event_file(b"")
    assert frame.empty and errors == []
    with pytest.raises(FileNotFoundError):
        read_event_file(tmp_path / "missing")


def test_the_size_limit_reads_what_fits_and_says_so(tmp_path):
    data = legacy_file(tmp_path / "events").read_bytes()
    frame, errors = read_event_file(data, max_bytes=len(data) - 40)
    assert errors[0] == (f"the upload is longer than {len(data) - 40} bytes: only the records in its first "
                         f"{len(data) - 40} bytes are read")
    assert errors[1].startswith("stopped at record 7 at byte ")
    assert "eval_loss" in set(frame["name"])


@pytest.mark.parametrize("tag, name", [
    ("my metric #1", "my_metric_1"),
    ("2nd/metric", "tb_2nd/metric"),
    ("loss (train) / ø", "loss_train_/"),
    ("x" * 100, "x" * 64),
    ("###", ""),
])
def test_sanitised_names_match_the_name_pattern(tag, name):
    assert sanitise_name(tag) == name
    assert name == "" or NAME.match(name)
