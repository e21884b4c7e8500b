"""POST /api/v1/telemetry/samples/ and GET /api/v1/telemetry/series/: formats, per-row errors,
idempotence, limits and who may post or read what."""
import gzip
import json
from datetime import datetime, timedelta, timezone

import pytest
from django.utils import timezone as django_tz
from rest_framework.authtoken.models import Token

from apps.telemetry.backends.base import Query
from apps.telemetry.models import IngestBatch

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def sample(host="nid000001", gpu=0, field=1002, value=0.5, seconds_ago=60, **extra):
    return {"ts": (NOW - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z"), "host": host, "gpu": gpu,
            "field": field, "value": value, **extra}


def post(api_client, key, body, *, content_type="application/json", encoding=None, keyword="Token", query="?cluster=alps"):
    headers = {"HTTP_AUTHORIZATION": f"{keyword} {key}"} if key else {}
    if encoding:
        headers["HTTP_CONTENT_ENCODING"] = encoding
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return api_client.generic("POST", f"/api/v1/telemetry/samples/{query}", data, content_type=content_type, **headers)


def stored(store):
    return store.read(Query(start=NOW - timedelta(days=2), end=NOW + timedelta(days=1)))


def test_json_batch_is_stored_and_resending_it_changes_nothing(api_client, service, store):
    batch = [sample(gpu=g, field=f, value=g / 10 + 0.01) for g in range(4) for f in (1002, "DCGM_FI_DEV_POWER_USAGE")]
    first = post(api_client, service, batch)
    assert first.status_code == 200 and first.json()["accepted"] == 8 and first.json()["rejected"] == 0
    again = post(api_client, service, {"samples": batch})
    assert again.status_code == 200
    data = stored(store)
    assert len(data) == 8 and sorted(data["field"].unique()) == [155, 1002]
    assert data[(data.gpu == 3) & (data.field == 155)]["value"].tolist() == [0.31]
    assert IngestBatch.objects.filter(sender="collector").count() == 2


def test_gzipped_ndjson_with_bad_rows_keeps_the_good_ones_and_names_each_bad_one(api_client, service, store):
    lines = [
        json.dumps(sample()),                                      # 1 good
        json.dumps(sample(field="DCGM_FI_PROF_NOT_A_FIELD")),      # 2 unknown field
        json.dumps(sample(gpu=1, value="high")),                   # 3 not a number
        "{not json",                                                # 4 broken line
        json.dumps(sample(gpu=2, seconds_ago=3 * 365 * 86400)),    # 5 too old
        json.dumps(sample(host="nid 1")),                          # 6 bad host
        "",
        json.dumps(sample(gpu=99)),                                # 8 bad gpu
        json.dumps(sample(gpu=3, field="SMACT", value=0.9)),       # 9 good (dmon tag)
    ]
    body = gzip.compress("\n".join(lines).encode())
    response = post(api_client, service, body, content_type="application/x-ndjson", encoding="gzip")
    assert response.status_code == 200, response.content
    report = response.json()
    assert (report["accepted"], report["rejected"]) == (2, 6)
    by_line = {error["line"]: error for error in report["errors"]}
    assert set(by_line) == {2, 3, 4, 5, 6, 8}
    assert by_line[2]["field"] == "field" and "unknown DCGM field" in by_line[2]["message"]
    assert by_line[3]["field"] == "value" and by_line[5]["field"] == "ts" and by_line[6]["field"] == "host"
    assert by_line[8]["field"] == "gpu" and "not JSON" in by_line[4]["message"]
    assert sorted(stored(store)["gpu"].tolist()) == [0, 3]


def test_a_batch_with_no_good_row_is_a_400_in_the_common_format(api_client, service, store):
    response = post(api_client, service, [sample(value=None), sample(field=99999)])
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("none of the 2 samples was accepted") and len(body["errors"]) == 2
    assert stored(store).empty


@pytest.mark.parametrize("body, message", [
    (b"[1, 2", "not JSON"), (b'{"samples": 3}', "must be a JSON array"), (b"\xff\xfe", "not UTF-8"),
])
def test_unreadable_bodies_say_why(api_client, service, store, body, message):
    response = post(api_client, service, body)
    assert response.status_code == 400 and message in response.json()["detail"]


def test_size_limits_are_enforced_before_anything_is_stored(api_client, service, store, settings):
    settings.TELEMETRY_MAX_BODY_BYTES = 2_000
    big = [sample(gpu=g % 4, seconds_ago=i) for i, g in enumerate(range(200))]
    response = post(api_client, service, big)
    assert response.status_code == 413 and "at most 2,000" in response.json()["detail"]
    settings.TELEMETRY_MAX_BODY_BYTES = 10_000_000
    settings.TELEMETRY_MAX_UNPACKED_BYTES = 50_000
    bomb = gzip.compress(b"[" + b" " * 200_000 + b"]")
    response = post(api_client, service, bomb, encoding="gzip")
    assert response.status_code == 413 and "unpacks to more than 50,000 bytes" in response.json()["detail"]
    settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST = 10
    response = post(api_client, service, big[:11])
    assert response.status_code == 413
    assert stored(store).empty


def test_who_may_post(api_client, make_user, store):
    from apps.jobs.models import Cluster, Job, JobToken

    plain = Token.objects.create(user=make_user("alice")).key
    assert post(api_client, plain, [sample()]).status_code == 403
    assert post(api_client, None, [sample()]).status_code in (401, 403)
    staff = Token.objects.create(user=make_user("sam", is_staff=True)).key
    assert post(api_client, staff, [sample()]).status_code == 200

    cluster = Cluster.objects.create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=77, user_name="alice", account="a", state="RUNNING",
                             submit_time=django_tz.now() - timedelta(hours=1), start_time=django_tz.now() - timedelta(minutes=30),
                             node_list=["nid000010", "nid000011"])
    _, key = JobToken.issue(job)
    response = post(api_client, key, [sample(host="nid000010", cluster="elsewhere"), sample(host="nid000099"),
                                      sample(host="nid000011", seconds_ago=5 * 3600)], keyword="JobToken", query="")
    assert response.status_code == 200
    report = response.json()
    assert report["accepted"] == 1
    assert {e["row"]: e["field"] for e in report["errors"]} == {1: "host", 2: "ts"}
    mine = stored(store)
    assert mine[mine.host == "nid000010"]["cluster"].tolist() == ["alps"]  # the job's cluster, whatever the row says


def test_series_for_a_job_is_for_those_who_may_see_it(api_client, make_user, service, store):
    from apps.jobs.models import Cluster, Job

    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=5, user_name="alice", account="a-llm01", state="RUNNING",
                       submit_time=NOW - timedelta(hours=2), start_time=NOW - timedelta(hours=1), node_list=["nid000001"])
    post(api_client, service, [sample(gpu=g, seconds_ago=s, value=g + s / 1000) for g in range(2) for s in (30, 90, 150)]
         + [sample(host="nid000002")])
    api_client.credentials()
    alice, bob, sam = make_user("alice"), make_user("bob"), make_user("sam", is_staff=True)
    api_client.force_authenticate(alice)
    response = api_client.get("/api/v1/telemetry/series/", {"job": "alps/5", "field": "SMACT", "gpu": "1"})
    assert response.status_code == 200
    body = response.json()
    rows = [dict(zip(body["columns"], row)) for row in body["rows"]]
    assert [(r["host"], r["gpu"], r["value"]) for r in rows] == [("nid000001", 1, 1.15), ("nid000001", 1, 1.09), ("nid000001", 1, 1.03)]
    step = api_client.get("/api/v1/telemetry/series/", {"job": "alps/5", "step": "3600"}).json()
    assert {row[body["columns"].index("host")] for row in step["rows"]} == {"nid000001"}  # never another job's node
    api_client.force_authenticate(bob)
    assert api_client.get("/api/v1/telemetry/series/", {"job": "alps/5"}).status_code == 404
    assert api_client.get("/api/v1/telemetry/series/", {"host": "nid000001"}).status_code == 400
    api_client.force_authenticate(sam)
    direct = api_client.get("/api/v1/telemetry/series/", {"host": "nid000002", "start": (NOW - timedelta(hours=1)).isoformat(),
                                                          "end": (NOW + timedelta(minutes=1)).isoformat()})
    assert direct.status_code == 200 and len(direct.json()["rows"]) == 1
    bad = api_client.get("/api/v1/telemetry/series/", {"host": "x", "field": "nope", "gpu": "a", "step": "0", "start": "yesterday"})
    assert bad.status_code == 400 and {e["field"] for e in bad.json()["errors"]} == {"field", "gpu", "step", "start"}


DATA = __import__("pathlib").Path(__file__).parent / "data" / "importers"


def test_dmon_import_stores_the_ticks_and_reports_bad_lines(api_client, service, store):
    text = (DATA / "dmon_malformed.txt").read_bytes()
    start = (NOW - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    response = api_client.generic("POST", f"/api/v1/telemetry/import/?format=dcgmi-dmon&host=nid000007&cluster=alps&start={start}",
                                  text, content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["accepted"] > 0 and report["rejected"] > 0
    assert all(isinstance(error["line"], int) for error in report["errors"])
    data = stored(store)
    assert set(data["host"]) == {"nid000007"} and len(data) == report["accepted"]
    again = api_client.generic("POST", f"/api/v1/telemetry/import/?format=dcgmi-dmon&host=nid000007&cluster=alps&start={start}",
                               text, content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
    assert again.json()["accepted"] == report["accepted"] and len(stored(store)) == len(data)  # idempotent


def test_exporter_import_and_its_input_errors(api_client, service, store):
    text = (DATA / "exporter_h100_Hostname.prom").read_bytes()
    ts = (NOW - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    url = f"/api/v1/telemetry/import/?format=dcgm-exporter&cluster=alps&ts={ts}"
    response = api_client.generic("POST", url, text, content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == len(stored(store)) > 0
    assert api_client.generic("POST", "/api/v1/telemetry/import/?format=nvidia-smi", text, content_type="text/plain",
                              HTTP_AUTHORIZATION=f"Token {service}").status_code == 400
    missing = api_client.generic("POST", "/api/v1/telemetry/import/?format=dcgmi-dmon&cluster=alps", b"#Entity GPUTL\n",
                                 content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
    assert missing.status_code == 400 and missing.json()["detail"]


# ---------------------------------------------------------------------------------------------
# Bounded input (issue 16, items 2 and 6)
# ---------------------------------------------------------------------------------------------
def deflate_bomb(unpacked: int, unit: bytes = b"0,", head: bytes = b"[", tail: bytes = b"0]") -> bytes:
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = unit * (1024 * 1024 // len(unit))
    parts, written = [compressor.compress(head)], len(head)
    while written + len(chunk) <= unpacked:
        parts.append(compressor.compress(chunk))
        written += len(chunk)
    parts.append(compressor.compress(tail))
    return b"".join(parts) + compressor.flush()


def test_a_gzip_bomb_is_refused_by_its_ratio_while_inflating(api_client, service, store, settings):
    bomb = deflate_bomb(80 * 1024 * 1024)  # 80 MiB of "0," in ~80 KB
    assert len(bomb) < 100_000
    response = post(api_client, service, bomb, encoding="gzip")
    assert response.status_code == 413
    assert "times its compressed size" in response.json()["detail"] and "compression bomb" in response.json()["detail"]
    # Without the ratio limit, the sample count refuses it, and for a body of no samples the size limit.
    settings.TELEMETRY_MAX_COMPRESSION_RATIO = 0  # off
    response = post(api_client, service, bomb, encoding="gzip")
    assert response.status_code == 413 and "more than 200,000 samples" in response.json()["detail"]
    response = post(api_client, service, deflate_bomb(80 * 1024 * 1024, unit=b"  ", tail=b"]"), encoding="gzip")
    assert response.status_code == 413 and "unpacks to more than 67,108,864 bytes" in response.json()["detail"]
    assert stored(store).empty


def test_sample_count_is_checked_while_reading(api_client, service, store, settings):
    settings.TELEMETRY_MAX_SAMPLES_PER_REQUEST = 1000
    for content_type, body in (("application/json", b"[" + b"0," * 5000 + b"0]"),
                               ("application/x-ndjson", b"{}\n" * 5001)):
        response = post(api_client, service, body, content_type=content_type)
        assert response.status_code == 413, response.content
        assert "more than 1,000 samples" in response.json()["detail"]


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"samples": [' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"]}"])
def test_json_nested_100k_deep_is_a_400(api_client, service, store, body):
    response = post(api_client, service, gzip.compress(body), encoding="gzip")
    assert response.status_code == 400 and "deeper than 32 levels" in response.json()["detail"]


def test_an_ndjson_line_nested_deep_is_that_lines_error(api_client, service, store):
    lines = [json.dumps(sample()), "[" * 100_000 + "]" * 100_000, json.dumps(sample(gpu=1))]
    response = post(api_client, service, "\n".join(lines).encode(), content_type="application/x-ndjson")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["accepted"] == 2 and [e["line"] for e in report["errors"]] == [2]
    assert "longer than" in report["errors"][0]["message"] or "deeper" in report["errors"][0]["message"]
    deep = "[" * 40 + "]" * 40
    response = post(api_client, service, "\n".join([json.dumps(sample()), deep]).encode(), content_type="application/x-ndjson")
    assert "deeper than 32 levels" in response.json()["errors"][0]["message"]


def test_a_value_out_of_float_range_is_a_row_error(api_client, service, store):
    big = 10**400
    body = ("[" + json.dumps(sample()) + "," + json.dumps(sample(gpu=1)).replace('"value": 0.5', f'"value": {big}')
            + "," + json.dumps(sample(gpu=2)).replace('"value": 0.5', '"value": 1e400') + "]").encode()
    response = post(api_client, service, body)
    assert response.status_code == 200, response.content
    errors = {e["row"]: e for e in response.json()["errors"]}
    assert response.json()["accepted"] == 1 and set(errors) == {1, 2}
    response = post(api_client, service, [sample(), sample(gpu=1, field="²")])
    assert response.status_code == 200 and [(e["row"], e["field"]) for e in response.json()["errors"]] == [(1, "field")]
    assert errors[1]["field"] == "value" and "too large" in errors[1]["message"]
    assert errors[2]["field"] == "value" and "finite" in errors[2]["message"]
    ndjson = "\n".join([json.dumps(sample()), json.dumps(sample(gpu=1)).replace('"value": 0.5', f'"value": {big}')])
    response = post(api_client, service, ndjson.encode(), content_type="application/x-ndjson")
    assert response.status_code == 200 and response.json()["errors"][0]["field"] == "value"


def test_a_batch_split_across_inflate_pieces_reads_the_same(api_client, service, store):
    batch = [sample(gpu=g % 8, field=1002, value=i / 1000, seconds_ago=i) for i, g in enumerate(range(3000))]
    body = gzip.compress(json.dumps({"samples": batch}, indent=1).encode())
    response = post(api_client, service, body, encoding="gzip")
    assert response.status_code == 200 and response.json()["accepted"] == 3000
    assert sorted(stored(store)["value"].tolist()) == sorted(s["value"] for s in batch)


@pytest.mark.parametrize("params, field", [
    ({"job": "alps/5", "gpu": "²"}, "gpu"),
    ({"job": "alps/²"}, "job"),
    ({"job": "alps/6760759693754570375168"}, "job"),
    ({"job": "alps/5", "step": "²"}, "step"),
    ({"job": "alps/5", "step": "6760759693754570375168"}, "step"),
    ({"job": "alps/5", "gpu": "6760759693754570375168"}, "gpu"),
    ({"job": "alps/5", "stats": "mean,p99", "step": "60"}, "stats"),
    ({"job": "alps/5", "start": "²"}, "start"),
    ({"job": "alps/5", "field": "²"}, "field"),
])
def test_series_parameters_are_checked_by_a_serializer(api_client, make_user, store, params, field):
    from apps.jobs.models import Cluster, Job

    Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=5, user_name="alice", account="a-llm01",
                       state="RUNNING", submit_time=NOW - timedelta(hours=2), start_time=NOW - timedelta(hours=1),
                       node_list=["nid000001"])
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    response = api_client.get("/api/v1/telemetry/series/", params)
    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_import_parameters_and_bombs(api_client, service, store):
    def imp(query, body, **headers):
        return api_client.generic("POST", f"/api/v1/telemetry/import/?{query}", body, content_type="text/plain",
                                  HTTP_AUTHORIZATION=f"Token {service}", **headers)

    text = (DATA / "exporter_h100_Hostname.prom").read_bytes()
    for query, field in (("format=dcgmi-dmon&cluster=alps&host=n1&interval=nan", "interval"),
                         ("format=dcgmi-dmon&cluster=alps&host=n1&interval=1e400", "interval"),
                         ("format=dcgmi-dmon&cluster=alps&host=n1&interval=²", "interval"),
                         ("format=%C2%B2&cluster=alps", "format")):
        response = imp(query, text)
        assert response.status_code == 400 and [e["field"] for e in response.json()["errors"]] == [field], response.content
    bomb = deflate_bomb(200 * 1024 * 1024, unit=b"#\n", head=b"", tail=b"")  # 200 MiB of comment lines
    response = imp("format=dcgm-exporter&cluster=alps", bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413 and "compression bomb" in response.json()["detail"]
    gz = gzip.compress(text)
    ts = (NOW - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    response = imp(f"format=dcgm-exporter&cluster=alps&ts={ts}", gz, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200 and response.json()["accepted"] > 0
