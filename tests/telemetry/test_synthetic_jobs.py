"""The demo's synthetic telemetry: deterministic, in DCGM units, and the planted problems are there."""
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from apps.telemetry.synthetic_jobs import POWER_CAP_BIT, SW_THERMAL_BIT, default_planted, job_chunks

START = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)
HOSTS = [f"nid{n:06d}" for n in range(1, 17)]


def frame(profile, hosts=HOSTS, duration=3 * 3600, **kwargs):
    return pd.concat(job_chunks(profile, hosts, START, duration, seed=7, hosts_per_chunk=5, **kwargs), ignore_index=True)


@pytest.fixture(scope="module")
def megatron():
    return frame("megatron")


def series(data, field, phase_mask=None):
    """GPU x time matrix of one field (rows host-major as generated)."""
    part = data[data.field == field].sort_values(["host", "gpu", "ts"])
    matrix = part["value"].to_numpy().reshape(len(HOSTS) * 4, -1)
    return matrix if phase_mask is None else matrix[:, phase_mask]


def training_columns(data):
    """Time columns where the job trains: median tensor activity of all GPUs above 0.4."""
    return np.median(series(data, 1004), axis=0) > 0.4


def test_same_seed_same_data_and_canonical_shape(megatron):
    again = frame("megatron")
    assert megatron.equals(again)
    assert len(megatron) == len(HOSTS) * 4 * 1080 * 18
    assert str(megatron["ts"].dtype) == "datetime64[ns, UTC]" and megatron["field"].dtype == np.int32
    assert megatron.groupby(["host", "gpu"])["uuid"].nunique().eq(1).all() and megatron["uuid"].nunique() == len(HOSTS) * 4


def test_values_are_in_dcgm_units(megatron):
    ratios = megatron[megatron.field.isin([1001, 1002, 1003, 1004, 1005])]["value"]
    assert ratios.between(0, 1).all()
    assert megatron[megatron.field.isin([1011, 1012, 1076, 1078])]["value"].between(0, 450e9).all()
    assert megatron[megatron.field == 203]["value"].between(0, 100).all()
    assert megatron[megatron.field == 155]["value"].between(60, 700).all()
    energy, power = series(megatron, 156), series(megatron, 155)
    assert (np.diff(energy, axis=1) > 0).all()
    # energy grows by mean power x time (W x s x 1000 = mJ)
    assert np.allclose(np.diff(energy, axis=1), power[:, 1:] * 10 * 1000)


def test_phases_training_checkpoints_and_utilisation_is_not_saturation(megatron):
    tensor = np.median(series(megatron, 1004), axis=0)
    assert tensor[:30].max() < 0.15 and np.median(tensor[100:900]) > 0.5  # warm-up, then training
    dips = np.flatnonzero(tensor[60:-90] < 0.1) + 60
    assert len(dips) >= 4 and len(np.unique(dips // 180)) >= 2  # checkpoints every 30 min (180 samples)
    util = np.median(series(megatron, 203), axis=0)
    assert np.median(util[100:900]) >= 98 and np.median(tensor[100:900]) < 0.7


def test_the_throttled_gpu_is_slower_power_capped_and_flagged(megatron):
    host, gpu = default_planted(HOSTS).throttled
    row = HOSTS.index(host) * 4 + gpu
    train = training_columns(megatron)
    clock = series(megatron, 100, train)
    peers = np.delete(clock, row, axis=0)
    assert np.median(clock[row]) <= 0.8 * np.median(peers)
    assert np.median(series(megatron, 155, train)[row]) < 460
    reasons = series(megatron, 112, train)[row].astype(int)
    assert (reasons & POWER_CAP_BIT).all()


def test_the_hot_gpu_and_the_slow_nic_node(megatron):
    planted = default_planted(HOSTS)
    train = training_columns(megatron)
    temp = series(megatron, 150, train)
    row = HOSTS.index(planted.hot[0]) * 4 + planted.hot[1]
    assert np.median(temp[row]) - np.median(np.delete(temp, row, axis=0)) >= 12
    assert (series(megatron, 112, train)[row].astype(int) & SW_THERMAL_BIT).any()
    tensor = np.median(series(megatron, 1004, train), axis=1)
    nic_rows = [HOSTS.index(planted.slow_nic) * 4 + g for g in range(4)]
    others = np.delete(tensor, nic_rows)
    assert tensor[nic_rows].max() < np.median(others) * 0.92


def test_a_later_window_continues_the_run_on_the_same_gpus():
    """The living demo feeds a running job window by window: checkpoints fall on the run's half hours,
    the energy counter never goes back between windows, and the planted problems stay where they were."""
    first = frame("megatron", duration=600, elapsed_before_s=3600)
    later = pd.concat(job_chunks("megatron", HOSTS, START + pd.Timedelta(seconds=600), 1800, seed=8, hosts_per_chunk=5,
                                 elapsed_before_s=4200), ignore_index=True)
    end_of_first = series(first, 156)[:, -1]
    assert (series(later, 156)[:, 0] > end_of_first).all()
    tensor = np.median(series(later, 1004), axis=0)
    # the run's minute 90 (5400 s) is a checkpoint, 1200 s into the later window: 90 s of idle SMs
    assert tensor[(5400 - 4200) // 10: (5400 - 4200) // 10 + 9].max() < 0.1 and np.median(tensor[:100]) > 0.5
    planted = default_planted(HOSTS)
    clock = np.median(series(later, 100), axis=1)
    row = HOSTS.index(planted.throttled[0]) * 4 + planted.throttled[1]
    assert clock[row] < 0.8 * np.median(np.delete(clock, row))


def test_profile_for_follows_the_job_name():
    from apps.telemetry.synthetic_jobs import profile_for

    assert [profile_for(name) for name in ("pretrain-gpt-13b", "finetune-esm2", "eval-climax", "data-prep-12",
                                           "profile-nsys-vit-h", "megatron-gpt-175b-pretrain", "")] == \
        ["megatron", "memory_bound", "memory_bound", "idle_gpus", "megatron", "megatron", "megatron"]


def test_memory_bound_and_idle_profiles():
    memory = frame("memory_bound", hosts=HOSTS[:2], duration=1800)
    dram = memory[memory.field == 1005]["value"].median()
    tensor = memory[memory.field == 1004]["value"].median()
    assert dram > 0.7 and tensor < 0.15
    idle = frame("idle_gpus", hosts=HOSTS[:2], duration=1800)
    util = idle[idle.field == 203].groupby("gpu")["value"].median()
    assert util[0] > 90 and (util[[1, 2, 3]] == 0).all()
    with pytest.raises(ValueError, match="unknown profile"):
        next(job_chunks("nope", HOSTS, START, 60))


def test_the_demo_gives_three_jobs_telemetry_and_their_pages_a_heatmap(transactional_db, client, settings):
    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation
    from apps.telemetry.models import JobTelemetry
    from tests.demo_snapshot import load_demo

    load_demo()  # the run's demo (DEMO_TELEMETRY_HOURS of the test profile), not a build of its own

    ready = set(JobTelemetry.objects.filter(status="ready").values_list("job__name", "job__user_name"))
    assert ("megatron-gpt-175b-pretrain", "demo") in ready
    others = {name for name, user in ready if user != "demo"}
    # a teammate's timed-out hang (the flight recorder's demo) has its GPUs' last 40 minutes
    assert "gpt-13b-dp-hang" in others
    assert len(others - {"gpt-13b-dp-hang"}) == 2  # the memory-bound and the idle-GPU jobs
    # The demo user's own jobs, finished ones included, have telemetry and a score.
    own = Job.objects.filter(user_name="demo", start_time__isnull=False)
    assert own.exclude(state="RUNNING").count() >= 5
    assert {(job.name, "demo") for job in own} <= ready
    assert set(JobSaturation.objects.filter(job__in=own, status="ready", score__isnull=False).values_list("job", flat=True)) == \
        set(own.values_list("pk", flat=True))
    megatron = Job.objects.get(name="megatron-gpt-175b-pretrain")
    record = JobTelemetry.objects.get(job=megatron)
    # The product covers the whole run (six hours: 120 s buckets); the samples its last DEMO_TELEMETRY_HOURS.
    assert record.gpus == 512 and 1004 in record.fields and record.step_seconds == 120
    assert record.window_start == megatron.start_time
    per_series = settings.DEMO_TELEMETRY_HOURS * 3600 / 10  # one sample every 10 s
    assert 512 * 18 * per_series * 0.94 <= record.samples <= 512 * 18 * per_series * 1.03
    client.login(username="demo", password="belvedere-demo")
    page = client.get(f"/jobs/alps/{megatron.job_id}/").content.decode()
    assert 'id="telemetry-heatmap"' in page and "512 GPUs" in page
