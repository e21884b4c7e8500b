"""A product on an Elasticsearch index pattern, checked through the official client against a local HTTP server
that answers with documented Elasticsearch bodies (``data/elasticsearch/``, see its README) — nothing in the
client is mocked. The server records what the client sent."""
import copy
import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from django.core.management import call_command

from apps.catalog.definitions import load_product
from apps.catalog.models import DataProduct
from apps.catalog.services import BUILT_IN, field_units, run_checks

DATA = Path(__file__).with_name("data") / "elasticsearch"
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def documented(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def fill(template: dict, **values) -> dict:
    """A copy of a documented object with some of its own keys given new values (no new keys)."""
    for key in values:
        assert key in template, f"{key!r} is not in the documented example {sorted(template)}"
    return {**copy.deepcopy(template), **values}


def millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class FakeElasticsearch:
    """Answers POST /<pattern>/_search and GET /<pattern>/_mapping; ``members``: host -> minutes of the last
    hour with documents."""

    def __init__(self):
        self.members: dict[str, list[int]] = {}
        self.mapping_properties: dict = {}
        self.missing_index = False
        self.requests: list = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")  # the client refuses answers without it
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                path = unquote(urlsplit(self.path).path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                server.requests.append((self.command, path, body))
                if server.missing_index:
                    self._send(404, documented("index_not_found.json"))
                elif path.endswith("/_search"):
                    self._send(200, server.search())
                elif path.endswith("/_mapping"):
                    self._send(200, server.mapping())
                else:
                    self._send(404, documented("index_not_found.json"))

            do_GET = do_POST = _handle  # noqa: N815 - http.server's names

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def search(self) -> dict:
        envelope = documented("search_response_envelope.json")
        envelope["hits"] = {"max_score": None, "hits": []}  # size 0, track_total_hits false: no total, no hits
        terms = documented("terms_aggregation.json")["aggregations"]["genres"]
        term_bucket = terms["buckets"][0]
        histogram_bucket = documented("date_histogram.json")["aggregations"]["by_day"]["buckets"][0]
        max_value = documented("max_date_aggregation.json")["aggregations"]["date_field_max"]
        start = NOW - timedelta(hours=1)
        buckets, overall = [], None
        for host, minutes in sorted(self.members.items()):
            times = [start + timedelta(minutes=m) for m in minutes]
            last = max(times)
            overall = max(overall or last, last)
            member = fill(term_bucket, key=host, doc_count=len(times) * 4)
            member["newest"] = fill(max_value, value=millis(last), value_as_string=iso(last))
            member["buckets"] = {"buckets": [fill(histogram_bucket, key_as_string=iso(t), key=millis(t), doc_count=4) for t in times]}
            buckets.append(member)
        envelope["aggregations"] = {
            "newest": fill(max_value, value=millis(overall), value_as_string=iso(overall)) if overall else {"value": None},
            "members": fill(terms, buckets=buckets)}
        return envelope

    def mapping(self) -> dict:
        index = documented("get_mapping.json")["my-index-000001"]
        return {"slingshot-counters-2026.11.23": fill(index, mappings=fill(index["mappings"], properties=self.mapping_properties))}

    def close(self):
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture
def elastic(settings):
    server = FakeElasticsearch()
    settings.CATALOG_ELASTICSEARCH_URL = server.url
    yield server
    server.close()


def metric(unit=None, kind="long") -> dict:
    meta = documented("field_meta.json")["mappings"]["properties"]["latency"]
    return fill(meta, type=kind, meta={"unit": unit}) if unit else {"type": kind}


@pytest.fixture
def product(db):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    text = (BUILT_IN / "slingshot-nic-counters.yaml").read_text().replace("window: 2h", "window: 1h")
    definition = load_product(text, "slingshot-nic-counters.yaml", field_units=field_units())
    return DataProduct.objects.create(name=definition["name"], title=definition["title"], domain=definition["domain"],
                                      status=definition["status"], owner_team="Network", owner_contact="network@example.org",
                                      version=definition["version"], definition=definition, source_file="x", digest="x", loaded=NOW)


def test_an_index_pattern_checked_through_the_client(elastic, product):
    from apps.topology.models import Node

    hosts = list(Node.objects.exclude(state="down").order_by("hostname").values_list("hostname", flat=True))
    elastic.members = {host: list(range(60)) for host in hosts[:-3]}
    elastic.members[hosts[0]] = list(range(30)) + list(range(45, 60))  # silent 15 min
    elastic.mapping_properties = {
        "@timestamp": {"type": "date"}, "host": {"properties": {"name": {"type": "keyword"}}},
        "nic": {"properties": {"name": {"type": "keyword"}}},
        "cxi": {"properties": {"rx_bytes": metric("byte"), "tx_bytes": metric("byte"), "stall_count": metric()}}}
    runs = {run.kind: run for run in run_checks(product, now=NOW)}
    method, path, body = elastic.requests[0]
    assert (method, path) == ("POST", "/slingshot-counters-*/_search")
    assert body["size"] == 0 and body["query"] == {"range": {"@timestamp": {"gte": (NOW - timedelta(hours=1)).isoformat(),
                                                                              "lte": NOW.isoformat()}}}
    assert body["aggs"]["members"]["terms"] == {"field": "host.name", "size": 20000}
    assert body["aggs"]["members"]["aggs"]["buckets"]["date_histogram"] == {"field": "@timestamp", "fixed_interval": "60s",
                                                                             "min_doc_count": 1}
    assert elastic.requests[1][:2] == ("GET", "/slingshot-counters-*/_mapping")
    assert runs["freshness"].status == "pass" and runs["freshness"].measured["newest"] == (NOW - timedelta(minutes=1)).isoformat()
    coverage = runs["coverage"].measured
    assert coverage["missing"] == [{"member": host} for host in hosts[-3:]] and runs["coverage"].status == "pass"  # 99.9 % >= 99 %
    gaps = runs["gaps"].measured["gaps"]
    assert gaps == [{"member": hosts[0], "start": (NOW - timedelta(minutes=30)).isoformat(),
                     "end": (NOW - timedelta(minutes=15)).isoformat(), "seconds": 900.0, "ongoing": False}]
    assert runs["drift"].status == "fail"
    assert runs["drift"].measured["missing"] == ["cxi.stalls"] and runs["drift"].measured["new"] == ["cxi.stall_count"]


def test_a_changed_unit_in_the_mapping_is_drift(elastic, product):
    elastic.members = {"nid000001": list(range(60))}
    elastic.mapping_properties = {"@timestamp": {"type": "date"}, "host": {"properties": {"name": {"type": "keyword"}}},
                                  "nic": {"properties": {"name": {"type": "keyword"}}},
                                  "cxi": {"properties": {"rx_bytes": metric("percent"), "tx_bytes": metric("byte"),
                                                         "stalls": metric()}}}
    drift = next(run for run in run_checks(product, now=NOW) if run.kind == "drift")
    assert drift.measured["unit_changes"] == [{"column": "cxi.rx_bytes", "declared": "byte", "observed": "percent"}]


def test_a_missing_index_and_no_server_are_said_plainly(elastic, product, settings):
    elastic.missing_index = True
    runs = run_checks(product, now=NOW)
    assert {run.status for run in runs} == {"skipped"}
    assert runs[0].summary.startswith("source unavailable: Elasticsearch slingshot-counters-*: index_not_found_exception")
    settings.CATALOG_ELASTICSEARCH_URL = "http://127.0.0.1:9"  # nothing listens on the discard port
    runs = run_checks(product, now=NOW)
    assert runs[0].status == "skipped" and "Elasticsearch slingshot-counters-*:" in runs[0].summary
    settings.CATALOG_ELASTICSEARCH_URL = settings.ELASTICSEARCH_URL = ""
    assert run_checks(product, now=NOW)[0].summary == ("source unavailable: Elasticsearch is not configured "
                                                       "(set ELASTICSEARCH_URL or CATALOG_ELASTICSEARCH_URL)")
