"""Storage endpoint: GET /api/v1/jobs/<cluster>/<job_id>/storage/. Thin: validate, call the selector, answer."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.exceptions import InputError
from apps.core.api.params import parse_query
from apps.jobs.access import job_for_request
from apps.telemetry.backends.base import TelemetryUnavailable

from .. import selectors
from .openapi import StorageResponse
from .serializers import StorageParams

NO_STATS = ("no Lustre job statistics for this job: the file system needs jobid_var=SLURM_JOB_ID (or jobid_name) and "
            "its job_stats imported (POST /api/v1/telemetry/import/?format=lustre-jobstats)")


class StorageView(APIView):
    """The job's read/write bytes, operations and metadata operations per second over time (from the Lustre job
    statistics of its OSTs and MDTs, summed over targets), its totals and its write bursts (checkpoints) with the
    GPUs' idle seconds around each."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[StorageParams], responses={200: StorageResponse})
    def get(self, request, cluster: str, job_id: int):
        job = job_for_request(request, cluster, job_id)
        params = parse_query(request, StorageParams)
        try:
            body = selectors.job_storage(job, step=params.get("step"), start=params.get("since"), end=params.get("until"))
        except TelemetryUnavailable as exc:
            raise InputError(str(exc), status_code=503) from exc
        if body["coverage"] is None:
            body["reason"] = NO_STATS
        return Response({"job": f"{cluster}/{job_id}", **body})
