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
    max_switches = serializers.IntegerField(
        min_value=0, help_text="The most switches one group's NICs hang on, over the groups that leave their node (0 when "
                               "every group stays inside a node: NVLink traffic never reaches a switch).")
    max_dragonfly_groups = serializers.IntegerField(
        min_value=0, help_text="The most dragonfly groups one group spans, over the groups that leave their node.")
    spanning_groups = serializers.IntegerField(min_value=0, help_text="Groups that span more than one dragonfly group.")
    groups_with_unplaced_ranks = serializers.IntegerField(
        min_value=0, help_text="Groups with a rank the topology cannot place on a NIC; the counts above use their other ranks.")
    inside_node = serializers.IntegerField(
        min_value=0, help_text="Groups whose ranks all run on one node: they talk over NVLink only, never the network.")
    max_nodes = serializers.IntegerField(min_value=0, help_text="The most nodes one group spans.")
    level = serializers.ChoiceField(choices=["ok", "warning", "critical"],
                                    help_text="How likely this communicator is to slow the job where it runs.")
    verdict = serializers.CharField(
        help_text="One sentence, the judgement first and its reason (the job page's words): e.g. 'fast: NVLink — ...', "
                  "'slow: TP all-reduces leave NVLink ...', 'exposed: the gradient all-reduce crosses ... global links', "
                  "'not used: CP 1 ...'. A global link pair measured saturated while the job runs is named.")


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


class RankFigureResponse(serializers.Serializer):
    """The rank map as a Plotly figure, for the job page to draw (and redraw with Plotly.react).

    A selection field with a problem (``stage 8 does not exist: stages 0–7``, ``'x' is not a
    number``) does not refuse the request: the figure is drawn without that field's filter and
    ``errors`` says why, under the field's name, as the job page does without JavaScript."""

    figure = serializers.DictField(help_text="Plotly figure JSON: data and layout (layout.uirevision keeps zoom across redraws).")
    colour = serializers.CharField(help_text="The colouring drawn.")
    note = serializers.CharField(help_text="One sentence: what the colours mean.")
    selected_ranks = serializers.IntegerField(allow_null=True, min_value=0, help_text="Ranks selected; null without a selection.")
    errors = serializers.DictField(child=serializers.CharField(),
                                   help_text='Per selection field (dp, pp, tp) that was ignored, why: {"pp": "stage 8 does not exist: stages 0–7"}.')
    grid_selected = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=2, max_length=2),
                                          help_text="[stage, replica] of the stage × replica grid's cells holding a selected rank "
                                                    "(the first 64 replicas).")
