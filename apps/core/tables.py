"""The base of the portal's list tables (django-tables2), drawn by ``templates/core/_table.html``.

A list page sorts through its FilterSet (``apps.core.ordering.NullsLastOrderingFilter`` on the
``ordering`` parameter), so the rows reach the table already sorted and paginated; the table draws the
columns, the header's sort links (the current query with ``ordering`` changed and ``page`` dropped) and
``aria-sort``. Column names are the ``ordering`` keys.
"""
from __future__ import annotations

import django_tables2 as tables
from django_tables2.utils import OrderBy, OrderByTuple


class FilterSetOrderedTable(tables.Table):
    """A table whose rows come sorted by the page's FilterSet: ``order_by`` marks the sorted columns only."""

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
