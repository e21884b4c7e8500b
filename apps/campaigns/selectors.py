"""Reads of the campaigns app: the campaigns a person may see, and a campaign's goodput, failures and checkpoint advice
computed from what the portal measured about its jobs.

**Access** follows the member jobs' rule (``apps.jobs.selectors.job_list_for_user``): a campaign is visible to whoever
may see every one of its jobs (a campaign of jobs they may not all see does not exist for them: 404). Its owner (the
Slurm user of its jobs) and staff may change it.
"""
from __future__ import annotations

import hashlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta

import pandas as pd
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from apps.appmetrics import selectors as appmetrics
from apps.appmetrics.services import SERIES_STAMP
from apps.core.hang_verdicts import hang_verdict
from apps.jobs.choices import JobStateChoices
from apps.jobs.endings import Step
from apps.jobs.models import Job
from apps.jobs.selectors import job_list_for_user
from apps.saturation.models import JobSaturation
from apps.saturation.waste import gpu_hours_lost
from apps.telemetry.backends.base import TelemetryUnavailable
from apps.vetting.models import VettingResult
from apps.vetting.records import BAD_OUTCOMES
from apps.vetting.selectors import job_gpu_health

from . import checkpointing, failures, figures, goodput
from .models import Campaign, CampaignJob

log = logging.getLogger(__name__)
VETTING_MARGIN = timedelta(hours=1)  # a vetting failure this close to the job counts against its nodes
PROGRESS_NAMES = ("iteration_s", "tokens_per_s", "loss", "lm_loss", "consumed_samples")
FAILED_STATES = {JobStateChoices.FAILED, JobStateChoices.NODE_FAIL, JobStateChoices.OUT_OF_MEMORY,
                 JobStateChoices.TIMEOUT, JobStateChoices.CANCELLED, JobStateChoices.PREEMPTED, JobStateChoices.OTHER}


def campaign_list_for_user(user) -> QuerySet[Campaign]:
    """The campaigns whose every job ``user`` may see, newest first, with their job counts."""
    visible = job_list_for_user(user).values("pk")
    hidden = CampaignJob.objects.filter(campaign=OuterRef("pk")).exclude(job__in=visible)
    return (Campaign.objects.select_related("cluster").annotate(job_count=Count("members"))
            .filter(job_count__gt=0).filter(~Exists(hidden)).order_by("-created", "-pk"))


def campaign_get_for_user(user, pk: int) -> Campaign | None:
    return campaign_list_for_user(user).filter(pk=pk).first()


def campaign_may_edit(user, campaign: Campaign) -> bool:
    """Its owner (the Slurm user of its jobs) or staff; account members may look, not change."""
    from apps.jobs.authentication import JobTokenUser

    if isinstance(user, JobTokenUser) or not getattr(user, "is_authenticated", False):
        return False  # a job's token writes its job's data, never a campaign
    return bool(user.is_staff) or user.get_username() == campaign.user_name


def campaign_jobs(campaign: Campaign) -> list[Job]:
    jobs = list(Job.objects.filter(campaign_membership__campaign=campaign).select_related("cluster").prefetch_related("steps"))
    return sorted(jobs, key=lambda job: (job.start_time or job.submit_time or timezone.now(), job.job_id))


def campaign_for_job(job) -> Campaign | None:
    return Campaign.objects.filter(members__job=job).first()


def job_ref(job) -> str:
    return f"{job.cluster.name}/{job.job_id}"


# ---------------------------------------------------------------------------------------------------------------
# What the portal measured about one job, as the plain modules take it


def _series(job) -> pd.DataFrame:
    try:
        return appmetrics.job_series(job)
    except TelemetryUnavailable:
        return pd.DataFrame(columns=["ts", "name", "step", "value"])


def _utc(value) -> datetime:
    return pd.Timestamp(value).tz_localize("UTC").to_pydatetime() if pd.Timestamp(value).tzinfo is None \
        else pd.Timestamp(value).tz_convert("UTC").to_pydatetime()


def _progress(series: pd.DataFrame) -> tuple[goodput.Progress, ...]:
    rows = series[series["name"].isin(PROGRESS_NAMES) & series["step"].notna()]
    if rows.empty:
        return ()
    first = rows.sort_values("ts").groupby("step", as_index=False)["ts"].min().sort_values(["ts", "step"])
    return tuple(goodput.Progress(_utc(ts), int(step)) for ts, step in zip(first["ts"], first["step"]))


def _markers(series: pd.DataFrame, name: str) -> list[tuple[datetime, int | None, float]]:
    rows = series[series["name"] == name].sort_values("ts")
    return [(_utc(ts), None if pd.isna(step) else int(step), float(value))
            for ts, step, value in zip(rows["ts"], rows["step"], rows["value"])]


def _restore(series: pd.DataFrame) -> goodput.Restore | None:
    for ts, step, value in _markers(series, "event.restore"):
        return goodput.Restore(ts, step, value if value > checkpointing.UNKNOWN_SECONDS else None)
    for ts, step, value in _markers(series, "event.restart"):
        if value > checkpointing.UNKNOWN_SECONDS or step is not None:
            return goodput.Restore(ts, step, value if value > checkpointing.UNKNOWN_SECONDS else None)
    return None


def _dips(job) -> tuple[goodput.Dip, ...]:
    try:
        events = appmetrics.job_efficiency(job).get("events") or []
    except Exception as exc:  # noqa: BLE001 - a job whose efficiency cannot be read loses no dips it never had
        log.warning("campaign: efficiency of %s failed: %s", job, exc)
        return ()
    out = []
    for event in events:
        if not event.get("start") or event.get("dip") is None:
            continue
        out.append(goodput.Dip(_utc(event["start"]), _utc(event["end"]) if event.get("end") else None,
                               str(event.get("kind") or "unknown"), float(event["dip"])))
    return tuple(out)


def _bad_results(jobs: list[Job], now: datetime) -> list[tuple[str, datetime]]:
    """(host, time) of every bad vetting result on the jobs' nodes around their runs: one read for the campaign."""
    ran = [job for job in jobs if job.node_list and job.start_time is not None]
    if not ran:
        return []
    since = min(job.start_time for job in ran) - VETTING_MARGIN
    until = max(job.end_time or now for job in ran) + VETTING_MARGIN
    hosts = sorted({host for job in ran for host in job.node_list})
    return list(VettingResult.objects.filter(host__in=hosts, outcome__in=BAD_OUTCOMES, time__gte=since, time__lte=until)
                .values_list("host", "time"))


def _bad_nodes(job, results: list[tuple[str, datetime]], now: datetime) -> tuple[str, ...]:
    """The job's nodes with a bad vetting result from ``VETTING_MARGIN`` before its start to as long after its end."""
    if not job.node_list or job.start_time is None:
        return ()
    nodes = set(job.node_list)
    since, until = job.start_time - VETTING_MARGIN, (job.end_time or now) + VETTING_MARGIN
    return tuple(sorted({host for host, time in results if host in nodes and since <= time <= until}))


def _shares(job, bad_nodes: tuple[str, ...], record: JobSaturation | None) -> tuple[float, float]:
    """(idle share, share on failed nodes) of the job's GPUs by the saturation waste rule; 0 without a record."""
    gpus = appmetrics.job_gpus(job) or 0
    if record is None or not gpus:
        return 0.0, 0.0
    waste = gpu_hours_lost(1.0, gpus, score=record.score, idle_gpus=record.idle_gpus or 0, per_gpu=record.per_gpu or None,
                           failed_hosts=bad_nodes)
    return waste.idle_gpu_hours / gpus, waste.failed_node_gpu_hours / gpus


def _xids(job) -> tuple[str, ...]:
    if job.start_time is None or job.end_time is None or not job.node_list:
        return ()
    try:
        changes = job_gpu_health(job, start=job.start_time, end=job.end_time)
    except Exception as exc:  # noqa: BLE001 - the health counters are evidence, not a condition of the campaign
        log.warning("campaign: GPU health of %s failed: %s", job, exc)
        return ()
    return tuple(change.words for change in changes if change.field == 230)


def _log_oom(series: pd.DataFrame) -> bool:
    return bool((series["name"] == "event.oom").any())


# ---------------------------------------------------------------------------------------------------------------
# The campaign


def _version(campaign: Campaign, jobs: list[Job]) -> str:
    stamps = cache.get_many([SERIES_STAMP.format(pk=job.pk) for job in jobs]) if jobs else {}
    saturation = dict(JobSaturation.objects.filter(job__in=jobs).values_list("job_id", "computed"))
    parts = [f"{campaign.pk}:{campaign.modified.isoformat()}"] + [
        f"{job.pk}:{job.modified.isoformat()}:{stamps.get(SERIES_STAMP.format(pk=job.pk))}:{saturation.get(job.pk)}" for job in jobs]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def campaign_summary(campaign: Campaign, now: datetime | None = None) -> dict:
    """The campaign's answer (the API's detail body): goodput and badput by part, each job, each failure, the MTBF and
    the checkpoint advice, and its curves. Cached under the data it reads (jobs, series written, scores) for
    ``CAMPAIGN_CACHE_SECONDS``; 0 computes every time."""
    jobs = campaign_jobs(campaign)
    seconds = settings.CAMPAIGN_CACHE_SECONDS
    key = f"campaigns:summary:{_version(campaign, jobs)}"
    if seconds > 0 and now is None:
        found = cache.get(key)
        if found is not None:
            return found
    body = _summary(campaign, jobs, now or timezone.now())
    if seconds > 0 and now is None:
        cache.set(key, body, seconds)
    return body


def _summary(campaign: Campaign, jobs: list[Job], now: datetime) -> dict:
    allocations, ends, curves, series_of = [], {}, [], {}
    checkpoint_costs, checkpoint_starts = [], []
    # one read each for the whole campaign, not one per member job
    results = _bad_results(jobs, now)
    records = {record.job_id: record for record in JobSaturation.objects.filter(job__in=jobs)}
    for job in jobs:
        series = _series(job)
        series_of[job.pk] = series
        progress = _progress(series)
        checkpoints = tuple(goodput.Checkpoint(ts, step, value) for ts, step, value in _markers(series, "event.checkpoint"))
        checkpoint_costs.extend(c.seconds for c in checkpoints)
        checkpoint_starts.append([c.ts for c in checkpoints])
        bad = _bad_nodes(job, results, now)
        running = job.is_active
        gpus = appmetrics.job_gpus(job) or 0
        draft = goodput.Allocation(key=job_ref(job), start=job.start_time if job.state != JobStateChoices.PENDING else None,
                                   end=job.end_time, gpus=gpus, progress=progress, checkpoints=checkpoints)
        done = goodput.completed_checkpoints(draft, job.end_time or now, by_design=True) if progress else []
        ended = None
        if not running and job.end_time is not None:
            ended = failures.JobEnd(
                key=job_ref(job), state=job.state, start=job.start_time, end=job.end_time, exit_code=job.exit_code,
                signal=job.signal, reason=job.state_reason, limit_minutes=job.time_limit_minutes,
                nodes=tuple(job.node_list or ()), steps=tuple(Step(s.step_id, s.name, s.state, s.exit_code) for s in job.steps.all()[:50]),
                last_progress=progress[-1].ts if progress else None, last_step=progress[-1].step if progress else None,
                last_checkpoint_step=max((c.step for c in done if c.step is not None), default=None),
                bad_nodes=bad, log_oom=_log_oom(series))
            if job.state in FAILED_STATES or job.exit_code or job.signal:
                ended = replace(ended, xids=_xids(job), hang_verdict=hang_verdict(job))
        found = failures.classify(ended) if ended is not None else None
        ends[job.pk] = (ended, found, bad)
        idle_share, failed_share = _shares(job, bad, records.get(job.pk)) if progress else (0.0, 0.0)
        allocations.append(goodput.Allocation(
            key=job_ref(job), start=draft.start, end=job.end_time, gpus=gpus,
            nodes=job.node_count or len(job.node_list or []), progress=progress, checkpoints=checkpoints,
            restore=_restore(series), dips=_dips(job) if progress else (), idle_share=idle_share,
            failed_node_share=failed_share, failed=found is not None, on_bad_nodes=bool(bad) or (
                found is not None and found[0] == "node_failure"), running=running))
        curves.append(_curve(job, series, gpus))
    result = goodput.account(allocations, now)
    by_key = {a.key: a for a in result.allocations}
    failure_rows = []
    for job in jobs:
        ended, found, bad = ends[job.pk]
        if found is None:
            continue
        kind, evidence = found
        part = by_key.get(job_ref(job))
        lost = 0.0
        if part is not None:
            lost = part.badput["lost_work"] + part.badput["hang"] + (
                part.allocated_gpu_hours - part.productive_gpu_hours if part.first_step is None else 0.0)
        nodes = list(bad) if bad else list(job.node_list or [])[:16]
        failure_rows.append({
            "job": job_ref(job), "url": reverse("jobs:detail", args=[job.cluster.name, job.job_id]),
            "end": job.end_time, "cause": failures.CAUSES[kind], "cause_kind": kind, "evidence": evidence,
            "lost_gpu_hours": lost, "nodes": nodes, "bad_nodes": list(bad),
            "node_links": {host: reverse("vetting:node", args=[host]) for host in nodes}})
    hours = sum(a.hours for a in result.allocations)
    node_hours = sum(a.hours * (allocation.nodes or 0) for a, allocation in zip(result.allocations, sorted(
        (x for x in allocations if x.start is not None), key=lambda x: (x.start, x.key))))
    between = failures.mtbf(len(failure_rows), hours, node_hours)
    advice = checkpointing.advise(checkpointing.measured_interval(checkpoint_starts), checkpointing.measured_cost(checkpoint_costs),
                                  between.mtbf_hours)
    job_rows = []
    for job in jobs:
        part = by_key.get(job_ref(job))
        found = ends[job.pk][1]
        job_rows.append({
            "job": job_ref(job), "url": reverse("jobs:detail", args=[job.cluster.name, job.job_id]), "name": job.name,
            "state": job.state, "start": job.start_time, "end": job.end_time, "gpus": part.gpus if part else None,
            "nodes": job.node_count or len(job.node_list or []) or None,
            "hours": part.hours if part else 0.0,
            "allocated_gpu_hours": part.allocated_gpu_hours if part else 0.0,
            "productive_gpu_hours": part.productive_gpu_hours if part else 0.0,
            "goodput": part.goodput if part else None, "badput": part.badput if part else {p: 0.0 for p in goodput.PARTS},
            "queue_hours_before": part.queue_hours_before if part else None,
            "resumed_from": part.resumed_from if part else None, "first_step": part.first_step if part else None,
            "last_step": part.last_step if part else None, "kept_step": part.kept_step if part else None,
            "last_checkpoint": part.last_checkpoint if part else None,
            "failure": failures.CAUSES[found[0]] if found else None,
        })
    failure_marks = [{"job": row["job"], "end": row["end"], "cause": row["cause"]} for row in failure_rows]
    return {
        "id": campaign.pk, "name": campaign.name, "key": campaign.key, "source": campaign.source,
        "cluster": campaign.cluster.name, "account": campaign.account, "user": campaign.user_name, "edited": campaign.edited,
        "url": reverse("campaigns:detail", args=[campaign.pk]),
        "goodput": result.goodput, "allocated_gpu_hours": result.allocated_gpu_hours,
        "productive_gpu_hours": result.productive_gpu_hours, "badput": result.badput, "queue_hours": result.queue_hours,
        "jobs": job_rows, "failures": failure_rows, "older_restarts": result.older_restarts,
        "mtbf_hours": between.mtbf_hours, "mtbf_hours_per_1000_nodes": between.mtbf_hours_per_1000_nodes,
        "mtbf_words": between.words,
        "checkpoint": {"interval_s": advice.interval_s, "cost_s": advice.cost_s, "young_s": advice.young_s,
                       "young_daly_s": advice.young_daly_s, "worth_share": advice.worth_share, "words": advice.words},
        "words": {"goodput": goodput.GOODPUT_WORDS, "badput": goodput.PART_WORDS},
        "figures": {"curves": figures.curves_figure(curves, failure_marks), "goodput": figures.goodput_bars(job_rows)},
        "computed": now,
    }


def _curve(job, series: pd.DataFrame, gpus: int) -> dict:
    """Tokens trained, loss and tokens/s per GPU by time of one job (for the curves across allocations)."""
    wanted = series[series["name"].isin(("tokens_per_s", "loss", "iteration_s")) & series["step"].notna()]
    out = {"job": job_ref(job), "start": job.start_time, "end": job.end_time, "ts": [], "tokens": [], "loss": [],
           "tokens_per_s_per_gpu": []}
    if wanted.empty:
        return out
    table = wanted.pivot_table(index=["ts", "step"], columns="name", values="value", aggfunc="last").reset_index()
    table = table.sort_values("ts")
    per_step = None
    if "tokens_per_s" in table and "iteration_s" in table:
        both = (table["tokens_per_s"] * table["iteration_s"]).dropna()
        per_step = float(both.median()) if len(both) else None
    for _, row in table.iterrows():
        out["ts"].append(_utc(row["ts"]))
        tps = row.get("tokens_per_s")
        out["tokens"].append(float(row["step"]) * per_step if per_step else None)
        loss = row.get("loss")
        out["loss"].append(None if loss is None or pd.isna(loss) else float(loss))
        out["tokens_per_s_per_gpu"].append(None if tps is None or pd.isna(tps) or not gpus else float(tps) / gpus)
    return out


def campaigns_of_jobs(job_pks) -> dict[int, Campaign]:
    """job pk -> its campaign, for the job page's link."""
    rows = CampaignJob.objects.filter(job_id__in=list(job_pks), campaign__isnull=False).select_related("campaign")
    return {row.job_id: row.campaign for row in rows}


def job_campaign_place(job) -> dict | None:
    """The job's campaign as the job page needs it, in one query: {"id", "name", "place", "total"} (place 1-based by
    start time), or None when the job is in no campaign."""
    rows = list(CampaignJob.objects.filter(campaign__members__job=job).values_list(
        "job_id", "job__start_time", "job__submit_time", "job__job_id", "campaign_id", "campaign__name"))
    if not rows:
        return None
    far = timezone.now()
    ordered = sorted(rows, key=lambda row: (row[1] or row[2] or far, row[3]))
    pks = [row[0] for row in ordered]
    return {"id": rows[0][4], "name": rows[0][5], "place": pks.index(job.pk) + 1 if job.pk in pks else 0, "total": len(pks)}


def campaign_position(campaign: Campaign, job) -> tuple[int, int]:
    """(the job's place, the campaign's job count), 1-based, by start time."""
    jobs = campaign_jobs(campaign)
    pks = [j.pk for j in jobs]
    return (pks.index(job.pk) + 1 if job.pk in pks else 0), len(pks)


def campaigns_matching(queryset: QuerySet[Campaign], text: str) -> QuerySet[Campaign]:
    return queryset.filter(Q(name__icontains=text) | Q(account__icontains=text)) if text else queryset
