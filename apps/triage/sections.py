"""The triage inbox on the staff page (apps.core.page_sections): the page's verdict, first and full width.

It reads what the last sync stored (the counts, two slices of the list, the staff, the last sync's run), never the sources. ``register()`` is
called from TriageConfig.ready().
"""
from __future__ import annotations

from django.urls import reverse

from apps.core.models import TaskRun
from apps.core.page_sections import PageSection, register_page_section

from .choices import TriageItemKindChoices, TriageItemStateChoices
from .presenting import rows
from .selectors import staff_usernames, triage_counts, triage_items

SECTION_WASTEFUL = 8  # the staff page shows the top wasteful jobs, then folds the rest of them into one line,
SECTION_OTHERS = 30  # then the other kinds in rank; /staff/triage/ has everything


def last_sync():
    return TaskRun.objects.filter(name="triage.sync_inbox").order_by("-created").first()


def inbox_context(request, *, kind: str = "", state: str = "open", limit: int | None = None) -> dict:
    """The ranked list (``limit`` items at most), or with no filter and no limit the staff page's cut: the top
    wasteful jobs, one line for the other wasteful ones, then the other kinds."""
    counts = triage_counts()
    name = request.user.get_full_name() or request.user.get_username()
    if limit is None and not kind and state == "open":
        wasteful = list(triage_items(kind=TriageItemKindChoices.WASTEFUL_JOB)[:SECTION_WASTEFUL])
        others = list(triage_items().exclude(kind=TriageItemKindChoices.WASTEFUL_JOB)[:SECTION_OTHERS])
        listed = rows(wasteful, staff_name=name)
        open_wasteful = next((n for k, _, n in counts["open_by_kind"] if k == TriageItemKindChoices.WASTEFUL_JOB), 0)
        if open_wasteful > len(wasteful):
            shown_lost = sum(item.gpu_hours_lost or 0.0 for item in wasteful)
            listed.append({"fold": open_wasteful - len(wasteful), "lost": max(0.0, counts["gpu_hours_lost_open"] - shown_lost),
                           "href": reverse("triage:inbox") + f"?kind={TriageItemKindChoices.WASTEFUL_JOB}"})
        listed += rows(others, staff_name=name)
        more = counts["open"] - len(wasteful) - len(others) - (open_wasteful - len(wasteful))
    else:
        items = triage_items(kind=kind, state=state)
        listed = rows(list(items[:limit] if limit else items), staff_name=name)
        more = 0
    return {"triage_rows": listed, "triage_counts": counts, "triage_sync": last_sync(),
            "triage_staff": staff_usernames(), "triage_me": request.user.get_username(),
            "triage_state_choices": TriageItemStateChoices.choices, "triage_more": max(0, more)}


def staff_inbox(request) -> dict:
    return inbox_context(request)


def register() -> None:
    register_page_section(PageSection(page="staff", key="triage", order=0, template="triage/_staff_inbox.html",
                                      context=staff_inbox))
