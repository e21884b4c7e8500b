"""Fixtures shared by the saturation tests: alice's running Megatron job with synthetic samples."""
from datetime import timedelta

import pytest
from django.utils import timezone


@pytest.fixture
def megatron_job(db, store):
    """Build alice's running job on ``hosts``, started ``minutes`` ago, with ``seconds`` of the
    synthetic Megatron trace written to the test's telemetry store."""
    from apps.jobs.models import Cluster, Job
    from apps.telemetry.synthetic_jobs import job_chunks

    def make(*, job_id: int, hosts: list[str], minutes: int, seconds: int, seed: int):
        start = timezone.now().replace(microsecond=0) - timedelta(minutes=minutes)
        job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=job_id, user_name="alice",
                                 account="a-llm01", state="RUNNING", submit_time=start - timedelta(minutes=3),
                                 start_time=start, node_list=hosts)
        for chunk in job_chunks("megatron", hosts, start, seconds, seed=seed):
            store.write(chunk)
        return job

    return make
