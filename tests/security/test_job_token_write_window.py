"""Every write a job token can make is bounded in time, and far-apart times cannot blow up a later read (issue 33,
finding 2, acceptance 3).

The endpoints come from the OpenAPI schema: every operation that changes something (POST, PUT, PATCH, DELETE) and
lists the job-token credential (``jobTokenAuth``, i.e. ``JobTokenAuthentication`` among the view's classes), once
per value of its ``format`` query parameter. :data:`WRITES` holds a payload builder for each; a new endpoint or
format that is not in it fails :func:`test_every_job_token_write_is_in_the_table` until someone says how its times
are bounded. Each builder sends the same payload inside the job's write window (accepted) and dated 2000 and 2100
(refused with a 400 naming the field and the window, or stored without those times and a message saying so).
"""
from __future__ import annotations

import io
import json
import tracemalloc
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

import pandas as pd
import pytest
from rest_framework.test import APIClient

NODES = ["nid000010", "nid000011"]
FAR = (datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))
WRITE_METHODS = ("post", "put", "patch", "delete")
MEMORY_LIMIT = 200 * 2**20


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- payload builders: (job, moment) -> the request's path suffix (query), body and content type ----------------

def _samples(job, moment):
    body = [{"ts": _iso(moment), "host": NODES[0], "gpu": 0, "field": 1002, "value": 0.5}]
    return "", body, "json"


DMON = "#Entity   SMACT        POWER\nID                     W\nGPU 0     0.5          100\nGPU 1     0.6          110\n"


def _dmon(job, moment):
    return f"&host={NODES[0]}&start={_iso(moment)}&interval=1", DMON, "text/plain"


def _exporter(job, moment):
    text = f'DCGM_FI_PROF_SM_ACTIVE{{gpu="0",Hostname="{NODES[0]}"}} 0.5\n'
    return f"&ts={_iso(moment)}", text, "text/plain"


def _lustre(job, moment):
    text = (f"obdfilter.s-OST0000.job_stats=\njob_stats:\n- job_id: alps.{job.job_id}\n"
            "  write_bytes: { samples: 3, unit: bytes, min: 4096, max: 4096, sum: 12288 }\n")
    return f"&ts={int(moment.timestamp())}", text, "text/plain"


def _metric_rows(job, moment):
    return "", {"rows": [{"ts": int(moment.timestamp()), "step": 10, "loss": 2.5}]}, "json"


def _megatron_log(job, moment):
    line = (f"[{moment:%Y-%m-%d %H:%M:%S}] iteration       10/    1000 | consumed samples:          160 | elapsed time per "
            "iteration (ms): 500.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 5.000000E+00 |\n")
    return "", line, "text/plain"


def _tensorboard(job, moment):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    out = io.BytesIO()
    writer = RecordWriter(out)
    wall = moment.timestamp()
    writer.write(event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString())
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="lm loss", simple_value=2.5)])
    writer.write(event_pb2.Event(wall_time=wall, step=10, summary=summary).SerializeToString())
    return "", out.getvalue(), "application/octet-stream"


def _vetting_document(job, moment):
    return {"source": "health", "started": _iso(moment), "job_id": job.job_id, "cluster": "alps",
            "results": [{"hostname": NODES[0], "check": "check_gpu_xid", "exit_code": 0, "message": "ok"}]}


def _vetting_run(job, moment):
    return "", _vetting_document(job, moment), "json"


def _vetting_import_json(job, moment):
    return "", json.dumps(_vetting_document(job, moment)), "text/plain"


def _flight_dump_body(job, moment) -> dict:
    created = int(moment.timestamp() * 1e9)
    entry = {"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 1, "p2p_seq_id": 0,
             "op_id": 1, "profiling_name": "nccl:all_reduce", "time_created_ns": created, "input_sizes": [[4]],
             "input_dtypes": ["Float"], "output_sizes": [[4]], "output_dtypes": ["Float"], "state": "completed",
             "time_discovered_started_ns": created, "time_discovered_completed_ns": created, "frames": [],
             "is_p2p": False, "retired": True, "timeout_ms": 600000}
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(8)))}},
            "pg_status": {}, "entries": [entry]}


def _flight_dump(job, moment):
    return "&rank=0", json.dumps(_flight_dump_body(job, moment)).encode(), "application/octet-stream"


def _flight_tar(job, moment):
    import tarfile

    data = json.dumps(_flight_dump_body(job, moment)).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        member = tarfile.TarInfo("fr/nccl_trace_rank_0.json")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return "", out.getvalue(), "application/gzip"


@dataclass(frozen=True)
class Case:
    """How one write is bounded: ``refused`` (400 naming ``field`` and the window), ``clipped`` (2xx, nothing dated
    outside stored, the window named in the answer), ``timeless`` (the payload carries no time: ``why``) or
    ``not_for_tokens`` (a job token is refused: 403)."""

    kind: str
    build: Callable | None = None
    field: str | None = None
    why: str = ""
    marks: tuple = ()


TIMELESS_VETTING = "vetnode and dcgmi diag output carry no time: the run is dated when it is stored"

#: (METHOD, path as the schema writes it, format or None) -> how its times are bounded.
WRITES: dict[tuple[str, str, str | None], Case] = {
    ("POST", "/api/v1/telemetry/samples/", None): Case("refused", _samples, "ts"),
    ("POST", "/api/v1/telemetry/import/", "dcgmi-dmon"): Case("refused", _dmon, "start"),
    ("POST", "/api/v1/telemetry/import/", "dcgm-exporter"): Case("refused", _exporter, "ts"),
    ("POST", "/api/v1/telemetry/import/", "lustre-jobstats"): Case("refused", _lustre, "ts"),
    ("POST", "/api/v1/telemetry/import/", "fabric-manager"): Case("not_for_tokens", why="switch ports are every job's"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/metrics/", "json"): Case("refused", _metric_rows, "rows[0].ts"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/metrics/", "megatron-log"): Case("clipped", _megatron_log),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/metrics/", "tensorboard"): Case("clipped", _tensorboard),
    ("PUT", "/api/v1/jobs/{cluster}/{job_id}/model/", None): Case("timeless", why="the model's shape"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/report/", None): Case("timeless", why="asks for a build"),
    ("PUT", "/api/v1/jobs/{cluster}/{job_id}/layout/", None): Case("timeless", why="parallel sizes and a rank map"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/layout/log/", None): Case("timeless", why="the layout read from a log"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/flight-recorder/", "auto"): Case("refused", _flight_dump, "entries.time_created_ns"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/flight-recorder/", "json"): Case("refused", _flight_dump, "entries.time_created_ns"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/flight-recorder/", "pickle"): Case(
        "refused", lambda job, moment: ("&rank=0", __import__("pickle").dumps(_flight_dump_body(job, moment), protocol=4),
                                        "application/octet-stream"), "entries.time_created_ns"),
    ("POST", "/api/v1/jobs/{cluster}/{job_id}/flight-recorder/", "tar"): Case("refused", _flight_tar, "entries.time_created_ns"),
    ("POST", "/api/v1/vetting/runs/", None): Case("refused", _vetting_run, "started"),
    ("POST", "/api/v1/vetting/import/", "json"): Case("refused", _vetting_import_json, "started"),
    ("POST", "/api/v1/vetting/import/", "auto"): Case("refused", _vetting_import_json, "started"),
    ("POST", "/api/v1/vetting/import/", "vetnode"): Case("timeless", why=TIMELESS_VETTING),
    ("POST", "/api/v1/vetting/import/", "vetnode-legacy"): Case("timeless", why=TIMELESS_VETTING),
    ("POST", "/api/v1/vetting/import/", "dcgm-diag"): Case("timeless", why=TIMELESS_VETTING),
}


def job_token_writes() -> set[tuple[str, str, str | None]]:
    """Every (METHOD, path, format) a job token may call to change something, read from the OpenAPI schema."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = set()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method not in WRITE_METHODS or not any("jobTokenAuth" in way for way in operation.get("security", [])):
                continue
            formats = [p for p in operation.get("parameters", []) if p["name"] == "format" and p["in"] == "query"]
            for kind in (formats[0]["schema"].get("enum") if formats else None) or [None]:
                found.add((method.upper(), path, kind))
    return found


@pytest.mark.django_db
def test_every_job_token_write_is_in_the_table():
    found = job_token_writes()
    assert ("POST", "/api/v1/telemetry/import/", "lustre-jobstats") in found  # the schema is read as meant
    missing, gone = found - set(WRITES), set(WRITES) - found
    assert not missing, f"job-token writes without a payload builder in WRITES (say how their times are bounded): {missing}"
    assert not gone, f"WRITES names endpoints a job token can no longer write: {gone}"


# -- the world: a job that started an hour ago and runs, with its token --------------------------------------------

@pytest.fixture
def world(db, store):
    from apps.jobs.models import Cluster, Job, JobToken

    now = datetime.now(timezone.utc)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4242, user_name="alice",
                             account="a-llm01", state="RUNNING", submit_time=now - timedelta(hours=2),
                             start_time=now - timedelta(hours=1), node_list=NODES, node_count=2, gpus=8)
    _, key = JobToken.issue(job)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"JobToken {key}")
    return job, client, now - timedelta(minutes=30)


def _send(client, method: str, path: str, kind: str | None, build, job, moment):
    query, body, content_type = build(job, moment)
    url = path.format(cluster="alps", job_id=job.job_id) + (f"?format={kind}" if kind else "?") + query
    url = url.replace("?&", "?").rstrip("?")
    if content_type == "json":
        return client.generic(method, url, json.dumps(body), content_type="application/json")
    return client.generic(method, url, body, content_type=content_type)


def _stored_far(job, store) -> int:
    """Rows of the job (samples of its nodes, its series) dated more than a day from now, from 1999 to 2101: what a
    refused or clipped write must not leave behind."""
    from apps.telemetry.backends.base import Query

    span = dict(start=FAR[0] - timedelta(days=1), end=FAR[1] + timedelta(days=1))
    now = pd.Timestamp(datetime.now(timezone.utc))
    times = [store.read(Query(cluster="alps", hosts=tuple(NODES), **span))["ts"],
             store.read_job_series("alps", job.job_id, **span)["ts"]]
    return sum(int(((ts - now).abs() > pd.Timedelta(days=1)).sum()) for ts in times)


@pytest.mark.parametrize("method, path, kind", [
    pytest.param(*key, marks=case.marks, id=f"{key[0]} {key[1]} {key[2] or ''}".strip())
    for key, case in WRITES.items() if case.kind != "timeless"])
def test_a_time_outside_the_job_s_window_is_refused_or_dropped_saying_so(world, store, method, path, kind):
    job, client, inside = world
    case = WRITES[(method, path, kind)]
    if case.kind == "not_for_tokens":
        response = _send(client, method, path, kind, _lustre, job, inside)
        assert response.status_code == 403, response.content
        return
    good = _send(client, method, path, kind, case.build, job, inside)
    assert good.status_code in (200, 201), good.content  # inside the window: stored
    for moment in FAR:
        response = _send(client, method, path, kind, case.build, job, moment)
        text = response.content.decode()
        assert "write window" in text, text
        if case.kind == "refused":
            assert response.status_code == 400, text
            body = response.json()
            fields = {error.get("field") for error in body.get("errors", [])}
            assert case.field in fields or body["detail"].startswith(f"{case.field}:"), body
        else:
            assert response.status_code in (200, 201), text
            assert response.json()["rows"] == 0, text
    assert _stored_far(job, store) == 0


# -- memory: far-apart readings that got in (a service token may import for any job) cannot blow up a read ---------

def _peak_of(call) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        response = call()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert response.status_code == 200, response.content
    return peak


def test_far_apart_times_cannot_grow_a_later_read_by_more_than_200_mb(world, store):
    from apps.telemetry.backends.base import APP_COLUMNS, canonical_app

    job, client, inside = world
    names = ["lustre/s-OST0000/write_bytes", "lustre/s-OST0000/write_bytes", "tokens_per_s", "tokens_per_s"]
    frame = pd.DataFrame({"ts": pd.to_datetime([*FAR, *FAR], utc=True), "cluster": "alps", "job_id": job.job_id,
                          "name": names, "step": pd.array([None] * 4, dtype="Int64"), "value": [0.0, 1e12, 1e5, 1e5]},
                         columns=APP_COLUMNS)
    store.write_job_series(canonical_app(frame))  # readings dated 2000 and 2100, as if they had got in
    base = f"/api/v1/jobs/alps/{job.job_id}"
    reads = {
        "efficiency": lambda: client.get(f"{base}/efficiency/"),
        "storage": lambda: client.get(f"{base}/storage/"),
        "storage, step=10": lambda: client.get(f"{base}/storage/?step=10"),
        "series, step=1": lambda: client.get("/api/v1/telemetry/series/", {"job": f"alps/{job.job_id}", "step": 1}),
        "metrics": lambda: client.get(f"{base}/metrics/"),
    }
    peaks = {name: _peak_of(read) for name, read in reads.items()}
    assert max(peaks.values()) < MEMORY_LIMIT, {name: f"{peak / 2**20:.0f} MB" for name, peak in peaks.items()}
    storage = client.get(f"{base}/storage/?step=10").json()
    assert storage["step"] > 10 and "at most 20,000 buckets" in storage["step_note"]
    assert len(storage["series"]["time"]) <= 20_000
