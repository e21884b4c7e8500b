"""Job events from prolog/epilog, job tokens and their expiry."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs.models import Job, JobStep, JobToken


@pytest.fixture
def service(api_client, make_user):
    from django.contrib.auth.models import Permission

    user = make_user("svc-slurm")
    user.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    api_client.force_authenticate(user)
    return api_client


START = {"cluster": "alps", "job_id": 123, "event": "start", "user": "u1", "account": "a-llm01", "name": "train",
         "nodes": "nid[000001-000004]", "time": "2026-11-21T10:00:00Z", "token": True}


def test_start_step_and_end_events_build_the_job(service):
    response = service.post("/api/v1/jobs/events/", START, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["state"] == "RUNNING" and body["url"].endswith("/jobs/alps/123/")
    assert body["job_token"].startswith("bvj_")
    job = Job.objects.get(cluster__name="alps", job_id=123)
    assert job.node_list == ["nid000001", "nid000002", "nid000003", "nid000004"] and job.node_count == 4
    service.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 123, "event": "step_start", "step_id": "0",
                                          "nodes": "nid[000001-000004]", "tasks": 16}, format="json")
    service.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 123, "event": "step_end", "step_id": "0",
                                          "state": "COMPLETED", "exit_code": 0}, format="json")
    service.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 123, "event": "end", "state": "FAILED",
                                          "exit_code": 3, "time": "2026-11-21T11:00:00Z"}, format="json")
    job.refresh_from_db()
    assert (job.state, job.exit_code, job.end_time.isoformat()) == ("FAILED", 3, "2026-11-21T11:00:00+00:00")
    step = JobStep.objects.get(job=job, step_id="0")
    assert (step.state, step.tasks, step.exit_code) == ("COMPLETED", 16, 0)


def test_repeated_events_change_nothing(service):
    service.post("/api/v1/jobs/events/", START, format="json")
    modified = Job.objects.get(job_id=123).modified
    service.post("/api/v1/jobs/events/", dict(START, token=False), format="json")
    assert Job.objects.filter(job_id=123).count() == 1
    assert Job.objects.get(job_id=123).node_count == 4
    assert Job.objects.get(job_id=123).modified >= modified


@pytest.mark.parametrize("change, field", [
    ({"nodes": "nid[0001-"}, "nodes"),
    ({"event": "explode"}, "event"),
    ({"user": ""}, "user"),
    ({"user": "bob; rm -rf /"}, "user"),
    ({"job_id": -1}, "job_id"),
    ({"job_id": 10**30}, "job_id"),  # issue 16 item 6: was a 500 (integer overflow at save)
    ({"job_id": 2**63}, "job_id"),
    ({"tasks": 2**31}, "tasks"),
    ({"gpus": 10**20}, "gpus"),
    ({"cluster": "al ps"}, "cluster"),
])
def test_bad_events_are_refused_with_the_field(service, change, field):
    response = service.post("/api/v1/jobs/events/", dict(START, **change), format="json")
    assert response.status_code == 400
    assert field in {error["field"] for error in response.json()["errors"]}
    assert not Job.objects.exists()


def test_job_token_works_for_its_job_and_expires_after_the_grace_period(service, api_client, settings):
    key = service.post("/api/v1/jobs/events/", START, format="json").json()["job_token"]
    stored = JobToken.objects.get()
    assert stored.key_hash != key and key.endswith(stored.hint)  # only a hash is kept
    from rest_framework.test import APIClient

    inside = APIClient()
    inside.credentials(HTTP_AUTHORIZATION=f"JobToken {key}")
    assert inside.get("/api/v1/jobs/alps/123/").status_code == 200
    ended = timezone.now() - timedelta(hours=settings.JOB_TOKEN_GRACE_HOURS + 1)
    service.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 123, "event": "end", "state": "COMPLETED",
                                          "time": ended.isoformat()}, format="json")
    response = inside.get("/api/v1/jobs/alps/123/")
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


def test_owner_issues_a_token_that_only_reaches_their_job(api_client, make_user):
    from apps.jobs.models import Cluster

    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=7, user_name="alice", state="RUNNING")
    Job.objects.create(cluster=cluster, job_id=8, user_name="alice", state="RUNNING")
    api_client.force_authenticate(make_user("alice"))
    body = api_client.post("/api/v1/jobs/alps/7/token/").json()
    assert body["header"] == f"Authorization: JobToken {body['job_token']}"
    from rest_framework.test import APIClient

    inside = APIClient()
    inside.credentials(HTTP_AUTHORIZATION=body["header"].split(": ", 1)[1])
    assert inside.get("/api/v1/jobs/alps/7/").status_code == 200
    assert inside.get("/api/v1/jobs/alps/8/").status_code == 404  # the owner's other job
    assert [job["job_id"] for job in inside.get("/api/v1/jobs/").json()["results"]] == [7]
    assert inside.get("/api/v1/me/").status_code == 401  # not a general credential
