"""Against a real Slurm cluster on this machine (tests/slurm_cluster.py): the TaskProlog's URL in
the job output, ``sync_slurm`` ingesting the job, and the URL serving its page to the right people."""
import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from apps.jobs.models import Job, JobStep

pytestmark = pytest.mark.integration

SCRIPT = "#!/bin/bash\nsrun -N2 -n4 hostname\nsrun -N1 -n1 true\n"


@pytest.fixture
def slurm_env(monkeypatch, slurm_cluster):
    for key, value in slurm_cluster.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster


def run_job(cluster, tmp_path: Path, name: str) -> tuple[int, str]:
    tmp_path.chmod(0o755)
    job_id = cluster.sbatch(SCRIPT, "-N2", "--ntasks-per-node=2", f"--job-name={name}", "--time=5",
                            f"--output={tmp_path}/slurm-%j.out", cwd=tmp_path)
    cluster.wait_for_state(job_id, "COMPLETED", timeout=90)
    return job_id, (tmp_path / f"slurm-{job_id}.out").read_text()


@pytest.mark.django_db
def test_job_output_has_one_url_and_sync_ingests_the_job(slurm_env, tmp_path, client, make_user):
    cluster = slurm_env
    job_id, output = run_job(cluster, tmp_path, "belvedere-it")
    urls = [line for line in output.splitlines() if line.startswith("Belvedere:")]
    assert urls == [f"Belvedere: http://belvedere.test/jobs/{cluster.cluster_name}/{job_id}/"], output
    # 4 hostname lines + the URL; srun's own notes ("srun: Job 1 step creation temporarily disabled, retrying" while
    # the previous test's job still holds the nodes) are Slurm's, not the job's output
    assert len([line for line in output.splitlines() if line.strip() and not line.startswith("srun: ")]) == 4 + 1, output

    out = io.StringIO()
    call_command("sync_slurm", "--cluster", cluster.cluster_name, stdout=out, stderr=out)
    assert f"Cluster {cluster.cluster_name} synced." in out.getvalue(), out.getvalue()
    job = Job.objects.get(cluster__name=cluster.cluster_name, job_id=job_id)
    assert (job.state, job.name, job.user_name) == ("COMPLETED", "belvedere-it", "root")
    # Slurm's own plain-text view of the job, read independently of the JSON readers.
    shown = cluster.run("scontrol", "-o", "show", "job", str(job_id), check=True).stdout
    import hostlist

    assert job.node_list == hostlist.expand_hostlist(re.search(r" NodeList=(\S+)", shown).group(1))
    assert job.node_count == 2 and job.exit_code == 0 and job.end_time is not None

    # Syncing again changes nothing.
    out = io.StringIO()
    call_command("sync_slurm", "--cluster", cluster.cluster_name, stdout=out, stderr=out)
    # the report names the data_parser and the Slurm release that wrote the JSON (Slurm's own spelling)
    version = cluster.run("scontrol", "--version", check=True).stdout.split()[-1]
    assert re.search(rf"squeue \(data_parser v0\.0\.\d+, Slurm {re.escape(version)}\): \d+ jobs read, 0 created, 0 updated",
                     out.getvalue()), out.getvalue()
    assert Job.objects.filter(cluster__name=cluster.cluster_name, job_id=job_id).count() == 1

    # The URL printed in the output: the owner (Slurm user root) sees the page, anyone else 404.
    path = urls[0].split("http://belvedere.test", 1)[1]
    client.force_login(make_user("root"))
    page = client.get(path)
    assert page.status_code == 200 and "belvedere-it" in page.content.decode()
    client.force_login(make_user("alice"))
    assert client.get(path).status_code == 404


@pytest.fixture
def accounting_env(monkeypatch, slurm_cluster_accounting):
    for key, value in slurm_cluster_accounting.env.items():
        monkeypatch.setenv(key, value)
    return slurm_cluster_accounting


@pytest.mark.django_db
def test_sync_reads_finished_jobs_and_steps_from_sacct(accounting_env, tmp_path):
    cluster = accounting_env
    job_id, _ = run_job(cluster, tmp_path, "with-accounting")
    # sacct learns about the job from slurmdbd asynchronously: retry the sync briefly.
    import time

    deadline = time.monotonic() + 60
    while True:
        call_command("sync_slurm", "--cluster", cluster.cluster_name, stdout=io.StringIO(), stderr=io.StringIO())
        steps = set(JobStep.objects.filter(job__cluster__name=cluster.cluster_name, job__job_id=job_id).values_list("step_id", flat=True))
        if {"batch", "0", "1"} <= steps or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {"batch", "0", "1"} <= steps
    job = Job.objects.get(cluster__name=cluster.cluster_name, job_id=job_id)
    assert job.state == "COMPLETED" and job.node_count == 2
