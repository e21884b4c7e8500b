"""Writes about jobs: upserting parsed Slurm records, job events, cluster syncs, job tokens."""
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.core.bulk import insert_rows, sync_rows
from apps.core.live import mark_jobs_dirty

from .choices import ClusterSyncModeChoices, JobStateChoices
from .models import ACTIVE_STATES, Cluster, Job, JobStep, JobToken, node_search_text
from .slurm import SlurmCommandError, run_slurm_command
from .slurm_json import SlurmJob, SlurmJsonError, parse_sacct, parse_squeue
from .slurmrestd import SlurmRestClient, SlurmRestError

KNOWN_STATES = set(JobStateChoices.values)
# Fields copied from a parsed record onto the stored job; empty incoming values never erase
# what another source already said (sacct has no task count, an event has no partition...).
COPIED_FIELDS = [
    "array_job_id", "array_task_id", "array_task_string", "het_job_id", "het_offset", "name", "account", "partition",
    "qos", "state_reason", "submit_time", "start_time", "end_time", "time_limit_minutes", "nodes", "node_count",
    "tasks", "gpus", "exit_code", "signal", "working_directory", "command", "comment", "environment",
    "dependency", "restart_count",
]


@dataclass
class UpsertReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged, "problems": len(self.problems)}


def normalise_state(state: str) -> str:
    return state if state in KNOWN_STATES else JobStateChoices.OTHER


def _job_values(record: SlurmJob) -> dict:
    values = {name: getattr(record, name) for name in COPIED_FIELDS}
    values["user_name"] = record.user
    values["state"] = normalise_state(record.state)
    values["node_list"] = list(record.node_list)
    values["node_search"] = node_search_text(values["node_list"])
    return values


def _merge(job: Job, values: dict) -> bool:
    """Apply ``values`` to ``job``; True if anything changed. Final states do not regress to
    active ones unless the job started again (a requeue)."""
    incoming_state = values.get("state")
    if job.pk and job.state not in ACTIVE_STATES and incoming_state in ACTIVE_STATES:
        restarted = values.get("start_time") and job.start_time and values["start_time"] > job.start_time
        if not restarted:
            values = {key: value for key, value in values.items() if key not in {"state", "end_time", "exit_code", "signal"}}
    changed = False
    for name, value in values.items():
        if value in (None, "", [], ()) and getattr(job, name) not in (None, "", []):
            continue
        if getattr(job, name) != value:
            setattr(job, name, value)
            changed = True
    return changed


@transaction.atomic
def jobs_upsert(cluster: Cluster, records: list[SlurmJob], source: str) -> UpsertReport:
    """Create or update the jobs in ``records``; running it twice changes nothing the second time."""
    report = UpsertReport()
    by_id = {}
    for record in records:
        by_id[record.job_id] = record  # the last record of a job id wins within one document
    existing = {job.job_id: job for job in Job.objects.filter(cluster=cluster, job_id__in=list(by_id))}
    to_create, to_update, ended = [], [], []
    for job_id, record in by_id.items():
        values = _job_values(record)
        job = existing.get(job_id)
        if job is None:
            to_create.append(Job(cluster=cluster, job_id=job_id, source=source, **values))
            continue
        was_running = not _has_ended(job)
        if _merge(job, values):
            job.source = source
            to_update.append(job)
            if was_running and _has_ended(job):
                ended.append(job.pk)
        else:
            report.unchanged += 1
    insert_rows(Job, to_create)  # one prepared statement: a sync after an outage brings tens of thousands
    if to_update:
        now = timezone.now()
        for job in to_update:
            job.modified = now
        Job.objects.bulk_update(to_update, ["user_name", "state", "node_list", "node_search", "source", "modified", *COPIED_FIELDS], batch_size=2000)
    report.created, report.updated = len(to_create), len(to_update)
    _upsert_steps(cluster, [record for record in by_id.values() if record.steps])
    _close_tokens(cluster, [record.job_id for record in by_id.values() if record.end_time])
    score_ended_jobs(ended)
    return report


def _has_ended(job: Job) -> bool:
    """The job ran and is over: it has a start, an end and a final state."""
    return bool(job.start_time and job.end_time and not job.is_active)


def score_ended_jobs(job_pks: list[int]) -> list[int]:
    """A job's end brings its products (telemetry cube, saturation score: whatever ``apps.core.refresh``
    registers) up to date at once, through the live refresh (a debounced ``core.refresh_job`` queued when the
    transaction commits) instead of waiting for the beat's next sweep: until then its page would show the
    score of its last running minutes, or none. Only jobs seen running before their end: a sync that brings
    finished jobs the portal never saw running leaves them to the sweep (a first sync holds thousands)."""
    return mark_jobs_dirty(job_pks, reason="the job ended")


def _upsert_steps(cluster: Cluster, records: list[SlurmJob]) -> None:
    if not records:
        return
    job_pks = dict(Job.objects.filter(cluster=cluster, job_id__in=[r.job_id for r in records]).values_list("job_id", "pk"))
    wanted = {
        (job_pks[record.job_id], step.step_id): {
            "name": step.name, "nodes": step.nodes, "tasks": step.tasks, "state": step.state,
            "start_time": step.start, "end_time": step.end, "exit_code": step.exit_code,
        }
        for record in records for step in record.steps
    }
    sync_rows(JobStep.objects.filter(job_id__in=job_pks.values()), wanted, key=["job_id", "step_id"],
              fields=["name", "nodes", "tasks", "state", "start_time", "end_time", "exit_code"],
              build=lambda key, values: JobStep(job_id=key[0], step_id=key[1], **values),
              remove=False)  # a step a later document leaves out (sacct trims old ones) stays known


def _close_tokens(cluster: Cluster, job_ids: list[int]) -> None:
    """Job tokens stop working a grace period after their job ends."""
    if not job_ids:
        return
    grace = timedelta(hours=settings.JOB_TOKEN_GRACE_HOURS)
    for job_pk, end_time in Job.objects.filter(cluster=cluster, job_id__in=job_ids, end_time__isnull=False, tokens__isnull=False,
                                               tokens__expires__isnull=True).values_list("pk", "end_time").distinct():
        JobToken.objects.filter(job_id=job_pk, expires__isnull=True).update(expires=end_time + grace)


# ---------------------------------------------------------------------------------------------
# Syncing a cluster: the Slurm commands or slurmrestd
# ---------------------------------------------------------------------------------------------
class _AccountingDisabled(Exception):
    """A source that cannot answer because the cluster has no accounting: a note, not a failure."""


ACCOUNTING_DISABLED_NOTE = "accounting is disabled on this cluster; finished jobs come from {jobs} and events only"


def _command_sources(run, timeout: float, start) -> list:
    """``squeue --json``, then ``sacct --json`` since ``start``."""

    def sacct() -> str:
        try:
            # Relative to sacct's own clock: a wall-clock time would be read in the host's time
            # zone and shift the window on hosts not running in UTC.
            seconds = max(60, int((timezone.now() - start).total_seconds()))
            return run(["sacct", "--json", "--allusers", "--starttime", f"now-{seconds}seconds"], timeout)
        except SlurmCommandError as exc:
            if "accounting storage is disabled" in str(exc).lower():
                raise _AccountingDisabled(f"sacct: {ACCOUNTING_DISABLED_NOTE.format(jobs='squeue')}") from None
            raise

    return [("squeue", lambda: run(["squeue", "--json"], timeout), parse_squeue), ("sacct", sacct, parse_sacct)]


def _slurmrestd_token() -> str:
    """SLURMRESTD_TOKEN_FILE (read now: tokens from ``scontrol token`` expire and get replaced)
    when set, else SLURMRESTD_TOKEN. The file may hold the token or scontrol's ``SLURM_JWT=...`` line."""
    path = settings.SLURMRESTD_TOKEN_FILE
    if not path:
        return settings.SLURMRESTD_TOKEN
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise SlurmRestError(f"SLURMRESTD_TOKEN_FILE {path}: cannot read it ({reason})") from None
    token = text.removeprefix("SLURM_JWT=").strip()
    if not token:
        raise SlurmRestError(f"SLURMRESTD_TOKEN_FILE {path} is empty")
    return token


def _slurmrestd_sources(cluster: Cluster, timeout: float, start) -> list:
    """slurmrestd's ``/slurm/<v>/jobs`` and ``/slurmdb/<v>/jobs`` (the squeue and sacct documents)."""
    if not cluster.slurmrestd_url:
        raise SlurmRestError(f"cluster {cluster.name} syncs with slurmrestd but has no slurmrestd URL")
    client = SlurmRestClient(cluster.slurmrestd_url, user_name=settings.SLURMRESTD_USER_NAME,
                             token=_slurmrestd_token(), api_version=settings.SLURMRESTD_API_VERSION, timeout=timeout)

    def db_jobs() -> str:
        try:
            return client.db_jobs(start)
        except SlurmRestError as exc:
            # 22.05 without slurmdbd: slurmrestd runs without openapi/dbv0.0.38 and /slurmdb/ is a 404.
            text = str(exc).lower()
            if exc.status == 404 or "accounting storage is disabled" in text or "not configured with slurmdbd" in text:
                note = ACCOUNTING_DISABLED_NOTE.format(jobs="slurmrestd/jobs")
                raise _AccountingDisabled(f"slurmrestd/slurmdb: {note} ({exc})") from None
            raise

    return [("slurmrestd/jobs", client.jobs, parse_squeue), ("slurmrestd/slurmdb", db_jobs, parse_sacct)]


def cluster_sync(cluster: Cluster, *, run=run_slurm_command, since_hours: int | None = None) -> dict:
    """One sync: pending/running/recent jobs, then finished ones from accounting when it answers.

    By the cluster's sync mode: ``squeue --json`` and ``sacct --json`` (commands; ``run`` runs
    them), or the same two documents from slurmrestd (``cluster.slurmrestd_url``, settings
    ``SLURMRESTD_*``). Records the outcome on the cluster for staff."""
    timeout = settings.SLURM_COMMAND_TIMEOUT
    since_hours = since_hours or settings.SLURM_SACCT_LOOKBACK_HOURS
    start = timezone.now() - timedelta(hours=since_hours)
    counts: dict = {}
    messages: list[str] = []
    ok = True
    try:
        if cluster.sync_mode == ClusterSyncModeChoices.MODE_RESTD:
            sources = _slurmrestd_sources(cluster, timeout, start)
        else:
            sources = _command_sources(run, timeout, start)
    except SlurmRestError as exc:
        sources, ok = [], False
        messages.append(str(exc))
    for name, fetch, parser in sources:
        try:
            output = fetch()
        except _AccountingDisabled as note:
            messages.append(str(note))
            continue
        except (SlurmCommandError, SlurmRestError) as exc:
            ok = False
            messages.append(str(exc))
            continue
        try:
            result = parser(output, cluster.name)
        except SlurmJsonError as exc:
            ok = False
            messages.append(f"{name}: {exc}")
            continue
        report = jobs_upsert(cluster, result.jobs, source=name)
        counts[name] = {**report.as_dict(), "jobs": len(result.jobs)}
        if result.format:  # which Slurm and data_parser wrote the document: "data_parser v0.0.41, Slurm 24.05.1"
            counts[name]["format"] = result.format
        for warning in result.warnings:
            messages.append(f"{name}: {warning}")
        for problem in result.problems[:20]:
            messages.append(f"{name}: {problem}")
        if result.problems:
            counts[name]["problems"] = len(result.problems)
    cluster.last_sync = timezone.now()
    cluster.last_sync_ok = ok
    cluster.last_sync_counts = counts
    cluster.last_sync_message = "\n".join(messages)[:5000]
    cluster.save(update_fields=["last_sync", "last_sync_ok", "last_sync_counts", "last_sync_message", "modified"])
    return counts


# ---------------------------------------------------------------------------------------------
# Events pushed by prolog/epilog
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobEvent:
    cluster: str
    job_id: int
    event: str  # start, end, step_start, step_end
    time: object
    user: str = ""
    account: str = ""
    name: str = ""
    nodes: str = ""
    partition: str = ""
    state: str = ""
    exit_code: int | None = None
    step_id: str = ""
    tasks: int | None = None
    gpus: int | None = None
    tres: str = ""


@transaction.atomic
def job_event_apply(event: JobEvent) -> Job:
    from .slurm_json import expand_nodes, gpus_from_tres

    # Every node's prolog posts the same start event at the same moment: get_or_create retries
    # its get when a concurrent create wins the unique constraint, and the row lock then
    # serialises the updates.
    cluster, _ = Cluster.objects.get_or_create(name=event.cluster, defaults={"sync_mode": "push"})
    job, _ = Job.objects.select_for_update().get_or_create(
        cluster=cluster, job_id=event.job_id,
        defaults={"user_name": event.user, "state": JobStateChoices.PENDING, "source": "event"},
    )
    gpus = event.gpus if event.gpus is not None else gpus_from_tres(event.tres)
    values: dict = {"name": event.name, "account": event.account, "partition": event.partition, "gpus": gpus}
    if event.user:
        values["user_name"] = event.user
    if event.nodes:
        values["nodes"] = event.nodes
        values["node_list"] = list(expand_nodes(event.nodes))
        values["node_count"] = len(values["node_list"])
    if event.event == "start":
        values.update(state=JobStateChoices.RUNNING, start_time=event.time, tasks=event.tasks)
    elif event.event == "end":
        values.update(state=normalise_state(event.state or JobStateChoices.ENDED), end_time=event.time, exit_code=event.exit_code)
    was_running = not _has_ended(job)
    _merge(job, values)
    job.source = job.source or "event"
    job.save()
    if event.event == "end" and was_running and _has_ended(job):
        score_ended_jobs([job.pk])
    if event.event in {"step_start", "step_end"}:
        step, _ = JobStep.objects.get_or_create(job=job, step_id=event.step_id)
        if event.event == "step_start":
            step.start_time, step.state = event.time, JobStateChoices.RUNNING
            step.nodes, step.tasks = event.nodes or step.nodes, event.tasks or step.tasks
        else:
            step.end_time, step.state, step.exit_code = event.time, normalise_state(event.state or JobStateChoices.COMPLETED), event.exit_code
        step.save()
    if event.event == "end":
        _close_tokens(cluster, [job.job_id])
    return job


def job_token_issue(job: Job, created_by: str) -> str:
    """A new job token's secret; it is shown once and only its hash is kept."""
    token, key = JobToken.issue(job, created_by)
    if job.end_time and not job.is_active:
        token.expires = job.end_time + timedelta(hours=settings.JOB_TOKEN_GRACE_HOURS)
        token.save(update_fields=["expires"])
    return key



RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}")


def job_run_name_set(job: Job, name: str) -> bool:
    """Record the training run the job's metrics client names (``RUN_NAME``: what ``--comment run=NAME`` accepts);
    True when it changed. ValueError naming the rule for anything else."""
    if not isinstance(name, str) or not RUN_NAME.fullmatch(name):
        raise ValueError("run is 1-100 characters of A-Z a-z 0-9 . _ / + -, starting with a letter or digit")
    if job.run_name == name:
        return False
    Job.objects.filter(pk=job.pk).update(run_name=name)
    job.run_name = name
    return True
