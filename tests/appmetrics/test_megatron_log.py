"""apps.appmetrics.megatron_log: Megatron-LM iteration lines, validation, checkpoints and restarts.

The excerpts in tests/appmetrics/data/megatron/ follow the line formats of Megatron-LM's
megatron/training/training.py (training_log, evaluate_and_print_results, save_checkpoint_and_time) and
checkpointing.py, recent and older (see that folder's README).
"""
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from apps.appmetrics.flops import ModelConfig, active_params
from apps.appmetrics.megatron_log import LineError, parse_training_log, rows_frame
from apps.telemetry.backends.base import APP_COLUMNS, canonical_app

DATA = Path(__file__).parent / "data" / "megatron"
UTC = timezone.utc


def read(name: str):
    with open(DATA / name, newline="") as handle:  # keep CRLF: the parser must strip it
        return parse_training_log(handle)


def iteration_rows(log):
    return [row for row in log.rows if "iteration_s" in row]


# --------------------------------------------------------------------------------------------
# A recent Megatron-LM: wrapper timestamps, throughput, evaluation, checkpoint, requeue
# --------------------------------------------------------------------------------------------
def test_recent_format_iteration_values():
    log = read("core_llama70b_gh200_requeued.log")
    assert log.errors == []
    rows = iteration_rows(log)
    assert [row["step"] for row in rows] == [10, 20, 30, 40, 50, 60, 60, 70]
    second = rows[1]
    # line 155: "elapsed time per iteration (ms): 11337.3 | throughput per GPU (TFLOP/s/GPU): 321.2 |
    # learning rate: 3.000000E-06 | global batch size:  1024 | lm loss: 9.520000E+00 | ... grad norm: 1.134"
    assert second["ts"] == datetime(2026, 11, 24, 10, 6, 21, tzinfo=UTC)  # the wrapper's stamp, first
    assert second["iteration_s"] == pytest.approx(11.3373)
    assert second["tflops_per_gpu"] == pytest.approx(321.2)
    assert second["lr"] == pytest.approx(3e-6)
    assert second["global_batch"] == 1024
    assert second["loss"] == pytest.approx(9.52)
    assert second["loss_scale"] == 1.0
    assert second["grad_norm"] == pytest.approx(1.134)
    assert second["consumed_samples"] == 20480
    assert (second["skipped_iterations"], second["nan_iterations"]) == (0, 0)
    # tokens/s = 1024 samples x 4096 tokens / 11.3373 s = 369,956.2
    assert second["tokens_per_s"] == pytest.approx(1024 * 4096 / 11.3373)
    assert second["tokens_per_s"] / 512 == pytest.approx(722.57, abs=0.01)  # about Apertus' 723 per GPU


def test_recent_format_config_from_the_argument_dump():
    log = read("core_llama70b_gh200_requeued.log")
    assert log.config == {
        "layers": 80, "hidden": 8192, "ffn_hidden": 28672, "heads": 64, "kv_heads": 8, "seq_len": 4096,
        "vocab": 131072, "global_batch": 1024, "swiglu": True, "world_size": 512, "tp": 4, "pp": 8, "dp": 16,
    }


def test_evaluation_row_and_marker():
    log = read("core_llama70b_gh200_requeued.log")
    evals = [row for row in log.rows if "eval_loss" in row]
    assert evals == [{"ts": datetime(2026, 11, 24, 10, 11, 42, tzinfo=UTC), "step": 40,
                      "eval_loss": pytest.approx(7.704312)}]
    markers = [m for m in log.markers if m["name"] == "event.evaluation"]
    # starts at iteration 40's line (10:10:08), result printed at 10:11:42: 94 s
    assert markers == [{"name": "event.evaluation", "ts": datetime(2026, 11, 24, 10, 10, 8, tzinfo=UTC), "step": 40,
                        "value": 94.0}]


def test_checkpoint_marker_takes_the_save_timer():
    log = read("core_llama70b_gh200_requeued.log")
    markers = [m for m in log.markers if m["name"] == "event.checkpoint"]
    # "saving checkpoint at iteration 50" at 10:13:37; save-checkpoint timer (37412.18, 37455.91) ms: the max
    assert markers == [{"name": "event.checkpoint", "ts": datetime(2026, 11, 24, 10, 13, 37, tzinfo=UTC),
                        "step": 50, "value": pytest.approx(37.45591)}]


def test_checkpoint_duration_from_timestamps_without_a_timer():
    lines = [
        "[2026-11-24 10:00:00]  [2026-11-24 10:00:00.000000] iteration       50/  1000 | elapsed time per iteration "
        "(ms): 1000.0 |",
        "[2026-11-24 10:00:01] saving checkpoint at iteration      50 to /ckpt in torch_dist format",
        "[2026-11-24 10:00:43]   successfully saved checkpoint from iteration      50 to /ckpt [ t 1/4, p 1/1 ]",
    ]
    log = parse_training_log(lines)
    assert log.markers == [{"name": "event.checkpoint", "ts": datetime(2026, 11, 24, 10, 0, 1, tzinfo=UTC),
                            "step": 50, "value": 42.0}]


def test_second_argument_dump_is_a_restart():
    log = read("core_llama70b_gh200_requeued.log")
    restarts = [m for m in log.markers if m["name"] == "event.restart"]
    # line 171, the requeued run's dump, 10:21:08; one marker, though iteration 60 is logged twice
    assert restarts == [{"name": "event.restart", "ts": datetime(2026, 11, 24, 10, 21, 8, tzinfo=UTC),
                         "step": None, "value": 1.0}]


def test_iteration_going_back_is_a_restart():
    line = ("[2026-11-24 10:00:{:02d}] iteration {:8d}/    1000 | elapsed time per iteration (ms): 1000.0 | "
            "global batch size:    64 |")
    log = parse_training_log([line.format(1, 100), line.format(2, 110), line.format(9, 101), line.format(10, 111)])
    assert [(m["name"], m["ts"].second, m["step"]) for m in log.markers] == [("event.restart", 9, 101)]


def test_rows_frame_is_a_valid_store_frame():
    log = read("core_llama70b_gh200_requeued.log")
    frame = rows_frame(log, "alps", 1840001)
    assert list(frame.columns) == APP_COLUMNS
    checked = canonical_app(frame)  # raises on a bad row or column
    assert len(checked) == len(frame)
    tokens = frame[frame["name"] == "tokens_per_s"]
    assert len(tokens) == 8
    assert str(frame["ts"].dtype) == "datetime64[ns, UTC]"
    assert frame["step"].dtype == "Int64"
    names = set(frame["name"])
    assert {"event.checkpoint", "event.evaluation", "event.restart", "eval_loss", "loss", "lr"} <= names
    restart = frame[frame["name"] == "event.restart"].iloc[0]
    assert restart["step"] is pd.NA and restart["value"] == 1.0


# --------------------------------------------------------------------------------------------
# An older Megatron-LM: no timestamps, no throughput, srun -l labels, CRLF, ANSI colours
# --------------------------------------------------------------------------------------------
def test_older_format_without_timestamps_or_throughput():
    log = read("legacy_2022_gpt1.3b_srun_l_crlf.log")
    assert log.errors == []
    rows = iteration_rows(log)
    assert [row["step"] for row in rows] == [100, 200, 300]
    first = rows[0]
    assert first["ts"] is None
    assert "tflops_per_gpu" not in first
    assert first["lr"] == pytest.approx(5.0e-5)  # "learning rate: 5.000E-05"
    assert first["loss_scale"] == 65536.0
    assert first["skipped_iterations"] == 3
    # 512 x 2048 / 7.2104 s
    assert first["tokens_per_s"] == pytest.approx(512 * 2048 / 7.2104)
    assert log.config["vocab"] == 50304  # padded_vocab_size; vocab_size is None in this dump
    assert log.config["swiglu"] is False
    assert "kv_heads" not in log.config  # group_query_attention False: num_query_groups ignored
    assert "moe_topk" not in log.config  # moe_router_topk 2 is printed by dense runs too
    assert [m["name"] for m in log.markers] == ["event.evaluation", "event.checkpoint"]
    assert [row["eval_loss"] for row in log.rows if "eval_loss" in row] == [pytest.approx(6.381425)]


def test_rows_without_timestamps_placed_from_the_job_start():
    log = read("legacy_2022_gpt1.3b_srun_l_crlf.log")
    assert rows_frame(log, "daint", 7).empty  # no start: nothing can be placed
    start = datetime(2022, 3, 2, 14, 21, 7, tzinfo=UTC)
    frame = rows_frame(log, "daint", 7, start=start)
    loss = frame[frame["name"] == "iteration_s"].reset_index()
    # step 100: 100 x 7.2104 s after the start (no earlier step); step 200: 100 x 7.2079 s later
    assert loss.loc[0, "ts"] == pd.Timestamp(start + timedelta(seconds=721.04))
    assert loss.loc[1, "ts"] == pd.Timestamp(start + timedelta(seconds=721.04 + 720.79))
    canonical_app(frame)


# --------------------------------------------------------------------------------------------
# MoE: srun -l labels in front of ISO UTC stamps, MoE loss fields, a nan grad norm
# --------------------------------------------------------------------------------------------
def test_moe_log_config_and_custom_fields():
    log = read("core_mixtral8x7b_srun_l_iso.log")
    assert log.errors == []
    assert {key: log.config[key] for key in ("moe_experts", "moe_topk", "moe_ffn_hidden", "kv_heads")} == {
        "moe_experts": 8, "moe_topk": 2, "moe_ffn_hidden": 14336, "kv_heads": 8}
    # the config feeds the FLOPs count as it is: Mixtral-like, 12,748,587,008 active (see test_flops)
    assert active_params(ModelConfig.from_dict(log.config)) == 12_748_587_008
    rows = iteration_rows(log)
    assert [row["ts"] for row in rows] == [datetime(2026, 11, 25, 8, 0, s, tzinfo=UTC) for s in (16, 32, 48)]
    assert rows[0]["load_balancing_loss"] == pytest.approx(1.0123)
    skipped = rows[1]
    assert "grad_norm" not in skipped  # "grad norm: nan": the store holds finite values only
    assert (skipped["skipped_iterations"], skipped["nan_iterations"]) == (1, 1)


def test_timestamps_without_offset_read_in_the_given_zone():
    line = " [2026-11-24 10:00:00.250000] iteration       10/  1000 | elapsed time per iteration (ms): 1000.0 |"
    zurich = timezone(timedelta(hours=1))
    (row,) = parse_training_log([line], tz=zurich).rows
    assert row["ts"] == datetime(2026, 11, 24, 9, 0, 0, 250000, tzinfo=UTC)


# --------------------------------------------------------------------------------------------
# Errors: line-precise, good lines kept
# --------------------------------------------------------------------------------------------
def test_malformed_lines_are_named_and_good_ones_kept():
    log = read("malformed_lines.log")
    assert [row["step"] for row in log.rows] == [1, 3, 7, 8]
    assert [(error.line, error.message) for error in log.errors] == [
        (3, "num_layers is 'eighty' in the argument dump, not a positive whole number"),
        (7, "the line does not end with '|': cut, or mixed with other output"),
        (9, "elapsed time per iteration (ms) is '10x0.0', not a number"),
        (10, "expected 'iteration N/ TOTAL' before the first '|', found 'iteration        ?/    1000'"),
        (11, "field 'global batch size    64' has no 'name: value'"),
        (13, "lm loss value is 'abc', not a number"),
    ]
    assert all(isinstance(error, LineError) and error.text.startswith(("iteration", "num_layers", "validation"))
               for error in log.errors)
    assert log.lines == 14


def test_errors_are_capped():
    bad = " iteration       10/  1000 | elapsed time per iteration (ms): x |"
    log = parse_training_log([bad] * 120, max_errors=5)
    assert [error.line for error in log.errors] == [1, 2, 3, 4, 5]
    assert log.errors_dropped == 115


def test_streams_a_generator_and_accepts_text_and_bytes():
    line = " iteration {:8d}/  1000 | elapsed time per iteration (ms): 500.0 | global batch size:     8 |\n"
    log = parse_training_log(line.format(step) for step in range(1, 20001))
    assert log.lines == 20000 and len(log.rows) == 20000
    text = "\ufeff" + line.format(1) + line.format(2).replace("\n", "\r\n")
    assert [row["step"] for row in parse_training_log(text).rows] == [1, 2]
    assert [row["step"] for row in parse_training_log(text.encode()).rows] == [1, 2]


def test_other_lines_that_mention_iterations_are_ignored():
    lines = [
        "  iteration ....................................... 0",  # argument dump entry outside a dump
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 31240.1 | max allocated: 60211.9 |",
        "[before the start of training step] datetime: 2026-11-24 10:01:15.002311 ",
        " validation loss at the end of training for val data | lm loss value: 2.0E+00 | lm loss PPL: 7.4E+00 | ",
        "time (ms) | forward-compute: 2101.43 | backward-compute: 4711.02 |",
    ]
    log = parse_training_log(lines)
    assert (log.rows, log.markers, log.errors) == ([], [], [])
