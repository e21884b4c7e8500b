"""Catalogue endpoints under /api/v1/catalog/: products with their current quality, and the checks' history."""
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.params import QueryIntegerField, parse_query
from apps.core.api.permissions import IsStaff

from apps.core.api.exceptions import ErrorItem, InputError

from ..models import CheckRun, DataProduct, Incident
from ..selectors import (INCIDENT_STATES, check_history, incident_get, incident_list, incidents, latest_checks, measured_for, product_get,
                         product_retention, products, subscribed_products)
from .openapi import CatalogIncidentItem, CatalogSubscriptionState
from .openapi import CatalogCheckRun, CatalogProductResponse, CatalogProductSummary, CatalogRunQueuedResponse


def _run(run: CheckRun, user, product: DataProduct) -> dict:
    return {"kind": run.kind, "ran": run.ran, "status": run.status, "summary": run.summary, "duration_ms": run.duration_ms,
            "measured": measured_for(user, product, run)}


def product_summary(product: DataProduct) -> dict:
    definition = product.definition
    return {"name": product.name, "title": product.title, "domain": product.domain, "status": product.status,
            "version": product.version, "owner": definition["owner"], "tags": definition["tags"],
            "purpose": definition["description"]["purpose"],
            "quality": {"state": product.state, "as_of": product.state_as_of, "newest_sample": product.newest_sample,
                        "coverage": product.coverage, "checks": product.summary, "last_run": product.last_run,
                        "next_run": product.next_run, "open_incidents": getattr(product, "open_incidents", None)}}


STATE_CHOICES = ["fresh", "aging", "stale", "unknown"]
KIND_CHOICES = ["freshness", "coverage", "gaps", "drift"]


class ProductListParams(serializers.Serializer):
    q = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False,
                              help_text="Words in name, title, purpose, tags, columns (the first 200 characters count).")
    domain = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    owner = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    state = serializers.ChoiceField(choices=STATE_CHOICES, required=False, allow_blank=True, default="",
                                    error_messages={"invalid_choice": "state is one of fresh, aging, stale, unknown"})


class ChecksParams(serializers.Serializer):
    kind = serializers.ChoiceField(choices=KIND_CHOICES, required=False, allow_blank=True, default="",
                                   error_messages={"invalid_choice": "kind is one of freshness, coverage, gaps, drift"})
    limit = QueryIntegerField(min_value=1, max_value=1000, required=False, default=100)


class ProductListView(APIView):
    """Data products, with search (``q``: words in name, title, purpose, tags, columns) and filters."""

    @extend_schema(operation_id="catalog_products_list", parameters=[ProductListParams],
                   responses={200: CatalogProductSummary(many=True)})
    def get(self, request):
        params = parse_query(request, ProductListParams)
        found = products(q=params["q"][:200], domain=params["domain"], owner=params["owner"], state=params["state"])
        return Response([product_summary(product) for product in found])


class ProductDetailView(APIView):
    """One product: its declaration (schema with units, source, sample query, targets) and its current quality —
    the last run of each check with what it measured, open incidents, the next run."""

    @extend_schema(responses={200: CatalogProductResponse})
    def get(self, request, name):
        product = product_get(name)
        if product is None:
            raise Http404
        body = product_summary(product)
        open_incidents = [{"kind": i.kind, "opened": i.opened, "message": i.message} for i in incidents(product).filter(closed__isnull=True)]
        body["quality"].update(open_incidents=len(open_incidents), incidents=open_incidents,
                               latest={kind: _run(run, request.user, product) for kind, run in latest_checks(product).items()})
        body["definition"] = {key: value for key, value in product.definition.items() if key not in ("digest", "file")}
        kept = product_retention(product.definition)
        body["definition"].update(retention=kept["seconds"], retention_tiers=[
            {key: tier[key] for key in ("tier", "resolution_s", "days", "since")} for tier in kept["tiers"]] if kept["tiers"] else None)
        body["versions"] = [{"version": v.version, "loaded": v.loaded, "changes": v.changes} for v in product.versions.all()[:20]]
        return Response(body)


class ProductChecksView(APIView):
    """The history of a product's checks, newest first (``kind`` to pick one; ``limit`` up to 1000)."""

    @extend_schema(parameters=[ChecksParams], responses={200: CatalogCheckRun(many=True)})
    def get(self, request, name):
        product = product_get(name)
        if product is None:
            raise Http404
        params = parse_query(request, ChecksParams)
        return Response([_run(run, request.user, product) for run in check_history(product, kind=params["kind"], limit=params["limit"])])


class RunChecksView(APIView):
    """Staff: run a product's checks now (queued for the worker)."""

    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={202: CatalogRunQueuedResponse})
    def post(self, request, name):
        from ..tasks import run_checks_task

        product = product_get(name)
        if product is None:
            raise Http404
        run_checks_task.delay(product.pk)
        return Response({"product": product.name, "queued": True}, status=202)


# ---------------------------------------------------------------------------------------------
# Incidents across products, and subscriptions to a product's incidents


class StaffWrites(permissions.BasePermission):
    message = "Everyone signed in reads incidents; only staff acknowledge, assign or resolve them."

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_authenticated and (request.method in permissions.SAFE_METHODS or user.is_staff))


def user_name(user) -> str | None:
    return user.get_username() if user is not None else None


def incident_body(incident: Incident) -> dict:
    return {"id": incident.pk, "product": incident.product.name, "product_title": incident.product.title, "kind": incident.kind,
            "state": incident.state, "opened": incident.opened, "closed": incident.closed, "message": incident.message,
            "acknowledged": incident.acknowledged, "acknowledged_by": user_name(incident.acknowledged_by),
            "assignee": user_name(incident.assignee), "resolved_by": user_name(incident.resolved_by)}


class CatalogIncidentListParams(serializers.Serializer):
    state = serializers.ChoiceField(choices=INCIDENT_STATES, required=False, default="active",
                                    error_messages={"invalid_choice": "state is one of " + ", ".join(INCIDENT_STATES)},
                                    help_text="active (open or acknowledged; the default), open (not acknowledged yet), acknowledged, "
                                              "resolved, all")
    # No default: an empty default would contradict the slug pattern in the schema.
    product = serializers.SlugField(required=False, allow_blank=True, max_length=63, help_text="a product's name")
    assignee = serializers.CharField(required=False, default="", allow_blank=True, max_length=150,
                                     help_text='a username, or "none" for the unassigned')
    limit = QueryIntegerField(min_value=1, max_value=1000, required=False, default=200)


class CatalogIncidentChange(serializers.Serializer):
    state = serializers.ChoiceField(choices=["open", "acknowledged", "resolved"], required=False,
                                    error_messages={"invalid_choice": "state is one of open, acknowledged, resolved"})
    assignee = serializers.CharField(required=False, allow_null=True, allow_blank=True, max_length=150,
                                     help_text="a staff member's username; null or empty to unassign")


class IncidentListView(APIView):
    """Incidents of every product you may see, newest first (``state``, ``product``, ``assignee`` to filter)."""

    @extend_schema(operation_id="catalog_incidents_list", summary="Incidents across products", parameters=[CatalogIncidentListParams],
                   responses={200: CatalogIncidentItem(many=True)})
    def get(self, request):
        params = parse_query(request, CatalogIncidentListParams)
        found = incident_list(request.user, state=params["state"], product=params.get("product", ""), assignee=params["assignee"])
        return Response([incident_body(incident) for incident in found[:params["limit"]]])


class IncidentDetailView(APIView):
    """One incident; staff change it: ``state`` acknowledged, resolved or open, ``assignee`` a staff member."""

    permission_classes = [StaffWrites]

    @extend_schema(summary="One incident", responses={200: CatalogIncidentItem})
    def get(self, request, pk):
        incident = incident_get(request.user, pk)
        if incident is None:
            raise Http404
        return Response(incident_body(incident))

    @extend_schema(summary="Acknowledge, assign or resolve an incident (staff)", request=CatalogIncidentChange,
                   responses={200: CatalogIncidentItem})
    def patch(self, request, pk):
        from django.contrib.auth import get_user_model

        from ..services import UNCHANGED, IncidentChangeError, change_incident

        incident = incident_get(request.user, pk)
        if incident is None:
            raise Http404
        change = CatalogIncidentChange(data=request.data)
        change.is_valid(raise_exception=True)
        values = change.validated_data
        if not values:
            raise InputError("give state (open, acknowledged, resolved) or assignee (a staff member's username)",
                             [ErrorItem(message="give state or assignee", field="state")])
        assignee = UNCHANGED
        if "assignee" in values:
            name = (values["assignee"] or "").strip()
            assignee = None
            if name:
                assignee = get_user_model().objects.filter(username=name, is_staff=True, is_active=True).first()
                if assignee is None:
                    raise InputError(f"assignee: no active staff member is named {name!r}",
                                     [ErrorItem(message=f"no active staff member is named {name!r}", field="assignee")])
        try:
            incident = change_incident(incident, actor=request.user, state=values.get("state"), assignee=assignee)
        except IncidentChangeError as exc:
            raise InputError(f"{exc.field}: {exc}", [ErrorItem(message=str(exc), field=exc.field)]) from exc
        return Response(incident_body(incident_get(request.user, incident.pk)))


class CatalogSubscription(serializers.Serializer):
    product = serializers.SlugField(max_length=63, help_text="the product's name")
    subscribed = serializers.BooleanField(help_text="true: mail me when it opens an incident; false: stop")


class SubscriptionsView(APIView):
    """The products whose new incidents are mailed to you; POST ``{"product", "subscribed"}`` to change one."""

    @extend_schema(summary="Your incident subscriptions", responses={200: CatalogSubscriptionState})
    def get(self, request):
        return Response({"products": sorted(subscribed_products(request.user)), "email": request.user.email or None})

    @extend_schema(summary="Subscribe to a product's incidents, or stop", request=CatalogSubscription, responses={200: CatalogSubscriptionState})
    def post(self, request):
        from ..selectors import visible_products
        from ..services import subscribe

        body = CatalogSubscription(data=request.data)
        body.is_valid(raise_exception=True)
        product = visible_products(request.user).filter(name=body.validated_data["product"]).first()
        if product is None:
            raise InputError("product: no such data product", [ErrorItem(message="no such data product", field="product")])
        subscribe(request.user, product, body.validated_data["subscribed"])
        return Response({"products": sorted(subscribed_products(request.user)), "email": request.user.email or None})
