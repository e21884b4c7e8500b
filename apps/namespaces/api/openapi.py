"""Documentation-only response serializers of the namespaces API (OpenAPI schema, issue 16 item 13).

The views build their bodies by hand (``_namespace``, ``_request``, ``inventory_document``); these
classes describe those bodies so that clients and fuzzers can check every answer. They are never used
to render a response."""
from rest_framework import serializers


def _serializer(name: str, doc: str, fields: dict) -> type:
    """A serializer class whose output keys are not Python names (``from``)."""
    return type(name, (serializers.Serializer,), {"__module__": __name__, "__doc__": doc, **fields})


NamespaceEvent = _serializer("NamespaceEvent", "One state change of a request or a namespace.", {
    "at": serializers.DateTimeField(),
    "from": serializers.CharField(allow_blank=True, help_text="The state before; empty for the first event."),
    "to": serializers.CharField(),
    "actor": serializers.CharField(),
    "message": serializers.CharField(allow_blank=True),
    "commit": serializers.CharField(allow_blank=True, help_text="The GitOps commit it made, if any."),
})


class NamespaceRequestRef(serializers.Serializer):
    """A request that created or changed the namespace."""

    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    created = serializers.DateTimeField()


class NamespaceSummary(serializers.Serializer):
    """A managed namespace as lists show it."""

    name = serializers.CharField()
    team = serializers.CharField(help_text="The owning project's Slurm account.")
    environment = serializers.CharField()
    state = serializers.CharField()
    teardown_step = serializers.CharField(allow_null=True, help_text="Where a teardown stands; null when none runs.")
    commit = serializers.CharField(allow_blank=True)
    sync = serializers.CharField(allow_null=True, help_text="Argo CD's sync status; null before the first check.")
    health = serializers.CharField(allow_null=True, help_text="Argo CD's health status; null before the first check.")
    status_message = serializers.CharField(allow_blank=True)
    status_checked = serializers.DateTimeField(allow_null=True)
    created = serializers.DateTimeField()
    updated = serializers.DateTimeField()


class NamespaceResponse(NamespaceSummary):
    """One namespace with its committed spec, Argo CD's last answer, its history and its requests."""

    spec = serializers.DictField(help_text="The spec last committed (the request body's form).")
    status_detail = serializers.DictField(help_text="Argo CD's answer, parsed: operation, conditions, apps.")
    events = NamespaceEvent(many=True)
    requests = NamespaceRequestRef(many=True)


class NamespaceRequestResponse(serializers.Serializer):
    """A namespace request: its spec, why and by whom it must be approved, the decision, and what it changed."""

    id = serializers.IntegerField()
    number = serializers.CharField(help_text="nsr-<id>")
    kind = serializers.CharField()
    name = serializers.CharField(help_text="The namespace's full name.")
    team = serializers.CharField()
    status = serializers.CharField()
    needs_approval = serializers.ListField(child=serializers.CharField(), help_text="Why a person must approve; empty within the envelope.")
    approvers = serializers.ListField(child=serializers.CharField(), help_text="Who may approve; empty: any staff.")
    requested_by = serializers.CharField()
    decided_by = serializers.CharField(allow_null=True)
    decision_reason = serializers.CharField(allow_blank=True)
    commit = serializers.CharField(allow_blank=True)
    diff = serializers.CharField(allow_blank=True, help_text="What the request changed in the GitOps repository.")
    message = serializers.CharField(allow_blank=True)
    spec = serializers.DictField(help_text="The spec as requested.")
    created = serializers.DateTimeField()
    events = NamespaceEvent(many=True)


class NamespaceProblem(serializers.Serializer):
    """A problem of the spec, by field."""

    field = serializers.CharField(allow_blank=True)
    message = serializers.CharField()


class NamespaceDryRunResponse(serializers.Serializer):
    """What submitting the spec would do (``?dry_run=1``): the problems by field, whether a person must
    approve and who, the rendered manifests and files, and the diff against the repository."""

    valid = serializers.BooleanField()
    name = serializers.CharField(allow_blank=True)
    change_of = serializers.CharField(allow_null=True, help_text="The namespace the request would change (day 2); null for a new one.")
    problems = NamespaceProblem(many=True)
    needs_approval = serializers.ListField(child=serializers.CharField())
    approvers = serializers.ListField(child=serializers.CharField())
    manifests = serializers.CharField(allow_blank=True, help_text="The manifests as YAML; empty when the spec has problems.")
    files = serializers.DictField(child=serializers.CharField(allow_blank=True), help_text="Path in the repository → content.")
    diff = serializers.CharField(allow_blank=True)


class InventoryGpuProfile(serializers.Serializer):
    """A way to ask for GPUs of one model (whole GPUs, or one MIG profile) and how many are left."""

    profile = serializers.CharField(help_text="whole, or a MIG profile such as 1g.10gb.")
    resource = serializers.CharField(help_text="The quota key, e.g. nvidia.com/gpu.")
    capacity = serializers.IntegerField(min_value=0)
    left = serializers.IntegerField(min_value=0)


class InventoryGpuModel(serializers.Serializer):
    """A GPU model of the cluster."""

    id = serializers.CharField()
    label = serializers.CharField()
    profiles = InventoryGpuProfile(many=True)


class InventoryEnvironment(serializers.Serializer):
    """An environment: the storage classes and pod security levels it allows, and whether requests need a person."""

    storage = serializers.ListField(child=serializers.CharField())
    psa = serializers.ListField(child=serializers.CharField())
    approval = serializers.BooleanField()


class InventoryBlueprintParam(serializers.Serializer):
    """A blueprint parameter (keys the inventory does not give are absent)."""

    type = serializers.CharField(help_text="hostname, size, count, text or choice.")
    label = serializers.CharField(required=False)
    required = serializers.BooleanField(required=False)
    default = serializers.JSONField(required=False)
    choices = serializers.ListField(required=False)
    max = serializers.IntegerField(required=False)
    help = serializers.CharField(required=False)
    value = serializers.CharField(required=False, help_text="The chart value it sets.")


class InventoryBlueprint(serializers.Serializer):
    """A service a team can deploy into a namespace."""

    id = serializers.CharField()
    label = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    chart = serializers.CharField(help_text="Chart and version.")
    params = serializers.DictField(child=InventoryBlueprintParam(), help_text="Parameter name → its description.")


class InventoryResponse(serializers.Serializer):
    """What the cluster offers: GPU models with their whole GPUs and MIG profiles (with what is left),
    environments, storage classes, blueprints and their parameters."""

    gpu_models = InventoryGpuModel(many=True)
    environments = serializers.DictField(child=InventoryEnvironment(), help_text="Environment name → what it allows.")
    storage_classes = serializers.DictField(child=serializers.CharField(), help_text="Storage class → label.")
    blueprints = InventoryBlueprint(many=True)
    ingress_domain = serializers.CharField()
