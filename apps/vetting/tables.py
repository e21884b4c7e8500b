"""The history page's results table (django-tables2). Newest first, by the page's keyset pagination: no sort links."""
from __future__ import annotations

import django_tables2 as tables
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.text import Truncator

from apps.core.tables import FilterSetOrderedTable, time_cell

NUMBER = {"td": {"class": "num"}, "th": {"class": "num"}}


class VettingResultTable(FilterSetOrderedTable):
    """Rows are :class:`~apps.vetting.models.VettingResult` with ``job_shown`` set by the view (may the viewer
    see the job's id)."""

    time = tables.Column(verbose_name="Time (UTC)")
    node = tables.Column(accessor="host", verbose_name="Node")
    switch = tables.Column(verbose_name="Switch", default="–")
    evaluation = tables.Column(accessor="eval_name", verbose_name="Evaluation", empty_values=(),
                               attrs={"td": {"title": lambda record: record.eval_type}})
    status = tables.Column(verbose_name="Status", empty_values=())
    rank = tables.Column(verbose_name="Rank", empty_values=(), attrs=NUMBER)
    gpu = tables.Column(verbose_name="GPU", empty_values=(), attrs=NUMBER)
    detail = tables.Column(accessor="message", verbose_name="Detail", empty_values=(), attrs={"td": {"class": "small"}})
    job = tables.Column(accessor="job_id_number", verbose_name="Job", empty_values=())
    run = tables.Column(accessor="run_id", verbose_name="Run")

    class Meta(FilterSetOrderedTable.Meta):
        orderable = False
        attrs = {"class": "table compact", "id": "vetting-results"}
        row_attrs = {"class": lambda record: f"outcome--{record.outcome}"}

    def render_time(self, value):
        return time_cell(value)

    def render_node(self, value):
        return format_html('<a href="{}">{}</a>', reverse("vetting:node", args=[value]), value)

    def render_status(self, record):
        return format_html('<span class="status status--{}">{}</span>', record.outcome, record.status)

    def render_rank(self, record):
        if record.rank is not None:
            return record.rank
        return f"local {record.local_rank}" if record.local_rank is not None else ""

    def render_gpu(self, value):
        return "" if value is None else value

    def render_detail(self, record):
        bandwidth = f"{floatformat(record.bandwidth_gbs, 2)} GB/s " if record.bandwidth_gbs is not None else ""
        return bandwidth + Truncator(record.message).chars(90)

    def render_job(self, record):
        if record.job_id_number and getattr(record, "job_shown", False):
            return record.job_id_number
        if record.job_id_number:
            return mark_safe('<span class="muted" title="another user\'s job">hidden</span>')
        return "–"

    def render_run(self, value):
        return format_html('<a href="{}">#{}</a>', reverse("vetting:run", args=[value]), value)
