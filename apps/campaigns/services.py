"""Writes of the campaigns app: campaigns found in the jobs' Slurm records, and the owner's edits (rename, join, leave,
split). Each is one transaction; detection run twice changes nothing the second time."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q

from apps.jobs.models import Cluster, Job

from . import detection
from .choices import CampaignSourceChoices
from .models import Campaign, CampaignJob


@dataclass
class DetectReport:
    campaigns_created: int = 0
    jobs_added: int = 0
    keys: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"campaigns_created": self.campaigns_created, "jobs_added": self.jobs_added, "campaigns": len(self.keys)}


def _facts(jobs) -> list[detection.JobFacts]:
    return [detection.JobFacts(pk=job.pk, cluster=job.cluster.name, job_id=job.job_id, name=job.name, user=job.user_name,
                               account=job.account, dependency=job.dependency, restart_count=job.restart_count,
                               comment=job.comment, run=job.run_name, submit=job.submit_time, start=job.start_time, end=job.end_time)
            for job in jobs]


def _candidates(cluster: Cluster | None):
    """The jobs detection reads: those with a singleton dependency, a requeue, or a run named in their comment, and
    every job sharing the account and name of a singleton job (the chain's first job may have no dependency)."""
    base = Job.objects.select_related("cluster")
    if cluster is not None:
        base = base.filter(cluster=cluster)
    marked = base.filter(Q(dependency__icontains="singleton") | Q(restart_count__gt=0) | Q(comment__iregex=r"(run|campaign)\s*[=:]")
                         | ~Q(run_name=""))
    names = set(marked.filter(dependency__icontains="singleton").values_list("cluster_id", "account", "name"))
    same = Q(pk__in=[])
    for cluster_id, account, name in names:
        same |= Q(cluster_id=cluster_id, account=account, name=name)
    return base.filter(Q(pk__in=marked.values("pk")) | same)


@transaction.atomic
def campaigns_detect(cluster: Cluster | None = None) -> DetectReport:
    """Find campaigns in the jobs' Slurm records (``detection``) and add the jobs not yet placed. A job its owner
    placed (or took out) stays where it is; a campaign its owner edited gets no new jobs from detection."""
    report = DetectReport()
    jobs = list(_candidates(cluster))
    by_pk = {job.pk: job for job in jobs}
    found = detection.detect(_facts(jobs))
    placed = set(CampaignJob.objects.filter(job_id__in=list(by_pk)).values_list("job_id", flat=True))
    for key, entry in found.items():
        report.keys.append(key)
        members = [by_pk[pk] for pk in entry["jobs"]]
        campaign = Campaign.objects.filter(key=key).first()
        if campaign is None:
            if all(job.pk in placed for job in members):
                continue  # every job was placed by its owner: nothing to find
            first = members[0]
            campaign = Campaign.objects.create(key=key, name=entry["name"][:200], source=entry["source"], cluster=first.cluster,
                                               account=first.account, user_name=first.user_name)
            report.campaigns_created += 1
        if campaign.edited:
            continue
        new = [CampaignJob(job=job, campaign=campaign) for job in members if job.pk not in placed]
        CampaignJob.objects.bulk_create(new)
        placed.update(job.pk for job in members)
        report.jobs_added += len(new)
        if new:
            campaign.save(update_fields=["modified"])
    return report


class CampaignEditError(ValueError):
    """The edit was refused; ``problems`` maps the field to what is wrong."""

    def __init__(self, problems: dict[str, list[str]]):
        super().__init__("; ".join(f"{name}: {' '.join(words)}" for name, words in problems.items()))
        self.problems = problems


@transaction.atomic
def campaign_update(campaign: Campaign, *, name: str | None = None, join: list[Job] = (), leave: list[Job] = (),
                    split_at: Job | None = None) -> tuple[Campaign, Campaign | None]:
    """Rename, add jobs (``join``: moved from any campaign they were in), take jobs out (``leave``) and split the
    campaign at a job (it and the later jobs become a new campaign). Returns the campaign and the new one of a split.
    Every change marks the campaign edited, so detection leaves it as its owner made it."""
    problems: dict[str, list[str]] = {}
    members = {row.job_id for row in CampaignJob.objects.filter(campaign=campaign)}
    for job in leave:
        if job.pk not in members:
            problems.setdefault("leave", []).append(f"{job.cluster.name}/{job.job_id} is not in this campaign.")
    if split_at is not None and split_at.pk not in members:
        problems.setdefault("split_at", []).append(f"{split_at.cluster.name}/{split_at.job_id} is not in this campaign.")
    if problems:
        raise CampaignEditError(problems)
    if name is not None:
        campaign.name = name
    for job in join:
        CampaignJob.objects.update_or_create(job=job, defaults={"campaign": campaign, "pinned": True})
    if leave:
        CampaignJob.objects.filter(campaign=campaign, job__in=list(leave)).update(campaign=None, pinned=True)
    other = None
    if split_at is not None:
        moment = split_at.start_time or split_at.submit_time
        later = [row for row in CampaignJob.objects.filter(campaign=campaign).select_related("job")
                 if row.job_id == split_at.pk or (moment is not None and (row.job.start_time or row.job.submit_time)
                                                  and (row.job.start_time or row.job.submit_time) >= moment)]
        key = f"{campaign.key}/split-{split_at.cluster.name}-{split_at.job_id}"[:390]
        while Campaign.objects.filter(key=key).exists():
            key += "+"
        other = Campaign.objects.create(key=key,
                                        name=f"{campaign.name} (from {split_at.job_id})"[:200],
                                        source=CampaignSourceChoices.MANUAL, cluster=campaign.cluster,
                                        account=campaign.account, user_name=campaign.user_name, edited=True)
        CampaignJob.objects.filter(pk__in=[row.pk for row in later]).update(campaign=other, pinned=True)
    campaign.edited = True
    campaign.save()
    return campaign, other


@transaction.atomic
def campaign_create_manual(*, name: str, jobs: list[Job]) -> Campaign:
    """A campaign put together by hand from ``jobs`` (the demo and tests; the API edits existing ones)."""
    first = jobs[0]
    key = f"manual:{first.cluster.name}:{first.job_id}:{name}"[:390]
    while Campaign.objects.filter(key=key).exists():
        key += "+"
    campaign = Campaign.objects.create(key=key, name=name,
                                       source=CampaignSourceChoices.MANUAL, cluster=first.cluster, account=first.account,
                                       user_name=first.user_name, edited=True)
    for job in jobs:
        CampaignJob.objects.update_or_create(job=job, defaults={"campaign": campaign, "pinned": True})
    return campaign
