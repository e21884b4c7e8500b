"""GET /api/v1/telemetry/fields/: the field registries (being built: issue 21)."""
from rest_framework.response import Response
from rest_framework.views import APIView


class FieldsView(APIView):
    def get(self, request):
        return Response({})
