"""Campaigns API: the list, a campaign's goodput, failures and checkpoint advice, the owner's edit, the CSV."""
import pandas as pd
from django.http import Http404, HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.exports import table_bytes
from apps.jobs.selectors import job_list_for_user, job_may_act

from ..goodput import PARTS
from ..selectors import campaign_get_for_user, campaign_list_for_user, campaign_may_edit, campaign_summary
from ..services import CampaignEditError, campaign_create_manual, campaign_update
from .openapi import CampaignDetail, CampaignListItem
from .serializers import CampaignCreateSerializer, CampaignPatchSerializer

MAX_LIST = 500


def _campaign_or_404(request, pk):
    campaign = campaign_get_for_user(request.user, pk)
    if campaign is None:
        raise Http404("no such campaign")
    return campaign


def list_item(campaign) -> dict:
    return {"id": campaign.pk, "name": campaign.name, "source": campaign.source, "cluster": campaign.cluster.name,
            "account": campaign.account, "user": campaign.user_name, "jobs": campaign.job_count,
            "url": reverse("campaigns:detail", args=[campaign.pk]), "api_url": reverse("campaigns-api:detail", args=[campaign.pk])}


class CampaignListView(APIView):
    """The training campaigns whose every job the caller may see (the jobs' access rule), newest first."""

    @extend_schema(responses={200: CampaignListItem(many=True)})
    def get(self, request):
        return Response([list_item(campaign) for campaign in campaign_list_for_user(request.user)[:MAX_LIST]])

    @extend_schema(request=CampaignCreateSerializer, responses={201: CampaignDetail})
    def post(self, request):
        """A campaign of your jobs put together by hand (jobs of one account on one cluster)."""
        serializer = CampaignCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        jobs, problems = _jobs(request, serializer.validated_data["jobs"], "jobs")
        for index, job in enumerate(jobs):
            if not job_may_act(request.user, job):
                problems.append(ErrorItem(f"{job.cluster.name}/{job.job_id} is not yours: only its Slurm user or staff may "
                                          f"put it in a campaign", f"jobs.{index}"))
        if jobs and len({(job.cluster_id, job.account) for job in jobs}) > 1:
            problems.append(ErrorItem("the jobs are of more than one account or cluster; a campaign's jobs share both", "jobs"))
        if problems:
            raise InputError("No campaign was made: " + problems[0].message + ".", problems)
        campaign = campaign_create_manual(name=serializer.validated_data["name"], jobs=jobs)
        return Response(campaign_summary(campaign), status=201)


def _jobs(request, refs, field: str) -> list:
    visible = job_list_for_user(request.user)
    jobs, problems = [], []
    for index, ref in enumerate(refs):
        job = visible.filter(cluster__name=ref.cluster, job_id=ref.job_id).first()
        if job is None:
            problems.append(ErrorItem(f"{ref}: no such job among those you may see", f"{field}.{index}" if field != "split_at" else field))
        else:
            jobs.append(job)
    return jobs, problems


class CampaignDetailView(APIView):
    """A campaign: goodput, badput by part, its jobs, failures with cause and evidence, MTBF and checkpoint advice.
    PATCH (its owner or staff): rename, join, leave, split."""

    @extend_schema(responses={200: CampaignDetail})
    def get(self, request, pk):
        return Response(campaign_summary(_campaign_or_404(request, pk)))

    @extend_schema(request=CampaignPatchSerializer, responses={200: CampaignDetail})
    def patch(self, request, pk):
        campaign = _campaign_or_404(request, pk)
        if not campaign_may_edit(request.user, campaign):
            raise exceptions.PermissionDenied("Only the campaign's owner (the Slurm user of its jobs) or staff may change it.")
        serializer = CampaignPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        join, problems = _jobs(request, values.get("join", []), "join")
        leave, more = _jobs(request, values.get("leave", []), "leave")
        problems += more
        split, more = _jobs(request, [values["split_at"]] if "split_at" in values else [], "split_at")
        problems += more
        for index, job in enumerate(join):
            if job.account != campaign.account or job.cluster_id != campaign.cluster_id:
                problems.append(ErrorItem(f"{job.cluster.name}/{job.job_id} is in account {job.account!r} on "
                                          f"{job.cluster.name}; the campaign's jobs are in {campaign.account!r} on "
                                          f"{campaign.cluster.name}", f"join.{index}"))
        if problems:
            raise InputError("The campaign was not changed: " + problems[0].message + ".", problems)
        try:
            campaign, other = campaign_update(campaign, name=values.get("name"), join=join, leave=leave,
                                              split_at=split[0] if split else None)
        except CampaignEditError as error:
            raise InputError("The campaign was not changed.", [ErrorItem(" ".join(words), name)
                                                              for name, words in error.problems.items()]) from None
        body = campaign_summary(campaign)
        if other is not None:
            body = {**body, "split_into": {"id": other.pk, "url": reverse("campaigns:detail", args=[other.pk])}}
        return Response(body)


CSV_COLUMNS = ["job", "name", "state", "start", "end", "gpus", "nodes", "hours", "queue_hours_before",
               "allocated_gpu_hours", "productive_gpu_hours", "goodput", *[f"badput_{part}" for part in PARTS],
               "resumed_from", "kept_step", "last_checkpoint", "failure"]


class CampaignCsvView(APIView):
    """The campaign's jobs as CSV: one row per allocation with its GPU-hours, goodput, badput parts and failure."""

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.BINARY})
    def get(self, request, pk):
        body = campaign_summary(_campaign_or_404(request, pk))
        rows = [{**{key: row.get(key) for key in CSV_COLUMNS if not key.startswith("badput_")},
                 **{f"badput_{part}": row["badput"].get(part) for part in PARTS}} for row in body["jobs"]]
        frame = pd.DataFrame(rows, columns=CSV_COLUMNS)
        for column in ("start", "end"):
            frame[column] = frame[column].map(lambda value: value.isoformat() if value is not None else None)
        response = HttpResponse(table_bytes(frame, "csv"), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="campaign-{body["id"]}.csv"'
        return response
