"""The Elasticsearch telemetry store (production), on the official ``elasticsearch`` client (8.x; it
talks to Elasticsearch 8 and 9 servers). Plain Python: no Django.

Index layout
    Samples go to plain daily indices ``<index_prefix>-YYYY.MM.DD`` (the sample's UTC day), one
    document per sample::

        {"ts": "2026-11-21T10:00:00.000000000Z", "cluster": "alps", "host": "nid000001", "gpu": 0,
         "uuid": "GPU-...", "field": 1002, "value": 0.53}

    ``ensure_template()`` installs (idempotently, PUT replaces) the composable index template
    ``<index_prefix>`` for ``<index_prefix>-*`` with explicit mappings and ``dynamic: strict``:
    ``ts`` date_nanos, ``cluster``/``host``/``uuid`` keyword, ``gpu`` short, ``field`` integer (the
    DCGM numeric id), ``value`` double. ``write`` calls it once per process (``manage_template``
    False skips it where the credentials may not manage templates and an operator installs it).
    Not a data stream: data streams are append-only, and a sample key written again must replace
    the stored value, which needs index-by-``_id`` into a concrete index. Retention is then
    deleting whole old daily indices (see "Retention"), which is cheap.

Document ids
    ``_id`` = BLAKE2b-128 hex of ``cluster \\x1f host \\x1f gpu \\x1f field \\x1f ts-in-ns`` (see
    ``document_id``). Since the index is fixed by the sample's UTC day too, re-sending a batch
    overwrites the same documents: writing is idempotent, and a new value for a key replaces the
    old one. Writes use the bulk helper with retries and exponential backoff on HTTP 429
    (``max_retries``, ``initial_backoff``); documents that still fail raise ``BulkWriteError``
    naming how many failed and the first reason. ``refresh`` ("wait_for" by default) makes written
    samples visible to the next read; high-volume collectors may set it to False.

Reading, aggregating
    ``read`` pages with a point in time and ``search_after`` on (ts as nanoseconds, ``_shard_doc``);
    ``aggregate`` is one composite aggregation (date_histogram with ``fixed_interval`` = step
    seconds, whose buckets are aligned to the epoch as ``base.bucket_start`` is: no offset, UTC;
    then the series terms) with ``stats`` and ``percentiles`` under each bucket, paged with
    ``after_key``; ``latest`` is the same composite over the series with a ``top_hits`` (size 1,
    ts descending); ``delete`` is ``delete_by_query`` with the same filters, on this store's own
    indices ``<index_prefix>-*`` only (site indices are never deleted from).

Job series (application metrics)
    Job-scoped application series (``base.APP_COLUMNS``: tokens/s, loss, checkpoint markers) go to
    one separate index, ``app_index`` (default ``<index_prefix>_app``), one document per point::

        {"ts": "2026-11-21T10:00:00.000000000Z", "cluster": "alps", "job_id": 4242, "name": "loss",
         "step": 1200, "value": 2.31}

    (``step`` is left out when unknown). Its own composable template, named like the index,
    matches only that name and maps ``ts`` date_nanos, ``cluster``/``name`` keyword, ``job_id`` and
    ``step`` long, ``value`` double, ``dynamic: strict``. The name has ``_`` where the daily sample
    indices have ``-``, so ``<index_prefix>-*`` (sample reads, deletes, a site's retention by
    pattern) never reaches it, and the two templates' patterns do not overlap; credentials need
    their index privileges on both (``<index_prefix>*`` covers them). One index, not one per day or
    month: the points are few (a job has thousands to a few hundred thousand), they are kept as
    long as the job is, and a job's are removed with ``delete_job_series`` (delete_by_query).
    ``_id`` = BLAKE2b-128 hex of ``cluster \x1f job_id \x1f name \x1f ts-in-ns``
    (``app_document_id``), so re-sending replaces. ``read_job_series`` is a search sorted by
    (name, ts-as-nanoseconds) paged with ``search_after``: that pair is unique within one job, so
    pages neither repeat nor skip a point.

Network samples (NIC and switch-port counters)
    Network samples (``base.NET_COLUMNS``) go to their own index, ``net_index`` (default
    ``<index_prefix>_net``), one document per sample::

        {"ts": "2026-11-21T10:00:00.000000000Z", "cluster": "alps", "host": "nid000001", "nic": "hsn0",
         "field": "nic_tx_packets", "value": 123456789.0}

    with its own composable template (that name only; ``ts`` date_nanos, ``cluster``/``host``/
    ``nic``/``field`` keyword, ``value`` double, ``dynamic: strict``), kept out of
    ``<index_prefix>-*`` like the job series. ``_id`` = BLAKE2b-128 hex of
    ``cluster \x1f host \x1f nic \x1f field \x1f ts-in-ns`` (``net_document_id``): re-sending
    replaces. ``read_net`` is a search sorted by (host, nic, field, ts-as-nanoseconds), unique within
    a cluster, paged with ``search_after``; ``aggregate_net`` is a composite aggregation
    (date_histogram with ``fixed_interval`` = step, then host, nic, field terms) with ``stats`` and
    two ``top_hits`` of size 1 (ts ascending: ``first``, descending: ``last``) under each bucket;
    ``delete_net`` is ``delete_by_query``. Since issue 40 the samples go to daily indices
    ``<net_index>-YYYY.MM.DD`` (the sample's UTC day; the template matches ``<net_index>-*``), so
    that retention deletes whole days; reads and deletes name ``<net_index>-*,<net_index>``, so an
    index or alias of the bare name (the single index of earlier versions) is still read.

Retention (issue 40; ``retention.py``: raw, 1-minute and 10-minute tiers, option ``retention``)
    Indices per tier, each with its own strict template (names outside ``<index_prefix>-*``)::

        raw   <index_prefix>-YYYY.MM.DD          <net_index>-YYYY.MM.DD
        1m    <index_prefix>_r1m-YYYY.MM.DD      <net_index>_r1m-YYYY.MM.DD
        10m   <index_prefix>_r10m-YYYY.MM        <net_index>_r10m-YYYY.MM
        state <index_prefix>_rollups             (which days' rollups are current)

    A GPU rollup document is one bucket of one series: ``bucket``, ``day``, cluster, host, gpu,
    field, count, sum, min, max; a network one has count, first, ``first_ts``, last, ``last_ts``,
    min, max (the times let first and last merge across buckets). They are built by the store
    itself with the composite aggregation ``aggregate`` uses, over one raw day index, and written
    with bulk under deterministic ``_id``s (tier, series, bucket), so rolling a day again replaces.
    ``expire()`` first rolls up every complete day whose raw index exists and was never rolled up,
    or was written to or deleted from since: ``write`` notes a sample for an already complete day
    in the state index (a partial update, so a note that lands during a roll-up is not lost), and a
    day rolled again has its old rollups deleted first. This also happens in a dry run: it removes
    nothing and is idempotent. Then it deletes, one exact name at a time (never a pattern, so a
    site's index that a pattern reaches stays), every index of this store's name shapes lying
    wholly before its tier's horizon; ``Expiry.rows`` is the index's ``_count``. Samples older
    than the raw horizon are dropped at write (logged): they could never be read raw, and their
    day may already be rolled up and gone.

    Reads: ``read``, ``latest``, ``read_net`` clip the window at the raw horizon, whether or not the
    pass has run. ``aggregate``/``aggregate_net`` cut the window at the horizons (the raw one rounded
    up to the minute, the 1-minute one to ten minutes) and merge the parts per bucket (counts and
    sums add, min of mins, max of maxes, first of the earliest, last of the latest). In a rollup
    part, a day whose raw index still exists is answered from its samples (the same numbers); a
    day's rollups count only once its raw index is gone, so nothing is counted twice. A rollup
    bucket counts when it starts inside the window.

    ILM (``manage_ilm``, default True): policies ``<index_prefix>_raw``, ``_1m``, ``_10m`` with one
    delete phase each, named by the templates (``index.lifecycle.name``). Raw indices are created
    by bulk writes, so their age comes from the day in their name
    (``index.lifecycle.parse_origination_date``, the day's start) and the raw delete waits
    ``raw_days + 1`` days; rollup indices are created by the pass with
    ``index.lifecycle.origination_date`` = the end of their span, so theirs is the tier's days.
    ILM is the belt: ``expire()`` deletes the same indices itself (a site without ILM privileges
    sets ``manage_ilm=False`` and keeps its bounds), and an ILM delete of a raw day the pass never
    rolled up loses that day's rollups, so run the pass daily. No rollover: raw indices are named
    by the sample's day because a re-sent sample must find and replace the same document by
    ``_id``, which a write alias rolling over by size or age cannot promise. No ``_downsample``:
    it needs time-series data streams (TSDS), which generate ``_id``s and refuse replacing a
    sample, and it keeps no first/last; "downsampling" here is the store's own rollup indices.

Reading a site's existing telemetry indices
    ``read_index_pattern`` (default ``<index_prefix>-*``; a comma-separated list is fine) names the
    indices to read, and ``field_map`` maps the canonical names to the site's document fields, for
    example ``{"ts": "@timestamp", "host": "host.name", "gpu": "gpu", "uuid": "UUID",
    "field": "metric", "value": "value", "cluster": None}``; dotted names reach into objects, and
    ``None`` for ``cluster`` or ``uuid`` means the documents have none (``cluster_name`` then gives
    the cluster every sample belongs to). ``ts`` may be a ``date`` or a ``date_nanos`` field (sorting
    uses ``numeric_type: date_nanos`` so both read alike). Where documents name the DCGM field
    (``DCGM_FI_PROF_SM_ACTIVE``, a 4.6 name, or a ``dcgmi dmon`` tag) instead of its id, set
    ``field_by_name=True``: filters then match every known name of the requested ids, and names
    are turned into ids with ``fields.lookup`` (unknown names are skipped, with a log warning).

Percentiles are approximate
    Elasticsearch computes ``percentiles`` with a TDigest. Since 8.9 (elastic/elasticsearch PR
    #96904) the default digest is a hybrid that keeps every value and interpolates exactly as
    ``aggregate_frame`` does (linear at q·(n−1), ``libs/tdigest/.../Dist.java``) while a bucket holds
    fewer than 20 × compression values (2,000 at the default compression 100), and approximates
    above that (typically 0.1–1 % error; ``percentiles_compression`` raises the limit). Older
    servers, and clusters whose ``tdigest`` execution hint is set to ``high_accuracy``, always
    approximate. So ``percentiles_exact = False``: the contract suite compares p10/p50/p90 from this
    backend with a tolerance; count, min and max are exact and mean is exact up to float rounding.

Every public method turns transport failures (refused connection, timeout, TLS, credentials,
missing privileges, a server that is not Elasticsearch) into ``TelemetryUnavailable`` with a
one-line message naming the URL and what to check.
"""
from __future__ import annotations

import fnmatch
import hashlib
import logging
import math
import re
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import pandas as pd

from .. import fields as dcgm_fields
from ..retention import DAY_NS, TIER_SECONDS, Expiry, as_ns
from .base import (
    COLUMNS, DEFAULT_STATS, NET_AGGREGATE_COLUMNS, PERCENTILES, Query, TelemetryBackend, TelemetryUnavailable,
    aggregate_frame, app_frame_from_columns, app_names, app_window, canonical, canonical_app, canonical_net,
    check_stats, deduplicate, deduplicate_app, deduplicate_net, empty_app_frame, empty_frame, empty_net_aggregate,
    latest_frame, net_filter, net_frame_from_columns, net_window, sort_samples, step_seconds, utc_from_ns,
)

log = logging.getLogger(__name__)

NS = 1_000_000_000
SERIES = ("cluster", "host", "gpu", "field")
CANONICAL_FIELDS = {name: name for name in COLUMNS}
DATE_FORMAT = "strict_date_optional_time_nanos"
_PERCENTS = {name: round(q * 100, 6) for name, q in PERCENTILES.items()}  # p10 -> 10.0


class BulkWriteError(RuntimeError):
    """Some documents of a bulk write were refused; ``errors`` holds the failed bulk items."""

    def __init__(self, message: str, failed: int, total: int, errors: list):
        super().__init__(message)
        self.failed, self.total, self.errors = failed, total, errors


def document_id(cluster: str, host: str, gpu: int, field: int, ts_ns: int) -> str:
    """The ``_id`` of a sample: the same key always gives the same id, so writes are idempotent."""
    key = "\x1f".join((str(cluster), str(host), str(int(gpu)), str(int(field)), str(int(ts_ns))))
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def app_document_id(cluster: str, job_id: int, name: str, ts_ns: int) -> str:
    """The ``_id`` of a job-series point: the same (cluster, job_id, name, ts) always gives the same id."""
    key = "\x1f".join((str(cluster), str(int(job_id)), str(name), str(int(ts_ns))))
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def net_document_id(cluster: str, host: str, nic: str, field: str, ts_ns: int) -> str:
    """The ``_id`` of a network sample: the same (cluster, host, nic, field, ts) always gives the same id."""
    key = "\x1f".join((str(cluster), str(host), str(nic), str(field), str(int(ts_ns))))
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def _valid_index_name(name) -> bool:
    return bool(name) and name == name.lower() and name[0] not in "_-+." and not any(c in name for c in ' "*\\<|,>/?#:')


def index_for_day(prefix: str, ts_ns: int) -> str:
    day = datetime.fromtimestamp(ts_ns // NS, tz=timezone.utc)
    return f"{prefix}-{day:%Y.%m.%d}"


def _as_bool(value, default: bool) -> bool:
    if value is None or value == "":
        return default
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off")
    return bool(value)


def _safe_url(url: str) -> str:
    """The URL without credentials, for messages."""
    try:
        parts = urlsplit(url)
        if parts.username or parts.password:
            host = parts.hostname or ""
            if parts.port:
                host = f"{host}:{parts.port}"
            return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        pass
    return url


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _connection_reason(exc) -> str:
    text = _one_line(getattr(exc, "message", None) or exc)
    found = re.search(r"\[Errno -?\d+\][^)>'\"]*", text)
    if found:
        return found.group(0).strip(" ,")
    for marker in ("Connection refused", "Name or service not known", "No route to host", "timed out",
                   "certificate verify failed"):
        if marker in text:
            return marker
    return text[:200]


def _api_reason(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return _one_line(f"{error.get('type', 'error')}: {error.get('reason', '')}".rstrip(": "))
    if isinstance(body, dict) and "error" in body:
        return _one_line(body["error"])
    return _one_line(getattr(exc, "message", None) or exc)[:300]


def _get(source: dict, path: str):
    """``source[path]``, where a dotted path may also be nested objects (``host.name``)."""
    if path in source:
        return source[path]
    node = source
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _float(value) -> float:
    return float("nan") if value is None else float(value)


class ElasticsearchBackend(TelemetryBackend):
    """Telemetry in Elasticsearch; see the module docstring for the layout and options."""

    name = "elasticsearch telemetry store"
    percentiles_exact = False  # TDigest: see the module docstring

    def __init__(self, url: str = "", index_prefix: str = "belvedere-telemetry", api_key=None, basic_auth=None,
                 ca_certs: str | None = None, verify_certs=None, request_timeout: float = 30.0,
                 read_index_pattern: str | None = None, field_map: dict | None = None, field_by_name=False,
                 cluster_name: str = "", page_size: int = 10_000, agg_page_size: int = 1000, keep_alive: str = "2m",
                 max_retries: int = 5, initial_backoff: float = 1.0, max_backoff: float = 60.0,
                 bulk_chunk_size: int = 2000, refresh="wait_for", manage_template=True, template_priority: int = 200,
                 number_of_shards: int | None = None, number_of_replicas: int | None = None,
                 percentiles_compression: float | None = None, app_index: str | None = None,
                 net_index: str | None = None, manage_ilm=True, retention=None, **options):
        super().__init__(index_prefix=index_prefix, read_index_pattern=read_index_pattern, field_map=field_map,
                         app_index=app_index, net_index=net_index, retention=retention, **options)
        if options:  # settings share one OPTIONS dict between backends (e.g. the embedded store's "path")
            log.debug("Elasticsearch telemetry store: ignoring option(s) %s", ", ".join(sorted(options)))
        parts = url if isinstance(url, (list, tuple)) else str(url or "").split(",")
        urls = [part.strip() for part in parts if part.strip()]
        if not urls:
            raise TelemetryUnavailable(
                "the Elasticsearch telemetry store needs a URL: set TELEMETRY_BACKENDS[...]['OPTIONS']['url'] "
                "(e.g. https://elasticsearch.example.org:9200)")
        self.urls = urls
        self.url = ", ".join(_safe_url(u) for u in urls)
        self.options["url"] = self.url  # without credentials
        for option, value in (("index_prefix", index_prefix), ("app_index", app_index), ("net_index", net_index)):
            if (option == "index_prefix" or value) and not _valid_index_name(value):
                raise TelemetryUnavailable(f"Elasticsearch {option} {value!r} is not a valid index name "
                                           "(lowercase, no spaces or \\/*?\"<>|,#:)")
        self.index_prefix = index_prefix
        self.app_index = app_index or f"{index_prefix}_app"
        self.net_index = net_index or f"{index_prefix}_net"
        self.write_pattern = f"{index_prefix}-*"
        self.read_pattern = read_index_pattern or self.write_pattern
        # Retention (issue 40): the base name of each (source, tier)'s indices; see "Retention" in the docstring.
        self.tier_bases = {("gpu", "raw"): index_prefix, ("gpu", "1m"): f"{index_prefix}_r1m",
                           ("gpu", "10m"): f"{index_prefix}_r10m", ("net", "raw"): self.net_index,
                           ("net", "1m"): f"{self.net_index}_r1m", ("net", "10m"): f"{self.net_index}_r10m"}
        self.state_index = f"{index_prefix}_rollups"
        self.net_read_target = f"{self.net_index}-*,{self.net_index}"  # daily indices, and a legacy/alias one
        for option, index, what in (("app_index", self.app_index, "job series"),
                                    ("net_index", self.net_index, "network samples"),
                                    ("net_index", f"{self.net_index}-2026.01.01", "network samples"),
                                    *((("index_prefix", f"{base}-2026.01.01", f"{tier} rollups")
                                       for (_, tier), base in self.tier_bases.items() if tier != "raw")),
                                    ("index_prefix", self.state_index, "rollup state")):
            for pattern in {self.write_pattern, *(p.strip() for p in self.read_pattern.split(","))}:
                if pattern and not pattern.startswith("-") and fnmatch.fnmatchcase(index, pattern):
                    raise TelemetryUnavailable(
                        f"Elasticsearch {option} {index!r} falls under the sample indices {pattern}: sample "
                        f"reads and deletes would reach the {what}; choose another {option}")
        if self.net_index == self.app_index:
            raise TelemetryUnavailable(f"Elasticsearch net_index and app_index are both {self.net_index!r}; "
                                       "network samples and job series need an index each")
        self.fields = dict(CANONICAL_FIELDS)
        if field_map:
            unknown = sorted(set(field_map) - set(COLUMNS))
            if unknown:
                raise TelemetryUnavailable(f"Elasticsearch field_map has unknown key(s) {', '.join(unknown)}; "
                                           f"it maps {', '.join(COLUMNS)} to document fields")
            for canonical_name, document_name in field_map.items():
                if document_name is None and canonical_name not in ("cluster", "uuid"):
                    raise TelemetryUnavailable(f"Elasticsearch field_map: {canonical_name!r} cannot be absent (None)")
                self.fields[canonical_name] = document_name
        self.field_by_name = _as_bool(field_by_name, False)
        self.cluster_name = cluster_name or ""
        self.page_size = max(1, min(int(page_size), 10_000))
        self.agg_page_size = max(1, int(agg_page_size))
        self.keep_alive = keep_alive
        self.max_retries = int(max_retries)
        self.initial_backoff = float(initial_backoff)
        self.max_backoff = float(max_backoff)
        self.bulk_chunk_size = max(1, int(bulk_chunk_size))
        self.refresh = refresh if refresh in ("wait_for", "true", "false") else _as_bool(refresh, True)
        self.manage_template = _as_bool(manage_template, True)
        self.manage_ilm = _as_bool(manage_ilm, True)
        self._retention_ready = False
        self._state_template_ready = False
        self._created: set[str] = set()
        self.template_priority = int(template_priority)
        self.number_of_shards, self.number_of_replicas = number_of_shards, number_of_replicas
        self.percentiles_compression = percentiles_compression
        self.request_timeout = float(request_timeout)
        self._template_ready = False
        self._app_template_ready = False
        self._net_template_ready = False

        from elasticsearch import Elasticsearch

        kwargs = {"request_timeout": self.request_timeout, "max_retries": 2, "retry_on_status": (502, 503, 504),
                  "retry_on_timeout": False}
        if api_key:
            kwargs["api_key"] = tuple(api_key) if isinstance(api_key, (list, tuple)) else api_key
        if basic_auth:
            if isinstance(basic_auth, str):
                user, sep, password = basic_auth.partition(":")
                if not sep:
                    raise TelemetryUnavailable("Elasticsearch basic_auth must be 'user:password'")
                basic_auth = (user, password)
            kwargs["basic_auth"] = tuple(basic_auth)
        if ca_certs:
            kwargs["ca_certs"] = ca_certs
        if verify_certs is not None and verify_certs != "":
            kwargs["verify_certs"] = _as_bool(verify_certs, True)
        try:
            self.client = Elasticsearch(urls, **kwargs)
        except (ValueError, TypeError) as exc:
            raise TelemetryUnavailable(
                f"Elasticsearch URL {self.url!r} or its options are not usable: {_one_line(exc)}") from exc
        # Reads also retry search-queue rejections (429); bulk writes leave 429 to the bulk helper's backoff.
        self._reader = self.client.options(retry_on_status=(429, 502, 503, 504))

    def __repr__(self) -> str:
        return f"<ElasticsearchBackend {self.url} {self.read_pattern}>"

    # -- errors --------------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str, target: str | None = None):
        from elasticsearch import ApiError, ConnectionError, ConnectionTimeout, SSLError, TransportError
        from elasticsearch.exceptions import AuthenticationException, AuthorizationException, UnsupportedProductError

        try:
            yield
        except (TelemetryUnavailable, BulkWriteError, ValueError):
            raise
        except ConnectionTimeout as exc:
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url} did not answer within {self.request_timeout:g} s while {action}: "
                "the cluster may be overloaded or the network slow (OPTIONS request_timeout)") from exc
        except SSLError as exc:
            raise TelemetryUnavailable(
                f"TLS connection to Elasticsearch at {self.url} failed while {action} ({_connection_reason(exc)}): "
                "check the https URL and OPTIONS ca_certs / verify_certs") from exc
        except ConnectionError as exc:
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url} is unreachable while {action} ({_connection_reason(exc)}): check the "
                "URL, that the server is running, and that this host may connect to it (firewall, proxy)") from exc
        except UnsupportedProductError as exc:
            raise TelemetryUnavailable(
                f"the server at {self.url} answered {action} but is not Elasticsearch (no 'X-Elastic-Product: "
                "Elasticsearch' header): check the URL points at Elasticsearch, not a proxy or OpenSearch") from exc
        except AuthenticationException as exc:
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url} rejected the credentials while {action} (HTTP 401): check OPTIONS "
                "api_key / basic_auth") from exc
        except AuthorizationException as exc:
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url} refused {action}{f' on {target}' if target else ''} (HTTP 403, "
                f"{_api_reason(exc)}): the credentials lack a privilege for it") from exc
        except ApiError as exc:
            hint = " (the cluster is overloaded; try again later)" if exc.status_code == 429 else ""
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url}: {action}{f' on {target}' if target else ''} failed with HTTP "
                f"{exc.status_code} {_api_reason(exc)}{hint}") from exc
        except TransportError as exc:
            raise TelemetryUnavailable(f"Elasticsearch at {self.url}: {action} failed: {_one_line(exc)[:300]}") from exc

    # -- template ------------------------------------------------------------------------------

    def template_body(self) -> dict:
        types = {"ts": {"type": "date_nanos", "format": f"{DATE_FORMAT}||epoch_millis"},
                 "cluster": {"type": "keyword"}, "host": {"type": "keyword"}, "gpu": {"type": "short"},
                 "uuid": {"type": "keyword"},
                 "field": {"type": "keyword"} if self.field_by_name else {"type": "integer"},
                 "value": {"type": "double"}}
        properties = {self.fields[name]: spec for name, spec in types.items() if self.fields[name]}
        return self._template(self.write_pattern, properties, "GPU telemetry samples, one document per sample",
                              tier="raw")

    def policy_name(self, tier: str) -> str:
        """The ILM policy of a tier's indices (both sources share it): ``<index_prefix>_raw``, ``_1m``, ``_10m``."""
        return f"{self.index_prefix}_{tier}"

    def policy_body(self, tier: str) -> dict:
        """One delete phase. Raw indices count their age from the day in their name (``parse_origination_date``:
        the day's start), so the delete waits one day more than the retention, which is when ``expire`` deletes a
        day lying wholly before the horizon; rollup indices are created with ``origination_date`` = the end of
        their span, so theirs is the retention itself."""
        days = self.retention.days(tier) + (1 if tier == "raw" else 0)
        return {"phases": {"delete": {"min_age": f"{math.ceil(days * 24)}h", "actions": {"delete": {}}}},
                "_meta": {"managed_by": "belvedere", "description": f"telemetry {tier} tier: delete "
                          f"{self.retention.days(tier):g} days after the end of the index's span"}}

    def _template(self, pattern: str, properties: dict, description: str, tier: str | None = None) -> dict:
        """A strict composable template for the indices ``pattern`` matches, with the shard and replica settings
        (and, for a tier's indices with ``manage_ilm``, the tier's ILM policy)."""
        settings = {}
        if tier is not None and self.manage_ilm:
            settings["index.lifecycle.name"] = self.policy_name(tier)
            if tier == "raw":
                settings["index.lifecycle.parse_origination_date"] = True
        if self.number_of_shards is not None:
            settings["number_of_shards"] = int(self.number_of_shards)
        if self.number_of_replicas is not None:
            settings["number_of_replicas"] = int(self.number_of_replicas)
        template = {"mappings": {"dynamic": "strict", "properties": properties}}
        if settings:
            template["settings"] = settings
        return {"index_patterns": [pattern], "priority": self.template_priority, "template": template,
                "_meta": {"managed_by": "belvedere", "description": description}}

    def _put_template(self, name: str, body: dict, action: str) -> None:
        """Install or update the template ``name`` (idempotent: PUT replaces); a 403 says how to install it once."""
        try:
            with self._errors(action, f"_index_template/{name}"):
                self.client.indices.put_index_template(name=name, **body)
        except TelemetryUnavailable as exc:
            if "HTTP 403" not in str(exc):
                raise
            raise TelemetryUnavailable(f"{exc}; install it once as a user with manage_index_templates and set "
                                       "OPTIONS manage_template=False") from exc.__cause__

    def ensure_template(self) -> None:
        """Install or update the index template ``<index_prefix>`` (idempotent: PUT replaces)."""
        self.ensure_policies()
        self._put_template(self.index_prefix, self.template_body(), "installing the index template")
        self._template_ready = True

    def app_template_body(self) -> dict:
        """The composable template of the job-series index (``app_index``, that name only)."""
        properties = {"ts": {"type": "date_nanos", "format": f"{DATE_FORMAT}||epoch_millis"},
                      "cluster": {"type": "keyword"}, "job_id": {"type": "long"}, "name": {"type": "keyword"},
                      "step": {"type": "long"}, "value": {"type": "double"}}
        return self._template(self.app_index, properties,
                              "job-scoped application series, one document per (cluster, job_id, name, ts)")

    def ensure_app_template(self) -> None:
        """Install or update the job-series index template, named like the index (idempotent)."""
        self._put_template(self.app_index, self.app_template_body(), "installing the job series index template")
        self._app_template_ready = True

    def net_template_body(self) -> dict:
        """The composable template of the network-sample index (``net_index``, that name only)."""
        properties = {"ts": {"type": "date_nanos", "format": f"{DATE_FORMAT}||epoch_millis"},
                      "cluster": {"type": "keyword"}, "host": {"type": "keyword"}, "nic": {"type": "keyword"},
                      "field": {"type": "keyword"}, "value": {"type": "double"}}
        return self._template(f"{self.net_index}-*", properties, "network samples (NIC and switch-port counters), "
                              "one document per (cluster, host, nic, field, ts)", tier="raw")

    def ensure_net_template(self) -> None:
        """Install or update the network-sample index template, named like the index (idempotent)."""
        self.ensure_policies()
        self._put_template(self.net_index, self.net_template_body(), "installing the network sample index template")
        self._net_template_ready = True

    # -- writing -------------------------------------------------------------------------------

    def _field_value(self, field_id: int):
        if not self.field_by_name:
            return int(field_id)
        known = dcgm_fields.FIELDS.get(int(field_id))
        return known.display_name if known else str(int(field_id))

    def _actions(self, batch: pd.DataFrame):
        nanos = batch["ts"].astype("int64").to_numpy()
        seconds = batch["ts"].dt.strftime("%Y-%m-%dT%H:%M:%S").to_numpy(object)
        days = batch["ts"].dt.strftime("%Y.%m.%d").to_numpy(object)
        names = self.fields
        columns = (batch["cluster"].to_numpy(object), batch["host"].to_numpy(object), batch["gpu"].to_numpy(),
                   batch["uuid"].to_numpy(object), batch["field"].to_numpy(), batch["value"].to_numpy())
        for cluster, host, gpu, uuid, field, value, ns, second, day in zip(*columns, nanos, seconds, days):
            source = {names["ts"]: f"{second}.{int(ns) % NS:09d}Z", names["host"]: host, names["gpu"]: int(gpu),
                      names["field"]: self._field_value(field), names["value"]: float(value)}
            if names["cluster"]:
                source[names["cluster"]] = cluster
            if names["uuid"]:
                source[names["uuid"]] = uuid
            yield {"_op_type": "index", "_index": f"{self.index_prefix}-{day}",
                   "_id": document_id(cluster, host, gpu, field, ns), "_source": source}

    def write(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = deduplicate(canonical(frame))
        values = batch["value"].to_numpy(float)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(f"telemetry values must be finite: {int(bad.sum())} of {len(batch)} are NaN or infinite "
                             "(nothing was written)")
        batch = self._keep_after_raw_horizon(batch, "samples")
        if not len(batch):
            return 0
        if self.manage_template and not self._template_ready:
            self.ensure_template()
        written = self._bulk(self._actions(batch), len(batch), "writing samples (bulk)", self.write_pattern, "samples")
        self._mark_written("gpu", batch)
        return written

    def _bulk(self, actions, total: int, action: str, target: str, noun: str) -> int:
        """Send ``actions`` with the bulk helper (429s retried with backoff); raises BulkWriteError
        when documents still failed, TelemetryUnavailable when the server could not be used."""
        from elasticsearch.helpers import streaming_bulk

        written, failures = 0, []
        with self._errors(action, target):
            for ok, item in streaming_bulk(
                    self.client, actions, chunk_size=self.bulk_chunk_size, raise_on_error=False,
                    raise_on_exception=True, max_retries=self.max_retries, initial_backoff=self.initial_backoff,
                    max_backoff=self.max_backoff, refresh=self.refresh):
                if ok:
                    written += 1
                else:
                    failures.append(item)
        if failures:
            raise self._bulk_error(failures, total, noun)
        return written

    def _bulk_error(self, failures: list, total: int, noun: str = "samples") -> BulkWriteError:
        op, first = next(iter(failures[0].items()))
        error = first.get("error")
        if isinstance(error, dict):
            reason = f"{error.get('type', 'error')}: {error.get('reason', '')}"
            caused = error.get("caused_by")
            if isinstance(caused, dict) and caused.get("reason"):
                reason += f" (caused by {caused.get('type', '')}: {caused['reason']})"
        else:
            reason = str(error or "unknown error")
        where = f"document {first.get('_id')} in {first.get('_index')}, HTTP {first.get('status')}"
        message = (f"Elasticsearch at {self.url}: {len(failures)} of {total} {noun} were not written; first failure "
                   f"({where}): {_one_line(reason)}. The other {noun} were written; re-sending the batch is safe")
        return BulkWriteError(message, len(failures), total, failures)

    # -- queries -------------------------------------------------------------------------------

    def _field_terms(self, ids) -> list:
        if not self.field_by_name:
            return [int(i) for i in ids]
        terms = []
        for field_id in ids:
            known = dcgm_fields.FIELDS.get(int(field_id))
            terms.extend(known.names if known else (str(int(field_id)),))
        return terms

    def _query(self, query: Query, ns: tuple | None = None) -> dict | None:
        """The bool filter for ``query`` (``ns``: its window as nanoseconds instead); None when it can match nothing."""
        names = self.fields
        lo, hi = ns if ns is not None else (query.start, query.end)
        filters = [{"range": {names["ts"]: {"gte": _iso(lo), "lt": _iso(hi), "format": DATE_FORMAT}}}]
        if query.cluster is not None:
            if names["cluster"]:
                filters.append({"term": {names["cluster"]: query.cluster}})
            elif query.cluster != self.cluster_name:
                return None
        for canonical_name, values in (("host", query.hosts), ("gpu", query.gpus), ("field", query.fields)):
            if values is None:
                continue
            if len(values) == 0:
                return None
            if canonical_name == "host":
                terms = [str(v) for v in values]
            elif canonical_name == "gpu":
                terms = [int(v) for v in values]
            else:
                terms = self._field_terms(values)
            filters.append({"terms": {names[canonical_name]: terms}})
        return {"bool": {"filter": filters}}

    def _ts_sort(self, order: str) -> dict:
        return {self.fields["ts"]: {"order": order, "numeric_type": "date_nanos", "unmapped_type": "date_nanos"}}

    def _source_fields(self) -> list:
        return [name for name in self.fields.values() if name]

    def _field_id(self, value):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        try:
            return dcgm_fields.lookup(value).id
        except (KeyError, TypeError):
            if isinstance(value, str) and value.isascii() and value.strip().lstrip("-").isdigit():
                return int(value)
            return None

    def _rows_to_frame(self, rows: dict, skipped: int) -> pd.DataFrame:
        if skipped:
            log.warning("%s: skipped %d document(s) whose DCGM field is not in the registry", self.url, skipped)
        if not rows["ts"]:
            return empty_frame()
        ts = [value if isinstance(value, int) else _parse_ts(value) for value in rows["ts"]]
        frame = pd.DataFrame({
            "ts": utc_from_ns(ts), "cluster": rows["cluster"],
            "host": rows["host"], "gpu": rows["gpu"], "uuid": rows["uuid"], "field": rows["field"],
            "value": [_float(v) for v in rows["value"]]})
        out = canonical(frame)
        for column in ("cluster", "host", "uuid"):
            out[column] = out[column].astype(object)
        return out

    def _collect(self, rows: dict, hit: dict) -> bool:
        """Append one hit to ``rows``; False when its field is unknown (skipped)."""
        source = hit.get("_source") or {}
        names = self.fields
        field = self._field_id(_get(source, names["field"]))
        if field is None:
            return False
        sort = hit.get("sort")
        rows["ts"].append(sort[0] if sort and isinstance(sort[0], int) else _get(source, names["ts"]))
        rows["cluster"].append(_get(source, names["cluster"]) if names["cluster"] else self.cluster_name)
        rows["host"].append(_get(source, names["host"]))
        rows["gpu"].append(_get(source, names["gpu"]))
        rows["uuid"].append((_get(source, names["uuid"]) if names["uuid"] else None) or "")
        rows["field"].append(field)
        rows["value"].append(_get(source, names["value"]))
        return True

    def _raw_window(self, query: Query) -> tuple | None:
        """``query``'s window clipped at the raw horizon, as nanoseconds; None when nothing of it is left."""
        lo = max(as_ns(query.start), self.retention.horizon_ns("raw", self.now()))
        hi = as_ns(query.end)
        return (lo, hi) if lo < hi else None

    def read(self, query: Query) -> pd.DataFrame:
        window = self._raw_window(query)
        body_query = self._query(query, window) if window else None
        if body_query is None:
            return empty_frame()
        rows = {name: [] for name in COLUMNS}
        skipped = 0
        with self._errors("reading samples", self.read_pattern):
            pit = self._reader.open_point_in_time(index=self.read_pattern, keep_alive=self.keep_alive,
                                                  ignore_unavailable=True)["id"]
            try:
                after = None
                while True:
                    extra = {"search_after": after} if after is not None else {}
                    response = self._reader.search(
                        pit={"id": pit, "keep_alive": self.keep_alive}, query=body_query, size=self.page_size,
                        sort=[self._ts_sort("asc"), {"_shard_doc": "asc"}], source=self._source_fields(),
                        track_total_hits=False, allow_partial_search_results=False, **extra)
                    body = response.body
                    self._check_shards(body, "reading samples")
                    pit = body.get("pit_id", pit)
                    hits = (body.get("hits") or {}).get("hits") or []
                    for hit in hits:
                        if not self._collect(rows, hit):
                            skipped += 1
                    if len(hits) < self.page_size:
                        break
                    after = hits[-1]["sort"]
            finally:
                try:
                    self._reader.close_point_in_time(id=pit)
                except Exception:  # the PIT expires by itself after keep_alive
                    log.debug("closing the point in time failed", exc_info=True)
        return sort_samples(self._rows_to_frame(rows, skipped))

    def _check_shards(self, body: dict, action: str) -> None:
        shards = body.get("_shards") or {}
        if shards.get("failed"):
            failures = shards.get("failures") or [{}]
            reason = (failures[0].get("reason") or {}) if isinstance(failures[0], dict) else {}
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url}: {action} failed on {shards['failed']} of {shards.get('total')} shards "
                f"({_one_line(reason.get('type', ''))}: {_one_line(reason.get('reason', ''))}); "
                "results would be incomplete")
        if body.get("timed_out"):
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url}: {action} timed out on the server; results would be incomplete")

    def _composite(self, index: str, query: dict, sources: list, sub_aggs: dict, size: int, action: str):
        """Every bucket of a composite aggregation on ``index``, page by page."""
        after = None
        while True:
            composite = {"size": size, "sources": sources}
            if after is not None:
                composite["after"] = after
            response = self._reader.search(
                index=index, size=0, query=query, track_total_hits=False, ignore_unavailable=True,
                allow_partial_search_results=False, aggs={"series": {"composite": composite, "aggs": sub_aggs}})
            body = response.body
            self._check_shards(body, action)
            result = (body.get("aggregations") or {}).get("series") or {}
            buckets = result.get("buckets") or []
            yield from buckets
            after = result.get("after_key")
            if not buckets or after is None or len(buckets) < size:
                return

    def _series_sources(self) -> list:
        sources = []
        for name in SERIES:
            document_name = self.fields[name]
            if document_name:
                sources.append({name: {"terms": {"field": document_name}}})
        return sources

    def aggregate(self, query: Query, step, stats=DEFAULT_STATS) -> pd.DataFrame:
        """Per bucket and series, each part of the window from the finest tier still holding it (see "Retention"):
        raw samples after the raw horizon, rollups before it; a step finer than the tier holding the window's start,
        or percentiles before the raw horizon, is a TierError."""
        step = step_seconds(step)
        stats = check_stats(stats)
        now = self.now()
        percents = [_PERCENTS[name] for name in stats if name in PERCENTILES]
        self.retention.check_step(query.start, now, step, percentiles=bool(percents), end=query.end)
        if self._query(query) is None:
            return aggregate_frame(empty_frame(), step, stats)
        records = []
        with self._errors("aggregating samples", self.read_pattern):
            for tier, lo, hi in self._parts(as_ns(query.start), as_ns(query.end), now):
                body_query = self._query(query, (lo, hi))
                if tier == "raw":
                    records += self._gpu_partials(self.read_pattern, body_query, step, stats)
                    continue
                raw_days, rolled_days = self._day_split("gpu", lo, hi)
                if raw_days:
                    records += self._gpu_partials(",".join(raw_days), body_query, step, stats)
                if rolled_days:
                    records += self._gpu_rollup_partials(tier, self._rollup_query(query, lo, hi, rolled_days), step)
        if not records:
            return aggregate_frame(empty_frame(), step, stats)
        out = pd.DataFrame.from_records(records)
        out["bucket"] = utc_from_ns(out["bucket"].astype("int64").to_numpy() * 1_000_000)
        out["cluster"] = out["cluster"].astype(str)
        out["host"] = out["host"].astype(str)
        out["gpu"] = out["gpu"].astype("int16")
        out["field"] = out["field"].astype("int32")
        if out.duplicated(["bucket", *SERIES]).any():  # parts of one bucket, or one id under two field names
            out = _merge_buckets(out, stats)
        out = out.sort_values(["bucket", *SERIES], kind="stable", ignore_index=True)
        out["count"] = out["count"].astype("int64")
        for name in stats:
            out[name] = out[name].astype("float64")
        return out[["bucket", *SERIES, "count", *stats]]

    def _gpu_partials(self, target: str, body_query: dict | None, step: int, stats=DEFAULT_STATS,
                      what: str = "aggregating samples") -> list[dict]:
        """Per bucket of ``step`` and series of raw samples in ``target``: count, sum, mean, min, max (and the
        percentiles in ``stats``), field ids canonical. ``body_query`` None: every sample."""
        value = self.fields["value"]
        sub_aggs = {"stats": {"stats": {"field": value}}}
        percents = [_PERCENTS[name] for name in stats if name in PERCENTILES]
        if percents:
            spec = {"field": value, "percents": percents}
            if self.percentiles_compression:
                spec["tdigest"] = {"compression": float(self.percentiles_compression)}
            sub_aggs["percentiles"] = {"percentiles": spec}
        # fixed_interval with no offset and UTC: bucket keys are multiples of the step since the epoch.
        sources = [{"bucket": {"date_histogram": {"field": self.fields["ts"], "fixed_interval": f"{step}s"}}},
                   *self._series_sources()]
        records = []
        skipped = 0
        for bucket in self._composite(target, body_query, sources, sub_aggs, self.agg_page_size, what):
            key = bucket["key"]
            field = self._field_id(key["field"])
            if field is None:
                skipped += 1
                continue
            numbers = bucket.get("stats") or {}
            record = {"bucket": int(key["bucket"]), "cluster": key.get("cluster", self.cluster_name),
                      "host": key["host"], "gpu": key["gpu"], "field": field,
                      "count": int(numbers.get("count") or 0), "sum": _float(numbers.get("sum")),
                      "mean": _float(numbers.get("avg")), "min": _float(numbers.get("min")),
                      "max": _float(numbers.get("max"))}
            if percents:
                values = {float(k): v for k, v in ((bucket.get("percentiles") or {}).get("values") or {}).items()}
                for name in stats:
                    if name in PERCENTILES:
                        record[name] = _float(values.get(_PERCENTS[name]))
            records.append(record)
        if skipped:
            log.warning("%s: skipped %d bucket(s) whose DCGM field is not in the registry", self.url, skipped)
        return records

    def _gpu_rollup_partials(self, tier: str, body_query: dict, step: int) -> list[dict]:
        """The same partials (count, sum, min, max) from a rollup tier's documents."""
        sources = [{"bucket": {"date_histogram": {"field": "bucket", "fixed_interval": f"{step}s"}}},
                   *({name: {"terms": {"field": name}}} for name in SERIES)]
        sub_aggs = {name: {kind: {"field": name}} for name, kind in
                    (("count", "sum"), ("sum", "sum"), ("min", "min"), ("max", "max"))}
        records = []
        target = f"{self.tier_bases[('gpu', tier)]}-*"
        for bucket in self._composite(target, body_query, sources, sub_aggs, self.agg_page_size,
                                      f"aggregating {tier} rollups"):
            key = bucket["key"]
            numbers = {name: _float((bucket.get(name) or {}).get("value")) for name in sub_aggs}
            count = int(round(numbers["count"]))
            records.append({"bucket": int(key["bucket"]), "cluster": key["cluster"], "host": key["host"],
                            "gpu": key["gpu"], "field": int(key["field"]), "count": count, "sum": numbers["sum"],
                            "mean": numbers["sum"] / count if count else float("nan"), "min": numbers["min"],
                            "max": numbers["max"]})
        return records

    def latest(self, query: Query) -> pd.DataFrame:
        window = self._raw_window(query)
        body_query = self._query(query, window) if window else None
        if body_query is None:
            return empty_frame()
        sub_aggs = {"last": {"top_hits": {"size": 1, "sort": [self._ts_sort("desc")],
                                          "_source": {"includes": self._source_fields()}}}}
        rows = {name: [] for name in COLUMNS}
        skipped = 0
        with self._errors("reading the latest samples", self.read_pattern):
            for bucket in self._composite(self.read_pattern, body_query, self._series_sources(), sub_aggs,
                                          min(self.agg_page_size, 500), "reading the latest samples"):
                for hit in ((bucket.get("last") or {}).get("hits") or {}).get("hits") or []:
                    if not self._collect(rows, hit):
                        skipped += 1
        frame = self._rows_to_frame(rows, skipped)
        return latest_frame(frame) if len(frame) else frame

    # -- maintenance ---------------------------------------------------------------------------

    def delete(self, query: Query) -> int:
        """Delete the window's samples from this store's own indices (``<index_prefix>-*``)."""
        body_query = self._query(query)
        if body_query is None:
            return 0
        return self._delete_by_query(self.write_pattern, body_query, "deleting samples")

    def _delete_by_query(self, index: str, query: dict, action: str) -> int:
        """Delete what ``query`` matches in ``index`` (refreshed, version conflicts skipped); how many documents.
        TelemetryUnavailable when the answer lists failures."""
        with self._errors(action, index):
            body = self.client.delete_by_query(
                index=index, query=query, conflicts="proceed", refresh=True, ignore_unavailable=True,
                allow_no_indices=True, wait_for_completion=True).body
        failures = body.get("failures") or []
        if failures:
            first = failures[0] if isinstance(failures[0], dict) else {}
            cause = first.get("cause") or {}
            raise TelemetryUnavailable(
                f"Elasticsearch at {self.url}: {action} left {len(failures)} failure(s), first: "
                f"{_one_line(cause.get('type', ''))}: {_one_line(cause.get('reason', first))}; "
                f"deleted {body.get('deleted', 0)}")
        return int(body.get("deleted") or 0)

    # -- job series ----------------------------------------------------------------------------

    def _app_actions(self, batch: pd.DataFrame):
        nanos = batch["ts"].astype("int64").to_numpy()
        seconds = batch["ts"].dt.strftime("%Y-%m-%dT%H:%M:%S").to_numpy(object)
        steps = batch["step"].to_numpy(object, na_value=None)
        columns = (batch["cluster"].to_numpy(object), batch["job_id"].to_numpy("int64"),
                   batch["name"].to_numpy(object), steps, batch["value"].to_numpy("float64"))
        for cluster, job_id, name, step, value, ns, second in zip(*columns, nanos, seconds):
            source = {"ts": f"{second}.{int(ns) % NS:09d}Z", "cluster": cluster, "job_id": int(job_id), "name": name,
                      "value": float(value)}
            if step is not None:
                source["step"] = int(step)
            yield {"_op_type": "index", "_index": self.app_index, "_id": app_document_id(cluster, job_id, name, ns),
                   "_source": source}

    def write_job_series(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = deduplicate_app(canonical_app(frame))
        if self.manage_template and not self._app_template_ready:
            self.ensure_app_template()
        return self._bulk(self._app_actions(batch), len(batch), "writing job series (bulk)", self.app_index,
                          "job series points")

    def _app_query(self, cluster: str, job_id: int | None, names=None, lo: int | None = None,
                   hi: int | None = None) -> dict:
        filters = [{"term": {"cluster": str(cluster)}}]
        if job_id is not None:
            filters.append({"term": {"job_id": int(job_id)}})
        if names is not None:
            filters.append({"terms": {"name": list(names)}})
        filters.extend(_ts_range(lo, hi))
        return {"bool": {"filter": filters}}

    def read_job_series(self, cluster: str, job_id: int, names=None, start=None, end=None) -> pd.DataFrame:
        lo, hi = app_window(start, end)
        names = app_names(names)
        if names is not None and not names:
            return empty_app_frame()
        query = self._app_query(cluster, int(job_id), names, lo, hi)
        # (name, ts) is unique within one job: search_after on it pages without repeats or gaps
        sort = [{"name": {"order": "asc"}}, {"ts": {"order": "asc", "numeric_type": "date_nanos"}}]
        rows = self._sorted_rows(self.app_index, query, sort, ("cluster", "job_id", "name", "step", "value"),
                                 "reading job series")
        return app_frame_from_columns(rows["ts"], rows["cluster"], rows["job_id"], rows["name"], rows["step"],
                                      [_float(v) for v in rows["value"]])

    def delete_job_series(self, cluster: str, job_id: int | None = None) -> int:
        query = self._app_query(cluster, None if job_id is None else int(job_id))
        return self._delete_by_query(self.app_index, query, "deleting job series")

    # -- network samples -----------------------------------------------------------------------

    def _net_actions(self, batch: pd.DataFrame):
        nanos = batch["ts"].astype("int64").to_numpy()
        seconds = batch["ts"].dt.strftime("%Y-%m-%dT%H:%M:%S").to_numpy(object)
        columns = (batch["cluster"].to_numpy(object), batch["host"].to_numpy(object), batch["nic"].to_numpy(object),
                   batch["field"].to_numpy(object), batch["value"].to_numpy("float64"))
        for cluster, host, nic, field, value, ns, second in zip(*columns, nanos, seconds):
            day = datetime.fromtimestamp(int(ns) // NS, tz=timezone.utc)
            yield {"_op_type": "index", "_index": f"{self.net_index}-{day:%Y.%m.%d}",
                   "_id": net_document_id(cluster, host, nic, field, ns),
                   "_source": {"ts": f"{second}.{int(ns) % NS:09d}Z", "cluster": cluster, "host": host, "nic": nic,
                               "field": field, "value": float(value)}}

    def write_net(self, frame: pd.DataFrame) -> int:
        if frame is None or len(frame) == 0:
            return 0
        batch = self._keep_after_raw_horizon(deduplicate_net(canonical_net(frame)), "network samples")
        if not len(batch):
            return 0
        if self.manage_template and not self._net_template_ready:
            self.ensure_net_template()
        written = self._bulk(self._net_actions(batch), len(batch), "writing network samples (bulk)",
                             f"{self.net_index}-*", "network samples")
        self._mark_written("net", batch)
        return written

    def _net_query(self, cluster, hosts=None, nics=None, fields=None, start=None, end=None, *, ns=None) -> dict | None:
        """The bool filter of a network read; None when it can match nothing. ``ns``: (lo, hi) nanoseconds instead
        of start and end."""
        lo, hi = ns if ns is not None else net_window(start, end)
        filters = [{"term": {"cluster": str(cluster)}}]
        for column, values in (("host", net_filter(hosts, "hosts")), ("nic", net_filter(nics, "nics")),
                               ("field", net_filter(fields, "fields"))):
            if values is not None:
                if not values:
                    return None
                filters.append({"terms": {column: list(values)}})
        filters.extend(_ts_range(lo, hi))
        return {"bool": {"filter": filters}}

    def read_net(self, cluster: str, hosts=None, nics=None, fields=None, start=None, end=None) -> pd.DataFrame:
        lo, hi = net_window(start, end)
        lo = max(lo if lo is not None else -2**63, self.retention.horizon_ns("raw", self.now()))  # raw tier only
        query = None if hi is not None and hi <= lo else self._net_query(cluster, hosts, nics, fields, ns=(lo, hi))
        if query is None:
            return net_frame_from_columns([], [], [], [], [], [])
        # (host, nic, field, ts) is unique within a cluster: search_after pages without repeats or gaps
        sort = [{"host": {"order": "asc"}}, {"nic": {"order": "asc"}}, {"field": {"order": "asc"}},
                {"ts": {"order": "asc", "numeric_type": "date_nanos"}}]
        rows = self._sorted_rows(self.net_read_target, query, sort, ("cluster", "host", "nic", "field", "value"),
                                 "reading network samples")
        return net_frame_from_columns(rows["ts"], rows["cluster"], rows["host"], rows["nic"], rows["field"],
                                      [_float(v) for v in rows["value"]])

    def _sorted_rows(self, index: str, query: dict, sort: list, columns: tuple, what: str,
                     ts_from_sort: bool = True) -> dict:
        """Every document of ``query`` in ``sort`` order, paged with ``search_after`` (the sort is unique, its last
        key ``ts``): ``{"ts": [ns, ...], column: [...]}`` with each column as the documents hold it."""
        rows = {name: [] for name in ("ts", *columns)}
        with self._errors(what, index):
            after = None
            while True:
                extra = {"search_after": after} if after is not None else {}
                response = self._reader.search(
                    index=index, query=query, size=self.page_size, sort=sort, source=list(columns),
                    track_total_hits=False, ignore_unavailable=True, allow_partial_search_results=False, **extra)
                body = response.body
                self._check_shards(body, what)
                hits = (body.get("hits") or {}).get("hits") or []
                for hit in hits:
                    source = hit.get("_source") or {}
                    if ts_from_sort:
                        rows["ts"].append(int(hit["sort"][-1]))
                    for column in columns:
                        rows[column].append(source.get(column))
                if len(hits) < self.page_size:
                    break
                after = hits[-1]["sort"]
        return rows

    def aggregate_net(self, cluster: str, step, hosts=None, nics=None, fields=None, start=None,
                      end=None) -> pd.DataFrame:
        """Per bucket: count, first, last, min, max, each part of the window from the finest tier still holding it
        (see "Retention"). ``start`` None reads from the horizon of the finest tier whose resolution divides the
        step; a ``start`` only coarser tiers hold at that step is a TierError."""
        step = step_seconds(step)
        now = self.now()
        lo, hi = net_window(start, end)
        if lo is None:
            tier = "raw" if step % 60 else ("1m" if step % 600 else "10m")
            lo = self.retention.horizon_ns(tier, now)
        else:
            self.retention.check_step(lo, now, step, end=hi)
        if self._net_query(cluster, hosts, nics, fields) is None or (hi is not None and hi <= lo):
            return empty_net_aggregate()
        records = []
        with self._errors("aggregating network samples", self.net_read_target):
            for tier, part_lo, part_hi in self._parts(lo, hi, now):
                query = self._net_query(cluster, hosts, nics, fields, ns=(part_lo, part_hi))
                if tier == "raw":
                    records += self._net_partials(self.net_read_target, query, step)
                    continue
                raw_days, rolled_days = self._day_split("net", part_lo, part_hi)
                if raw_days:
                    records += self._net_partials(",".join(raw_days), query, step)
                if rolled_days:
                    records += self._net_rollup_partials(tier, self._rollup_filter(query, rolled_days), step)
        if not records:
            return empty_net_aggregate()
        out = _merge_net(pd.DataFrame.from_records(records))
        out["bucket"] = utc_from_ns(out["bucket"].astype("int64").to_numpy() * 1_000_000)
        for column in ("cluster", "host", "nic", "field"):
            out[column] = out[column].astype(object)
        out["count"] = out["count"].astype("int64")
        return out[NET_AGGREGATE_COLUMNS]

    def _net_partials(self, target: str, query: dict | None, step: int, what: str = "aggregating network samples"):
        """Per bucket of ``step`` and (cluster, host, nic, field) of raw network samples: count, first (value and
        time), last, min, max. ``query`` None: every sample of ``target``."""
        sources = [{"bucket": {"date_histogram": {"field": "ts", "fixed_interval": f"{step}s"}}},
                   {"cluster": {"terms": {"field": "cluster"}}}, {"host": {"terms": {"field": "host"}}},
                   {"nic": {"terms": {"field": "nic"}}}, {"field": {"terms": {"field": "field"}}}]
        sub_aggs = {"stats": {"stats": {"field": "value"}}}
        for name, order in (("first", "asc"), ("last", "desc")):
            sub_aggs[name] = {"top_hits": {"size": 1, "sort": [{"ts": {"order": order, "numeric_type": "date_nanos"}}],
                                           "_source": {"includes": ["value"]}}}
        records = []
        for bucket in self._composite(target, query, sources, sub_aggs, min(self.agg_page_size, 500), what):
            key, numbers = bucket["key"], bucket.get("stats") or {}
            record = {"bucket": int(key["bucket"]), "cluster": key["cluster"], "host": key["host"], "nic": key["nic"],
                      "field": key["field"], "count": int(numbers.get("count") or 0),
                      "min": _float(numbers.get("min")), "max": _float(numbers.get("max"))}
            for name in ("first", "last"):
                hits = ((bucket.get(name) or {}).get("hits") or {}).get("hits") or []
                record[name] = _float((hits[0].get("_source") or {}).get("value")) if hits else float("nan")
                record[f"{name}_ts"] = int(hits[0]["sort"][0]) if hits else 0
            records.append(record)
        return records

    def _net_rollup_partials(self, tier: str, query: dict, step: int):
        """The same partials from a rollup tier's documents (``step`` a multiple of the tier's resolution)."""
        sources = [{"bucket": {"date_histogram": {"field": "bucket", "fixed_interval": f"{step}s"}}},
                   {"cluster": {"terms": {"field": "cluster"}}}, {"host": {"terms": {"field": "host"}}},
                   {"nic": {"terms": {"field": "nic"}}}, {"field": {"terms": {"field": "field"}}}]
        sub_aggs = {"count": {"sum": {"field": "count"}}, "min": {"min": {"field": "min"}},
                    "max": {"max": {"field": "max"}}}
        for name, order in (("first", "asc"), ("last", "desc")):
            sub_aggs[name] = {"top_hits": {"size": 1, "sort": [{f"{name}_ts": {"order": order,
                                                                                "numeric_type": "date_nanos"}}],
                                           "_source": {"includes": [name]}}}
        records = []
        target = f"{self.tier_bases[('net', tier)]}-*"
        for bucket in self._composite(target, query, sources, sub_aggs, min(self.agg_page_size, 500),
                                      f"aggregating {tier} network rollups"):
            key = bucket["key"]
            record = {"bucket": int(key["bucket"]), "cluster": key["cluster"], "host": key["host"], "nic": key["nic"],
                      "field": key["field"], "count": int(round(_float((bucket.get("count") or {}).get("value")))),
                      "min": _float((bucket.get("min") or {}).get("value")),
                      "max": _float((bucket.get("max") or {}).get("value"))}
            for name in ("first", "last"):
                hits = ((bucket.get(name) or {}).get("hits") or {}).get("hits") or []
                record[name] = _float((hits[0].get("_source") or {}).get(name)) if hits else float("nan")
                record[f"{name}_ts"] = int(hits[0]["sort"][0]) if hits else 0
            records.append(record)
        return records

    def delete_net(self, cluster: str, hosts=None) -> int:
        query = self._net_query(cluster, hosts)
        if query is None:
            return 0
        return self._delete_by_query(self.net_read_target, query, "deleting network samples")

    # -- retention (issue 40) --------------------------------------------------------------------

    def index_name(self, source: str, tier: str, day: int) -> str:
        """The index of ``source`` ("gpu"/"net") and ``tier`` holding UTC day number ``day``."""
        moment = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(days=int(day))
        return f"{self.tier_bases[(source, tier)]}-{moment:%Y.%m}" + ("" if tier == "10m" else f".{moment:%d}")

    def _parse_index(self, name: str):
        """(source, tier, first_ns, last_ns) of one of this store's tier indices, by its exact name; None for any
        other name (a site's index that merely matches a pattern is never this store's to delete)."""
        for (source, tier), base in self.tier_bases.items():
            if not name.startswith(base + "-"):
                continue
            found = re.fullmatch(r"(\d{4})\.(\d{2})" + ("" if tier == "10m" else r"\.(\d{2})"), name[len(base) + 1:])
            if not found:
                continue
            try:
                year, month = int(found.group(1)), int(found.group(2))
                first = datetime(year, month, int(found.group(3)) if tier != "10m" else 1, tzinfo=timezone.utc)
            except ValueError:
                continue
            last = (first + timedelta(days=1) if tier != "10m"
                    else datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc))
            return source, tier, as_ns(first), as_ns(last)
        return None

    def _owned_indices(self) -> list[tuple]:
        """Every tier index of this store that exists: (source, tier, name, first_ns, last_ns), sorted."""
        patterns = ",".join(f"{base}-*" for base in self.tier_bases.values())
        resolved = self.client.indices.resolve_index(name=patterns, expand_wildcards="open,closed").body
        owned = []
        for index in resolved.get("indices") or []:
            parsed = self._parse_index(index["name"])
            if parsed is not None:
                owned.append((parsed[0], parsed[1], index["name"], parsed[2], parsed[3]))
        return sorted(owned)

    def _raw_days(self, source: str) -> dict[str, str]:
        """The raw daily indices of ``source`` that exist: day ('YYYY.MM.DD') -> index name."""
        base = self.tier_bases[(source, "raw")]
        resolved = self.client.indices.resolve_index(name=f"{base}-*", expand_wildcards="open").body
        days = {}
        for index in resolved.get("indices") or []:
            parsed = self._parse_index(index["name"])
            if parsed is not None and parsed[:2] == (source, "raw"):
                days[index["name"][len(base) + 1:]] = index["name"]
        return days

    def _parts(self, lo: int, hi: int | None, now) -> list[tuple]:
        """``[lo, hi)`` (ns; hi None: open) cut into (tier, lo, hi) parts, each answered by one tier: raw from the
        raw horizon rounded up to the minute, 1-minute rollups before it down to the 1-minute horizon rounded up
        to ten minutes, 10-minute rollups before that. Rollup parts are whole buckets of their tier (a bucket counts
        when it starts in the part), so the parts neither overlap nor leave a gap."""
        horizon = {tier: self.retention.horizon_ns(tier, now) for tier in ("raw", "1m", "10m")}
        if lo >= horizon["raw"]:
            return [("raw", lo, hi)]
        parts = []
        edge_raw, edge_1m = _ceil(horizon["raw"], 60), _ceil(horizon["1m"], 600)
        if hi is None or hi > edge_raw:
            parts.append(("raw", edge_raw, hi))
        lo_1m = _ceil(lo, 60) if lo >= horizon["1m"] else edge_1m
        hi_1m = edge_raw if hi is None else min(edge_raw, _ceil(hi, 60))
        if lo_1m < hi_1m:
            parts.append(("1m", lo_1m, hi_1m))
        if lo < horizon["1m"]:
            lo_10m = _ceil(max(lo, horizon["10m"]), 600)
            hi_10m = edge_1m if hi is None else min(edge_1m, _ceil(hi, 600))
            if lo_10m < hi_10m:
                parts.append(("10m", lo_10m, hi_10m))
        return parts

    def _day_split(self, source: str, lo: int, hi: int) -> tuple[list[str], list[str]]:
        """For a rollup part: the raw indices of its days that still exist (their samples answer: a day's rollups
        count only once its raw index is gone, so a day is never counted twice), and the other days (rollups)."""
        present = self._raw_days(source)
        raw, rolled = [], []
        for day in range(lo // DAY_NS, (hi - 1) // DAY_NS + 1):
            name = self.index_name(source, "raw", day)[len(self.tier_bases[(source, "raw")]) + 1:]
            (raw.append(present[name]) if name in present else rolled.append(name))
        return raw, rolled

    def _rollup_query(self, query: Query, lo: int, hi: int, days: list[str]) -> dict:
        """The bool filter on GPU rollup documents (canonical names) for ``query``'s series, buckets in [lo, hi)."""
        filters = [{"range": {"bucket": {"gte": _iso(lo), "lt": _iso(hi), "format": DATE_FORMAT}}},
                   {"terms": {"day": list(days)}}]
        if query.cluster is not None:
            filters.append({"term": {"cluster": query.cluster}})
        for name, values, kind in (("host", query.hosts, str), ("gpu", query.gpus, int), ("field", query.fields, int)):
            if values is not None:
                filters.append({"terms": {name: [kind(v) for v in values]}})
        return {"bool": {"filter": filters}}

    @staticmethod
    def _rollup_filter(net_query: dict, days: list[str]) -> dict:
        """A network read's bool filter turned onto rollup documents: the ``ts`` range applies to ``bucket``."""
        filters = []
        for clause in net_query["bool"]["filter"]:
            if "range" in clause:
                clause = {"range": {"bucket": clause["range"]["ts"]}}
            filters.append(clause)
        return {"bool": {"filter": [*filters, {"terms": {"day": list(days)}}]}}

    def _keep_after_raw_horizon(self, batch: pd.DataFrame, noun: str) -> pd.DataFrame:
        """The samples of a batch not older than the raw horizon. Older ones could never be read as raw samples,
        and their day may already be rolled up and deleted: they are dropped (logged), not counted as written."""
        horizon = self.retention.horizon_ns("raw", self.now())
        keep = batch["ts"].astype("int64").to_numpy() >= horizon
        if keep.all():
            return batch
        log.warning("%s: dropped %d %s older than the raw retention (%g days)", self.url, int((~keep).sum()), noun,
                    self.retention.raw_days)
        return batch[keep].reset_index(drop=True)

    def _mark_written(self, source: str, batch: pd.DataFrame) -> None:
        """Note (in ``<index_prefix>_rollups``) that samples went into days already complete, so that the next
        retention pass rolls them up again. Samples of the current day cost nothing here."""
        now_ns = as_ns(self.now())
        days = np.unique(batch["ts"].astype("int64").to_numpy() // DAY_NS)
        late = [int(day) for day in days if (int(day) + 1) * DAY_NS <= now_ns]
        if late:
            self._set_state(source, late, written=time.time_ns())

    def _set_state(self, source: str, days: list[int], **values) -> None:
        if self.manage_template and not self._state_template_ready:
            self._put_template(self.state_index, self.state_template_body(), "installing the rollup state template")
            self._state_template_ready = True
        base = len(self.tier_bases[(source, "raw")]) + 1
        actions = []
        for day in days:
            name = self.index_name(source, "raw", day)[base:]
            actions.append({"_op_type": "update", "_index": self.state_index, "_id": f"{source}-{name}",
                            "doc": {"source": source, "day": name, **values}, "doc_as_upsert": True})
        self._bulk(actions, len(actions), "noting days to roll up (bulk)", self.state_index, "rollup state notes")

    def _state(self, source: str) -> dict[str, dict]:
        """day -> {"written": ns, "rolled": ns} (either may be missing) of ``source``."""
        rows = self._sorted_rows(self.state_index, {"bool": {"filter": [{"term": {"source": source}}]}},
                                 [{"day": {"order": "asc"}}], ("day", "written", "rolled"), "reading the rollup state",
                                 ts_from_sort=False)
        return {day: {"written": written, "rolled": rolled}
                for day, written, rolled in zip(rows["day"], rows["written"], rows["rolled"])}

    def state_template_body(self) -> dict:
        properties = {"source": {"type": "keyword"}, "day": {"type": "keyword"}, "written": {"type": "long"},
                      "rolled": {"type": "long"}}
        return self._template(self.state_index, properties, "which days' rollups are current (retention)")

    def rollup_template_body(self, source: str, tier: str) -> dict:
        """The strict template of a rollup tier's indices (``<base>-*``), with the tier's ILM policy."""
        common = {"bucket": {"type": "date_nanos", "format": f"{DATE_FORMAT}||epoch_millis"},
                  "day": {"type": "keyword"}, "cluster": {"type": "keyword"}, "host": {"type": "keyword"},
                  "count": {"type": "long"}, "min": {"type": "double"}, "max": {"type": "double"}}
        if source == "gpu":
            properties = {**common, "gpu": {"type": "short"}, "field": {"type": "integer"}, "sum": {"type": "double"}}
        else:
            stamp = {"type": "date_nanos", "format": f"{DATE_FORMAT}||epoch_millis"}
            properties = {**common, "nic": {"type": "keyword"}, "field": {"type": "keyword"},
                          "first": {"type": "double"}, "first_ts": stamp, "last": {"type": "double"}, "last_ts": stamp}
        return self._template(f"{self.tier_bases[(source, tier)]}-*", properties,
                              f"{TIER_SECONDS[tier] // 60}-minute rollups of {source} samples", tier=tier)

    def ensure_policies(self) -> None:
        """Install or update the three ILM policies (``manage_ilm``; idempotent: PUT replaces)."""
        if not self.manage_ilm or getattr(self, "_policies_ready", False):
            return
        for tier in ("raw", "1m", "10m"):
            name = self.policy_name(tier)
            try:
                with self._errors("installing the index lifecycle policy", f"_ilm/policy/{name}"):
                    self.client.ilm.put_lifecycle(name=name, policy=self.policy_body(tier))
            except TelemetryUnavailable as exc:
                if "HTTP 403" not in str(exc):
                    raise
                raise TelemetryUnavailable(f"{exc}; install the policies once as a user with manage_ilm, or set "
                                           "OPTIONS manage_ilm=False (expire() still deletes old indices)"
                                           ) from exc.__cause__
        self._policies_ready = True

    def ensure_retention(self) -> None:
        """The policies and the rollup and state templates (once per process)."""
        if self._retention_ready:
            return
        self.ensure_policies()
        if self.manage_template:
            for source in ("gpu", "net"):
                for tier in ("1m", "10m"):
                    name = self.tier_bases[(source, tier)]
                    self._put_template(name, self.rollup_template_body(source, tier), "installing a rollup template")
            self._put_template(self.state_index, self.state_template_body(), "installing the rollup state template")
            self._state_template_ready = True
        self._retention_ready = True

    def _create_rollup_index(self, name: str, span_end_ns: int) -> None:
        """Create a rollup index with ``index.lifecycle.origination_date`` = the end of its span, so that ILM counts
        its age as ``expire`` does (an existing one is left as it is)."""
        if not self.manage_ilm or name in self._created:
            return
        self.client.options(ignore_status=400).indices.create(
            index=name, settings={"index.lifecycle.origination_date": span_end_ns // 1_000_000})
        self._created.add(name)

    def roll_up(self, day, source: str = "gpu") -> int:
        """Build the 1-minute and 10-minute rollups of one UTC day (a day number, or a datetime in it) of
        ``source`` from its raw index, replacing that day's earlier rollups; returns the rollup documents written.
        Deterministic ``_id``s: rolling a day again is idempotent."""
        self.ensure_retention()
        day = int(day) if isinstance(day, (int, np.integer)) else as_ns(day) // DAY_NS
        raw = self.index_name(source, "raw", day)
        name = raw[len(self.tier_bases[(source, "raw")]) + 1:]
        started = time.time_ns()
        with self._errors(f"rolling up {raw}", raw):
            previous = self._state(source).get(name) or {}
            written = 0
            for tier in ("1m", "10m"):
                base = self.tier_bases[(source, tier)]
                if previous.get("rolled") is not None:  # late samples or deletes: the day's rollups are rebuilt
                    self._delete_by_query(f"{base}-*", {"bool": {"filter": [{"term": {"day": name}}]}},
                                          f"replacing the {tier} rollups of {name}")
                width = TIER_SECONDS[tier]
                if source == "gpu":
                    records = self._gpu_partials(raw, None, width, what=f"rolling up {raw}")
                    actions = list(self._gpu_rollup_actions(tier, day, name, records))
                else:
                    records = self._net_partials(raw, None, width, what=f"rolling up {raw}")
                    actions = list(self._net_rollup_actions(tier, day, name, records))
                if not actions:
                    continue
                index = self.index_name(source, tier, day)
                parsed = self._parse_index(index)
                self._create_rollup_index(index, parsed[3])
                written += self._bulk(actions, len(actions), f"writing {tier} rollups (bulk)", index, "rollups")
        self._set_state(source, [day], rolled=started)
        return written

    def _gpu_rollup_actions(self, tier: str, day: int, name: str, records: list[dict]):
        if not records:
            return
        frame = pd.DataFrame.from_records(records)
        if frame.duplicated(["bucket", *SERIES]).any():  # one id under two field names
            frame = _merge_buckets(frame, ())
        index = self.index_name("gpu", tier, day)
        for row in frame.itertuples(index=False):
            bucket_ns = int(row.bucket) * 1_000_000
            key = "\x1f".join((tier, str(row.cluster), str(row.host), str(int(row.gpu)), str(int(row.field)),
                               str(bucket_ns)))
            yield {"_op_type": "index", "_index": index, "_id": _rollup_id(key),
                   "_source": {"bucket": _iso(pd.Timestamp(bucket_ns, tz="UTC")), "day": name,
                               "cluster": str(row.cluster), "host": str(row.host), "gpu": int(row.gpu),
                               "field": int(row.field), "count": int(row.count), "sum": float(row.sum),
                               "min": float(row.min), "max": float(row.max)}}

    def _net_rollup_actions(self, tier: str, day: int, name: str, records: list[dict]):
        index = self.index_name("net", tier, day)
        for row in records:
            bucket_ns = row["bucket"] * 1_000_000
            key = "\x1f".join((tier, row["cluster"], row["host"], row["nic"], row["field"], str(bucket_ns)))
            yield {"_op_type": "index", "_index": index, "_id": _rollup_id(key),
                   "_source": {"bucket": _iso(pd.Timestamp(bucket_ns, tz="UTC")), "day": name,
                               "cluster": row["cluster"], "host": row["host"], "nic": row["nic"], "field": row["field"],
                               "count": row["count"], "first": row["first"],
                               "first_ts": _iso(pd.Timestamp(row["first_ts"], tz="UTC")), "last": row["last"],
                               "last_ts": _iso(pd.Timestamp(row["last_ts"], tz="UTC")), "min": row["min"],
                               "max": row["max"]}}

    def _roll_pending(self, now_ns: int) -> None:
        """Roll up every complete day (ended by ``now``) whose raw index exists and was never rolled up, or was
        written to (late samples) or deleted from since."""
        for source in ("gpu", "net"):
            present = self._raw_days(source)
            if not present:
                continue
            state = self._state(source)
            for name in sorted(present):
                parsed = self._parse_index(present[name])
                if parsed[3] > now_ns:
                    continue
                noted = state.get(name) or {}
                rolled, written = noted.get("rolled"), noted.get("written")
                if rolled is None or (written is not None and written >= rolled):
                    self.roll_up(parsed[2] // DAY_NS, source)

    def expire(self, now=None, dry_run: bool = False, progress=None) -> list[Expiry]:
        """The retention pass (see "Retention"): roll up the complete days that need it (also in a dry run: that
        removes nothing and is idempotent), then delete every tier index lying wholly before its tier's horizon,
        one exact name at a time (never a pattern). Returns the Expiry of each index deleted (or, ``dry_run``,
        that would be); ``progress(done, total, expiry)`` after each."""
        now_ns = as_ns(now if now is not None else self.now())
        with self._errors("running the retention pass", ",".join(self.tier_bases.values())):
            self.ensure_retention()
            self._roll_pending(now_ns)
            doomed = [(source, tier, name, first, last) for source, tier, name, first, last in self._owned_indices()
                      if last <= self.retention.horizon_ns(tier, now_ns)]
            out, raw_days = [], {"gpu": [], "net": []}
            for done, (source, tier, name, first, last) in enumerate(doomed, start=1):
                rows = self.client.options(ignore_status=404).count(index=name).body.get("count")
                expiry = Expiry(source, tier, name, _utc(first), _utc(last), None if rows is None else int(rows))
                if not dry_run:
                    self.client.indices.delete(index=name, ignore_unavailable=True)
                    if tier == "raw":
                        raw_days[source].append(name[len(self.tier_bases[(source, "raw")]) + 1:])
                out.append(expiry)
                if progress is not None:
                    progress(done, len(doomed), expiry)
            for source, days in raw_days.items():  # their rollup state is no longer needed
                if days:
                    self._delete_by_query(self.state_index, {"bool": {"filter": [
                        {"term": {"source": source}}, {"terms": {"day": days}}]}}, "forgetting rolled-up days")
        return out

    def check(self) -> str:
        with self._errors("checking the server (GET /)"):
            info = self.client.info().body
        version = (info.get("version") or {}).get("number", "?")
        return (f"{self.name} {self.url}: ok (Elasticsearch {version}, cluster {info.get('cluster_name', '?')}; "
                f"reads {self.read_pattern}, writes {self.index_prefix}-YYYY.MM.DD, job series {self.app_index}, "
                f"network samples {self.net_index})")

    def clear(self, drop_template: bool = False) -> int:
        """Delete this store's own indices (daily samples, network samples, rollups, job series, rollup state; tests,
        demo reset); returns how many. Resolves the names first, since Elasticsearch 8 refuses wildcard index
        deletion by default, and deletes only names of this store's own shapes (a site's index that matches a
        pattern stays)."""
        patterns = ",".join([self.write_pattern, f"{self.app_index}*", f"{self.net_index}*",
                             *(f"{self.tier_bases[('gpu', tier)]}-*" for tier in ("1m", "10m")), self.state_index])
        with self._errors("deleting the store's indices", patterns):
            resolved = self.client.indices.resolve_index(name=patterns, expand_wildcards="all").body
            owned = [index["name"] for index in resolved.get("indices") or []]
            names = sorted(name for name in owned
                           if name in (self.app_index, self.net_index, self.state_index)
                           or fnmatch.fnmatchcase(name, self.write_pattern) or self._parse_index(name) is not None)
            for start in range(0, len(names), 50):
                self.client.indices.delete(index=",".join(names[start:start + 50]), ignore_unavailable=True)
            self._created.clear()
            if drop_template:
                templates = [self.index_prefix, self.app_index, self.net_index, self.state_index,
                             *(self.tier_bases[(source, tier)] for source in ("gpu", "net") for tier in ("1m", "10m"))]
                for template in templates:
                    self.client.options(ignore_status=404).indices.delete_index_template(name=template)
                self._template_ready = self._app_template_ready = self._net_template_ready = False
                self._state_template_ready = self._retention_ready = False
        return len(names)

    def close(self) -> None:
        self.client.close()


def _iso(moment) -> str:
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{stamp.value % NS:09d}Z"


def _ts_range(lo: int | None, hi: int | None) -> list:
    """The ``range`` filter on ``ts`` of a job-series or network query, from nanosecond bounds (either may be None:
    unbounded); none when both are."""
    if lo is None and hi is None:
        return []
    bounds = {"format": DATE_FORMAT}
    if lo is not None:
        bounds["gte"] = _iso(pd.Timestamp(lo, tz="UTC"))
    if hi is not None:
        bounds["lt"] = _iso(pd.Timestamp(hi, tz="UTC"))
    return [{"range": {"ts": bounds}}]


def _parse_ts(value) -> int:
    """Nanoseconds from a _source timestamp: ISO text, or a number of epoch milliseconds (the ``date`` default)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(round(float(value) * 1_000_000))
    if isinstance(value, str) and value.isascii() and value.strip().lstrip("-").isdigit():
        return int(value) * 1_000_000
    stamp = pd.Timestamp(value)
    return (stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp).value


def _merge_buckets(out: pd.DataFrame, stats) -> pd.DataFrame:
    """Buckets of one id reported under two names (legacy and DCGM 4.6): count, sum, min and max
    combine exactly; percentiles are count-weighted means of the parts (approximate)."""
    out = out.assign(_weight=out["count"].clip(lower=0))
    keys = ["bucket", *SERIES]
    merged = out.groupby(keys, sort=False, observed=True).agg(count=("count", "sum"), sum=("sum", "sum"),
                                                              min=("min", "min"), max=("max", "max")).reset_index()
    merged["mean"] = merged["sum"] / merged["count"].where(merged["count"] > 0)
    for name in stats:
        if name in PERCENTILES:
            weighted = (out[name] * out["_weight"]).groupby([out[k] for k in keys], sort=False).sum()
            weights = out["_weight"].groupby([out[k] for k in keys], sort=False).sum()
            merged[name] = (weighted / weights.where(weights > 0)).to_numpy()
    return merged


def _ceil(ns: int, seconds: int) -> int:
    """``ns`` rounded up to a multiple of ``seconds`` since the epoch."""
    width = seconds * NS
    return -(-int(ns) // width) * width


def _utc(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / NS, tz=timezone.utc)


def _merge_net(frame: pd.DataFrame) -> pd.DataFrame:
    """Partials of network buckets from several parts (raw, rollups): counts add, min of mins, max of maxes, first
    of the earliest sample, last of the latest."""
    keys = ["bucket", "cluster", "host", "nic", "field"]
    if not frame.duplicated(keys).any():
        return frame
    grouped = frame.groupby(keys, sort=False)
    out = grouped.agg(count=("count", "sum"), min=("min", "min"), max=("max", "max")).reset_index()
    first = frame.sort_values("first_ts", kind="stable").groupby(keys, sort=False)["first"].first()
    last = frame.sort_values("last_ts", kind="stable").groupby(keys, sort=False)["last"].last()
    index = pd.MultiIndex.from_frame(out[keys])
    out["first"] = first.reindex(index).to_numpy()
    out["last"] = last.reindex(index).to_numpy()
    return out


def _rollup_id(key: str) -> str:
    """The ``_id`` of a rollup document: BLAKE2b-128 hex of tier, series and bucket (re-rolling replaces)."""
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
