"""The application-metrics part of the demo: the running Megatron job logs its training (checkpoint dips every 30
minutes, explained), and a strong-scaling series of one model at 32 to 512 GPUs exists for the demo user."""
import re
from datetime import datetime, timedelta

import pytest

from apps.appmetrics.models import JobModelConfig
from apps.jobs.models import Job

# What the demo planted, read through the API: the same on every engine (each test built the demo on PostgreSQL too).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine_independent]


@pytest.fixture
def demo():
    from tests.demo_snapshot import load_demo

    load_demo()
    return Job.objects.select_related("cluster").get(name="megatron-gpt-175b-pretrain")


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_the_megatron_jobs_efficiency_lists_checkpoints_every_half_hour(demo, client):
    client.force_login(_demo_user())
    response = client.get(f"/api/v1/jobs/{demo.cluster.name}/{demo.job_id}/efficiency/")
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert body["model"]["layers"] == 96 and body["model"]["global_batch"] == 320
    assert 0.3 < body["mfu"] < 0.5  # ~42 % MFU as planted, a little less with the dips
    assert {"tokens_per_s", "iteration_s", "loss", "lr", "grad_norm", "event.checkpoint"} <= set(body["coverage"]["names"])
    checkpoints = [_at(event["start"]) for event in body["events"] if event["kind"] == "checkpoint"]
    assert len(checkpoints) >= 8  # six hours of the run
    gaps = [b - a for a, b in zip(checkpoints, checkpoints[1:])]
    assert all(timedelta(minutes=28) <= gap <= timedelta(minutes=32) for gap in gaps), gaps
    # the storage part's Lustre job stats show each checkpoint's write burst: the reason says how fast it wrote
    reasons = [event["reason"] for event in body["events"] if event["kind"] == "checkpoint"]
    rates = [float(re.search(r"writes ([\d.]+) GB/s to the file system", reason).group(1)) for reason in reasons]
    assert all(5 < rate < 100 for rate in rates), reasons
    assert not any(name.startswith("lustre/") for name in body["coverage"]["names"])  # evidence, not the app's rows


def test_the_scaling_runs_exist_with_their_model_and_throughput(demo):
    runs = list(Job.objects.filter(name__startswith="apertus-8b-scaling-", user_name="demo", state="COMPLETED").order_by("gpus"))
    assert [run.gpus for run in runs] == [32, 64, 128, 256, 512]
    assert [run.node_count for run in runs] == [8, 16, 32, 64, 128]
    assert runs[0].name == "apertus-8b-scaling-032"
    configs = JobModelConfig.objects.filter(job__in=runs)
    assert {(config.layers, config.hidden, config.global_batch) for config in configs} == {(32, 4096, 1024)}
    from apps.appmetrics.selectors import job_series

    per_gpu = {}
    for run in runs:
        tokens = job_series(run, names=["tokens_per_s"])
        assert len(tokens) >= 5  # 20 minutes, a row every 10 iterations (17 s each at 32 GPUs)
        per_gpu[run.gpus] = tokens["value"].median() / run.gpus
    assert per_gpu[512] / per_gpu[32] == pytest.approx(0.8, rel=0.03)
    assert all(per_gpu[a] > per_gpu[b] for a, b in zip([32, 64, 128, 256], [64, 128, 256, 512]))


def test_the_feeder_continues_the_megatron_jobs_log(demo):
    from apps.appmetrics.demo import feed
    from apps.appmetrics.selectors import job_series
    from apps.core.demo import FeedContext, demo_clock

    clock = demo_clock()
    origin = datetime.fromisoformat(clock["origin"])
    before = job_series(demo, names=["tokens_per_s"])
    context = FeedContext(seed=clock["seed"], start=origin, end=origin + timedelta(minutes=40), origin=origin, memory=clock["memory"])
    first = feed(context)
    again = feed(context)
    after = job_series(demo, names=["tokens_per_s"])
    assert first["points"] > 0 and again["points"] == first["points"]
    new = after[after["ts"] > before["ts"].max()]
    assert len(after) == len(before) + len(new) and len(new) >= 25  # every ~72 s, no duplicates on the second feed
    assert new["step"].iloc[0] == before["step"].iloc[-1] + 10  # the steps go on


def _demo_user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="demo")
