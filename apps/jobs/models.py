"""Slurm clusters, their jobs and steps, and per-job tokens.

A job is identified by (cluster, job id). Access follows the job's Slurm user and account
(``selectors.job_list_for_user``), not a foreign key, because jobs arrive before — and sometimes
without — a matching portal user.
"""
import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from apps.core.models import TimeStampedModel
from apps.core.timebounds import WriteWindow, write_window

from .choices import ClusterSyncModeChoices, JobProductStatusChoices, JobStateChoices


class Cluster(TimeStampedModel):
    """A Slurm cluster Belvedere follows, and the state of its last sync (shown to staff)."""

    name = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200, blank=True)
    sync_mode = models.CharField(max_length=20, choices=ClusterSyncModeChoices.choices, default=ClusterSyncModeChoices.MODE_COMMANDS)
    # A CharField: URLField's validator refuses unix:///run/slurmrestd.socket and host names
    # without a dot (http://slurmctl:6820), both normal for slurmrestd.
    slurmrestd_url = models.CharField(
        max_length=500, blank=True,
        validators=[RegexValidator(r"^(https?://[^\s/]+(/\S*)?|unix:///\S+)$", _("an http(s):// URL or unix:///path/to/socket"))],
        help_text=_("slurmrestd address: http(s)://host:port or unix:///path/to/socket."),
    )
    sync_enabled = models.BooleanField(default=True)
    last_sync = models.DateTimeField(null=True, blank=True)
    last_sync_ok = models.BooleanField(default=False)
    last_sync_message = models.TextField(blank=True)
    last_sync_counts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


ACTIVE_STATES = {JobStateChoices.PENDING, JobStateChoices.RUNNING, JobStateChoices.SUSPENDED, JobStateChoices.COMPLETING}


def node_search_text(node_list) -> str:
    return f",{','.join(node_list)}," if node_list else ""


class Job(TimeStampedModel):
    """One Slurm job, array task or heterogeneous component."""

    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.CASCADE, related_name="jobs")
    job_id = models.PositiveBigIntegerField()
    array_job_id = models.PositiveBigIntegerField(null=True, blank=True)
    array_task_id = models.PositiveIntegerField(null=True, blank=True)
    array_task_string = models.CharField(max_length=200, blank=True)
    het_job_id = models.PositiveBigIntegerField(null=True, blank=True)
    het_offset = models.PositiveIntegerField(null=True, blank=True)
    name = models.CharField(max_length=500, blank=True)
    user_name = models.CharField(max_length=64, db_index=True)
    account = models.CharField(max_length=64, blank=True, db_index=True)
    partition = models.CharField(max_length=64, blank=True)
    qos = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=20, choices=JobStateChoices.choices, db_index=True)
    state_reason = models.CharField(max_length=200, blank=True)
    submit_time = models.DateTimeField(null=True, blank=True, db_index=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    time_limit_minutes = models.PositiveIntegerField(null=True, blank=True)
    nodes = models.TextField(blank=True, help_text=_("Slurm hostlist expression, e.g. nid[000001-000128]."))
    node_list = models.JSONField(default=list, blank=True, help_text=_("Expanded hostnames, in Slurm's order."))
    # ",nid000001,nid000002," - lets "jobs on node X" be a LIKE on every database backend.
    node_search = models.TextField(blank=True, editable=False)
    node_count = models.PositiveIntegerField(null=True, blank=True)
    tasks = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveIntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    signal = models.IntegerField(null=True, blank=True)
    working_directory = models.TextField(blank=True)
    command = models.TextField(blank=True)
    comment = models.TextField(blank=True)
    environment = models.CharField(max_length=200, blank=True, help_text=_("The --environment EDF, when known."))
    dependency = models.CharField(max_length=1000, blank=True, help_text=_(
        "The --dependency Slurm last showed (singleton, afterok:...); kept after Slurm clears a fulfilled one."))
    restart_count = models.PositiveIntegerField(null=True, blank=True, help_text=_("How often Slurm requeued the job (restart_cnt)."))
    run_name = models.CharField(max_length=100, blank=True, help_text=_(
        "The training run the job's metrics client names (the metrics API's \"run\" key): its campaign."))
    source = models.CharField(max_length=20, blank=True, help_text=_("squeue, sacct, scontrol, event or demo."))

    class Meta:
        ordering = ["-submit_time", "-job_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "job_id"], name="jobs_job_unique")]
        indexes = [models.Index(fields=["cluster", "state"]), models.Index(fields=["account", "-submit_time"])]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.job_id}"

    def save(self, *args, **kwargs):
        self.node_search = node_search_text(self.node_list)
        super().save(*args, **kwargs)

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def elapsed(self):
        """How long the job has run (None before it starts): the length of its run window."""
        window = self.run_window()
        return None if window is None else window[1] - window[0]

    def run_window(self, now=None, *, slack=None, from_submit: bool = False, open_end: bool = False):
        """The time the job ran as ``(start, end)``: the one rule the job's products, a job token's scope and
        the filters "during the job" share.

        ``end`` is the job's end, or ``now`` while it runs (None instead with ``open_end``, for filters that
        leave a running job's end open); it is never before ``start`` (Slurm's clock against ours). A job
        running past its time limit still runs to ``now`` (grace time, OverTimeLimit): the limit is a plan,
        never the window. None when the job has not started: no start time, still pending (squeue's start
        time of a pending job is a projection), or a start after ``now`` while it has no end.
        ``from_submit``: a job not started counts from its submission (or ``now``) instead, the time a job
        token may post for. ``slack`` (a timedelta) widens both ends.
        """
        now = now or timezone.now()
        start = None if self.state == JobStateChoices.PENDING else self.start_time
        if start is not None and self.end_time is None and start > now:
            start = None
        if start is None:
            if not from_submit:
                return None
            start = min(self.submit_time or now, now)
        end = self.end_time or (None if open_end else now)
        if end is not None:
            end = max(end, start)
        if slack:
            start, end = start - slack, (end + slack if end is not None else None)
        return start, end

    def write_window(self, now=None) -> WriteWindow:
        """The times the job's own writes (a job token's samples, imports, metrics) may carry: its run time, or its
        time since submission while pending, ± ``JOB_WRITE_MARGIN_MINUTES`` (``apps.core.timebounds``' rule)."""
        return write_window(pending=self.state == JobStateChoices.PENDING, start=self.start_time, end=self.end_time,
                            submit=self.submit_time, now=now or timezone.now(),
                            margin=timedelta(minutes=settings.JOB_WRITE_MARGIN_MINUTES))

    @property
    def display_id(self) -> str:
        if self.array_job_id and self.array_task_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        if self.het_job_id and self.het_offset is not None:
            return f"{self.het_job_id}+{self.het_offset}"
        return str(self.job_id)


class JobStep(models.Model):
    """A step of a job (batch, extern, 0, 1, ...)."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="steps")
    step_id = models.CharField(max_length=40)
    name = models.CharField(max_length=500, blank=True)
    nodes = models.TextField(blank=True)
    tasks = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=20, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["job", "start_time", "step_id"]
        constraints = [models.UniqueConstraint(fields=["job", "step_id"], name="jobs_step_unique")]

    def __str__(self) -> str:
        return f"{self.job}.{self.step_id}"


JOB_TOKEN_PREFIX = "bvj_"


class JobToken(models.Model):
    """A secret that lets code inside one job post data for that job only.

    Only a hash is stored. Valid while the job is pending or running, and for a grace period
    after it ends (``expires`` is set when the end is recorded).
    """

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text=_("The last characters, to tell tokens apart."))
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=150, blank=True)

    def __str__(self) -> str:
        return f"job token …{self.hint} for {self.job}"

    @staticmethod
    def hash(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, job: "Job", created_by: str = "") -> tuple["JobToken", str]:
        key = JOB_TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(job=job, key_hash=cls.hash(key), hint=key[-6:], created_by=created_by)
        return token, key

    def is_valid(self, now=None) -> bool:
        return self.expires is None or (now or timezone.now()) < self.expires


class JobProduct(models.Model):
    """Abstract base of a product of one job, refreshed while the job runs and once after it ends.

    A concrete product names the field holding when it was last built (``built_field``) and the setting
    holding how old a running job's product may get (``refresh_setting``); ``busy_field``, when set, names
    a field that is not null while a build of the product runs (the sweeper leaves such a job alone).
    Each concrete model is found by :func:`apps.jobs.products.job_products`: no registration needed.
    """

    built_field: str = ""
    refresh_setting: str = ""
    busy_field: str | None = None

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="%(app_label)s")
    status = models.CharField(max_length=20, choices=JobProductStatusChoices.choices,
                              default=JobProductStatusChoices.STATUS_WAITING)
    message = models.CharField(max_length=500, blank=True)
    window_start = models.DateTimeField(null=True, blank=True)
    window_end = models.DateTimeField(null=True, blank=True, help_text=_("End of the job's run window the product "
                                                                            "was last built over."))
    step_seconds = models.PositiveIntegerField(null=True, blank=True, help_text=_("Bucket width in seconds."))
    samples = models.PositiveBigIntegerField(default=0, help_text=_("Telemetry samples the product was built from."))
    product = models.CharField(max_length=500, blank=True, help_text=_("Path of the product, relative to the data folder."))

    class Meta:
        abstract = True

    @property
    def built_at(self):
        """When the product was last built (None: never)."""
        return getattr(self, self.built_field)

    def has_product(self) -> bool:
        """Whether the record points at a built product that pages can show."""
        return self.status == JobProductStatusChoices.STATUS_READY and bool(self.product)

    def is_stale(self, job, now=None) -> bool:
        """Whether the lifecycle wants the product built again (:func:`apps.jobs.products.needs_refresh`)."""
        from .products import fresh_since, needs_refresh

        return needs_refresh(job_end=job.end_time, built=self.built_at, reaches=self.window_end,
                             fresh_since=fresh_since(type(self), now))
