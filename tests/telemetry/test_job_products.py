"""Job data products: the cube built from the store, the refresh service and tasks, the job page section."""
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from django.utils import timezone

from apps.telemetry.backends.base import aggregate_frame
from apps.telemetry.models import JobTelemetry
from apps.telemetry.products import JobCube, build_cube, choose_step
from apps.telemetry.services import job_telemetry_refresh

from .contract import synthetic


@pytest.mark.parametrize("duration, step", [(600, 10), (3 * 3600, 60), (24 * 3600, 600), (7 * 86400, 3600), (200 * 86400, 86400)])
def test_the_step_keeps_a_job_under_240_buckets(duration, step):
    assert choose_step(duration) == step and duration / step <= 240


def test_cube_holds_the_reference_numbers_in_the_jobs_node_order(tmp_path):
    data = synthetic(hosts=("nid000002", "nid000001"), minutes=10)
    aggregated = aggregate_frame(data, 60).sample(frac=1, random_state=1)
    cube = build_cube(aggregated, 60, hosts=["nid000002", "nid000001"])
    assert cube.shape == (8, 2, 10) and list(cube.hosts[:4]) == ["nid000002"] * 4 and list(cube.gpus[:4]) == [0, 1, 2, 3]
    row = aggregated[(aggregated.host == "nid000001") & (aggregated.gpu == 2) & (aggregated.field == 155)].sort_values("bucket")
    assert np.allclose(cube.mean[6, cube.field_index(155), :], row["mean"].to_numpy(), rtol=1e-6)
    assert cube.count[6, 0, :].tolist() == [6] * 10
    cube.save(tmp_path / "c.cube")
    again = JobCube.load(tmp_path / "c.cube")
    assert np.array_equal(again.mean, cube.mean, equal_nan=True) and list(again.hosts) == list(cube.hosts)
    assert again.buckets[0] == np.datetime64(pd.Timestamp(data.ts.min()).tz_convert(None).floor("60s"))


@pytest.fixture
def job(db):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=30)
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=9, user_name="alice", account="a-llm01",
                              state="RUNNING", submit_time=start - timedelta(minutes=5), start_time=start,
                              node_list=["nid000001", "nid000002"], nodes="nid[000001-000002]")


def test_refresh_reads_only_the_jobs_nodes_and_time(job, store):
    store.write(synthetic(hosts=("nid000001", "nid000002", "nid000003"), minutes=60, start=job.start_time - timedelta(minutes=10)))
    record = job_telemetry_refresh(job)
    assert record.status == "ready" and record.gpus == 8 and record.fields == [155, 1002]
    assert record.step_seconds == 10
    cube = JobCube.load(__import__("pathlib").Path(__import__("django.conf").conf.settings.DATA_DIR) / record.product)
    assert set(cube.hosts) == {"nid000001", "nid000002"}
    assert cube.buckets.min() > np.datetime64(job.start_time.replace(tzinfo=None)) - np.timedelta64(record.step_seconds, "s")
    assert record.samples == int(cube.count.sum()) > 0


def test_refresh_says_when_there_is_nothing_yet(job, store):
    assert job_telemetry_refresh(job).status == "empty"
    job.start_time = None
    job.save()
    assert job_telemetry_refresh(job).status == "waiting"


def test_task_records_progress_and_a_broken_store_as_a_message(job, store, settings, tmp_path):
    from apps.core.models import TaskRun
    from apps.telemetry.store import reset_telemetry_stores
    from apps.telemetry.tasks import materialize_job_task

    store.write(synthetic(hosts=("nid000001",), minutes=20, start=job.start_time))
    result = materialize_job_task.apply(args=[job.pk])
    assert result.get()["status"] == "ready"
    run = TaskRun.objects.get(name="telemetry.materialize_job")
    assert run.status == "succeeded" and run.done == 100 and "samples from 4 GPUs" in run.message

    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(blocker / "t")}}}
    reset_telemetry_stores()
    materialize_job_task.apply(args=[job.pk], throw=False)
    record = JobTelemetry.objects.get(job=job)
    assert "telemetry store unavailable" in record.message and str(blocker) in record.message


def test_recent_jobs_are_refreshed_once_their_product_is_stale(job, store):
    from apps.jobs.models import Job
    from apps.telemetry.tasks import materialize_recent_jobs_task

    old = Job.objects.create(cluster=job.cluster, job_id=10, user_name="a", account="a", state="COMPLETED",
                             submit_time=timezone.now() - timedelta(days=3), start_time=timezone.now() - timedelta(days=3),
                             end_time=timezone.now() - timedelta(days=2), node_list=["nid000001"])
    assert materialize_recent_jobs_task.apply().get() == [job.pk]  # running, never read; the old job is out of range
    job_telemetry_refresh(job)
    assert materialize_recent_jobs_task.apply().get() == []  # just refreshed
    JobTelemetry.objects.filter(job=job).update(materialized=timezone.now() - timedelta(hours=1))
    assert materialize_recent_jobs_task.apply().get() == [job.pk]
    assert not JobTelemetry.objects.filter(job=old).exists()


def test_job_page_shows_the_heatmap_to_the_owner(job, store, client, make_user):
    store.write(synthetic(hosts=("nid000001", "nid000002"), minutes=20, start=job.start_time))
    job_telemetry_refresh(job)
    client.force_login(make_user("alice"))
    page = client.get("/jobs/alps/9/").content.decode()
    assert 'id="telemetry-heatmap"' in page and "8 GPUs, 2 fields" in page
    page = client.get("/jobs/alps/9/?tfield=DCGM_FI_DEV_POWER_USAGE").content.decode()
    assert '<option value="155" selected>' in page
    client.force_login(make_user("bob"))
    assert client.get("/jobs/alps/9/").status_code == 404


def test_an_ended_job_is_read_once_more_after_its_end_and_then_left_alone(job, store):
    from apps.telemetry.tasks import materialize_recent_jobs_task

    job_telemetry_refresh(job)
    job.state, job.end_time = "COMPLETED", timezone.now() + timedelta(seconds=1)
    job.save()
    assert materialize_recent_jobs_task.apply().get() == [job.pk]  # the product stops before the end
    job.end_time = timezone.now() - timedelta(seconds=1)
    job.save()
    job_telemetry_refresh(job)
    assert JobTelemetry.objects.get(job=job).window_end == job.end_time
    assert materialize_recent_jobs_task.apply().get() == []


def test_readyz_reports_the_telemetry_store_without_failing_the_portal(store, settings, tmp_path):
    from apps.core import readiness as health
    from apps.telemetry.readiness import check_telemetry_store
    from apps.telemetry.store import reset_telemetry_stores

    assert check_telemetry_store().status == "ok"
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(blocker / "t")}}}
    reset_telemetry_stores()
    result = check_telemetry_store()
    assert result.status == "warn" and not result.critical and "telemetry store unavailable" in result.message
    assert "telemetry" in health._checks


def test_a_refresh_that_fails_midway_keeps_the_previous_product_on_the_page(job, store, settings, tmp_path, client, make_user):
    """Issue 16 item 3: a refresh used to flip the record to "running" first, hiding the heatmap
    until it finished; a refresh that died (worker killed, store down) hid it for good."""
    from apps.telemetry.store import reset_telemetry_stores
    from apps.telemetry.tasks import materialize_job_task

    store.write(synthetic(hosts=("nid000001", "nid000002"), minutes=20, start=job.start_time))
    first = job_telemetry_refresh(job)
    assert first.status == "ready"

    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(blocker / "t")}}}
    reset_telemetry_stores()
    materialize_job_task.apply(args=[job.pk], throw=False)

    record = JobTelemetry.objects.get(job=job)
    assert record.status == "ready" and record.product == first.product and record.samples == first.samples
    assert "telemetry store unavailable" in record.message and "showing the product of" in record.message
    client.force_login(make_user("alice"))
    page = client.get("/jobs/alps/9/").content.decode()
    assert 'id="telemetry-heatmap"' in page and "telemetry store unavailable" in page


def test_a_cube_loads_one_field_alone_and_older_files_still_load(tmp_path):
    data = synthetic(hosts=("nid000001", "nid000002"), fields=(100, 150, 1002), minutes=10)
    cube = build_cube(aggregate_frame(data, 60), 60, hosts=["nid000001", "nid000002"])
    cube.save(tmp_path / "c.cube")
    assert JobCube.fields_in(tmp_path / "c.cube") == [100, 150, 1002]
    one = JobCube.load(tmp_path / "c.cube", [150])
    assert list(one.fields) == [150] and one.mean.shape == (8, 1, 10)
    assert np.array_equal(one.mean[:, 0, :], cube.mean[:, cube.field_index(150), :], equal_nan=True)
    assert np.array_equal(one.count[:, 0, :], cube.count[:, cube.field_index(150), :])
    chunks = sorted(p.name for p in (tmp_path / "c.cube").iterdir() if p.name != "head.npz")
    assert len(chunks) == 1
    with np.load(tmp_path / "c.cube" / chunks[0]) as stored:
        assert "f150_mean" in stored.files and "mean" not in stored.files  # one array per field
    # a product of the single-file layout with one array per field
    np.savez_compressed(tmp_path / "per-field.npz", hosts=cube.hosts.astype("U"), gpus=cube.gpus, fields=cube.fields,
                        buckets=cube.buckets.astype("int64"), step=np.array(60),
                        **{f"f{int(f)}_{name}": getattr(cube, name)[:, i, :] for i, f in enumerate(cube.fields)
                           for name in ("count", "mean", "min", "max")})
    assert JobCube.fields_in(tmp_path / "per-field.npz") == [100, 150, 1002]
    assert np.array_equal(JobCube.load(tmp_path / "per-field.npz", [150]).mean[:, 0, :], one.mean[:, 0, :], equal_nan=True)
    # a product written before the per-field layout
    np.savez_compressed(tmp_path / "old.npz", hosts=cube.hosts.astype("U"), gpus=cube.gpus, fields=cube.fields,
                        buckets=cube.buckets.astype("int64"), step=np.array(60), count=cube.count, mean=cube.mean,
                        min=cube.min, max=cube.max)
    old = JobCube.load(tmp_path / "old.npz", [1002])
    assert np.array_equal(old.max[:, 0, :], cube.max[:, cube.field_index(1002), :], equal_nan=True)


def test_a_running_jobs_last_sample_is_never_in_the_future(job, store):
    """The cube's last bucket is still filling while the job runs: its end lies ahead of now, the last sample
    does not (the page said "last sample 06:00 (0 s ago)" at 05:59:36)."""
    import time

    now = timezone.now()
    if now.second % 10 < 2:  # keep the last sample 1 s into a bucket that ends after now
        time.sleep(2)
        now = timezone.now()
    bucket = now.replace(microsecond=0) - timedelta(seconds=now.second % 10)
    # samples up to 1 s into now's bucket (past the fixture's "now", which the sleep may have left behind)
    samples = synthetic(minutes=35, every_s=1, start=job.start_time)
    samples = samples[samples["ts"] <= bucket + timedelta(seconds=1)]
    store.write(samples)
    record = job_telemetry_refresh(job)
    assert record.step_seconds == 10 and record.status == "ready"
    assert bucket < record.last_sample <= timezone.now()
