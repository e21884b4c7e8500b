from rest_framework import serializers

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
    ranks = RankPlacementSerializer(many=True, required=False, allow_null=True, max_length=MAX_RANKS,
                                    help_text="The exact rank → (host, local_rank) map; Slurm's block distribution when omitted.")


class LogUploadSerializer(serializers.Serializer):
    log = serializers.FileField(help_text="Rank-0 output of the job (Megatron arguments dump, srun -l labels, NCCL INFO lines).")
