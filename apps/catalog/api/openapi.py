"""Documentation-only response serializers of the catalogue API (OpenAPI schema, issue 16 item 13).

The views build their bodies by hand (``product_summary``, ``_run``); these classes describe those
bodies so that clients and fuzzers can check every answer. They are never used to render a response."""
from rest_framework import serializers

CHECK_KINDS = ("freshness", "coverage", "gaps", "drift")


class CatalogCheckStatus(serializers.Serializer):
    """The outcome of a check's last run, in short."""

    status = serializers.CharField(help_text="pass, warn, fail, skipped or error.")
    summary = serializers.CharField()


class CatalogCheckRun(serializers.Serializer):
    """One run of one check."""

    kind = serializers.CharField(help_text="freshness, coverage, gaps or drift.")
    ran = serializers.DateTimeField()
    status = serializers.CharField(help_text="pass, warn, fail, skipped or error.")
    summary = serializers.CharField()
    duration_ms = serializers.IntegerField(min_value=0)
    measured = serializers.DictField(required=False, help_text="What the check measured (its own keys per kind).")


CatalogChecks = type("CatalogChecks", (serializers.Serializer,), {
    "__module__": __name__,
    "__doc__": "Check kind → the outcome of its last run (kinds that never ran are absent).",
    **{kind: CatalogCheckStatus(required=False) for kind in CHECK_KINDS},
})

CatalogLatestChecks = type("CatalogLatestChecks", (serializers.Serializer,), {
    "__module__": __name__,
    "__doc__": "Check kind → its last run with what it measured (kinds that never ran are absent).",
    **{kind: CatalogCheckRun(required=False) for kind in CHECK_KINDS},
})


class CatalogIncident(serializers.Serializer):
    """An open incident: a check that failed and has not passed since."""

    kind = serializers.CharField()
    opened = serializers.DateTimeField()
    message = serializers.CharField()


class CatalogQuality(serializers.Serializer):
    """The product's current quality."""

    state = serializers.CharField(help_text="fresh, aging, stale or unknown.")
    as_of = serializers.DateTimeField(allow_null=True)
    newest_sample = serializers.DateTimeField(allow_null=True)
    coverage = serializers.FloatField(allow_null=True)
    checks = CatalogChecks()
    last_run = serializers.DateTimeField(allow_null=True)
    next_run = serializers.DateTimeField(allow_null=True)
    open_incidents = serializers.IntegerField(allow_null=True, help_text="Open incidents; null in lists that did not count them.")


class CatalogQualityDetail(CatalogQuality):
    """The product's current quality with its open incidents and the last run of each check."""

    open_incidents = serializers.IntegerField(min_value=0)
    incidents = CatalogIncident(many=True)
    latest = CatalogLatestChecks()


class CatalogOwner(serializers.Serializer):
    """Who answers for the product."""

    team = serializers.CharField()
    contact = serializers.CharField()
    channel = serializers.CharField(allow_blank=True)


class CatalogDescription(serializers.Serializer):
    """What the product is for (empty texts where the file says nothing)."""

    purpose = serializers.CharField()
    limitations = serializers.CharField(allow_blank=True)
    usage = serializers.CharField(allow_blank=True)


class CatalogColumn(serializers.Serializer):
    """One column of the product's schema (keys the file does not give are absent)."""

    name = serializers.CharField()
    type = serializers.CharField()
    unit = serializers.CharField(required=False)
    description = serializers.CharField(required=False)
    field = serializers.IntegerField(required=False, help_text="DCGM field id (telemetry sources).")
    column = serializers.CharField(required=False, help_text="Model field (model sources).")
    es_field = serializers.CharField(required=False, help_text="Document field (Elasticsearch sources).")


class CatalogSource(serializers.Serializer):
    """Where the data lives; the other keys depend on ``kind``."""

    kind = serializers.CharField(help_text="telemetry, elasticsearch, model or api.")
    store = serializers.CharField(required=False, help_text="telemetry: the store alias.")
    index = serializers.CharField(required=False, help_text="elasticsearch: the index or pattern.")
    model = serializers.CharField(required=False, help_text="model: app_label.ModelName.")
    url = serializers.CharField(required=False, help_text="api: the address.")
    time_field = serializers.CharField(required=False)
    time_path = serializers.CharField(required=False)
    gpu_field = serializers.CharField(required=False)
    member_field = serializers.JSONField(required=False, help_text="A field, or a list of fields joined with /.")
    filter = serializers.DictField(required=False, help_text="model: field lookups with plain values.")


class CatalogSampleQuery(serializers.Serializer):
    """An API call that reads the product."""

    api = serializers.CharField()
    description = serializers.CharField(required=False)


class CatalogFreshnessTarget(serializers.Serializer):
    """Seconds after which the product is aging (warn) and stale (error)."""

    warn = serializers.IntegerField()
    error = serializers.IntegerField()


class CatalogCoverageTarget(serializers.Serializer):
    """Which share of which population must be present."""

    target = serializers.FloatField()
    population = serializers.CharField()
    within = serializers.IntegerField(allow_null=True, help_text="Seconds; null when not given.")


class CatalogSlo(serializers.Serializer):
    """The product's service-level objectives (durations in seconds)."""

    freshness = CatalogFreshnessTarget(required=False)
    coverage = CatalogCoverageTarget(required=False)
    sampling_period = serializers.IntegerField(required=False, allow_null=True)
    gap_after = serializers.IntegerField()


class CatalogCheckSchedule(serializers.Serializer):
    """How often the checks run and how far back they look (seconds)."""

    every = serializers.IntegerField()
    window = serializers.IntegerField()


class CatalogLink(serializers.Serializer):
    """A related page."""

    title = serializers.CharField()
    url = serializers.CharField()


class CatalogExplorer(serializers.Serializer):
    """The telemetry explorer's defaults for the product."""

    fields = serializers.ListField(child=serializers.IntegerField())
    window = serializers.IntegerField()
    group_by = serializers.CharField()
    step = serializers.IntegerField()
    stat = serializers.CharField()


class CatalogRetentionTier(serializers.Serializer):
    """One tier of the telemetry store that holds the product (issue 40)."""

    tier = serializers.ChoiceField(choices=["raw", "1m", "10m"], help_text="raw samples, 1-minute or 10-minute rollups.")
    resolution_s = serializers.IntegerField(min_value=0, help_text="Seconds between values in this tier: raw, the product's "
                                                                   "sampling period (samples as sent; 0 when it declares none); "
                                                                   "1m, 60; 10m, 600.")
    days = serializers.FloatField(min_value=0, help_text="Days this tier is kept (settings TELEMETRY_RETENTION_RAW_DAYS, "
                                                         "_1M_DAYS, _10M_DAYS).")
    since = serializers.DateTimeField(help_text="The oldest instant this tier still answers for: now minus its days. A read "
                                                "that starts before the raw tier's since needs a step that is a multiple of "
                                                "the tier's resolution.")


class CatalogDefinition(serializers.Serializer):
    """The product's validated declaration file, durations in seconds."""

    name = serializers.CharField()
    title = serializers.CharField()
    version = serializers.CharField()
    status = serializers.CharField()
    domain = serializers.CharField()
    description = CatalogDescription()
    owner = CatalogOwner()
    tags = serializers.ListField(child=serializers.CharField())
    schema = CatalogColumn(many=True)
    source = CatalogSource()
    sample_query = CatalogSampleQuery()
    slo = CatalogSlo()
    checks = CatalogCheckSchedule()
    retention = serializers.IntegerField(
        allow_null=True, help_text="Seconds the product is kept at full resolution: for telemetry products the store's raw tier "
                                   "(settings TELEMETRY_RETENTION_RAW_DAYS), otherwise the file's retention; null when neither says.")
    retention_tiers = CatalogRetentionTier(
        many=True, allow_null=True, help_text="Telemetry products: the store's tiers, finest first (raw, 1m, 10m); null for "
                                              "products outside the telemetry store.")
    links = CatalogLink(many=True)
    explorer = CatalogExplorer(allow_null=True)


class CatalogVersion(serializers.Serializer):
    """One loaded version of the declaration."""

    version = serializers.CharField()
    loaded = serializers.DateTimeField()
    changes = serializers.ListField(child=serializers.CharField(), help_text="Top-level keys that changed from the previous version.")


class CatalogProductSummary(serializers.Serializer):
    """A data product as lists show it."""

    name = serializers.CharField()
    title = serializers.CharField()
    domain = serializers.CharField()
    status = serializers.CharField(help_text="proposed, active, deprecated or retired.")
    version = serializers.CharField()
    owner = CatalogOwner()
    tags = serializers.ListField(child=serializers.CharField())
    purpose = serializers.CharField()
    quality = CatalogQuality()


class CatalogProductResponse(CatalogProductSummary):
    """One product: its declaration and its current quality (the last run of each check, the open
    incidents), and its last 20 versions."""

    quality = CatalogQualityDetail()
    definition = CatalogDefinition()
    versions = CatalogVersion(many=True)


class CatalogRunQueuedResponse(serializers.Serializer):
    """The product's checks were queued for the worker."""

    product = serializers.CharField()
    queued = serializers.BooleanField()


class CatalogIncidentItem(serializers.Serializer):
    """One incident of a product: opened by a failing check, acknowledged, assigned and resolved by staff (or
    closed by the first passing run of its check)."""

    id = serializers.IntegerField()
    product = serializers.CharField()
    product_title = serializers.CharField()
    kind = serializers.CharField(help_text="The check that opened it: freshness, coverage, gaps or drift.")
    state = serializers.CharField(help_text="open (nobody acknowledged it yet), acknowledged, or resolved.")
    opened = serializers.DateTimeField()
    closed = serializers.DateTimeField(allow_null=True)
    message = serializers.CharField()
    acknowledged = serializers.DateTimeField(allow_null=True)
    acknowledged_by = serializers.CharField(allow_null=True)
    assignee = serializers.CharField(allow_null=True, help_text="The staff member who handles it.")
    resolved_by = serializers.CharField(allow_null=True, help_text="Who closed it by hand (null when a passing check did).")


class CatalogSubscriptionState(serializers.Serializer):
    """The products whose new incidents are mailed to the caller."""

    products = serializers.ListField(child=serializers.CharField())
    email = serializers.CharField(allow_null=True, help_text="Where the mail goes (null: the account has no address).")
