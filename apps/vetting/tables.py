"""The history page's results table (django-tables2). Newest first, by the page's keyset pagination: no sort links."""
from __future__ import annotations

import django_tables2 as tables
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.text import Truncator

from apps.core.tables import FilterSetOrderedTable, time_cell

def gpu_rank_words(gpu, rank, local_rank) -> str:
    parts = []
    if gpu is not None:
        parts.append(f"GPU {gpu}")
    if rank is not None:
        parts.append(f"rank {rank}" + (f" (local {local_rank})" if local_rank is not None else ""))
    elif local_rank is not None:
        parts.append(f"local rank {local_rank}")
    return " · ".join(parts)


class VettingResultTable(FilterSetOrderedTable):
    """Rows are :class:`~apps.vetting.models.VettingResult` with ``job_shown`` set by the view (may the viewer
    see the job's id)."""

    time = tables.Column(verbose_name="Time (UTC)")
    node = tables.Column(accessor="host", verbose_name="Node")
    switch = tables.Column(verbose_name="Switch", default="–")
    evaluation = tables.Column(accessor="eval_name", verbose_name="Evaluation", empty_values=(),
                               attrs={"td": {"title": lambda record: record.eval_type}})
    gpu_rank = tables.Column(accessor="gpu", verbose_name="GPU / rank", empty_values=(), attrs={"td": {"class": "gpu-rank"}})
    status = tables.Column(verbose_name="Status", empty_values=())
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

    def render_gpu_rank(self, record):
        """"GPU 2 · rank 5 (local 1)": which part of the node a result is about, so that the results of one node and
        evaluation (one per rank or GPU) do not look like duplicates; "node" for a result about the whole node."""
        words = gpu_rank_words(record.gpu, record.rank, record.local_rank)
        return words or mark_safe('<span class="muted" title="the node as a whole">node</span>')

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
