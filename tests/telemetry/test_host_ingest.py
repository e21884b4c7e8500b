"""Host rows (``host_metrics``) through POST /api/v1/telemetry/samples/: mixed with GPU and NIC rows, checked
row by row with the domain or field named, stored as host samples, listed at /api/v1/telemetry/fields/."""
import json
from datetime import datetime, timedelta, timezone

from apps.telemetry import hostfields

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def iso(seconds_ago):
    return (NOW - timedelta(seconds=seconds_ago)).isoformat().replace("+00:00", "Z")


def host_row(domain="node", field="host_cpu_busy", value=0.5, seconds_ago=60, host="nid001234"):
    return {"ts": iso(seconds_ago), "host": host, "host_metrics": domain, "field": field, "value": value}


def post(api_client, key, body):
    return api_client.generic("POST", "/api/v1/telemetry/samples/?cluster=alps", json.dumps(body).encode(),
                              content_type="application/json", HTTP_AUTHORIZATION=f"Token {key}")


def test_host_rows_beside_gpu_and_nic_rows_are_stored_as_host_samples(api_client, service, store):
    batch = [{"ts": iso(60), "host": "nid001234", "gpu": 1, "field": 1002, "value": 0.2},
             {"ts": iso(60), "host": "nid001234", "nic": "hsn0", "field": "nic_retries", "value": 3},
             host_row("numa2", "host_cpu_busy", 0.97),
             host_row("gpu1", "host_gpu_page_cache", 23e9),
             host_row("job4242.0", "host_dataloader_cpu", 1.0)]
    response = post(api_client, service, batch)
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 5 and response.json()["rejected"] == 0
    host = store.read_host("alps")
    assert list(zip(host["domain"], host["field"], host["value"])) == [
        ("gpu1", "host_gpu_page_cache", 23e9), ("job4242.0", "host_dataloader_cpu", 1.0),
        ("numa2", "host_cpu_busy", 0.97)]
    assert store.read_net("alps", fields=["nic_retries"])["nic"].tolist() == ["hsn0"]


def test_bad_host_rows_are_named_and_the_good_ones_kept(api_client, service, store):
    batch = [host_row("numa0"), host_row("socket0"), host_row("gpu1", "host_cpu_busy"),
             host_row("node", "cpu_busy"), {**host_row(), "gpu": 0}]
    response = post(api_client, service, batch)
    assert response.status_code == 200
    errors = {(e["row"], e["field"]): e["message"] for e in response.json()["errors"]}
    assert "node, numa<N>, gpu<N>" in errors[(1, "host_metrics")]
    assert "not gpu1" in errors[(2, "field")]
    assert "'cpu_busy' is not a host field" in errors[(3, "field")]
    assert "no \"gpu\"" in errors[(4, "host_metrics")]
    assert len(store.read_host("alps")) == 1
    only_bad = post(api_client, service, [host_row("socket0")])
    assert only_bad.status_code == 400 and "host_metrics" in only_bad.content.decode()


def test_the_fields_endpoint_lists_the_host_fields_with_their_sources(api_client, service):
    body = api_client.get("/api/v1/telemetry/fields/", HTTP_AUTHORIZATION=f"Token {service}").json()
    host = {entry["name"]: entry for entry in body["host"]}
    assert set(host) == set(hostfields.HOST_FIELD_NAMES)
    assert all(entry["source"] for entry in host.values())
    assert host["host_gpu_page_cache"]["domains"] == ["gpu"] and "/proc/stat" in host["host_cpu_busy"]["source"]
