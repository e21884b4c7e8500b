"""Job list and job page."""
import json

from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.generic import TemplateView

from apps.core.api.conditional import ProductVersion, product_response
from apps.core.job_columns import job_columns
from apps.core.panels import job_panel, job_panels

from .filtersets import JobFilterSet
from .models import JobStateChoices
from .pagecache import cached_first_screen, panel_html
from .selectors import job_get_for_user, job_list_for_user
from .tables import JobTable

PAGE_SIZE = 50


class JobListView(TemplateView):
    template_name = "jobs/list.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        request = self.request
        params = request.GET.copy()
        # "My jobs" unless the user asks for every job they may see; staff start with all jobs.
        scope = params.get("scope") or ("all" if request.user.is_staff else "mine")
        queryset = job_list_for_user(request.user)
        if scope == "mine":
            queryset = queryset.filter(user_name=request.user.get_username())
        filterset = JobFilterSet(params, queryset=queryset)
        jobs = filterset.qs if filterset.is_valid() else queryset.none()
        if not params.get("ordering"):
            jobs = jobs.order_by("-submit_time", "-job_id")
        page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
        ordering = params.get("ordering", "-submitted")
        # Columns higher apps registered (the saturation score) load this page's values in one call each.
        table = JobTable(list(page.object_list), columns=job_columns(), order_by=ordering)
        without_page = params.copy()
        without_page.pop("page", None)
        context.update(
            filterset=filterset,
            page=page,
            table=table,
            scope=scope,
            ordering=ordering,
            query_without_page=without_page.urlencode(),
            states=JobStateChoices.choices,
            selected_states=params.getlist("state"),
        )
        return context


class JobDetailView(TemplateView):
    """The job page's shell: the first screen (state, data, verdict, findings) and the registered panels.

    Cheap by construction: panels render words and controls; figures load after the first paint."""

    template_name = "jobs/detail.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        job = _job_or_404(self.request, kwargs)
        panels = [{"key": panel.key, "title": panel.title, "html": panel_html(panel, job, self.request)}
                  for panel in job_panels()]
        first = cached_first_screen(job)
        context.update(job=job, panels=panels, first=first.summary, now=first.computed,
                       live_seconds=settings.JOB_PAGE_LIVE_SECONDS,
                       summary_url=reverse("jobs:summary", args=[job.cluster.name, job.job_id]),
                       api_url=reverse("jobs-api:job-detail", args=[job.cluster.name, job.job_id]))
        return context


def _job_or_404(request, kwargs):
    job = job_get_for_user(request.user, kwargs["cluster"], kwargs["job_id"])
    if job is None:
        raise Http404("no such job")
    return job


@require_GET
def job_summary(request, cluster, job_id):
    """The first screen alone, for the page's live update (it replaces the verdict in place)."""
    job = _job_or_404(request, {"cluster": cluster, "job_id": job_id})
    first = cached_first_screen(job)
    return render(request, "jobs/_first_screen.html", {"job": job, "first": first.summary, "now": first.computed,
                                                            "live_seconds": settings.JOB_PAGE_LIVE_SECONDS})


@require_GET
def panel_figure(request, cluster, job_id, panel, name):
    """One figure of a registered panel as Plotly JSON, with ETag/Last-Modified when the panel versions its data."""
    job = _job_or_404(request, {"cluster": cluster, "job_id": job_id})
    registered = job_panel(panel)
    if registered is None or name not in registered.figures:
        raise Http404("no such figure")
    version = registered.version(job) if registered.version else None
    render = lambda: json.dumps(registered.figures[name](job, request.GET)).encode()  # noqa: E731
    if not version:  # data that changes on its own (node states): drawn on every request
        return HttpResponse(render(), content_type="application/json", headers={"Cache-Control": "private, no-cache"})
    return product_response(request, name=f"jobs:panel-figure:{panel}/{name}",
                            version=ProductVersion(version, job=job.pk), params=request.GET, render=render)
