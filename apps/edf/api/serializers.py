from rest_framework import serializers

from apps.core.api.fields import StrictCharField

from ..vocabulary import MAX_EDF_CHARS



class ValidateRequestSerializer(serializers.Serializer):
    text = StrictCharField(max_length=MAX_EDF_CHARS, allow_blank=True, trim_whitespace=False,
                                 help_text="The EDF (TOML) to check.")
    base_environments = serializers.DictField(
        child=StrictCharField(max_length=MAX_EDF_CHARS, allow_blank=True, trim_whitespace=False), required=False,
        help_text="EDFs the text may inherit from with base_environment, by name.",
    )
    env = serializers.DictField(child=StrictCharField(allow_blank=True, max_length=10_000), required=False,
                                help_text="Environment variables for ${VAR} expansion, e.g. {\"USER\": \"alice\"}.")


class FindingSerializer(serializers.Serializer):
    severity = serializers.ChoiceField(choices=["error", "warning", "info"])
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    path = serializers.CharField(allow_blank=True)
    message = serializers.CharField()
    hint = serializers.CharField(allow_null=True)
    rule = serializers.CharField()


class ValidateResponseSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    findings = FindingSerializer(many=True)
    resolved = serializers.DictField(allow_null=True)
