"""Incremental saturation updates (issue 18): an update reads the store only from the last final column
of the job's score state on, and gives what a full rescoring of the same samples gives; a full scoring
happens when there is no state, when what it depends on changed, or on request."""
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.utils import timezone

from apps.saturation.models import JobSaturation
from apps.saturation.products import SaturationCube
from apps.saturation.services import job_saturation_refresh, job_saturation_update, state_folder
from apps.saturation.state import load_state
from apps.telemetry.backends.embedded import EmbeddedBackend
from apps.telemetry.synthetic_jobs import default_planted, job_chunks

HOSTS = [f"nid{n:06d}" for n in range(1, 9)]
REREAD = 420  # s: the appended minutes below fall after the state's last final column


class RecordingBackend(EmbeddedBackend):
    """The embedded store, remembering the windows it was asked for (class-wide: one store per test)."""

    windows: list = []

    def aggregate(self, query, step, *args, **kwargs):
        RecordingBackend.windows.append((query.start, query.end, tuple(query.hosts or ())))
        return super().aggregate(query, step, *args, **kwargs)


@pytest.fixture
def recording_store(settings, tmp_path):
    from apps.telemetry.store import reset_telemetry_stores, telemetry_store

    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "tests.saturation.test_incremental.RecordingBackend",
                                               "OPTIONS": {"path": str(tmp_path / "telemetry")}}}
    settings.SATURATION_REREAD_SECONDS = REREAD
    settings.DATA_DIR = tmp_path / "var"  # products and score states of this test only
    reset_telemetry_stores()
    RecordingBackend.windows = []
    yield telemetry_store()
    reset_telemetry_stores()


@pytest.fixture
def running_job(db, recording_store):
    """A running 32-GPU Megatron job started 36 minutes ago whose samples end 6 minutes ago."""
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=36)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=501, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, node_list=HOSTS)
    write(recording_store, start, 0, 30 * 60)
    return job


def write(store, start, first_s: float, last_s: float, hosts=HOSTS, seed=5):
    """The job's samples from ``first_s`` to ``last_s`` seconds after its start (the run goes on: no new warm-up)."""
    for chunk in job_chunks("megatron", hosts, start + timedelta(seconds=first_s), last_s - first_s, seed=seed + int(first_s),
                            elapsed_before_s=first_s, planted=default_planted(HOSTS)):
        store.write(chunk)


def snapshot(record: JobSaturation) -> dict:
    record.refresh_from_db()
    cube = SaturationCube.load(Path(settings.DATA_DIR) / record.product)
    return {"score": record.score, "per_gpu": record.per_gpu, "stragglers": record.stragglers, "cube": cube,
            "samples": record.samples, "steady_start": record.steady_start, "scored_until": record.scored_until,
            "labels": record.labels, "limiter": record.limiter, "flags": record.flags}


def assert_same_result(got: dict, expected: dict):
    assert got["score"] == pytest.approx(expected["score"], abs=0.05)
    assert got["samples"] == expected["samples"] and got["scored_until"] == expected["scored_until"]
    assert got["steady_start"] == expected["steady_start"] and got["labels"] == expected["labels"]
    assert got["limiter"] == expected["limiter"] and got["flags"] == expected["flags"]
    assert len(got["per_gpu"]) == len(expected["per_gpu"])
    for mine, theirs in zip(got["per_gpu"], expected["per_gpu"]):
        assert set(mine) == set(theirs)
        for key, value in theirs.items():
            if isinstance(value, float):
                assert mine[key] == pytest.approx(value, abs=2e-4), (mine["host"], mine["gpu"], key)
            else:
                assert mine[key] == value, (mine["host"], mine["gpu"], key)
    key = lambda item: (item["level"], item["host"] or "", item["gpu"] if item["gpu"] is not None else -1, item["signal"])  # noqa: E731
    assert sorted(map(key, got["stragglers"])) == sorted(map(key, expected["stragglers"]))
    for mine, theirs in zip(sorted(got["stragglers"], key=key), sorted(expected["stragglers"], key=key)):
        assert mine["z"] == pytest.approx(theirs["z"], rel=1e-4) and mine["duration_s"] == theirs["duration_s"]
        assert (mine["start"], mine["end"]) == (theirs["start"], theirs["end"])
    a, b = got["cube"], expected["cube"]
    assert list(a.hosts) == list(b.hosts) and list(a.gpus) == list(b.gpus)
    assert np.array_equal(a.bin_starts, b.bin_starts) and a.bin_seconds == b.bin_seconds
    assert (a.warmup_end, a.steady_end) == (b.warmup_end, b.steady_end)
    assert set(a.values) == set(b.values)
    for name in b.values:
        np.testing.assert_allclose(a.values[name], b.values[name], rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)


def test_an_update_after_appending_minutes_equals_a_full_rescoring_and_reads_only_the_new_window(running_job, recording_store):
    job = running_job
    first_at = timezone.now()  # the state's last final column is the first update's "now" less the re-read margin
    first = job_saturation_update(job)
    assert first.last_read["mode"] == "full" and first.status == "ready"
    planted = default_planted(HOSTS)
    found = {(s["level"], s["host"], s["gpu"]) for s in first.stragglers}
    assert ("gpu", *planted.throttled) in found  # the product is worth comparing: it has findings
    state = load_state(state_folder(job))
    assert state is not None and state.columns >= 30 * 6 and 0 < state.complete < state.columns

    write(recording_store, job.start_time, 30 * 60, 35 * 60)  # five more minutes arrive
    RecordingBackend.windows = []
    before = timezone.now()
    updated = job_saturation_update(job)
    assert updated.last_read["mode"] == "incremental"
    # The store was asked only for the columns after the last final one of the first update: from 7 minutes before
    # it at the earliest (one 10-s column of rounding), not from the job's start 35 minutes ago. (Measured from the
    # first update, not from now: under CI's load the first update and the write took long enough to fail that bound.)
    assert RecordingBackend.windows, "the update read nothing"
    for window_start, window_end, hosts in RecordingBackend.windows:
        assert window_start >= first_at - timedelta(seconds=REREAD + 10) and window_end >= before
    assert {host for *_, hosts in RecordingBackend.windows for host in hosts} == set(HOSTS)
    assert updated.last_read["columns"] <= (REREAD + 30) // 10
    assert updated.scored_until > first.scored_until  # the new minutes are in the product
    incremental = snapshot(updated)

    full = job_saturation_refresh(job)
    assert full.last_read["mode"] == "full"
    assert_same_result(incremental, snapshot(full))


def test_gpus_that_start_reporting_later_get_their_rows_in_node_order(running_job, recording_store):
    """Node 5 sends nothing at first: the first scoring has no rows for it; the update adds them where a
    full scoring puts them."""
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=36)
    job = Job.objects.create(cluster=Cluster.objects.get(name="alps"), job_id=502, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, node_list=HOSTS)
    late = HOSTS[4]
    # job 501's samples (same hosts) are in this store too: give job 502 its own nodes by a cluster of its own
    job.cluster = Cluster.objects.create(name="todi")
    job.save()
    for chunk in job_chunks("megatron", [h for h in HOSTS if h != late], start, 30 * 60, seed=8, cluster="todi",
                            planted=default_planted(HOSTS)):
        recording_store.write(chunk)
    first = job_saturation_update(job)
    assert late not in {g["host"] for g in first.per_gpu}
    for chunk in job_chunks("megatron", HOSTS, start + timedelta(minutes=30), 5 * 60, seed=9, cluster="todi",
                            elapsed_before_s=30 * 60, planted=default_planted(HOSTS)):
        recording_store.write(chunk)
    updated = job_saturation_update(job)
    assert updated.last_read["mode"] == "incremental"
    assert [g["host"] for g in updated.per_gpu] == [h for h in HOSTS for _ in range(4)]
    incremental = snapshot(updated)
    assert_same_result(incremental, snapshot(job_saturation_refresh(job)))


def test_nothing_new_leaves_the_result_as_a_full_scoring_would(running_job):
    job = running_job
    first = snapshot(job_saturation_update(job))
    again = job_saturation_update(job)
    # only the re-read margin (its last minute holds samples) was read again
    assert again.last_read["mode"] == "incremental" and 0 < again.last_read["samples"] < first["samples"] / 20
    assert_same_result(snapshot(again), first)


def test_an_update_rewrites_only_the_chunks_its_columns_fall_in(running_job, recording_store):
    job = running_job
    job_saturation_update(job)
    folder = state_folder(job)
    chunks = sorted(folder.glob("chunk-*.npy"))
    assert len(chunks) >= 4  # 36 minutes at 10 s, 60 columns a chunk
    stamps = {path.name: path.stat().st_mtime_ns for path in chunks}
    write(recording_store, job.start_time, 30 * 60, 32 * 60)
    job_saturation_update(job)
    after = {path.name: path.stat().st_mtime_ns for path in sorted(folder.glob("chunk-*.npy"))}
    assert after["chunk-00000.npy"] == stamps["chunk-00000.npy"] and after["chunk-00001.npy"] == stamps["chunk-00001.npy"]
    assert after[chunks[-1].name] != stamps[chunks[-1].name]


@pytest.mark.parametrize("change", ["nothing asked", "layout", "ceilings", "nodes", "start", "step", "no state", "early end"])
def test_a_full_scoring_when_what_it_depends_on_changed(running_job, change):
    import json

    from apps.ranks.models import JobLayout
    from apps.saturation.models import GpuModelCeiling

    job = running_job
    job_saturation_update(job)
    folder = state_folder(job)
    if change == "layout":
        JobLayout.objects.create(job=job, tp=4, pp=2, dp=4, world_size=32, tasks_per_node=4, source="sizes")
    elif change == "ceilings":
        GpuModelCeiling.objects.update_or_create(name="GH200", defaults={"matches": "GH200", "tensor": 0.8})
    elif change == "nodes":
        job.node_list = HOSTS[:7]
        job.save()
    elif change == "start":
        job.start_time -= timedelta(minutes=1)
        job.save()
    elif change == "step":  # as if the job had outgrown 2,160 columns of 10 s: the state's step is no longer the job's
        meta = json.loads((folder / "state.json").read_text())
        meta["fingerprint"]["step_s"] = 20.0
        (folder / "state.json").write_text(json.dumps(meta))
    elif change == "early end":  # Slurm's end time arrives, before the last columns the state holds as final
        job.state, job.end_time = "COMPLETED", job.start_time + timedelta(minutes=20)
        job.save()
    elif change == "no state":
        import shutil

        shutil.rmtree(folder)
    record = job_saturation_update(job)
    assert record.last_read["mode"] == ("incremental" if change == "nothing asked" else "full"), change
    assert job_saturation_update(job, full=True).last_read["mode"] == "full"
    if job.end_time is None:
        assert load_state(folder) is not None  # a full scoring leaves the state the next update extends


def test_an_unreadable_state_is_scored_from_scratch(running_job):
    job = running_job
    job_saturation_update(job)
    for chunk in state_folder(job).glob("chunk-*.npy"):
        chunk.write_bytes(b"not a chunk")
    assert job_saturation_update(job).last_read["mode"] == "full"


def test_states_of_jobs_that_ended_long_ago_and_forgotten_blocks_are_pruned(running_job, settings):
    import os

    from apps.saturation.services import prune_states, split_folder

    job = running_job
    job_saturation_update(job)
    job.state, job.end_time = "COMPLETED", timezone.now()
    job.save()
    assert job_saturation_update(job).last_read["mode"] == "incremental"  # late samples after the end: still cheap
    blocks = split_folder(job, "lost")
    blocks.mkdir()
    os.utime(blocks, (0, 0))
    assert prune_states(ended_before=timezone.now() - timedelta(hours=1), stale_before=timezone.now()) == ["alps/501+split"]
    assert state_folder(job).exists()
    assert prune_states(ended_before=timezone.now() + timedelta(seconds=1), stale_before=timezone.now()) == ["alps/501"]
    assert not state_folder(job).exists()
    assert job_saturation_update(job).last_read["mode"] == "full"


def test_products_written_compressed_before_still_load(tmp_path, running_job):
    record = job_saturation_update(running_job)
    cube = SaturationCube.load(settings.DATA_DIR / record.product)
    old = tmp_path / "old.npz"
    np.savez_compressed(old, hosts=cube.hosts.astype("U"), gpus=cube.gpus, bin_seconds=np.array(cube.bin_seconds),
                        bin_starts=cube.bin_starts.astype("int64"), warmup_end=np.array(-1), steady_end=np.array(-1),
                        **{f"metric_{name}": array for name, array in cube.values.items()})
    again = SaturationCube.load(old, ["S"])
    assert np.array_equal(again.values["S"], cube.values["S"], equal_nan=True) and again.warmup_end is None
