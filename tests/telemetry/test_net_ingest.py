"""NIC rows through POST /api/v1/telemetry/samples/ (mixed with GPU rows, checked row by row, scoped
for job tokens, stored with write_net) and the field registries at GET /api/v1/telemetry/fields/."""
import json
from datetime import datetime, timedelta, timezone

import pytest
from django.utils import timezone as django_tz

from apps.telemetry import ingest, netfields
from apps.telemetry.backends.base import Query
from apps.telemetry.models import IngestBatch

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def iso(seconds_ago):
    return (NOW - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")


def nic_row(host="nid000001", nic="hsn0", field="nic_retries", value=123, seconds_ago=60, **extra):
    return {"ts": iso(seconds_ago), "host": host, "nic": nic, "field": field, "value": value, **extra}


def gpu_row(host="nid000001", gpu=0, field=1002, value=0.5, seconds_ago=60):
    return {"ts": iso(seconds_ago), "host": host, "gpu": gpu, "field": field, "value": value}


def post(api_client, key, body, *, keyword="Token", query="?cluster=alps", content_type="application/json"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return api_client.generic("POST", f"/api/v1/telemetry/samples/{query}", data, content_type=content_type,
                              HTTP_AUTHORIZATION=f"{keyword} {key}")


def test_a_mixed_batch_stores_gpu_rows_as_samples_and_nic_rows_as_network_samples(api_client, service, store):
    batch = [gpu_row(gpu=1, value=0.25),
             nic_row(nic="hsn2", field="nic_retries", value=17),
             nic_row(nic="hsn2", field="pct_retry_srb_requests", value=18, seconds_ago=50),  # driver name
             nic_row(nic="hsn3", field="rh:nacks", value=4),                               # retry-handler name
             nic_row(nic="hsn0", field="nic_tx_packets", value=2**56 - 1)]                 # a counter at its top
    response = post(api_client, service, batch)
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 5 and response.json()["rejected"] == 0
    gpu = store.read(Query(start=NOW - timedelta(hours=1), end=NOW + timedelta(hours=1)))
    assert gpu["gpu"].tolist() == [1] and gpu["value"].tolist() == [0.25]
    net = store.read_net("alps")
    assert list(zip(net["nic"], net["field"], net["value"])) == [
        ("hsn0", "nic_tx_packets", float(2**56 - 1)), ("hsn2", "nic_retries", 17.0), ("hsn2", "nic_retries", 18.0),
        ("hsn3", "nic_nacks", 4.0)]
    assert net["ts"].tolist()[1] == pd_ts(60) and net["ts"].tolist()[2] == pd_ts(50)
    assert IngestBatch.objects.get().accepted == 5
    assert post(api_client, service, batch).status_code == 200  # re-sending replaces
    assert len(store.read_net("alps")) == 4


def pd_ts(seconds_ago):
    import pandas as pd

    return pd.Timestamp(NOW - timedelta(seconds=seconds_ago))


def test_bad_nic_rows_are_reported_by_row_and_key_and_the_good_ones_kept(api_client, service, store):
    batch = [nic_row(),                                                    # 0 good
             nic_row(field="nic_bogus"),                                   # 1 unknown field
             nic_row(field="hni_pkts_sent_by_tc_3"),                       # 2 one part of a summed field
             nic_row(nic="hsn 0"),                                         # 3 bad nic name
             nic_row(value="lots"),                                        # 4 not a number
             {**nic_row(), "gpu": 0},                                      # 5 both gpu and nic
             {k: v for k, v in nic_row().items() if k != "field"},         # 6 no field
             nic_row(field=7),                                             # 7 a number as network field
             nic_row(value=10**400)]                                     # 8 too large for a float
    response = post(api_client, service, batch)
    assert response.status_code == 200, response.content
    report = response.json()
    assert (report["accepted"], report["rejected"]) == (1, 8)
    by_row = {e["row"]: e for e in report["errors"]}
    assert {row: e["field"] for row, e in by_row.items()} == {
        1: "field", 2: "field", 3: "nic", 4: "value", 5: "nic", 6: "field", 7: "field", 8: "value"}
    assert "unknown network field 'nic_bogus'" in by_row[1]["message"]
    assert "summed into nic_tx_packets" in by_row[2]["message"]
    assert "either a gpu or a nic" in by_row[5]["message"]
    assert len(store.read_net("alps")) == 1


def test_a_batch_of_only_bad_nic_rows_is_a_400(api_client, service, store):
    response = post(api_client, service, [nic_row(field="nope"), nic_row(nic="")])
    assert response.status_code == 400
    assert store.read_net("alps").empty


def test_a_job_token_may_post_nic_rows_only_for_its_nodes_and_time_into_its_cluster(api_client, store, db):
    from apps.jobs.models import Cluster, Job, JobToken

    cluster = Cluster.objects.create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=78, user_name="alice", account="a", state="RUNNING",
                             submit_time=django_tz.now() - timedelta(hours=1),
                             start_time=django_tz.now() - timedelta(minutes=30), node_list=["nid000010"])
    _, key = JobToken.issue(job)
    response = post(api_client, key, [nic_row(host="nid000010", cluster="elsewhere"), nic_row(host="nid000099"),
                                      nic_row(host="nid000010", seconds_ago=5 * 3600)], keyword="JobToken", query="")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["accepted"] == 1
    assert {e["row"]: e["field"] for e in report["errors"]} == {1: "host", 2: "ts"}
    assert store.read_net("elsewhere").empty
    assert store.read_net("alps")["host"].tolist() == ["nid000010"]


def test_parse_batch_keeps_nic_rows_apart_with_canonical_names():
    samples = [(None, gpu_row()), (None, nic_row(field="hni_llr_tx_replay_event", value=3))]
    parsed = ingest.parse_batch(samples, now=NOW, default_cluster="alps")
    assert len(parsed.frame) == 1 and parsed.accepted == 2 and parsed.rejected == 0
    assert parsed.net["field"].tolist() == ["nic_llr_replays"] and str(parsed.net["ts"].dtype) == "datetime64[ns, UTC]"


def test_the_fields_endpoint_lists_dcgm_and_network_fields(api_client, service):
    from apps.telemetry.fields import FIELDS

    response = api_client.get("/api/v1/telemetry/fields/", HTTP_AUTHORIZATION=f"Token {service}")
    assert response.status_code == 200
    body = response.json()
    assert sorted(entry["id"] for entry in body["dcgm"]) == sorted(FIELDS)
    network = {entry["name"]: entry for entry in body["network"]}
    assert set(netfields.CANONICAL_NIC_FIELDS) <= set(network)
    assert {"port_tx_bytes", "port_rx_bytes", "port_tx_packets", "port_rx_packets", "port_errors",
            "port_link_down"} <= set(network)
    assert network["nic_tx_packets"]["driver_names"][0] == "hni_pkts_sent_by_tc_0"
    assert len(network["nic_tx_packets"]["driver_names"]) == 8
    assert network["nic_retries"]["kind"] == "counter" and network["nic_link_up"]["kind"] == "gauge"
    assert api_client.get("/api/v1/telemetry/fields/").status_code in (401, 403)


def test_a_text_field_posted_as_a_sample_is_refused_by_name():
    # dcgm-exporter carries the driver version as a label; a collector that posts it as a number gets told why
    samples = [(1, {"ts": NOW.isoformat(), "host": "nid000001", "gpu": 0, "field": "DCGM_FI_DRIVER_VERSION", "value": 550}),
               (2, {"ts": NOW.isoformat(), "host": "nid000001", "gpu": 0, "field": 1002, "value": 0.5})]
    parsed = ingest.parse_batch(samples, now=NOW, default_cluster="alps")
    assert len(parsed.frame) == 1 and [e.line for e in parsed.errors] == [1]
    assert "DCGM_FI_DRIVER_VERSION (1) is text" in parsed.errors[0].message
