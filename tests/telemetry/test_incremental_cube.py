"""The incremental telemetry cube (apps/telemetry/services.job_telemetry_update): appending what arrived
gives the cube a full rebuild gives, reads the store only from the last partial bucket (or the earliest
late sample) on, rewrites only the chunks from there, and rebuilds whole when the step, the node list or
the GPUs change.

The store is the real embedded one; :class:`RecordingBackend` only keeps what each ``aggregate`` call
asked for and what the store answered."""
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.conf import settings
from django.utils import timezone

from apps.telemetry.backends.base import DEFAULT_STATS
from apps.telemetry.backends.embedded import EmbeddedBackend
from apps.telemetry.models import JobTelemetry
from apps.telemetry.products import CHUNK_BUCKETS, JobCube, read_head
from apps.telemetry.selectors import forget_host_maps
from apps.telemetry.services import job_telemetry_refresh, job_telemetry_update, samples_arrived
from apps.telemetry.store import reset_telemetry_stores, telemetry_store

from .contract import synthetic

HOSTS = ("nid000001", "nid000002")


class RecordingBackend(EmbeddedBackend):
    """The embedded store, keeping each aggregate call's query, step and answer."""

    calls: list = []

    def aggregate(self, query, step, stats=DEFAULT_STATS):
        answer = super().aggregate(query, step, stats)
        type(self).calls.append((query, step, answer.copy()))
        return answer


@pytest.fixture
def store(settings, tmp_path):
    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": f"{__name__}.RecordingBackend",
                                               "OPTIONS": {"path": str(tmp_path / "telemetry")}}}
    reset_telemetry_stores()
    forget_host_maps()
    RecordingBackend.calls = []
    yield telemetry_store()
    reset_telemetry_stores()
    forget_host_maps()


@pytest.fixture
def start():
    now = timezone.now()
    return now.replace(second=0, microsecond=0) - timedelta(minutes=60)


@pytest.fixture
def job(db, start):
    from apps.jobs.models import Cluster, Job

    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=18, user_name="alice", account="a",
                              state="RUNNING", submit_time=start - timedelta(minutes=2), start_time=start,
                              end_time=start + timedelta(minutes=50, seconds=5), node_list=list(HOSTS))


def samples(start, begin: timedelta, end: timedelta, hosts=HOSTS, seed=1):
    data = synthetic(hosts=hosts, minutes=int((end.total_seconds() + 59) // 60) + 1, start=start, seed=seed)
    return data[(data.ts >= start + begin) & (data.ts < start + end)].reset_index(drop=True)


def arrive(store, frame, source="samples"):
    """What ingestion does: store the batch, then tell the jobs it reached."""
    store.write(frame)
    return samples_arrived(frame, source)


def cube_of(job) -> JobCube:
    record = JobTelemetry.objects.get(job=job)
    return JobCube.load(Path(settings.DATA_DIR) / record.product)


def assert_same_cube(actual: JobCube, expected: JobCube):
    assert list(actual.hosts) == list(expected.hosts) and list(actual.gpus) == list(expected.gpus)
    assert list(actual.fields) == list(expected.fields) and actual.step == expected.step
    assert np.array_equal(actual.buckets, expected.buckets)
    assert np.array_equal(actual.count, expected.count)
    for name in ("mean", "min", "max"):
        assert np.allclose(getattr(actual, name), getattr(expected, name), rtol=1e-6, equal_nan=True), name


def assert_same_record(actual: JobTelemetry, expected: JobTelemetry):
    for name in ("status", "samples", "gpus", "fields", "first_sample", "last_sample", "gpus_reporting",
                 "step_seconds", "window_start", "window_end"):
        assert getattr(actual, name) == getattr(expected, name), name


def minutes(m, s=0):
    return timedelta(minutes=m, seconds=s)


def test_appending_minutes_gives_what_a_full_rebuild_gives_and_reads_only_the_new_window(job, store, start):
    store.write(samples(start, minutes(0), minutes(50, 5)))
    first = job_telemetry_refresh(job)
    assert first.status == "ready" and first.step_seconds == 20 and first.window_end == start + minutes(50, 5)
    # Seven minutes go by (the job's window moves on) and their samples reach the store — written directly,
    # so nothing marks the earliest of them: the update must re-read the bucket the last read ended in.
    job.end_time = start + minutes(57, 5)
    job.save()
    store.write(samples(start, minutes(50, 5), minutes(57, 5)))
    RecordingBackend.calls = []
    updated = job_telemetry_update(job)
    # One read, from the bucket the last read ended in (50:00, holding 50:00 only then) to the new end.
    [(query, step, answer)] = RecordingBackend.calls
    assert step == 20 and query.start == start + minutes(50) and query.end == start + minutes(57, 5)
    buckets = pd.DatetimeIndex(answer["bucket"].unique()).sort_values()
    assert buckets[0] == start + minutes(50) and buckets[-1] == start + minutes(57)
    assert len(answer) == len(buckets) * 8 * 2 == 22 * 16  # 22 buckets x 8 GPUs x 2 fields, not 172 buckets
    assert updated.samples == first.samples + 7 * 6 * 8 * 2
    incremental = cube_of(job)
    assert incremental.count[:, :, -22].tolist() == [[2, 2]] * 8  # the partial bucket, read again, now whole
    rebuilt = job_telemetry_refresh(job)
    assert_same_cube(incremental, cube_of(job))
    assert_same_record(updated, rebuilt)


def test_a_late_sample_in_a_bucket_the_cube_holds_is_read_again(job, store, start):
    store.write(samples(start, minutes(0), minutes(50, 5)))
    job_telemetry_refresh(job)
    late = samples(start, minutes(10), minutes(10, 10)).head(1).assign(ts=start + minutes(10, 5), value=0.999)
    assert late.host[0] == "nid000001" and late.gpu[0] == 0 and late.field[0] == 1002
    arrive(store, late)
    assert JobTelemetry.objects.get(job=job).pending_from == start + minutes(10, 5)
    RecordingBackend.calls = []
    updated = job_telemetry_update(job)
    [(query, _, _)] = RecordingBackend.calls
    assert query.start == start + minutes(10)  # the late sample's bucket, not the last partial one
    assert JobTelemetry.objects.get(job=job).pending_from is None
    cube = cube_of(job)
    column = int(np.flatnonzero(cube.buckets == np.datetime64((start + minutes(10)).replace(tzinfo=None), "ns"))[0])
    assert cube.count[0, cube.field_index(1002), column] == 3 and cube.max[0, cube.field_index(1002), column] >= 0.999
    rebuilt = job_telemetry_refresh(job)
    assert_same_cube(cube, cube_of(job))
    assert_same_record(updated, rebuilt)


def test_an_update_rewrites_only_the_chunks_from_the_partial_bucket_on(job, store, start):
    store.write(samples(start, minutes(0), minutes(50, 5)))
    job_telemetry_refresh(job)
    folder = Path(settings.DATA_DIR) / JobTelemetry.objects.get(job=job).product
    before = read_head(folder)
    assert len(before.buckets) == 151 and len(before.chunks) == 10
    stamps = {name: (folder / name).stat().st_mtime_ns for _, name in before.chunks}
    job.end_time = start + minutes(51, 5)
    job.save()
    arrive(store, samples(start, minutes(50, 5), minutes(51, 5)))
    job_telemetry_update(job)
    after = read_head(folder)
    kept = (len(before.buckets) - 1) // CHUNK_BUCKETS  # the chunk holding the partial bucket is written again
    assert after.chunks[:kept] == before.chunks[:kept]
    assert all((folder / name).stat().st_mtime_ns == stamps[name] for _, name in after.chunks[:kept])
    assert after.chunks[kept][1] != before.chunks[kept][1]
    assert sorted(p.name for p in folder.iterdir()) == sorted([name for _, name in after.chunks] + ["head.npz"])


def test_no_cube_a_longer_step_a_changed_node_list_or_a_new_gpu_rebuild_the_whole_cube(job, store, start):
    store.write(samples(start, minutes(0), minutes(50, 5)))
    RecordingBackend.calls = []
    assert job_telemetry_update(job).status == "ready"  # no cube yet: built whole
    assert RecordingBackend.calls[-1][0].start == start
    # Past 80 minutes 20 s buckets make more than 240: the step grows to 30 s and the cube is rebuilt.
    job.end_time = start + minutes(81)
    job.save()
    arrive(store, samples(start, minutes(50, 5), minutes(81)))
    record = job_telemetry_update(job)
    assert record.step_seconds == 30 and RecordingBackend.calls[-1][0].start == start
    # A node the cube has no row for starts reporting: rebuilt with its GPUs.
    job.node_list = [*HOSTS, "nid000003"]
    job.save()
    arrive(store, samples(start, minutes(0), minutes(81), hosts=("nid000003",), seed=3))
    record = job_telemetry_update(job)
    assert record.gpus == 12 and RecordingBackend.calls[-1][0].start == start
    cube = cube_of(job)
    job_telemetry_refresh(job)
    assert_same_cube(cube, cube_of(job))


def test_a_single_file_cube_of_the_older_layout_is_replaced(job, store, start):
    store.write(samples(start, minutes(0), minutes(50, 5)))
    record = job_telemetry_refresh(job)
    old = Path(settings.DATA_DIR) / "telemetry-products" / "alps" / "18.npz"
    cube = cube_of(job)
    np.savez_compressed(old, hosts=cube.hosts.astype("U"), gpus=cube.gpus, fields=cube.fields,
                        buckets=cube.buckets.astype("int64"), step=np.array(cube.step), count=cube.count,
                        mean=cube.mean, min=cube.min, max=cube.max)
    JobTelemetry.objects.filter(pk=record.pk).update(product=str(old.relative_to(settings.DATA_DIR)))
    assert JobCube.load(old).shape == cube.shape  # pages still read it
    updated = job_telemetry_update(job)
    assert updated.product.endswith("18.cube") and not old.exists()
    assert_same_cube(cube_of(job), cube)


def test_samples_arrived_records_each_source_and_only_the_jobs_it_reached(job, store, start):
    from apps.jobs.models import Job

    other = Job.objects.create(cluster=job.cluster, job_id=19, user_name="bob", account="a", state="RUNNING",
                               start_time=start, node_list=["nid000009"])
    batch = samples(start, minutes(40), minutes(41))
    assert arrive(store, batch) == [job.pk]
    assert arrive(store, samples(start, minutes(45), minutes(46)), source="dcgm-exporter") == [job.pk]
    assert arrive(store, samples(start, minutes(42), minutes(43)), source="samples") == [job.pk]
    record = JobTelemetry.objects.get(job=job)
    assert record.sources == {
        "samples": {"first": (start + minutes(40)).isoformat(), "last": (start + minutes(42, 50)).isoformat()},
        "dcgm-exporter": {"first": (start + minutes(45)).isoformat(), "last": (start + minutes(45, 50)).isoformat()}}
    assert record.pending_from == start + minutes(40)
    assert not JobTelemetry.objects.filter(job=other).exists()
    # After the job's end a host's samples belong to whatever runs there next: not to this job.
    assert arrive(store, samples(start, minutes(51), minutes(52))) == []
    # The refresh never writes what ingestion recorded.
    job_telemetry_update(job)
    assert JobTelemetry.objects.get(job=job).sources == record.sources


def test_an_end_reported_before_the_last_read_drops_what_came_after_it(job, store, start):
    store.write(samples(start, minutes(0), minutes(55)))
    job_telemetry_refresh(job)  # read up to 50:05
    job.end_time = start + minutes(48, 30)  # Slurm says it ended earlier than our last read
    job.save()
    updated = job_telemetry_update(job)
    cube = cube_of(job)
    assert cube.buckets[-1] == np.datetime64((start + minutes(48, 20)).replace(tzinfo=None), "ns")
    rebuilt = job_telemetry_refresh(job)
    assert_same_cube(cube, cube_of(job))
    assert_same_record(updated, rebuilt)
