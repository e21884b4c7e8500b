"""Issue 37, acceptance 3: campaigns found from real Slurm records. On the test cluster (tests/slurm_cluster.py) a
chain of three jobs submitted with ``--dependency=singleton`` and a job requeued with ``scontrol requeue``; the
portal syncs them as it does in production (``sync_slurm``: squeue and sacct JSON) while the chain waits — Slurm shows a
singleton dependency only until it is fulfilled — and after it ended, then detection puts the chain into one campaign
in submission order and the requeued job into a campaign of its own."""
import io

import pytest
from django.core.management import call_command

from apps.campaigns.models import Campaign
from apps.campaigns.services import campaigns_detect
from apps.jobs.models import Job

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def slurm_env(monkeypatch, slurm_cluster):
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster


def sync(cluster) -> str:
    out = io.StringIO()
    call_command("sync_slurm", "--cluster", cluster.cluster_name, stdout=out, stderr=out)
    return out.getvalue()


def test_a_singleton_chain_and_a_requeued_job_become_campaigns(slurm_env, tmp_path):
    cluster = slurm_env
    tmp_path.chmod(0o755)
    common = ["-N1", "--time=2", f"--output={tmp_path}/slurm-%j.out"]
    chain = [cluster.sbatch("#!/bin/bash\nsleep 2\n", *common, "--job-name=apertus-it", "--dependency=singleton", cwd=tmp_path)
             for _ in range(3)]
    requeued = cluster.sbatch("#!/bin/bash\nsleep 60\n", *common, "--job-name=requeue-it", "--requeue", cwd=tmp_path)
    cluster.wait_for_state(requeued, "RUNNING", timeout=60)
    cluster.run("scontrol", "requeue", str(requeued), check=True)
    # while the chain waits on its singleton dependency: Slurm clears a fulfilled one, the portal keeps what it saw
    sync(cluster)
    waiting = Job.objects.filter(cluster__name=cluster.cluster_name, job_id__in=chain[1:])
    assert waiting.count() == 2 and all("singleton" in job.dependency for job in waiting), \
        [(job.job_id, job.state, job.dependency) for job in waiting]
    for job_id in chain:
        cluster.wait_for_state(job_id, "COMPLETED", timeout=90)
    cluster.run("scancel", str(requeued), check=True)
    cluster.wait_for_state(requeued, ("CANCELLED",), timeout=60)
    sync(cluster)
    jobs = {job.job_id: job for job in Job.objects.filter(cluster__name=cluster.cluster_name, job_id__in=[*chain, requeued])}
    assert all(jobs[job_id].state == "COMPLETED" and "singleton" in jobs[job_id].dependency for job_id in chain[1:])
    assert jobs[requeued].restart_count and jobs[requeued].restart_count >= 1

    report = campaigns_detect()
    assert campaigns_detect().jobs_added == 0  # idempotent
    account = jobs[chain[0]].account
    campaign = Campaign.objects.get(key=f"singleton:{cluster.cluster_name}:{account}:apertus-it")
    members = sorted(campaign.members.values_list("job__job_id", flat=True))
    assert members == sorted(chain) and campaign.source == "singleton" and report.campaigns_created >= 2
    again = Campaign.objects.get(key=f"requeue:{cluster.cluster_name}:{requeued}")
    assert list(again.members.values_list("job__job_id", flat=True)) == [requeued]
