"""Usage and efficiency reports: the JSON, and the same rows as CSV or Parquet."""
from datetime import datetime, timezone

import pandas as pd
from django.http import HttpResponse, QueryDict
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import InputError
from apps.core.api.params import parse_params
from apps.core.exports import FORMATS, table_bytes

from ..selectors import report_project_known, usage_report_for_user
from ..usage import COLUMNS
from .openapi import UsageResponse
from .serializers import UsageParams

_INTEGER_COLUMNS = ("jobs",)
_TEXT_COLUMNS = ("group_by", "key")


def usage_for_request(request, data=None) -> dict:
    """Validate the parameters (400 on bad ones, 404 for a project the caller may not report on) and build the report."""
    now = datetime.now(timezone.utc)
    values = parse_params(request.GET if data is None else data, UsageParams, context={"now": now})
    if values["project"] and not report_project_known(request.user, values["project"]):
        raise InputError(f"no project {values['project']!r} among those you may report on", status_code=404)
    return usage_report_for_user(request.user, since=values["since"], until=values["until"], now=now,
                                 group_by=values["group_by"], project=values["project"], user_name=values["user"],
                                 partition=values["partition"])


def download_links(payload: dict) -> dict[str, str]:
    """The same report as files, from the report's own (validated) filters, its window pinned (a running job counts
    until the JSON's ``until``, so the file holds the same numbers when fetched a minute later). Never the request's
    raw query: a page that fell back to the default report after a bad filter offers the report it shows."""
    query = QueryDict(mutable=True)
    for name, value in payload["filters"].items():
        if value:
            query[name] = value
    query["group_by"] = payload["group_by"]
    for name in ("since", "until"):
        query[name] = payload["window"][name].isoformat()
    return {fmt: f"{reverse('reports-api:usage-download', kwargs={'extension': fmt})}?{query.urlencode()}" for fmt in FORMATS}


def usage_frame(rows: list[dict]) -> pd.DataFrame:
    """The report's rows as a table with stable types: nullable numbers stay null (never NaN or 0)."""
    frame = pd.DataFrame([{column: row[column] for column in COLUMNS} for row in rows], columns=list(COLUMNS))
    for column in COLUMNS:
        if column in _TEXT_COLUMNS:
            frame[column] = frame[column].astype("string")
        elif column in _INTEGER_COLUMNS:
            frame[column] = frame[column].astype("Int64")
        else:
            frame[column] = frame[column].astype("Float64")
    return frame


class UsageView(APIView):
    """GPU-hours, mean saturation, idle GPU-hours, GPU-hours lost and energy per project, user or partition over a
    window (default: the last 7 days), with the most wasteful jobs and a histogram of job scores. Staff see every job;
    everyone else the jobs of their projects and their own."""

    @extend_schema(parameters=[UsageParams], responses={200: UsageResponse})
    def get(self, request):
        payload = usage_for_request(request)
        payload["downloads"] = download_links(payload)
        return Response(payload)


class UsageDownloadView(APIView):
    """The rows of the usage report (one per project, user or partition) as CSV or Parquet; same parameters."""

    @extend_schema(parameters=[UsageParams, OpenApiParameter("extension", str, OpenApiParameter.PATH, enum=list(FORMATS))],
                   responses={(200, "text/csv"): OpenApiTypes.BINARY, (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY})
    def get(self, request, extension):
        if extension not in FORMATS:
            raise InputError(f"download usage.{' or usage.'.join(FORMATS)}, not usage.{extension}", status_code=404)
        payload = usage_for_request(request)
        window = payload["window"]
        response = HttpResponse(table_bytes(usage_frame(payload["rows"]), extension), content_type=FORMATS[extension])
        name = f"usage-by-{payload['group_by']}-{window['since']:%Y%m%dT%H%M}-{window['until']:%Y%m%dT%H%M}.{extension}"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
