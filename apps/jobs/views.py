"""Job list and job page."""
import json
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import Http404
from django.urls import reverse
from django.views.generic import TemplateView

from apps.topology.figures import system_figure
from apps.topology.placement import UnknownNodesError
from apps.topology.selectors import node_states, topology_current, topology_index_current

from .filtersets import SORTABLE, JobFilterSet
from .models import JobStateChoices
from .selectors import job_get_for_user, job_list_for_user

PAGE_SIZE = 50
COLUMNS = [("job", "Job"), ("name", "Name"), ("user", "User"), ("account", "Account"), ("state", "State"),
           ("nodes", "Nodes"), ("submitted", "Submitted"), ("started", "Started"), ("ended", "Ended"),
           ("saturation", "Saturation")]


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
        # The saturation app builds on jobs: ask it for this page's scores only (one query).
        from apps.saturation.selectors import saturation_by_job

        results = saturation_by_job([job.pk for job in page.object_list])
        for job in page.object_list:
            job.saturation_result = results.get(job.pk)
        ordering = params.get("ordering", "-submitted")

        def sort_link(key: str) -> str:
            query = params.copy()
            query["ordering"] = key if ordering != key else f"-{key}"
            query.pop("page", None)
            return "?" + query.urlencode()

        without_page = params.copy()
        without_page.pop("page", None)
        context.update(
            filterset=filterset,
            page=page,
            scope=scope,
            ordering=ordering,
            columns=[{"key": key, "label": label, "link": sort_link(key),
                      "sorted": "ascending" if ordering == key else "descending" if ordering == f"-{key}" else "none"}
                     for key, label in COLUMNS if key in SORTABLE],
            query_without_page=without_page.urlencode(),
            states=JobStateChoices.choices,
            selected_states=params.getlist("state"),
        )
        return context


class JobDetailView(TemplateView):
    template_name = "jobs/detail.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        job = job_get_for_user(self.request.user, kwargs["cluster"], kwargs["job_id"])
        if job is None:
            raise Http404("no such job")
        context["job"] = job
        context["steps"] = list(job.steps.all())
        context["topology_url"] = reverse("topology:index") + "?" + urlencode({"nodes": job.nodes}) if job.nodes else None
        context["api_url"] = reverse("jobs-api:job-detail", args=[job.cluster.name, job.job_id])
        placement = None
        if job.node_list:
            topology = topology_current()
            try:
                placement = topology_index_current().placement(job.node_list)
            except UnknownNodesError as exc:
                context["placement_problem"] = f"{exc}: the topology does not know all nodes of this job yet."
            else:
                figure = system_figure(topology, states=node_states(), highlight=set(job.node_list),
                                       highlight_label="this job's nodes", colour_by="overlay",
                                       groups=[int(group) for group in placement.nodes_per_group])
                context.update(placement=placement, figure_data=json.loads(figure.to_json()))
        # The ranks app builds on jobs; ask it for its section only here, to keep imports one-way.
        from apps.ranks.views import ranks_context

        context.update(ranks_context(job, self.request.GET, topology_current(), placement))
        from apps.telemetry.views import telemetry_context

        context.update(telemetry_context(job, self.request.GET))
        from apps.saturation.views import saturation_context

        context.update(saturation_context(job, self.request.GET))
        from apps.vetting.views import vetting_context

        context.update(vetting_context(job))
        return context
