"""Writes of the notifications app: switching a project's opt-ins, mailing the users of wasteful or straggling
running jobs, and the staff digest.

The rate limit, and why two workers still send one mail: before a mail leaves, :func:`notification_claim` writes
its ``NotificationSent`` row in a transaction that first locks the job's row (``SELECT ... FOR UPDATE`` on
PostgreSQL; on SQLite every transaction is ``IMMEDIATE`` and holds the database's write lock, see
``portal.settings.base.tune_sqlite``) and then looks for a row of the same job and reason inside the last
``NOTIFY_RATE_LIMIT_HOURS``. The second worker waits for the first one's commit, finds its row and sends nothing.
When the mail server refuses the mail, the row turns ``failed`` and stops counting, so the next run tries again;
a worker killed between the claim and the send leaves ``sending``, which counts (at most once rather than twice).

When a straggler has persisted: a finding of the job's saturation record (``JobSaturation.stragglers``) is
mailed once it has lasted ``NOTIFY_STRAGGLER_MINUTES``, by the longer of two measures: the detector's own
``duration_s`` (how long the telemetry shows it lagging), and how long this app's sweeps have found it without a
break (``StragglerSighting.first_seen``: set by the first sweep that finds it, the row deleted by the first sweep
that no longer does).
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import Project
from apps.jobs.models import ACTIVE_STATES, Job
from apps.saturation.choices import JobSaturationStatusChoices
from apps.saturation.selectors import job_waste as saturation_job_waste
from apps.triage.services import triage_sync

from . import messages
from .choices import NotificationSentReasonChoices as Reason
from .choices import NotificationSentStatusChoices as Status
from .choices import StaffDigestStatusChoices
from .models import COUNTING_STATUSES, NotificationSent, ProjectNotifications, StaffDigest, StragglerSighting, UserNotifications
from .selectors import digest_items, job_is_wasteful, job_link, job_waste, running_records

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Opt-ins


def project_notifications_update(project: Project, *, actor: str, waste: bool | None = None,
                                 straggler: bool | None = None) -> ProjectNotifications:
    """Switch a project's opt-ins (None leaves one as it is)."""
    with transaction.atomic():
        row, _ = ProjectNotifications.objects.select_for_update().get_or_create(project=project)
        if waste is not None:
            row.waste = waste
        if straggler is not None:
            row.straggler = straggler
        row.changed_by = actor[:150]
        row.save()
    return row


# ---------------------------------------------------------------------------------------------
# Mail to a job's user


def thresholds() -> messages.Thresholds:
    return messages.Thresholds(score_below=settings.WASTE_SCORE_BELOW, idle_share=settings.WASTE_IDLE_SHARE,
                               rate_limit_hours=settings.NOTIFY_RATE_LIMIT_HOURS,
                               straggler_minutes=float(settings.NOTIFY_STRAGGLER_MINUTES))


def notification_claim(job: Job, reason: str, *, now: datetime, user_name: str, recipient: str, subject: str,
                       status: str = Status.STATUS_SENDING, detail: str = "", once: bool = False) -> NotificationSent | None:
    """Record the mail about to be sent, or None when one of this job and reason counts inside the rate limit
    (``once``: ever, not only inside the rate limit: the job-end summary)."""
    since = now - timedelta(hours=settings.NOTIFY_RATE_LIMIT_HOURS)
    with transaction.atomic():
        list(Job.objects.select_for_update().filter(pk=job.pk).values_list("pk", flat=True))
        counted = NotificationSent.objects.filter(job=job, reason=reason, status__in=COUNTING_STATUSES)
        if (counted if once else counted.filter(sent_at__gt=since)).exists():
            return None
        return NotificationSent.objects.create(job=job, reason=reason, status=status, recipient=recipient[:254],
                                               user_name=user_name[:64], sent_at=now, subject=subject[:300], detail=detail[:500])


def _facts(job: Job, record, now: datetime) -> messages.JobFacts:
    reading = saturation_job_waste(job, record, now)
    return messages.JobFacts(cluster=job.cluster.name, job_id=job.display_id, name=job.name, user_name=job.user_name,
                             account=job.account, link=job_link(job), gpus=reading.gpus, hours=reading.hours,
                             score=record.score, idle_gpus=record.idle_gpus or 0, limiter=record.limiter or "",
                             settings_link=settings.SITE_URL.rstrip("/") + reverse("notifications:index"))


def straggler_key(finding: dict) -> str:
    parts = [finding.get(name) for name in ("level", "host", "gpu", "switch", "group")]
    return ":".join("" if part is None else str(part) for part in parts)[:300]


def stragglers_sighted(job_records: list, now: datetime) -> dict[int, list[messages.Lasting]]:
    """Update the sightings of the given jobs' stragglers and return, per job pk, every finding with how long it lasted.

    Sightings of every other job (ended, its project no longer asking, its score no longer ready) are deleted: a
    straggler is counted only while the sweeps watch it without a break."""
    pks = [job.pk for job, _ in job_records]
    StragglerSighting.objects.exclude(job__in=pks).delete()
    known: dict[tuple[int, str], StragglerSighting] = {
        (row.job_id, row.key): row for row in StragglerSighting.objects.filter(job__in=pks)}
    seen: set[tuple[int, str]] = set()
    out: dict[int, list[messages.Lasting]] = {}
    for job, record in job_records:
        for finding in (record.stragglers if record is not None else None) or []:
            key = (job.pk, straggler_key(finding))
            if key in seen:
                continue
            seen.add(key)
            row = known.get(key)
            if row is None:  # get_or_create: a second worker sweeping at the same moment finds the first one's row
                row, _ = StragglerSighting.objects.get_or_create(job=job, key=key[1], defaults={
                    "first_seen": now, "last_seen": now, "finding": finding})
            else:
                row.last_seen, row.finding = max(now, row.last_seen), finding
                row.save(update_fields=["last_seen", "finding"])
            measured = float(finding.get("duration_s") or 0.0) / 3600.0
            swept = max(0.0, (now - row.first_seen).total_seconds() / 3600.0)
            out.setdefault(job.pk, []).append(messages.Lasting(finding=finding, hours=max(measured, swept)))
    gone = [row.pk for key, row in known.items() if key not in seen]
    if gone:
        StragglerSighting.objects.filter(pk__in=gone).delete()
    return out


def _send(row: NotificationSent, message: messages.Message) -> str:
    try:
        EmailMessage(message.subject, message.body, settings.DEFAULT_FROM_EMAIL, [row.recipient]).send()
    except Exception as exc:  # noqa: BLE001 - any refusal of the mail server: recorded, retried by the next run
        log.warning("notification %s to %s failed: %s", row.pk, row.recipient, exc)
        row.status, row.detail = Status.STATUS_FAILED, f"{type(exc).__name__}: {exc}"[:500]
    else:
        row.status = Status.STATUS_SENT
    row.save(update_fields=["status", "detail"])
    return row.status


def _mail_each(wanted: list, *, now: datetime, counts: dict, taken: str, once: bool = False, progress=None) -> None:
    """Claim (``notification_claim``) and send each ``(job, reason, message)`` of ``wanted`` to the job's user.
    Counts into ``counts``: ``taken`` (claimed already: inside the rate limit, or ever with ``once``), ``skipped``
    (no portal account or no address: recorded and logged, not tried again), ``sent``, ``failed``."""
    users = get_user_model().objects.filter(**{f"{get_user_model().USERNAME_FIELD}__in": {job.user_name for job, _, _ in wanted}})
    emails = {user.get_username(): (user.email or "").strip() for user in users}
    for done, (job, reason, message) in enumerate(wanted, 1):
        email = emails.get(job.user_name, "")
        why = "" if email else ("the job's user has no portal account" if job.user_name not in emails
                                else "the job's user has no e-mail address")
        row = notification_claim(job, reason, now=now, user_name=job.user_name, recipient=email, subject=message.subject,
                                 status=Status.STATUS_SENDING if email else Status.STATUS_SKIPPED, detail=why, once=once)
        if row is None:
            counts[taken] += 1
        elif not email:
            log.info("notification for job %s (%s) skipped: %s", job, reason, why)
            counts["skipped"] += 1
        else:
            counts["sent" if _send(row, message) == Status.STATUS_SENT else "failed"] += 1
        if progress is not None:
            progress(done, len(wanted))


def notify_running_jobs(now: datetime | None = None, progress=None) -> dict:
    """Mail the users of the opted-in projects' running jobs that waste GPUs or have a persistent straggler.

    Returns counts: ``jobs`` looked at, ``sent``, ``skipped`` (no address), ``failed``, ``rate_limited``.
    ``progress(done, total)`` is called as jobs are done (the task's TaskRun)."""
    now = now or timezone.now()
    opted = {row.project.slurm_account: row for row in
             ProjectNotifications.objects.filter(Q(waste=True) | Q(straggler=True)).select_related("project")}
    counts = {"jobs": 0, "sent": 0, "skipped": 0, "failed": 0, "rate_limited": 0}
    if not opted:
        StragglerSighting.objects.all().delete()
        return counts
    job_records = running_records(list(opted))
    counts["jobs"] = len(job_records)
    ready = [(job, record) for job, record in job_records
             if record is not None and record.status == JobSaturationStatusChoices.STATUS_READY and record.computed is not None]
    lasting = stragglers_sighted([(job, record) for job, record in ready if opted[job.account].straggler], now)
    limits = thresholds()
    wanted: list[tuple[Job, str, messages.Message]] = []
    for job, record in ready:
        choice = opted[job.account]
        if choice.waste and job_is_wasteful(job, record):
            wanted.append((job, Reason.REASON_WASTEFUL,
                           messages.wasteful_message(_facts(job, record, now), job_waste(job, record, now), limits)))
        persisted = [item for item in lasting.get(job.pk, []) if item.hours * 60.0 >= limits.straggler_minutes]
        if choice.straggler and persisted:
            persisted.sort(key=lambda item: -item.hours)
            wanted.append((job, Reason.REASON_STRAGGLER, messages.straggler_message(_facts(job, record, now), persisted, limits)))
    _mail_each(wanted, now=now, counts=counts, taken="rate_limited", progress=progress)
    return counts


# ---------------------------------------------------------------------------------------------
# The job-end summary (a user's own opt-in)


def user_notifications_get(user) -> UserNotifications:
    """The user's own opt-ins; an unsaved row with everything off when never switched."""
    return UserNotifications.objects.filter(user=user).first() or UserNotifications(user=user)


def user_notifications_update(user, *, job_end: bool) -> UserNotifications:
    """Switch the user's job-end summary; switching it on mails only jobs that end from now on."""
    with transaction.atomic():
        row, _ = UserNotifications.objects.select_for_update().get_or_create(user=user)
        if job_end and not row.job_end:
            row.job_end_since = timezone.now()
        row.job_end = job_end
        row.save()
    return row


def _job_end_summary(job: Job, record) -> messages.JobEndSummary:
    """The job's facts for the summary; efficiency (apps.appmetrics) that fails is said to be missing, never fatal."""
    from apps.appmetrics.selectors import job_efficiency

    missing: list[str] = []
    try:
        efficiency = job_efficiency(job)
        missing += [why for why in efficiency.get("missing") or [] if why.startswith(("no throughput", "no model config"))]
    except Exception as exc:  # noqa: BLE001 - the summary still goes with what is known
        log.warning("job-end summary of %s: efficiency failed: %s", job, exc)
        efficiency = {}
        missing.append(f"efficiency could not be computed ({type(exc).__name__})")
    if record is None or record.score is None:
        missing.append("GPU saturation: the job's telemetry was not scored")
    dips: dict[str, int] = {}
    for event in efficiency.get("events") or []:
        dips[event.get("kind", "unknown")] = dips.get(event.get("kind", "unknown"), 0) + 1
    stragglers = [messages._straggler_where(item) + (f" — {item['reason']}" if item.get("reason") else "")
                  for item in (record.stragglers if record is not None else None) or []]
    elapsed = job.elapsed
    site = settings.SITE_URL.rstrip("/")
    return messages.JobEndSummary(
        cluster=job.cluster.name, job_id=job.display_id, name=job.name, user_name=job.user_name, state=job.state,
        link=job_link(job), gpus=int(efficiency.get("gpus") or job.gpus or 0),
        hours=elapsed.total_seconds() / 3600.0 if elapsed is not None else 0.0,
        score=record.score if record is not None else None, limiter=(record.limiter or "") if record is not None else "",
        idle_gpus=(record.idle_gpus or 0) if record is not None else 0, stragglers=stragglers,
        mfu=efficiency.get("mfu"), tokens_per_s_per_gpu=efficiency.get("tokens_per_s_per_gpu"),
        energy_per_token_j=efficiency.get("energy_per_token_j"), dips=dips, missing=missing,
        report_link=f"{site}/api/v1/jobs/{job.cluster.name}/{job.job_id}/report/",
        settings_link=site + reverse("notifications:index"))


def ended_jobs_to_summarise(now: datetime) -> list[tuple[Job, object]]:
    """Jobs of users who asked for the summary, ended inside NOTIFY_JOB_END_LOOKBACK_HOURS and after the user switched
    it on, not summarised yet, whose final scoring is done (or NOTIFY_JOB_END_WAIT_MINUTES passed without it)."""
    from apps.saturation.models import JobSaturation

    opted = {row.user.get_username(): row for row in UserNotifications.objects.filter(job_end=True).select_related("user")}
    if not opted:
        return []
    lookback = now - timedelta(hours=float(getattr(settings, "NOTIFY_JOB_END_LOOKBACK_HOURS", 48.0)))
    wait = timedelta(minutes=float(getattr(settings, "NOTIFY_JOB_END_WAIT_MINUTES", 30.0)))
    jobs = list(Job.objects.exclude(state__in=ACTIVE_STATES)
                .filter(end_time__isnull=False, end_time__gte=lookback, end_time__lte=now, user_name__in=list(opted))
                .exclude(notifications_sent__reason=Reason.REASON_JOB_END, notifications_sent__status__in=COUNTING_STATUSES)
                .select_related("cluster").order_by("end_time", "pk"))
    records = {record.job_id: record for record in JobSaturation.objects.filter(job__in=[job.pk for job in jobs])}
    due = []
    for job in jobs:
        since = opted[job.user_name].job_end_since
        if since is not None and job.end_time < since:
            continue
        record = records.get(job.pk)
        scored = (record is not None and record.status == JobSaturationStatusChoices.STATUS_READY and record.computed is not None
                  and record.computed >= job.end_time)
        if scored or now - job.end_time >= wait:
            due.append((job, record))
    return due


def notify_ended_jobs(now: datetime | None = None, progress=None) -> dict:
    """Mail each opted-in user a summary of each of their jobs that ended, once per job (``notification_claim`` with
    ``once``: two workers at the same moment send one mail). Returns counts: ``jobs``, ``sent``, ``skipped`` (no
    address), ``failed`` (tried again next time), ``already`` (another worker claimed it)."""
    now = now or timezone.now()
    due = ended_jobs_to_summarise(now)
    counts = {"jobs": len(due), "sent": 0, "skipped": 0, "failed": 0, "already": 0}
    wanted = [(job, Reason.REASON_JOB_END, messages.job_end_message(_job_end_summary(job, record))) for job, record in due]
    _mail_each(wanted, now=now, counts=counts, taken="already", once=True, progress=progress)
    return counts


# ---------------------------------------------------------------------------------------------
# Staff digest

def staff_digest(now: datetime | None = None) -> dict:
    """Mail NOTIFY_STAFF_DIGEST_EMAILS a digest of the triage inbox, once per NOTIFY_STAFF_DIGEST_HOURS period
    (a second call in the same period sends nothing, unless the first one's mail failed). The inbox is rebuilt
    from its sources first (``apps.triage.services.triage_sync``), so the digest is as of now."""
    now = now or timezone.now()
    recipients = [address for address in settings.NOTIFY_STAFF_DIGEST_EMAILS if address]
    if not recipients:
        return {"status": "off", "reason": "NOTIFY_STAFF_DIGEST_EMAILS is empty"}
    period = max(60.0, 3600.0 * float(settings.NOTIFY_STAFF_DIGEST_HOURS))
    slot = int(now.timestamp() // period)
    try:
        with transaction.atomic():
            digest = StaffDigest.objects.create(slot=slot, sent_at=now, recipients=recipients)
    except IntegrityError:
        retried = StaffDigest.objects.filter(slot=slot, status=StaffDigestStatusChoices.STATUS_FAILED).update(
            status=StaffDigestStatusChoices.STATUS_SENDING, sent_at=now, recipients=recipients)
        if not retried:
            return {"status": "already sent", "slot": slot}
        digest = StaffDigest.objects.get(slot=slot)
    try:  # the inbox as of now: rebuilt from its sources first (what beat does every TRIAGE_SYNC_SECONDS)
        triage_sync(now)
        synced = f"{now:%Y-%m-%d %H:%M} UTC"
    except Exception as exc:  # noqa: BLE001 - the digest still goes out, saying the inbox may be stale
        log.warning("staff digest %s: the triage sync failed: %s", slot, exc)
        synced = f"(the rebuild failed now: {exc}; the items are as of the last successful one)"
    items = digest_items()
    message = messages.digest_message(items, inbox_link=settings.SITE_URL.rstrip("/") + reverse("triage:inbox"),
                                      period_hours=period / 3600.0, when=f"{now:%Y-%m-%d %H:%M} UTC", synced=synced)
    digest.subject, digest.items = message.subject[:300], len(items)
    try:
        EmailMessage(message.subject, message.body, settings.DEFAULT_FROM_EMAIL, recipients).send()
    except Exception as exc:  # noqa: BLE001
        log.warning("staff digest %s failed: %s", slot, exc)
        digest.status, digest.detail = StaffDigestStatusChoices.STATUS_FAILED, f"{type(exc).__name__}: {exc}"[:500]
    else:
        digest.status, digest.detail = StaffDigestStatusChoices.STATUS_SENT, ""
    digest.save(update_fields=["subject", "items", "status", "detail"])
    return {"status": digest.status, "slot": slot, "items": len(items)}
