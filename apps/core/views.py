"""Pages and endpoints that belong to the portal as a whole."""
import logging

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.mixins import UserPassesTestMixin
from django.http import JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_safe
from django.views.generic import TemplateView

from . import statuses
from .demo_logins import demo_logins
from .demo_progress import READY, read_progress
from .readiness import readiness_report
from .models import Heartbeat, TaskRun
from .page_sections import page_sections
from .waiting import waiting_entries
from .waiting_counts import read_counts, verdict

logger = logging.getLogger(__name__)


def rendered_sections(page: str, request) -> list[dict]:
    """The sections other apps registered for ``page`` (apps.core.page_sections), rendered."""
    return [{"key": section.key, "half": section.half, "order": section.order,
             "html": render_to_string(section.template, section.context(request), request=request)}
            for section in page_sections(page)]


class HomeView(TemplateView):
    template_name = "core/home.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sections"] = rendered_sections("home", self.request)
        return context


class CapabilityView(TemplateView):
    """Landing page of a capability. Each app's index view subclasses it with its template."""

    template_name = "core/capability.html"


class StaffRequiredMixin(UserPassesTestMixin):
    raise_exception = True

    def test_func(self) -> bool:
        return self.request.user.is_staff


def waiting_for_staff(request) -> dict:
    """The registered counts of what waits (apps.core.waiting), each with the address of its list."""
    def failed(entry, error):
        logger.warning("waiting count %s failed", entry.key, exc_info=error)

    items = []
    for item in read_counts(waiting_entries(), request, on_error=failed):
        try:
            url = reverse(item.url_name) + item.url_query
        except NoReverseMatch:
            logger.warning("waiting count %s names no page: %s", item.key, item.url_name)
            url = ""
        items.append({"item": item, "url": url})
    counts = [entry["item"] for entry in items]
    return {"items": items, "verdict": verdict(counts),
            "total": sum(item.count for item in counts if item.known),
            "unknown": sum(1 for item in counts if not item.known)}


class StaffView(StaffRequiredMixin, TemplateView):
    template_name = "core/staff.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        # Readiness is fetched by the page itself (static/js/belvedere.js): the broker round-trip
        # can take seconds and must not hold up the page. Clusters, people and projects are the
        # sections the jobs and accounts apps register.
        context.update(
            waiting=waiting_for_staff(self.request),
            status_vocabulary=statuses.vocabulary(),
            sections=rendered_sections("staff", self.request),
            heartbeats=Heartbeat.objects.order_by("name"),
            task_runs=TaskRun.objects.select_related("requested_by")[:20],
        )
        return context


@login_not_required
@require_safe  # GET and HEAD: load balancers and uptime checks often ask with HEAD
@never_cache
def healthz(request):
    """Liveness: the process serves requests. Touches nothing else, so it stays cheap."""
    return JsonResponse({"status": "ok"})


@login_not_required
@require_safe
@never_cache
def readyz(request):
    """Readiness: database, a broker round-trip answered by a worker, and app-specific checks."""
    report, ready = readiness_report()
    return JsonResponse(report, status=200 if ready else 503)


@login_not_required
@require_GET
@never_cache
def demo_build(request):
    """How far the demo build has come (apps/core/demo_progress.py), for the progress bar the login and home
    pages show while ``make run`` builds it; with the logins to use once it is ready. No demo in production."""
    if settings.BELVEDERE_PROFILE == "production":
        return _error_response(request, 404)
    progress = read_progress(settings.DEMO_PROGRESS_FILE)
    if progress is None:
        return JsonResponse({"state": "none", "detail": "no demo build has run here (python manage.py demo builds one)"})
    answer = progress.as_json()
    if progress.state == READY:
        answer["logins"] = [{"role": login.role, "username": login.username, "password": login.password}
                            for login in demo_logins()]
    return JsonResponse(answer)


# ---------------------------------------------------------------------------------------------
# Error handlers: JSON in the common error format under /api/, friendly pages elsewhere.
# ---------------------------------------------------------------------------------------------
_ERROR_TEXT = {
    400: "The request could not be understood.",
    403: "You do not have permission to see this.",
    404: "There is nothing at this address, or it is not visible to you.",
    500: "Something went wrong on our side. The error has been logged.",
}


def _error_response(request, status_code: int, detail: str | None = None):
    detail = detail or _ERROR_TEXT[status_code]
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail, "errors": []}, status=status_code)
    return render(request, "core/error.html", {"status_code": status_code, "detail": detail}, status=status_code)


def bad_request(request, exception=None):
    detail = None
    if exception is not None and exception.__class__.__name__ == "RequestDataTooBig":
        detail = "The request body is larger than this server accepts."
    return _error_response(request, 400, detail)


def permission_denied(request, exception=None):
    return _error_response(request, 403)


def page_not_found(request, exception=None):
    return _error_response(request, 404)


def server_error(request):
    return _error_response(request, 500)
