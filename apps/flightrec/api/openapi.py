"""Response shapes of the Flight Recorder API, for drf-spectacular (documentation only)."""
from rest_framework import serializers


class Megatron(serializers.Serializer):
    kind = serializers.CharField(help_text="tp, pp, dp, cp, ep, edp, etp, dp-cp, mp")
    index = serializers.IntegerField(help_text="which group of that kind, in Megatron's order")
    label = serializers.CharField(help_text="\"data-parallel group 17\"")


class ProcessGroup(serializers.Serializer):
    name = serializers.CharField(help_text="PyTorch's process group name (its id)")
    desc = serializers.CharField(help_text="the description the program gave it (group_desc)")
    ranks = serializers.ListField(child=serializers.IntegerField(), help_text="global ranks of its members")
    megatron = Megatron(allow_null=True)
    label = serializers.CharField()


class Collective(serializers.Serializer):
    seq_id = serializers.IntegerField(help_text="collective_seq_id (p2p_seq_id for a point-to-point operation)")
    op = serializers.CharField()
    sizes = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()), help_text="input sizes the majority used")
    dtypes = serializers.ListField(child=serializers.CharField())
    p2p = serializers.BooleanField()


class Evidence(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["telemetry", "gpu_health", "vetting"])
    level = serializers.ChoiceField(choices=["critical", "warning", "info"])
    words = serializers.CharField()


class Culprit(serializers.Serializer):
    rank = serializers.IntegerField()
    host = serializers.CharField(allow_null=True)
    gpu = serializers.IntegerField(allow_null=True)
    nic = serializers.CharField(allow_null=True)
    switch = serializers.CharField(allow_null=True, help_text="\"group.switch\"")
    group = serializers.IntegerField(allow_null=True, help_text="dragonfly group")
    reason = serializers.CharField()
    coords = serializers.DictField(child=serializers.IntegerField(), help_text="Megatron coordinates (tp, pp, dp, cp, ep)")
    evidence = Evidence(many=True)


class FlightFinding(serializers.Serializer):
    status = serializers.CharField()
    verdict = serializers.CharField()
    process_group = serializers.CharField()
    desc = serializers.CharField()
    megatron = Megatron(allow_null=True)
    seq_id = serializers.IntegerField()
    op = serializers.CharField()
    culprits = serializers.ListField(child=serializers.IntegerField())


class FlightResponse(serializers.Serializer):
    job = serializers.CharField()
    status = serializers.ChoiceField(choices=["hang", "mismatch", "healthy", "incomplete", "pending", "failed"],
                                     help_text="pending: dumps arrived, the analysis has not run yet")
    verdict = serializers.CharField(required=False)
    headline = serializers.CharField(required=False, help_text="the verdict with the first culprit's place and evidence")
    ranks_dumped = serializers.IntegerField()
    ranks_expected = serializers.IntegerField(allow_null=True)
    missing_dumps = serializers.ListField(child=serializers.IntegerField(), help_text="ranks without a dump (first 1,000)")
    process_group = ProcessGroup(allow_null=True)
    collective = Collective(allow_null=True)
    culprits = Culprit(many=True)
    findings = FlightFinding(many=True, help_text="the first disagreement of every process group that has one")
    grid = serializers.DictField(allow_null=True, required=False, help_text="{seqs, focus, rows: [{rank, cells, like}], folded}")
    last_entries = serializers.DictField(required=False, help_text="rank -> its last entries, with stack frames when dumped")


class FlightIngestResponse(serializers.Serializer):
    job = serializers.CharField()
    stored = serializers.ListField(child=serializers.IntegerField(), help_text="ranks stored")
    errors = serializers.ListField(child=serializers.DictField(), help_text="files of a tar that were not stored, with why")
    analysis = serializers.CharField(help_text="queued")
