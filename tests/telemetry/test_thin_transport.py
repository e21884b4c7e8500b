"""Thin transport: the ingest write is one service (services.ingest_samples) under a job token's one scope
(ingest.Scope, from Job.run_window) for posted samples and imported text alike; series reads go through
selectors and never leave the job's nodes; bad series parameters are 400s naming the parameter."""
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from apps.telemetry import ingest
from apps.telemetry.backends.base import Query

NOW = datetime.now(timezone.utc).replace(microsecond=0)
DMON = "#Entity   SMACT        POWER\nID                     W\nGPU 0     0.5          100\nGPU 1     0.6          110\n" * 3


@pytest.fixture
def job(db):
    from apps.jobs.models import Cluster, Job

    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=77, user_name="alice", account="a-llm01",
                              state="RUNNING", submit_time=NOW - timedelta(hours=2), start_time=NOW - timedelta(hours=1),
                              node_list=["nid000010", "nid000011"])


def test_a_job_tokens_scope_is_its_cluster_nodes_and_run_window_with_slack(job):
    from django.conf import settings

    from apps.telemetry.services import ingest_scope

    assert ingest_scope(None) == ingest.Scope()
    scope = ingest_scope(job)
    assert scope.cluster == "alps" and scope.hosts == {"nid000010", "nid000011"}
    margin = timedelta(minutes=settings.JOB_WRITE_MARGIN_MINUTES)
    assert scope.window[0] == job.start_time - margin and scope.window[1] > NOW
    assert "the job's run time until now" in scope.window_words


def test_posted_and_imported_samples_meet_the_same_scope():
    scope = ingest.Scope(cluster="alps", hosts=frozenset({"n1"}), window=(NOW - timedelta(hours=1), NOW))
    moments = [NOW - timedelta(minutes=30), NOW - timedelta(hours=2), NOW - timedelta(minutes=30)]
    hosts = ["n1", "n1", "n2"]
    samples = [(None, {"ts": t.isoformat(), "host": h, "gpu": 0, "field": 1002, "value": 0.5, "cluster": "other"})
               for t, h in zip(moments, hosts)]
    parsed = ingest.parse_batch(samples, now=NOW, scope=scope)
    assert [(e.row, e.field) for e in parsed.errors] == [(1, "ts"), (2, "host")]
    assert parsed.frame["cluster"].tolist() == ["alps"]
    table = pd.DataFrame({"ts": pd.to_datetime(moments, utc=True), "host": hosts})
    kept, message = scope.restrict(table)
    assert kept["host"].tolist() == ["n1"] and kept["ts"].tolist() == parsed.frame["ts"].tolist()
    assert message.startswith("2 samples are outside the job's nodes or its write window")
    assert scope.restrict(kept) == (kept, "")
    assert ingest.Scope().restrict(table)[0] is table


def test_ingest_samples_stores_records_and_reaches_the_running_job(job, store):
    from apps.telemetry.models import IngestBatch, JobTelemetry
    from apps.telemetry.selectors import forget_host_maps
    from apps.telemetry.services import ingest_samples

    forget_host_maps()
    rows = [(None, {"ts": (NOW - timedelta(minutes=m)).isoformat(), "host": "nid000010", "gpu": 0, "field": 1002,
                    "value": 0.5}) for m in (1, 2)]
    parsed = ingest.parse_batch(rows, now=NOW, default_cluster="alps")
    batch = ingest_samples(parsed.frame, [{"message": "x"}], source="samples", sender="tester", nbytes=10, rows=3)
    assert IngestBatch.objects.get(pk=batch.pk).accepted == 2 and batch.rejected == 1 and batch.first_errors == [{"message": "x"}]
    assert len(store.read(Query(start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1)))) == 2
    assert set(JobTelemetry.objects.get(job=job).sources) == {"samples"}
    forget_host_maps()


def test_an_import_with_a_job_token_keeps_only_the_jobs_nodes(api_client, job, store):
    from apps.jobs.models import JobToken

    _, key = JobToken.issue(job)
    start = (NOW - timedelta(minutes=30)).isoformat().replace("+00:00", "Z")

    def imp(host):
        return api_client.generic("POST", f"/api/v1/telemetry/import/?format=dcgmi-dmon&host={host}&start={start}",
                                  DMON, content_type="text/plain", HTTP_AUTHORIZATION=f"JobToken {key}")

    mine = imp("nid000010")
    assert mine.status_code == 200, mine.content
    assert mine.json()["accepted"] == 12 and mine.json()["rejected"] == 0
    other = imp("nid000099")
    assert other.status_code == 400 and "outside the job's nodes or its write window" in other.json()["detail"]
    data = store.read(Query(start=NOW - timedelta(hours=1), end=NOW + timedelta(minutes=1)))
    assert set(data["host"]) == {"nid000010"} and set(data["cluster"]) == {"alps"}


def test_a_jobs_series_never_reads_another_node(api_client, job, store, make_user):
    for host in ("nid000010", "nid000099"):
        store.write(ingest.parse_batch([(None, {"ts": (NOW - timedelta(minutes=5)).isoformat(), "host": host, "gpu": 0,
                                                "field": 1002, "value": 0.5})], now=NOW, default_cluster="alps").frame)
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    own = api_client.get("/api/v1/telemetry/series/", {"job": "alps/77"}).json()
    assert {row[own["columns"].index("host")] for row in own["rows"]} == {"nid000010"}
    asked = api_client.get("/api/v1/telemetry/series/", {"job": "alps/77", "host": "nid000099"})
    assert asked.status_code == 200 and asked.json()["rows"] == []  # another job's node: nothing, not the whole cluster


@pytest.mark.parametrize("params, field", [
    ({"job": "alps/77", "start": (NOW - timedelta(minutes=5)).isoformat(), "end": (NOW - timedelta(minutes=10)).isoformat()}, "start"),
    ({"job": "alps/77", "step": "0"}, "step"),
    ({"job": "alps/77", "stats": "mean,nope", "step": "60"}, "stats"),
    ({"job": "alps/77", "end": "tomorrow"}, "end"),
    ({"host": "nid000010"}, "job"),  # only staff may read hosts directly
])
def test_a_bad_series_parameter_is_a_400_naming_it(api_client, job, store, make_user, params, field):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    response = api_client.get("/api/v1/telemetry/series/", params)
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_the_series_parameters_are_documented():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    names = {p["name"] for p in schema["paths"]["/api/v1/telemetry/series/"]["get"]["parameters"]}
    assert {"job", "cluster", "host", "gpu", "field", "start", "end", "step", "stats"} <= names
