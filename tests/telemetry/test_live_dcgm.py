"""Live reads of a running job's DCGM host engines: the collector's call sequence from the portal side."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.live import collector_module, read_host

from .collector.recording import RecordingDcgm, value


def test_read_host_returns_canonical_samples_and_always_tears_down():
    now_us = int(timezone.now().timestamp() * 1e6) + 5_000_000
    readings = [{0: {1002: [value(0.8, now_us)], 155: [value(612.5, now_us)]},
                 1: {1002: [value(0.1, now_us)], 155: [value(101.0, now_us, blank=True)]}}]
    dcgm = RecordingDcgm({0: "GPU-aaa", 1: "GPU-bbb"}, readings=readings)
    frame = read_host("nid000001", 5555, fields=(1002, 155), seconds=0, interval=0.1, cluster="alps", adapter=dcgm,
                      sleep=lambda s: None)
    assert dcgm.calls[0] == ("connect", ("nid000001:5555",))
    assert sorted(zip(frame["gpu"], frame["field"], frame["value"])) == [(0, 155, 612.5), (0, 1002, 0.8), (1, 1002, 0.1)]
    assert set(frame["uuid"]) == {"GPU-aaa", "GPU-bbb"} and set(frame["host"]) == {"nid000001"}
    assert dcgm.names()[-4:] == ["unwatch_fields", "delete_field_group", "delete_group", "disconnect"]


def test_an_engine_that_fails_mid_read_is_still_torn_down():
    dcgm = RecordingDcgm({0: "GPU-aaa"}, readings=[{}], fail_latest_at=1)
    with pytest.raises(Exception, match="disconnected"):
        read_host("nid000002", 5555, fields=(1002,), seconds=0, interval=0.1, cluster="alps", adapter=dcgm, sleep=lambda s: None)
    assert "disconnect" in dcgm.names() and "delete_group" in dcgm.names()


def test_the_task_is_off_by_default_and_names_each_unreadable_node(db, settings, store):
    from apps.core.models import TaskRun
    from apps.jobs.models import Cluster, Job
    from apps.telemetry.tasks import read_dcgm_live_running_task, read_dcgm_live_task

    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=3, user_name="a", account="a",
                             state="RUNNING", submit_time=timezone.now() - timedelta(hours=1),
                             start_time=timezone.now() - timedelta(minutes=30), node_list=["nid000001", "nid000002"])
    assert read_dcgm_live_task.apply(args=[job.pk]).get() == {"skipped": "TELEMETRY_DCGM_PORT is not set"}
    assert read_dcgm_live_running_task.apply().get() == []
    settings.TELEMETRY_DCGM_PORT = 5555
    settings.TELEMETRY_DCGM_SECONDS = 0
    result = read_dcgm_live_task.apply(args=[job.pk]).get()
    # No DCGM on this machine: each node fails with the collector's one-line reason, nothing is stored.
    assert result["samples"] == 0 and [line.split(":")[0] for line in result["failed"]] == ["nid000001", "nid000002"]
    assert all("DCGM" in line for line in result["failed"])
    run = TaskRun.objects.get(name="telemetry.read_dcgm_live")
    assert run.status == "failed" and "nid000001" in run.message
    assert isinstance(collector_module().Failure("x"), Exception)
