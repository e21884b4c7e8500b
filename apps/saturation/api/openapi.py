"""Documentation-only response serializers of the saturation API (OpenAPI schema, issue 16 item 13).

The views build their bodies by hand from the stored record; these classes describe those bodies so
that clients and fuzzers can check every answer. They are never used to render a response."""
from rest_framework import serializers


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
    """The GPU a heatmap row shows (null where unknown, as in ``per_gpu``)."""

    host = serializers.CharField(allow_null=True)
    gpu = serializers.IntegerField(allow_null=True)
    rank = serializers.IntegerField(allow_null=True)
    pp = serializers.IntegerField(allow_null=True)
    dp = serializers.IntegerField(allow_null=True)
    tp = serializers.IntegerField(allow_null=True)
    group = serializers.IntegerField(allow_null=True)
    switch = serializers.CharField(allow_null=True)
    score = serializers.FloatField(allow_null=True)


class HeatmapResponse(serializers.Serializer):
    """A GPU × time matrix of one metric: ``values[row][column] × scale`` is the mean for GPU ``rows[row]``
    in the bin starting at ``times[column]`` (``bin_seconds`` long), in ``unit``; null where the GPU reported nothing."""

    metric = serializers.CharField()
    title = serializers.CharField()
    unit = serializers.CharField(allow_blank=True, help_text="Empty for fractions.")
    scale = serializers.FloatField()
    sort = serializers.CharField()
    bin_seconds = serializers.FloatField()
    times = serializers.ListField(child=serializers.CharField(), help_text="Bin starts, ISO 8601 UTC.")
    steady_start = serializers.DateTimeField(allow_null=True)
    rows = HeatmapRow(many=True)
    values = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField(allow_null=True)))
