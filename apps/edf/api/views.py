from django.contrib.auth import get_user_model
from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.params import BIGINT_MAX, QueryIntegerField, parse_query

from .. import services
from ..models import EdfVersion
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


def _write(change, *args, **kwargs):
    """Run a service that changes a document; a document deleted meanwhile is a 404 that says so."""
    try:
        return change(*args, **kwargs)
    except services.EdfGone as exc:
        raise NotFound(str(exc)) from exc


def _version_field(**kwargs):
    return QueryIntegerField(min_value=1, max_value=BIGINT_MAX, required=False, help_text="A version number (1, 2, ...).",
                             **kwargs)


class DiffParams(serializers.Serializer):
    # "from" is a Python keyword: declared through fields below
    to = _version_field()

    def get_fields(self):
        return {**super().get_fields(), "from": _version_field()}


class DownloadParams(serializers.Serializer):
    version = _version_field()


class EdfListParams(serializers.Serializer):
    owner = serializers.CharField(required=False, max_length=150, help_text="Only the EDFs of this user (a username).")


@extend_schema_view(get=extend_schema(parameters=[EdfListParams]))
class EdfListView(generics.ListCreateAPIView):
    """Saved EDFs you may read (yours, those shared with your projects; all for staff); POST saves a new one."""

    serializer_class = EdfDocumentSerializer

    def get_queryset(self):
        queryset = edf_list_for_user(self.request.user).order_by("owner__username", "name").prefetch_related(
            Prefetch("versions", queryset=EdfVersion.objects.select_related("created_by")))  # each one's latest, at once
        owner = parse_query(self.request, EdfListParams).get("owner")
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
        _write(services.edf_update, request.user, document, **serializer.validated_data)
        document.refresh_from_db()
        return Response(EdfDocumentSerializer(document, context={"request": request}).data)

    @extend_schema(responses={204: None})
    def delete(self, request, owner, name):
        _write(services.edf_delete, request.user, _document_or_404(request, owner, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class EdfVersionListView(APIView):
    """Every version of an EDF, newest first."""

    @extend_schema(responses=EdfVersionSerializer(many=True))
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        return Response(EdfVersionSerializer(document.versions.order_by("-number").select_related("created_by"), many=True).data)


class EdfShareView(APIView):
    """Share an EDF with exactly the given projects (owner only; you must be a member of each)."""

    @extend_schema(request=EdfShareSerializer, responses={200: EdfDocumentSerializer})
    def put(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        serializer = EdfShareSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        _write(services.edf_share, request.user, document, serializer.validated_data["projects"])
        return Response(EdfDocumentSerializer(document, context={"request": request}).data)


class EdfDiffView(APIView):
    """Unified diff between two versions (default: the previous and the latest)."""

    @extend_schema(parameters=[DiffParams], responses={(200, "text/x-diff"): str})
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        params = parse_query(request, DiffParams)
        latest = edf_version(document)
        to_number = params.get("to", latest.number)
        from_number = params.get("from", max(to_number - 1, 1))
        old, new = edf_version(document, from_number), edf_version(document, to_number)
        if old is None or new is None:
            raise Http404
        diff = unified_diff(old.text, new.text, f"{name}.toml v{old.number}", f"{name}.toml v{new.number}")
        return HttpResponse(diff, content_type="text/x-diff; charset=utf-8")


class EdfDownloadView(APIView):
    """The EDF as a .toml file (latest, or ?version=N), for ${HOME}/.edf. Works with an API token."""

    @extend_schema(parameters=[DownloadParams], responses={(200, "application/toml"): str})
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        version = edf_version(document, parse_query(request, DownloadParams).get("version"))
        if version is None:
            raise Http404
        response = HttpResponse(version.text, content_type="application/toml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{document.name}.toml"'
        return response
