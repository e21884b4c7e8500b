"""Issue 40 in the portal: a finished job's products outlive its raw samples and its page says what it shows; a job
never built is built from the rollups; past every tier the page says nothing is kept; the retention pass as a task
(with progress) and as ``manage.py telemetry_retention [--dry-run]``."""
from datetime import timedelta
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from apps.telemetry.backends.base import Query
from apps.telemetry.products import JobCube
from apps.telemetry.retention import Retention
from apps.telemetry.services import job_telemetry_refresh

from .contract import synthetic

HOSTS = ["nid000001", "nid000002"]


@pytest.fixture
def finished_job(db, store):
    """alice's job of 2 nodes that ran 40 minutes and ended an hour ago, with 10-s samples of its GPUs."""
    from apps.jobs.models import Cluster, Job

    end = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    start = end - timedelta(minutes=40)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4040, user_name="alice",
                             account="a-llm01", state="COMPLETED", submit_time=start - timedelta(minutes=2),
                             start_time=start, end_time=end, node_list=HOSTS, nodes="nid[000001-000002]")
    store.write(synthetic(hosts=tuple(HOSTS), minutes=40, start=start))
    return job


def later(store, days: float) -> None:
    """The store's clock ``days`` ahead of now, with the default tiers (raw 30 days, 1-min 90, 10-min 365)."""
    moment = timezone.now() + timedelta(days=days)
    store.retention = Retention()
    store.clock = lambda: moment


def cube_of(record) -> JobCube:
    return JobCube.load(Path(settings.DATA_DIR) / record.product)


def test_a_finished_jobs_cube_outlives_its_raw_samples_and_the_page_says_so(finished_job, store, client, make_user):
    built = job_telemetry_refresh(finished_job)
    assert built.status == "ready" and built.step_seconds == 10
    before = cube_of(built)
    later(store, 40)
    assert store.expire(), "the job's raw day should be past the 30 days"
    assert store.read(Query(start=finished_job.start_time, end=finished_job.end_time)).empty

    again = job_telemetry_refresh(finished_job)  # a rebuild (a product version bump, a staff request) keeps it
    assert again.status == "ready" and again.product == built.product and again.step_seconds == 10
    assert np.array_equal(cube_of(again).mean, before.mean, equal_nan=True)
    assert "Raw samples of this job expired on" in again.message and "kept as it was" in again.message

    client.force_login(make_user("alice"))
    page = client.get(f"/jobs/alps/{finished_job.job_id}/").content.decode()
    assert 'id="telemetry-retention"' in page and 'data-showing="product"' in page
    assert "raw for 30 days, 1-min to 90 days, 10-min to 1 year" in page
    heatmap = client.get(f"/api/v1/jobs/alps/{finished_job.job_id}/telemetry/heatmap/?field=1002")
    assert heatmap.status_code == 200 and heatmap.json()["rows"]
    first = client.get(f"/api/v1/jobs/alps/{finished_job.job_id}/first-screen/").json()
    assert first["retention"]["showing"] == "product" and first["retention"]["whole"] is True
    assert any("Raw samples of this job expired" in f["title"] for f in first["findings"])


def test_a_job_never_built_is_built_from_the_rollups_and_says_it_shows_them(finished_job, store, client, make_user):
    later(store, 40)
    store.expire()
    record = job_telemetry_refresh(finished_job)
    assert record.status == "ready" and record.step_seconds == 60  # 1-minute rollups: 10-s buckets are gone
    cube = cube_of(record)
    expected = synthetic(hosts=tuple(HOSTS), minutes=40, start=finished_job.start_time)
    assert int(cube.count.sum()) == len(expected)  # every sample is counted in its minute
    field = cube.field_index(155)
    assert np.isclose(np.nanmax(cube.max[:, field, :]), expected[expected.field == 155]["value"].max())
    client.force_login(make_user("alice"))
    page = client.get(f"/jobs/alps/{finished_job.job_id}/").content.decode()
    assert 'data-showing="rollups"' in page and "1-minute rollups (60 s buckets)" in page
    first = client.get(f"/api/v1/jobs/alps/{finished_job.job_id}/first-screen/").json()
    assert first["retention"]["showing"] == "rollups" and first["retention"]["tier"] == "1m"


def test_past_every_tier_the_page_says_nothing_is_kept_instead_of_drawing_empty_figures(finished_job, store, client,
                                                                                          make_user):
    later(store, 400)
    store.expire()
    record = job_telemetry_refresh(finished_job)
    assert record.status == "empty" and "nothing of its telemetry is kept" in record.message
    client.force_login(make_user("alice"))
    page = client.get(f"/jobs/alps/{finished_job.job_id}/").content.decode()
    assert 'data-showing="nothing"' in page and 'id="telemetry-heatmap"' not in page


def test_the_saturation_score_outlives_the_raw_samples(finished_job, store):
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.synthetic_jobs import job_chunks

    for chunk in job_chunks("megatron", HOSTS, finished_job.start_time, 40 * 60, seed=3):
        store.write(chunk)
    scored = job_saturation_refresh(finished_job)
    assert scored.status == "ready" and scored.score is not None
    later(store, 40)
    store.expire()
    again = job_saturation_refresh(finished_job)
    assert again.status == "ready" and again.score == scored.score and again.product == scored.product
    assert "Raw samples of this job expired on" in again.message


def test_the_retention_pass_as_a_command_and_as_a_task_with_progress(finished_job, store):
    from apps.core.models import TaskRun
    from apps.telemetry.tasks import expire_task

    later(store, 40)
    out = StringIO()
    call_command("telemetry_retention", "--dry-run", stdout=out)
    text = out.getvalue()
    day = f"samples_{finished_job.start_time:%Y%m%d}"
    assert "raw for 30 days, 1-min to 90 days, 10-min to 1 year" in text and "would remove" in text and day in text
    assert len(store.read(Query(start=finished_job.start_time - timedelta(days=400), end=timezone.now()))) == 0  # clipped
    assert store.expire(dry_run=True), "the dry run removed what it listed"
    result = expire_task.apply().get()
    assert day in result["removed"]
    run = TaskRun.objects.get(name="telemetry.expire")
    assert run.status == "succeeded" and run.done == run.total == len(result["removed"]) and "removed" in run.message
    assert expire_task.apply().get() == {"removed": []}  # idempotent
    out = StringIO()
    call_command("telemetry_retention", stdout=out)
    assert "nothing is past its retention" in out.getvalue()


def test_a_running_job_whose_start_passed_the_raw_horizon_is_rebuilt_from_rollups_and_raw_not_frozen(finished_job,
                                                                                                      store):
    """Only a finished job's product is kept as built: a running one keeps moving (its old part from rollups)."""
    finished_job.state, finished_job.end_time = "RUNNING", None
    finished_job.save()
    built = job_telemetry_refresh(finished_job)
    assert built.status == "ready"
    later(store, 30 + 1 / 24)  # the start (and the first minutes) past the raw horizon, the job still running
    again = job_telemetry_refresh(finished_job)
    assert again.status == "ready" and again.materialized > built.materialized and again.step_seconds % 60 == 0
    assert "expired" in again.message


def test_a_cube_of_the_right_width_built_after_the_raw_samples_went_says_it_shows_rollups(db, store):
    """The demo writes its history after its raw tier let it go: a 3-hour job's cube is in 60-s buckets either way, and
    only when it was built (after its first raw samples went) tells that it came from the 1-minute rollups."""
    from apps.jobs.models import Cluster, Job
    from apps.telemetry.models import JobTelemetry
    from apps.telemetry.selectors import job_retention

    end = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    start = end - timedelta(hours=3)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4043, user_name="alice", account="a",
                             state="COMPLETED", submit_time=start, start_time=start, end_time=end, node_list=HOSTS)
    store.write(synthetic(hosts=tuple(HOSTS), minutes=180, every_s=60, start=start))
    built = job_telemetry_refresh(job)
    assert built.status == "ready" and built.step_seconds == 60
    later(store, 40)
    assert job_retention(job)["showing"] == "product"  # built while its raw samples were all there
    JobTelemetry.objects.filter(pk=built.pk).update(materialized=store.now())  # built at the store's "now" instead
    state = job_retention(job)
    assert state["showing"] == "rollups" and "1-minute rollups (60 s buckets)" in state["words"]
