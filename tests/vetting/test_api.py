"""Posting and reading vetting runs: real uploads, who may do what, and nothing half-stored."""
from pathlib import Path

import pytest

from apps.vetting.models import NodeHealth, VettingResult, VettingRun

DATA = Path(__file__).parent / "data"


def upload(client, name, **params):
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return client.post(f"/api/v1/vetting/import/?{query}", data=(DATA / name).read_bytes(), content_type="text/plain")


def test_a_job_token_posts_vetnode_output_for_its_own_job(api_client, job):
    from apps.jobs.services import job_token_issue

    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {job_token_issue(job, 'test')}")
    response = upload(api_client, "vetnode-0.1.5-verbose-srun.txt", format="vetnode", protocol="alps-ml-vetting")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["hosts"] == ["nid001234", "nid001235"] and body["failed_hosts"] == ["nid001235"] and body["results"] == 24
    run = VettingRun.objects.get(pk=body["run"])
    assert (run.job, run.protocol_name, run.submitter, run.user_name, run.account) == (job, "alps-ml-vetting", "job alps/4242", "alice", "a-llm01")
    failed = VettingResult.objects.filter(run=run, outcome="fail")
    assert failed.count() == 4 and set(failed.values_list("host", flat=True)) == {"nid001235"}
    row = failed.first()
    assert row.group is not None and row.switch.startswith(f"{row.group}.") and row.job_id_number == 4242
    assert NodeHealth.objects.filter(host__in=["nid001234", "nid001235"]).count() == 2
    other = upload(api_client, "vetnode-0.1.5-plain.txt", job=999)
    assert other.status_code == 403 and "belongs to job 4242" in other.json()["detail"]


def test_malformed_uploads_are_refused_whole_with_their_lines(api_client, job, people):
    api_client.force_authenticate(people["alice"])
    text = (DATA / "vetnode-0.1.5-verbose-srun.txt").read_text().splitlines()
    text[13] = text[13].split(" metrics=")[0] + " metrics={'gpus': [{'id'"
    response = api_client.post("/api/v1/vetting/import/?job=4242", data="\n".join(text).encode(), content_type="text/plain")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["line"] == 14 and "cut off" in error["message"] and error["column"] > 100
    assert VettingRun.objects.count() == 0 and VettingResult.objects.count() == 0
    binary = api_client.post("/api/v1/vetting/import/?job=4242", data=b"\xff\xfe\x00", content_type="text/plain")
    assert binary.status_code == 400 and "not UTF-8" in binary.json()["detail"]
    assert api_client.post("/api/v1/vetting/import/?format=xml", data=b"x", content_type="text/plain").status_code == 400


def test_size_limit(api_client, job, people, settings):
    settings.VETTING_MAX_UPLOAD_BYTES = 1000
    api_client.force_authenticate(people["ops"])
    assert upload(api_client, "vetnode-0.1.5-verbose-srun.txt").status_code == 413
    assert VettingRun.objects.count() == 0


def test_dcgm_diagnostics_by_staff_without_a_job(api_client, job, people):
    api_client.force_authenticate(people["ops"])
    response = upload(api_client, "dcgmi-diag-4x-r2-gpu2-memory-fail.json", format="dcgm-diag", host="nid001240")
    assert response.status_code == 201 and response.json()["failed_hosts"] == ["nid001240"]
    critical = VettingResult.objects.get(outcome="critical")
    assert (critical.kind, critical.eval_name, critical.gpu, critical.host) == ("dcgm_diag", "memory", 2, "nid001240")
    assert critical.switch and critical.job_id_number is None
    missing_host = upload(api_client, "dcgmi-diag-4x-r2-gpu2-memory-fail.json", format="dcgm-diag")
    assert missing_host.status_code == 400 and "give the host" in missing_host.json()["detail"]


@pytest.mark.parametrize("who, job_param, code", [
    ("alice", "4242", 201),  # her job
    ("mia", "4242", 201),  # her project's job
    ("bob", "4242", 404),  # someone else's job: it does not exist for him
    ("bob", None, 403),  # no job: staff or service only
    ("ops", None, 201),
    (None, "4242", 401),
])
def test_who_may_post(api_client, job, people, who, job_param, code):
    if who:
        api_client.force_authenticate(people[who])
    params = {"job": job_param} if job_param else {}
    assert upload(api_client, "vetnode-0.1.5-plain.txt", **params).status_code == code


def test_the_run_document_endpoint(api_client, job, people):
    api_client.force_authenticate(people["ops"])
    document = {"source": "health", "started": "2026-11-23T10:00:00Z", "protocol": {"name": "nhc", "text": "# nhc.conf"},
                "results": [{"hostname": "nid001234", "check": "check_hw_mcelog", "exit_code": 1, "message": "corrected errors"},
                            {"hostname": "nid001235", "check": "check_gpu_xid", "exit_code": 2, "message": "Xid 79"}]}
    response = api_client.post("/api/v1/vetting/runs/", document, format="json")
    assert response.status_code == 201, response.content
    run = VettingRun.objects.get(pk=response.json()["run"])
    assert run.protocol_hash and len(run.protocol_hash) == 64 and run.source == "health"
    assert dict(VettingResult.objects.values_list("host", "outcome")) == {"nid001234": "warn", "nid001235": "critical"}
    bad = api_client.post("/api/v1/vetting/runs/", {**document, "results": [{"hostname": "nid001234", "check": "x", "exit_code": 7}]},
                          format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["message"].startswith("results.0.exit_code")


@pytest.mark.parametrize("field, when", [("started", "9999-12-31T23:59:59-23:59"), ("ended", "0001-01-01T00:00:00+23:59"),
                                         ("started", "9999-01-01T00:00:00Z"), ("ended", "1000-01-01T00:00:00")])
def test_a_run_document_time_outside_the_years_is_a_400_naming_it(api_client, job, people, field, when):
    """Issue 33, finding 3 (the class of 3d): a run's time whose UTC falls past year 9999 was a 500 (OverflowError
    when stored), and years no run has (1000, 9999) were stored; each is a 400 naming the field, nothing stored."""
    api_client.force_authenticate(people["ops"])
    document = {"source": "health", "started": "2026-11-23T10:00:00Z", field: when,
                "results": [{"hostname": "nid001234", "check": "check_gpu_xid", "exit_code": 2}]}
    response = api_client.post("/api/v1/vetting/runs/", document, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["message"] == f"{field}: {when!r} is not between 2000 and 2200"
    assert not VettingRun.objects.exists()


def test_a_job_token_run_must_be_dated_in_its_job_s_window_staff_history_need_not(api_client, job, people):
    """Issue 33, finding 2: a job token posted vetting runs with any started/ended. Its run's times must fall in the
    job's write window (a 400 naming the field and the window, nothing stored); staff still import old history."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.jobs.services import job_token_issue

    def document(**times):
        return {"source": "health", "job_id": job.job_id, "cluster": "alps", **times,
                "results": [{"hostname": "nid001234", "check": "check_gpu_xid", "exit_code": 0}]}

    now = timezone.now()
    inside = {"started": (now - timedelta(minutes=5)).isoformat(), "ended": now.isoformat()}
    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {job_token_issue(job, 'test')}")
    assert api_client.post("/api/v1/vetting/runs/", document(**inside), format="json").status_code == 201
    late = api_client.post("/api/v1/vetting/runs/", document(**{**inside, "ended": "2100-01-01T00:00:00Z"}), format="json")
    assert late.status_code == 400, late.content
    [error] = late.json()["errors"]
    assert error["field"] == "ended" and error["message"].startswith("ended: 2100-01-01T00:00:00Z is outside the job's write window ")
    assert "the job's run time until now" in error["message"] and VettingRun.objects.count() == 1
    api_client.credentials()
    api_client.force_authenticate(people["ops"])
    history = api_client.post("/api/v1/vetting/runs/", document(started="2020-01-01T00:00:00Z"), format="json")
    assert history.status_code == 201, history.content


def test_results_show_whose_job_only_to_those_who_may_see_it(api_client, job, people):
    from apps.jobs.services import job_token_issue

    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {job_token_issue(job, 'test')}")
    upload(api_client, "vetnode-0.1.5-plain.txt")
    api_client.credentials()
    seen = {}
    for who in ("alice", "mia", "bob", "ops"):
        api_client.force_authenticate(people[who])
        rows = api_client.get("/api/v1/vetting/results/?node=nid001235&outcome=bad").json()["results"]
        seen[who] = {(row["job_id"], row["user"]) for row in rows}
        assert len(rows) == 4  # everyone sees that nid001235 failed
    assert seen == {"alice": {(4242, "alice")}, "mia": {(4242, "alice")}, "bob": {(None, None)}, "ops": {(4242, "alice")}}
    api_client.force_authenticate(people["bob"])
    assert api_client.get("/api/v1/vetting/results/?user=alice").json()["results"] == []  # no fishing by user
    assert api_client.get("/api/v1/vetting/results/?job=4242").json()["results"] == []
    assert api_client.get("/api/v1/vetting/runs/?job=4242").json()["results"] == []
    api_client.force_authenticate(None)
    assert api_client.get("/api/v1/vetting/results/").status_code in (401, 403)


def test_protocol_validation_endpoint(api_client, people):
    api_client.force_authenticate(people["bob"])
    yaml_text = "name: x\nevals:\n  - name: gpu\n    type: vetnode.evaluations.gpu_eval.GPUEval\n    max_temp: 30\n    max_used_memory: 20\n"
    body = api_client.post("/api/v1/vetting/protocols/validate/", data=yaml_text.encode(), content_type="text/plain").json()
    assert body["valid"] is False
    assert body["findings"][0] | {} == {"severity": "error", "line": 6, "column": 22, "path": "evals[0].max_used_memory",
                                        "message": "max_used_memory is a fraction from 0 to 1, not 20", "hint": "for 20 % write 0.2"}


def test_a_job_token_reads_its_own_jobs_vetting_only(api_client, job, people):
    """Issue 16 item 5: a job token's reads answered 500 (its stand-in user is no account member)."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.jobs.models import Job
    from apps.jobs.services import job_token_issue

    other_job = Job.objects.create(cluster=job.cluster, job_id=777, user_name="bob", account="b-other", state="RUNNING",
                                   submit_time=job.start_time, start_time=job.start_time, node_list=["nid001240"], node_count=1)
    api_client.force_authenticate(people["ops"])
    theirs = upload(api_client, "vetnode-0.1.5-plain.txt", job=777).json()["run"]
    before = upload(api_client, "dcgmi-diag-4x-r2-gpu2-memory-fail.json", format="dcgm-diag", host="nid001234").json()["run"]
    VettingResult.objects.filter(run_id=before).update(time=job.start_time - timedelta(hours=2))  # before the job: not its data
    during = upload(api_client, "dcgmi-diag-4x-r2-gpu2-memory-fail.json", format="dcgm-diag", host="nid001235").json()["run"]
    VettingResult.objects.filter(run_id=during).update(time=timezone.now() - timedelta(minutes=5))  # on its node, during it
    api_client.force_authenticate(None)
    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {job_token_issue(job, 'test')}")
    mine = upload(api_client, "vetnode-0.1.5-plain.txt").json()["run"]

    runs = api_client.get("/api/v1/vetting/runs/")
    assert runs.status_code == 200, runs.content
    assert [(row["id"], row["job_id"], row["user"]) for row in runs.json()["results"]] == [(mine, 4242, "alice")]
    assert api_client.get(f"/api/v1/vetting/runs/{mine}/").status_code == 200
    for run in (theirs, before, during):
        assert api_client.get(f"/api/v1/vetting/runs/{run}/").status_code == 404
    assert api_client.get("/api/v1/vetting/runs/?job=777").json()["results"] == []
    results = api_client.get("/api/v1/vetting/results/?limit=1000")
    assert results.status_code == 200, results.content
    rows = results.json()["results"]
    assert {row["run"] for row in rows} == {mine, during}
    assert {row["host"] for row in rows} <= set(job.node_list)
    assert {(row["job_id"], row["user"]) for row in rows if row["run"] == mine} == {(4242, "alice")}
    assert api_client.get("/api/v1/vetting/results/?job=777").json()["results"] == []
    assert api_client.get("/api/v1/vetting/results/?user=bob").json()["results"] == []
    assert other_job.vetting_runs.count() == 1


@pytest.mark.parametrize("url, field", [
    ("/api/v1/vetting/runs/?job=abc", "job"),
    ("/api/v1/vetting/runs/?job=%C2%B2", "job"),
    ("/api/v1/vetting/runs/?job=6760759693754570375168", "job"),
    ("/api/v1/vetting/import/?job=%C2%B2", "job"),
    ("/api/v1/vetting/import/?job=-1", "job"),
    ("/api/v1/vetting/import/?format=xml", "format"),
    ("/api/v1/vetting/results/?run=%C2%B2", "run"),
    ("/api/v1/vetting/results/?run=-2.406607008875822e%2B209", "run"),  # schemathesis: an overflow in SQLite
    ("/api/v1/vetting/results/?job=9e20", "job"),
    ("/api/v1/vetting/results/?group=1.5", "group"),
    ("/api/v1/vetting/nodes/?state=sleepy", "state"),
    ("/api/v1/vetting/recommendations/?status=maybe", "status"),
])
def test_bad_query_parameters_are_400s_that_name_them(api_client, job, people, url, field):
    """Issue 16 item 6: '²'.isdigit() is True and int('²') raised; ?job=abc reached the database."""
    api_client.force_authenticate(people["ops"])
    if "/import/" in url:
        response = api_client.post(url, data=(DATA / "vetnode-0.1.5-plain.txt").read_bytes(), content_type="text/plain")
    else:
        response = api_client.get(url)
    assert response.status_code == 400, response.content
    assert [error["field"] for error in response.json()["errors"]] == [field]
    assert VettingRun.objects.count() == 0


def test_a_garbled_content_length_is_not_a_500(api_client, job, people):
    api_client.force_authenticate(people["ops"])
    response = api_client.post("/api/v1/vetting/protocols/validate/", data=b"name: x\n", content_type="text/plain", CONTENT_LENGTH="²")
    assert response.status_code < 500
    huge = api_client.post("/api/v1/vetting/protocols/validate/", data=b"name: x\n", content_type="text/plain", CONTENT_LENGTH="9" * 30)
    assert huge.status_code == 413


def test_the_node_and_recommendation_filters_filter(api_client, people):
    from django.utils import timezone

    from apps.vetting.choices import NodeHealthStateChoices

    NodeHealth.objects.create(host="nid000001", state=NodeHealthStateChoices.values[0], since=timezone.now())
    NodeHealth.objects.create(host="nid000002", state=NodeHealthStateChoices.values[1], since=timezone.now())
    api_client.force_authenticate(people["ops"])
    body = api_client.get(f"/api/v1/vetting/nodes/?state={NodeHealthStateChoices.values[1]}").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert [row["host"] for row in rows] == ["nid000002"]
    assert api_client.get("/api/v1/vetting/recommendations/?status=all").status_code == 200
