"""The job list's table: its own columns, then the columns higher apps register (apps.core.job_columns).

Column names are the ``ordering`` keys of :class:`apps.jobs.filtersets.JobFilterSet`; the rows arrive
sorted and paginated by the view, so a registered column's loader runs once for the page's jobs.
"""
from __future__ import annotations

import django_tables2 as tables
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from apps.core.job_columns import JobColumn, job_column_values
from apps.core.tables import FilterSetOrderedTable, minute, time_cell
from apps.core.templatetags.belvedere import duration

NUMBER = {"td": {"class": "num"}}


class RegisteredColumn(tables.Column):
    """A column another app registered: its cell is the app's template with the loader's value for the job."""

    def __init__(self, registered: JobColumn, values: dict):
        self.registered = registered
        self.values = values
        attrs = {"td": {"class": registered.css} if registered.css else {}, "th": {"title": registered.help} if registered.help else {}}
        super().__init__(accessor="pk", verbose_name=registered.title, orderable=registered.order_by is not None,
                         empty_values=(), attrs=attrs)

    def render(self, record):
        return render_to_string(self.registered.template, {"value": self.values.get(record.pk), "job": record})


class JobTable(FilterSetOrderedTable):
    job = tables.Column(accessor="job_id", verbose_name="Job")
    name = tables.Column(verbose_name="Name", empty_values=(), attrs={"td": {"class": "job-name"}})
    user = tables.Column(accessor="user_name", verbose_name="User", empty_values=())
    account = tables.Column(verbose_name="Account", empty_values=())
    state = tables.Column(verbose_name="State")
    nodes = tables.Column(accessor="node_count", verbose_name="Nodes", default="–", attrs=NUMBER)
    submitted = tables.Column(accessor="submit_time", verbose_name="Submitted", default="–")
    started = tables.Column(accessor="start_time", verbose_name="Started", default="–")
    ended = tables.Column(accessor="end_time", verbose_name="Ended", default="–")
    elapsed = tables.Column(accessor="pk", verbose_name="Elapsed", orderable=False, attrs=NUMBER)

    class Meta(FilterSetOrderedTable.Meta):
        attrs = {"class": "table jobs-table"}

    def __init__(self, jobs: list, *, columns: list[JobColumn] = (), **kwargs):
        values = job_column_values(columns, [job.pk for job in jobs])
        extra = [(column.key, RegisteredColumn(column, values[column.key])) for column in columns]
        # The registered columns (the saturation score: the verdict) come right after the state, where a narrow
        # screen still shows them; the times follow.
        kwargs.setdefault("sequence", ("job", "name", "user", "account", "state", *(key for key, _ in extra), "..."))
        super().__init__(jobs, extra_columns=extra, **kwargs)

    def render_job(self, record):
        return format_html('<a href="{}">{}/{}</a>', reverse("jobs:detail", args=[record.cluster.name, record.job_id]),
                           record.cluster.name, record.display_id)

    def render_name(self, value):
        return Truncator(value).chars(48)

    def render_account(self, value):
        return format_html("<code>{}</code>", value)

    def render_state(self, record):
        return format_html('<span class="status status--job-{}">{}</span>', record.state.lower(), record.get_state_display())

    def render_submitted(self, value):
        return time_cell(value)

    def render_started(self, value):
        return minute(value)

    def render_ended(self, value):
        return minute(value)

    def render_elapsed(self, record):
        return duration(record.elapsed)
