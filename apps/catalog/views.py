"""Catalogue pages: the list with search and filters, a product's page, and the explorer (a Dash app served
through this process, so it shares the portal's sign-in)."""
import io
import json

from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import TemplateView

from .queries import resolve_times
from .selectors import (INCIDENT_STATES, assignable_staff, check_history, facets, incident_list, incidents, latest_checks, measured_for,
                        product_get, product_retention, products, sample_query_for,
                        subscribed_products)


def resolve_query(text: str, now=None) -> str:
    """A sample query's ``{now}`` and ``{now-1h}`` become UTC times, so it can be copied and run as it is."""
    return resolve_times(text, now or timezone.now())


class CatalogIndexView(TemplateView):
    template_name = "catalog/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        params = self.request.GET
        chosen = {key: params.get(key, "")[:200] for key in ("q", "domain", "owner", "state")}
        found = list(products(**chosen))
        for product in found:
            product.retention = product_retention(product.definition)
        context.update(products=found, chosen=chosen, facets=facets())
        return context


class ProductView(TemplateView):
    template_name = "catalog/product.html"

    def get_context_data(self, **kwargs):
        from .figures import gap_timeline

        context = super().get_context_data(**kwargs)
        product = product_get(kwargs["name"])
        if product is None:
            raise Http404("no such data product")
        latest = latest_checks(product)
        for run in latest.values():  # shown, never saved: member lists cut to the jobs the reader may see
            run.measured = measured_for(self.request.user, product, run)
        gaps = latest.get("gaps")
        timeline = None
        if gaps is not None and gaps.measured.get("gaps"):
            timeline = json.loads(gap_timeline(gaps.measured["gaps"], start=gaps.measured["start"], end=gaps.measured["end"]).to_json())
        definition = product.definition
        sample = definition.get("sample_query") or {}
        runnable = sample_query_for(self.request.user, product)
        recent_incidents = list(incidents(product)[:20])
        context.update(product=product, d=definition, latest=latest, history=list(check_history(product, limit=60)),
                       incidents=recent_incidents, versions=list(product.versions.all()[:10]),
                       sample_query=runnable.api, sample_scope=runnable.scope, sample_declared=bool(sample.get("api")),
                       sample_description=sample.get("description", ""),
                       subscribed=product.name in subscribed_products(self.request.user),
                       timeline=timeline, coverage=latest.get("coverage"), freshness=latest.get("freshness"),
                       explorer=definition["source"]["kind"] == "telemetry", retention=product_retention(definition),
                       node_members=(definition["slo"].get("coverage") or {}).get("population") in ("topology_gpus", "topology_nodes",
                                                                                                  "running_job_gpus"),
                       open_incidents=[incident for incident in recent_incidents if incident.closed is None])
        return context


class IncidentsView(TemplateView):
    """Incidents of every product the reader may see; staff acknowledge, assign and resolve them in place."""

    template_name = "catalog/incidents.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        state = self.request.GET.get("state", "active")
        state = state if state in INCIDENT_STATES else "active"
        product = self.request.GET.get("product", "")[:63]
        found = list(incident_list(self.request.user, state=state, product=product)[:300])
        context.update(incidents=found, state=state, states=INCIDENT_STATES, product_filter=product,
                       staff=list(assignable_staff()) if self.request.user.is_staff else [],
                       subscribed=sorted(subscribed_products(self.request.user)),
                       counts={"open": sum(1 for i in found if i.state == "open"),
                               "acknowledged": sum(1 for i in found if i.state == "acknowledged"),
                               "resolved": sum(1 for i in found if i.state == "resolved")})
        return context


class ExplorerView(TemplateView):
    """The portal page around the Dash app (breadcrumbs, the product's name, the frame)."""

    template_name = "catalog/explorer.html"

    def get_context_data(self, **kwargs):
        from urllib.parse import urlencode

        from .explorer import PREFIX

        context = super().get_context_data(**kwargs)
        keep = {key: value[:500] for key, value in self.request.GET.items() if key in ("product", "fields", "window", "group_by", "stat",
                                                                                     "hosts", "job")}
        context.update(app_url=f"{PREFIX}?{urlencode(keep)}", product=product_get(keep.get("product", "")))
        return context


HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers", "transfer-encoding", "upgrade",
              "content-length"}


@csrf_exempt  # Dash posts its callbacks as JSON without Django's token; they only read, and need a session cookie (SameSite)
def explorer_app(request, path=""):
    """Hand the request to the Dash (Flask) app in this process, with the signed-in user set for its callbacks."""
    from csp.decorators import csp_update
    from dash.exceptions import DependencyException

    from .explorer import CURRENT_USER, dash_app

    # A path that climbs ('..'), or names a file Dash does not serve, is not the explorer's: 404, not Dash's error.
    if any(part in (".", "..") or "\\" in part or "\x00" in part for part in request.path.split("/")):
        raise Http404("no such file of the explorer")
    app = dash_app()
    environ = dict(request.META)
    body = request.body
    environ.update({"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), "PATH_INFO": request.path, "SCRIPT_NAME": ""})
    captured = {}

    def start_response(status, headers, exc_info=None):
        captured["status"], captured["headers"] = status, headers
        return lambda data: None

    token = CURRENT_USER.set(request.user)
    try:
        chunks = app.server.wsgi_app(environ, start_response)
        content = b"".join(chunks)
        if hasattr(chunks, "close"):
            chunks.close()
    except DependencyException as exc:  # a component file that is not one of the registered packages' files
        raise Http404("no such file of the explorer") from exc
    finally:
        CURRENT_USER.reset(token)
    response = HttpResponse(content, status=int(captured["status"].split()[0]))
    for name, value in captured["headers"]:
        if name.lower() not in HOP_BY_HOP:
            response[name] = value
    # Dash's page starts its renderer with one inline script; allow exactly that script by its hash.
    return csp_update({"script-src": app.csp_hashes()})(lambda: response)()

