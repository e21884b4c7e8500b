"""What the inbox shows for an item: its actions (open the job, write to its user, dry-run drain, approve),
shared by the staff page's section and the inbox page."""
from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from .choices import TriageItemKindChoices as Kind
from .inbox import mailto, prepared_mail


def item_actions(item, *, staff_name: str = "") -> list[dict]:
    """``[{"kind": "link"|"mail"|"drain", "label", "href", ...}]`` in the order they are offered."""
    data = item.data or {}
    actions = []
    if item.kind in (Kind.WASTEFUL_JOB, Kind.STRAGGLER) and item.url:
        actions.append({"kind": "link", "label": "Open the job", "href": item.url})
        if item.kind == Kind.WASTEFUL_JOB:
            subject, body = prepared_mail(job_label=data.get("job", ""), job_name=data.get("job_name", ""),
                                          url=settings.SITE_URL.rstrip("/") + item.url, lost=item.gpu_hours_lost or 0.0,
                                          hours=float(data.get("hours") or 0.0), gpus=int(data.get("gpus") or 0),
                                          idle_gpus=int(data.get("idle_gpus") or 0), score=data.get("score"),
                                          limiter=data.get("limiter") or "", staff_name=staff_name)
            actions.append({"kind": "mail", "label": f"Write to {data.get('user') or 'the user'}",
                            "href": mailto(data.get("email", ""), subject, body), "subject": subject})
    elif item.kind == Kind.FAILING_NODE:
        host = data.get("host", "")
        if data.get("drain") and settings.VETTING_ACTIONS_DRY_RUN:
            actions.append({"kind": "drain", "label": "Dry-run drain", "host": host,
                            "href": reverse("vetting-api:node-action", args=[host]),
                            "reason": (item.detail or item.title)[:200]})
        actions.append({"kind": "link", "label": "Node timeline and actions", "href": item.url})
    elif item.kind == Kind.NODE_FAULT:
        actions.append({"kind": "link", "label": "Node timeline and actions", "href": item.url})
        for job in (data.get("jobs") or [])[:1]:
            actions.append({"kind": "link", "label": f"Open {job['job']}", "href": job["url"]})
    elif item.kind == Kind.BAD_SWITCH:
        drainable = data.get("drainable") or []
        if drainable:  # one action for the switch's nodes: a dry run whatever VETTING_ACTIONS_DRY_RUN says
            actions.append({"kind": "drain", "label": f"Dry-run drain {len(drainable)} node{'s' * (len(drainable) != 1)}",
                            "switch": data.get("switch", ""), "href": reverse("vetting:triage"),
                            "reason": (item.detail or item.title)[:200]})
        actions.append({"kind": "link", "label": "Results behind the switch", "href": item.url})
        actions.append({"kind": "link", "label": "Triage the switch", "href": reverse("vetting:triage") + f"#switch-{data.get('switch', '')}"})
    elif item.kind == Kind.NAMESPACE_REQUEST:
        actions.append({"kind": "link", "label": "Approve or reject", "href": item.url})
    elif item.url:
        actions.append({"kind": "link", "label": "Open the product", "href": item.url})
    return actions


def rows(items, *, staff_name: str = "") -> list[dict]:
    return [{"item": item, "actions": item_actions(item, staff_name=staff_name)} for item in items]
