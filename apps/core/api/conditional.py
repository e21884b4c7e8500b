"""Conditional answers and a rendered-payload cache for views that serve a job's *product*.

A product (a saturation cube, a telemetry cube, the rows scoring wrote) changes only when a task
refreshes it, so an answer built from it is the same until then. Such a view states a **version**
from one cheap query — after it checked that the caller may see the job — and this module does the
rest:

* ``ETag`` (a digest of the version, the view, the normalised parameters, the caller's scope and the
  representation) and ``Last-Modified`` (when the product was computed) on every answer, with
  ``Cache-Control: private, no-cache`` (the browser keeps it and asks again) and
  ``Vary: Cookie, Authorization``;
* ``304 Not Modified`` with an empty body to ``If-None-Match`` (or, without it, ``If-Modified-Since``);
* the rendered body kept in the ``products`` cache (``settings.CACHES``: local memory per process in
  the embedded default, Redis in production), so a second caller gets it without a query on the big
  rows or a read of the product file.

Nothing is served before access is checked: ``version`` runs first and raises 404 (or returns None) for
a caller who may not see the job; the cache is consulted only after it. The key holds the caller's
*scope* too (by default staff or not; per user where the answer depends on who asks).

Invalidation is by version: a refreshed product has a new one, so old entries are never read again
and age out. :func:`invalidate_job_products` also drops every answer about one job at once (a per-job
generation kept in the shared ``default`` cache, so a worker process reaches the web processes).

A DRF view::

    from apps.core.api.conditional import ConditionalProductMixin, ProductVersion

    class SeriesView(ConditionalProductMixin, APIView):
        product_params_class = SeriesParams            # parsed before the cache: bad input is a 400

        def product_version(self, request, cluster, job_id):
            # the access check (404 for a caller who may not see the job), then one .values() query on the
            # row's small fields (never a big JSON field such as JobSaturation.per_gpu)
            self.head = saturation_head(request, cluster, job_id)
            return row_version({k: self.head[k] for k in ("id", "computed", "product")},
                               job=self.head["job_id"], modified="computed")

        def product_payload(self, request, params, cluster, job_id):
            return {...}                                # only on a cache miss

        @extend_schema(parameters=[SeriesParams], responses={200: SeriesResponse})
        def get(self, request, cluster, job_id):
            return self.product_get(request, cluster=cluster, job_id=job_id)

A plain Django view calls :func:`product_response` with the same pieces and a ``render`` callable
returning bytes.
"""
from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from django.conf import settings
from django.core.cache import caches
from django.http import HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.http import http_date, parse_etags, parse_http_date_safe
from rest_framework.response import Response

from .params import parse_query

PRODUCTS_CACHE = "products"
SHARED_CACHE = "default"  # shared by every process (file cache on one host, Redis): the per-job generations
# Bump when the rendering of cached answers changes in a way versions do not capture (a deploy with
# local memory starts empty anyway; Redis keeps entries across deploys).
FORMAT_REVISION = 1
VARY = ("Cookie", "Authorization")


@dataclass(frozen=True)
class ProductVersion:
    """What identifies the product an answer is built from.

    ``tag``: changes whenever the answer may change (e.g. the row's pk, computed time and product path);
    ``modified``: when the product was made (``Last-Modified``); ``job``: the job's pk, so that
    :func:`invalidate_job_products` reaches the answer."""

    tag: str
    modified: datetime | None = None
    job: int | None = None


def row_version(row: dict, *, job: int | None = None, modified: str | None = None) -> ProductVersion:
    """A version from a row read with ``.values()`` (every small field that ends up in the answer, never a big
    JSON field): a digest of all its values, ``modified`` naming the field that says when it was made."""
    digest = hashlib.blake2b(json.dumps(row, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()
    return ProductVersion(tag=digest, modified=row.get(modified) if modified else None, job=job)


def default_scope(request) -> str:
    """Who the answer is for, as far as it can differ: staff, or any other caller allowed to see the job
    (their answers are the same once access is checked). Views whose answer depends on the user override
    ``product_scope`` (e.g. ``f"user:{request.user.pk}"``)."""
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return "anonymous"
    return "staff" if getattr(user, "is_staff", False) else "reader"


def normalized_params(params: Any) -> str:
    """Parameters as one canonical string: validated values (defaults filled in) sorted by name, or the raw
    query (a ``QueryDict``) sorted by name with its values in order."""
    if params is None:
        return ""
    if hasattr(params, "lists"):
        params = {key: values for key, values in sorted(params.lists())}
    return json.dumps(params, sort_keys=True, default=str, separators=(",", ":"))


def _generation(job: int | None) -> str:
    """The job's answer generation: changed by :func:`invalidate_job_products`. A missing entry (never set, or
    evicted from the shared cache) becomes a new random one — a miss, never a stale answer."""
    if job is None:
        return ""
    shared, key = caches[SHARED_CACHE], f"belvedere:product-generation:{job}"
    value = shared.get(key)
    if value is None:
        shared.add(key, uuid.uuid4().hex, timeout=None)
        value = shared.get(key)
    return str(value or "")


def invalidate_job_products(job_pk: int) -> None:
    """Drop every cached answer (and ETag) about the job: its product changed without a new version."""
    caches[SHARED_CACHE].set(f"belvedere:product-generation:{job_pk}", f"{time.time_ns()}-{uuid.uuid4().hex[:8]}", timeout=None)


def _not_modified(request, etag: str, last_modified: int | None) -> bool:
    """RFC 9110 13.2.2 steps 3-4 for a GET: If-None-Match (weak comparison) wins; else If-Modified-Since."""
    if request.method not in ("GET", "HEAD"):
        return False
    header = request.META.get("HTTP_IF_NONE_MATCH")
    if header:
        tags = parse_etags(header)
        bare = etag.removeprefix("W/")
        return "*" in tags or any(tag.removeprefix("W/") == bare for tag in tags)
    since = parse_http_date_safe(request.META.get("HTTP_IF_MODIFIED_SINCE", "") or "")
    return since is not None and last_modified is not None and last_modified <= since


def _headers(response: HttpResponse, etag: str, last_modified: int | None, vary: tuple[str, ...]) -> HttpResponse:
    response["ETag"] = etag
    if last_modified is not None:
        response["Last-Modified"] = http_date(last_modified)
    patch_cache_control(response, private=True, no_cache=True)
    patch_vary_headers(response, vary)
    return response


def product_response(request, *, name: str, version: ProductVersion | str, render: Callable[[], bytes],
                     params: Any = None, scope: str | None = None, content_type: str = "application/json",
                     representation: str = "", vary: tuple[str, ...] = VARY) -> HttpResponse:
    """The answer of a product view: 304 when the caller's copy is current, the cached body when another
    caller already had it rendered, else ``render()`` (bytes), kept for the next one.

    Call it only *after* checking that the caller may see the product. ``name`` identifies the view (its
    URL name); ``params`` the validated (or raw) parameters; ``scope`` who it is for (default:
    :func:`default_scope`); ``representation`` anything else that changes the bytes (media type)."""
    if isinstance(version, str):
        version = ProductVersion(tag=version)
    scope = default_scope(request) if scope is None else scope
    material = "\x1f".join([str(FORMAT_REVISION), name, version.tag, _generation(version.job), normalized_params(params),
                            scope, representation or content_type])
    digest = hashlib.blake2b(material.encode(), digest_size=16).hexdigest()
    etag = f'"{digest}"'
    modified = int(version.modified.timestamp()) if version.modified is not None else None
    if _not_modified(request, etag, modified):
        return _headers(HttpResponseNotModified(), etag, modified, vary)
    cache, key = caches[PRODUCTS_CACHE], f"belvedere:product:{digest}"
    body = cache.get(key)
    if body is None:
        body = render()
        if isinstance(body, str):
            body = body.encode()
        if len(body) <= settings.PRODUCTS_CACHE_ITEM_MAX_BYTES:
            cache.set(key, body, timeout=settings.PRODUCTS_CACHE_SECONDS)
    return _headers(HttpResponse(body, content_type=content_type), etag, modified, vary)


class ConditionalProductMixin:
    """For a DRF ``APIView`` serving a product: implement ``product_version`` and ``product_payload`` and let
    ``get`` return ``self.product_get(request, **kwargs)`` (see the module docstring).

    Order per request: authentication (DRF) → ``product_version`` (access check, one cheap query; raise
    ``Http404``/``InputError`` for a caller who may not see it) → ``product_params_class`` parsed
    (400 naming the parameter) → 304 or the cached body → ``product_payload`` on a miss. Answers in
    another representation than JSON (the browsable API) skip the cache."""

    product_params_class = None  # a Serializer for the query parameters, or None

    def product_version(self, request, **kwargs) -> ProductVersion | str | None:
        raise NotImplementedError

    def product_payload(self, request, params: dict, **kwargs):
        raise NotImplementedError

    def product_scope(self, request, **kwargs) -> str:
        return default_scope(request)

    def product_name(self, request) -> str:
        match = getattr(request, "resolver_match", None)
        return (match.view_name if match and match.view_name else "") or f"{type(self).__module__}.{type(self).__qualname__}"

    def product_get(self, request, **kwargs):
        version = self.product_version(request, **kwargs)
        params = parse_query(request, self.product_params_class) if self.product_params_class else {}
        renderer = getattr(request, "accepted_renderer", None)
        if version is None or getattr(renderer, "format", None) != "json":
            return Response(self.product_payload(request, params, **kwargs))
        media_type = renderer.media_type + (f"; charset={renderer.charset}" if renderer.charset else "")
        return product_response(
            request, name=self.product_name(request), version=version, params=params,
            scope=self.product_scope(request, **kwargs), content_type=media_type,
            representation=request.accepted_media_type or media_type, vary=VARY + ("Accept",),
            render=lambda: renderer.render(self.product_payload(request, params, **kwargs), request.accepted_media_type,
                                           self.get_renderer_context()))
