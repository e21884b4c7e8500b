"""Cheap job pages: the first screen and each panel's HTML are rendered once per job state and kept for a
few seconds (``JOB_PAGE_CACHE_SECONDS``), shared by every web process through the default cache.

A panel that versions its data (``JobPanel.version``: the saturation product, say) is cached under that
version, so a new scoring shows at once; the others (node states, vetting, ranks) are at most
``JOB_PAGE_CACHE_SECONDS`` old. The key holds what the HTML depends on: the job's row (state, end,
nodes), the panel's version, the query string, the host, and whether the caller is staff or the job's
own user (panels show those people more). The first screen says when it was computed. 0 turns it off
(the test profile does, so tests that build a job, change it and look again never race the cache).
"""
import hashlib
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.template.loader import render_to_string
from django.utils import timezone

from apps.core.panels import PanelSummary, first_screen, job_panels


@dataclass
class FirstScreen:
    summary: PanelSummary
    computed: datetime


def _job_state(job) -> str:
    return f"{job.pk}|{job.state}|{job.start_time}|{job.end_time}|{job.nodes}|{job.node_count}|{job.gpus}"


def _versions(job, panels) -> str:
    return "|".join(f"{panel.key}={panel.version(job) if panel.version else ''}" for panel in panels)


def _key(*parts) -> str:
    return "jobs:page:" + hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).hexdigest()


def cached_first_screen(job) -> FirstScreen:
    panels = job_panels()
    if settings.JOB_PAGE_CACHE_SECONDS <= 0:
        return FirstScreen(first_screen(job, panels), timezone.now())
    key = _key("first", _job_state(job), _versions(job, panels))
    found = cache.get(key)
    if found is None:
        found = FirstScreen(first_screen(job, panels), timezone.now())
        cache.set(key, found, settings.JOB_PAGE_CACHE_SECONDS)
    return found


def panel_html(panel, job, request) -> str:
    user = request.user
    role = "staff" if user.is_staff else "owner" if user.get_username() == job.user_name else "reader"
    key = _key("panel", panel.key, _job_state(job), panel.version(job) if panel.version else "",
               request.GET.urlencode(), request.get_host(), request.scheme, role)
    html = cache.get(key) if settings.JOB_PAGE_CACHE_SECONDS > 0 else None
    if html is None:
        context = {"job": job, "request": request, **panel.context(job, request)}
        html = render_to_string(panel.template, context, request=request)
        cache.set(key, html, settings.JOB_PAGE_CACHE_SECONDS)
    return html
