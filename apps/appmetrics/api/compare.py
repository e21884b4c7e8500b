"""GET /api/v1/jobs/compare/?jobs=c/1,c/2: two or more jobs side by side, the differences and the scaling view."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.api.params import parse_query
from apps.jobs.authentication import token_job

from ..compare import job_compare, jobs_for_refs
from .compare_openapi import CompareResponse
from .serializers import CompareParams


def unknown_jobs_error(unknown: list[str]) -> InputError:
    """404 naming the jobs asked for that are unknown or not the caller's to see (the two are never told apart)."""
    many = len(unknown) > 1
    return InputError(f"{'These jobs are' if many else 'This job is'} unknown or not visible to you: {', '.join(unknown)}.",
                      [ErrorItem(f"{ref}: no such job visible to you", field="jobs") for ref in unknown], status_code=404)


class CompareView(APIView):
    """Jobs side by side (config, layout, placement, tokens/s per GPU, MFU, saturation and limiter, stragglers,
    energy per token) with the rows that differ marked, a verdict in words, and the scaling efficiency (strong:
    same global batch; weak: batch grown with the GPUs) across the jobs that train the same model. Every job must be
    visible to the caller; otherwise 404 naming them."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[CompareParams], responses={200: CompareResponse})
    def get(self, request):
        refs = parse_query(request, CompareParams)["jobs"]
        jobs, unknown = jobs_for_refs(request.user, refs, token_job(request))
        if unknown:
            raise unknown_jobs_error(unknown)
        return Response(job_compare(jobs))
