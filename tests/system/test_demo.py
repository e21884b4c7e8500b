"""The system part of the demo: the wasteful job ranks first by GPU-hours lost, the crowded Megatron run's context
names its link-heavy neighbour, and the feeders keep both running and fed."""
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from apps.core.demo import FeedContext, demo_clock
from apps.jobs.models import Job
from apps.saturation.models import JobSaturation
from apps.saturation.waste import gpu_hours_lost, is_wasteful
from apps.system.demo import NEIGHBOUR_ID, NEIGHBOUR_NAME, WASTEFUL_ID, WASTEFUL_NAME
from apps.system.panel import job_in_context
from apps.telemetry.synthetic_jobs import profile_for
from apps.topology.models import Node

from tests.demo_snapshot import load_demo


def lost_by_running_wasteful_job(now) -> dict[str, float]:
    """GPU-hours lost so far by every scored running job that is wasteful, by job name."""
    lost = {}
    for record in JobSaturation.objects.filter(job__state="RUNNING", status="ready").select_related("job"):
        job = record.job
        if not is_wasteful(score=record.score, gpus=job.gpus, idle_gpus=record.idle_gpus):
            continue
        hours = (now - job.start_time).total_seconds() / 3600
        lost[f"{job.job_id} {job.name}"] = gpu_hours_lost(hours, job.gpus, score=record.score, idle_gpus=record.idle_gpus,
                                                          per_gpu=record.per_gpu).lost
    return lost


def test_the_demo_has_a_clearly_wasteful_job_and_a_crowded_megatron_run_that_the_feeders_keep(transactional_db, client, store):
    load_demo()
    clock = demo_clock()
    origin = datetime.fromisoformat(clock["origin"])

    wasteful = Job.objects.get(job_id=WASTEFUL_ID)
    megatron = Job.objects.get(name="megatron-gpt-175b-pretrain")
    assert wasteful.name == WASTEFUL_NAME and wasteful.state == "RUNNING" and wasteful.gpus == 64
    assert origin - wasteful.start_time >= timedelta(hours=6)
    assert wasteful.account != megatron.account and wasteful.user_name != "demo"
    record = JobSaturation.objects.get(job=wasteful)
    assert record.status == "ready" and record.idle_gpus >= 40  # three idle GPUs of four on every node
    lost = lost_by_running_wasteful_job(origin)
    ranked = sorted(lost, key=lost.get, reverse=True)
    assert ranked[0] == f"{WASTEFUL_ID} {WASTEFUL_NAME}"
    assert len(ranked) == 1 or lost[ranked[0]] >= 1.5 * lost[ranked[1]]  # by a clear margin
    # ... and stays first once beat scores the rest: only idle-GPU jobs are wasteful in the demo (the other profiles
    # score well above the threshold), and none of the others can lose more than all its GPU-hours.
    for job in Job.objects.filter(state="RUNNING").exclude(pk=wasteful.pk):
        if profile_for(job.name) == "idle_gpus":
            assert job.gpus * (origin - job.start_time).total_seconds() / 3600 * 1.5 <= lost[ranked[0]], job.name

    # The crowded job: the Megatron run's pipeline crosses into the group where the link-heavy neighbour runs.
    neighbour = Job.objects.get(job_id=NEIGHBOUR_ID)
    assert neighbour.name == NEIGHBOUR_NAME and neighbour.account not in {megatron.account, wasteful.account}
    assert JobSaturation.objects.get(job=neighbour).link >= 0.6
    shared = set(Node.objects.filter(hostname__in=neighbour.node_list).values_list("group__number", flat=True)) & \
        set(Node.objects.filter(hostname__in=megatron.node_list).values_list("group__number", flat=True))
    assert shared
    found, rows, has_layout = job_in_context(megatron, now=origin)
    assert has_layout and neighbour.pk in [n.other.key for n in found.crowding]
    assert any(neighbour.pk in [n.other.key for n in b.neighbours] for b in found.boundaries)
    assert client.login(username="staff", password="belvedere-staff")
    page = client.get(f"/jobs/alps/{megatron.job_id}/").content.decode()
    assert NEIGHBOUR_NAME in page[page.index('id="panel-context"'):]  # staff see it named
    assert "Your pipeline boundary" in page[:page.index('id="panel-context"')]
    assert client.login(username="demo", password="belvedere-demo")
    page = client.get(f"/jobs/alps/{megatron.job_id}/").content.decode()
    assert NEIGHBOUR_NAME not in page and "another project&#x27;s job" in page  # another project's: its load only

    # The feeders: the telemetry feeder feeds both; the timeline ends the other jobs running at build time
    # within four hours, but not these two.
    from apps.jobs.demo import feed as feed_jobs
    from apps.telemetry.demo import feed as feed_telemetry

    memory = clock["memory"]
    tick = FeedContext(seed=int(clock["seed"]), start=origin, end=origin + timedelta(minutes=1), origin=origin, memory=memory)
    feed_telemetry(tick)
    assert {wasteful.pk, neighbour.pk} <= set(tick.shared["telemetry_jobs"])
    built_running = set(Job.objects.filter(state="RUNNING", start_time__lt=origin).values_list("pk", flat=True))
    later = FeedContext(seed=int(clock["seed"]), start=origin + timedelta(minutes=1), end=origin + timedelta(hours=5),
                        origin=origin, memory=memory)
    feed_jobs(later)
    still = set(Job.objects.filter(pk__in=built_running, state="RUNNING").values_list("pk", flat=True))
    assert still == {megatron.pk, wasteful.pk, neighbour.pk}
    assert timezone.is_aware(origin)
