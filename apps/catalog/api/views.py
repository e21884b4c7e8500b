"""Catalogue endpoints under /api/v1/catalog/: products with their current quality, and the checks' history."""
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.params import QueryIntegerField, parse_query
from apps.core.api.permissions import IsStaff

from ..models import CheckRun, DataProduct
from ..selectors import check_history, incidents, latest_checks, measured_for, product_get, products
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
