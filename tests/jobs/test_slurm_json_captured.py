"""The Slurm JSON readers on real output captured from a Slurm 22.05 cluster (tests/jobs/data)."""
import pytest

from apps.jobs.models import Cluster, Job, JobStep
from apps.jobs.services import jobs_upsert
from apps.jobs.slurm_json import parse_sacct, parse_scontrol, parse_squeue


def read(slurm_data, name):
    return (slurm_data / name).read_text()


def test_squeue_with_running_pending_and_array_jobs(slurm_data):
    result = parse_squeue(read(slurm_data, "squeue_mixed.json"), "testcluster")
    assert result.problems == [] and result.slurm_version == "22.05.8"  # as Slurm spells its release
    jobs = {job.job_id: job for job in result.jobs}
    assert set(jobs) == {1, 2, 3, 4, 5}
    running = jobs[1]
    assert (running.state, running.name, running.user, running.account) == ("RUNNING", "train-multinode", "root", "testaccount")
    assert running.node_list == ("nid000001", "nid000002") and running.node_count == 2 and running.tasks == 4
    assert running.end_time is None and running.exit_code is None  # projected end and placeholder 0 ignored
    assert running.start_time > running.submit_time and running.time_limit_minutes == 10
    assert (jobs[3].state, jobs[3].node_list, jobs[3].state_reason) == ("PENDING", (), "Priority")
    # The array: tasks 0 and 1 running as jobs 4 and 5; the rest (2-3) pending in record 2.
    assert [(jobs[i].array_job_id, jobs[i].array_task_id, jobs[i].node_list) for i in (4, 5)] == [
        (2, 0, ("nid000003",)), (2, 1, ("nid000004",))]
    assert (jobs[2].state, jobs[2].array_task_id, jobs[2].array_task_string) == ("PENDING", None, "2-3")


def test_empty_queue_and_single_job_documents(slurm_data):
    assert parse_squeue(read(slurm_data, "squeue_empty.json"), "testcluster").jobs == []
    [job] = parse_scontrol(read(slurm_data, "scontrol_job_running.json"), "testcluster").jobs
    assert (job.job_id, job.state, job.nodes) == (1, "RUNNING", "nid[000001-000002]")


def test_sacct_finished_jobs_with_steps(slurm_data):
    result = parse_sacct(read(slurm_data, "sacct_finished.json"), "testcluster")
    assert result.problems == [] and result.plugin.startswith("Slurm OpenAPI DB")
    jobs = {job.job_id: job for job in result.jobs}
    assert {job_id: job.state for job_id, job in jobs.items()} == {
        1: "CANCELLED", 2: "COMPLETED", 3: "COMPLETED", 4: "COMPLETED", 5: "COMPLETED", 6: "COMPLETED", 7: "FAILED", 8: "COMPLETED"}
    assert [(step.step_id, step.state, step.nodes, step.tasks) for step in jobs[3].steps] == [
        ("batch", "COMPLETED", "nid000001", 1), ("0", "COMPLETED", "nid[000001-000002]", 4)]
    assert (jobs[2].array_job_id, jobs[2].array_task_id) == (2, 3)  # the array's id reused by its last task
    assert jobs[7].exit_code is None  # Slurm 22.05.8's sacct says 0 for a job that exited 3
    assert jobs[6].exit_code == 0 and jobs[1].end_time is not None


@pytest.mark.django_db
def test_squeue_then_sacct_ingest_merges_and_never_duplicates(slurm_data):
    cluster = Cluster.objects.create(name="testcluster")
    first = jobs_upsert(cluster, parse_squeue(read(slurm_data, "squeue_mixed.json"), "testcluster").jobs, "squeue")
    assert (first.created, first.updated) == (5, 0)
    again = jobs_upsert(cluster, parse_squeue(read(slurm_data, "squeue_mixed.json"), "testcluster").jobs, "squeue")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 5)
    later = jobs_upsert(cluster, parse_sacct(read(slurm_data, "sacct_finished.json"), "testcluster").jobs, "sacct")
    assert (later.created, later.updated) == (3, 5)  # jobs 6, 7, 8 are new
    assert Job.objects.filter(cluster=cluster).count() == 8
    job = Job.objects.get(cluster=cluster, job_id=1)
    assert (job.state, job.tasks, job.node_list) == ("CANCELLED", 4, ["nid000001", "nid000002"])  # tasks kept from squeue
    assert set(JobStep.objects.filter(job=job).values_list("step_id", "state")) == {("batch", "CANCELLED"), ("0", "CANCELLED")}
    # A stale squeue document read after sacct must not turn the finished job back into RUNNING.
    jobs_upsert(cluster, parse_squeue(read(slurm_data, "squeue_mixed.json"), "testcluster").jobs, "squeue")
    assert Job.objects.get(cluster=cluster, job_id=1).state == "CANCELLED"
