"""Vetting endpoints under /api/v1/vetting/: post and read runs and results, node states and staff
actions, the rules catalogue, recommendations, and the vetnode protocol check."""

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import generics, permissions, serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.api.params import BIGINT_MAX, QueryIntegerField, parse_query
from apps.core.api.parsers import BoundedJSONParser
from apps.core.api.permissions import IsStaff
from apps.jobs.authentication import token_job

from .. import parsers, protocol as protocol_check
from ..filtersets import VettingResultFilterSet
from ..choices import NodeHealthStateChoices, RecommendationStatusChoices
from ..models import NodeHealth, NodeHealthEvent, Recommendation, Rule
from ..node_states import TransitionError
from ..records import ParseError
from ..scontrol import ActionRefused
from ..selectors import job_visibility, open_recommendations, restrict_private_filters, results_for_user, runs_for_user
from ..services import (ActionFailed, IngestRefused, RuleInvalid, node_act, protocol_hash, recommendation_resolve, rule_save,
                        rules_ensure_built_in, run_check_window, run_store, run_target)
from .openapi import ProtocolValidateResponse, VettingNodeActionResponse, VettingNodeResponse, VettingRunStoredResponse
from .serializers import (NodeActionSerializer, NodeHealthEventSerializer, NodeHealthSerializer, RecommendationResolveSerializer,
                          RecommendationSerializer, RuleSerializer, RuleWriteSerializer, VettingResultSerializer,
                          VettingRunSerializer)


class StaffWrites(permissions.BasePermission):
    message = "Reading is open to everyone logged in; changing needs staff rights."

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.is_staff


class TextParser(BaseParser):
    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        # One byte past the limit is enough to refuse the body (413 in _body_text); never more.
        return stream.read(settings.VETTING_MAX_UPLOAD_BYTES + 1) if stream is not None else b""


def _body_text(request) -> str:
    limit = settings.VETTING_MAX_UPLOAD_BYTES
    declared = str(request.META.get("CONTENT_LENGTH") or "0").strip()
    declared_size = (int(declared) if len(declared) <= 18 else 10**18) if declared.isascii() and declared.isdigit() else 0
    if declared_size > limit or len(request.data if isinstance(request.data, bytes) else b"") > limit:
        raise InputError(f"the upload is larger than {limit:,} bytes", status_code=413)
    data = request.data if isinstance(request.data, bytes) else b""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"the upload is not UTF-8 text (byte {exc.start})") from exc


def _parse_problems(exc: ParseError) -> InputError:
    items = [ErrorItem(message=message, line=line, column=column) for line, column, message in exc.problems[:50]]
    return InputError(str(exc), items)


def _store(request, run, *, cluster_name, job_id):
    job_of_token = token_job(request)
    try:
        cluster, job, submitter = run_target(request.user, job_of_token, cluster_name=cluster_name, job_id=job_id)
        run_check_window(run, job_of_token)
    except IngestRefused as exc:
        errors = [ErrorItem(message=str(exc), field=exc.field)] if exc.field else None
        raise InputError(str(exc), errors, status_code=exc.status) from exc
    stored = run_store(run, cluster=cluster, job=job, submitter=submitter)
    return Response({"run": stored.pk, "source": stored.source, "hosts": run.hosts, "failed_hosts": run.failed_hosts,
                     "results": len(run.results), "failed_results": stored.results_failed, "warnings": run.warnings,
                     "url": f"/vetting/runs/{stored.pk}/"}, status=status.HTTP_201_CREATED)


class RunListParams(serializers.Serializer):
    job = QueryIntegerField(min_value=0, max_value=BIGINT_MAX, required=False, help_text="Slurm job id")


class ImportParams(serializers.Serializer):
    format = serializers.ChoiceField(choices=list(parsers.FORMATS), default="auto")
    job = QueryIntegerField(min_value=0, max_value=BIGINT_MAX, required=False, allow_null=True)
    cluster = serializers.CharField(max_length=200, required=False, allow_blank=True)
    host = serializers.CharField(max_length=64, required=False, allow_blank=True)
    protocol = serializers.CharField(max_length=200, required=False, allow_blank=True)
    protocol_hash = serializers.CharField(max_length=64, required=False, allow_blank=True)

    def to_internal_value(self, data):
        # ?job= (empty) means no job, as before
        if hasattr(data, "get") and data.get("job") == "":
            data = {key: data.get(key) for key in data if key != "job"}
        return super().to_internal_value(data)


class RunListView(generics.ListCreateAPIView):
    """Vetting runs, newest first. POST a run document (vetnode's EvalResult fields, health checks with
    status or exit_code, DCGM diagnostics): it is stored whole or, with a line-precise 400, not at all."""

    serializer_class = VettingRunSerializer
    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [BoundedJSONParser]

    def get_queryset(self):
        queryset = runs_for_user(self.request.user)
        job = parse_query(self.request, RunListParams).get("job") if self.request.method == "GET" else None
        return restrict_private_filters(queryset.filter(job_id_number=job) if job is not None else queryset, self.request.user,
                                        job=job)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "viewer": job_visibility(self.request.user)}

    @extend_schema(parameters=[RunListParams])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(request={"application/json": {"type": "object"}}, responses={201: VettingRunStoredResponse})
    def post(self, request):
        data = request.data
        if not isinstance(data, dict):
            raise InputError("a run is a JSON object with a results list")
        try:
            run = parsers.parse_run_document(data)
        except ParseError as exc:
            raise _parse_problems(exc) from exc
        text = (data.get("protocol") or {}).get("text") if isinstance(data.get("protocol"), dict) else None
        run.protocol_hash = run.protocol_hash or protocol_hash(text)
        return _store(request, run, cluster_name=run.cluster, job_id=run.job_id)


class RunDetailView(generics.RetrieveAPIView):
    serializer_class = VettingRunSerializer
    authentication_classes = JOB_API_AUTHENTICATION

    def get_queryset(self):
        return runs_for_user(self.request.user)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "viewer": job_visibility(self.request.user)}


class FormatIsOurs:
    """``?format=`` names the upload's format here, not DRF's output override."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type

    def select_parser(self, request, parsers):
        return parsers[0]


class ImportView(APIView):
    """Import what the tools print: vetnode's output (``format=vetnode``, ``vetnode-legacy``), ``dcgmi diag -j``
    (``format=dcgm-diag`` with ``host``), or ``auto``. ``job`` (and ``cluster``) attach it to a job;
    ``protocol`` names the vetnode protocol."""

    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [TextParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FormatIsOurs

    @extend_schema(request={"text/plain": {"type": "string"}}, parameters=[ImportParams], responses={201: VettingRunStoredResponse})
    def post(self, request):
        params = parse_query(request, ImportParams)
        fmt = params["format"]
        job_id = params.get("job")
        text = _body_text(request)
        try:
            run = parsers.parse(text, fmt, host=params.get("host") or None)
        except ParseError as exc:
            raise _parse_problems(exc) from exc
        run.protocol_name = params.get("protocol", "") or run.protocol_name
        run.protocol_hash = params.get("protocol_hash", "")
        return _store(request, run, cluster_name=params.get("cluster") or None, job_id=job_id)


class ResultCursor(CursorPagination):
    ordering = ("-time", "-id")
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "limit"


class ResultListView(generics.ListAPIView):
    """Vetting results, newest first, with the history page's filters (node, group, switch, eval, kind,
    outcome, since, until, job, user, protocol, run). Cursor pagination: follow ``next``."""

    serializer_class = VettingResultSerializer
    filterset_class = VettingResultFilterSet
    pagination_class = ResultCursor
    authentication_classes = JOB_API_AUTHENTICATION

    def get_queryset(self):
        params = self.request.query_params
        return restrict_private_filters(results_for_user(self.request.user), self.request.user, job=params.get("job"),
                                        user_name=params.get("user"))

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "viewer": job_visibility(self.request.user)}


class NodeListParams(serializers.Serializer):
    state = serializers.ChoiceField(choices=NodeHealthStateChoices.choices, required=False,
                                    help_text="Only nodes in this health state.")


@extend_schema_view(get=extend_schema(parameters=[NodeListParams]))
class NodeListView(generics.ListAPIView):
    """Node health states (nodes never vetted are healthy and not listed)."""

    serializer_class = NodeHealthSerializer
    queryset = NodeHealth.objects.all()

    def get_queryset(self):
        state = parse_query(self.request, NodeListParams).get("state")
        return self.queryset.filter(state=state) if state else self.queryset


class NodeDetailView(APIView):
    @extend_schema(responses={200: VettingNodeResponse})
    def get(self, request, host):
        health = NodeHealth.objects.filter(host=host).first()
        if health is None:
            raise Http404
        events = NodeHealthEvent.objects.filter(host=host)[:200]
        return Response({**NodeHealthSerializer(health).data, "events": NodeHealthEventSerializer(events, many=True).data})


class NodeActionView(APIView):
    """Staff: acknowledge, drain, repair, return or clear a node, with a reason. Drain and return run
    scontrol (a dry run unless VETTING_ACTIONS_DRY_RUN is off); a node drained by someone else is never returned."""

    permission_classes = [IsStaff]

    @extend_schema(request=NodeActionSerializer, responses={200: VettingNodeActionResponse})
    def post(self, request, host):
        serializer = NodeActionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            event = node_act(host, serializer.validated_data["action"], actor=request.user.get_username(),
                             reason=serializer.validated_data["reason"])
        except TransitionError as exc:
            raise InputError(str(exc), [ErrorItem(message=str(exc), field="action")], status_code=409) from exc
        except ActionRefused as exc:
            raise InputError(str(exc), status_code=409) from exc
        except ActionFailed as exc:
            raise InputError(str(exc), status_code=502) from exc
        health = NodeHealth.objects.get(host=host)
        return Response({**NodeHealthSerializer(health).data, "event": NodeHealthEventSerializer(event).data})


class RuleListView(APIView):
    """The rules catalogue. Staff add rules (POST); each change is a new version."""

    permission_classes = [StaffWrites]

    @extend_schema(responses={200: RuleSerializer(many=True)})
    def get(self, request):
        rules_ensure_built_in()
        return Response(RuleSerializer(Rule.objects.prefetch_related("versions"), many=True).data)

    @extend_schema(request=RuleWriteSerializer, responses={201: RuleSerializer})
    def post(self, request):
        return self._save(request, None, status.HTTP_201_CREATED)

    @staticmethod
    def _save(request, rule, code):
        serializer = RuleWriteSerializer(data=request.data, partial=rule is not None)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        comment = data.pop("comment", "")
        try:
            saved = rule_save(rule, data, user=request.user.get_username(), comment=comment)
        except RuleInvalid as exc:
            raise InputError(f"the rule is not valid: {exc}", [ErrorItem(message=message, field=field) for field, message in exc.problems]) from exc
        return Response(RuleSerializer(saved).data, status=code)


class RuleDetailView(APIView):
    permission_classes = [StaffWrites]

    def _rule(self, slug):
        rules_ensure_built_in()
        rule = Rule.objects.filter(slug=slug).first()
        if rule is None:
            raise Http404
        return rule

    @extend_schema(responses={200: RuleSerializer})
    def get(self, request, slug):
        return Response(RuleSerializer(self._rule(slug)).data)

    @extend_schema(request=RuleWriteSerializer, responses={200: RuleSerializer})
    def patch(self, request, slug):
        return RuleListView._save(request, self._rule(slug), status.HTTP_200_OK)


class RecommendationListParams(serializers.Serializer):
    status = serializers.ChoiceField(choices=[*RecommendationStatusChoices.choices, ("all", "All")], required=False,
                                     help_text="Only recommendations in this status; `all` for every one "
                                               "(default: open and acknowledged).")


@extend_schema_view(get=extend_schema(parameters=[RecommendationListParams]))
class RecommendationListView(generics.ListAPIView):
    """What the rules recommend. ``?status=open`` (default: open and acknowledged), ``all`` for every one."""

    serializer_class = RecommendationSerializer

    def get_queryset(self):
        wanted = parse_query(self.request, RecommendationListParams).get("status", "")
        if wanted == "all":
            return Recommendation.objects.select_related("rule")
        if wanted:
            return Recommendation.objects.select_related("rule").filter(status=wanted)
        return open_recommendations()


class RecommendationResolveView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(request=RecommendationResolveSerializer, responses={200: RecommendationSerializer})
    def post(self, request, pk):
        recommendation = Recommendation.objects.select_related("rule").filter(pk=pk).first()
        if recommendation is None:
            raise Http404
        serializer = RecommendationResolveSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        recommendation_resolve(recommendation, actor=request.user.get_username(), dismiss=serializer.validated_data["status"] == "dismissed")
        return Response(RecommendationSerializer(recommendation).data)


class ProtocolValidateView(APIView):
    """Check a vetnode protocol (config.yaml) before a job uses it: every problem with line, column, path
    and a hint, and the thresholds as vetnode will apply them. Send the YAML as the body (or {"text": ...})."""

    parser_classes = [TextParser]

    @extend_schema(request={"text/plain": {"type": "string"}}, responses={200: ProtocolValidateResponse})
    def post(self, request):
        text = _body_text(request)
        if text.lstrip().startswith("{"):
            import json

            try:
                text = str(json.loads(text).get("text", ""))
            except (ValueError, AttributeError):
                pass
        report = protocol_check.validate_protocol(text)
        return Response({"valid": report.valid, "name": report.name, "sha256": protocol_hash(text),
                         "findings": [f.__dict__ for f in report.findings], "evals": report.evals})

