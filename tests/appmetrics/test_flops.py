"""apps.appmetrics.flops: model FLOPs per token, MFU, GPU peaks, the words about the gap.

The formula under test (PaLM appendix B convention, no recomputation):

    FLOPs per token = 6 x N_active + 12 x L x h x s
    N_active = L x (attention + FFN [+ router]) + h x V          (embedding lookup not counted)
    attention = 2h^2 + 2 x h x (kv_heads x h/heads)               (Q, O; K, V with grouped-query attention)
    FFN = 2 x h x f, or 3 x h x f with SwiGLU; MoE: top-k experts' FFN + router h x E

Every expected number below is worked out in the comments, not taken from the code.
"""
import pytest

from apps.appmetrics.flops import (
    ModelConfig,
    active_params,
    formula_words,
    gpu_peak_tflops,
    mfu,
    model_flops_per_token,
    saturation_gap_words,
    total_params,
)


def test_small_dense_config_by_hand():
    # L=2, h=8, heads=2 (head_dim 4), s=16, V=10, f = 4h = 32 by default, no GQA, no SwiGLU.
    # attention per layer: Q 8x8=64, K 8x(2x4)=64, V 64, O 64 -> 256
    # FFN per layer: 2 x 8 x 32 = 512
    # per layer 768; x2 layers = 1536; logits 8 x 10 = 80 -> N_active = 1616
    # 6 x 1616 = 9696; attention scores 12 x 2 x 8 x 16 = 3072 -> 12768 FLOPs per token
    config = ModelConfig(layers=2, hidden=8, heads=2, seq_len=16, vocab=10)
    assert active_params(config) == 1616
    assert model_flops_per_token(config) == 12768


def test_gpt3_175b_is_close_to_the_papers_6n():
    # GPT-3 175B: L=96, h=12288, 96 heads, s=2048, V=50257, f=4h.
    # per layer 4h^2 (attention) + 8h^2 (FFN) = 12 x 150,994,944 = 1,811,939,328; x96 = 173,946,175,488
    # logits 12288 x 50257 = 617,558,016 -> N_active = 174,563,733,504 (the paper: "175B")
    # 6N = 1,047,382,401,024; attention 12 x 96 x 12288 x 2048 = 28,991,029,248 -> 1,076,373,430,272
    config = ModelConfig(layers=96, hidden=12288, heads=96, seq_len=2048, vocab=50257)
    assert active_params(config) == 174_563_733_504
    assert model_flops_per_token(config) == 1_076_373_430_272
    # Against the paper's 6 x 175e9 = 1.05e12: 2.5 % more (the attention term), within 3 %.
    ratio = model_flops_per_token(config) / (6 * 175e9)
    assert 1.0 < ratio < 1.03


def test_llama_like_gqa_swiglu():
    # Llama-2-70B-like: L=80, h=8192, 64 heads (head_dim 128), 8 KV heads, f=28672 SwiGLU, V=32000, s=4096.
    # attention: 2 x 8192^2 = 134,217,728 + 2 x 8192 x (8 x 128) = 16,777,216 -> 150,994,944
    # FFN: 3 x 8192 x 28672 = 704,643,072; per layer 855,638,016; x80 = 68,451,041,280
    # logits 8192 x 32000 = 262,144,000 -> N_active = 68,713,185,280 (published 69.0B includes the 0.26B
    # embedding, not counted here)
    # 6N = 412,279,111,680; attention 12 x 80 x 8192 x 4096 = 32,212,254,720 -> 444,491,366,400
    config = ModelConfig(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, swiglu=True,
                         vocab=32000, seq_len=4096)
    assert active_params(config) == 68_713_185_280
    assert model_flops_per_token(config) == 444_491_366_400
    # Without GQA, K and V would be full h x h: 2 x (8192^2 - 8192 x 1024) x 80 = 9,395,240,960 more.
    full = ModelConfig(layers=80, hidden=8192, heads=64, ffn_hidden=28672, swiglu=True, vocab=32000, seq_len=4096)
    assert active_params(full) - active_params(config) == 9_395_240_960


def test_mixtral_like_moe_active_params_near_published():
    # Mixtral-8x7B-like: L=32, h=4096, 32 heads (head_dim 128), 8 KV heads, E=8 experts top-2,
    # expert f=14336 SwiGLU, V=32000, s=4096.
    # attention: 2 x 4096^2 = 33,554,432 + 2 x 4096 x 1024 = 8,388,608 -> 41,943,040
    # experts: 2 x 3 x 4096 x 14336 = 352,321,536; router 4096 x 8 = 32,768
    # per layer 394,297,344; x32 = 12,617,515,008; logits 4096 x 32000 = 131,072,000 -> 12,748,587,008
    # published: ~12.9B active (with the 0.13B embedding): within 2 %.
    # all experts: per layer 41,943,040 + 8 x 176,160,768 + 32,768 = 1,451,261,952; x32 + logits
    #   = 46,571,454,464 (published 46.7B with the embedding)
    # FLOPs: 6 x 12,748,587,008 = 76,491,522,048 + 12 x 32 x 4096 x 4096 = 6,442,450,944 -> 82,933,972,992
    config = ModelConfig(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, swiglu=True, vocab=32000,
                         seq_len=4096, moe_experts=8, moe_topk=2)
    assert active_params(config) == 12_748_587_008
    assert abs(active_params(config) - 12.9e9) / 12.9e9 < 0.02
    assert total_params(config) == 46_571_454_464
    assert model_flops_per_token(config) == 82_933_972_992
    # top-1 instead of top-2: one expert's FFN (176,160,768) less per layer
    top1 = ModelConfig(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, swiglu=True, vocab=32000,
                       seq_len=4096, moe_experts=8, moe_topk=1)
    assert active_params(config) - active_params(top1) == 32 * 176_160_768


def test_moe_ffn_hidden_is_the_experts_width():
    # L=1, h=8, heads=1, V=1, f=32 dense width, experts of width 4, E=4, top-1, no SwiGLU:
    # attention 4 x 64 = 256; expert 2 x 8 x 4 = 64; router 8 x 4 = 32; logits 8 -> 360
    config = ModelConfig(layers=1, hidden=8, heads=1, seq_len=1, vocab=1, ffn_hidden=32, moe_experts=4, moe_topk=1,
                         moe_ffn_hidden=4)
    assert active_params(config) == 360


def test_swiglu_default_width_is_megatrons():
    # Megatron: ffn_hidden_size = int(4h x 2/3 / 64) x 64 with SwiGLU: h=4096 -> int(170.67) x 64 = 10880
    assert ModelConfig(layers=1, hidden=4096, heads=32, seq_len=1, vocab=1, swiglu=True).ffn == 10880
    assert ModelConfig(layers=1, hidden=4096, heads=32, seq_len=1, vocab=1).ffn == 16384


def test_mfu_of_the_apertus_figure_by_hand():
    # 723 tokens/s/GPU on a 70B dense model at 6N: 723 x 4.2e11 = 3.0366e14 FLOP/s; / 989e12 = 0.30704
    assert mfu(723, 6 * 70e9, 989) == pytest.approx(0.307037, rel=1e-5)
    # With the Llama-like 70B count above: 723 x 444,491,366,400 = 3.213673e14; / 989e12 = 0.324942
    config = ModelConfig(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, swiglu=True,
                         vocab=32000, seq_len=4096)
    assert mfu(723, model_flops_per_token(config), gpu_peak_tflops("NVIDIA GH200 480GB")) == pytest.approx(
        0.324942, rel=1e-5)


@pytest.mark.parametrize("bad", [(float("nan"), 1.0, 1.0), (-1.0, 1.0, 1.0), (1.0, 0.0, 1.0), (1.0, 1.0, 0.0),
                                 (1.0, 1.0, "989")])
def test_mfu_refuses_bad_inputs(bad):
    with pytest.raises(ValueError):
        mfu(*bad)


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA GH200 480GB", 989.0),
    ("NVIDIA GH200 120GB", 989.0),
    ("NVIDIA H100 80GB HBM3", 989.0),
    ("NVIDIA H100 PCIe", 756.0),
    ("NVIDIA H100 NVL", 835.0),
    ("NVIDIA H200", 989.0),
    ("NVIDIA A100-SXM4-80GB", 312.0),
    ("NVIDIA A100 80GB PCIe", 312.0),
    ("NVIDIA B200", 2250.0),
    ("NVIDIA GB200", 2500.0),
    ("Tesla V100-SXM2-32GB", 125.0),
    ("AMD Instinct MI300X", 1307.0),
])
def test_gpu_peak_by_name_parts(name, peak):
    assert gpu_peak_tflops(name) == peak


@pytest.mark.parametrize("name", ["", "   ", "NVIDIA GeForce RTX 4090", "H1000", "xGH200x", None])
def test_gpu_peak_unknown_is_none(name):
    assert gpu_peak_tflops(name) is None


def test_from_dict_ignores_unknown_keys_and_coerces():
    config = ModelConfig.from_dict({"layers": "80", "hidden": 8192.0, "heads": 64, "seq_len": 4096, "vocab": 32000,
                                    "kv_heads": 8, "swiglu": "true", "world_size": 512, "tp": 4, "params": "7e10",
                                    "moe_experts": None})
    assert (config.layers, config.hidden, config.kv_heads, config.swiglu, config.params) == (80, 8192, 8, True, 7e10)
    assert config.moe_experts is None


@pytest.mark.parametrize("data, field", [
    ({"hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1}, "layers"),
    ({"layers": 0, "hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1}, "layers"),
    ({"layers": 2, "hidden": "wide", "heads": 1, "seq_len": 1, "vocab": 1}, "hidden"),
    ({"layers": 2, "hidden": 8.5, "heads": 1, "seq_len": 1, "vocab": 1}, "hidden"),
    ({"layers": 2, "hidden": 8, "heads": True, "seq_len": 1, "vocab": 1}, "heads"),
    ({"layers": 2, "hidden": 8, "heads": 4, "kv_heads": 3, "seq_len": 1, "vocab": 1}, "kv_heads"),
    ({"layers": 2, "hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1, "swiglu": "yes"}, "swiglu"),
    ({"layers": 2, "hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1, "moe_experts": 8}, "moe_topk"),
    ({"layers": 2, "hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1, "moe_experts": 2, "moe_topk": 3}, "moe_topk"),
    ({"layers": 2, "hidden": 8, "heads": 1, "seq_len": 1, "vocab": 1, "params": -5}, "params"),
])
def test_from_dict_names_the_bad_field(data, field):
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_dict(data)


def test_formula_words_show_the_numbers():
    config = ModelConfig(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, swiglu=True, vocab=32000,
                         seq_len=4096, moe_experts=8, moe_topk=2)
    words = formula_words(config)
    # 12.75 B active of 46.57 B; 82.9 GFLOP per token
    for part in ("6 x 12.7 B active", "46.6 B in all", "12 x 32 layers x 4096 hidden x 4096 tokens", "82.9 GFLOP",
                 "top-2 of 8 experts", "no recomputation", "embedding lookup not"):
        assert part in words


def test_gap_words_mfu_well_below_tensor_activity():
    # 1 - 0.41 / 0.62 = 0.339: a third
    words = saturation_gap_words(0.62, 0.41)
    assert words.startswith("tensor pipes 62 % busy, MFU 41 %")
    assert "a third of tensor work" in words


def test_gap_words_about_equal():
    words = saturation_gap_words(0.45, 0.44)
    assert "nearly all tensor work is model FLOPs" in words


def test_gap_words_mfu_above_tensor_activity_blames_the_inputs():
    assert "check the model config and the GPU peak" in saturation_gap_words(0.30, 0.45)


@pytest.mark.parametrize("tensor, value, expected", [
    (None, 0.4, "tensor activity unknown"),
    (0.6, None, "MFU unknown"),
    (None, None, "MFU and tensor activity unknown"),
    (float("nan"), 0.4, "tensor activity unknown"),
])
def test_gap_words_missing_values(tensor, value, expected):
    assert expected in saturation_gap_words(tensor, value)
