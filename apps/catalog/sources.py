"""What a product's source holds now, read for its quality checks: the newest sample per member, the
members fresh enough to count as present, sample counts per bucket for gaps, and the columns the
source has for schema drift.

Sources: the telemetry store (``telemetry``), an Elasticsearch index pattern (``elasticsearch``,
through the official client), a portal model (``model``), or a JSON API (``api``). Members are
matched against an expected population built from the portal's inventory (the topology's nodes and
GPUs, running jobs, clusters). A source that cannot be read gives an ``Observation`` with a
``problem`` saying why; its checks are then skipped with that reason, never guessed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import httpx
import pandas as pd
from django.apps import apps as django_apps
from django.conf import settings
from django.core.exceptions import FieldDoesNotExist, FieldError
from django.db.models import Max

from apps.core.http_errors import reason
from apps.telemetry.backends.base import Query, TelemetryUnavailable
from apps.telemetry.fields import FIELDS
from apps.telemetry.store import telemetry_store

PER_GPU = ("topology_gpus", "running_job_gpus")
LOOK_BACK_FOR_NEWEST = timedelta(days=31)  # when the check window is empty: how far to look for the last sample
DRIFT_SAMPLE_HOSTS = 16


class SourceProblem(RuntimeError):
    pass


@dataclass
class Observation:
    newest: pd.Series | None = None  # member -> time of its newest sample
    present: set | None = None  # members with a sample recent enough to count for coverage
    counts: pd.DataFrame | None = None  # member, bucket, count
    schema: dict | None = None  # column -> {"unit", "type"} as the source has them now
    aliases: dict = field(default_factory=dict)
    problem: str = ""
    notes: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Populations


@dataclass
class Population:
    members: set
    per_host: dict  # host -> GPUs expected (for grouping missing GPUs by node)


def population(name: str, *, now: datetime, window: timedelta) -> Population:
    from apps.jobs.models import Cluster, Job
    from apps.topology.models import Node

    if name in ("topology_gpus", "topology_nodes"):
        nodes = dict(Node.objects.exclude(state="down").values_list("hostname", "gpus"))
        if name == "topology_nodes":
            return Population(set(nodes), {})
        return Population({f"{host}/{gpu}" for host, count in nodes.items() for gpu in range(count)}, nodes)
    if name == "running_job_gpus":
        hosts = {host for nodes in Job.objects.filter(state="RUNNING").values_list("node_list", flat=True) for host in nodes or []}
        gpus = dict(Node.objects.filter(hostname__in=hosts).values_list("hostname", "gpus"))
        per_host = {host: gpus.get(host) or 4 for host in hosts}
        return Population({f"{host}/{gpu}" for host, count in per_host.items() for gpu in range(count)}, per_host)
    if name == "running_jobs":
        return Population({f"{c}/{j}" for c, j in Job.objects.filter(state="RUNNING").values_list("cluster__name", "job_id")}, {})
    if name == "recent_jobs":
        recent = Job.objects.filter(start_time__isnull=False).exclude(end_time__lt=now - window)
        return Population({f"{c}/{j}" for c, j in recent.values_list("cluster__name", "job_id")}, {})
    if name == "clusters":
        return Population(set(Cluster.objects.values_list("name", flat=True)), {})
    raise SourceProblem(f"unknown population {name!r}")


def hosts_expected_until(*, now: datetime, window: timedelta) -> dict[str, datetime | None]:
    """For products sent from inside jobs: each host that ran a job during the window -> the end of its last
    job (None while one still runs on it), so a host that fell silent with its job is not "still silent"."""
    from django.db.models import Q

    from apps.jobs.models import Job

    until: dict[str, datetime | None] = {}
    jobs = (Job.objects.filter(start_time__isnull=False, start_time__lte=now)
            .filter(Q(end_time__isnull=True) | Q(end_time__gte=now - window)).values_list("node_list", "end_time"))
    for nodes, end in jobs:
        running = end is None or end > now
        for host in nodes or []:
            if host in until and until[host] is None:
                continue
            until[host] = None if running else max(end, until.get(host) or end)
    return until


# ---------------------------------------------------------------------------------------------
# Reading a source


def observe(product: dict, now: datetime) -> Observation:
    kind = product["source"]["kind"]
    try:
        return {"telemetry": _telemetry, "model": _model, "elasticsearch": _elasticsearch, "api": _api}[kind](product, now)
    except SourceProblem as exc:
        return Observation(problem=str(exc))


def _coverage_age(product: dict) -> int:
    """How recent a member's newest sample must be to count as present: the coverage's ``within``, else the
    freshness error threshold."""
    slo = product["slo"]
    return (slo.get("coverage") or {}).get("within") or slo["freshness"]["error"]


def _present(newest: pd.Series, now: datetime, max_age: int) -> set:
    if newest is None or newest.empty:
        return set()
    cutoff = pd.Timestamp(now - timedelta(seconds=max_age))
    cutoff = cutoff.tz_localize("UTC") if cutoff.tzinfo is None else cutoff
    return set(newest.index[pd.to_datetime(newest, utc=True) >= cutoff].astype(str))


def _telemetry(product: dict, now: datetime) -> Observation:
    source, slo, window = product["source"], product["slo"], timedelta(seconds=product["checks"]["window"])
    fields = tuple(column["field"] for column in product["schema"] if column.get("field") is not None)
    try:
        store = telemetry_store(source.get("store", "default"))
    except TelemetryUnavailable as exc:
        raise SourceProblem(str(exc)) from exc
    coverage = slo.get("coverage") or {}
    per_gpu = coverage.get("population") in PER_GPU or coverage.get("population") is None
    end = now + timedelta(seconds=1)
    try:
        latest = store.latest(Query(start=now - window, end=end, fields=fields))
        notes = []
        recent = not latest.empty
        if latest.empty:  # nothing in the window: find when the last sample was, to say how stale
            latest = store.latest(Query(start=now - LOOK_BACK_FOR_NEWEST, end=end, fields=fields))
            notes.append(f"no sample in the last {window}; looked back {LOOK_BACK_FOR_NEWEST.days} days for the newest")
        counts = None
        period = slo.get("sampling_period")
        if period and recent:
            # Gaps per node, read on each node's first GPU and the product's first field: enough to see a node fall silent.
            first_gpu = int(latest["gpu"].min()) if per_gpu else None
            aggregated = store.aggregate(Query(start=now - window, end=end, fields=fields[:1],
                                               gpus=(first_gpu,) if first_gpu is not None else None), period, ("mean",))
            counts = aggregated.groupby(["host", "bucket"], as_index=False)["count"].sum().rename(columns={"host": "member"})
        schema = None
        if recent:  # the schema is read on recent samples only; a stale source has none to say what it sends now
            hosts = tuple(latest.sort_values("ts").drop_duplicates("host", keep="last")["host"].tail(DRIFT_SAMPLE_HOSTS))
            seen = store.latest(Query(start=now - window, end=end, hosts=hosts))
            schema = {}
            for field_id in sorted(set(seen["field"].astype(int))):
                known = FIELDS.get(field_id)
                schema[str(field_id)] = {"unit": known.unit if known else None}
            notes.append(f"schema read on {len(hosts)} recently reporting nodes")
    except TelemetryUnavailable as exc:
        raise SourceProblem(str(exc)) from exc
    if latest.empty:
        return Observation(newest=pd.Series(dtype="datetime64[ns, UTC]"), present=set(), counts=counts, schema=None, notes=notes)
    member = latest["host"] + ("/" + latest["gpu"].astype(str) if per_gpu else "")
    newest = latest.assign(member=member).groupby("member")["ts"].max()
    return Observation(newest=newest, present=_present(newest, now, _coverage_age(product)), counts=counts, schema=schema, notes=notes)


def declared_schema(product: dict) -> dict:
    """The columns drift compares, keyed as the source names them."""
    kind = product["source"]["kind"]
    out = {}
    for column in product["schema"]:
        if kind == "telemetry":
            if column.get("field") is not None:
                out[str(column["field"])] = {"unit": column.get("unit")}
        elif kind == "model":
            if column.get("column"):
                out[column["column"]] = {"type": column.get("type")}
        elif kind == "elasticsearch":
            out[column.get("es_field") or column["name"]] = {"unit": column.get("unit"), "type": column.get("type")}
    return out


_DJANGO_TYPES = {"CharField": "string", "TextField": "string", "SlugField": "string", "EmailField": "string", "GenericIPAddressField": "string",
                 "IntegerField": "integer", "BigIntegerField": "integer", "SmallIntegerField": "integer",
                 "PositiveIntegerField": "integer", "PositiveSmallIntegerField": "integer", "PositiveBigIntegerField": "integer",
                 "AutoField": "integer", "BigAutoField": "integer", "ForeignKey": "integer", "OneToOneField": "integer",
                 "FloatField": "double", "DecimalField": "double", "DateTimeField": "timestamp", "DateField": "timestamp",
                 "BooleanField": "boolean", "JSONField": "json"}


def _model(product: dict, now: datetime) -> Observation:
    source, window = product["source"], timedelta(seconds=product["checks"]["window"])
    try:
        model = django_apps.get_model(source["model"])
    except (LookupError, ValueError) as exc:
        raise SourceProblem(f"no model {source['model']!r} in this portal: {exc}") from exc
    time_field = source["time_field"]
    try:
        model._meta.get_field(time_field)
        queryset = model.objects.filter(**(source.get("filter") or {}))
        newest_overall = queryset.aggregate(newest=Max(time_field))["newest"]
        member_field = source.get("member_field")
        max_age = _coverage_age(product)
        if member_field:
            fields = [member_field] if isinstance(member_field, str) else list(member_field)
            look = max(window, timedelta(seconds=max_age))
            rows = list(queryset.filter(**{f"{time_field}__gte": now - look}).values(*fields).annotate(newest=Max(time_field))
                        .values_list(*fields, "newest"))
            newest = pd.Series({"/".join(str(part) for part in row[:-1]): row[-1] for row in rows}, dtype="object")
            if newest_overall is not None and newest.empty:
                newest = pd.Series({"(all)": newest_overall})
        else:
            newest = pd.Series({"(all)": newest_overall}) if newest_overall is not None else pd.Series(dtype="object")
        counts = None
        period = product["slo"].get("sampling_period")
        if period:
            times = pd.to_datetime(pd.Series(list(queryset.filter(**{f"{time_field}__gte": now - window})
                                                  .values_list(time_field, flat=True)[:200_000])), utc=True)
            if not times.empty:
                buckets = times.dt.floor(f"{period}s")
                counts = buckets.value_counts().rename_axis("bucket").reset_index(name="count").assign(member="(all)")
    except (FieldDoesNotExist, FieldError) as exc:
        raise SourceProblem(f"{source['model']}: {exc}") from exc
    schema = {f.name: {"type": _DJANGO_TYPES.get(f.get_internal_type(), f.get_internal_type())} for f in model._meta.concrete_fields}
    if not newest.empty:
        newest = pd.to_datetime(newest, utc=True)
    present = _present(newest, now, max_age) if member_field else None
    return Observation(newest=newest, present=present, counts=counts, schema=schema)


# ---------------------------------------------------------------------------------------------
# Elasticsearch and JSON APIs


_ES_TYPES = {"keyword": "string", "text": "string", "wildcard": "string", "constant_keyword": "string", "ip": "string",
             "long": "integer", "integer": "integer", "short": "integer", "byte": "integer", "unsigned_long": "integer",
             "double": "double", "float": "double", "half_float": "double", "scaled_float": "double",
             "date": "timestamp", "date_nanos": "timestamp", "boolean": "boolean"}


def elasticsearch_client():
    """The official client for the catalogue's Elasticsearch (the telemetry one unless CATALOG_ELASTICSEARCH_URL)."""
    url = settings.CATALOG_ELASTICSEARCH_URL or settings.ELASTICSEARCH_URL
    if not url:
        raise SourceProblem("Elasticsearch is not configured (set ELASTICSEARCH_URL or CATALOG_ELASTICSEARCH_URL)")
    from elasticsearch import Elasticsearch

    kwargs = {"request_timeout": settings.CATALOG_ELASTICSEARCH_TIMEOUT, "max_retries": 1, "retry_on_timeout": False}
    if settings.CATALOG_ELASTICSEARCH_API_KEY:
        kwargs["api_key"] = settings.CATALOG_ELASTICSEARCH_API_KEY
    return Elasticsearch([part.strip() for part in url.split(",") if part.strip()], **kwargs)


def flatten_mapping(properties: dict, prefix: str = "") -> dict:
    """Index mapping properties -> {dotted field: {"type", "unit"}} (``meta.unit`` is Elasticsearch's place for units)."""
    out = {}
    for name, spec in (properties or {}).items():
        path = f"{prefix}{name}"
        if "properties" in spec:
            out.update(flatten_mapping(spec["properties"], f"{path}."))
        else:
            out[path] = {"type": _ES_TYPES.get(spec.get("type", "object"), spec.get("type", "object")),
                         "unit": (spec.get("meta") or {}).get("unit")}
    return out


def _elasticsearch(product: dict, now: datetime) -> Observation:
    from elasticsearch import ApiError, TransportError

    source, slo, window = product["source"], product["slo"], timedelta(seconds=product["checks"]["window"])
    client = elasticsearch_client()
    time_field = source.get("time_field") or "@timestamp"
    member_field = source.get("member_field")
    aggs = {"newest": {"max": {"field": time_field}}}
    period = slo.get("sampling_period")
    if member_field:
        member_aggs = {"newest": {"max": {"field": time_field}}}
        if period:
            member_aggs["buckets"] = {"date_histogram": {"field": time_field, "fixed_interval": f"{period}s", "min_doc_count": 1}}
        aggs["members"] = {"terms": {"field": member_field, "size": settings.CATALOG_ELASTICSEARCH_MAX_MEMBERS}, "aggs": member_aggs}
    try:
        answer = client.search(index=source["index"], size=0, track_total_hits=False, aggs=aggs,
                               query={"range": {time_field: {"gte": (now - window).isoformat(), "lte": now.isoformat()}}})
        mapping = client.indices.get_mapping(index=source["index"])
    except (ApiError, TransportError) as exc:
        raise SourceProblem(f"Elasticsearch {source['index']}: {getattr(exc, 'message', None) or exc}") from exc
    schema: dict = {}
    for index_name in sorted(mapping.body if hasattr(mapping, "body") else mapping):
        body = (mapping.body if hasattr(mapping, "body") else mapping)[index_name]
        schema.update(flatten_mapping((body.get("mappings") or {}).get("properties") or {}))
    aggregations = (answer.body if hasattr(answer, "body") else answer).get("aggregations") or {}
    newest, counts = pd.Series(dtype="object"), None
    if member_field:
        buckets = (aggregations.get("members") or {}).get("buckets") or []
        newest = pd.Series({str(b["key"]): b["newest"].get("value_as_string") or b["newest"].get("value") for b in buckets
                            if (b.get("newest") or {}).get("value") is not None})
        if period:
            rows = [(str(b["key"]), h["key_as_string"] if "key_as_string" in h else h["key"], h["doc_count"])
                    for b in buckets for h in (b.get("buckets") or {}).get("buckets") or []]
            counts = pd.DataFrame(rows, columns=["member", "bucket", "count"])
            if not counts.empty and not isinstance(counts["bucket"].iloc[0], str):
                counts["bucket"] = pd.to_datetime(counts["bucket"], unit="ms", utc=True)
    elif (aggregations.get("newest") or {}).get("value") is not None:
        value = aggregations["newest"].get("value_as_string") or aggregations["newest"]["value"]
        newest = pd.Series({"(all)": value})
    if not newest.empty:
        newest = pd.to_datetime(newest, utc=True, unit="ms" if not isinstance(newest.iloc[0], str) else None)
    present = _present(newest, now, _coverage_age(product)) if member_field else None
    return Observation(newest=newest, present=present, counts=counts, schema=schema)


def values_at(document, path: str) -> list:
    """Values at a dotted path; ``*`` walks every item of a list (``results.*.time``)."""
    nodes = [document]
    for part in path.split("."):
        following = []
        for node in nodes:
            if part == "*" and isinstance(node, list):
                following.extend(node)
            elif isinstance(node, dict) and part in node:
                following.append(node[part])
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                following.append(node[int(part)])
        nodes = following
    return [node for node in nodes if node is not None]


MAX_API_ANSWER = 8 * 1024 * 1024  # bytes read from a JSON API; a longer answer is cut and so not JSON


def _read_json(url: str) -> object:
    """The JSON document at ``url`` (a URL staff declared); :class:`SourceProblem` saying why it cannot be read."""
    try:
        with httpx.stream("GET", url, headers={"Accept": "application/json"}, timeout=settings.CATALOG_API_TIMEOUT,
                          follow_redirects=True) as response:
            if not response.is_success:
                raise SourceProblem(f"{url} cannot be read: {response.reason_phrase or f'HTTP {response.status_code}'}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= MAX_API_ANSWER:
                    break
        return json.loads(bytes(body[:MAX_API_ANSWER]) or b"null")
    except (httpx.HTTPError, ValueError) as exc:
        raise SourceProblem(f"{url} cannot be read: {reason(exc)}") from exc


def _api(product: dict, now: datetime) -> Observation:
    source = product["source"]
    document = _read_json(source["url"])
    times = pd.to_datetime(pd.Series(values_at(document, source["time_path"])), utc=True, errors="coerce").dropna()
    if times.empty:
        return Observation(newest=pd.Series(dtype="object"), notes=[f"no time at {source['time_path']} in the answer"])
    return Observation(newest=pd.Series({"(all)": times.max()}))
