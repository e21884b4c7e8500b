from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from ..validator import validate
from .serializers import ValidateRequestSerializer, ValidateResponseSerializer


class EdfValidateView(APIView):
    """Check an EDF: every finding with severity, line, column, TOML path, message and hint.

    A 200 answer whatever the EDF says: findings are the result, not a request error."""

    @extend_schema(request=ValidateRequestSerializer, responses=ValidateResponseSerializer)
    def post(self, request):
        serializer = ValidateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        result = validate(data["text"], base_environments=data.get("base_environments"), env=data.get("env"))
        return Response({"valid": result.valid, "findings": [finding.as_dict() for finding in result.findings],
                         "resolved": result.resolved})
