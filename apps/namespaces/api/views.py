"""Namespace endpoints under /api/v1/namespaces/: requests (with a dry run), namespaces, decisions, teardown."""
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.api.params import parse_query
from apps.core.api.permissions import IsStaff

from ..models import ManagedNamespace
from ..render import to_yaml
from ..selectors import namespace_get_for_user, namespaces_for_user, requests_for_user
from ..services import (
    NotAllowed,
    NotPermitted,
    RequestRefused,
    decide,
    inventory,
    preview,
    submit,
    teardown_advance,
    teardown_request,
)
from ..spec import namespace_name
from .openapi import (InventoryResponse, NamespaceDryRunResponse, NamespaceRequestResponse, NamespaceResponse,
                      NamespaceSummary)

MAX_REQUEST_BYTES = 256 * 1024  # a request is a few hundred bytes; anything near this is a mistake or an attack


def _namespace(ns: ManagedNamespace, detail: bool = False) -> dict:
    body = {"name": ns.name, "team": ns.project.slurm_account, "environment": ns.environment, "state": ns.state,
            "teardown_step": ns.teardown_step or None, "commit": ns.commit, "sync": ns.sync_status or None,
            "health": ns.health_status or None, "status_message": ns.status_message, "status_checked": ns.status_checked,
            "created": ns.created, "updated": ns.updated}
    if detail:
        body.update(spec=ns.spec, status_detail=ns.status_detail,
                    events=[{"at": e.created, "from": e.from_state, "to": e.to_state, "actor": e.actor, "message": e.message,
                             "commit": e.commit} for e in ns.events.all()],
                    requests=[{"id": r.pk, "kind": r.kind, "status": r.status, "created": r.created} for r in ns.requests.all()])
    return body


def _request(request) -> dict:
    return {"id": request.pk, "number": request.number, "kind": request.kind, "name": request.name, "team": request.project.slurm_account,
            "status": request.status, "needs_approval": request.needs_approval, "approvers": request.approvers,
            "requested_by": request.requested_by.get_username(), "decided_by": request.decided_by.get_username() if request.decided_by else None,
            "decision_reason": request.decision_reason, "commit": request.commit, "diff": request.diff, "message": request.message,
            "spec": request.spec, "created": request.created,
            "events": [{"at": e.created, "from": e.from_state, "to": e.to_state, "actor": e.actor, "message": e.message, "commit": e.commit}
                       for e in request.events.all()]}


def _change_target(spec, user) -> ManagedNamespace | None:
    """A request for the name of a namespace the caller's team already has is a day-2 change of it."""
    if not isinstance(spec, dict) or not isinstance(spec.get("team"), str) or not isinstance(spec.get("name"), str):
        return None
    namespace = namespace_get_for_user(user, namespace_name(spec["team"], spec["name"]))
    return namespace if namespace and namespace.state != "archived" and namespace.project.slurm_account == spec["team"] else None


class RequestParams(serializers.Serializer):
    dry_run = serializers.BooleanField(required=False, default=False,
                                       help_text="Only check the request (1, true, yes); anything else but 0, false, no is a 400.")


def _declared_length(request) -> int:
    """The body's declared length; an unreadable Content-Length counts as none (Django then reads nothing)."""
    text = str(request.META.get("CONTENT_LENGTH") or "0").strip()
    if not (text.isascii() and text.isdigit()):
        return 0
    return int(text) if len(text) <= 18 else 10**18  # more digits than any body: too large, without int() on them


class RequestListView(APIView):
    """POST a namespace request (the spec as JSON). ``?dry_run=1`` only checks it: the problems by field,
    whether a person must approve and who, the rendered manifests and the diff against the repository.
    A request naming a namespace the team already has changes it (day 2). GET lists the caller's teams' requests."""

    @extend_schema(parameters=[RequestParams], request={"application/json": {"type": "object"}},
                   responses={200: NamespaceDryRunResponse, 201: NamespaceRequestResponse})
    def post(self, request):
        dry_run = parse_query(request, RequestParams)["dry_run"]
        size = _declared_length(request)
        if size > MAX_REQUEST_BYTES:
            raise InputError(f"the request has {size:,} bytes; a namespace request is at most {MAX_REQUEST_BYTES:,} bytes of JSON",
                             status_code=413)
        spec = request.data
        namespace = _change_target(spec, request.user)
        if dry_run:
            result = preview(spec, request.user, namespace=namespace)
            return Response({"valid": result.check.ok, "name": result.name, "change_of": namespace.name if namespace else None,
                             "problems": [{"field": p.field, "message": p.message} for p in result.check.problems],
                             "needs_approval": result.check.needs_approval, "approvers": result.approvers,
                             "manifests": to_yaml(result.manifests) if result.manifests else "", "files": result.files,
                             "diff": result.diff})
        try:
            created = submit(spec, request.user, namespace=namespace)
        except RequestRefused as exc:
            problems = exc.check.problems
            raise InputError(f"{len(problems)} problem{'s' * (len(problems) > 1)} in the request: "
                             + "; ".join(f"{p.field}: {p.message}" for p in problems[:3]),
                             [ErrorItem(message=p.message, field=p.field) for p in problems]) from exc
        return Response(_request(created), status=status.HTTP_201_CREATED)

    @extend_schema(operation_id="namespaces_requests_list", responses={200: NamespaceRequestResponse(many=True)})
    def get(self, request):
        return Response([_request(r) for r in requests_for_user(request.user).prefetch_related("events")[:200]])


class RequestDetailView(APIView):
    @extend_schema(responses={200: NamespaceRequestResponse})
    def get(self, request, pk):
        found = requests_for_user(request.user).filter(pk=pk).first()
        if found is None:
            raise Http404
        return Response(_request(found))


class StaffDecides(IsStaff):
    message = "Only staff decide on namespace requests."


class DecisionView(APIView):
    """Staff (the team's named approvers, when it has some) approve or reject a waiting request; a rejection says why,
    and approving a production namespace takes a note in ``reason`` (refused with 409 without one)."""

    permission_classes = [StaffDecides]
    approve = True

    @extend_schema(request={"application/json": {"type": "object", "properties": {"reason": {"type": "string"}}}},
                   responses={200: NamespaceRequestResponse})
    def post(self, request, pk):
        found = requests_for_user(request.user).filter(pk=pk).first()
        if found is None:
            raise Http404
        try:
            decide(found, request.user, approve=self.approve, reason=str(request.data.get("reason", "")) if isinstance(request.data, dict) else "")
        except NotAllowed as exc:
            raise InputError(str(exc), status_code=403 if isinstance(exc, NotPermitted) else 409) from exc
        return Response(_request(found))


class NamespaceListView(APIView):
    @extend_schema(operation_id="namespaces_list", responses={200: NamespaceSummary(many=True)})
    def get(self, request):
        return Response([_namespace(ns) for ns in namespaces_for_user(request.user)])


class NamespaceDetailView(APIView):
    @extend_schema(responses={200: NamespaceResponse})
    def get(self, request, name):
        namespace = namespace_get_for_user(request.user, name)
        if namespace is None:
            raise Http404
        return Response(_namespace(namespace, detail=True))


class TeardownView(APIView):
    """Tear a namespace down, in order: freeze, optional volume backup, remove from git, wait for Argo CD
    to prune, verify, archive. Body: {"reason": "...", "backup": true|false, "confirm": "<the namespace's name>" (optional)}."""

    @extend_schema(request={"application/json": {"type": "object"}}, responses={202: NamespaceResponse})
    def post(self, request, name):
        namespace = namespace_get_for_user(request.user, name)
        if namespace is None:
            raise Http404
        data = request.data if isinstance(request.data, dict) else {}
        try:
            # the URL names the namespace; a "confirm" in the body, when given, must name it too
            teardown_request(namespace, request.user, backup=bool(data.get("backup")), reason=str(data.get("reason", "")),
                             confirm=str(data.get("confirm", namespace.name)))
        except NotAllowed as exc:
            raise InputError(str(exc), status_code=409) from exc
        namespace.refresh_from_db()
        return Response(_namespace(namespace, detail=True), status=status.HTTP_202_ACCEPTED)


class BackupDoneView(APIView):
    """Confirm the volumes of a namespace being torn down were backed up; the teardown goes on."""

    @extend_schema(request=None, responses={200: NamespaceResponse})
    def post(self, request, name):
        namespace = namespace_get_for_user(request.user, name)
        if namespace is None:
            raise Http404
        if namespace.teardown_step != "freeze" or not namespace.backup_requested:
            raise InputError(f"{name} is not waiting for a backup", status_code=409)
        teardown_advance(namespace, actor=request.user.get_username(), backup_done=True)
        namespace.refresh_from_db()
        return Response(_namespace(namespace, detail=True))


class InventoryView(APIView):
    """What the cluster offers: GPU models with their whole GPUs and MIG profiles (with what is left),
    storage classes per environment, blueprints and their parameters."""

    @extend_schema(responses={200: InventoryResponse})
    def get(self, request):
        from ..services import allocated_now

        return Response(inventory_document(allocated_now()))


def inventory_document(allocated) -> dict:
    inv = inventory()
    return {
        "gpu_models": [{"id": m.id, "label": m.label, "profiles": [
            {"profile": profile, "resource": m.resource(profile), "capacity": m.capacity(profile),
             "left": max(0, m.capacity(profile) - allocated.models.get((m.id, profile), 0))} for profile in m.profiles]}
            for m in inv.gpu_models.values()],
        "environments": {name: {"storage": env.get("storage", []), "psa": env.get("psa", []), "approval": bool(env.get("approval"))}
                         for name, env in inv.environments.items()},
        "storage_classes": inv.storage_classes,
        "blueprints": [{"id": b.id, "label": b.label, "description": b.description, "chart": f"{b.chart} {b.version}",
                        "params": b.params} for b in inv.blueprints.values()],
        "ingress_domain": inv.ingress_domain,
    }
