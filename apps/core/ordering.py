"""Sorting list pages and list APIs through their FilterSet: django-filter's OrderingFilter, with empty values last.

    ordering = NullsLastOrderingFilter(fields=[("submit_time", "submitted"), ("node_count", "nodes")],
                                       tie_break=["-job_id"])

``?ordering=nodes`` sorts ascending, ``-nodes`` descending, ``nodes,-submitted`` by both; rows without
the value come last in both directions (a pending job has no node count: it is neither the smallest nor
the largest job). ``tie_break`` orders the rows the chosen fields leave tied, so pages are stable.
``more_fields`` (a callable answering more ``(field, parameter)`` pairs) adds sort keys that higher
apps register after the FilterSet class exists (the job list's registered columns); they are read on
every use, so the API schema and the form's choices list them too. An unknown key is a validation
error (400 on the API, the form's error on a page), like any other filter value.
"""
from __future__ import annotations

from typing import Callable, Iterable

import django_filters
from django.db.models import F
from django_filters.constants import EMPTY_VALUES


class _Choices:
    """Choices read again on every iteration: registered sort keys arrive after the class is built."""

    def __init__(self, build: Callable[[], list[tuple[str, str]]]):
        self.build = build

    def __iter__(self):
        return iter(self.build())


class NullsLastOrderingFilter(django_filters.OrderingFilter):
    def __init__(self, *args, fields=(), more_fields: Callable[[], Iterable[tuple[str, str]]] | None = None,
                 tie_break: Iterable[str] = (), **kwargs):
        self._own_fields = self.normalize_fields(fields)  # field -> parameter
        self.more_fields = more_fields
        self.tie_break = tuple(tie_break)
        self._field_labels = kwargs.pop("field_labels", {})
        kwargs["choices"] = _Choices(lambda: self.build_choices(self.all_fields(), self._field_labels))
        super().__init__(*args, fields=fields, **kwargs)

    def all_fields(self) -> dict[str, str]:
        fields = dict(self._own_fields)
        if self.more_fields is not None:
            fields.update(self.normalize_fields(list(self.more_fields())))
        return fields

    @property
    def param_map(self) -> dict[str, str]:
        return {param: field for field, param in self.all_fields().items()}

    @param_map.setter
    def param_map(self, value):  # OrderingFilter.__init__ sets it; the property above reads the fields each time
        pass

    def get_ordering_value(self, param):
        descending = param.startswith("-")
        field = self.param_map[param.lstrip("-")]
        return F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)

    def filter(self, qs, value):
        if value in EMPTY_VALUES:
            return qs
        ordering = [self.get_ordering_value(param) for param in value if param not in EMPTY_VALUES]
        return qs.order_by(*ordering, *self.tie_break)
