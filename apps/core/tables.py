"""The base of the portal's list tables (django-tables2), drawn by ``templates/core/_table.html``.

A list page sorts through its FilterSet (``apps.core.ordering.NullsLastOrderingFilter`` on the
``ordering`` parameter), so the rows reach the table already sorted and paginated; the table draws the
columns, the header's sort links (the current query with ``ordering`` changed and ``page`` dropped) and
``aria-sort``. Column names are the ``ordering`` keys.
"""
from __future__ import annotations

import django_tables2 as tables
from django.utils import dateformat, timezone
from django.utils.html import format_html
from django_tables2.rows import BoundRow, BoundRows
from django_tables2.utils import AttributeDict, OrderBy, OrderByTuple, computed_values


def minute(value) -> str:
    """A time to the minute in the portal's time zone, as list pages show it: 2026-11-20 14:00."""
    return dateformat.format(timezone.localtime(value), "Y-m-d H:i")


def time_cell(value) -> str:
    """A ``<time>`` element: the minute shown, the exact time in ``datetime``."""
    return format_html('<time datetime="{}">{}</time>', dateformat.format(timezone.localtime(value), "c"), minute(value))


class _Row(BoundRow):
    @property
    def attrs(self):
        """The table's ``row_attrs`` alone (django-tables2 adds odd/even classes the stylesheet does not use)."""
        return AttributeDict(computed_values(self._table.row_attrs, kwargs={"table": self._table, "record": self._record}))


class _Rows(BoundRows):
    def __iter__(self):
        for record in self.data:
            yield _Row(record, table=self.table)


class FilterSetOrderedTable(tables.Table):
    """A table whose rows come sorted by the page's FilterSet: ``order_by`` marks the sorted columns only."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows = _Rows(data=self.data, table=self)

    @property
    def order_by(self):
        return self._order_by

    @order_by.setter
    def order_by(self, value):
        aliases = () if not value else value
        aliases = aliases.split(",") if isinstance(aliases, str) else aliases
        self._order_by = OrderByTuple([alias for alias in aliases
                                       if OrderBy(alias).bare in self.columns and self.columns[OrderBy(alias).bare].orderable])

    class Meta:
        order_by_field = "ordering"
        page_field = "page"
        orderable = True
        template_name = "core/_table.html"
