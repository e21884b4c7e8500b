"""Documentation-only response serializers of the saturation API (OpenAPI schema, issue 16 item 13).

The views build their bodies by hand from the stored record; these classes describe those bodies so
that clients and fuzzers can check every answer. They are never used to render a response."""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.core.api.heatmaps import HeatmapCoverage, HeatmapScale, HeatmapSeparator, HeatmapShade, HeatmapWindow


class SaturationComponents(serializers.Serializer):
    """The score's components, 0-1 fractions of the practical ceilings (null when unknown)."""

    compute = serializers.FloatField(allow_null=True)
    memory = serializers.FloatField(allow_null=True)
    link = serializers.FloatField(allow_null=True)


class SaturationWindow(serializers.Serializer):
    """The scored time window and where the steady state began (null when unknown)."""

    start = serializers.DateTimeField(allow_null=True)
    end = serializers.DateTimeField(allow_null=True)
    steady_start = serializers.DateTimeField(allow_null=True)


class SaturationGpu(serializers.Serializer):
    """One GPU of the job: where it is, which rank runs on it, its score (0-100) and the fractions behind it.
    Rank coordinates are null when the job reported no layout; places when the topology does not know the node."""

    host = serializers.CharField()
    gpu = serializers.IntegerField()
    rank = serializers.IntegerField(allow_null=True)
    pp = serializers.IntegerField(allow_null=True)
    tp = serializers.IntegerField(allow_null=True)
    dp = serializers.IntegerField(allow_null=True)
    nic = serializers.CharField(allow_null=True)
    switch = serializers.CharField(allow_null=True, help_text='"group.index", e.g. "4.5".')
    group = serializers.IntegerField(allow_null=True)
    score = serializers.FloatField(allow_null=True, help_text="0-100.")
    compute = serializers.FloatField(allow_null=True)
    memory = serializers.FloatField(allow_null=True)
    link = serializers.FloatField(allow_null=True)
    limiter = serializers.CharField(allow_null=True, allow_blank=True)
    busy = serializers.FloatField(allow_null=True)
    p10 = serializers.FloatField(allow_null=True)
    p50 = serializers.FloatField(allow_null=True)
    p90 = serializers.FloatField(allow_null=True)
    time_high = serializers.FloatField(allow_null=True)
    clock_factor = serializers.FloatField(allow_null=True)
    throttled = serializers.FloatField(allow_null=True)
    label = serializers.CharField(allow_blank=True)
    straggler = serializers.CharField(required=False, help_text="The lagging signal, only on stragglers.")


class SaturationResponse(serializers.Serializer):
    """The job's saturation score (0-100) with its components, limiter, labels and per-GPU numbers.

    While a new scoring runs (``scoring_since``) or after one that did not finish (``message``) the
    previous result stays here."""

    job_score = serializers.FloatField(allow_null=True, help_text="0-100; null when no GPU could be scored.")
    components = SaturationComponents()
    limiter = serializers.CharField(allow_blank=True)
    labels = serializers.ListField(child=serializers.CharField())
    flags = serializers.ListField(child=serializers.CharField(), help_text="Short flags for job lists: idle GPUs, straggler, ...")
    window = SaturationWindow()
    imbalance = serializers.FloatField(allow_null=True)
    idle_gpus = serializers.IntegerField(min_value=0)
    energy_j = serializers.FloatField(allow_null=True)
    energy_low_saturation_j = serializers.FloatField(allow_null=True)
    gpu_model = serializers.CharField(allow_blank=True, help_text="The ceilings row the score was computed against.")
    step_seconds = serializers.IntegerField(allow_null=True)
    computed = serializers.DateTimeField(allow_null=True)
    per_gpu = SaturationGpu(many=True)
    scoring_since = serializers.DateTimeField(required=False, allow_null=True,
                                              help_text="When the scoring now in progress started; null when none runs.")
    message = serializers.CharField(required=False, allow_blank=True, help_text="Why the last scoring did not finish, if it did not.")


class HeatmapRow(serializers.Serializer):
    """The GPU a heatmap row shows (null where unknown, as in ``per_gpu``). The json answer has ``score``; the
    compact one ``label`` and ``members`` (GPUs in the row: more than one where rows are aggregated, and then
    null wherever the members differ)."""

    host = serializers.CharField(allow_null=True)
    gpu = serializers.IntegerField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    pp = serializers.IntegerField(allow_null=True)
    dp = serializers.IntegerField(allow_null=True)
    tp = serializers.IntegerField(allow_null=True)
    group = serializers.IntegerField(allow_null=True)
    switch = serializers.CharField(allow_null=True)
    score = serializers.FloatField(allow_null=True, required=False, help_text="json answer only.")
    label = serializers.CharField(required=False, help_text='Compact answer only: "r388 nid001234:2", "nid001234 (4 GPUs)", '
                                                            '"stage 3 (512 GPUs)".')
    members = serializers.IntegerField(min_value=1, required=False, help_text="Compact answer only.")


_SCALE_OBJECT = {
    "type": "object",
    "description": HeatmapScale.__doc__.strip(),
    "properties": {
        "zmin": {"type": "number"}, "zmax": {"type": "number"},
        "kind": {"type": "string", "enum": ["physical", "fraction", "data", "deviation"]},
        "source": {"type": "string"}, "bad": {"type": "string", "enum": ["low", "high"]},
        "colorscale": {"description": '"Viridis", or a diverging [[position, colour], ...] for deviations'},
    },
    "required": ["zmin", "zmax", "kind", "source", "bad", "colorscale"],
}


@extend_schema_field({"oneOf": [{"type": "number", "description": "json answer: value = integer x scale"}, _SCALE_OBJECT]})
class HeatmapScaleField(serializers.JSONField):
    """json answer: the resolution of ``values`` (a number); compact answer: the colour range (an object)."""


class SaturationHostRow(serializers.Serializer):
    """A host row under the GPU rows (issue 39): per bin the mean over the job's nodes, 0-1, null without a sample."""

    label = serializers.CharField()
    values = serializers.ListField(child=serializers.FloatField(allow_null=True))


class HeatmapResponse(serializers.Serializer):
    """A GPU × time matrix of one metric, in one of two encodings.

    **json** (the default without ``encoding``, ``mode``, ``rows``, ``start``, ``end``): ``values[row][column] ×
    scale`` is the mean for GPU ``rows[row]`` in the bin starting at ``times[column]`` (``bin_seconds`` long), in
    ``unit``; null where the GPU reported nothing.

    **u8** (compact): ``z`` is base64 of len(rows) × len(times) bytes, row-major; byte b < 255 means
    ``scale.zmin + b / 254 × (scale.zmax − scale.zmin)`` (values outside the range clipped to its ends), 255 no
    data. ``scale`` is a fixed physical range (fractions 0–1, SM clock from the model's base to its max boost,
    temperature from idle to slowdown, power from 0 to the limit) or, with ``mode=deviation``, ±D around the
    peers' median (``peers`` says who they are). Above 1,024 GPUs (``rows=auto``) rows are aggregated
    (``aggregated_by``): ``z`` keeps each cell's member furthest in the bad direction (``scale.bad``), ``mean``
    the members' mean. ``separators`` mark stage (sort pp) or group (sort group) changes; ``coverage`` the data's
    real first and last bin; ``shading`` the warm-up, only where there is data before ``steady_start``."""

    metric = serializers.CharField()
    title = serializers.CharField()
    unit = serializers.CharField(allow_blank=True, help_text="Empty for fractions.")
    scale = HeatmapScaleField()
    sort = serializers.CharField()
    bin_seconds = serializers.FloatField()
    times = serializers.ListField(child=serializers.CharField(), help_text="Bin starts, ISO 8601 UTC.")
    steady_start = serializers.DateTimeField(allow_null=True)
    rows = HeatmapRow(many=True)
    values = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField(allow_null=True)), required=False,
                                   help_text="json answer only.")
    mode = serializers.ChoiceField(choices=["value", "deviation"], required=False, help_text="Compact answer only (so are "
                                                                                             "the fields below).")
    encoding = serializers.ChoiceField(choices=["u8"], required=False)
    window = HeatmapWindow(required=False)
    aggregated_by = serializers.ChoiceField(choices=["node", "pp", "group"], allow_null=True, required=False)
    separators = HeatmapSeparator(many=True, required=False)
    z = serializers.CharField(allow_blank=True, required=False)
    mean = serializers.CharField(allow_null=True, allow_blank=True, required=False,
                                 help_text="Like z: the members' mean per cell; null when no row is aggregated.")
    shading = HeatmapShade(many=True, required=False)
    peers = serializers.CharField(allow_null=True, required=False)
    coverage = HeatmapCoverage(required=False)
    host = SaturationHostRow(many=True, required=False,
                          help_text="Compact answer: the host under the GPU rows (issue 39) on the same bins: CPU busy, "
                                    "data-loader CPU and host memory used of the job's nodes, 0-1; empty without host "
                                    "samples.")
