"""The Elasticsearch backend on the real wire format, without an Elasticsearch server.

A small HTTP server (stdlib, a thread on 127.0.0.1, a random port) records every request the
official client sends (method, path, query string, headers, JSON or NDJSON body) and answers with
response bodies shaped exactly like the documented Elasticsearch responses in
``data/elasticsearch/`` (see its README for where each comes from). Nothing in the client is
mocked: requests go through ``elasticsearch`` and ``elastic_transport`` to a socket.

The server also keeps the documents it was sent and evaluates the few query features the backend
uses (bool filter with range/term/terms, sort + search_after, composite aggregation with
date_histogram/terms sources and stats/percentiles/top_hits, delete_by_query), so the shared
contract suite runs over the wire too. Those semantics are the fake's, checked against a real
server only by ``test_elasticsearch_live.py``.
"""
from __future__ import annotations

import base64
import fnmatch
import functools
import hashlib
import itertools
import json
import re
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import pandas as pd
import pytest

from apps.telemetry.backends.base import (
    APP_COLUMNS, COLUMNS, STATS, Query, TelemetryUnavailable, aggregate_frame, latest_frame, sort_samples,
)
from apps.telemetry.backends.elasticsearch import BulkWriteError, ElasticsearchBackend

from .contract import (
    T0, BackendContract, app_synthetic, assert_app_frames_equal, assert_frames_equal, sorted_app, synthetic,
)

DATA = Path(__file__).parent / "data" / "elasticsearch"
PIT_ID = json.loads((DATA / "pit_open.json").read_text())["id"]
COMPAT_JSON = "application/vnd.elasticsearch+json; compatible-with=8"


@functools.cache
def fixture(name: str) -> dict:
    """A documented response (parsed once; treated as read-only)."""
    return json.loads((DATA / name).read_text())


def fill(template: dict, **values) -> dict:
    """A copy of a documented response object with some values replaced; only keys the
    documented example has may be set, so responses keep the documented shape."""
    for key in values:
        assert key in template, f"{key!r} is not in the documented response {sorted(template)}"
    return {**template, **values}  # shallow: responses are only serialised, never changed in place


def shape(template: dict, keep: list[str], **values) -> dict:
    """Only the ``keep`` keys of a documented response object (values replaced as in ``fill``)."""
    missing = [key for key in keep if key not in template]
    assert not missing, f"{missing} not in the documented response {sorted(template)}"
    return fill({key: template[key] for key in keep}, **values)


def expected_id(cluster, host, gpu, field, ts_ns) -> str:
    """The document id scheme, written out independently of the backend."""
    key = f"{cluster}\x1f{host}\x1f{gpu}\x1f{field}\x1f{ts_ns}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


# -- the fake server ----------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    raw: bytes
    body: object = None
    status: int = 0
    response: object = None

    @property
    def ndjson(self) -> list:
        return json.loads("[" + ",".join(line for line in self.raw.decode().splitlines() if line.strip()) + "]")


@dataclass
class Canned:
    method: str
    path: str  # regular expression, full match
    status: int
    body: dict
    times: int = 1


@dataclass
class Doc:
    index: str
    id: str
    source: dict
    seq: int
    version: int = 1


def _value(source: dict, path: str):
    if path in source:
        return source[path]
    node = source
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


@functools.lru_cache(maxsize=200_000)
def _text_ns(text: str) -> int:
    stamp = pd.Timestamp(text)
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp).value


def _ns(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value * 1_000_000)  # epoch_millis, the date default
    return _text_ns(value)


class FakeElasticsearch:
    def __init__(self, product_header: bool = True):
        self.product_header = product_header
        self.requests: list[Request] = []
        self.canned: list[Canned] = []
        self.docs: dict[tuple[str, str], Doc] = {}
        self.templates: dict[str, dict] = {}
        self.policies: dict[str, dict] = {}
        self.indices: dict[str, dict] = {}  # index name -> its create body (created explicitly or by a bulk)
        self.snapshots: dict[str, list[Doc]] = {}
        self.errors: list[str] = []
        self._seq = itertools.count()
        self._version = 0  # bumped whenever documents change
        self._filtered: tuple = (None, [])
        self._groups: tuple = (None, {}, [])
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK stalls

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, payload = fake.dispatch(self.command, self.path, headers, raw)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.elasticsearch+json;compatible-with=8")
                self.send_header("Content-Length", str(len(data)))
                if fake.product_header:
                    self.send_header("X-Elastic-Product", "Elasticsearch")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, method: str, path: str, status: int, body: dict, times: int = 1):
        self.canned.append(Canned(method, path, status, body, times))

    def sent(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and re.fullmatch(path, r.path)]

    # -- dispatch ---------------------------------------------------------------------------

    def dispatch(self, method, target, headers, raw):
        parts = urlsplit(target)
        path = unquote(parts.path)
        request = Request(method, path, parse_qs(parts.query, keep_blank_values=True), headers, raw)
        if raw and not path.endswith("/_bulk"):
            request.body = json.loads(raw)
        with self._lock:
            self.requests.append(request)
            request.status, request.response = self._answer(request)
            return request.status, request.response

    def _answer(self, request: Request):
        for canned in self.canned:
            if canned.method == request.method and re.fullmatch(canned.path, request.path) and canned.times > 0:
                canned.times -= 1
                return canned.status, canned.body
        try:
            return self.route(request)
        except Exception as exc:  # surfaced by the tests through fake.errors
            self.errors.append(f"{request.method} {request.path}: {exc!r}")
            error = {"root_cause": [], "type": "fake_server_exception", "reason": repr(exc)}
            return 500, {"error": error, "status": 500}

    def route(self, r: Request):
        segments = [s for s in r.path.split("/") if s]
        if r.method == "GET" and not segments:
            return 200, fixture("info.json")
        if segments[:1] == ["_index_template"] and r.method in ("PUT", "POST"):
            self.templates[segments[1]] = r.body
            return 200, fixture("acknowledged.json")
        if segments[:2] == ["_ilm", "policy"] and r.method == "PUT":
            self.policies[segments[2]] = r.body
            return 200, fixture("acknowledged.json")
        if len(segments) == 1 and r.method == "PUT" and not segments[0].startswith("_"):  # create an index
            assert not set("*,") & set(segments[0]), segments
            if segments[0] in self.indices:
                return 400, {"error": {"root_cause": [], "type": "resource_already_exists_exception",
                                       "reason": f"index [{segments[0]}] already exists"}, "status": 400}
            self.indices[segments[0]] = r.body or {}
            return 200, fill(fixture("create_index.json"), index=segments[0])
        if segments[-1:] == ["_count"] and len(segments) == 2 and r.method in ("GET", "POST"):
            return 200, fill(fixture("count.json"), count=len(self.matching(segments[0])))
        if segments[:1] == ["_index_template"] and r.method == "DELETE":
            self.templates.pop(segments[1], None)
            return 200, fixture("acknowledged.json")
        if segments[-1:] == ["_bulk"] and r.method in ("POST", "PUT"):
            return 200, self.bulk(r, segments[0] if len(segments) == 2 else None)
        if segments[-1:] == ["_pit"] and r.method == "POST":
            # the PIT id of the open response, and the updated one search responses carry
            for pit_id in (PIT_ID, fixture("search_pit_page.json")["pit_id"]):
                self.snapshots[pit_id] = list(self.matching(segments[0]))
            return 200, fixture("pit_open.json")
        if segments == ["_pit"] and r.method == "DELETE":
            return 200, fixture("pit_close.json")
        if segments[-1:] == ["_search"] and r.method in ("GET", "POST"):
            return 200, self.search(r, segments[0] if len(segments) == 2 else None)
        if segments[-1:] == ["_delete_by_query"] and r.method == "POST":
            return 200, self.delete_by_query(r, segments[0])
        if segments[:2] == ["_resolve", "index"] and r.method == "GET":
            patterns = segments[2].split(",")
            names = sorted({doc.index for doc in self.matching(segments[2])}
                           | {name for name in self.indices if any(fnmatch.fnmatchcase(name, p) for p in patterns)})
            entry = fixture("resolve_index.json")["indices"][2]
            return 200, fill(fixture("resolve_index.json"), aliases=[], data_streams=[], indices=[
                shape(entry, ["name", "attributes"], name=name, attributes=["open"]) for name in names])
        if len(segments) == 1 and r.method == "DELETE":
            names = segments[0].split(",")
            assert not any("*" in name or "?" in name for name in names), f"wildcard index deletion {names}"
            self._version += 1
            for name in names:
                self.indices.pop(name, None)
            for key in [key for key, doc in self.docs.items() if doc.index in names]:
                del self.docs[key]
            return 200, fixture("acknowledged.json")
        raise AssertionError(f"the fake server has no route for {r.method} {r.path}")

    def matching(self, target: str):
        patterns = target.split(",")
        return [doc for doc in self.docs.values() if any(fnmatch.fnmatchcase(doc.index, p) for p in patterns)]

    # -- bulk ---------------------------------------------------------------------------------

    def bulk(self, r: Request, default_index):
        self._version += 1
        lines = r.ndjson
        template = fixture("bulk_ok.json")["items"][0]["index"]
        items = []
        for action, source in zip(lines[0::2], lines[1::2]):
            (op, meta), = action.items()
            assert op in ("index", "update"), op
            key = (meta.get("_index", default_index), meta["_id"])
            self.indices.setdefault(key[0], {})
            seq = next(self._seq)
            old = self.docs.get(key)
            if op == "update":  # a partial document, created when missing (doc_as_upsert)
                assert set(source) == {"doc", "doc_as_upsert"} and source["doc_as_upsert"] is True, source
                source = {**(old.source if old else {}), **source["doc"]}
            self.docs[key] = Doc(key[0], key[1], source, seq, (old.version + 1) if old else 1)
            item = fixture("bulk_ok.json")["items"][3]["update"] if op == "update" else template
            items.append({op: fill(item, _index=key[0], _id=key[1], _version=self.docs[key].version,
                                   _seq_no=seq, result="updated" if old else "created",
                                   status=200 if old else 201)})
        return fill(fixture("bulk_ok.json"), took=3, errors=False, items=items)

    # -- queries ------------------------------------------------------------------------------

    @staticmethod
    def matcher(query: dict | None):
        """A predicate on a document's source for the bool filter the backend sends."""
        if not query:
            return lambda source: True
        (kind, spec), = query.items()
        assert kind == "bool" and set(spec) == {"filter"}, query
        tests = []
        for clause in spec["filter"]:
            (op, body), = clause.items()
            (name, condition), = body.items()
            if op == "range":
                assert condition.get("format") == "strict_date_optional_time_nanos", condition
                assert {"format"} < set(condition) <= {"gte", "lt", "format"}, condition
                lo = _text_ns(condition["gte"]) if "gte" in condition else -2**63
                hi = _text_ns(condition["lt"]) if "lt" in condition else 2**63
                tests.append(lambda src, n=name, lo=lo, hi=hi: lo <= (_ns(_value(src, n)) or -1) < hi)
            elif op == "term":
                tests.append(lambda src, n=name, c=condition: _value(src, n) == c)
            elif op == "terms":
                tests.append(lambda src, n=name, c=frozenset(condition): _value(src, n) in c)
            else:
                raise AssertionError(f"unexpected query clause {clause}")
        return lambda source: all(test(source) for test in tests)

    def filtered(self, target: str, query: dict | None) -> list[Doc]:
        """The documents of ``target`` that ``query`` matches; the same list object until the data
        changes, so the pages of one composite aggregation share their grouping."""
        key = (self._version, target, json.dumps(query, sort_keys=True))
        if self._filtered[0] != key:
            test = self.matcher(query)
            self._filtered = (key, [doc for doc in self.matching(target) if test(doc.source)])
        return self._filtered[1]

    def search(self, r: Request, target):
        body = r.body or {}
        if "pit" in body:
            assert target is None, "a PIT search names no index"
            docs = self.snapshots[body["pit"]["id"]]
            test = self.matcher(body.get("query"))
            docs = [doc for doc in docs if test(doc.source)]
        else:
            docs = self.filtered(target, body.get("query"))
        envelope = shape(fixture("search.json"), ["took", "timed_out", "_shards"], took=2)
        if "aggs" in body:
            (name, agg), = body["aggs"].items()
            return {**envelope, "hits": {"max_score": None, "hits": []},
                    **fill(fixture("composite.json"), aggregations={name: self.composite(docs, agg)})}
        return self.page(body, docs, pit="pit" in body)

    @staticmethod
    def sort_keys(sort: list) -> list:
        """One function per sort clause giving a document's sort value as Elasticsearch returns it:
        nanoseconds for a field sorted with ``numeric_type: date_nanos``, the shard-doc tiebreaker
        (here the write sequence), the value itself for a keyword. Only ascending sorts are used."""
        keys = []
        for clause in sort:
            (name, spec), = clause.items()
            spec = spec if isinstance(spec, dict) else {"order": spec}
            assert spec["order"] == "asc", clause
            if name == "_shard_doc":
                keys.append(lambda doc: doc.seq)
            elif spec.get("numeric_type") == "date_nanos":
                keys.append(lambda doc, n=name: _ns(_value(doc.source, n)))
            else:
                assert set(spec) == {"order"}, clause
                keys.append(lambda doc, n=name: _value(doc.source, n))
        return keys

    def page(self, body, docs, *, pit: bool):
        keys = self.sort_keys(body["sort"])
        rows = sorted((([key(doc) for key in keys], doc) for doc in docs), key=lambda row: row[0])
        if "search_after" in body:
            after = body["search_after"]
            rows = [row for row in rows if row[0] > after]
        rows = rows[:body.get("size", 10)]
        template = fixture("search_pit_page.json")
        hit = template["hits"]["hits"][0]
        hits = [fill(hit, _index=doc.index, _id=doc.id, _source=self.source_filter(doc.source, body.get("_source")),
                     sort=values) for values, doc in rows]
        if pit:
            return fill(template, took=1, hits=fill(template["hits"], hits=hits))
        # without a point in time the answer is the plain search envelope (no pit_id)
        envelope = shape(fixture("search.json"), ["took", "timed_out", "_shards"], took=1)
        return {**envelope, "hits": fill(template["hits"], hits=hits)}

    @staticmethod
    def source_filter(source: dict, wanted) -> dict:
        """``_source`` limited to the requested fields (top-level names, as the backend asks)."""
        if wanted is None or wanted is True:
            return source
        names = wanted if isinstance(wanted, list) else wanted.get("includes", [])
        return {k: v for k, v in source.items() if k in names or any(n.split(".")[0] == k for n in names)}

    def composite(self, docs, agg):
        spec = agg["composite"]
        names, getters = [], []
        for source in spec["sources"]:
            (name, definition), = source.items()
            (kind, options), = definition.items()
            names.append(name)
            if kind == "date_histogram":
                assert "offset" not in options and "calendar_interval" not in options, options
                interval_ms = int(re.fullmatch(r"(\d+)s", options["fixed_interval"]).group(1)) * 1000
                getters.append(lambda src, f=options["field"], w=interval_ms: (
                    None if _ns(_value(src, f)) is None else (_ns(_value(src, f)) // 1_000_000) // w * w))
            else:
                assert kind == "terms", kind
                getters.append(lambda src, f=options["field"]: _value(src, f))
        cache_key = (id(docs), len(docs), json.dumps(spec["sources"]))
        if self._groups[0] != cache_key:  # later pages of the same aggregation reuse the grouping
            groups: dict[tuple, list[Doc]] = {}
            for doc in docs:
                key = tuple(get(doc.source) for get in getters)
                if None not in key:
                    groups.setdefault(key, []).append(doc)
            self._groups = (cache_key, groups, sorted(groups))
        groups, keys = self._groups[1], self._groups[2]
        if "after" in spec:
            after = tuple(spec["after"][name] for name in names)
            keys = [key for key in keys if key > after]
        keys = keys[:spec.get("size", 10)]
        template = fixture("composite.json")["aggregations"]["my_buckets"]
        buckets = []
        for key in keys:
            bucket = shape(template["buckets"][0], ["key", "doc_count"], key=dict(zip(names, key)),
                           doc_count=len(groups[key]))
            for sub_name, sub in agg.get("aggs", {}).items():
                bucket[sub_name] = self.metric(sub, groups[key])
            buckets.append(bucket)
        out = fill(template, buckets=buckets, after_key=dict(zip(names, keys[-1])) if keys else {})
        if not keys:
            del out["after_key"]
        return out

    def metric(self, sub: dict, docs: list[Doc]):
        (kind, options), = sub.items()
        if kind == "stats":
            values = np.array([float(_value(d.source, options["field"])) for d in docs])
            return fill(fixture("stats.json")["aggregations"]["grades_stats"], count=len(values),
                        min=float(values.min()), max=float(values.max()), avg=float(values.mean()),
                        sum=float(values.sum()))
        if kind == "percentiles":
            values = np.array([float(_value(d.source, options["field"])) for d in docs])
            return fill(fixture("percentiles.json")["aggregations"]["load_time_outlier"],
                        values={str(float(p)): float(np.percentile(values, p)) for p in options["percents"]})
        if kind in ("sum", "min", "max"):
            values = [float(_value(d.source, options["field"])) for d in docs]
            documented = fixture(f"{kind}.json")["aggregations"]
            (template,) = documented.values()
            return fill(template, value=float({"sum": sum, "min": min, "max": max}[kind](values)))
        if kind == "top_hits":
            (ts_name, ts_spec), = options["sort"][0].items()
            assert ts_spec["order"] in ("asc", "desc") and ts_spec["numeric_type"] == "date_nanos"
            pick = max if ts_spec["order"] == "desc" else min
            top = pick(docs, key=lambda d: _ns(_value(d.source, ts_name)))
            template = fixture("top_hits.json")["aggregations"]["top_tags"]["buckets"][0]["top_sales_hits"]
            hit = template["hits"]["hits"][0]
            return fill(template, hits=fill(template["hits"], total={"value": len(docs), "relation": "eq"}, hits=[
                fill(hit, _index=top.index, _id=top.id, _source=top.source, sort=[_ns(_value(top.source, ts_name))])]))
        raise AssertionError(f"unexpected sub-aggregation {sub}")

    def delete_by_query(self, r: Request, target):
        test = self.matcher(r.body.get("query"))
        doomed = [doc for doc in self.matching(target) if test(doc.source)]
        self._version += 1
        for doc in doomed:
            del self.docs[(doc.index, doc.id)]
        return fill(fixture("delete_by_query.json"), took=4, total=len(doomed), deleted=len(doomed),
                    batches=1 if doomed else 0, failures=[])


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture
def fake():
    server = FakeElasticsearch()
    yield server
    server.stop()
    assert not server.errors, server.errors


def make_backend(fake_server, **options):
    options = {"initial_backoff": 0.01, "max_backoff": 0.05, **options}
    return ElasticsearchBackend(url=fake_server.url, **options)


@pytest.fixture
def store(fake):
    backend = make_backend(fake)
    backend.clock = lambda: T0  # the samples' day is today: no retention horizon or late-day note is involved
    yield backend
    backend.close()


class TestContractOverTheWire(BackendContract):
    """The shared contract, with the fake server standing in for Elasticsearch."""

    @pytest.fixture
    def backend(self, fake):
        backend = make_backend(fake, page_size=5000, agg_page_size=500)
        yield backend
        backend.close()


def three_samples() -> pd.DataFrame:
    return pd.DataFrame({
        "ts": pd.to_datetime(["2026-11-21T23:59:59.123456789Z", "2026-11-22T00:00:00Z", "2026-11-22T00:00:01.5Z"],
                             utc=True, format="ISO8601"),
        "cluster": "alps", "host": ["nid000001", "nid000001", "nid000002"], "gpu": [0, 0, 3], "uuid": "GPU-1",
        "field": [1002, 1002, 155], "value": [0.25, 0.5, 612.0]})


# -- check, connection, product ------------------------------------------------------------------


def test_check_reads_the_root_info_and_sends_the_compatibility_headers(fake):
    backend = make_backend(fake, api_key="c2VjcmV0")
    line = backend.check()
    assert "Elasticsearch 8.12.1" in line and "my_test_cluster" in line and fake.url in line
    (request,) = fake.sent("GET", "/")
    assert request.headers["accept"] == COMPAT_JSON
    assert request.headers["authorization"] == "ApiKey c2VjcmV0"


def test_basic_auth_is_sent_and_kept_out_of_messages(fake):
    backend = make_backend(fake, basic_auth="belvedere:s3cret")
    backend.check()
    (request,) = fake.sent("GET", "/")
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"belvedere:s3cret").decode()


def test_an_empty_url_is_refused_with_a_clear_message():
    with pytest.raises(TelemetryUnavailable, match="needs a URL"):
        ElasticsearchBackend(url="")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("call", ["check", "write", "read", "aggregate", "latest", "delete", "write_job_series",
                                  "read_job_series", "delete_job_series"])
def test_connection_refused_is_telemetry_unavailable_naming_the_url(call):
    url = f"http://127.0.0.1:{_closed_port()}"
    backend = ElasticsearchBackend(url=url, request_timeout=2)
    query = Query(start=T0, end=T0 + timedelta(hours=1))
    calls = {"check": lambda: backend.check(), "write": lambda: backend.write(three_samples()),
             "read": lambda: backend.read(query), "aggregate": lambda: backend.aggregate(query, 60),
             "latest": lambda: backend.latest(query), "delete": lambda: backend.delete(query),
             "write_job_series": lambda: backend.write_job_series(three_points()),
             "read_job_series": lambda: backend.read_job_series("alps", 1),
             "delete_job_series": lambda: backend.delete_job_series("alps", 1)}
    with pytest.raises(TelemetryUnavailable) as caught:
        calls[call]()
    message = str(caught.value)
    assert url in message and "unreachable" in message and "\n" not in message
    assert "Connection refused" in message or "Errno" in message


def test_credentials_in_the_url_stay_out_of_messages():
    url = f"http://user:pw@127.0.0.1:{_closed_port()}"
    with pytest.raises(TelemetryUnavailable) as caught:
        ElasticsearchBackend(url=url, request_timeout=2).check()
    assert "pw" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_a_server_that_is_not_elasticsearch_is_named_as_such():
    server = FakeElasticsearch(product_header=False)
    try:
        with pytest.raises(TelemetryUnavailable, match="not Elasticsearch"):
            make_backend(server).check()
    finally:
        server.stop()


# -- write --------------------------------------------------------------------------------------


def test_write_installs_the_template_once_then_sends_ndjson_bulk_with_deterministic_ids(fake, store):
    data = three_samples()
    assert store.write(data) == 3
    (put,) = fake.sent("PUT", "/_index_template/belvedere-telemetry")
    assert put.body["index_patterns"] == ["belvedere-telemetry-*"]
    mappings = put.body["template"]["mappings"]
    assert mappings["dynamic"] == "strict"
    assert {name: spec["type"] for name, spec in mappings["properties"].items()} == {
        "ts": "date_nanos", "cluster": "keyword", "host": "keyword", "gpu": "short", "uuid": "keyword",
        "field": "integer", "value": "double"}
    (bulk,) = fake.sent("PUT", "/_bulk")
    assert bulk.headers["content-type"] == "application/vnd.elasticsearch+x-ndjson; compatible-with=8"
    assert bulk.query["refresh"] == ["wait_for"]
    lines = bulk.ndjson
    assert len(lines) == 6
    actions, sources = lines[0::2], lines[1::2]
    assert actions[0] == {"index": {"_index": "belvedere-telemetry-2026.11.21",
                                    "_id": expected_id("alps", "nid000001", 0, 1002, 1795305599123456789)}}
    assert actions[1]["index"]["_index"] == actions[2]["index"]["_index"] == "belvedere-telemetry-2026.11.22"
    assert actions[2]["index"]["_id"] == expected_id("alps", "nid000002", 3, 155, 1795305601500000000)
    assert sources[0] == {"ts": "2026-11-21T23:59:59.123456789Z", "cluster": "alps", "host": "nid000001", "gpu": 0,
                          "uuid": "GPU-1", "field": 1002, "value": 0.25}
    # Re-sending is idempotent: the same ids again, and the template is not sent a second time.
    assert store.write(data) == 3
    assert len(fake.sent("PUT", "/_index_template/.*")) == 1
    assert [line for line in fake.sent("PUT", "/_bulk")[1].ndjson[0::2]] == actions
    assert len(fake.docs) == 3


def test_repeats_in_a_batch_are_sent_once_with_the_last_value(fake, store):
    data = three_samples()
    store.write(pd.concat([data.iloc[:1].assign(value=1.0), data.iloc[:1].assign(value=2.0)]))
    lines = fake.sent("PUT", "/_bulk")[0].ndjson
    assert len(lines) == 2 and lines[1]["value"] == 2.0


def test_non_finite_values_are_refused_before_any_request(fake, store):
    data = three_samples()
    data.loc[1, "value"] = float("inf")
    with pytest.raises(ValueError, match="finite"):
        store.write(data)
    assert fake.requests == []


def test_failed_bulk_items_raise_naming_how_many_and_the_first_reason(fake, store):
    documented = fixture("bulk_errors.json")
    ok, failed = fixture("bulk_ok.json")["items"][0], documented["items"][0]["update"]
    fake.answer("PUT", "/_bulk", 200, fill(documented, items=[ok, {"index": failed}, ok]))
    with pytest.raises(BulkWriteError) as caught:
        store.write(three_samples())
    message = str(caught.value)
    assert "1 of 3 samples were not written" in message
    assert "document_missing_exception: [5]: document missing" in message and "HTTP 404" in message
    assert caught.value.failed == 1 and caught.value.total == 3


def test_a_429_for_the_whole_bulk_request_is_retried_after_a_backoff(fake, store):
    fake.answer("PUT", "/_bulk", 429, fixture("error_429.json"))
    assert store.write(three_samples()) == 3
    first, second = fake.sent("PUT", "/_bulk")
    assert first.raw == second.raw
    assert len(fake.docs) == 3


def test_a_429_for_one_bulk_item_resends_only_that_document(fake, store):
    ok = fixture("bulk_ok.json")["items"][0]
    rejected = fixture("bulk_item_rejected_429.json")
    fake.answer("PUT", "/_bulk", 200, fill(fixture("bulk_errors.json"), items=[ok, {"index": rejected}, ok]))
    assert store.write(three_samples()) == 3
    first, second = fake.sent("PUT", "/_bulk")
    assert len(first.ndjson) == 6 and len(second.ndjson) == 2
    assert second.ndjson[0] == first.ndjson[2]


def test_429_that_never_ends_gives_a_clear_message(fake):
    backend = make_backend(fake, max_retries=2)
    fake.answer("PUT", "/_bulk", 429, fixture("error_429.json"), times=10)
    with pytest.raises(TelemetryUnavailable, match="HTTP 429 es_rejected_execution_exception.*overloaded"):
        backend.write(three_samples())
    assert len(fake.sent("PUT", "/_bulk")) == 3


# -- read ---------------------------------------------------------------------------------------


def test_read_pages_with_a_point_in_time_and_search_after_and_sends_the_filters(fake):
    backend = make_backend(fake, page_size=7)
    data = synthetic(minutes=2)  # 2 hosts x 4 GPUs x 2 fields x 12 samples
    backend.write(data)
    query = Query(start=T0 + timedelta(seconds=20), end=T0 + timedelta(seconds=90), cluster="alps",
                  hosts=("nid000002",), gpus=(1, 3), fields=(1002,))
    out = backend.read(query)

    (pit,) = fake.sent("POST", "/belvedere-telemetry-\\*/_pit")
    assert pit.query["keep_alive"] == ["2m"]
    searches = fake.sent("POST", "/_search")
    assert len(searches) == 3  # 14 hits, 7 per page: two full pages, then an empty one
    first, second, third = (s.body for s in searches)
    assert first["pit"] == {"id": PIT_ID, "keep_alive": "2m"} and first["size"] == 7
    # later pages use the PIT id the previous response returned (the documented page carries an updated one)
    assert second["pit"]["id"] == searches[0].response["pit_id"] != PIT_ID
    assert first["sort"] == [{"ts": {"order": "asc", "numeric_type": "date_nanos", "unmapped_type": "date_nanos"}},
                             {"_shard_doc": "asc"}]
    assert "search_after" not in first and first["track_total_hits"] is False
    assert first["query"] == {"bool": {"filter": [
        {"range": {"ts": {"gte": "2026-11-21T10:00:20.000000000Z", "lt": "2026-11-21T10:01:30.000000000Z",
                          "format": "strict_date_optional_time_nanos"}}},
        {"term": {"cluster": "alps"}}, {"terms": {"host": ["nid000002"]}}, {"terms": {"gpu": [1, 3]}},
        {"terms": {"field": [1002]}}]}}
    assert second["search_after"] == searches[0].response["hits"]["hits"][-1]["sort"]
    assert third["search_after"] == searches[1].response["hits"]["hits"][-1]["sort"]
    assert second["query"] == first["query"] and second["sort"] == first["sort"]
    (closed,) = fake.sent("DELETE", "/_pit")
    assert closed.body == {"id": searches[-1].response["pit_id"]}

    expected = data[(data.ts >= query.start) & (data.ts < query.end) & (data.host == "nid000002")
                    & data.gpu.isin([1, 3]) & (data.field == 1002)]
    assert len(expected) == 14 and list(out.columns) == COLUMNS
    assert str(out["ts"].dtype) == "datetime64[ns, UTC]"
    assert out["gpu"].dtype == np.int16 and out["field"].dtype == np.int32 and out["value"].dtype == np.float64
    assert_frames_equal(out, sort_samples(expected))


def test_read_keeps_nanoseconds(fake, store):
    store.write(three_samples())
    out = store.read(Query(start=datetime(2026, 11, 21, tzinfo=timezone.utc),
                           end=datetime(2026, 11, 23, tzinfo=timezone.utc)))
    assert out["ts"].astype("int64").tolist() == [1795305599123456789, 1795305600000000000, 1795305601500000000]


def test_an_empty_filter_list_matches_nothing_without_a_request(fake, store):
    assert store.read(Query(start=T0, end=T0 + timedelta(hours=1), hosts=())).empty
    assert fake.requests == []


def test_the_point_in_time_is_closed_when_a_search_fails(fake, store):
    store.write(three_samples())
    fake.answer("POST", "/_search", 429, fixture("error_429.json"), times=3)  # the reader retries 429 twice
    with pytest.raises(TelemetryUnavailable, match="reading samples on belvedere-telemetry-\\* failed with HTTP 429"):
        store.read(Query(start=T0, end=T0 + timedelta(days=2)))
    assert len(fake.sent("POST", "/_search")) == 3
    assert len(fake.sent("DELETE", "/_pit")) == 1


# -- aggregate, latest, delete ------------------------------------------------------------------


def test_aggregate_is_a_paged_composite_aggregation_with_epoch_aligned_fixed_intervals(fake):
    backend = make_backend(fake, agg_page_size=40)
    data = synthetic(minutes=5)
    backend.write(data)
    query = Query(start=T0, end=T0 + timedelta(minutes=5), hosts=("nid000001", "nid000002"))
    out = backend.aggregate(query, 120, STATS)

    searches = fake.sent("POST", "/belvedere-telemetry-\\*/_search")
    bodies = [s.body for s in searches]
    # 3 buckets x 2 hosts x 4 GPUs x 2 fields = 48 composite buckets: two pages of 40
    assert len(bodies) == 2 and all(b["size"] == 0 for b in bodies)
    composite = bodies[0]["aggs"]["series"]["composite"]
    assert composite["size"] == 40 and "after" not in composite
    assert composite["sources"] == [
        {"bucket": {"date_histogram": {"field": "ts", "fixed_interval": "120s"}}},
        {"cluster": {"terms": {"field": "cluster"}}}, {"host": {"terms": {"field": "host"}}},
        {"gpu": {"terms": {"field": "gpu"}}}, {"field": {"terms": {"field": "field"}}}]
    assert bodies[0]["aggs"]["series"]["aggs"] == {
        "stats": {"stats": {"field": "value"}},
        "percentiles": {"percentiles": {"field": "value", "percents": [10.0, 50.0, 90.0]}}}
    last_bucket = bodies[1]["aggs"]["series"]["composite"]["after"]
    assert set(last_bucket) == {"bucket", "cluster", "host", "gpu", "field"}
    assert searches[0].query.get("ignore_unavailable") == ["true"]

    assert list(out.columns) == ["bucket", "cluster", "host", "gpu", "field", "count", *STATS]
    assert out["count"].dtype == np.int64 and str(out["bucket"].dtype) == "datetime64[ns, UTC]"
    assert_frames_equal(out, aggregate_frame(data, 120, STATS))
    # epoch alignment: 10:00 is a multiple of 120 s since 1970, so buckets start at 10:00, 10:02, 10:04
    assert sorted(out["bucket"].unique()) == [pd.Timestamp(T0) + pd.Timedelta(seconds=s) for s in (0, 120, 240)]


def test_aggregate_asks_only_for_the_statistics_requested(fake, store):
    store.write(three_samples())
    out = store.aggregate(Query(start=T0, end=T0 + timedelta(days=2)), 3600, ("mean", "max"))
    body = fake.sent("POST", "/belvedere-telemetry-\\*/_search")[0].body
    assert set(body["aggs"]["series"]["aggs"]) == {"stats"}
    assert list(out.columns) == ["bucket", "cluster", "host", "gpu", "field", "count", "mean", "max"]


def test_latest_uses_top_hits_sorted_by_time_descending(fake, store):
    data = synthetic(minutes=2)
    store.write(data)
    out = store.latest(Query(start=T0, end=T0 + timedelta(minutes=1)))
    body = fake.sent("POST", "/belvedere-telemetry-\\*/_search")[0].body
    series = body["aggs"]["series"]
    assert [list(s) for s in series["composite"]["sources"]] == [["cluster"], ["host"], ["gpu"], ["field"]]
    top = series["aggs"]["last"]["top_hits"]
    assert top["size"] == 1
    assert top["sort"] == [{"ts": {"order": "desc", "numeric_type": "date_nanos", "unmapped_type": "date_nanos"}}]
    assert_frames_equal(out, latest_frame(data[data.ts < T0 + timedelta(minutes=1)]))


def test_delete_is_delete_by_query_on_the_own_indices_with_the_same_filters(fake, store):
    data = synthetic(minutes=2)
    store.write(data)
    query = Query(start=T0, end=T0 + timedelta(minutes=1), hosts=("nid000001",), fields=(155,))
    removed = store.delete(query)
    (request,) = fake.sent("POST", "/belvedere-telemetry-\\*/_delete_by_query")
    assert request.query["conflicts"] == ["proceed"] and request.query["refresh"] == ["true"]
    assert request.body["query"]["bool"]["filter"][1:] == [{"terms": {"host": ["nid000001"]}},
                                                           {"terms": {"field": [155]}}]
    assert removed == 4 * 6
    assert len(store.read(Query(start=T0, end=T0 + timedelta(hours=1)))) == len(data) - removed


def test_clear_resolves_the_index_names_then_deletes_them(fake, store):
    store.write(three_samples())
    assert store.clear(drop_template=True) == 2
    (resolve,) = fake.sent("GET", "/_resolve/index/belvedere-telemetry-\\*,belvedere-telemetry_app\\*,"
                                  "belvedere-telemetry_net\\*,belvedere-telemetry_r1m-\\*,belvedere-telemetry_r10m-\\*,"
                                  "belvedere-telemetry_rollups")
    (delete,) = fake.sent("DELETE", "/belvedere-telemetry-2026.11.21,belvedere-telemetry-2026.11.22")
    assert fake.docs == {} and fake.templates == {}
    del resolve, delete


# -- a site's own indices -----------------------------------------------------------------------


def test_site_indices_with_a_field_map_and_field_names(fake):
    """An exporter pipeline's documents: @timestamp in epoch milliseconds, the host in an object,
    the DCGM field by its legacy or DCGM 4.6 name, no cluster field."""
    base_ms = int(pd.Timestamp(T0).value // 1_000_000)
    rows = [("DCGM_FI_PROF_SM_ACTIVE", 0, 0.5), ("DCGM_FI_PROF_SM_UTIL_RATIO", 10_000, 0.7),
            ("DCGM_FI_DEV_POWER_USAGE", 0, 300.0), ("DCGM_FI_UNKNOWN_THING", 0, 1.0)]
    for n, (metric, offset_ms, value) in enumerate(rows):
        fake.docs[("dcgm-2026.11.21", str(n))] = Doc("dcgm-2026.11.21", str(n), {
            "@timestamp": base_ms + offset_ms, "host": {"name": "nid000007"}, "gpu": 2, "UUID": "GPU-abc",
            "metric": metric, "value": value}, seq=n)
    backend = make_backend(fake, read_index_pattern="dcgm-*", field_by_name=True, cluster_name="alps", field_map={
        "ts": "@timestamp", "host": "host.name", "uuid": "UUID", "field": "metric", "cluster": None})
    query = Query(start=T0, end=T0 + timedelta(minutes=1), cluster="alps", fields=(1002, 155))
    out = backend.read(query)
    search = fake.sent("POST", "/_search")[0].body
    assert search["sort"][0] == {"@timestamp": {"order": "asc", "numeric_type": "date_nanos",
                                                "unmapped_type": "date_nanos"}}
    assert search["query"]["bool"]["filter"][1] == {"terms": {"metric": [
        "DCGM_FI_PROF_SM_UTIL_RATIO", "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_DEV_BOARD_POWER_WATTS", "DCGM_FI_DEV_POWER_USAGE"]}}
    assert fake.sent("POST", "/dcgm-\\*/_pit")
    assert out[["cluster", "host", "gpu", "uuid", "field", "value"]].values.tolist() == [
        ["alps", "nid000007", 2, "GPU-abc", 155, 300.0], ["alps", "nid000007", 2, "GPU-abc", 1002, 0.5],
        ["alps", "nid000007", 2, "GPU-abc", 1002, 0.7]]
    assert out["ts"].tolist()[1:] == [pd.Timestamp(T0), pd.Timestamp(T0) + pd.Timedelta(seconds=10)]
    # a cluster the documents cannot belong to matches nothing, without a request
    before = len(fake.requests)
    assert backend.read(Query(start=T0, end=T0 + timedelta(minutes=1), cluster="other")).empty
    assert len(fake.requests) == before
    # both names of 1002 fall into one bucket; the unknown name is left out of everything
    agg = backend.aggregate(Query(start=T0, end=T0 + timedelta(minutes=1)), 60)
    assert agg[["field", "count", "mean", "min", "max"]].values.tolist() == [[155, 1, 300.0, 300.0, 300.0],
                                                                          [1002, 2, 0.6, 0.5, 0.7]]
    sources = fake.sent("POST", "/dcgm-\\*/_search")[0].body["aggs"]["series"]["composite"]["sources"]
    assert [list(s)[0] for s in sources] == ["bucket", "host", "gpu", "field"]  # no cluster field to group by
    assert backend.latest(Query(start=T0, end=T0 + timedelta(minutes=1)))["value"].tolist() == [300.0, 0.7]


# -- job series ---------------------------------------------------------------------------------


def expected_app_id(cluster, job_id, name, ts_ns) -> str:
    """The job-series document id scheme, written out independently of the backend."""
    return hashlib.blake2b(f"{cluster}\x1f{job_id}\x1f{name}\x1f{ts_ns}".encode(), digest_size=16).hexdigest()


def three_points() -> pd.DataFrame:
    return pd.DataFrame({
        "ts": pd.to_datetime(["2026-11-21T10:00:00.123456789Z", "2026-11-21T10:00:30Z", "2026-11-21T10:01:00Z"],
                             utc=True, format="ISO8601"),
        "cluster": "alps", "job_id": 4242, "name": ["loss", "loss", "event.checkpoint"],
        "step": pd.array([100, 101, None], dtype="Int64"), "value": [2.5, 2.25, 31.0]})


def test_job_series_write_installs_their_own_template_once_and_bulk_indexes_deterministic_ids(fake, store):
    assert store.write_job_series(three_points()) == 3
    (put,) = fake.sent("PUT", "/_index_template/belvedere-telemetry_app")
    assert not fake.sent("PUT", "/_index_template/belvedere-telemetry")  # the samples' template is not needed
    assert put.body["index_patterns"] == ["belvedere-telemetry_app"]  # outside belvedere-telemetry-*
    mappings = put.body["template"]["mappings"]
    assert mappings["dynamic"] == "strict"
    assert {name: spec["type"] for name, spec in mappings["properties"].items()} == {
        "ts": "date_nanos", "cluster": "keyword", "job_id": "long", "name": "keyword", "step": "long",
        "value": "double"}
    (bulk,) = fake.sent("PUT", "/_bulk")
    assert bulk.query["refresh"] == ["wait_for"]
    actions, sources = bulk.ndjson[0::2], bulk.ndjson[1::2]
    assert actions == [{"index": {"_index": "belvedere-telemetry_app",
                                  "_id": expected_app_id("alps", 4242, name, ns)}}
                       for name, ns in (("loss", 1795255200123456789), ("loss", 1795255230000000000),
                                        ("event.checkpoint", 1795255260000000000))]
    assert sources[0] == {"ts": "2026-11-21T10:00:00.123456789Z", "cluster": "alps", "job_id": 4242, "name": "loss",
                          "step": 100, "value": 2.5}
    assert "step" not in sources[2]  # unknown: left out, not null
    # re-sending: the same ids again, no second template
    assert store.write_job_series(three_points()) == 3
    assert fake.sent("PUT", "/_bulk")[1].ndjson[0::2] == actions
    assert len(fake.sent("PUT", "/_index_template/.*")) == 1 and len(fake.docs) == 3


def test_job_series_read_is_a_sorted_search_on_their_index_paged_with_search_after(fake):
    backend = make_backend(fake, page_size=4)
    data = app_synthetic(points=5)  # 2 series x 5 points + 1 marker, one job
    backend.write_job_series(data)
    backend.write_job_series(app_synthetic(job_id=7, points=3))  # another job: filtered out
    out = backend.read_job_series("alps", 4242, names=["loss", "tokens_per_s"], start=T0,
                                  end=T0 + timedelta(minutes=10))
    searches = fake.sent("POST", "/belvedere-telemetry_app/_search")
    assert len(searches) == 3 and not fake.sent("POST", ".*/_pit")  # 10 hits, 4 per page
    first, second, third = (s.body for s in searches)
    assert first["query"] == {"bool": {"filter": [
        {"term": {"cluster": "alps"}}, {"term": {"job_id": 4242}}, {"terms": {"name": ["loss", "tokens_per_s"]}},
        {"range": {"ts": {"format": "strict_date_optional_time_nanos", "gte": "2026-11-21T10:00:00.000000000Z",
                          "lt": "2026-11-21T10:10:00.000000000Z"}}}]}}
    assert first["sort"] == [{"name": {"order": "asc"}}, {"ts": {"order": "asc", "numeric_type": "date_nanos"}}]
    assert first["size"] == 4 and first["track_total_hits"] is False and "search_after" not in first
    assert searches[0].query["ignore_unavailable"] == ["true"]
    assert second["search_after"] == searches[0].response["hits"]["hits"][-1]["sort"]
    assert third["search_after"] == searches[1].response["hits"]["hits"][-1]["sort"]
    assert searches[0].response["hits"]["hits"][0]["sort"] == ["loss", 1795255200000000000]
    expected = data[data.name != "event.checkpoint"]
    assert_app_frames_equal(out, sorted_app(expected))


def test_job_series_with_open_bounds_send_only_the_bounds_given(fake, store):
    store.write_job_series(three_points())
    out = store.read_job_series("alps", 4242, start="2026-11-21T10:00:30Z")
    assert out["value"].tolist() == [31.0, 2.25]  # event.checkpoint sorts before loss
    body = fake.sent("POST", "/belvedere-telemetry_app/_search")[0].body
    assert body["query"]["bool"]["filter"][2:] == [
        {"range": {"ts": {"format": "strict_date_optional_time_nanos", "gte": "2026-11-21T10:00:30.000000000Z"}}}]
    assert store.read_job_series("alps", 4242)["ts"].astype("int64").tolist()[1] == 1795255200123456789


def test_job_series_of_a_store_that_has_none_yet_read_as_empty(fake, store):
    out = store.read_job_series("alps", 1)
    assert out.empty and list(out.columns) == APP_COLUMNS
    assert store.delete_job_series("alps") == 0


def test_delete_job_series_is_delete_by_query_on_their_index(fake, store):
    store.write_job_series(pd.concat([three_points(), three_points().assign(job_id=5)], ignore_index=True))
    assert store.delete_job_series("alps", 5) == 3
    assert store.delete_job_series("alps") == 3
    first, second = fake.sent("POST", "/belvedere-telemetry_app/_delete_by_query")
    assert first.body == {"query": {"bool": {"filter": [{"term": {"cluster": "alps"}}, {"term": {"job_id": 5}}]}}}
    assert second.body == {"query": {"bool": {"filter": [{"term": {"cluster": "alps"}}]}}}
    assert first.query["conflicts"] == ["proceed"] and first.query["refresh"] == ["true"]
    assert fake.docs == {}


def test_failed_job_series_bulk_items_raise_naming_them(fake, store):
    documented = fixture("bulk_errors.json")
    ok, failed = fixture("bulk_ok.json")["items"][0], documented["items"][0]["update"]
    fake.answer("PUT", "/_bulk", 200, fill(documented, items=[ok, ok, {"index": failed}]))
    with pytest.raises(BulkWriteError) as caught:
        store.write_job_series(three_points())
    assert "1 of 3 job series points were not written" in str(caught.value)
    assert "document_missing_exception" in str(caught.value) and caught.value.failed == 1


def test_an_invalid_job_series_frame_is_refused_before_any_request(fake, store):
    data = three_points()
    data.loc[1, "name"] = "bad name"
    with pytest.raises(ValueError, match="row 1, column 'name'"):
        store.write_job_series(data)
    assert fake.requests == []


def test_clear_deletes_the_job_series_index_and_template_too(fake, store):
    store.write(three_samples())
    store.write_job_series(three_points())
    assert store.clear(drop_template=True) == 3
    assert fake.sent("DELETE", "/belvedere-telemetry-2026.11.21,belvedere-telemetry-2026.11.22,"
                               "belvedere-telemetry_app")
    assert fake.docs == {} and fake.templates == {}


@pytest.mark.parametrize("options, message", [
    ({"app_index": "belvedere-telemetry-app"}, "falls under the sample indices belvedere-telemetry-\\*"),
    ({"app_index": "Jobs"}, "app_index 'Jobs' is not a valid index name"),
    ({"read_index_pattern": "belvedere-*"}, "falls under the sample indices belvedere-\\*"),
])
def test_a_job_series_index_that_sample_patterns_would_reach_is_refused(fake, options, message):
    with pytest.raises(TelemetryUnavailable, match=message):
        make_backend(fake, **options)


def test_a_chosen_job_series_index_is_used(fake):
    backend = make_backend(fake, app_index="site-jobs-metrics")
    backend.write_job_series(three_points())
    assert fake.sent("PUT", "/_index_template/site-jobs-metrics")
    assert {doc.index for doc in fake.docs.values()} == {"site-jobs-metrics"}
    assert len(backend.read_job_series("alps", 4242)) == 3


# -- retention (issue 40) -----------------------------------------------------------------------


def test_the_ilm_policies_have_one_delete_phase_per_tier_and_the_templates_name_them(fake):
    backend = make_backend(fake, retention={"raw_days": 30, "m1_days": 90, "m10_days": 365})
    backend.clock = lambda: T0
    backend.write(three_samples())
    (raw,) = fake.sent("PUT", "/_ilm/policy/belvedere-telemetry_raw")
    # raw indices age from the day in their name (its start): one day more than the retention
    assert raw.body == {"policy": {"phases": {"delete": {"min_age": "744h", "actions": {"delete": {}}}},
                                   "_meta": raw.body["policy"]["_meta"]}}
    settings = fake.templates["belvedere-telemetry"]["template"]["settings"]
    assert settings == {"index.lifecycle.name": "belvedere-telemetry_raw",
                        "index.lifecycle.parse_origination_date": True}
    backend.clock = lambda: T0 + timedelta(days=2)
    backend.expire(dry_run=True)
    for tier, hours in (("1m", 90 * 24), ("10m", 365 * 24)):
        (policy,) = fake.sent("PUT", f"/_ilm/policy/belvedere-telemetry_{tier}")
        assert policy.body["policy"]["phases"] == {"delete": {"min_age": f"{hours}h", "actions": {"delete": {}}}}
        for base in (f"belvedere-telemetry_r{tier}", f"belvedere-telemetry_net_r{tier}"):
            template = fake.templates[base]
            assert template["index_patterns"] == [f"{base}-*"]
            assert template["template"]["settings"] == {"index.lifecycle.name": f"belvedere-telemetry_{tier}"}
            assert template["template"]["mappings"]["dynamic"] == "strict"
    # rollup indices are created with the end of their span as the origination date
    (day,) = fake.sent("PUT", "/belvedere-telemetry_r1m-2026.11.21")
    assert day.body == {"settings": {"index.lifecycle.origination_date": 1795305600000}}  # 2026-11-22T00:00Z
    (month,) = fake.sent("PUT", "/belvedere-telemetry_r10m-2026.11")
    assert month.body == {"settings": {"index.lifecycle.origination_date": 1796083200000}}  # 2026-12-01T00:00Z


def test_without_manage_ilm_no_policy_is_sent_and_no_template_names_one(fake):
    backend = make_backend(fake, manage_ilm=False)
    backend.clock = lambda: T0
    backend.write(three_samples())
    backend.clock = lambda: T0 + timedelta(days=40)
    backend.expire()
    assert not fake.sent("PUT", "/_ilm/.*") and not fake.policies
    assert all("settings" not in template["template"] for template in fake.templates.values())


def test_a_rollup_bulk_sends_deterministic_ids_and_the_partial_statistics(fake, store):
    store.write(three_samples())
    store.clock = lambda: T0 + timedelta(days=2)
    store.roll_up(T0)
    bulks = [r for r in fake.sent("PUT", "/_bulk") if "_r1m-" in r.raw.decode()]
    (bulk,) = bulks
    lines = bulk.ndjson
    action, doc = lines[0], lines[1]
    assert action == {"index": {"_index": "belvedere-telemetry_r1m-2026.11.21", "_id": action["index"]["_id"]}}
    key = "1m\x1falps\x1fnid000001\x1f0\x1f1002\x1f" + str(pd.Timestamp("2026-11-21T23:59:00Z").value)
    assert action["index"]["_id"] == hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    assert doc == {"bucket": "2026-11-21T23:59:00.000000000Z", "day": "2026.11.21", "cluster": "alps",
                   "host": "nid000001", "gpu": 0, "field": 1002, "count": 1, "sum": 0.25, "min": 0.25, "max": 0.25}
    before = len(fake.docs)
    store.roll_up(T0)  # again: the same documents, replaced
    assert len(fake.docs) == before


def test_expire_deletes_exactly_the_expired_names_and_never_a_sites_index(fake, store):
    store.write(three_samples())
    # a site's index that the sample pattern reaches, and one that looks like a rollup index
    fake.docs[("belvedere-telemetry-2026.11.21-restored", "x")] = Doc("belvedere-telemetry-2026.11.21-restored", "x",
                                                                     {"ts": "2026-11-21T00:00:00Z"}, -1)
    fake.indices["belvedere-telemetry_r1m-old"] = {}
    store.clock = lambda: T0 + timedelta(days=31)  # the raw horizon is 2026-11-22 10:00: only the 21st lies before
    planned = store.expire(dry_run=True)
    assert [e.partition for e in planned] == ["belvedere-telemetry-2026.11.21"]
    assert planned[0].rows == 1 and planned[0].tier == "raw" and planned[0].source == "gpu"
    assert not fake.sent("DELETE", "/belvedere.*")  # a dry run deletes nothing
    seen = []
    gone = store.expire(progress=lambda done, total, expiry: seen.append((done, total, expiry.partition)))
    assert gone == planned and seen == [(1, 1, "belvedere-telemetry-2026.11.21")]
    deletes = [r.path for r in fake.sent("DELETE", "/belvedere.*")]
    assert deletes == ["/belvedere-telemetry-2026.11.21"]
    assert "belvedere-telemetry-2026.11.21-restored" in {doc.index for doc in fake.docs.values()}
    assert "belvedere-telemetry_r1m-old" in fake.indices
    assert store.expire() == []


def test_late_samples_of_a_complete_day_are_noted_and_rolled_up_again(fake, store):
    store.clock = lambda: T0 + timedelta(days=3)
    store.write(three_samples().iloc[:1])
    (note,) = [r for r in fake.sent("PUT", "/_bulk") if "_rollups" in r.raw.decode()]
    action, doc = note.ndjson
    assert action == {"update": {"_index": "belvedere-telemetry_rollups", "_id": "gpu-2026.11.21"}}
    assert set(doc["doc"]) == {"source", "day", "written"} and doc["doc_as_upsert"] is True
    store.expire()
    first = len(fake.sent("POST", "/belvedere-telemetry-2026.11.21/_search"))
    store.expire()  # nothing new: not rolled again
    assert len(fake.sent("POST", "/belvedere-telemetry-2026.11.21/_search")) == first
    store.write(three_samples().iloc[:1].assign(value=7.0))
    store.expire()  # the late sample: the day is rolled again, its old rollups replaced
    assert len(fake.sent("POST", "/belvedere-telemetry-2026.11.21/_search")) > first
    window = Query(start=T0, end=T0 + timedelta(days=1))
    assert store.aggregate(window, 60)["max"].tolist() == [7.0]


def test_network_samples_go_to_daily_indices_read_by_pattern(fake, store):
    from .contract import net_synthetic
    store.write_net(net_synthetic(minutes=1))
    assert {doc.index for doc in fake.docs.values() if "_net" in doc.index} == {"belvedere-telemetry_net-2026.11.21"}
    assert fake.templates["belvedere-telemetry_net"]["index_patterns"] == ["belvedere-telemetry_net-*"]
    store.read_net("alps")
    assert fake.sent("POST", "/belvedere-telemetry_net-\\*,belvedere-telemetry_net/_search")
