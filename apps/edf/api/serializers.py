from rest_framework import serializers

from apps.core.api.fields import StrictCharField

from ..models import EdfDocument, EdfVersion, edf_name_validator
from ..vocabulary import MAX_EDF_CHARS


class ValidateRequestSerializer(serializers.Serializer):
    text = StrictCharField(max_length=MAX_EDF_CHARS, allow_blank=True, trim_whitespace=False,
                           help_text="The EDF (TOML) to check.")
    base_environments = serializers.DictField(
        child=StrictCharField(max_length=MAX_EDF_CHARS, allow_blank=True, trim_whitespace=False), required=False,
        help_text="EDFs the text may inherit from with base_environment, by name or path.",
    )
    use_saved = serializers.BooleanField(
        default=False, help_text="Also resolve base_environment names from saved EDFs (yours, or `owner`'s that you may read).")
    owner = StrictCharField(required=False, max_length=150, help_text="Whose saved EDFs use_saved reads (default: you).")
    name = StrictCharField(required=False, max_length=64, help_text="The EDF's own name, to catch it inheriting from itself.")
    env = serializers.DictField(child=StrictCharField(allow_blank=True, max_length=10_000, trim_whitespace=False),
                                required=False, allow_null=True,
                                help_text="Environment variables for ${VAR} expansion, e.g. {\"USER\": \"alice\"}.")


class FindingSerializer(serializers.Serializer):
    severity = serializers.ChoiceField(choices=["error", "warning", "info"])
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    path = serializers.CharField(allow_blank=True)
    message = serializers.CharField()
    hint = serializers.CharField(allow_null=True)
    rule = serializers.CharField()
    recovered = serializers.BooleanField(
        help_text="Found on the text read past a TOML syntax error (a missing quote or bracket added, or the bad "
                  "lines left out): the file is not TOML, so srun reads none of it.")


class ValidateResponseSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    findings = FindingSerializer(many=True)
    resolved = serializers.DictField(allow_null=True)


class EdfVersionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = EdfVersion
        fields = ["number", "note", "created", "created_by", "error_count", "warning_count", "text"]


class EdfDocumentSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    shared_with = serializers.SlugRelatedField(slug_field="slurm_account", many=True, read_only=True)
    latest = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    can_edit = serializers.SerializerMethodField()

    class Meta:
        model = EdfDocument
        fields = ["owner", "name", "description", "shared_with", "created", "modified", "latest", "url", "can_edit"]

    def get_latest(self, document) -> dict | None:
        version = document.latest
        return EdfVersionSerializer(version).data if version else None

    def get_url(self, document) -> str:
        request = self.context.get("request")
        path = f"/edf/{document.owner.username}/{document.name}/"
        return request.build_absolute_uri(path) if request else path

    def get_can_edit(self, document) -> bool:
        request = self.context.get("request")
        return bool(request and request.user.pk == document.owner_id)


class EdfCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=64, validators=[edf_name_validator], trim_whitespace=False)  # "train\n" is refused
    text = StrictCharField(max_length=MAX_EDF_CHARS, allow_blank=True, trim_whitespace=False)
    description = StrictCharField(max_length=500, required=False, allow_blank=True, default="")
    note = StrictCharField(max_length=200, required=False, allow_blank=True, default="")


class EdfUpdateSerializer(serializers.Serializer):
    text = StrictCharField(max_length=MAX_EDF_CHARS, allow_blank=True, trim_whitespace=False, required=False)
    description = StrictCharField(max_length=500, required=False, allow_blank=True)
    note = StrictCharField(max_length=200, required=False, allow_blank=True, default="")


class EdfShareSerializer(serializers.Serializer):
    projects = serializers.ListField(child=StrictCharField(max_length=64), max_length=100,
                                     help_text="Slurm accounts to share with (replaces the current list; [] unshares).")
