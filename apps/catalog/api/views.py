"""Catalogue endpoints under /api/v1/catalog/: products with their current quality, and the checks' history."""
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.exceptions import InputError
from apps.core.api.permissions import IsStaff

from ..models import CheckRun, DataProduct
from ..selectors import check_history, incidents, latest_checks, measured_for, product_get, products


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


class ProductListView(APIView):
    """Data products, with search (``q``: words in name, title, purpose, tags, columns) and filters."""

    @extend_schema(operation_id="catalog_products_list",
                   parameters=[OpenApiParameter("q", str), OpenApiParameter("domain", str), OpenApiParameter("owner", str),
                               OpenApiParameter("state", str, enum=["fresh", "aging", "stale", "unknown"])],
                   responses={200: {"type": "array", "items": {"type": "object"}}})
    def get(self, request):
        params = request.query_params
        state = params.get("state", "")
        if state and state not in ("fresh", "aging", "stale", "unknown"):
            raise InputError("state is one of fresh, aging, stale, unknown")
        found = products(q=params.get("q", "")[:200], domain=params.get("domain", ""), owner=params.get("owner", ""), state=state)
        return Response([product_summary(product) for product in found])


class ProductDetailView(APIView):
    """One product: its declaration (schema with units, source, sample query, targets) and its current quality —
    the last run of each check with what it measured, open incidents, the next run."""

    @extend_schema(responses={200: {"type": "object"}})
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

    @extend_schema(parameters=[OpenApiParameter("kind", str, enum=["freshness", "coverage", "gaps", "drift"]),
                               OpenApiParameter("limit", int)], responses={200: {"type": "array", "items": {"type": "object"}}})
    def get(self, request, name):
        product = product_get(name)
        if product is None:
            raise Http404
        kind = request.query_params.get("kind", "")
        if kind and kind not in ("freshness", "coverage", "gaps", "drift"):
            raise InputError("kind is one of freshness, coverage, gaps, drift")
        limit = request.query_params.get("limit", "100")
        if not limit.isdigit() or not 1 <= int(limit) <= 1000:
            raise InputError("limit is a whole number from 1 to 1000")
        return Response([_run(run, request.user, product) for run in check_history(product, kind=kind, limit=int(limit))])


class RunChecksView(APIView):
    """Staff: run a product's checks now (queued for the worker)."""

    permission_classes = [IsStaff]

    @extend_schema(request=None, responses={202: {"type": "object"}})
    def post(self, request, name):
        from ..tasks import run_checks_task

        product = product_get(name)
        if product is None:
            raise Http404
        run_checks_task.delay(product.pk)
        return Response({"product": product.name, "queued": True}, status=202)
