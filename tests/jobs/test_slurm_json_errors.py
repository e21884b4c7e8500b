"""Slurm JSON readers on malformed input: clear errors, the other jobs still read, nothing lost."""
import json

import pytest

from apps.jobs.models import Cluster, Job
from apps.jobs.services import SlurmCommandError, cluster_sync, run_slurm_command
from apps.jobs.slurm_json import SlurmJsonError, number, parse_sacct, parse_squeue, state_of


def squeue_doc(*jobs) -> str:
    return json.dumps({"meta": {"plugin": {"name": "Slurm OpenAPI plugin v0.0.38"}}, "errors": [], "jobs": list(jobs)})


GOOD = {"job_id": 11, "job_state": "RUNNING", "user_name": "alice", "account": "a-llm01", "name": "ok",
        "nodes": "nid[000001-000002]", "node_count": 2, "submit_time": 1763700000, "start_time": 1763700100, "end_time": 0}


@pytest.mark.parametrize("raw, message", [
    ("not json at all", "not JSON"),
    ("[1, 2]", "expected an object with a 'jobs' list"),
    ('{"jobs": {"a": 1}}', "expected an object with a 'jobs' list"),
    (b"\xff\xfe", "not JSON"),
])
def test_unusable_documents_say_why(raw, message):
    with pytest.raises(SlurmJsonError, match=message):
        parse_squeue(raw, "alps")


def test_bad_jobs_are_reported_and_the_good_ones_kept():
    bad_nodes = dict(GOOD, job_id=12, nodes="nid[0001-")
    no_id = dict(GOOD, job_id=None)
    no_state = dict(GOOD, job_id=13, job_state=None)
    wrong_type = dict(GOOD, job_id=14, node_count="many")
    result = parse_squeue(squeue_doc(GOOD, bad_nodes, no_id, no_state, "garbage", wrong_type), "alps")
    assert [job.job_id for job in result.jobs] == [11]
    messages = [str(problem) for problem in result.problems]
    assert messages[0].startswith("job 12: node list 'nid[0001-' is not a hostlist expression")
    assert "entry 2: missing or invalid job_id" in messages[1]
    assert messages[2].startswith("job 13: no job state")
    assert messages[3] == "entry 4: not an object"
    assert messages[4].startswith('job 14: expected a number, got "many"')


def test_later_plugin_shapes_are_read_too():
    # Slurm 23.02+ (0.0.39/0.0.40) wraps numbers and lists states.
    wrapped = dict(GOOD, job_state=["RUNNING", "COMPLETING"], node_count={"set": True, "infinite": False, "number": 2},
                   time_limit={"set": True, "infinite": True, "number": 0}, submit_time={"set": True, "number": 1763700000})
    [job] = parse_squeue(squeue_doc(wrapped), "alps").jobs
    assert (job.state, job.node_count, job.time_limit_minutes) == ("RUNNING", 2, None)
    assert job.submit_time.isoformat() == "2025-11-21T04:40:00+00:00"
    assert number({"set": False, "number": 5}) is None and state_of({"current": ["FAILED"]}) == "FAILED"


def test_user_strings_are_made_printable_and_bounded():
    hostile = dict(GOOD, name="evil\x1b[31m\nname" + "x" * 1000, comment="--environment=foo\tbar")
    [job] = parse_squeue(squeue_doc(hostile), "alps").jobs
    assert "\x1b" not in job.name and "\n" not in job.name and len(job.name) == 500
    assert job.environment == "foo"


def test_sacct_errors_from_slurm_are_kept():
    document = {"errors": [{"error": "Slurm accounting storage is disabled"}], "jobs": []}
    result = parse_sacct(json.dumps(document), "alps")
    assert result.jobs == [] and "accounting storage is disabled" in str(result.problems[0])


@pytest.mark.django_db
def test_a_sync_with_one_bad_job_stores_the_others_and_tells_staff():
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=99, user_name="old", state="COMPLETED")
    outputs = {"squeue": squeue_doc(GOOD, dict(GOOD, job_id=12, nodes="nid[0001-")),
               "sacct": json.dumps({"errors": [], "jobs": []})}
    counts = cluster_sync(cluster, run=lambda args, timeout: outputs[args[0]])
    cluster.refresh_from_db()
    assert counts["squeue"]["created"] == 1 and counts["squeue"]["problems"] == 1
    assert "squeue: job 12: node list" in cluster.last_sync_message
    assert set(Job.objects.values_list("job_id", flat=True)) == {11, 99}  # nothing lost


@pytest.mark.django_db
def test_a_missing_command_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SlurmCommandError, match="squeue was not found on PATH"):
        run_slurm_command(["squeue", "--json"], timeout=5)
    cluster = Cluster.objects.create(name="alps")
    cluster_sync(cluster)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok is False and "squeue was not found on PATH" in cluster.last_sync_message


@pytest.mark.django_db
def test_sync_slurm_command_exits_non_zero_with_the_reason(monkeypatch, tmp_path, capsys):
    from django.core.management import call_command

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as exit_info:
        call_command("sync_slurm", "--cluster", "alps")
    assert exit_info.value.code == 1
    assert "squeue was not found on PATH" in capsys.readouterr().err


@pytest.mark.parametrize("url, valid", [
    ("unix:///run/slurmrestd/slurmrestd.socket", True),
    ("http://slurmctl:6820", True),
    ("https://slurm.example.org/api", True),
    ("ftp://slurm", False),
    ("unix://relative.sock", False),
    ("http://has space:1", False),
])
def test_slurmrestd_addresses_that_sites_use_are_accepted(url, valid):
    from django.core.exceptions import ValidationError

    cluster = Cluster(name="alps", sync_mode="slurmrestd", slurmrestd_url=url)
    if valid:
        cluster.full_clean(exclude=["name"])
    else:
        with pytest.raises(ValidationError):
            cluster.full_clean(exclude=["name"])
