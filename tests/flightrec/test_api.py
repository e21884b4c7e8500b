"""The Flight Recorder endpoint: dumps PyTorch wrote posted by the job's token (one rank, or the folder as a tar.gz),
the analysis placed on the job's node, GPU and NIC with its Megatron group; who may post; clear 4xx for a pickle
that would run code, a truncated dump and a dump of another job (acceptance 2 of issue 36)."""
import io
import json
import os
import pickle
import tarfile
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.flightrec import services
from apps.flightrec.models import FlightAnalysis, FlightDump
from apps.jobs.models import Cluster, Job, node_search_text
from apps.jobs.services import job_token_issue

from .conftest import rank_files
from .test_dumps import Payload

URL = "/api/v1/jobs/alps/1/flight-recorder/"


@pytest.fixture
def job(db, settings, tmp_path):
    settings.FLIGHTREC_DIR = str(tmp_path / "flightrec")
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=2, user_name="mallory", account="a-other", state="RUNNING",
                       node_list=["nid001001"], node_count=1, gpus=4, start_time=timezone.now() - timedelta(hours=1))
    nodes = ["nid001000"]
    return Job.objects.create(cluster=cluster, job_id=1, user_name="alice", account="a-llm01", state="RUNNING",
                              node_list=nodes, node_count=1, tasks=4, gpus=4, node_search=node_search_text(nodes),
                              start_time=timezone.now() - timedelta(hours=1))


@pytest.fixture
def token(job):
    return job_token_issue(job, created_by="alice")


def post(client, token, data: bytes, query: str):
    return client.generic("POST", URL + query, data, content_type="application/octet-stream",
                          HTTP_AUTHORIZATION=f"JobToken {token}")


def test_the_jobs_token_posts_every_rank_and_the_analysis_names_the_culprit_on_its_gpu(client, job, token, torch_dumps):
    from apps.ranks.services import layout_set

    call_command("import_topology", "--preset", "alps", stdout=open(os.devnull, "w"))  # only here: places the culprit
    layout_set(job, {"tp": 2, "pp": 1}, source="api", submitted_by="alice")
    for rank, data in rank_files(torch_dumps, "skip", "pickle").items():
        response = post(client, token, data, f"?rank={rank}")
        assert response.status_code == 201, response.content
        assert response.json()["stored"] == [rank]
    assert FlightDump.objects.filter(job=job).count() == 4
    assert FlightAnalysis.objects.get(job=job).status == "pending"
    from apps.flightrec.tasks import analyse_job

    assert analyse_job.apply(args=(job.pk,)).get()["status"] == "hang"
    body = client.get(URL, HTTP_AUTHORIZATION=f"JobToken {token}").json()
    assert body["status"] == "hang" and body["ranks_dumped"] == 4 and body["ranks_expected"] == 4
    assert body["missing_dumps"] == []
    assert body["process_group"]["megatron"]["label"] == "data-parallel group 1"
    assert body["collective"]["seq_id"] == 2 and body["collective"]["op"] == "all_reduce"
    culprit = body["culprits"][0]
    assert culprit["rank"] == 3 and culprit["host"] == "nid001000" and culprit["gpu"] == 3 and culprit["nic"] == "hsn3"
    assert culprit["coords"]["dp"] == 1 and culprit["switch"] and culprit["group"] is not None
    assert body["headline"].startswith("nid001000 GPU 3 (PP stage 0, DP replica 1, TP rank 1): rank 3 never entered")
    assert "never entered all_reduce #2" in culprit["reason"]


def test_a_tar_of_the_dump_folder_is_stored_file_by_file(client, job, token, torch_dumps):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(torch_dumps / "dead", arcname="fr")
    response = post(client, token, buffer.getvalue(), "?format=tar")
    assert response.status_code == 201, response.content
    assert response.json()["stored"] == [0, 1]  # both formats of each rank: the later one replaces the first
    body = services.job_flight_analyse(job).body
    assert body["status"] == "hang" and body["missing_dumps"] == [2, 3]  # the job has 4 GPUs; the scenario 3 ranks


def test_a_pickle_that_would_run_code_is_a_400_and_never_runs(client, job, token, tmp_path):
    marker = tmp_path / "pwned"
    response = post(client, token, pickle.dumps({"version": "2.10", "entries": [Payload(marker)]}), "?rank=0")
    assert response.status_code == 400
    assert "refused: the dump asks for posix.system" in response.json()["detail"]
    assert not marker.exists() and not FlightDump.objects.exists()


def test_a_truncated_dump_is_a_400_that_says_so(client, job, token, torch_dumps):
    data = rank_files(torch_dumps, "size", "pickle")[0]
    response = post(client, token, data[: len(data) - 40], "?rank=0")
    assert response.status_code == 400 and "truncated" in response.json()["detail"]
    text = rank_files(torch_dumps, "size", "json")[0]
    response = post(client, token, text[:-30], "?rank=0")
    assert response.status_code == 400 and "truncated" in response.json()["detail"]


def test_a_dump_of_another_job_is_a_400_naming_why(client, job, token, torch_dumps):
    Job.objects.filter(pk=job.pk).update(state="COMPLETED", start_time=timezone.now() - timedelta(days=3),
                                         end_time=timezone.now() - timedelta(days=2))
    response = post(client, token, rank_files(torch_dumps, "size", "pickle")[0], "?rank=0")
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "belongs to another job" in detail and "job alps/1 ran from" in detail
    assert response.json()["errors"][0]["field"] == "entries.time_created_ns"


def test_a_dump_whose_default_group_has_another_size_is_another_jobs(client, job, token):
    from .test_dumps import dump, entry

    body = dump([entry(0, 1, created=int(timezone.now().timestamp() * 1e9))], ranks=str(list(range(8))))
    response = post(client, token, json.dumps(body).encode(), "?rank=0")
    assert response.status_code == 400 and "has 8 ranks but job alps/1 has 4" in response.json()["detail"]
    response = post(client, token, json.dumps(body).encode(), "?rank=9")
    assert response.status_code == 400 and "rank 9 is outside job alps/1's ranks 0..3" in response.json()["detail"]


def test_who_may_post_and_read(client, api_client, make_user, job, torch_dumps):
    data = rank_files(torch_dumps, "healthy", "pickle")[0]
    api_client.force_authenticate(make_user("bob", accounts=["a-llm01"]))  # a member of the account: may look
    response = api_client.generic("POST", URL + "?rank=0", data, content_type="application/octet-stream")
    assert response.status_code == 403
    api_client.force_authenticate(make_user("eve"))
    assert api_client.get(URL).status_code == 404
    other = job_token_issue(Job.objects.get(job_id=2), created_by="mallory")
    assert post(client, other, data, "?rank=0").status_code == 404
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    assert api_client.get(URL).status_code == 404  # no dumps yet: 404 saying how to collect them
    response = api_client.generic("POST", URL + "?rank=0", data, content_type="application/octet-stream")
    assert response.status_code == 201
    response = api_client.generic("POST", URL, data, content_type="application/octet-stream")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "rank"


def test_a_dump_over_the_limit_is_a_413(client, job, token, settings, torch_dumps):
    settings.FLIGHTREC_MAX_DUMP_BYTES = 100
    assert post(client, token, rank_files(torch_dumps, "size", "pickle")[0], "?rank=0").status_code == 413
