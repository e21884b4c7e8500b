"""Documentation-only response serializers of the system API (OpenAPI schema); never used to render."""
from rest_framework import serializers

from apps.saturation.waste import HEADROOM_WORDS, LOSS_WORDS


class LoadRow(serializers.Serializer):
    """Load on one dragonfly group or switch from the running jobs there."""

    group = serializers.IntegerField(allow_null=True)
    switch = serializers.CharField(required=False, help_text="group.switch, e.g. 3.12 (switch rows only).")
    jobs = serializers.IntegerField(min_value=0)
    nodes = serializers.IntegerField(min_value=0, help_text="Allocated nodes there.")
    gpus = serializers.FloatField(min_value=0, help_text="GPUs the running jobs hold there (a node's GPUs spread "
                                                         "over its NICs' switches).")
    scored_gpus = serializers.FloatField(min_value=0)
    mean_s = serializers.FloatField(allow_null=True,
                                    help_text="GPU-weighted mean saturation score (0-100) of the scored jobs there.")
    idle_gpus = serializers.IntegerField(min_value=0)
    network = serializers.JSONField(allow_null=True, help_text="Groups: the load of the group's busiest global-link pair "
                                    "({busiest_pair_percent, with_group}) from the switches' port counters, null where "
                                    "unmeasured; switches: null.")


class RunningJob(serializers.Serializer):
    """A running job. ``cluster``, ``job_id``, ``name``, ``user``, ``account`` and ``url`` are null for a job the
    caller may not see (``visible`` false, ``label`` "another project's job")."""

    index = serializers.IntegerField(min_value=0)
    visible = serializers.BooleanField()
    cluster = serializers.CharField(allow_null=True)
    job_id = serializers.CharField(allow_null=True)
    name = serializers.CharField(allow_null=True, allow_blank=True)
    user = serializers.CharField(allow_null=True, allow_blank=True)
    account = serializers.CharField(allow_null=True, allow_blank=True)
    url = serializers.CharField(allow_null=True)
    label = serializers.CharField()
    gpus = serializers.IntegerField(min_value=0)
    nodes = serializers.IntegerField(min_value=0)
    score = serializers.FloatField(allow_null=True, help_text="0-100, the steady-state mean S; null when not scored.")
    compute = serializers.FloatField(allow_null=True, help_text="Compute saturation, 0-100.")
    memory = serializers.FloatField(allow_null=True, help_text="Memory saturation, 0-100.")
    limiter = serializers.CharField(allow_null=True)
    idle_gpus = serializers.IntegerField(min_value=0)
    stragglers = serializers.IntegerField(min_value=0, help_text="Straggler findings.")
    hours = serializers.FloatField(min_value=0)
    gpu_hours_lost_per_hour = serializers.FloatField(min_value=0, help_text="GPU-hours lost per hour of running. " + LOSS_WORDS)
    gpu_hours_lost_by_job_per_hour = serializers.FloatField(
        min_value=0, help_text="The part of gpu_hours_lost_per_hour the job loses itself (idle GPUs, stalls, stragglers "
                               "slow for the job's own reasons): what the lists rank and the verdict judges.")
    gpu_hours_lost_to_hardware_per_hour = serializers.FloatField(
        min_value=0, help_text="The part lost to faulty hardware: the wait for a GPU whose clock the hardware holds down, "
                               "GPUs on failed nodes. Counted against the node, not the job.")
    hardware_hosts = serializers.ListField(child=serializers.CharField(),
                                           help_text="The nodes the hardware part is charged to, largest first.")
    lost_by_job_share = serializers.FloatField(
        allow_null=True, min_value=0, help_text="gpu_hours_lost_by_job_per_hour over the GPUs held (0-1); null when some "
                                                "GPUs' loss is unknown.")
    wasteful = serializers.BooleanField(help_text="The verdict triage and mail use: a quarter or more of the GPU-hours lost "
                                                  "by the job, or a steady S under 30. Wasteful jobs rank first.")
    headroom_gpu_hours_per_hour = serializers.FloatField(
        min_value=0, allow_null=True, help_text="GPU-hours of headroom per hour of running; null without a reference for "
                                                "its GPU model. " + HEADROOM_WORDS)
    warming_up = serializers.BooleanField(help_text="The job has not reached its steady state yet: no loss, no verdict.")
    groups = serializers.ListField(child=serializers.IntegerField())
    switches = serializers.ListField(child=serializers.CharField())


class Totals(serializers.Serializer):
    running_jobs = serializers.IntegerField(min_value=0)
    scored_jobs = serializers.IntegerField(min_value=0)
    unscored_jobs = serializers.IntegerField(min_value=0)
    allocated_gpus = serializers.IntegerField(min_value=0)
    allocated_nodes = serializers.IntegerField(min_value=0)
    idle_gpus = serializers.IntegerField(min_value=0, help_text="Allocated GPUs busy under 5 % of the time.")
    scored_gpus = serializers.IntegerField(min_value=0)
    mean_s = serializers.FloatField(allow_null=True, help_text="GPU-weighted mean S of the scored running jobs.")
    gpu_hours_lost_per_hour = serializers.FloatField(min_value=0, help_text=LOSS_WORDS)
    headroom_gpu_hours_per_hour = serializers.FloatField(min_value=0, help_text=HEADROOM_WORDS)
    gpus_of_unknown_loss = serializers.IntegerField(
        min_value=0, help_text="GPUs without a busy share: their loss is unknown, not counted.")
    warming_up_jobs = serializers.IntegerField(min_value=0, help_text="Running jobs not yet in their steady state.")


class Coverage(serializers.Serializer):
    running_jobs = serializers.IntegerField(min_value=0)
    scored_jobs = serializers.IntegerField(min_value=0)
    newest_score = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField()


class HistogramBin(serializers.Serializer):
    bin = serializers.CharField(help_text="0-10 ... 90-100 (saturation points; 100 in the top bin), or unscored.")
    gpu_hours = serializers.FloatField(min_value=0)


class Histogram(serializers.Serializer):
    window = serializers.CharField()
    jobs = serializers.IntegerField(min_value=0)
    gpu_hours = serializers.FloatField(min_value=0)
    bins = HistogramBin(many=True)


# The windows are the answer's keys ("24h", "7d"), not Python names: the class is made with type().
Histograms = type("Histograms", (serializers.Serializer,), {
    "__doc__": "The system's saturation histogram over the last 24 hours and the last 7 days.",
    "__module__": __name__, "24h": Histogram(), "7d": Histogram()})


class SystemOverviewResponse(serializers.Serializer):
    """The whole machine now: running jobs, load per group and switch, totals, the saturation histogram."""

    generated = serializers.DateTimeField()
    cluster = serializers.CharField(allow_null=True)
    totals = Totals()
    coverage = Coverage()
    jobs = RunningJob(many=True)
    groups = LoadRow(many=True)
    switches = LoadRow(many=True)
    network = serializers.JSONField(allow_null=True, help_text="Network load per group pair from the switches' port counters "
                                    "(verdict, note, matrix of percent, busiest pairs with the jobs spanning both) and the "
                                    "file-system load of the running jobs (filesystem).")
    network_note = serializers.CharField(help_text="What the network numbers cover (ports measured, minutes), or why there are none.")
    histogram = Histograms()
    histogram_note = serializers.CharField()
