"""Cheap job pages: the first screen and each panel's HTML are rendered once per job state and kept for a
few seconds (``JOB_PAGE_CACHE_SECONDS``), shared by every web process through the default cache.

A panel that versions its data (``JobPanel.version``: the saturation product, say) is cached under that
version, so a new scoring shows at once; the others (node states, vetting, ranks) are at most
``JOB_PAGE_CACHE_SECONDS`` old. The key holds what the HTML depends on: the job's row (state, end,
nodes), the panel's version, the query string, the host, and **the viewer** (issue 33: a panel names
the other jobs the viewer may see, links a comparison with the viewer's own jobs and holds a form, so
one viewer's panel is never served to another, whatever their role). The form's CSRF token belongs to
the viewer's session, not to the user: it is cut out before caching and the current request's token is
put back on every answer. The first screen depends on the job alone (its findings never name another
job) and is shared. 0 turns it off (the test profile does, so tests that build a job, change it and
look again never race the cache; tests/jobs/test_page_cache.py turns it on).
"""
import hashlib
import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe

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


_CSRF_VALUE = re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]*(")')
_CSRF_SLOT = "\x00csrf\x00"


def panel_html(panel, job, request) -> str:
    user = request.user
    viewer = f"user:{user.pk}" if user.is_authenticated else "anonymous"
    key = _key("panel", panel.key, _job_state(job), panel.version(job) if panel.version else "",
               request.GET.urlencode(), request.get_host(), request.scheme, viewer)
    html = cache.get(key) if settings.JOB_PAGE_CACHE_SECONDS > 0 else None
    if html is None:
        context = {"job": job, "request": request, **panel.context(job, request)}
        rendered = render_to_string(panel.template, context, request=request)
        html = _CSRF_VALUE.sub(lambda match: match.group(1) + _CSRF_SLOT + match.group(2), rendered)
        if settings.JOB_PAGE_CACHE_SECONDS > 0:
            cache.set(key, html, settings.JOB_PAGE_CACHE_SECONDS)
    # The template's own output, escaped as it rendered; only the token (URL-safe characters) goes in.
    return mark_safe(html.replace(_CSRF_SLOT, get_token(request)) if _CSRF_SLOT in html else html)  # noqa: S308
