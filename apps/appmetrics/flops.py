"""Model FLOPs per token, MFU and the GPU's peak: the arithmetic behind a job's efficiency numbers.

Plain Python: no Django. The Django layer (selectors.job_efficiency) turns a job's model config, its
throughput and its GPU model into the numbers of GET .../efficiency/ with these functions.

The count (the PaLM paper's convention, appendix B; the one MFU is usually quoted in):

    FLOPs per token = 6 x N_active  +  12 x L x h x s

* ``N_active``: the weights of the matrix multiplications one token goes through (:func:`active_params`):
  per layer the attention projections, Q and O ``h x h`` each, K and V ``h x (kv_heads x h/heads)`` each
  (grouped-query attention; ``kv_heads = heads`` without it), and the feed-forward network, two matrices
  ``h x f`` (three with SwiGLU: gate, up and down); for a mixture of experts the top-k experts' feed-forward
  networks (``f = moe_ffn_hidden``) plus the router ``h x E``; once per model the logits layer ``h x V``.
  Not counted: the embedding lookup (a gather, no multiplication), biases, norms, softmax, activations.
  The factor 6 is 2 FLOPs per multiply-add, forward (x1) plus backward (x2, gradients of activations and of
  weights).
* ``12 x L x h x s``: the attention scores and their weighted sum (``Q K^T`` and ``A V``, each ``2 x s x h``
  FLOPs per token and layer forward, times 3 for forward and backward), counted over the full ``s x s``
  matrix as PaLM does (Megatron's own count halves it for causal masks).
* No activation recomputation: it is work the hardware does but the model does not need, so MFU (model
  FLOPs utilisation) leaves it out; hardware utilisation (HFU) would add it.

The ``6N`` of Kaplan et al. and of the GPT-3 paper is the first term with N the parameter count; the
attention term adds a few per cent at common sequence lengths.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields

__all__ = [
    "GPU_PEAK_TFLOPS",
    "ModelConfig",
    "active_params",
    "formula_words",
    "gpu_peak_tflops",
    "mfu",
    "model_flops_per_token",
    "saturation_gap_words",
    "total_params",
]

_WHOLE_FIELDS = ("layers", "hidden", "heads", "seq_len", "vocab")  # required
_OPTIONAL_WHOLE = ("ffn_hidden", "kv_heads", "global_batch", "moe_experts", "moe_topk", "moe_ffn_hidden")
_MAX_WHOLE = 10**12  # no layer count, width or vocabulary comes near this


@dataclass(frozen=True)
class ModelConfig:
    """A transformer's shape, what the FLOPs count needs.

    ``layers`` L, ``hidden`` h, ``heads`` attention heads, ``seq_len`` s (tokens per sample), ``vocab`` V
    (Megatron's padded vocabulary when known: the logits layer multiplies with it), ``ffn_hidden`` f (default
    ``4h``; with SwiGLU Megatron's default ``int(4h x 2/3 / 64) x 64``), ``kv_heads`` (grouped-query attention's
    key/value heads, default ``heads``), ``global_batch`` (samples per iteration: tokens per iteration =
    global_batch x seq_len), ``params`` (a stated total, shown beside the counted one, not used in the count),
    ``swiglu``, ``moe_experts`` E, ``moe_topk`` k, ``moe_ffn_hidden`` (an expert's f, default ``ffn_hidden``).
    Invalid values raise ValueError naming the field.
    """

    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    ffn_hidden: int | None = None
    kv_heads: int | None = None
    global_batch: int | None = None
    params: float | None = None
    swiglu: bool = False
    moe_experts: int | None = None
    moe_topk: int | None = None
    moe_ffn_hidden: int | None = None

    def __post_init__(self) -> None:
        for name in _WHOLE_FIELDS:
            _check_whole(name, getattr(self, name), required=True)
        for name in _OPTIONAL_WHOLE:
            _check_whole(name, getattr(self, name), required=False)
        if not isinstance(self.swiglu, bool):
            raise ValueError(f"model config: swiglu is {self.swiglu!r}, not true or false")
        if self.params is not None:
            if isinstance(self.params, bool) or not isinstance(self.params, (int, float)) or not (
                math.isfinite(self.params) and self.params > 0
            ):
                raise ValueError(f"model config: params is {self.params!r}, not a positive number")
        kv_heads = self.kv_heads or self.heads
        if kv_heads > self.heads or self.heads % kv_heads:
            raise ValueError(
                f"model config: kv_heads {kv_heads} must divide heads {self.heads} (grouped-query attention shares "
                "each key/value head among heads / kv_heads query heads)"
            )
        if (self.moe_experts is None) != (self.moe_topk is None):
            missing = "moe_topk" if self.moe_topk is None else "moe_experts"
            raise ValueError(f"model config: {missing} is missing: a mixture of experts needs both moe_experts and "
                             "moe_topk")
        if self.moe_experts is not None and self.moe_topk > self.moe_experts:
            raise ValueError(
                f"model config: moe_topk {self.moe_topk} is more than moe_experts {self.moe_experts}"
            )
        if self.moe_experts is None and self.moe_ffn_hidden is not None:
            raise ValueError("model config: moe_ffn_hidden is given without moe_experts and moe_topk")

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        """A config from plain data (JSON, a parsed log): unknown keys are ignored, whole numbers may come as
        strings or integral floats, ``swiglu`` as a bool or "true"/"false"; None means not given."""
        if not isinstance(data, dict):
            raise ValueError(f"model config: expected an object, got {type(data).__name__}")
        values: dict = {}
        for field in fields(cls):
            if field.name not in data or data[field.name] is None:
                continue
            raw = data[field.name]
            if field.name == "swiglu":
                values["swiglu"] = _as_bool(raw)
            elif field.name == "params":
                values["params"] = _as_number(raw)
            else:
                values[field.name] = _as_whole(field.name, raw)
        for name in _WHOLE_FIELDS:
            if name not in values:
                raise ValueError(f"model config: {name} is missing")
        return cls(**values)

    @property
    def ffn(self) -> int:
        """The dense feed-forward width f (Megatron's defaults when not given)."""
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        if self.swiglu:
            return int(4 * self.hidden * 2 / 3 / 64) * 64
        return 4 * self.hidden

    @property
    def expert_ffn(self) -> int:
        """One expert's feed-forward width (``ffn_hidden`` unless ``moe_ffn_hidden`` is given)."""
        return self.moe_ffn_hidden if self.moe_ffn_hidden is not None else self.ffn

    @property
    def is_moe(self) -> bool:
        return self.moe_experts is not None


def _check_whole(name: str, value, *, required: bool) -> None:
    if value is None and not required:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < _MAX_WHOLE:
        raise ValueError(f"model config: {name} is {value!r}, not a positive whole number")


def _as_whole(name: str, raw) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"model config: {name} is {raw!r}, not a positive whole number")
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        text = raw.strip().replace("_", "")
        if text.isascii() and text.isdigit() and len(text) <= 13:
            return int(text)
        raise ValueError(f"model config: {name} is {raw[:40]!r}, not a positive whole number")
    if isinstance(raw, int):
        return raw
    raise ValueError(f"model config: {name} is {raw!r}, not a positive whole number")


def _as_number(raw) -> float:
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        raise ValueError(f"model config: params is {str(raw)[:40]!r}, not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"model config: params is {str(raw)[:40]!r}, not a positive number")
    return value


def _as_bool(raw) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"model config: swiglu is {str(raw)[:40]!r}, not true or false")


# --------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------
def _attention_params(config: ModelConfig) -> float:
    """Q, K, V and O projections of one layer: 2h^2 + 2 x h x (kv_heads x head_dim)."""
    head_dim = config.hidden / config.heads
    kv_width = (config.kv_heads or config.heads) * head_dim
    return 2 * config.hidden * config.hidden + 2 * config.hidden * kv_width


def _ffn_params(hidden: int, width: int, swiglu: bool) -> float:
    return (3 if swiglu else 2) * hidden * width


def _layer_params(config: ModelConfig, experts: int | None) -> float:
    """One layer's matmul weights; ``experts``: how many experts count (top-k for active, E for total)."""
    params = _attention_params(config)
    if config.is_moe:
        params += experts * _ffn_params(config.hidden, config.expert_ffn, config.swiglu)
        params += config.hidden * config.moe_experts  # the router
    else:
        params += _ffn_params(config.hidden, config.ffn, config.swiglu)
    return params


def active_params(config: ModelConfig) -> float:
    """Matmul weights one token passes through: L x (attention + FFN of the top-k experts + router) + h x V."""
    return config.layers * _layer_params(config, config.moe_topk) + config.hidden * config.vocab


def total_params(config: ModelConfig) -> float:
    """All matmul weights (every expert), same convention as :func:`active_params` (embedding lookup left out);
    equal to it for a dense model."""
    return config.layers * _layer_params(config, config.moe_experts) + config.hidden * config.vocab


def model_flops_per_token(config: ModelConfig) -> float:
    """Training FLOPs per token: 6 x active_params + 12 x layers x hidden x seq_len (see the module docstring:
    forward and backward, no recomputation, logits layer counted, embedding lookup not)."""
    return 6 * active_params(config) + 12 * config.layers * config.hidden * config.seq_len


def mfu(tokens_per_s_per_gpu: float, flops_per_token: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation, a fraction: the model FLOPs a GPU does per second over its dense peak.

    ``tokens_per_s_per_gpu x flops_per_token / (peak_tflops x 10^12)``. Raises ValueError for a value that is
    not a finite number, a negative throughput, or a peak or FLOPs count that is not positive."""
    for name, value in (("tokens_per_s_per_gpu", tokens_per_s_per_gpu), ("flops_per_token", flops_per_token),
                        ("peak_tflops", peak_tflops)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"mfu: {name} is {value!r}, not a finite number")
    if tokens_per_s_per_gpu < 0:
        raise ValueError(f"mfu: tokens_per_s_per_gpu is {tokens_per_s_per_gpu}, below zero")
    if flops_per_token <= 0 or peak_tflops <= 0:
        raise ValueError("mfu: flops_per_token and peak_tflops must be above zero")
    return tokens_per_s_per_gpu * flops_per_token / (peak_tflops * 1e12)


# --------------------------------------------------------------------------------------------
# Peaks
# --------------------------------------------------------------------------------------------
# Dense (not 2:4 sparse) BF16 tensor-core peaks in TFLOP/s per GPU, from the vendors' data sheets
# (NVIDIA prints the sparse figure with an asterisk: half of it is the dense one). V100 has no BF16: its FP16
# tensor peak. Matched on whole name parts (see gpu_peak_tflops), most specific first.
GPU_PEAK_TFLOPS: tuple[tuple[tuple[str, ...], float, str], ...] = (
    (("gh200",), 989.0, "GH200 (H100 in the Grace Hopper superchip)"),
    (("gb200",), 2500.0, "GB200 (per Blackwell GPU)"),
    (("h100", "pcie"), 756.0, "H100 PCIe"),
    (("h100", "nvl"), 835.0, "H100 NVL"),
    (("h100",), 989.0, "H100 SXM"),
    (("h800", "pcie"), 756.0, "H800 PCIe"),
    (("h800",), 989.0, "H800 SXM"),
    (("h200",), 989.0, "H200"),
    (("b200",), 2250.0, "B200"),
    (("a100",), 312.0, "A100"),
    (("a800",), 312.0, "A800"),
    (("l40s",), 362.0, "L40S"),
    (("v100",), 125.0, "V100 (FP16 tensor; no BF16)"),
    (("mi300x",), 1307.0, "AMD MI300X"),
    (("mi250x",), 383.0, "AMD MI250X"),
)


def _name_parts(name: str) -> set[str]:
    return {part for part in re.split(r"[^a-z0-9]+", name.lower()) if part}


def gpu_peak_tflops(gpu_model_name: str) -> float | None:
    """The dense BF16 peak of a GPU named as nvidia-smi / DCGM names it ("NVIDIA GH200 480GB",
    "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"), None when the model is unknown.

    Matched on whole parts of the name, so "GH200" is not taken for "H200"; an H100 without "PCIe" or "NVL" in
    its name is the SXM one (nvidia-smi names it "H100 80GB HBM3")."""
    if not isinstance(gpu_model_name, str) or not gpu_model_name.strip():
        return None
    parts = _name_parts(gpu_model_name[:200])
    for needed, peak, _ in GPU_PEAK_TFLOPS:
        if all(part in parts for part in needed):
            return peak
    return None


# --------------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------------
def _billions(value: float) -> str:
    if value >= 1e9:
        return f"{value / 1e9:,.1f} B"
    return f"{value / 1e6:,.1f} M"


def formula_words(config: ModelConfig) -> str:
    """The count written out with the config's numbers, for the efficiency page and the report."""
    active = active_params(config)
    attention = 12 * config.layers * config.hidden * config.seq_len
    total = model_flops_per_token(config)
    parts = [f"{config.layers} layers", f"hidden {config.hidden}", f"{config.heads} heads"]
    if config.kv_heads and config.kv_heads != config.heads:
        parts.append(f"{config.kv_heads} key/value heads")
    parts.append(f"FFN {config.expert_ffn if config.is_moe else config.ffn}{' SwiGLU' if config.swiglu else ''}")
    if config.is_moe:
        parts.append(f"top-{config.moe_topk} of {config.moe_experts} experts")
    parts.append(f"vocabulary {config.vocab:,}")
    shape = ", ".join(parts)
    moe = f" of {_billions(total_params(config))} in all" if config.is_moe else ""
    return (
        f"6 x {_billions(active)} active parameters{moe} + 12 x {config.layers} layers x {config.hidden} hidden x "
        f"{config.seq_len} tokens = {total / 1e9:,.1f} GFLOP per token ({shape}; forward and backward, no "
        f"recomputation; logits layer counted, embedding lookup not; attention {attention / total:.0%} of it)"
    )


_FRACTIONS = ((0.25, "a quarter"), (1 / 3, "a third"), (0.5, "half"), (2 / 3, "two thirds"),
              (0.75, "three quarters"))


def _share_words(share: float) -> str:
    for value, words in _FRACTIONS:
        if abs(share - value) <= 0.03:
            return words
    return f"{share:.0%}".replace("%", " %")


def _percent(value: float) -> str:
    return f"{value * 100:.0f} %"


def saturation_gap_words(tensor_active: float | None, mfu: float | None) -> str:
    """How MFU compares with how busy the tensor pipes were (DCGM's tensor-active, a fraction), in one line.

    MFU counts only the model's FLOPs; tensor activity counts every cycle a tensor pipe worked. MFU well below
    it means tensor work the model does not need (activation recomputation, padding) or pipes running below
    their peak rate; about equal means the tensor pipes are the limit to raise; MFU clearly above it means the
    inputs disagree (model config, GPU peak or FP8 counted against the BF16 peak)."""
    known = [value is not None and isinstance(value, (int, float)) and math.isfinite(value)
             for value in (tensor_active, mfu)]
    if not known[0] and not known[1]:
        return "MFU and tensor activity unknown: no model config or throughput, and no DCGM profiling metrics"
    if not known[1]:
        return (f"tensor pipes {_percent(tensor_active)} busy; MFU unknown (it needs the model config, the throughput "
                "and the GPU's peak)")
    if not known[0]:
        return f"MFU {_percent(mfu)}; tensor activity unknown (no DCGM profiling metrics for this job)"
    head = f"tensor pipes {_percent(tensor_active)} busy, MFU {_percent(mfu)}"
    if tensor_active <= 0:
        return f"{head}: the tensor pipes were idle, so MFU cannot be explained by them"
    gap = 1 - mfu / tensor_active
    if gap > 0.1:
        return f"{head}: {_share_words(gap)} of tensor work is recomputation, padding or below-peak rate"
    if gap >= -0.1:
        return (f"{head}: nearly all tensor work is model FLOPs; to go faster, keep the tensor pipes busier "
                "(communication, pipeline bubbles, data loading)")
    return (f"{head}: MFU above tensor activity is not possible at the stated peak; check the model config and the "
            "GPU peak (FP8 training counted against the BF16 peak?)")
