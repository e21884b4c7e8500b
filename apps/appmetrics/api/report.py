"""The PDF job report: POST /api/v1/jobs/<cluster>/<job_id>/report/ asks for a build (202 with the status; a build
already waiting or being built is not queued twice), GET the same path says how it goes (status, progress,
message), GET /api/v1/jobs/<cluster>/<job_id>/report.pdf is the file (404 saying why when there is none).
Anyone who may see the job may ask for its report and read it."""
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.exceptions import InputError

from .. import reporting
from ..choices import JobReportStatusChoices as Status
from .views import job_for

ReportStatusResponse = inline_serializer("JobReportStatus", fields={
    "job": serializers.CharField(help_text="cluster/job_id"),
    "status": serializers.ChoiceField(choices=["none", *Status.values], help_text="none: never asked for"),
    "progress": serializers.IntegerField(help_text="percent done while building"),
    "message": serializers.CharField(help_text="what the build does now, or why it failed"),
    "requested": serializers.DateTimeField(allow_null=True),
    "built": serializers.DateTimeField(allow_null=True),
    "pages": serializers.IntegerField(),
    "pdf": serializers.CharField(allow_null=True, help_text="the file's path once built"),
    "queued": serializers.BooleanField(required=False, help_text="POST only: whether this request queued a build"),
})


class ReportView(APIView):
    """The job's PDF report: GET its status and progress, POST to build it (again)."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(responses={200: ReportStatusResponse})
    def get(self, request, cluster: str, job_id: int):
        job = job_for(request, cluster, job_id)
        return Response(reporting.report_body(job, reporting.report_get(job)))

    @extend_schema(request=None, responses={202: ReportStatusResponse})
    def post(self, request, cluster: str, job_id: int):
        job = job_for(request, cluster, job_id, write=True)  # a build costs a worker: the job's user, staff or token
        report, queued = reporting.report_request(job)
        body = reporting.report_body(job, report)
        if not queued:
            body["message"] = f"a build is already {report.get_status_display()} ({report.progress} %): not queued again"
        return Response({**body, "queued": queued}, status=status.HTTP_202_ACCEPTED)


class AnyAccept(BaseContentNegotiation):
    """The file answers whatever the client accepts (a browser asks for application/pdf); errors are JSON."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ReportFileView(APIView):
    """The built PDF. 404 with the reason when there is none: never asked for, waiting, being built, failed."""

    authentication_classes = JOB_API_AUTHENTICATION
    content_negotiation_class = AnyAccept

    @extend_schema(responses={(200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY)})  # 4xx: the Error body (core hook)
    def get(self, request, cluster: str, job_id: int):
        job = job_for(request, cluster, job_id)
        report = reporting.report_get(job)
        path = reporting.report_file(report) if report is not None else None
        if path is None:
            raise InputError(_why_not(report, f"/api/v1/jobs/{cluster}/{job_id}/report/"), status_code=404)
        return FileResponse(path.open("rb"), content_type="application/pdf", as_attachment=False,
                            filename=f"belvedere-{cluster}-{job_id}.pdf")


def _why_not(report, ask: str) -> str:
    if report is None:
        return f"not built: no report was asked for yet; POST {ask} to build it"
    if report.status == Status.WAITING:
        return f"not built yet: waiting for a worker (asked {report.requested:%Y-%m-%d %H:%M} UTC); GET {ask} for its progress"
    if report.status == Status.BUILDING:
        return f"building: {report.progress} % done ({report.message}); GET {ask} for its progress"
    if report.status == Status.FAILED:
        return f"not built: the build failed ({report.message}); POST {ask} to try again"
    return f"not built: the file is gone from the data folder; POST {ask} to build it again"
