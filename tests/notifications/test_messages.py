"""The mails written from plain data (apps/notifications/messages.py): what was seen with its numbers, what it
cost, the job's link and concrete next steps."""
from apps.notifications.messages import (DigestItem, JobFacts, Lasting, Thresholds, digest_message, duration_words,
                                         excluded_hosts, straggler_message, wasteful_message)
from apps.saturation.waste import gpu_hours_lost

LIMITS = Thresholds(score_below=30.0, idle_share=0.25, rate_limit_hours=24.0, straggler_minutes=30.0)
LINK = "https://belvedere.example/jobs/alps/4711/"


def facts(**changes) -> JobFacts:
    values = dict(cluster="alps", job_id="4711", name="llama-70b", user_name="alice", account="a-llm01", link=LINK, gpus=16,
                  hours=3.0, score=12.0, idle_gpus=0, limiter="pcie", settings_link="https://belvedere.example/notifications/")
    values.update(changes)
    return JobFacts(**values)


def test_a_low_score_mail_names_the_job_its_numbers_link_and_the_data_loader():
    job = facts()
    rows = [{"busy": 0.9, "score": 12.0}] * 16
    waste = gpu_hours_lost(job.hours, job.gpus, score=job.score, per_gpu=rows, reference=70.0)
    message = wasteful_message(job, waste, LIMITS)
    assert "alps/4711" in message.subject and "saturation 12 of 100" in message.subject
    assert LINK in message.body
    assert "16 GPUs" in message.body and "saturation 12 of 100" in message.body
    # 16 GPUs × 3 h × (1 − 0.9) = 4.8 GPU-hours lost of 48 held: only the time without work (issue 35)
    assert "4.8 GPU-hours lost by the job so far of 48.0 held in 3 h" in message.body
    # headroom to the reference 70: 16 × 3 × (0.7 × 0.9 − 0.12) = 24.48, and the rule's words
    assert "24.5 GPU-hours of headroom" in message.body and "(not a loss)" in message.body
    assert "measurably lost" in message.body and "wasting most" not in message.body
    assert "data loader" in message.body and "pin_memory" in message.body  # PCIe-bound: the host transfers
    assert "scancel" not in message.body  # no idle GPUs: cancelling is not the advice
    assert "a-llm01" in message.body and "https://belvedere.example/notifications/" in message.body
    assert "24 h" in message.body  # the rate limit is stated


def test_an_idle_allocation_mail_counts_idle_gpus_whole_and_says_cancel_it():
    job = facts(score=55.0, idle_gpus=8, limiter="tensor")
    waste = gpu_hours_lost(job.hours, job.gpus, score=job.score, idle_gpus=job.idle_gpus)
    message = wasteful_message(job, waste, LIMITS)
    assert "8 of 16 GPUs idle" in message.subject
    assert f"{waste.lost:,.1f} GPU-hours lost" in message.body and "idle GPUs count whole: 24.0" in message.body
    assert "scancel 4711" in message.body and "--gpus" in message.body
    assert "data loader" not in message.body  # S 55 is above the threshold: only the idle GPUs are the problem


def test_unknown_gpus_are_said_not_guessed():
    job = facts(score=None, idle_gpus=8, gpus=16)
    waste = gpu_hours_lost(job.hours, job.gpus, score=None, idle_gpus=8)
    body = wasteful_message(job, waste, LIMITS).body
    assert "8 GPUs without a busy share are not counted" in body and "saturation" not in body.split("What we see:")[1].split("\n")[1]


def test_a_straggler_mail_names_the_gpu_how_long_and_the_exclude_line():
    gpu = {"level": "gpu", "host": "nid001234", "gpu": 2, "rank": 388, "hosts": ["nid001234"], "duration_s": 2460.0,
           "reason": "SM clock 28 % below its peers", "cause": "power-limited"}
    node = {"level": "node", "host": "nid001240", "gpu": None, "rank": 400, "hosts": ["nid001240"], "reason": "all GPUs slow"}
    message = straggler_message(facts(), [Lasting(gpu, 41 / 60), Lasting(node, 0.75)], LIMITS)
    assert "GPU 2 of node nid001234 (rank 388) slows it down and 1 more" in message.subject
    assert "lagging for 41 min — SM clock 28 % below its peers" in message.body
    assert "node nid001240, all its GPUs (rank 400): lagging for 45 min" in message.body
    assert "--exclude=nid001234,nid001240" in message.body
    assert LINK in message.body and "30 min" in message.body


def test_a_switch_straggler_points_at_staff_not_at_exclude():
    switch = {"level": "switch", "switch": "x1002c3r5", "hosts": ["nid1", "nid2"], "reason": "2 of 2 nodes behind it lag"}
    body = straggler_message(facts(), [Lasting(switch, 1.0)], LIMITS).body
    assert "switch x1002c3r5" in body and "--exclude" not in body and "staff" in body


def test_excluded_hosts_keep_order_and_skip_fabric_findings():
    assert excluded_hosts([{"level": "gpu", "host": "b"}, {"level": "node", "hosts": ["a", "b"]},
                           {"level": "switch", "hosts": ["z"]}]) == ["b", "a"]


def test_duration_words():
    assert [duration_words(h) for h in (0.001, 0.5, 2.0 + 5 / 60, 26.0)] == ["1 min", "30 min", "2 h 05 min", "26 h"]


def test_the_digest_counts_open_items_and_ranks_wasteful_jobs_by_gpu_hours_lost():
    items = [DigestItem("wasteful_job", "alps/1 small", lost_gpu_hours=3.5, owner="bob"),
             DigestItem("wasteful_job", "alps/2 idle", lost_gpu_hours=120.0, owner="carol"),
             DigestItem("straggler", "alps/3: nid1 GPU 0", url="https://x/jobs/alps/3/#stragglers"),
             DigestItem("namespace_request", "a-llm01-infer waiting", state="resolved"),
             DigestItem("failing_node", "nid001234 failing", detail="dcgm diag failed 3 times", state="acknowledged")]
    message = digest_message(items, inbox_link="https://x/staff/triage/", period_hours=24, when="2026-11-26 08:00 UTC",
                             synced="2026-11-26 07:58 UTC")
    assert message.subject == "[Belvedere] triage: 4 items need a person"
    assert "2 wasteful running jobs, 1 stragglers, 1 failing nodes" in message.body
    assert "nid001234 failing (acknowledged)\n    dcgm diag failed 3 times" in message.body
    assert "Rebuilt from its sources at 2026-11-26 07:58 UTC" in message.body
    assert message.body.index("alps/2 idle") < message.body.index("alps/1 small")
    assert "120.0 GPU-hours lost [carol]" in message.body and "https://x/staff/triage/" in message.body
    assert "a-llm01-infer" not in message.body  # resolved: not in the digest
    never = digest_message([], inbox_link="l", period_hours=24, when="w", synced=None)
    assert never.subject == "[Belvedere] triage: nothing needs a person" and "never rebuilt" in never.body
