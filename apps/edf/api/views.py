from django.contrib.auth import get_user_model
from django.http import Http404, HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import services
from ..selectors import edf_base_texts, edf_get_for_user, edf_list_for_user, edf_version
from ..snippets import unified_diff
from ..validator import validate
from .serializers import (
    EdfCreateSerializer, EdfDocumentSerializer, EdfShareSerializer, EdfUpdateSerializer, EdfVersionSerializer,
    ValidateRequestSerializer, ValidateResponseSerializer,
)


class EdfValidateView(APIView):
    """Check an EDF: every finding with severity, line, column, TOML path, message and hint, and the
    environment it resolves to (base_environment chain merged, variables expanded when ``env`` is given).

    A 200 answer whatever the EDF says: findings are the result, not a request error."""

    @extend_schema(request=ValidateRequestSerializer, responses=ValidateResponseSerializer)
    def post(self, request):
        serializer = ValidateRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        bases = {}
        if data["use_saved"]:
            owner = request.user
            if data.get("owner") and data["owner"] != request.user.get_username():
                owner = get_user_model().objects.filter(username=data["owner"]).first()
            if owner is not None:
                bases = edf_base_texts(request.user, owner)
            if data.get("name"):
                bases.pop(data["name"], None)  # the saved copy of the file being edited is not its own base
        bases.update(data.get("base_environments") or {})
        result = validate(data["text"], base_environments=bases, env=data.get("env"), name=data.get("name"))
        return Response({"valid": result.valid, "findings": [finding.as_dict() for finding in result.findings],
                         "resolved": result.resolved})


def _document_or_404(request, owner, name):
    document = edf_get_for_user(request.user, owner, name)
    if document is None:
        raise Http404
    return document


class EdfListView(generics.ListCreateAPIView):
    """Saved EDFs you may read (yours, those shared with your projects; all for staff); POST saves a new one."""

    serializer_class = EdfDocumentSerializer

    def get_queryset(self):
        queryset = edf_list_for_user(self.request.user).order_by("owner__username", "name")
        owner = self.request.query_params.get("owner")
        return queryset.filter(owner__username=owner) if owner else queryset

    @extend_schema(request=EdfCreateSerializer, responses={201: EdfDocumentSerializer})
    def post(self, request):
        serializer = EdfCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        document = services.edf_create(request.user, **serializer.validated_data)
        return Response(EdfDocumentSerializer(document, context={"request": request}).data, status=status.HTTP_201_CREATED)


class EdfDetailView(APIView):
    """One saved EDF. PATCH (owner) saves new text as a new version and/or a new description."""

    @extend_schema(responses=EdfDocumentSerializer)
    def get(self, request, owner, name):
        return Response(EdfDocumentSerializer(_document_or_404(request, owner, name), context={"request": request}).data)

    @extend_schema(request=EdfUpdateSerializer, responses=EdfDocumentSerializer)
    def patch(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        serializer = EdfUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.edf_update(request.user, document, **serializer.validated_data)
        document.refresh_from_db()
        return Response(EdfDocumentSerializer(document, context={"request": request}).data)

    @extend_schema(responses={204: None})
    def delete(self, request, owner, name):
        services.edf_delete(request.user, _document_or_404(request, owner, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class EdfVersionListView(APIView):
    """Every version of an EDF, newest first."""

    @extend_schema(responses=EdfVersionSerializer(many=True))
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        return Response(EdfVersionSerializer(document.versions.order_by("-number"), many=True).data)


class EdfShareView(APIView):
    """Share an EDF with exactly the given projects (owner only; you must be a member of each)."""

    @extend_schema(request=EdfShareSerializer, responses={200: EdfDocumentSerializer})
    def put(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        serializer = EdfShareSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        services.edf_share(request.user, document, serializer.validated_data["projects"])
        return Response(EdfDocumentSerializer(document, context={"request": request}).data)


class EdfDiffView(APIView):
    """Unified diff between two versions (default: the previous and the latest)."""

    @extend_schema(parameters=[OpenApiParameter("from", int), OpenApiParameter("to", int)],
                   responses={(200, "text/x-diff"): str})
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        latest = edf_version(document)
        try:
            to_number = int(request.query_params.get("to", latest.number))
            from_number = int(request.query_params.get("from", max(to_number - 1, 1)))
        except ValueError:
            return Response({"detail": "from and to are version numbers.",
                             "errors": [{"field": "from", "line": None, "message": "not a number"}]}, status=400)
        old, new = edf_version(document, from_number), edf_version(document, to_number)
        if old is None or new is None:
            raise Http404
        diff = unified_diff(old.text, new.text, f"{name}.toml v{old.number}", f"{name}.toml v{new.number}")
        return HttpResponse(diff, content_type="text/x-diff; charset=utf-8")


class EdfDownloadView(APIView):
    """The EDF as a .toml file (latest, or ?version=N), for ${HOME}/.edf. Works with an API token."""

    @extend_schema(parameters=[OpenApiParameter("version", int)], responses={(200, "application/toml"): str})
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        number = request.query_params.get("version")
        version = edf_version(document, int(number) if number and number.isdigit() else None)
        if version is None:
            raise Http404
        response = HttpResponse(version.text, content_type="application/toml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{document.name}.toml"'
        return response
