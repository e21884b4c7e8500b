"""The triage inbox on the staff page (apps.core.page_sections): the page's verdict, first and full width.

It reads what the last sync stored (two queries and the last sync's run), never the sources. ``register()`` is
called from TriageConfig.ready().
"""
from __future__ import annotations

from apps.core.models import TaskRun
from apps.core.page_sections import PageSection, register_page_section

from .choices import TriageItemStateChoices
from .presenting import rows
from .selectors import staff_usernames, triage_counts, triage_items

SECTION_ITEMS = 15  # the staff page shows the top of the ranked list; /staff/triage/ has it all


def last_sync():
    return TaskRun.objects.filter(name="triage.sync_inbox").order_by("-created").first()


def inbox_context(request, *, kind: str = "", state: str = "open", limit: int | None = SECTION_ITEMS) -> dict:
    items = triage_items(kind=kind, state=state)
    items = list(items[:limit] if limit else items)
    counts = triage_counts()
    name = request.user.get_full_name() or request.user.get_username()
    return {"triage_rows": rows(items, staff_name=name), "triage_counts": counts, "triage_sync": last_sync(),
            "triage_staff": staff_usernames(), "triage_me": request.user.get_username(),
            "triage_state_choices": TriageItemStateChoices.choices,
            "triage_more": counts["open"] - len(items) if (state == "open" and not kind) else 0}


def staff_inbox(request) -> dict:
    return inbox_context(request)


def register() -> None:
    register_page_section(PageSection(page="staff", key="triage", order=0, template="triage/_staff_inbox.html",
                                      context=staff_inbox))
