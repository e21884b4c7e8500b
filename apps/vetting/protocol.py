"""Check a vetnode protocol (its ``config.yaml``) before it meets a job.

vetnode loads its evaluations with pydantic and *drops* any whose YAML does not validate, printing
only "Skipped: ..." — the nodes then pass vetting without that test. This validator reports every
such problem up front, at its line and column, with the fix: unknown or renamed evaluation types,
missing or mistyped parameters, requirement lists other than the exact ones vetnode accepts,
impossible values (a memory fraction of 20 instead of 0.2), and the unit trap of bandwidth
thresholds: vetnode reads ``min_bandwidth: 15 GB/s`` with binary multipliers (15 × 2^30 B/s) but
reports measured bandwidth in decimal GB/s (÷ 10^9), so the threshold is 16.1 "reported GB/s".

Facts from vetnode 0.1.x (``reference/edf-vetnode-slurm.md`` §B.3). Plain Python: no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?i?B)?\s*$", re.IGNORECASE)
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?i?B)/s\s*$", re.IGNORECASE)
_BINARY = {"b": 1, "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40, "pb": 2**50,
           "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50}

TORCH = "torch"
_CUDA12 = ["cuda-python==12.*", "numpy"]
_CUDA13 = ["cuda-python==13.*", "numpy"]
_TORCH_LISTS = [[[TORCH, "--index-url", f"https://download.pytorch.org/whl/{index}"], "numpy"]
                for index in ("cu129", "cu130", "nightly/rocm7.1")]


@dataclass(frozen=True)
class Param:
    kind: str  # int, number, fraction, str, size, rate, choice, map, warmup
    required: bool = False
    choices: tuple = ()
    default: object = None
    note: str = ""


@dataclass(frozen=True)
class EvalType:
    path: str
    params: dict
    requirements: tuple | None = None  # the exact lists vetnode accepts; None: any list (or none)
    needs_scheduler: bool = False
    note: str = ""

    @property
    def short(self) -> str:
        return self.path.rsplit(".", 1)[-1]


_WARMUP = Param("warmup", note="payload (a size, default 256 MB) and runs (default 3)")
EVAL_TYPES = {spec.path: spec for spec in (
    EvalType("vetnode.evaluations.gpu_eval.GPUEval", {
        "max_temp": Param("int", True, note="°C; every GPU must be cooler (idle vetting at Alps: 30)"),
        "max_used_memory": Param("fraction", True, note="share of GPU memory in use, 0-1 (Alps: 0.2)")}),
    EvalType("vetnode.evaluations.cuda_eval.CUDAEval", {"cuda_home": Param("str", True, note="e.g. /usr/local/cuda")},
             requirements=(_CUDA12, _CUDA13)),
    EvalType("vetnode.evaluations.env_var_eval.EnvVarEval", {
        "expected": Param("map", True, note="variable: value, or null for 'must be set'")}),
    EvalType("vetnode.evaluations.nccl_lib_eval.NcclLibEval", {
        "payload": Param("size", default="4 GB"), "method": Param("choice", choices=("allreduce",), default="allreduce"),
        "topology": Param("choice", choices=("intranode", "internode", "full"), default="full"),
        "warmup": _WARMUP, "min_bandwidth": Param("rate", default="15 GB/s")},
             requirements=(["cuda-python", "numpy"],), needs_scheduler=True),
    EvalType("vetnode.evaluations.nccl_pytorch_eval.NcclPytorchEval", {
        "scheduler": Param("choice", True, choices=("slurm", "openPBS")), "payload": Param("size", default="4 GB"),
        "method": Param("choice", choices=("broadcast", "roundrobin", "allreduce", "gather", "allreduce-gather"), default="broadcast"),
        "warmup": Param("warmup", True, note=_WARMUP.note), "min_bandwidth": Param("rate", default="15 GB/s")},
             requirements=tuple(_TORCH_LISTS), needs_scheduler=True),
    EvalType("vetnode.evaluations.rccl_lib_eval.RcclLibEval", {
        "payload": Param("size", default="4 GB"), "method": Param("choice", choices=("allreduce",), default="allreduce"),
        "topology": Param("choice", choices=("intranode", "internode", "full"), default="full"),
        "warmup": _WARMUP, "min_bandwidth": Param("rate", default="15 GB/s")}, needs_scheduler=True, note="AMD GPUs"),
    EvalType("vetnode.evaluations.internet_access.InternetAccessEval", {
        "host": Param("str", True), "port": Param("int", default=53), "timeout": Param("number", default=3)}),
    EvalType("vetnode.evaluations.random.RandomEval", {}, note="passes or fails at random: for testing vetnode itself"),
)}
RENAMED_TYPES = {
    "vetnode.evaluations.nccl_eval.NCCLEval": "split in May 2025 into vetnode.evaluations.nccl_pytorch_eval.NcclPytorchEval "
                                              "(torch.distributed) and vetnode.evaluations.nccl_lib_eval.NcclLibEval (libnccl)",
}
COMMON_KEYS = {"name", "type", "requirements"}


@dataclass
class Finding:
    severity: str  # error, warning, info
    line: int
    column: int
    path: str
    message: str
    hint: str = ""


@dataclass
class ProtocolReport:
    findings: list[Finding] = field(default_factory=list)
    name: str = ""
    evals: list[dict] = field(default_factory=list)  # name, type, thresholds as vetnode will apply them

    @property
    def valid(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


def parse_size(text) -> int | None:
    """Bytes of a vetnode size ("4 GB", "256MB", 1024): binary multipliers, as vetnode reads them."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    match = _SIZE.match(str(text)) if isinstance(text, (str, float)) else None
    if not match:
        return None
    unit = (match.group(2) or "B").lower()
    return int(float(match.group(1)) * _BINARY[unit])


def parse_rate(text) -> float | None:
    """Bytes/s of a vetnode bandwidth ("15 GB/s"): binary multipliers, as vetnode reads them."""
    match = _RATE.match(str(text)) if isinstance(text, str) else None
    if not match:
        return None
    return float(match.group(1)) * _BINARY[match.group(2).lower()]


def validate_protocol(text: str) -> ProtocolReport:
    report = ProtocolReport()
    add = report.findings.append
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        add(Finding("error", mark.line + 1 if mark else 1, mark.column + 1 if mark else 1, "", f"not YAML: {problem}"))
        return report
    if root is None:
        add(Finding("error", 1, 1, "", "the protocol is empty", "start with name:, then evals: (a list of evaluations)"))
        return report
    if not isinstance(root, yaml.MappingNode):
        add(_at(root, "", "error", "a protocol is a mapping with name, scheduler and evals"))
        return report
    top = _mapping(root, "", add)
    known_top = {"name", "scheduler", "pip", "evals"}
    for key, (key_node, _) in top.items():
        if key not in known_top:
            add(_at(key_node, key, "warning", f"vetnode does not read '{key}'", f"known keys: {', '.join(sorted(known_top))}"))
    if "name" not in top:
        add(Finding("error", 1, 1, "name", "the protocol has no name", "add name: <label>, shown in vetnode's output"))
    else:
        name = _scalar(top["name"][1])
        if not isinstance(name, str) or not name.strip():
            add(_at(top["name"][1], "name", "error", "name must be text"))
        else:
            report.name = name
    scheduler = "slurm"
    if "scheduler" in top:
        scheduler = _scalar(top["scheduler"][1])
        if scheduler not in ("slurm", "standalone"):
            add(_at(top["scheduler"][1], "scheduler", "error", f"scheduler must be slurm or standalone, not {scheduler!r}",
                    "slurm (the default) reads SLURM_PROCID, SLURM_NTASKS ... and the job's node list"))
    if "pip" in top:
        pip_node = top["pip"][1]
        if not isinstance(pip_node, yaml.MappingNode):
            add(_at(pip_node, "pip", "error", "pip is a mapping with index_url"))
        else:
            for key, (key_node, value_node) in _mapping(pip_node, "pip", add).items():
                if key != "index_url":
                    add(_at(key_node, f"pip.{key}", "warning", f"vetnode reads only pip.index_url, not pip.{key}"))
                elif not str(_scalar(value_node) or "").startswith(("http://", "https://")):
                    add(_at(value_node, "pip.index_url", "error", "index_url must be an http(s) URL of a Python package index"))
    if "evals" not in top:
        add(Finding("error", 1, 1, "evals", "the protocol has no evals", "add evals: with at least one evaluation"))
        return report
    evals_node = top["evals"][1]
    if not isinstance(evals_node, yaml.SequenceNode) or not evals_node.value:
        add(_at(evals_node, "evals", "error", "evals must be a non-empty list of evaluations"))
        return report
    seen_names: dict[str, int] = {}
    for index, item in enumerate(evals_node.value):
        _check_eval(item, f"evals[{index}]", scheduler, seen_names, report)
    return report


def _check_eval(node, path, scheduler, seen_names, report) -> None:
    add = report.findings.append
    if not isinstance(node, yaml.MappingNode):
        add(_at(node, path, "error", "each evaluation is a mapping with name and type"))
        return
    keys = _mapping(node, path, add)
    name = _scalar(keys["name"][1]) if "name" in keys else None
    label = f"evaluation '{name}'" if name else f"evaluation {path}"
    if not isinstance(name, str) or not name.strip():
        add(_at(node, f"{path}.name", "error", f"{label} has no name", "vetnode drops evaluations that fail validation"))
    elif name in seen_names:
        add(_at(keys["name"][1], f"{path}.name", "warning", f"a second evaluation is named '{name}' (first at line {seen_names[name]})",
                "results are reported by name: give each evaluation its own"))
    else:
        seen_names[name] = keys["name"][1].start_mark.line + 1
    if "type" not in keys:
        add(_at(node, f"{path}.type", "error", f"{label} has no type", "e.g. type: vetnode.evaluations.gpu_eval.GPUEval"))
        return
    type_node = keys["type"][1]
    type_path = str(_scalar(type_node) or "")
    spec = EVAL_TYPES.get(type_path)
    if spec is None:
        if type_path in RENAMED_TYPES:
            add(_at(type_node, f"{path}.type", "error", f"{type_path} no longer exists: {RENAMED_TYPES[type_path]}",
                    "vetnode would skip this evaluation and pass the node without it"))
        elif type_path.startswith("shrike."):
            add(_at(type_node, f"{path}.type", "error", "shrike was renamed vetnode", f"use {type_path.replace('shrike.', 'vetnode.', 1)}"))
        else:
            close = [known for known in EVAL_TYPES if known.rsplit(".", 1)[-1].lower() == type_path.rsplit(".", 1)[-1].lower()]
            add(_at(type_node, f"{path}.type", "error", f"unknown evaluation type {type_path!r}: vetnode would skip it and pass the node without it",
                    f"did you mean {close[0]}?" if close else "known types: " + ", ".join(t.short for t in EVAL_TYPES.values())))
        return
    if spec.note and spec.path.endswith("RandomEval"):
        add(_at(type_node, f"{path}.type", "warning", f"{spec.short} {spec.note}", "remove it from a production protocol"))
    if spec.needs_scheduler and scheduler == "standalone":
        add(_at(type_node, f"{path}.type", "error", f"{spec.short} needs a scheduler (its ranks rendezvous through it); the protocol says standalone",
                "use scheduler: slurm"))
    _check_requirements(keys.get("requirements"), spec, path, label, add, node)
    evaluation = {"name": name, "type": spec.short}
    for key, (key_node, value_node) in keys.items():
        if key in COMMON_KEYS:
            continue
        param = spec.params.get(key)
        if param is None:
            add(_at(key_node, f"{path}.{key}", "warning", f"{spec.short} has no parameter '{key}': it is ignored",
                    "parameters: " + (", ".join(spec.params) or "none")))
            continue
        _check_param(key, param, value_node, f"{path}.{key}", spec, add, evaluation)
    for key, param in spec.params.items():
        if param.required and key not in keys:
            add(_at(node, f"{path}.{key}", "error", f"{label} ({spec.short}) needs {key}" + (f": {param.note}" if param.note else ""),
                    "vetnode would skip this evaluation and pass the node without it"))
        elif key not in keys and param.kind == "rate":
            evaluation[key] = _rate_summary(param.default)
    report.evals.append(evaluation)


def _check_requirements(entry, spec, path, label, add, node) -> None:
    if spec.requirements is None:
        return
    allowed = " or ".join(str(list(option)) for option in spec.requirements)
    if entry is None:
        add(_at(node, f"{path}.requirements", "error", f"{label} ({spec.short}) needs requirements: exactly {allowed}",
                "vetnode pip-installs them on every node and accepts no other list"))
        return
    key_node, value_node = entry
    value = yaml.safe_load(yaml.serialize(value_node))
    if value not in [list(option) for option in spec.requirements]:
        add(_at(value_node, f"{path}.requirements", "error", f"{spec.short} accepts exactly {allowed}, not {value}",
                "vetnode validates the list literally; anything else makes it skip the evaluation"))


def _check_param(key, param, node, path, spec, add, evaluation) -> None:
    value = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    kind = param.kind
    if kind in ("map", "warmup"):
        if not isinstance(node, yaml.MappingNode):
            add(_at(node, path, "error", f"{key} must be a mapping" + (f": {param.note}" if param.note else "")))
            return
        if kind == "warmup":
            for sub, (sub_key, sub_value) in _mapping(node, path, add).items():
                if sub == "payload":
                    _check_param("payload", Param("size"), sub_value, f"{path}.payload", spec, add, {})
                elif sub == "runs":
                    _check_param("runs", Param("int"), sub_value, f"{path}.runs", spec, add, {})
                else:
                    add(_at(sub_key, f"{path}.{sub}", "warning", f"warmup has no '{sub}': it is ignored", "warmup takes payload and runs"))
        else:
            for sub, (sub_key, sub_value) in _mapping(node, path, add).items():
                if isinstance(sub_value, yaml.ScalarNode) and sub_value.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:null"):
                    add(_at(sub_value, f"{path}.{sub}", "warning", f"{sub} is compared as text: quote it",
                            f"write {sub}: \"{sub_value.value}\""))
        return
    if not isinstance(node, yaml.ScalarNode):
        add(_at(node, path, "error", f"{key} must be a single value"))
        return
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            add(_at(node, path, "error", f"{key} must be a whole number, not {node.value!r}" + (f" ({param.note})" if param.note else "")))
        elif key == "max_temp" and not 15 <= value <= 110:
            add(_at(node, path, "warning", f"max_temp {value} °C is outside what a GPU reports (15-110 °C)"))
        else:
            evaluation[key] = value
    elif kind == "number":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            add(_at(node, path, "error", f"{key} must be a positive number, not {node.value!r}"))
    elif kind == "fraction":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            add(_at(node, path, "error", f"{key} must be a number from 0 to 1, not {node.value!r}"))
        elif not 0 <= value <= 1:
            add(_at(node, path, "error", f"{key} is a fraction from 0 to 1, not {value}",
                    f"for {value} % write {value / 100:g}" if 1 < value <= 100 else ""))
        else:
            evaluation[key] = value
    elif kind == "str":
        if not isinstance(value, str) or not value.strip():
            add(_at(node, path, "error", f"{key} must be text" + (f" ({param.note})" if param.note else "")))
    elif kind == "choice":
        if value not in param.choices:
            add(_at(node, path, "error", f"{key} must be one of {', '.join(param.choices)}, not {node.value!r}"))
        else:
            evaluation[key] = value
    elif kind == "size":
        if parse_size(value) is None:
            add(_at(node, path, "error", f"{key} must be a size such as 4 GB or 256 MB, not {node.value!r}"))
    elif kind == "rate":
        rate = parse_rate(value)
        if rate is None:
            add(_at(node, path, "error", f"{key} must be a bandwidth such as 15 GB/s, not {node.value!r}"))
            return
        summary = _rate_summary(value)
        evaluation[key] = summary
        add(_at(node, path, "warning",
                f"vetnode reads {key}: {value} as {summary['bytes_per_s']:.4g} B/s (binary units) but reports bandwidth in decimal "
                f"GB/s: a node must report more than {summary['reported_gbs']:.2f} GB/s to pass",
                f"to require {summary['written']:.2f} GB/s as reported, write {summary['written'] * 1e9 / 2**30:.2f} GB/s"))


def _rate_summary(text) -> dict:
    rate = parse_rate(text) or 0.0
    written = float(_RATE.match(str(text)).group(1)) if _RATE.match(str(text)) else 0.0
    return {"written": written, "bytes_per_s": rate, "reported_gbs": round(rate / 1e9, 3)}


def _mapping(node, path, add) -> dict:
    """key -> (key node, value node); duplicate keys are findings (YAML keeps the last silently)."""
    out = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key in out:
            add(_at(key_node, f"{path}.{key}".lstrip("."), "error", f"'{key}' appears twice; YAML keeps only the last",
                    f"first at line {out[key][0].start_mark.line + 1}"))
        out[key] = (key_node, value_node)
    return out


def _scalar(node):
    if not isinstance(node, yaml.ScalarNode):
        return None
    try:
        return yaml.safe_load(yaml.serialize(node))
    except yaml.YAMLError:
        return node.value


def _at(node, path, severity, message, hint="") -> Finding:
    mark = node.start_mark
    return Finding(severity, mark.line + 1, mark.column + 1, path, message, hint)
