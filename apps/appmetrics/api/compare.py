"""GET /api/v1/jobs/compare/?jobs=c/1,c/2 (owned by the compare helper)."""
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.params import parse_query

from .serializers import CompareParams


class CompareView(APIView):
    """Two or more jobs side by side (placeholder until the comparison lands)."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[CompareParams])
    def get(self, request):
        params = parse_query(request, CompareParams)
        return Response({"jobs": [str(ref) for ref in params["jobs"]]})
