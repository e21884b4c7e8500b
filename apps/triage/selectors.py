"""Reads of the triage app: the sources a sync reads (each app's own selectors where they exist) and the
inbox's lists and counts. The inbox is staff-only; its pages and API check ``is_staff`` before calling here."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Count, Max, QuerySet, Sum

from apps.catalog.models import Incident
from apps.jobs.choices import JobStateChoices
from apps.namespaces.choices import NamespaceRequestStatusChoices
from apps.namespaces.models import NamespaceRequest
from apps.saturation.choices import JobSaturationStatusChoices
from apps.saturation.models import JobSaturation
from apps.vetting.selectors import open_recommendations, repeat_offenders, triage_nodes

from .choices import TriageItemKindChoices, TriageItemStateChoices
from .inbox import OPEN_STATES
from .models import TriageItem


# --- the sources -----------------------------------------------------------------------------------
def running_scored_jobs() -> QuerySet[JobSaturation]:
    """The ready saturation records of running jobs (score, idle GPUs, per-GPU rows, stragglers)."""
    return (JobSaturation.objects.filter(job__state=JobStateChoices.RUNNING, status=JobSaturationStatusChoices.STATUS_READY)
            .select_related("job", "job__cluster"))


def emails_of(usernames) -> dict[str, str]:
    """username -> e-mail address, for the users that have one."""
    return dict(get_user_model().objects.filter(username__in=set(usernames)).exclude(email="").values_list("username", "email"))


def vetting_state():
    """Open and acknowledged recommendations of the vetting rules, the nodes not plainly healthy, and the
    repeat offenders' failed runs in 30 days (host -> count)."""
    failures = {row["host"]: row["failures"] for row in repeat_offenders(days=30, limit=1000)}
    return list(open_recommendations()), triage_nodes(), failures


def namespace_requests_waiting() -> QuerySet[NamespaceRequest]:
    return (NamespaceRequest.objects.filter(status=NamespaceRequestStatusChoices.WAITING)
            .select_related("project", "requested_by").order_by("created"))


def catalog_incidents_open() -> QuerySet[Incident]:
    return Incident.objects.filter(closed__isnull=True).select_related("product").order_by("opened")


# --- the inbox -------------------------------------------------------------------------------------
def triage_items(*, kind: str = "", state: str = "") -> QuerySet[TriageItem]:
    """The ranked list: ``state`` one state, ``open`` (default: new and acknowledged) or ``all``."""
    queryset = TriageItem.objects.select_related("job", "job__cluster", "assignee")
    if kind:
        queryset = queryset.filter(kind=kind)
    if state in ("", "open"):
        queryset = queryset.filter(state__in=OPEN_STATES)
    elif state != "all":
        queryset = queryset.filter(state=state)
    return queryset.order_by(*TriageItem._meta.ordering)


def open_item_count() -> int:
    """How many items wait for a person (new or acknowledged): the staff page's "what waits" count."""
    return TriageItem.objects.filter(state__in=OPEN_STATES).count()


def triage_item_get(pk: int) -> TriageItem | None:
    return TriageItem.objects.select_related("job", "job__cluster", "assignee").filter(pk=pk).first()


def triage_counts() -> dict:
    """Counts per kind and state, every kind and state present (zeros included), and the totals."""
    rows = TriageItem.objects.order_by().values("kind", "state").annotate(n=Count("id"), lost=Sum("gpu_hours_lost"), seen=Max("last_seen"))
    table = {kind: {state: 0 for state in TriageItemStateChoices.values} for kind in TriageItemKindChoices.values}
    lost_open, synced_at = 0.0, None
    for row in rows:
        synced_at = max(filter(None, (synced_at, row["seen"])), default=None)
        table.setdefault(row["kind"], {state: 0 for state in TriageItemStateChoices.values})[row["state"]] = row["n"]
        if row["state"] in OPEN_STATES:
            lost_open += row["lost"] or 0.0
    totals = {state: sum(by_state[state] for by_state in table.values()) for state in TriageItemStateChoices.values}
    labels = dict(TriageItemKindChoices.choices)
    open_by_kind = [(kind, labels.get(kind, kind), sum(by_state[state] for state in OPEN_STATES)) for kind, by_state in table.items()]
    return {"by_kind": table, "totals": totals, "open": sum(totals[state] for state in OPEN_STATES),
            "open_by_kind": [row for row in open_by_kind if row[2]], "gpu_hours_lost_open": round(lost_open, 1),
            "synced_at": synced_at,  # the last sync that found anything
            "rows": [(kind, labels.get(kind, kind), [(state, by_state[state]) for state in TriageItemStateChoices.values])
                     for kind, by_state in table.items()]}


def staff_usernames() -> list[str]:
    """Who an item may be assigned to."""
    return list(get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
                .values_list("username", flat=True))
