"""Documentation-only response serializers of the reports API (drf-spectacular); never used to render."""
from rest_framework import serializers

from apps.saturation.waste import HEADROOM_WORDS, LOSS_WORDS


class UsageMeasures(serializers.Serializer):
    """What a set of jobs used inside the window, and how much of it is known (shares 0-1, null when there are no GPU-hours)."""

    jobs = serializers.IntegerField(help_text="Jobs whose run overlaps the window.")
    gpu_hours = serializers.FloatField(help_text="GPUs × hours of each job's run inside the window.")
    mean_saturation = serializers.FloatField(allow_null=True, help_text="GPU-hour-weighted mean score (0-100) of the scored jobs.")
    scored_share = serializers.FloatField(allow_null=True, help_text="Share of the GPU-hours with a score (0-1).")
    idle_gpu_hours = serializers.FloatField()
    gpu_hours_lost = serializers.FloatField(help_text=LOSS_WORDS + " Unknown loss is not counted.")
    headroom_gpu_hours = serializers.FloatField(help_text=HEADROOM_WORDS + " Jobs without a reference add nothing.")
    lost_known_share = serializers.FloatField(allow_null=True, help_text="Share of the GPU-hours whose loss is known.")
    energy_kwh = serializers.FloatField(allow_null=True, help_text="Energy measured inside the window (kWh); null when none was.")
    energy_share = serializers.FloatField(allow_null=True, help_text="Share of the GPU-hours whose energy was measured.")


class UsageRow(UsageMeasures):
    """One project, user or partition."""

    group_by = serializers.ChoiceField(choices=["project", "user", "partition"])
    key = serializers.CharField(help_text="The project (Slurm account), user or partition.")


class UsageWindow(serializers.Serializer):
    """The window ``[since, until)`` and the time the report was made (running jobs count until the earlier of now and until)."""

    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    now = serializers.DateTimeField()


class UsageBiggest(serializers.Serializer):
    """The group that lost the most GPU-hours, and its share of the loss."""

    key = serializers.CharField()
    gpu_hours_lost = serializers.FloatField()
    share = serializers.FloatField(allow_null=True)


class UsageJob(serializers.Serializer):
    """One of the jobs that lost the most GPU-hours inside the window."""

    cluster = serializers.CharField()
    job_id = serializers.IntegerField()
    name = serializers.CharField()
    user = serializers.CharField()
    account = serializers.CharField()
    partition = serializers.CharField()
    gpus = serializers.IntegerField(allow_null=True)
    gpus_source = serializers.ChoiceField(choices=["slurm", "tres", "topology", "telemetry", "unknown"],
                                          help_text="Where the GPU count comes from: Slurm (or the start event), Slurm's "
                                                    "TRES, the topology's GPUs of the job's nodes, the GPUs seen in its telemetry.")
    score = serializers.FloatField(allow_null=True)
    idle_gpus = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    gpu_hours_lost = serializers.FloatField(help_text=LOSS_WORDS)
    gpu_hours_lost_by_job = serializers.FloatField(help_text="The part of gpu_hours_lost the job lost itself: what the "
                                                             "list ranks by.")
    gpu_hours_lost_to_hardware = serializers.FloatField(help_text="The part lost to faulty hardware (the wait for a GPU "
                                                                  "whose clock the hardware holds down, GPUs on failed nodes).")
    wasteful = serializers.BooleanField(help_text="The verdict triage and mail use; wasteful jobs come first.")
    headroom_gpu_hours = serializers.FloatField(allow_null=True, help_text=HEADROOM_WORDS + " Null without a reference for "
                                                                                          "its GPU model.")
    running = serializers.BooleanField()
    url = serializers.CharField(help_text="The job's page.")


class UsageHistogram(serializers.Serializer):
    """Scored jobs per 10-point bin of their saturation score (100 falls in the last bin)."""

    edges = serializers.ListField(child=serializers.IntegerField(), help_text="Bin edges 0, 10, ..., 100.")
    jobs = serializers.ListField(child=serializers.IntegerField(), help_text="Scored jobs per bin.")
    gpu_hours = serializers.ListField(child=serializers.FloatField(), help_text="Their GPU-hours inside the window.")


class UsageGpuSource(serializers.Serializer):
    jobs = serializers.IntegerField()
    gpu_hours = serializers.FloatField()


class UsageGpuCounts(serializers.Serializer):
    """The jobs whose GPU count Slurm did not give: per other source (tres, topology, telemetry) their jobs and
    GPU-hours, and the jobs no source gives a count (counted with no GPU-hours)."""

    inferred = serializers.DictField(child=UsageGpuSource())
    unknown_jobs = serializers.IntegerField()
    unknown = serializers.ListField(child=serializers.CharField(), help_text="Up to 10 of them, as cluster/job_id.")


class UsageFilters(serializers.Serializer):
    """The filters applied (empty: all)."""

    project = serializers.CharField()
    user = serializers.CharField()
    partition = serializers.CharField()


class UsageResponse(serializers.Serializer):
    """The usage and efficiency report: totals, one row per group, the most wasteful jobs, the score histogram and the downloads of the rows."""

    window = UsageWindow()
    group_by = serializers.CharField()
    filters = UsageFilters()
    totals = UsageMeasures()
    rows = UsageRow(many=True)
    biggest = UsageBiggest(allow_null=True)
    top_jobs = UsageJob(many=True)
    histogram = UsageHistogram()
    gpu_counts = UsageGpuCounts()
    downloads = serializers.DictField(child=serializers.CharField(), help_text="format -> URL of the same rows.")
