"""The campaigns' plain modules by hand (issue 37, acceptance 2 and the rules behind acceptance 1): Young–Daly, MTBF
unknown without a failure, dips and bad nodes in the goodput, detection from Slurm's fields."""
import json
from datetime import datetime, timedelta, timezone

import pytest

from apps.campaigns import checkpointing, detection, failures, goodput
from apps.jobs.slurm_json import parse_sacct, parse_squeue

T = datetime(2026, 3, 1, tzinfo=timezone.utc)


def h(hours: float) -> datetime:
    return T + timedelta(hours=hours)


def test_young_daly_by_hand_and_the_advice_in_words():
    # C = 90 s, MTBF = 4.4 h = 15,840 s: Young sqrt(2 * 90 * 15840) = sqrt(2,851,200) = 1688.55 s;
    # Daly: C/(2M) = 90/31680 = 0.0028409; factor 1 + sqrt(0.0028409)/3 + 0.0028409/9 = 1 + 0.017767 + 0.000316 = 1.018082
    # -> 1688.55 * 1.018082 - 90 = 1629.08 s (27.2 min)
    assert checkpointing.young(90, 15840) == pytest.approx(1688.55, abs=0.01)
    assert checkpointing.daly(90, 15840) == pytest.approx(1629.08, abs=0.05)
    assert checkpointing.daly(5000, 2000) == 2000  # C >= 2M: checkpoint every M
    # worth: W(2460) = 90/2460 + 2460/31680 = 0.036585 + 0.077652 = 0.114237; W(1629.08) = 0.055246 + 0.051423 = 0.106669
    advice = checkpointing.advise(2460, 90, 4.4)
    assert advice.young_daly_s == pytest.approx(1629.08, abs=0.05)
    assert advice.worth_share == pytest.approx(0.114237 - 0.106669, abs=1e-5)
    assert advice.words == ("You checkpoint every 41 min; with C = 90 s and MTBF = 4.4 h the optimum is 27 min, "
                            "worth ~0.8 % of GPU-hours.")


def test_a_campaign_without_failures_says_mtbf_is_unknown():
    between = failures.mtbf(0, 100.0, 3200.0)
    assert between.mtbf_hours is None and between.mtbf_hours_per_1000_nodes is None
    assert "unknown" in between.words
    advice = checkpointing.advise(1800, 90, between.mtbf_hours)
    assert advice.young_daly_s is None and advice.worth_share is None and "MTBF is unknown" in advice.words
    # with failures: 100 h over 4 = 25 h; 3,200 node-hours / 4 / 1000 = 0.8 h on 1,000 nodes
    assert failures.mtbf(4, 100.0, 3200.0).mtbf_hours == 25.0
    assert failures.mtbf(4, 100.0, 3200.0).mtbf_hours_per_1000_nodes == pytest.approx(0.8)


def progress(start_h: float, end_h: float, first_step: int) -> tuple:
    rows, k = [], 0
    while start_h + 0.1 * k <= end_h + 1e-9:
        rows.append(goodput.Progress(h(start_h + 0.1 * k), first_step + 60 * (k + 1)))
        k += 1
    return tuple(rows)


def test_dips_and_idle_gpus_come_out_of_the_kept_training_only():
    # 4 GPUs, 0-3 h, progress 0.5-2.9 h, no checkpoint, completed. A straggler dip 1.0-1.5 h at depth 0.4 (0.2 h),
    # a checkpoint-kind dip ignored (checkpoints count as stalls), a quarter of the GPUs idle.
    # kept training 2.4 h - dips 0.2 = 2.2; idle 2.2/4 = 0.55 h; productive 1.65 h; x 4 GPUs
    allocation = goodput.Allocation("c/1", h(0), h(3), 4, progress=progress(0.5, 2.9, 0), idle_share=0.25, dips=(
        goodput.Dip(h(1.0), h(1.5), "straggler", 0.4), goodput.Dip(h(2.0), h(2.1), "checkpoint", 0.9)))
    result = goodput.account([allocation], h(10))
    assert result.badput["dips"] == pytest.approx(0.8)
    assert result.badput["idle"] == pytest.approx(2.2)
    assert result.badput["startup"] == pytest.approx(2.0) and result.badput["shutdown"] == pytest.approx(0.4)
    assert result.productive_gpu_hours == pytest.approx(6.6)
    assert result.goodput == pytest.approx(6.6 / 12)


def test_an_allocation_that_failed_on_a_bad_node_before_training_is_all_bad_nodes_and_the_queue_is_apart():
    first = goodput.Allocation("c/1", h(0), h(2), 8, progress=progress(0.5, 1.9, 0),
                               checkpoints=(goodput.Checkpoint(h(1.9), 1500, 36.0),))
    broken = goodput.Allocation("c/2", h(5), h(5.25), 8, failed=True, on_bad_nodes=True)
    result = goodput.account([first, broken], h(10))
    assert result.badput["bad_nodes"] == pytest.approx(2.0)  # 0.25 h x 8
    assert result.queue_hours == pytest.approx(3.0)
    assert result.allocated_gpu_hours == pytest.approx(18.0)
    assert sum(result.badput.values()) + result.productive_gpu_hours == pytest.approx(result.allocated_gpu_hours)


def test_a_running_allocation_silent_for_long_is_hanging_and_a_failed_last_one_loses_since_its_checkpoint():
    # running: last progress at 1.0 h, now 2.0 h -> 1 h since progress (> 10 min): hang
    running = goodput.Allocation("c/1", h(0), None, 2, progress=progress(0.5, 1.0, 0), running=True)
    assert goodput.account([running], h(2)).badput["hang"] == pytest.approx(2.0)
    # failed last allocation: checkpoint at 1.0 h (step 360) completed, progress to 2.0 h: 1 h lost less the 0.01 h save
    failed = goodput.Allocation("c/1", h(0), h(2.0), 2, progress=progress(0.5, 2.0, 0), failed=True,
                                checkpoints=(goodput.Checkpoint(h(1.0), 360, 36.0),))
    result = goodput.account([failed], h(3))
    assert result.allocations[0].last_checkpoint == 360
    assert result.badput["lost_work"] == pytest.approx(2 * (1.0 - 0.01))


def test_failure_causes_from_what_slurm_and_the_metrics_say():
    base = dict(start=h(0), end=h(3), last_progress=h(2.99), last_step=1000, last_checkpoint_step=900)
    assert failures.classify(failures.JobEnd("c/1", "NODE_FAIL", **base))[0] == "node_failure"
    assert failures.classify(failures.JobEnd("c/1", "FAILED", xids=("nid1 GPU 2: XID 79",), **base))[0] == "gpu_xid"
    assert failures.classify(failures.JobEnd("c/1", "OUT_OF_MEMORY", **base))[0] == "oom"
    quiet = {**base, "last_progress": h(2.5)}
    assert failures.classify(failures.JobEnd("c/1", "FAILED", exit_code=134, **quiet))[0] == "nccl_timeout"
    assert failures.classify(failures.JobEnd("c/1", "FAILED", exit_code=1, **quiet))[0] == "hang"
    assert failures.classify(failures.JobEnd("c/1", "FAILED", exit_code=1, hang_verdict="rank 3 stuck", **quiet))[0] == "nccl_timeout"
    assert failures.classify(failures.JobEnd("c/1", "TIMEOUT", **base))[0] == "time_limit_no_checkpoint"
    assert failures.classify(failures.JobEnd("c/1", "TIMEOUT", **{**base, "last_checkpoint_step": 1000})) is None
    assert failures.classify(failures.JobEnd("c/1", "COMPLETED", exit_code=0, **base)) is None
    assert failures.classify(failures.JobEnd("c/1", "FAILED", exit_code=2, **base))[0] == "application_error"


def facts(pk, name="train", dependency="", restart=None, comment="", account="a", start_h=0.0):
    return detection.JobFacts(pk=pk, cluster="alps", job_id=100 + pk, name=name, user="ada", account=account,
                              dependency=dependency, restart_count=restart, comment=comment, start=h(start_h),
                              end=h(start_h + 1))


def test_detection_singleton_chains_requeues_and_comments():
    jobs = [facts(1, start_h=0), facts(2, dependency="singleton(unfulfilled)", start_h=2),
            facts(3, dependency="singleton", start_h=4), facts(4, account="b", start_h=5),  # another account
            facts(5, dependency="singleton", start_h=24 * 30),  # a month later: a new run
            facts(6, name="solo", restart=2), facts(7, name="x", comment="run=apertus-70b"),
            facts(8, name="y", comment="dataset v3; run: apertus-70b")]
    found = detection.detect(jobs)
    assert found["singleton:alps:a:train"]["jobs"] == [1, 2, 3]
    assert found["singleton:alps:a:train#2"]["jobs"] == [5]
    assert found["requeue:alps:106"]["jobs"] == [6]
    assert found["comment:alps:a:apertus-70b"]["jobs"] == [7, 8]
    assert not any(4 in entry["jobs"] for entry in found.values())


def test_dependency_and_restart_count_as_slurm_json_gives_them():
    v39 = {"meta": {"plugins": {"data_parser": "v0.0.39"}}, "jobs": [{
        "job_id": 7, "job_state": "PENDING", "user_name": "ada", "account": "a", "name": "train",
        "dependency": "singleton(unfulfilled)", "restart_cnt": 0, "time_limit": {"set": True, "number": 60}}]}
    [job] = parse_squeue(json.dumps(v39), "alps").jobs
    assert (job.dependency, job.restart_count) == ("singleton(unfulfilled)", 0)
    v41 = {"meta": {"plugin": {"data_parser": "data_parser/v0.0.41"}}, "jobs": [{
        "job_id": 8, "job_state": ["RUNNING"], "user_name": "ada", "account": "a", "name": "train",
        "dependency": "(null)", "restart_cnt": 2}]}
    [job] = parse_squeue(json.dumps(v41), "alps").jobs
    assert (job.dependency, job.restart_count) == ("", 2)
    v45 = {"meta": {"plugin": {"data_parser": "data_parser/v0.0.45"}}, "jobs": [{
        "job_id": 9, "state": {"current": ["COMPLETED"]}, "user": "ada", "account": "a", "name": "train",
        "restart_cnt": 1, "comment": {"job": "run=apertus"}}]}
    [job] = parse_sacct(json.dumps(v45), "alps").jobs
    assert (job.restart_count, job.comment) == (1, "run=apertus")
