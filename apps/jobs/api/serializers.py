from django.utils import timezone
from rest_framework import serializers

from ..models import Job, JobStateChoices, JobStep
from ..slurm_json import expand_nodes


class JobStepSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobStep
        fields = ["step_id", "name", "nodes", "tasks", "state", "start_time", "end_time", "exit_code"]


class JobListSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster.name")
    url = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["cluster", "job_id", "display_id", "name", "user_name", "account", "partition", "qos", "state",
                  "submit_time", "start_time", "end_time", "time_limit_minutes", "node_count", "gpus", "nodes", "exit_code", "url"]

    def get_url(self, job) -> str:
        request = self.context.get("request")
        path = f"/jobs/{job.cluster.name}/{job.job_id}/"
        return request.build_absolute_uri(path) if request else path


class JobDetailSerializer(JobListSerializer):
    steps = JobStepSerializer(many=True, read_only=True)

    class Meta(JobListSerializer.Meta):
        fields = [*JobListSerializer.Meta.fields, "array_job_id", "array_task_id", "het_job_id", "het_offset", "state_reason",
                  "node_list", "tasks", "signal", "working_directory", "command", "comment", "environment", "steps"]


# The largest values the columns hold on every database engine (PositiveBigIntegerField and
# PositiveIntegerField): a bigger number is a 400 naming the field, never an overflow at save.
MAX_JOB_ID = 2**63 - 1
MAX_COUNT = 2**31 - 1


class JobEventSerializer(serializers.Serializer):
    EVENTS = ["start", "end", "step_start", "step_end"]

    cluster = serializers.SlugField(max_length=64)
    job_id = serializers.IntegerField(min_value=1, max_value=MAX_JOB_ID)
    event = serializers.ChoiceField(choices=EVENTS)
    time = serializers.DateTimeField(required=False, help_text="When it happened (ISO 8601, UTC); default: now.")
    user = serializers.RegexField(r"^[A-Za-z0-9_.@-]{1,64}$", required=False, allow_blank=True)
    account = serializers.RegexField(r"^[A-Za-z0-9_.-]{0,64}$", required=False, allow_blank=True)
    name = serializers.CharField(max_length=500, required=False, allow_blank=True)
    partition = serializers.CharField(max_length=64, required=False, allow_blank=True)
    nodes = serializers.CharField(max_length=100_000, required=False, allow_blank=True, help_text="Slurm hostlist, e.g. nid[000001-000128].")
    state = serializers.ChoiceField(choices=JobStateChoices.choices, required=False, help_text="Final state, with event=end.")
    exit_code = serializers.IntegerField(required=False, allow_null=True, min_value=-255, max_value=255)
    step_id = serializers.CharField(max_length=40, required=False, allow_blank=True)
    tasks = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_COUNT)
    gpus = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=MAX_COUNT)
    tres = serializers.CharField(max_length=2000, required=False, allow_blank=True,
                                 help_text="Slurm's allocated TRES, e.g. cpu=288,mem=4T,node=4,gres/gpu=16 "
                                           "(the GPU count is taken from gres/gpu when gpus is not given).")
    token = serializers.BooleanField(default=False, help_text="With event=start: also issue a job token (returned once).")

    def validate_nodes(self, value):
        try:
            expand_nodes(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def validate(self, data):
        if data["event"] in {"step_start", "step_end"} and not data.get("step_id"):
            raise serializers.ValidationError({"step_id": "required for step events"})
        if data["event"] == "start" and not data.get("user"):
            raise serializers.ValidationError({"user": "required for start events (whose job is it?)"})
        data.setdefault("time", timezone.now())
        return data
