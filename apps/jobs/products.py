"""The lifecycle of a product of one job: refreshed while the job runs, built once more after it ends.

A product is a concrete subclass of :class:`apps.jobs.models.JobProduct` (telemetry's cube, saturation's
score); each app keeps how it builds its product, and shares here:

* :func:`product_window` — the window a product covers: the job's run window (``Job.run_window``) while the
  job has started on nodes and the window holds time; None means "waiting for the job to start";
* :func:`needs_refresh` — the rule: a running job's product is stale once older than its app's refresh
  period; an ended job's is stale until it reaches the job's end (so it is built once after the end, then
  left alone); a product never built is stale;
* :func:`stale_products` — the one selector both sweepers (``telemetry.materialize_recent_jobs``,
  ``saturation.score_recent_jobs``) read: the recent jobs whose product of one kind is stale;
* :func:`job_products` — every concrete product model, found in Django's app registry (no registration).

The products live in the apps above jobs (telemetry, saturation): the lifecycle is the jobs app's, as is the job.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.apps import apps
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from .choices import JobStateChoices
from .models import JobProduct

#: What a product without a window says (both products used these words before they shared them).
NOT_STARTED = "the job has not started on any node yet"
#: At most this many recent jobs are looked at per sweep, the latest started first.
SWEEP_LIMIT = 1000


def product_window(job, now: datetime | None = None) -> tuple[datetime, datetime] | None:
    """The (start, end) a product of ``job`` covers: its run window, end after start, on the job's nodes.
    None while the job has not started on any node."""
    window = job.run_window(now)
    if window is None or window[1] <= window[0] or not job.node_list:
        return None
    return window


def needs_refresh(*, job_end: datetime | None, built: datetime | None, reaches: datetime | None,
                  fresh_since: datetime) -> bool:
    """The lifecycle's rule. ``job_end``: the job's end (None while it runs); ``built``: when the product was
    last built; ``reaches``: the end of the window it was built over; ``fresh_since``: a running job's
    product built before this is stale."""
    if built is None:
        return True
    if job_end is None:
        return built < fresh_since
    return reaches is None or reaches < job_end


def fresh_since(model: type[JobProduct], now: datetime | None = None) -> datetime:
    """A running job's product of this kind built before this moment is stale."""
    return (now or timezone.now()) - timedelta(seconds=float(getattr(settings, model.refresh_setting)))


def job_products() -> list[type[JobProduct]]:
    """The concrete product models of the installed apps, by label."""
    return sorted((model for model in apps.get_models() if issubclass(model, JobProduct)), key=lambda m: m._meta.label)


def stale_products(model: type[JobProduct], *, now: datetime | None = None, limit: int = SWEEP_LIMIT) -> list[int]:
    """Pks of the jobs whose product of kind ``model`` is stale (:func:`needs_refresh`), among the jobs
    that run or ended within ``TELEMETRY_RECENT_HOURS`` (the latest ``limit`` started), leaving out those
    whose product is being built (``model.busy_field``)."""
    now = now or timezone.now()
    job_field = model._meta.get_field("job")
    related = job_field.related_query_name()
    recent = now - timedelta(hours=settings.TELEMETRY_RECENT_HOURS)
    columns = ["pk", "end_time", f"{related}__{model.built_field}", f"{related}__window_end"]
    if model.busy_field:
        columns.append(f"{related}__{model.busy_field}")
    candidates = (job_field.related_model.objects.filter(Q(state=JobStateChoices.RUNNING) | Q(end_time__gte=recent))
                  .exclude(start_time=None).order_by("-start_time").values_list(*columns)[:limit])
    since = fresh_since(model, now)
    return [pk for pk, end, built, reaches, *busy in candidates
            if not (busy and busy[0] is not None)
            and needs_refresh(job_end=end, built=built, reaches=reaches, fresh_since=since)]


def stale_job_products(now: datetime | None = None) -> dict[str, list[int]]:
    """{product model label: stale job pks} over every registered product."""
    return {model._meta.label: stale_products(model, now=now) for model in job_products()}
