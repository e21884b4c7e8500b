"""Documentation-only response serializers of the layout API (OpenAPI schema, issue 16 item 13).

``layout_body`` in views.py builds the body by hand; these classes describe it so that clients and
fuzzers can check every answer. They are never used to render a response."""
from rest_framework import serializers


class LayoutSizes(serializers.Serializer):
    """The stored Megatron layout: parallel sizes, rank order and where they came from."""

    tp = serializers.IntegerField(min_value=1)
    pp = serializers.IntegerField(min_value=1)
    cp = serializers.IntegerField(min_value=1)
    ep = serializers.IntegerField(min_value=1)
    etp = serializers.IntegerField(allow_null=True, help_text="Expert tensor parallel size; null when not given.")
    dp = serializers.IntegerField(min_value=1)
    vpp = serializers.IntegerField(allow_null=True, help_text="Virtual pipeline stages; null when not given.")
    order = serializers.CharField(help_text="Megatron's order string, e.g. tp-cp-ep-dp-pp.")
    world_size = serializers.IntegerField(min_value=1)
    source = serializers.CharField(help_text="How it was given: sizes, map or log.")
    exact_map = serializers.BooleanField(help_text="Whether the exact rank → (host, local_rank) map was given.")
    warnings = serializers.ListField(child=serializers.CharField(), help_text="What reading it noticed (e.g. garbled log lines).")


class LayoutCommunicator(serializers.Serializer):
    """How far the communicator groups of one kind spread over switches and dragonfly groups."""

    kind = serializers.CharField(help_text="tp, pp, dp, cp, dp-cp, ep or mp.")
    groups = serializers.IntegerField(min_value=0, help_text="Communicator groups of this kind.")
    size = serializers.IntegerField(min_value=0, help_text="Ranks per group.")
    max_switches = serializers.IntegerField(min_value=0)
    max_dragonfly_groups = serializers.IntegerField(min_value=0)
    spanning_groups = serializers.IntegerField(min_value=0, help_text="Groups that span more than one dragonfly group.")
    groups_with_unplaced_ranks = serializers.IntegerField(
        min_value=0, help_text="Groups with a rank the topology cannot place on a NIC; the counts above use their other ranks.")
    groups_with_unplaced_ranks = serializers.IntegerField(
        min_value=0, required=False, help_text="Groups with a rank the topology cannot place on a NIC (left out of the counts above).")


class LayoutPipelineBoundary(serializers.Serializer):
    """One stage → stage + 1 link of one pipeline."""

    dp = serializers.IntegerField()
    tp = serializers.IntegerField()
    cp = serializers.IntegerField()
    stage = serializers.IntegerField(help_text="From this stage to the next.")
    rank_from = serializers.IntegerField()
    rank_to = serializers.IntegerField()
    hop_class = serializers.CharField(help_text="same node, same switch, same group or inter-group.")
    hops = serializers.IntegerField(help_text="Inter-switch hops.")
    group_from = serializers.IntegerField()
    group_to = serializers.IntegerField()


class LayoutPipeline(serializers.Serializer):
    """The pipeline boundaries and how many of them leave a dragonfly group."""

    boundaries = serializers.IntegerField(min_value=0)
    inter_group = serializers.IntegerField(min_value=0)
    verdict = serializers.CharField(help_text="One sentence a user can act on.")
    inter_group_examples = LayoutPipelineBoundary(many=True, help_text="Up to 50 inter-group boundaries.")


class LayoutPlacementGaps(serializers.Serializer):
    """Ranks the topology cannot place on a NIC (their host is not in it, or lacks the NIC): they keep
    their host and GPU but have no NIC, switch or group."""

    ranks_without_nic = serializers.IntegerField(min_value=0)
    hosts_not_in_topology = serializers.ListField(child=serializers.CharField())
    nics_missing = serializers.ListField(child=serializers.CharField(), help_text='"host:hsnN" of known hosts that lack the NIC.')
    hosts_without_nic_placement = serializers.ListField(child=serializers.CharField())
    message = serializers.CharField(allow_null=True, help_text="One sentence; null when every rank is placed.")


class LayoutPlacementGaps(serializers.Serializer):
    """Ranks the topology cannot place on a NIC (host outside the topology, or a NIC it lacks). They keep
    their host and GPU in the rank list; NIC, switch and group are null there."""

    ranks_without_nic = serializers.IntegerField(min_value=0)
    hosts_not_in_topology = serializers.ListField(child=serializers.CharField())
    nics_missing = serializers.ListField(child=serializers.CharField(), help_text='"host:hsnN" of known hosts.')
    hosts_without_nic_placement = serializers.ListField(child=serializers.CharField())
    message = serializers.CharField(allow_null=True, help_text="One sentence for a person; null when every rank is placed.")


class LayoutResponse(serializers.Serializer):
    """The job's layout and its placement. ``layout`` is null (and nothing else is sent) while the job has
    none; otherwise ``communicators`` and ``pipeline`` describe how the ranks sit on the network."""

    layout = LayoutSizes(allow_null=True)
    communicators = LayoutCommunicator(many=True, required=False)
    pipeline = LayoutPipeline(required=False)
    placement = LayoutPlacementGaps(required=False)
    placement = LayoutPlacementGaps(required=False)
