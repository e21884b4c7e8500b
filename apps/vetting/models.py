"""Models of the vetting app: vetting runs and their results, node health states with their history,
the rules catalogue (versioned) and the recommendations rules make.

``VettingResult`` is the big table (millions of rows): it repeats the time, host, switch, group, job
and user of its run so that every filter of the history page is one index range scan, newest first.
"""
from django.db import models
from django.db.models import Q

from .choices import (
    NodeHealthStateChoices,
    RecommendationStatusChoices,
    RecommendationSubjectKindChoices,
    RuleActionChoices,
    RuleKindChoices,
    RuleSeverityChoices,
    VettingResultKindChoices,
    VettingResultOutcomeChoices,
    VettingRunSourceChoices,
)


class VettingRun(models.Model):
    """One vetting of an allocation (vetnode), one DCGM diagnostic, or one round of health checks."""

    cluster = models.ForeignKey("jobs.Cluster", on_delete=models.PROTECT, related_name="vetting_runs")
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="vetting_runs")
    job_id_number = models.PositiveBigIntegerField(null=True, blank=True, db_index=True, help_text="The Slurm job id, also when the job is not known here.")
    source = models.CharField(max_length=20, choices=VettingRunSourceChoices.choices)
    protocol_name = models.CharField(max_length=200, blank=True)
    protocol_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the protocol text, when known.")
    started = models.DateTimeField(db_index=True)
    ended = models.DateTimeField(null=True, blank=True)
    submitter = models.CharField(max_length=150, blank=True, help_text="Who posted it: a user, a job token, a service.")
    user_name = models.CharField(max_length=150, blank=True, help_text="The job's Slurm user.")
    account = models.CharField(max_length=150, blank=True, help_text="The job's Slurm account.")
    hosts = models.PositiveIntegerField(default=0)
    failed_hosts = models.JSONField(default=list, blank=True)
    results_total = models.PositiveIntegerField(default=0)
    results_failed = models.PositiveIntegerField(default=0)
    warnings = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-started", "-id"]

    def __str__(self) -> str:
        return f"{self.get_source_display()} run {self.pk} ({self.started:%Y-%m-%d %H:%M})"

    @property
    def passed(self) -> bool:
        return self.results_failed == 0


class VettingResult(models.Model):
    run = models.ForeignKey(VettingRun, on_delete=models.CASCADE, related_name="results")
    time = models.DateTimeField()
    host = models.CharField(max_length=64)
    group = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Dragonfly group of the node, at ingestion.")
    switch = models.CharField(max_length=16, blank=True, help_text="Switch (group.index) of the GPU's NIC, or of NIC 0.")
    job_id_number = models.PositiveBigIntegerField(null=True, blank=True)
    user_name = models.CharField(max_length=150, blank=True)
    account = models.CharField(max_length=150, blank=True)
    kind = models.CharField(max_length=10, choices=VettingResultKindChoices.choices)
    eval_name = models.CharField(max_length=200)
    eval_type = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, help_text="The source's own word (SUCCESS, FAILED, Fail, CRITICAL ...).")
    outcome = models.CharField(max_length=10, choices=VettingResultOutcomeChoices.choices)
    rank = models.PositiveIntegerField(null=True, blank=True)
    local_rank = models.PositiveSmallIntegerField(null=True, blank=True)
    gpu = models.PositiveSmallIntegerField(null=True, blank=True)
    elapsed_s = models.FloatField(null=True, blank=True)
    bandwidth_gbs = models.FloatField(null=True, blank=True, help_text="Measured bandwidth, decimal GB/s as vetnode reports it.")
    metrics = models.JSONField(default=dict, blank=True)
    thresholds = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [
            models.Index(fields=["-time", "-id"], name="vetting_result_time"),
            models.Index(fields=["host", "-time"], name="vetting_result_host_time"),
            models.Index(fields=["outcome", "-time"], name="vetting_result_outcome_time"),
            models.Index(fields=["eval_name", "-time"], name="vetting_result_eval_time"),
            models.Index(fields=["group", "-time"], name="vetting_result_group_time"),
            models.Index(fields=["switch", "-time"], name="vetting_result_switch_time"),
            models.Index(fields=["user_name", "-time"], name="vetting_result_user_time"),
            models.Index(fields=["job_id_number"], name="vetting_result_job"),
            # Failures are rare (about 1 %) and what people look for: their own small index, newest first,
            # so "failed in group 5" reads a few thousand entries instead of walking all of them.
            models.Index(fields=["-time", "-id"], condition=Q(outcome__in=["fail", "critical"]), name="vetting_result_bad_time"),
        ]

    def __str__(self) -> str:
        return f"{self.host} {self.eval_name}: {self.outcome}"


class Rule(models.Model):
    """A rule of the catalogue. Every save makes a new version (``RuleVersion``) so findings name the
    version that made them."""

    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=40, choices=RuleKindChoices.choices)
    params = models.JSONField(default=dict, blank=True)
    action = models.CharField(max_length=20, choices=RuleActionChoices.choices)
    severity = models.CharField(max_length=10, choices=RuleSeverityChoices.choices, default=RuleSeverityChoices.WARNING)
    enabled = models.BooleanField(default=True)
    version = models.PositiveIntegerField(default=1)
    updated = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return f"{self.name} (v{self.version})"


class RuleVersion(models.Model):
    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    snapshot = models.JSONField()
    changed_by = models.CharField(max_length=150, blank=True)
    comment = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["rule", "-version"]
        constraints = [models.UniqueConstraint(fields=["rule", "version"], name="vetting_rule_version_unique")]


class NodeHealth(models.Model):
    host = models.CharField(max_length=64, unique=True)
    state = models.CharField(max_length=20, choices=NodeHealthStateChoices.choices, default=NodeHealthStateChoices.HEALTHY)
    severity = models.CharField(max_length=10, choices=RuleSeverityChoices.choices, default=RuleSeverityChoices.WARNING)
    reason = models.CharField(max_length=500, blank=True)
    since = models.DateTimeField()
    acknowledged_by = models.CharField(max_length=150, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    drained_by_belvedere = models.BooleanField(default=False)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["host"]
        indexes = [models.Index(fields=["state", "severity"], name="vetting_health_state")]

    def __str__(self) -> str:
        return f"{self.host}: {self.get_state_display()}"


class NodeHealthEvent(models.Model):
    """Who moved a node from one state to another, when, why, and what ran in Slurm."""

    host = models.CharField(max_length=64, db_index=True)
    from_state = models.CharField(max_length=20, choices=NodeHealthStateChoices.choices)
    to_state = models.CharField(max_length=20, choices=NodeHealthStateChoices.choices)
    action = models.CharField(max_length=20, help_text="rule, acknowledge, drain, repair, return, clear")
    actor = models.CharField(max_length=150, help_text="A username, or rule:<slug> v<version>.")
    reason = models.CharField(max_length=500, blank=True)
    command = models.TextField(blank=True, help_text="The scontrol command, shell-quoted, run or (dry run) not; never cut short.")
    executed = models.BooleanField(default=False)
    dry_run = models.BooleanField(default=False, help_text="A dry run: what would have run; the node's state did not change.")
    output = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]


class Recommendation(models.Model):
    """What a rule found about a node or a switch. At most one open (or acknowledged) recommendation per
    rule and subject: evaluating again updates its evidence instead of adding another."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="recommendations")
    rule_version = models.PositiveIntegerField()
    subject_kind = models.CharField(max_length=10, choices=RecommendationSubjectKindChoices.choices)
    subject = models.CharField(max_length=64)
    hosts = models.JSONField(default=list)
    action = models.CharField(max_length=20, choices=RuleActionChoices.choices)
    severity = models.CharField(max_length=10, choices=RuleSeverityChoices.choices)
    summary = models.CharField(max_length=500)
    evidence = models.JSONField(default=list, help_text="Result ids, newest first.")
    latest_evidence = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=RecommendationStatusChoices.choices, default=RecommendationStatusChoices.OPEN)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    resolved_by = models.CharField(max_length=150, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    notified = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["rule", "subject_kind", "subject"],
                                               condition=Q(status__in=["open", "acknowledged"]),
                                               name="vetting_recommendation_one_open")]

    def __str__(self) -> str:
        return f"{self.rule.slug}: {self.subject_kind} {self.subject} ({self.status})"
