"""Pages of the triage app (staff only): the inbox with filters, the plain-form fallback of an item's state
change, and "refresh now" (enqueues the sync)."""
import re

from django.contrib import messages
from django.http import HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import View
from django.views.generic import TemplateView

from apps.core.views import StaffRequiredMixin

from .api.serializers import TriageListParams, TriageUpdateSerializer
from .choices import TriageItemKindChoices, TriageItemStateChoices
from .models import TriageItem
from .sections import inbox_context
from .services import TriageError, triage_update

PAGE_ITEMS = 500  # the API's limit too
NAIVE_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?")  # what <input type="datetime-local"> posts


def _back(request) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return reverse("triage:inbox")


class InboxView(StaffRequiredMixin, TemplateView):
    template_name = "triage/inbox.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        params = TriageListParams(data=self.request.GET)
        if params.is_valid():
            kind, state, errors = params.validated_data.get("kind", ""), params.validated_data.get("state", "open"), {}
        else:
            kind, state, errors = "", "open", params.errors
        context.update(inbox_context(self.request, kind=kind, state=state, limit=PAGE_ITEMS), kind=kind, state=state,
                       filter_errors=errors, kinds=TriageItemKindChoices.choices,
                       states=[("open", "open (new and acknowledged)"), *TriageItemStateChoices.choices, ("all", "all")])
        return context


class ItemChangeView(StaffRequiredMixin, View):
    """POST state (acknowledged, resolved, muted, new), assignee, muted_until, note: the form fallback of the
    API's PATCH. GET goes to the item in the inbox."""

    def get(self, request, pk):
        item = get_object_or_404(TriageItem, pk=pk)
        return HttpResponseRedirect(reverse("triage:inbox") + f"?state=all#triage-item-{item.pk}")

    def post(self, request, pk):
        item = get_object_or_404(TriageItem, pk=pk)
        data = {name: request.POST[name] for name in ("state", "assignee", "muted_until", "note") if request.POST.get(name)}
        if NAIVE_MINUTE.fullmatch(data.get("muted_until", "")):  # the form's datetime-local field is labelled UTC
            data["muted_until"] += "Z"
        serializer = TriageUpdateSerializer(data=data)
        if not serializer.is_valid():
            problems = "; ".join(f"{field}: {' '.join(str(m) for m in errors)}" for field, errors in serializer.errors.items())
            messages.error(request, f"{item.title}: not changed ({problems})")
            return HttpResponseRedirect(_back(request))
        values = serializer.validated_data
        try:
            item = triage_update(item, request.user, state=values["state"], assignee=values.get("assignee"),
                                 muted_until=values.get("muted_until"), note=values.get("note", ""))
        except TriageError as exc:
            messages.error(request, f"{item.title}: not changed ({exc.field}: {exc})")
        else:
            messages.success(request, f"{item.title}: {item.get_state_display()}")
        return HttpResponseRedirect(_back(request))


class RefreshView(StaffRequiredMixin, View):
    """Enqueue the sync now (beat runs it every TRIAGE_SYNC_SECONDS anyway)."""

    def get(self, request):
        return HttpResponseRedirect(reverse("triage:inbox"))

    def post(self, request):
        from .tasks import sync_inbox_task

        try:
            sync_inbox_task.delay()
        except Exception as exc:  # the broker is down: say so, the page still works
            text, ok = f"could not queue the sync: {exc}", False
        else:
            text, ok = "sync queued: the inbox updates when a worker has read the sources", True
        if request.headers.get("Accept", "").startswith("application/json"):
            return JsonResponse({"queued": ok, "message": text}, status=200 if ok else 503)
        (messages.success if ok else messages.error)(request, text)
        return HttpResponseRedirect(_back(request))
