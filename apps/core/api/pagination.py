"""The API's default pagination: ``?limit=&offset=`` with bounds, bad values answered with a 400.

DRF's ``LimitOffsetPagination`` passes any offset to the database (``?offset=6760759693754570375168``
overflows it: a 500) and quietly ignores a limit it cannot read (``?limit=²``). Here ``limit`` is a
whole number 1..``max_limit`` (default 1000) and ``offset`` one in 0..``MAX_OFFSET``; anything else
is a 400 naming the parameter, in the API's error format.
"""
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination

from .params import QueryIntegerField

MAX_LIMIT = 1000
MAX_OFFSET = 10**9  # far beyond any list here, well inside every database's integer


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT
    max_offset = MAX_OFFSET

    def _read(self, request, name: str, field: QueryIntegerField, default):
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return default
        try:
            return field.run_validation(raw)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError({name: exc.detail}) from None

    def get_limit(self, request):
        field = QueryIntegerField(min_value=1, max_value=self.max_limit)
        return self._read(request, self.limit_query_param, field, self.default_limit)

    def get_offset(self, request):
        field = QueryIntegerField(min_value=0, max_value=self.max_offset)
        return self._read(request, self.offset_query_param, field, 0)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: {"minimum": 1, "maximum": self.max_limit},
                  self.offset_query_param: {"minimum": 0, "maximum": self.max_offset}}
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
