"""Reads of the reports app: the jobs a person may report on, as the plain rows :mod:`apps.reports.usage` takes.

Access is the jobs app's rule (:func:`apps.jobs.selectors.job_list_for_user`), never a second copy: staff see every
job; everyone else the jobs of their projects (Slurm accounts they are a member of) and their own.
"""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Q, QuerySet
from django.urls import reverse

from apps.accounts.selectors import project_list_for_user, slurm_accounts_for_user
from apps.jobs.gpucount import gpu_count
from apps.jobs.models import Job
from apps.jobs.selectors import job_list_for_user
from apps.saturation.selectors import reference_scores
from apps.saturation.waste import steady_seconds, warming_up
from apps.topology.models import Node

from .usage import JobRow, usage_report

_FIELDS = ("cluster__name", "job_id", "name", "user_name", "account", "partition", "gpus", "start_time", "end_time",
           "saturation__score", "saturation__idle_gpus", "saturation__per_gpu", "saturation__energy_j",
           "saturation__steady_start", "saturation__scored_until", "saturation__steady_found", "saturation__stragglers",
           "saturation__gpu_model", "saturation__compute")


def report_jobs_for_user(user, *, since: datetime, until: datetime, project: str | None = None,
                         user_name: str | None = None, partition: str | None = None) -> QuerySet[Job]:
    """The jobs ``user`` may see whose run overlaps ``[since, until)``, filtered by project (Slurm account),
    user and partition."""
    queryset = job_list_for_user(user).filter(start_time__isnull=False, start_time__lt=until).filter(
        Q(end_time__isnull=True) | Q(end_time__gt=since))
    if project:
        queryset = queryset.filter(account=project)
    if user_name:
        queryset = queryset.filter(user_name=user_name)
    if partition:
        queryset = queryset.filter(partition=partition)
    return queryset


def report_rows(queryset: QuerySet[Job]) -> list[JobRow]:
    """The jobs of ``queryset`` with their saturation result, in one query (and one more for the nodes of the jobs
    that name no GPU count). A score counts once computed (a re-scoring in progress keeps the previous one); its
    energy covers the scored steady state only. A job without a GPU count from Slurm gets one from the topology's
    GPUs of its nodes or the GPUs its scoring saw (:func:`apps.jobs.gpucount.gpu_count`), and says which."""
    rows = list(queryset.order_by().values(*_FIELDS, "node_list"))
    uncounted = [row for row in rows if row["gpus"] is None]
    node_gpus: dict[str, int] = {}
    if uncounted:
        hostnames = {name for row in uncounted for name in (row["node_list"] or [])}
        node_gpus = dict(Node.objects.filter(hostname__in=hostnames, gpus__gt=0).values_list("hostname", "gpus"))
    found = []
    references = reference_scores()
    longest = float(settings.SATURATION_WARMUP_MAX_SECONDS)
    for row in rows:
        per_gpu = row["saturation__per_gpu"] or None
        steady_start, until = row["saturation__steady_start"], row["saturation__scored_until"]
        observed = (until - row["start_time"]).total_seconds() if until and row["start_time"] else None
        count = gpu_count(row["gpus"], node_gpus=sum(node_gpus.get(name, 0) for name in row["node_list"] or []),
                          telemetry_gpus=len(per_gpu) if isinstance(per_gpu, list) else None)
        found.append(JobRow(cluster=row["cluster__name"], job_id=row["job_id"], name=row["name"], user=row["user_name"],
                            account=row["account"], partition=row["partition"], gpus=count.count, gpus_source=count.source,
                            start=row["start_time"], end=row["end_time"], score=row["saturation__score"],
                            idle_gpus=row["saturation__idle_gpus"] or 0, per_gpu=per_gpu, energy_j=row["saturation__energy_j"],
                            # the scoring sums power over its steady state: from the end of the warm-up to the last bucket scored
                            energy_start=steady_start, energy_end=until,
                            stragglers=row["saturation__stragglers"] or None, steady_s=steady_seconds(steady_start, until),
                            warming_up=warming_up(steady_found=row["saturation__steady_found"], observed_s=observed,
                                                  max_warmup_s=longest, ended=row["end_time"] is not None),
                            reference=references.get(row["saturation__gpu_model"] or ""), compute=row["saturation__compute"]))
    return found


def report_project_known(user, project: str) -> bool:
    """Whether ``user`` may report on the Slurm account ``project``: staff on any account a project or a job
    names, everyone else on their projects only."""
    if getattr(user, "is_staff", False):
        return project_list_for_user(user).filter(slurm_account=project).exists() or Job.objects.filter(account=project).exists()
    return project in slurm_accounts_for_user(user)


def report_choices_for_user(user) -> dict[str, list[str]]:
    """The projects and partitions offered by the page's filters (what ``user`` may report on)."""
    projects = set(project_list_for_user(user).values_list("slurm_account", flat=True))
    partitions = set(job_list_for_user(user).exclude(partition="").order_by().values_list("partition", flat=True).distinct())
    return {"projects": sorted(p for p in projects if p), "partitions": sorted(partitions)}


def usage_report_for_user(user, *, since: datetime, until: datetime, now: datetime, group_by: str = "project",
                          project: str = "", user_name: str = "", partition: str = "") -> dict:
    """The usage report (:func:`apps.reports.usage.usage_report`) of the jobs ``user`` may see, with the window,
    the filters and each top job's page, in one query."""
    jobs = report_jobs_for_user(user, since=since, until=until, project=project or None, user_name=user_name or None,
                                partition=partition or None)
    report = usage_report(report_rows(jobs), since=since, until=until, now=now, group_by=group_by,
                          score_below=settings.WASTE_SCORE_BELOW, idle_share=settings.WASTE_IDLE_SHARE)
    for job in report["top_jobs"]:
        job["url"] = reverse("jobs:detail", kwargs={"cluster": job["cluster"], "job_id": job["job_id"]})
    return {"window": {"since": since, "until": until, "now": now}, "group_by": group_by,
            "filters": {"project": project, "user": user_name, "partition": partition}, **report}
