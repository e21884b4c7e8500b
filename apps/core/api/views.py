from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView


class ApiRootView(APIView):
    """Entry points of the Belvedere API, with links to the schema and the interactive docs."""

    @extend_schema(summary="API entry points", responses={200: {"type": "object", "additionalProperties": {"type": "string"}}})
    def get(self, request):
        def link(name: str) -> str:
            return request.build_absolute_uri(reverse(name))

        return Response(
            {
                "me": link("accounts-api:me"),
                "projects": link("accounts-api:project-list"),
                "token": link("accounts-api:token"),
                "schema": link("api-schema"),
                "docs": link("api-docs"),
            }
        )
