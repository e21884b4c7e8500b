"""Which jobs train one run: campaigns found in Slurm's records. Plain Python: no Django.

A job joins a campaign by the first of these that holds (:func:`campaign_key`):

1. its ``--comment`` names the run: ``run=NAME`` or ``campaign=NAME`` (also ``run:NAME``), within its account; or its
   metrics client does (the metrics API's ``"run"`` key, kept as ``Job.run_name``): the same key, so both join;
2. a ``singleton`` dependency: Slurm runs one job of a user's name at a time, which is how a chain of allocations is
   submitted (``sbatch --dependency=singleton`` many times); every job of the same account and job name belongs,
   the first one of the chain too (it may have been submitted without the dependency);
3. Slurm requeued it (``restart_cnt`` > 0): the allocations of one job id.

Jobs of one singleton or comment key that are more than ``GAP_DAYS`` apart (the end of one to the start of the next)
are two campaigns: the same name reused weeks later is a new run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

GAP_DAYS = 7
RUN_IN_COMMENT = re.compile(r"(?:^|[\s,;])(?:run|campaign)\s*[=:]\s*([A-Za-z0-9][A-Za-z0-9._/+-]{0,99})", re.IGNORECASE)
SOURCES = ("comment", "singleton", "requeue")


@dataclass(frozen=True)
class JobFacts:
    pk: int
    cluster: str
    job_id: int
    name: str
    user: str
    account: str
    dependency: str = ""
    restart_count: int | None = None
    comment: str = ""
    run: str = ""  # the run the job's metrics client named (Job.run_name)
    submit: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None


def run_in_comment(comment: str) -> str | None:
    match = RUN_IN_COMMENT.search(comment or "")
    return match.group(1) if match else None


def is_singleton(dependency: str) -> bool:
    return "singleton" in (dependency or "").lower()


def campaign_key(job: JobFacts, singleton_names: set[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    """(source, key, name) of the campaign ``job`` belongs to, or None. ``singleton_names``: the (cluster, account,
    job name) of every job with a singleton dependency."""
    run = run_in_comment(job.comment) or job.run
    if run:  # the comment and the client's run key name the same thing: one key, so they join
        return "comment", f"comment:{job.cluster}:{job.account}:{run}", run
    if job.name and (job.cluster, job.account, job.name) in singleton_names:
        return "singleton", f"singleton:{job.cluster}:{job.account}:{job.name}", job.name
    if job.restart_count:
        return "requeue", f"requeue:{job.cluster}:{job.job_id}", f"{job.name or 'job'} {job.job_id} (requeued)"
    return None


def detect(jobs: list[JobFacts]) -> dict[str, dict]:
    """Campaign key -> {"source", "name", "jobs": [pk, ...] in time order}. A key whose jobs fall apart by more than
    ``GAP_DAYS`` gets ``#2``, ``#3`` ... after the first."""
    singleton_names = {(job.cluster, job.account, job.name) for job in jobs if is_singleton(job.dependency) and job.name}
    grouped: dict[str, tuple[str, str, list[JobFacts]]] = {}
    for job in jobs:
        found = campaign_key(job, singleton_names)
        if found is None:
            continue
        source, key, name = found
        grouped.setdefault(key, (source, name, []))[2].append(job)
    out: dict[str, dict] = {}
    gap = timedelta(days=GAP_DAYS)
    for key, (source, name, members) in grouped.items():
        members.sort(key=lambda job: (_sortable(job), job.job_id))
        parts: list[list[JobFacts]] = [[]]
        last_end = None
        for job in members:
            begin = job.start or job.submit
            if parts[-1] and last_end is not None and begin is not None and begin - last_end > gap:
                parts.append([])
            parts[-1].append(job)
            reach = job.end or job.start or job.submit
            if reach is not None:
                last_end = reach if last_end is None else max(last_end, reach)
        for index, part in enumerate(parts):
            if source == "singleton" and len(part) < 2 and not any(is_singleton(job.dependency) for job in part):
                continue
            suffix = "" if index == 0 else f"#{index + 1}"
            out[key + suffix] = {"source": source, "name": name + (f" ({index + 1})" if index else ""),
                                 "jobs": [job.pk for job in part]}
    return out


def _sortable(job: JobFacts) -> float:
    moment = job.start or job.submit
    return moment.timestamp() if moment is not None else float("inf")
