"""Data product files: one YAML document per product, read with positions and checked field by field.

The shape borrows from the Open Data Product Standard (id, status, domain, description with purpose,
limitations and usage, team and support channel, output ports) and the Open Data Contract Standard
(schema with logical types, SLA properties for latency — our freshness —, frequency and retention,
quality rules such as coverage), cut to what Belvedere checks::

    name: dcgm-device                # slug: /catalog/dcgm-device/, /api/v1/catalog/products/dcgm-device/
    title: DCGM device metrics per GPU
    version: 1.2.0                   # semver of the product's contract; every change of the file is kept
    status: active                   # proposed | active | deprecated | retired
    domain: system telemetry
    description: {purpose: ..., limitations: ..., usage: ...}
    owner: {team: HPC operations, contact: hpc-ops@example.org, channel: "#hpc-telemetry"}
    tags: [gpu, dcgm]
    schema:                          # at least one column; numbers need a unit ("1" when dimensionless)
      - {name: power, type: double, unit: W, field: 155, description: Board power}
    source: {kind: telemetry, store: default}          # telemetry | elasticsearch | model | api
    sample_query:                    # {now}, {now-1h} become UTC times; {job} the reader's latest job with this data
      api: "/api/v1/telemetry/series/?host=nid000001&field=155&start={now-1h}&end={now}&step=60"
      job_api: "/api/v1/telemetry/series/?job={job}&field=155&step=60"   # what non-staff run (optional)
    slo:
      freshness: {warn: 5m, error: 15m}                 # newest sample's age: Fresh / Aging / Stale
      coverage: {target: 0.99, population: topology_gpus}   # within: how recent counts as present (default: error)
      sampling_period: 60s
      gap_after: 3                                      # a gap: no sample for more than 3 periods
      # expected_while: jobs   # members (hosts) are expected only while a job runs on them (in-job collectors)
    checks: {every: 5m, window: 6h}
    retention: 400d                  # not for telemetry: the store's tiers say how long its samples are kept
    links: [{title: Job page, url: /jobs/}]
    explorer: {fields: [155, 150], window: 6h, group_by: host, step: 60s}

``load_product(text, path)`` returns the product (plain dict, durations in seconds) or raises
``ProductInvalid`` with every problem at its line, column and dotted path. Plain Python: no Django.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

SLUG = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$")
EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
STATUSES = ("proposed", "active", "deprecated", "retired")
TYPES = ("string", "integer", "double", "timestamp", "boolean", "bitmask", "code")
NUMERIC = ("integer", "double")
KINDS = ("telemetry", "elasticsearch", "model", "api")
POPULATIONS = {
    "topology_gpus": "every GPU of every node in the topology (down nodes excluded)",
    "topology_nodes": "every node in the topology (down nodes excluded)",
    "running_job_gpus": "every GPU of the nodes of running jobs",
    "running_jobs": "every running job",
    "recent_jobs": "every job that ran within the check window",
    "clusters": "every Slurm cluster the portal knows",
}
GROUP_BY = ("host", "gpu", "field", "none")
STATS = ("mean", "min", "max")
MAX_BYTES = 256 * 1024
TOP_LEVEL = {"name", "title", "version", "status", "domain", "description", "owner", "tags", "schema", "source", "sample_query",
             "slo", "checks", "retention", "links", "explorer"}


SOURCE_KEYS = {"telemetry": ["kind", "store"], "elasticsearch": ["kind", "index", "time_field", "member_field", "gpu_field"],
               "model": ["kind", "model", "time_field", "member_field", "filter"], "api": ["kind", "url", "time_path"]}


def _keys(*names: str, **properties) -> dict:
    """A mapping that allows ``names`` (and the keys of ``properties``, with their schemas) and nothing else."""
    return {"properties": {**{name: {} for name in names}, **properties}, "additionalProperties": False}


# The shape of a product file as JSON Schema: which keys each mapping allows, and the closed choices.
# A mapping is only checked when it is one: the code says "must be a mapping" otherwise, and checks what
# a schema says poorly (texts and their lengths, durations, units against the registry, one value against another).
PRODUCT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_keys(*sorted(TOP_LEVEL - {"status", "description", "owner", "schema", "source", "sample_query", "slo", "checks", "links",
                                 "explorer"}),
            status={"enum": list(STATUSES)},
            description=_keys("purpose", "limitations", "usage"),
            owner=_keys("team", "contact", "channel"),
            schema={"items": {**_keys("name", "unit", "description", "field", "column", "es_field", type={"enum": list(TYPES)}),
                              "required": ["type"]}},
            source={"properties": {"kind": {"enum": list(KINDS)}}, "required": ["kind"],
                    "allOf": [{"if": {"properties": {"kind": {"const": kind}}}, "then": _keys(*keys)}
                              for kind, keys in SOURCE_KEYS.items()]},
            sample_query=_keys("api", "job_api", "description"),
            slo=_keys("sampling_period", "gap_after", "expected_while", freshness=_keys("warn", "error"),
                      coverage={**_keys("target", "within", population={"enum": list(POPULATIONS)}), "required": ["population"]}),
            checks=_keys("every", "window"),
            links={"items": _keys("title", "url")},
            explorer={}),
    "required": ["status"],
    # The explorer plots telemetry; for other sources the code says so instead of listing its keys.
    "if": {"properties": {"source": {"properties": {"kind": {"const": "telemetry"}}, "required": ["kind"]}}, "required": ["source"]},
    "then": {"properties": {"explorer": _keys("fields", "window", "step", group_by={"enum": list(GROUP_BY)},
                                               stat={"enum": list(STATS)})}},
}
_VALIDATOR = Draft202012Validator(PRODUCT_SCHEMA)


@dataclass
class ProductProblem:
    file: str
    line: int | None
    column: int | None
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return f"{where}: {self.path or '(file)'}: {self.message}"


class ProductInvalid(ValueError):
    def __init__(self, problems: list[ProductProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def seconds(text) -> int:
    """``90s``, ``5m``, ``6h``, ``7d``, ``2w`` (or a number of seconds) -> seconds."""
    if isinstance(text, bool):
        raise ValueError("a duration such as 90s, 5m, 6h or 7d")
    if isinstance(text, (int, float)) and text >= 0:
        return int(text)
    match = DURATION.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration such as 90s, 5m, 6h or 7d")
    return int(float(match.group(1)) * UNITS[match.group(2)])


def _positions(text: str) -> dict[tuple, tuple[int, int]]:
    """(path) -> (line, column), 1-based, for every mapping key and sequence item in the document."""
    out: dict[tuple, tuple[int, int]] = {}

    def walk(node, path):
        out.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = path + (key.value,)
                out[child] = (key.start_mark.line + 1, key.start_mark.column + 1)
                walk(value, child)
                out[child] = (key.start_mark.line + 1, key.start_mark.column + 1)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, path + (index,))

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return out
    if root is not None:
        walk(root, ())
    return out


class _Checker:
    def __init__(self, file: str, positions: dict):
        self.file, self.positions, self.problems = file, positions, []

    def add(self, path: tuple, message: str) -> None:
        probe = path
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, column = self.positions.get(probe, (None, None))
        self.problems.append(ProductProblem(self.file, line, column, ".".join(str(p) for p in path), message))

    def text(self, data: dict, key: str, path: tuple, *, required: bool = True, limit: int = 2000) -> str | None:
        value = data.get(key)
        if value is None or value == "":
            if required:
                self.add(path + (key,), "required")
            return None
        if not isinstance(value, str):
            self.add(path + (key,), f"must be text, not {type(value).__name__}")
            return None
        if len(value) > limit:
            self.add(path + (key,), f"at most {limit} characters (this has {len(value)})")
        return value.strip()

    def mapping(self, data: dict, key: str, path: tuple, *, required: bool = True) -> dict | None:
        value = data.get(key)
        if value is None:
            if required:
                self.add(path + (key,), "required")
            return None
        if not isinstance(value, dict):
            self.add(path + (key,), f"must be a mapping (key: value lines), not {type(value).__name__}")
            return None
        return value

    def duration(self, data: dict, key: str, path: tuple, *, required: bool = True, default=None) -> int | None:
        if data.get(key) is None:
            if required:
                self.add(path + (key,), "required: a duration such as 90s, 5m, 6h or 7d")
            return default
        try:
            value = seconds(data[key])
        except ValueError as exc:
            self.add(path + (key,), str(exc))
            return default
        if value <= 0:
            self.add(path + (key,), "must be longer than zero")
            return default
        return value

    def shape(self, data: dict) -> None:
        """:data:`PRODUCT_SCHEMA`'s problems, each at its place: unknown keys, values outside a closed choice."""
        for error in _VALIDATOR.iter_errors(data):
            path = tuple(error.absolute_path)
            if error.validator == "additionalProperties":
                allowed = error.schema.get("properties", {})
                for key in error.instance:
                    if key not in allowed:
                        self.add(path + (key,), f"unknown key; allowed here: {', '.join(sorted(allowed))}")
            elif error.validator == "enum":
                self.add(path, f"one of {', '.join(map(str, error.validator_value))}")
            elif error.validator == "required":
                for key in error.validator_value:
                    if key not in error.instance:
                        choices = error.schema.get("properties", {}).get(key, {}).get("enum")
                        self.add(path + (key,), f"one of {', '.join(map(str, choices))}" if choices else "required")
            else:  # not reached with this schema; kept so that a new keyword is never silent
                self.add(path, error.message)


def load_product(text: str, path: str | Path = "<text>", *, field_units: dict[int, str] | None = None) -> dict:
    """The product described by ``text`` (the content of ``path``), or ProductInvalid with every problem.

    ``field_units``: DCGM field id -> unit from the telemetry registry, to check telemetry columns."""
    file = str(path)
    if len(text.encode()) > MAX_BYTES:
        raise ProductInvalid([ProductProblem(file, None, None, "", f"the file has {len(text.encode()):,} bytes; a product is at most "
                                                                   f"{MAX_BYTES:,}")])
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ProductInvalid([ProductProblem(file, mark.line + 1 if mark else None, mark.column + 1 if mark else None, "",
                                             f"not valid YAML: {getattr(exc, 'problem', None) or exc}")]) from None
    check = _Checker(file, _positions(text))
    if not isinstance(data, dict):
        check.add((), "a product is a mapping with name, title, version, status, domain, description, owner, schema, source, "
                      "sample_query and slo")
        raise ProductInvalid(check.problems)
    check.shape(data)
    name = check.text(data, "name", ())
    if name and not SLUG.match(name):
        check.add(("name",), "lowercase letters, digits and '-' (at most 63), e.g. dcgm-device")
    check.text(data, "title", (), limit=200)
    version = data.get("version")
    if version is None:
        check.add(("version",), "required: the contract's version as MAJOR.MINOR.PATCH, e.g. 1.0.0")
    elif not isinstance(version, str) or not SEMVER.match(version):
        check.add(("version",), f"{version!r} is not MAJOR.MINOR.PATCH (quote it: version: \"1.0.0\")")
    status = data.get("status")
    check.text(data, "domain", (), limit=100)
    description = check.mapping(data, "description", ())
    if description is not None:
        check.text(description, "purpose", ("description",))
        check.text(description, "limitations", ("description",), required=False)
        check.text(description, "usage", ("description",), required=False)
    owner = check.mapping(data, "owner", ())
    if owner is not None:
        check.text(owner, "team", ("owner",), limit=100)
        contact = check.text(owner, "contact", ("owner",), limit=200)
        if contact and not EMAIL.match(contact):
            check.add(("owner", "contact"), "an e-mail address people can write to, e.g. hpc-ops@example.org")
        check.text(owner, "channel", ("owner",), required=False, limit=100)
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) and tag for tag in tags):
        check.add(("tags",), "a list of words, e.g. [gpu, dcgm]")
    source = check.mapping(data, "source", ())
    kind = source.get("kind") if source else None
    if kind not in KINDS:
        kind = None
    schema = _check_schema(check, data.get("schema"), kind, field_units)
    if source is not None and kind:
        _check_source(check, source, kind)
    sample = check.mapping(data, "sample_query", ())
    if sample is not None:
        api = check.text(sample, "api", ("sample_query",), limit=1000)
        if api and not api.startswith("/api/v1/"):
            check.add(("sample_query", "api"), "a path of this portal's API, starting with /api/v1/")
        job_api = check.text(sample, "job_api", ("sample_query",), required=False, limit=1000)
        if job_api and not (job_api.startswith("/api/v1/") and "{job}" in job_api):
            check.add(("sample_query", "job_api"), "the same query on one of the reader's jobs: a path of this portal's API, "
                                                   "starting with /api/v1/, with {job} where the job goes")
        check.text(sample, "description", ("sample_query",), required=False)
    slo = _check_slo(check, data.get("slo"), kind)
    checks = data.get("checks") or {}
    if not isinstance(checks, dict):
        check.add(("checks",), "a mapping: every (how often the checks run), window (how far back they look)")
        checks = {}
    every = check.duration(checks, "every", ("checks",), required=False, default=300)
    if every is not None and every < 30:
        check.add(("checks", "every"), "at least 30s: checks read the store")
    window = check.duration(checks, "window", ("checks",), required=False, default=6 * 3600)
    if window is not None and window > 31 * 86400:
        check.add(("checks", "window"), "at most 31d")
    retention = check.duration(data, "retention", (), required=False)
    if kind == "telemetry" and data.get("retention") is not None:
        check.add(("retention",), "telemetry is kept by the store's tiers (settings TELEMETRY_RETENTION_RAW_DAYS, _1M_DAYS, "
                                  "_10M_DAYS), which the product's page and API show: remove this key")
    links = data.get("links", [])
    if not isinstance(links, list):
        check.add(("links",), "a list of {title, url}")
        links = []
    for index, link in enumerate(links):
        if not isinstance(link, dict):
            check.add(("links", index), "{title, url}")
            continue
        check.text(link, "title", ("links", index), limit=200)
        url = check.text(link, "url", ("links", index), limit=1000)
        if url and not (url.startswith("/") or url.startswith("https://") or url.startswith("http://")):
            check.add(("links", index, "url"), "a path of this portal (/jobs/) or an http(s) address")
    explorer = _check_explorer(check, data.get("explorer"), kind, schema)
    if check.problems:
        raise ProductInvalid(check.problems)
    return {
        "name": name, "title": data["title"].strip(), "version": version, "status": status, "domain": data["domain"].strip(),
        "description": {key: (description.get(key) or "").strip() for key in ("purpose", "limitations", "usage")},
        "owner": {"team": owner["team"].strip(), "contact": owner["contact"].strip(), "channel": (owner.get("channel") or "").strip()},
        "tags": list(tags), "schema": schema, "source": dict(source), "sample_query": dict(sample), "slo": slo,
        "checks": {"every": every, "window": window}, "retention": retention, "links": links, "explorer": explorer,
        "digest": hashlib.sha256(text.encode()).hexdigest(),
    }


def _check_schema(check: _Checker, schema, kind, field_units) -> list[dict]:
    if not isinstance(schema, list) or not schema:
        check.add(("schema",), "required: a list of columns, each {name, type, unit, description}")
        return []
    out, names = [], set()
    for index, column in enumerate(schema):
        path = ("schema", index)
        if not isinstance(column, dict):
            check.add(path, "{name, type, unit, description}")
            continue
        name = check.text(column, "name", path, limit=100)
        if name in names:
            check.add(path + ("name",), f"{name!r} is declared twice")
        names.add(name)
        kind_of = column.get("type")
        unit = column.get("unit")
        if kind_of in NUMERIC and (unit is None or unit == ""):
            check.add(path + ("unit",), "required for numbers: W, MiB, degC, ratio, ... (\"1\" when it has none)")
        elif unit is not None and not isinstance(unit, str):
            check.add(path + ("unit",), "text, e.g. W (quote numbers: unit: \"1\")")
        field_id = column.get("field")
        if field_id is not None:
            if kind != "telemetry":
                check.add(path + ("field",), "a DCGM field id belongs to telemetry sources only")
            elif isinstance(field_id, bool) or not isinstance(field_id, int):
                check.add(path + ("field",), "a DCGM field id (a whole number, e.g. 155)")
            elif field_units is not None and field_id not in field_units:
                check.add(path + ("field",), f"DCGM field {field_id} is not in the registry (apps/telemetry/fields.py)")
            elif field_units is not None and isinstance(unit, str) and unit != field_units[field_id]:
                check.add(path + ("unit",), f"{unit!r} for DCGM field {field_id}, whose unit is {field_units[field_id]!r}")
        elif kind == "telemetry" and name not in ("ts", "cluster", "host", "gpu", "uuid"):
            check.add(path, "a telemetry column needs its DCGM field id (field: 155), unless it is ts, cluster, host, gpu or uuid")
        if kind == "model" and column.get("column") is not None and not isinstance(column.get("column"), str):
            check.add(path + ("column",), "the model field's name")
        out.append({key: column.get(key) for key in ("name", "type", "unit", "description", "field", "column", "es_field")
                    if column.get(key) is not None})
    return out


def _check_source(check: _Checker, source: dict, kind: str) -> None:
    if kind == "telemetry":
        store = source.get("store", "default")
        if not isinstance(store, str):
            check.add(("source", "store"), "the alias of a store in TELEMETRY_BACKENDS, e.g. default")
    elif kind == "elasticsearch":
        index = check.text(source, "index", ("source",), limit=200)
        if index and any(char in index for char in " \"\\/<>|,#"):
            check.add(("source", "index"), "an index name or pattern such as slingshot-counters-* (no spaces, quotes or commas)")
        check.text(source, "time_field", ("source",), required=False)
        check.text(source, "member_field", ("source",), required=False)
    elif kind == "model":
        model = check.text(source, "model", ("source",), limit=100)
        if model and not re.match(r"^[a-z_]+\.[A-Z][A-Za-z0-9]+$", model):
            check.add(("source", "model"), "app_label.ModelName, e.g. jobs.Job")
        check.text(source, "time_field", ("source",))
        member = source.get("member_field")
        if member is not None and not (isinstance(member, str) or (isinstance(member, list) and member
                                                                   and all(isinstance(m, str) for m in member))):
            check.add(("source", "member_field"), "a field (host) or a list of fields joined with / ([job__cluster__name, job__job_id])")
        lookups = source.get("filter", {})
        if not isinstance(lookups, dict) or not all(isinstance(v, (str, int, float, bool, list)) for v in lookups.values()):
            check.add(("source", "filter"), "field lookups with plain values, e.g. {state: RUNNING}")
    elif kind == "api":
        url = check.text(source, "url", ("source",), limit=1000)
        if url and not url.startswith(("https://", "http://")):
            check.add(("source", "url"), "an http(s) address")
        check.text(source, "time_path", ("source",))


def _check_slo(check: _Checker, slo, kind) -> dict:
    if not isinstance(slo, dict):
        check.add(("slo",), "required: freshness {warn, error}, and coverage {target, population} where it applies")
        return {}
    out: dict = {}
    freshness = check.mapping(slo, "freshness", ("slo",))
    if freshness is not None:
        warn = check.duration(freshness, "warn", ("slo", "freshness"))
        error = check.duration(freshness, "error", ("slo", "freshness"))
        if warn and error and warn >= error:
            check.add(("slo", "freshness", "error"), "must be longer than warn (Fresh up to warn, Aging up to error, then Stale)")
        out["freshness"] = {"warn": warn, "error": error}
    coverage = check.mapping(slo, "coverage", ("slo",), required=False)
    if coverage is not None:
        target = coverage.get("target")
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
            check.add(("slo", "coverage", "target"), "a fraction above 0 and at most 1, e.g. 0.99")
        population = coverage.get("population")
        out["coverage"] = {"target": target, "population": population,
                           "within": check.duration(coverage, "within", ("slo", "coverage"), required=False)}
    if kind == "telemetry" or slo.get("sampling_period") is not None:
        out["sampling_period"] = check.duration(slo, "sampling_period", ("slo",), required=kind == "telemetry")
    gap_after = slo.get("gap_after", 3)
    if isinstance(gap_after, bool) or not isinstance(gap_after, int) or not 1 <= gap_after <= 1000:
        check.add(("slo", "gap_after"), "a whole number of sampling periods, 1 to 1000")
    out["gap_after"] = gap_after
    expected_while = slo.get("expected_while")
    if expected_while is not None:
        if expected_while != "jobs" or kind != "telemetry":
            check.add(("slo", "expected_while"), "only 'jobs', on telemetry: hosts are expected to send while a job runs on them")
        else:
            out["expected_while"] = expected_while
    return out


def _check_explorer(check: _Checker, explorer, kind, schema) -> dict | None:
    if explorer is None:
        return None
    if kind != "telemetry":
        check.add(("explorer",), "the explorer plots telemetry; other sources have their own pages")
        return None
    if not isinstance(explorer, dict):
        check.add(("explorer",), "{fields, window, group_by, step}")
        return None
    declared = {column.get("field") for column in schema if column.get("field") is not None}
    fields = explorer.get("fields")
    if not isinstance(fields, list) or not fields:
        check.add(("explorer", "fields"), "a list of the product's DCGM field ids")
        fields = []
    for index, field_id in enumerate(fields):
        if field_id not in declared:
            check.add(("explorer", "fields", index), f"{field_id!r} is not a field of this product's schema")
    group_by = explorer.get("group_by", "host")
    stat = explorer.get("stat", "mean")
    return {"fields": fields, "window": check.duration(explorer, "window", ("explorer",), required=False, default=6 * 3600),
            "group_by": group_by, "step": check.duration(explorer, "step", ("explorer",), required=False, default=60), "stat": stat}


def load_folder(folder: str | Path, *, field_units=None) -> tuple[list[dict], list[ProductProblem]]:
    """Every ``*.yaml`` in ``folder``: the valid products and the problems of the others (a name used twice
    is a problem of the second file)."""
    products, problems, seen = [], [], {}
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            product = load_product(path.read_text(encoding="utf-8"), path, field_units=field_units)
        except ProductInvalid as exc:
            problems.extend(exc.problems)
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(ProductProblem(str(path), None, None, "", f"cannot be read: {exc}"))
            continue
        if product["name"] in seen:
            problems.append(ProductProblem(str(path), 1, 1, "name", f"{product['name']!r} is already declared in {seen[product['name']]}"))
            continue
        seen[product["name"]] = str(path)
        product["file"] = str(path)
        products.append(product)
    return products, problems
