from rest_framework import serializers

from ..selection import EXAMPLE, SelectionError, parse_selection

ORDERS_HELP = "Megatron's order string: 'tp-cp-ep-dp-pp' (default) or 'tp-cp-ep-pp-dp' (--use-tp-pp-dp-mapping)."
MAX_RANKS = 200_000


class RankPlacementSerializer(serializers.Serializer):
    rank = serializers.IntegerField(min_value=0)
    host = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    local_rank = serializers.IntegerField(min_value=0, max_value=63)


class LayoutSerializer(serializers.Serializer):
    tp = serializers.IntegerField(min_value=1, max_value=1024)
    pp = serializers.IntegerField(min_value=1, max_value=1024)
    cp = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    ep = serializers.IntegerField(min_value=1, max_value=4096, default=1)
    etp = serializers.IntegerField(min_value=1, max_value=1024, required=False, allow_null=True)
    dp = serializers.IntegerField(min_value=1, max_value=100_000, required=False, allow_null=True,
                                  help_text="Derived from the world size when omitted.")
    vpp = serializers.IntegerField(min_value=1, max_value=1024, required=False, allow_null=True)
    order = serializers.CharField(max_length=40, default="tp-cp-ep-dp-pp", help_text=ORDERS_HELP)
    num_layers = serializers.IntegerField(min_value=1, max_value=100_000, required=False, allow_null=True)
    first_stage_layers = serializers.IntegerField(min_value=0, max_value=100_000, required=False, allow_null=True)
    last_stage_layers = serializers.IntegerField(min_value=0, max_value=100_000, required=False, allow_null=True)
    # A ListField, not many=True: many=True passes allow_null to every entry too, so [null, null]
    # got through validation and failed later (a 500). The list may be null, an entry may not.
    ranks = serializers.ListField(child=RankPlacementSerializer(), required=False, allow_null=True, max_length=MAX_RANKS,
                                  help_text="The exact rank → (host, local_rank) map; Slurm's block distribution when omitted.")


class LogUploadSerializer(serializers.Serializer):
    log = serializers.FileField(help_text="Rank-0 output of the job (Megatron arguments dump, srun -l labels, NCCL INFO lines).")


class SelectionField(serializers.CharField):
    """``6,7`` or ``0-3`` or ``1, 4-5`` as the sorted list of values (None when empty), read by
    :func:`apps.ranks.selection.parse_selection`, the parser the job page uses too."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("max_length", 20_000)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        try:
            return parse_selection(text)
        except SelectionError as exc:
            raise serializers.ValidationError(str(exc)) from None


class RankFilterParams(serializers.Serializer):
    """Query parameters of ``GET .../ranks/``: only ranks with these coordinates."""

    tp = SelectionField(help_text=f"only these tensor-parallel ranks, e.g. {EXAMPLE}")
    cp = SelectionField(help_text=f"only these context-parallel ranks, e.g. {EXAMPLE}")
    ep = SelectionField(help_text=f"only these expert-parallel ranks, e.g. {EXAMPLE}")
    dp = SelectionField(help_text=f"only these data-parallel replicas, e.g. {EXAMPLE}")
    pp = SelectionField(help_text=f"only these pipeline stages (0-based), e.g. {EXAMPLE}")


class SelectionTextField(serializers.CharField):
    """A selection's text as typed (``6,7``): the figure endpoint reads it with the page's rules and
    explains a problem in the body's ``errors`` instead of refusing the whole request."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("max_length", 20_000)
        super().__init__(**kwargs)


class RankFigureParams(serializers.Serializer):
    """Query parameters of ``GET .../ranks/figure/``: how to colour the rank map, which ranks to select."""

    colour = serializers.RegexField(
        r"^[a-z][a-z0-9_.-]{0,39}$", required=False, default="pp",
        error_messages={"invalid": "Give a colouring key such as pp, dp, tp or one the job offers (e.g. saturation)."},
        help_text="pp, dp, tp (cp, ep when the layout has them) or a GPU colouring the job offers "
                  "(saturation, limiter, straggler once scored); default pp.")
    sel_dp = SelectionTextField(help_text=f"select these data-parallel replicas, e.g. {EXAMPLE}")
    sel_pp = SelectionTextField(help_text=f"select these pipeline stages (0-based), e.g. {EXAMPLE}")
    sel_tp = SelectionTextField(help_text=f"select these tensor-parallel lanes, e.g. {EXAMPLE}")
