"""Documentation-only response serializers of the telemetry API (OpenAPI schema, issue 16 item 13).

The views build these bodies by hand; these classes describe them so that clients and fuzzers can
check every answer. They are never used to render a response."""
from rest_framework import serializers

from apps.core.api.heatmaps import HeatmapCoverage, HeatmapScale, HeatmapSeparator, HeatmapShade, HeatmapWindow  # noqa: F401 - response shapes


class IngestProblem(serializers.Serializer):
    """A sample or line that was not stored, and why. Posted samples name ``row`` (0-based), ``line`` (NDJSON)
    and ``field``; imported text names ``line`` and ``column`` (the field tag or metric, when known)."""

    row = serializers.IntegerField(required=False, min_value=0)
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(required=False, allow_null=True)
    column = serializers.CharField(required=False, allow_null=True)
    message = serializers.CharField()


class IngestResponse(serializers.Serializer):
    """How many samples were stored and rejected, the batch that records it, and the first problems."""

    accepted = serializers.IntegerField(min_value=0, help_text="Samples and versions kept.")
    versions = serializers.IntegerField(min_value=0, help_text="Of them, version readings stored as facts (never samples).")
    rejected = serializers.IntegerField(min_value=0)
    batch = serializers.IntegerField(help_text="The ingest batch's id.")
    errors = IngestProblem(many=True)
    errors_truncated = serializers.BooleanField(help_text="Whether there were more problems than listed.")


class SeriesResponse(serializers.Serializer):
    """Samples (``step`` null: ts, cluster, host, gpu, field, value ...) or bucket statistics (``step`` seconds:
    bucket, host, gpu, field, count and the asked stats), as ``columns`` and ``rows`` of values in that order."""

    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step = serializers.IntegerField(allow_null=True, help_text="seconds per bucket, as used")
    step_note = serializers.CharField(help_text="why the step is larger than asked (at most 20,000 buckets from start "
                                                "to end); empty when it is not")
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.ListField(child=serializers.JSONField()),
                                 help_text="One list per sample or bucket; times as ISO 8601 UTC, numbers or null, text.")
    truncated = serializers.BooleanField(help_text="Whether more rows matched than the limit sends.")


# ---------------------------------------------------------------------------------------------
# Compact heatmaps (apps/core/heatmaps.py); the parts shared with the saturation heatmap are apps/core/api/heatmaps.py


class CompactHeatmapRow(serializers.Serializer):
    """One row: a GPU, or (``members`` > 1) GPUs aggregated by node, stage or group; null where unknown or not
    common to all members."""

    label = serializers.CharField(help_text='"r388 nid001234:2", "nid001234:2", "nid001234 (4 GPUs)", "stage 3 (512 GPUs)"')
    host = serializers.CharField(allow_null=True)
    gpu = serializers.IntegerField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    pp = serializers.IntegerField(allow_null=True)
    dp = serializers.IntegerField(allow_null=True)
    tp = serializers.IntegerField(allow_null=True)
    group = serializers.IntegerField(allow_null=True)
    switch = serializers.CharField(allow_null=True)
    members = serializers.IntegerField(min_value=1)


class CompactHeatmapFields(serializers.Serializer):
    """The fields every compact heatmap answer (``encoding=u8``) has."""

    title = serializers.CharField()
    unit = serializers.CharField(allow_blank=True, help_text="Empty for fractions.")
    mode = serializers.ChoiceField(choices=["value", "deviation"])
    encoding = serializers.ChoiceField(choices=["u8"])
    sort = serializers.CharField()
    bin_seconds = serializers.FloatField()
    times = serializers.ListField(child=serializers.CharField(), help_text="Bin starts, ISO 8601 UTC.")
    window = HeatmapWindow()
    scale = HeatmapScale()
    rows = CompactHeatmapRow(many=True)
    aggregated_by = serializers.ChoiceField(choices=["node", "pp", "group"], allow_null=True)
    separators = HeatmapSeparator(many=True)
    z = serializers.CharField(allow_blank=True, help_text="base64 of len(rows) × len(times) bytes, row-major: per cell the "
                                                          "value, or for aggregated rows the member furthest in the bad direction")
    mean = serializers.CharField(allow_null=True, allow_blank=True,
                                 help_text="Like z: the members' mean per cell; null when no row is aggregated.")
    steady_start = serializers.DateTimeField(allow_null=True, help_text="Telemetry knows no steady state: null.")
    shading = HeatmapShade(many=True)
    peers = serializers.CharField(allow_null=True, help_text="Who each GPU is compared with (deviation mode), in words.")
    coverage = HeatmapCoverage()


class HostHeatmapRow(serializers.Serializer):
    """A host row under the GPU rows (issue 39): per bin the mean over the job's nodes, 0-1, null without a sample."""

    label = serializers.CharField()
    values = serializers.ListField(child=serializers.FloatField(allow_null=True))


class TelemetryHeatmapResponse(CompactHeatmapFields):
    """One DCGM field of a job as a compact GPU × time heatmap (``metric`` is the field id), with the host rows under it."""

    metric = serializers.IntegerField()
    host = HostHeatmapRow(many=True, help_text="CPU busy, data-loader CPU and host memory used of the job's nodes on the "
                                               "same bins; empty without host samples")


class TelemetryFieldName(serializers.Serializer):
    """A DCGM field of the table."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    unit = serializers.CharField(allow_blank=True)


class TelemetryStat(serializers.Serializer):
    """Min, mean (weighted by samples) and max over the node's GPUs and the run; null without samples."""

    min = serializers.FloatField(allow_null=True)
    mean = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)


class TelemetryNode(serializers.Serializer):
    """One node of the job: its GPUs and, per field id, its statistics."""

    host = serializers.CharField()
    gpus = serializers.IntegerField(min_value=0)
    stats = serializers.DictField(child=TelemetryStat(), help_text="field id (as text) -> {min, mean, max}")


class TelemetryNodesResponse(serializers.Serializer):
    """The node × field min/mean/max table of a job."""

    fields = TelemetryFieldName(many=True)
    nodes = TelemetryNode(many=True)


class TelemetryDcgmField(serializers.Serializer):
    """A DCGM field GPU samples may name (by id, name or legacy name)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    legacy = serializers.CharField(allow_null=True, help_text="The name up to DCGM 4.5, when 4.6 renamed it.")
    dmon = serializers.CharField(allow_null=True, help_text="The column tag dcgmi dmon prints.")
    unit = serializers.CharField()
    kind = serializers.CharField(help_text="gauge (a level or an interval average) or counter (use differences).")
    group = serializers.CharField()
    meaning = serializers.CharField()


class TelemetryNetworkField(serializers.Serializer):
    """A network field NIC (``scope`` nic) or switch-port (``scope`` port) samples may name, by its name or
    one of its driver names; several driver names are summed into the field."""

    name = serializers.CharField()
    scope = serializers.CharField(help_text="nic (an hsnN interface of a node) or port (a switch port).")
    unit = serializers.CharField()
    kind = serializers.CharField(help_text="counter: cumulative as reported (rates from differences); gauge: as-is.")
    meaning = serializers.CharField()
    driver_names = serializers.ListField(child=serializers.CharField())
    source = serializers.CharField(help_text="Where the driver names are read.")


class TelemetryHostField(serializers.Serializer):
    """A host field (``apps/telemetry/hostfields.py``) that ``host_metrics`` samples may name."""

    name = serializers.CharField()
    domains = serializers.ListField(child=serializers.CharField(),
                                    help_text="node, numa (a NUMA domain with CPUs), gpu (a GPU's memory as a NUMA "
                                    "node), step (a job step's cgroup).")
    unit = serializers.CharField()
    kind = serializers.CharField()
    meaning = serializers.CharField()
    source = serializers.CharField(help_text="Where the collector reads it.")


class TelemetryFieldsResponse(serializers.Serializer):
    """The field registries: DCGM fields for GPU samples, network fields for NIC and switch-port samples,
    host fields for host samples."""

    dcgm = TelemetryDcgmField(many=True)
    network = TelemetryNetworkField(many=True)
    host = TelemetryHostField(many=True)
