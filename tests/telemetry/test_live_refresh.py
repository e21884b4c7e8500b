"""End to end, without beat: samples POSTed for a running job's nodes reach its telemetry cube within
seconds, through the real worker (core.refresh_job, the telemetry refresher appending to the cube), and the
job records when each source last sent a sample.

Runs against the portal's own embedded store and cache (the worker process shares them), on a cluster
name no other test uses."""
import json
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.utils import timezone
from rest_framework.authtoken.models import Token

from apps.core.live import key
from apps.core.models import TaskRun
from apps.telemetry.backends.base import Query
from apps.telemetry.models import JobTelemetry
from apps.telemetry.products import JobCube
from apps.telemetry.selectors import forget_host_maps
from apps.telemetry.services import job_telemetry_refresh
from apps.telemetry.store import reset_telemetry_stores, telemetry_store

from .contract import synthetic

CLUSTER = "live-refresh-18"
HOSTS = ("nid000001", "nid000002")


@pytest.fixture
def default_store():
    reset_telemetry_stores()
    forget_host_maps()
    store = telemetry_store()
    store.delete(Query(start=timezone.now() - timedelta(days=3), end=timezone.now() + timedelta(days=1), cluster=CLUSTER))
    yield store
    store.delete(Query(start=timezone.now() - timedelta(days=3), end=timezone.now() + timedelta(days=1), cluster=CLUSTER))
    forget_host_maps()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_posted_samples_reach_the_running_jobs_cube_within_seconds_without_beat(celery_worker_process, default_store,
                                                                                api_client, make_user):
    from apps.jobs.models import Cluster, Job

    now = timezone.now().replace(microsecond=0)
    now -= timedelta(seconds=now.second % 10)  # on a bucket edge (10 s buckets): the posted minute fills its own buckets
    start = now.replace(second=0) - timedelta(minutes=30)
    job = Job.objects.create(cluster=Cluster.objects.create(name=CLUSTER), job_id=4242, user_name="alice", account="a",
                             state="RUNNING", submit_time=start, start_time=start, node_list=list(HOSTS))
    cache.delete_many([key(kind, job.pk) for kind in ("dirty", "pending", "lock")])
    history = synthetic(hosts=HOSTS, minutes=31, start=start, cluster=CLUSTER)
    default_store.write(history[history.ts < now - timedelta(seconds=60)])
    before = job_telemetry_refresh(job)
    assert before.status == "ready" and before.sources == {}

    minute = [{"ts": (now - timedelta(seconds=60 - s)).isoformat(), "host": host, "gpu": gpu, "field": field,
               "value": 0.5, "cluster": CLUSTER}
              for s in range(0, 60, 10) for host in HOSTS for gpu in range(4) for field in (1002, 155)]
    user = make_user("collector")
    user.user_permissions.add(Permission.objects.get(codename="add_ingestbatch"))
    posted = time.monotonic()
    response = api_client.generic("POST", "/api/v1/telemetry/samples/", json.dumps(minute).encode(),
                                  content_type="application/json",
                                  HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    assert response.status_code == 200 and response.json()["accepted"] == len(minute) == 96

    # The job records the source at once; the cube follows within seconds, with no beat running.
    record = JobTelemetry.objects.get(job=job)
    assert record.sources["samples"]["last"] == (now - timedelta(seconds=10)).isoformat()
    first_new = np.datetime64((now - timedelta(seconds=60)).replace(tzinfo=None), "ns")

    def new_samples() -> int:
        current = JobTelemetry.objects.get(job=job)
        if current.materialized is None or current.materialized <= before.materialized:
            return 0
        cube = JobCube.load(Path(settings.DATA_DIR) / current.product)
        return int(cube.count[:, :, cube.buckets >= first_new].sum())

    deadline = posted + 30
    while time.monotonic() < deadline and new_samples() < 96:
        time.sleep(0.25)
    took = time.monotonic() - posted
    assert new_samples() == 96, celery_worker_process.log_text()[-3000:]
    assert took < 30
    after = JobTelemetry.objects.get(job=job)
    assert after.samples == before.samples + 96 and after.status == "ready"
    run = TaskRun.objects.filter(name="core.refresh_job", subject=f"job {CLUSTER}/4242").first()
    assert run is not None and "appended" in run.log  # incremental, not a rebuild
    print(f"posted -> in the cube: {took:.1f} s")
