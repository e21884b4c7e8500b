"""The job comparison: two or more jobs side by side (config, layout, placement, throughput, MFU, saturation,
stragglers, energy per token) with the differences marked, a verdict in words, and the scaling view across the
runs that train the same model.

Django side: this module gathers what other apps already know about each job (the ranks layout, the placement of
its nodes on the dragonfly, the saturation score, the efficiency selector); the arithmetic of differences and scaling
is the plain module :mod:`apps.appmetrics.comparison`. Callers pass jobs the user may see (the API and the page look
each one up with ``apps.jobs.selectors.job_get_for_user`` first).
"""
from __future__ import annotations

from typing import Any

from django.urls import reverse

from apps.jobs.selectors import job_get_for_user, job_list_for_user
from apps.ranks.selectors import job_layout_get
from apps.saturation.models import JobSaturation
from apps.topology.placement import UnknownNodesError
from apps.topology.selectors import topology_index_current

from . import comparison
from .models import MODEL_FIELDS, JobModelConfig
from .selectors import job_efficiency, model_config, model_config_dict

#: The fields that make two runs "the same model": its shape, not its batch or the GPU it ran on.
SHAPE_KEYS = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "seq_len", "vocab", "swiglu",
              "moe_experts", "moe_topk", "moe_ffn_hidden")
LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "vpp")

# The side-by-side table: (key, label, section, format). Formats tell the page how to write a value:
# text, int, float (3 significant digits), percent (a 0-1 share), score (0-100), joule.
ROWS: tuple[tuple[str, str, str, str], ...] = (
    ("name", "Name", "Job", "text"),
    ("user", "User", "Job", "text"),
    ("state", "State", "Job", "text"),
    ("gpus", "GPUs", "Resources", "int"),
    ("nodes", "Nodes", "Resources", "int"),
    ("gpu_model", "GPU model", "Resources", "text"),
    ("model.params", "Parameters", "Model", "int"),
    ("model.layers", "Layers", "Model", "int"),
    ("model.hidden", "Hidden size", "Model", "int"),
    ("model.ffn_hidden", "FFN hidden size", "Model", "int"),
    ("model.heads", "Attention heads", "Model", "int"),
    ("model.kv_heads", "KV heads (GQA)", "Model", "int"),
    ("model.seq_len", "Sequence length", "Model", "int"),
    ("model.vocab", "Vocabulary", "Model", "int"),
    ("model.global_batch", "Global batch", "Model", "int"),
    ("model.swiglu", "SwiGLU", "Model", "text"),
    ("model.moe_experts", "MoE experts", "Model", "int"),
    ("model.moe_topk", "MoE top-k", "Model", "int"),
    ("layout.tp", "Tensor parallel (TP)", "Layout", "int"),
    ("layout.pp", "Pipeline parallel (PP)", "Layout", "int"),
    ("layout.dp", "Data parallel (DP)", "Layout", "int"),
    ("layout.cp", "Context parallel (CP)", "Layout", "int"),
    ("layout.ep", "Expert parallel (EP)", "Layout", "int"),
    ("layout.vpp", "Virtual pipeline stages", "Layout", "int"),
    ("placement.groups", "Dragonfly groups spanned", "Placement", "int"),
    ("placement.switches", "Switches spanned", "Placement", "int"),
    ("placement.group_fragmentation", "Group fragmentation (1 = compact)", "Placement", "float"),
    ("tokens_per_s", "Tokens/s (job)", "Efficiency", "float"),
    ("tokens_per_s_per_gpu", "Tokens/s per GPU", "Efficiency", "float"),
    ("mfu", "MFU", "Efficiency", "percent"),
    ("energy_per_token_j", "Energy per token", "Efficiency", "joule"),
    ("saturation.score", "Saturation S (0-100)", "Saturation", "score"),
    ("saturation.limiter", "Limiter", "Saturation", "text"),
    ("saturation.stragglers", "Stragglers", "Saturation", "int"),
)
#: Rows shown even when no job has a value (their absence is news); the others are left out when all are empty.
ALWAYS_SHOWN = {"gpus", "tokens_per_s_per_gpu", "mfu", "energy_per_token_j", "saturation.score"}
#: Relative tolerance under which two measured numbers count as the same (throughput jitters by a few per mille).
MEASURED = {"tokens_per_s", "tokens_per_s_per_gpu", "mfu", "energy_per_token_j", "saturation.score",
            "placement.group_fragmentation"}
MEASURED_TOLERANCE = 0.01


def _placement(job) -> tuple[dict | None, str | None]:
    """Groups and switches the job's nodes span on the dragonfly (apps.topology's placement metrics)."""
    hosts = list(job.node_list or [])
    if not hosts:
        return None, "no node list for this job yet"
    try:
        placement = topology_index_current().placement(hosts)
    except UnknownNodesError as exc:
        return None, f"placement unknown: {exc}"
    return {"nodes": placement.nodes, "groups": placement.groups, "switches": placement.switches,
            "group_fragmentation": placement.group_fragmentation,
            "nodes_per_group": placement.nodes_per_group and {str(k): v for k, v in placement.nodes_per_group.items()}}, None


def _layout(job) -> dict | None:
    stored = job_layout_get(job)
    if stored is None:
        return None
    return {"tp": stored.tp, "pp": stored.pp, "dp": stored.dp, "cp": stored.cp, "ep": stored.ep, "vpp": stored.vpp,
            "world_size": stored.world_size, "source": stored.source}


def _saturation(job) -> dict | None:
    record = JobSaturation.objects.filter(job=job).values("status", "score", "limiter", "stragglers").first()
    if record is None:
        return None
    return {"status": record["status"], "score": record["score"], "limiter": record["limiter"] or None,
            "stragglers": len(record["stragglers"] or [])}


def job_entry(job) -> dict:
    """Everything the comparison shows of one job, with ``missing`` saying why a number is absent."""
    efficiency = job_efficiency(job)
    placement, placement_missing = _placement(job)
    layout = _layout(job)
    saturation = _saturation(job)
    model = model_config_dict(model_config(job))
    if model is not None:
        model = {key: model[key] for key in MODEL_FIELDS}
    missing = list(efficiency.get("missing") or [])
    if placement_missing:
        missing.append(placement_missing)
    if layout is None:
        missing.append("no parallel layout: upload the Megatron-LM log to the rank map, or POST the layout")
    if saturation is None or saturation["score"] is None:
        missing.append("no saturation score yet")
    ref = f"{job.cluster.name}/{job.job_id}"
    return {
        "ref": ref,
        "cluster": job.cluster.name,
        "job_id": int(job.job_id),
        "name": job.name,
        "user": job.user_name,
        "account": job.account,
        "state": job.state,
        "link": reverse("jobs:detail", args=[job.cluster.name, job.job_id]),
        "start": job.start_time.isoformat() if job.start_time else None,
        "end": job.end_time.isoformat() if job.end_time else None,
        "gpus": efficiency.get("gpus"),
        "nodes": job.node_count or len(job.node_list or []) or None,
        "gpu_model": efficiency.get("gpu_model"),
        "model": model,
        "layout": layout,
        "placement": placement,
        "tokens_per_s": efficiency.get("tokens_per_s"),
        "tokens_per_s_per_gpu": efficiency.get("tokens_per_s_per_gpu"),
        "mfu": efficiency.get("mfu"),
        "energy_per_token_j": efficiency.get("energy_per_token_j"),
        "tensor_active": efficiency.get("tensor_active"),
        "saturation": saturation,
        "missing": missing,
    }


def _value(entry: dict, key: str) -> Any:
    """``entry["model"]["layers"]`` for ``"model.layers"``; None where a level is absent."""
    value: Any = entry
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def table_rows(entries: list[dict]) -> list[dict]:
    """The side-by-side rows with ``differs`` from comparison.differences (rows every job leaves empty are dropped)."""
    keys = [key for key, *_ in ROWS]
    flat = [{key: _value(entry, key) for key in keys} for entry in entries]
    differs = {**comparison.differences(flat, [key for key in keys if key not in MEASURED]),
               **comparison.differences(flat, [key for key in keys if key in MEASURED], rel_tol=MEASURED_TOLERANCE)}
    rows = []
    for key, label, section, kind in ROWS:
        values = [_value(entry, key) for entry in entries]
        if key not in ALWAYS_SHOWN and all(value is None for value in values):
            continue
        rows.append({"key": key, "label": label, "section": section, "format": kind, "values": values,
                     "differs": bool(differs.get(key, False))})
    return rows


def shape_of(model: dict | None) -> tuple | None:
    """The model's shape as a hashable key (None without a model config)."""
    if not model:
        return None
    return tuple((key, model.get(key)) for key in SHAPE_KEYS)


def same_shape(entries: list[dict]) -> bool:
    shapes = {shape_of(entry["model"]) for entry in entries}
    return len(shapes) == 1 and None not in shapes


def scaling_view(entries: list[dict]) -> dict:
    """The scaling series across the jobs that train the same model shape (the largest such set; at least two runs
    at different GPU counts with a throughput). ``note`` says why there is none, or which jobs were left out."""
    by_shape: dict[tuple, list[dict]] = {}
    for entry in entries:
        shape = shape_of(entry["model"])
        if shape is not None and entry["tokens_per_s"] and entry["gpus"]:
            by_shape.setdefault(shape, []).append(entry)
    candidates = [group for group in by_shape.values() if len({entry["gpus"] for entry in group}) > 1]
    if not candidates:
        if len(entries) < 2:
            note = "Scaling needs at least two runs of one model at different GPU counts."
        elif not by_shape:
            note = "No scaling view: no job has both a model config and a throughput."
        elif any(len(group) > 1 for group in by_shape.values()):
            gpus = next(group[0]["gpus"] for group in by_shape.values() if len(group) > 1)
            note = (f"No scaling view yet: the runs of one model here all use {gpus} GPUs; add a run of it at another "
                    "GPU count.")
        else:
            note = ("No scaling view: no two of these jobs train the same model shape at different GPU counts with a "
                    "known throughput.")
        return {"runs": [], "model": None, "note": note, "left_out": [entry["ref"] for entry in entries]}
    group = max(candidates, key=len)
    runs = [{"job": entry["ref"], "gpus": int(entry["gpus"]), "tokens_per_s": float(entry["tokens_per_s"]),
             "global_batch": (entry["model"] or {}).get("global_batch")} for entry in group]
    out = comparison.scaling(runs)  # sorted by GPUs, the job's reference kept beside its numbers
    left_out = [entry["ref"] for entry in entries if entry not in group]
    base, last = out[0], out[-1]
    note = (f"Against the smallest run, {base['job']} at {base['gpus']} GPUs: strong scaling where the global batch is the "
            "same, weak scaling where it grew with the GPUs.")
    if last is not base and last["gpus"] > base["gpus"] and last["efficiency"] is not None:
        kind = f" ({last['kind']} scaling)" if last["kind"] in ("strong", "weak") else ""
        note += (f" At {last['gpus']} GPUs{kind}: {round(100 * last['efficiency'])} % efficiency, a speed-up of "
                 f"{last['speedup']:.3g} where {last['ideal_speedup']:.3g} would be ideal.")
    if left_out:
        note += f" Left out (another model, or no throughput): {', '.join(left_out)}."
    model = {key: value for key, value in shape_of(group[0]["model"]) if value is not None}
    return {"runs": out, "model": model, "note": note, "left_out": left_out}


def _percent_more(better: float, worse: float) -> int:
    return round(100 * (better / worse - 1))


def _reason(best: dict, worst: dict) -> str:
    """The most telling difference between two jobs, as "its ranks span 2 groups, not 6". A different GPU count
    comes first: per-GPU throughput falls as a run of one model scales out, whatever its placement."""
    if best.get("gpus") and worst.get("gpus") and best["gpus"] != worst["gpus"]:
        return (f"it runs on {best['gpus']:,} GPUs, not {worst['gpus']:,}: per-GPU throughput falls as a run scales out "
                "(the scaling view below)")
    groups = (_value(best, "placement.groups"), _value(worst, "placement.groups"))
    if None not in groups and groups[0] != groups[1]:
        return f"its nodes span {groups[0]} dragonfly group{'s' * (groups[0] != 1)}, not {groups[1]}"
    stragglers = (_value(best, "saturation.stragglers"), _value(worst, "saturation.stragglers"))
    if None not in stragglers and stragglers[0] != stragglers[1]:
        return f"{stragglers[0] or 'no'} straggler{'s' * (stragglers[0] != 1)}, not {stragglers[1]}"
    layouts = (best.get("layout"), worst.get("layout"))
    if None not in layouts and any(layouts[0].get(key) != layouts[1].get(key) for key in LAYOUT_KEYS):
        def words(layout: dict) -> str:
            return " ".join(f"{key.upper()} {layout[key]}" for key in ("tp", "pp", "dp", "cp", "ep") if layout.get(key) and
                            (key in ("tp", "pp", "dp") or layout[key] > 1))
        return f"its layout is {words(layouts[0])}, not {words(layouts[1])}"
    switches = (_value(best, "placement.switches"), _value(worst, "placement.switches"))
    if None not in switches and switches[0] != switches[1]:
        return f"its nodes sit on {switches[0]} switches, not {switches[1]}"
    return ""


def verdict(entries: list[dict]) -> str:
    """Which job is most efficient and by how much, in one sentence.

    Throughput per GPU compares runs of the same model only; across models MFU is the fair measure."""
    if not entries:
        return "Name two or more jobs to compare them."
    if len(entries) == 1:
        return f"Only {entries[0]['ref']}: add another job to compare it with."
    if same_shape(entries):
        measure, word, unit = "tokens_per_s_per_gpu", "tokens/s per GPU", "at the same model"
    else:
        measure, word, unit = "mfu", "of its GPUs' peak (MFU)", "on a different model"
    known = [entry for entry in entries if entry.get(measure)]
    unknown = [entry["ref"] for entry in entries if not entry.get(measure)]
    if len(known) < 2:
        what = "tokens/s per GPU" if measure == "tokens_per_s_per_gpu" else "MFU (a model config and a throughput)"
        return (f"No verdict: {what} is known for {len(known)} of {len(entries)} jobs"
                + (f"; missing for {', '.join(unknown)}." if unknown else "."))
    best = max(known, key=lambda entry: entry[measure])
    worst = min(known, key=lambda entry: entry[measure])
    more = _percent_more(best[measure], worst[measure])
    if more == 0:
        sentence = f"{best['ref']} and {worst['ref']} are equally efficient ({word}, {unit})"
    elif measure == "mfu":
        sentence = (f"{best['ref']} uses {round(100 * best[measure])} % {word} against {round(100 * worst[measure])} % "
                    f"for {worst['ref']}, {unit}")
    else:
        sentence = f"{best['ref']} trains {more} % more {word} than {worst['ref']} {unit}"
    reason = _reason(best, worst) if more else ""
    if reason:
        sentence += f": {reason}"
    if unknown:
        sentence += f" ({', '.join(unknown)} left out: no {word.split(' (')[0]} known)"
    return sentence + "."


def job_compare(jobs) -> dict:
    """The body of GET /api/v1/jobs/compare/?jobs=c/1,c/2: per job its facts, the side-by-side rows with the
    differences, a verdict and the scaling view (``jobs``: Job rows the caller may see, in the order asked)."""
    entries = [job_entry(job) for job in jobs]
    return {
        "jobs": entries,
        "verdict": verdict(entries),
        "same_model": same_shape(entries) if entries else False,
        "rows": table_rows(entries),
        "scaling": scaling_view(entries),
    }


def compare_candidates(job, user, token_job=None, limit: int = 8) -> list:
    """Other jobs the user may see that train the same model shape as ``job`` (newest first): what a "compare with
    other runs of this model" link on the job page offers. Empty when ``job`` has no model config."""
    record = model_config(job)
    if record is None:
        return []
    shape = {key: getattr(record, key) for key in SHAPE_KEYS}
    same = JobModelConfig.objects.filter(**shape).exclude(job=job).values_list("job_id", flat=True)
    return list(job_list_for_user(user, token_job).filter(pk__in=same).select_related("cluster")
                .order_by("-submit_time", "-job_id")[:limit])


def jobs_for_refs(user, refs, token_job=None) -> tuple[list, list[str]]:
    """The jobs named by ``refs`` (``apps.core.api.params.JobRef``) that the caller may see, in the order asked and without
    repeats, and the references that are unknown or not visible (one list: which of the two is never told)."""
    found, unknown, seen = [], [], set()
    for ref in refs:
        key = f"{ref.cluster}/{ref.job_id}"
        if key in seen:
            continue
        seen.add(key)
        job = job_get_for_user(user, ref.cluster, ref.job_id, token_job)
        if job is None:
            unknown.append(key)
        else:
            found.append(job)
    return found, unknown


def compare_link(job, user, token_job=None, limit: int = 8) -> dict | None:
    """For the job page: the comparison of ``job`` with the other runs of its model the user may see, as
    ``{"url": "/jobs/compare/?jobs=...", "others": ["alps/12", ...], "words": "Compare with 4 other runs of this model"}``;
    None when there is none (no model config, or no other run of the same shape)."""
    others = compare_candidates(job, user, token_job, limit=limit)
    if not others:
        return None
    refs = [f"{other.cluster.name}/{other.job_id}" for other in others]
    count = len(refs)
    return {"url": f"{reverse('appmetrics:compare')}?jobs={','.join([f'{job.cluster.name}/{job.job_id}', *refs])}",
            "others": refs, "words": f"Compare with {count} other run{'s' * (count != 1)} of this model"}
