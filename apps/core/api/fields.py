"""Serializer fields shared by every app's API."""
from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers, booleans and lists instead of turning them into text:
    ``{"text": 42}`` is a mistake worth a 400, not the EDF "42"."""

    default_error_messages = {"not_a_string": "Must be a string, not {kind}."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", kind=type(data).__name__.replace("NoneType", "null"))
        return super().to_internal_value(data)
