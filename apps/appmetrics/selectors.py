"""Reads of the appmetrics app: a job's application series, its model config and its efficiency with the throughput
dips explained by what the hardware did at the time.

Access is the jobs app's rule (the API finds the job with ``apps.jobs.selectors.job_get_for_user`` first); these
functions take a job the caller may see.
"""
from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

from apps.core.gpu_models import gpu_model_for
from apps.saturation.models import JobSaturation
from apps.telemetry.backends.base import Query, TelemetryUnavailable
from apps.telemetry.lustre import PREFIX as LUSTRE_PREFIX
from apps.telemetry.lustre import io_step, job_io, reading_step
from apps.telemetry.selectors import host_row, job_cube, job_host_samples, read_series
from apps.telemetry.store import telemetry_store

from . import efficiency, events, flops, hostbound
from .models import MODEL_FIELDS, JobModelConfig

MARKER_PREFIX = "event."
GPUS_PER_NODE = 4


def job_series(job, names=None, start: datetime | None = None, end: datetime | None = None) -> pd.DataFrame:
    """The job's application series (APP_COLUMNS), sorted by name and time."""
    return telemetry_store().read_job_series(job.cluster.name, int(job.job_id), names=names, start=start, end=end)


def model_config(job) -> JobModelConfig | None:
    return JobModelConfig.objects.filter(job=job).first()


def model_config_dict(record: JobModelConfig | None) -> dict | None:
    if record is None:
        return None
    return {**{key: getattr(record, key) for key in MODEL_FIELDS}, "source": record.source,
            "updated": record.updated.isoformat()}


def job_gpus(job, cube=None) -> int | None:
    """The job's GPUs: Slurm's count, else the GPUs its telemetry reported, else 4 per node."""
    if job.gpus:
        return int(job.gpus)
    if cube is not None and len(cube.hosts):
        return int(len(cube.hosts))
    nodes = job.node_count or len(job.node_list or [])
    return nodes * GPUS_PER_NODE or None


def model_config_of(record: JobModelConfig | None) -> flops.ModelConfig | None:
    """The FLOPs model of a stored config (None without one)."""
    return flops.ModelConfig.from_dict(model_config_dict(record)) if record is not None else None


def job_throughput(series: pd.DataFrame, config: flops.ModelConfig | None) -> tuple[np.ndarray, np.ndarray, str]:
    """(ts, tokens/s, where it came from) of the job's series (``efficiency.throughput``)."""
    return efficiency.throughput(series, config.global_batch if config else None, config.seq_len if config else None)


def _stragglers(job) -> list[dict]:
    record = JobSaturation.objects.filter(job=job).values("stragglers").first()
    out = []
    for item in (record or {}).get("stragglers") or []:
        if item.get("start"):
            label = item.get("host") or ""
            if item.get("gpu") is not None:
                label = f"{label} GPU {item['gpu']}"
            out.append({"label": label, "start": pd.Timestamp(item["start"]).to_datetime64(), "reason": item.get("reason", "")})
    return out


def _markers(series: pd.DataFrame) -> list[dict]:
    marks = series[series["name"].str.startswith(MARKER_PREFIX)]
    return [{"name": name, "ts": ts, "value": float(value)}
            for name, ts, value in zip(marks["name"], marks["ts"].to_numpy("datetime64[ns]"), marks["value"])]


def _writes(lustre: pd.DataFrame) -> dict:
    """The job's writes to the file system from its Lustre job stats (the ``lustre/<target>/...`` series) as
    :class:`events.Evidence` arguments on a grid of their own (bytes per bucket); {} when it has none."""
    if lustre.empty:
        return {}
    step = io_step(lustre, reading_step(lustre))  # at most timebounds.MAX_BUCKETS buckets, whatever the span
    rates = job_io(lustre, step)
    if rates.empty:
        return {}
    return {"write_times": rates["time"].dt.tz_convert(None).to_numpy("datetime64[ns]"), "write_step_s": float(step),
            "write_bytes": rates["write_bytes_per_s"].to_numpy(float) * step}


def _fine_idle(job):
    """For :class:`events.Evidence`'s ``fine``: the share of the job's GPUs idle at their own samples' resolution in a
    window (ns), read from the telemetry store around a dip (never the whole run)."""
    hosts = tuple(job.node_list or ())

    def read(start_ns: int, end_ns: int):
        start, end = (pd.Timestamp(value, unit="ns", tz="UTC").to_pydatetime() for value in (start_ns, end_ns))
        query = Query(start=start, end=end, cluster=job.cluster.name, hosts=hosts,
                      fields=(efficiency.SM_FIELD, efficiency.UTIL_FIELD))
        try:
            return efficiency.fine_idle_share(read_series(query))
        except TelemetryUnavailable:
            return np.array([], dtype="datetime64[ns]"), np.array([], dtype=float)

    return read


def _loader_cpu(job, times, step_s: float):
    """The job's data-loader workers' CPU share on the cube's buckets (host samples, issue 39); None without them."""
    try:
        row = host_row(job_host_samples(job, fields=("host_dataloader_cpu",)), step_s)
    except TelemetryUnavailable:
        return None
    if not len(row["times"]):
        return None
    return pd.Series(row["loader_cpu"], index=pd.DatetimeIndex(row["times"])).reindex(pd.DatetimeIndex(times)).to_numpy()


def _host_bound(series: pd.DataFrame, ts, tps, hardware: dict, found: list[dict]) -> dict | None:
    """The job's host-bound finding (``hostbound``, issue 39) over its iterations (``iteration_s``, else the inverse of
    tokens/s: only ratios to the median matter), leaving the checkpoints' dips to them; None without host samples."""
    loader = hardware.get("loader_cpu")
    if loader is None or not len(hardware.get("times", [])):
        return None
    iterations = series[series["name"] == "iteration_s"] if len(series) else series
    if len(iterations) >= 10:
        when, seconds = iterations["ts"].to_numpy(), iterations["value"].to_numpy(dtype="float64")
    else:
        rate = np.asarray(tps, dtype="float64")
        when, seconds = np.asarray(ts), np.where(rate > 0, 1.0 / np.where(rate > 0, rate, 1.0), np.nan)
    checkpoints = [(event["start"], event.get("end")) for event in found if event["kind"] == "checkpoint"]
    return hostbound.host_bound(when, seconds, hardware["times"], loader, hardware["times"], hardware["idle_share"],
                                hardware["step_s"], checkpoints)


def _iso(value) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return pd.Timestamp(value).tz_localize("UTC").isoformat() if pd.Timestamp(value).tzinfo is None else pd.Timestamp(value).isoformat()


def job_efficiency(job) -> dict:
    """The body of GET /api/v1/jobs/<cluster>/<job_id>/efficiency/: every number with the reason when it is absent."""
    missing: list[str] = []
    try:
        series = job_series(job)
    except TelemetryUnavailable as exc:
        series = pd.DataFrame(columns=["ts", "name", "step", "value"])
        missing.append(f"application series unavailable: {exc}")
    # the file system's job stats share the job's series; they are evidence, not the application's own rows
    from_lustre = series["name"].astype(str).str.startswith(LUSTRE_PREFIX)
    lustre, series = series[from_lustre], series[~from_lustre]
    record = model_config(job)
    config = model_config_of(record)
    cube = job_cube(job, efficiency.EVIDENCE_FIELDS)
    gpus = job_gpus(job, cube)
    ts, tps, tps_source = job_throughput(series, config)
    rate = efficiency.steady_rate(ts, tps) if len(ts) else None
    if rate is None:
        missing.append("no throughput: log tokens_per_s (or iteration_s with the model's global batch) from the job"
                       if not len(series) else "no tokens_per_s series, and no iteration_s with a global batch to derive it")
    per_gpu = rate / gpus if rate is not None and gpus else None
    flops_per_token = flops.model_flops_per_token(config) if config is not None else None
    if config is None:
        missing.append("no model config: PUT it to .../model/ or upload the Megatron-LM log with its argument dump")
    peak = (record.gpu_peak_tflops if record is not None and record.gpu_peak_tflops else None)
    gpu_model = gpu_model_for(job)
    if peak is None and gpu_model is not None:
        peak = flops.gpu_peak_tflops(getattr(gpu_model, "name", "") or "")
    mfu = flops.mfu(per_gpu, flops_per_token, peak) if per_gpu and flops_per_token and peak else None
    if flops_per_token and per_gpu and not peak:
        missing.append("no GPU peak for this GPU model: give gpu_peak_tflops in the model config")
    tensor_active = energy_per_token = None
    hardware: dict = {}
    if cube is None:
        missing.append("no GPU telemetry product for this job yet: energy, and what the GPUs did in each dip, need it")
    else:
        arrays = efficiency.evidence_arrays(list(cube.fields), cube.mean, cube.max, cube.labels())
        tensor_active = efficiency.mean_active(arrays["tensor_active"])
        energy_index = cube.field_index(efficiency.ENERGY_FIELD)
        if energy_index is None:
            missing.append("no energy counter (DCGM field 156) in this job's telemetry")
        else:
            energy_per_token = efficiency.energy_per_token(cube.buckets, float(cube.step), cube.max[:, energy_index, :],
                                                           ts, tps)
        hardware = {"times": cube.buckets.astype("datetime64[ns]"), "step_s": float(cube.step),
                    "idle_share": arrays["idle_share"], "throttled": arrays["throttled"],
                    "tensor_active": arrays["tensor_active"], "dram_active": arrays["dram_active"],
                    "loader_cpu": _loader_cpu(job, cube.buckets.astype("datetime64[ns]"), float(cube.step))}
    event_list: list[dict] = []
    host_bound = None
    if len(ts):
        # markers, stragglers and file-system writes explain dips without GPU telemetry too
        # the GPUs' own samples around a dip show pauses shorter than the product's buckets (and without a product)
        evidence = events.Evidence(**{"times": np.array([], dtype="datetime64[ns]"), "step_s": 0.0, **hardware},
                                   stragglers=_stragglers(job), markers=_markers(series), **_writes(lustre),
                                   fine=_fine_idle(job) if job.node_list else None)
        found = events.find_events(ts, tps, evidence)
        event_list = [{**event, "start": _iso(event["start"]), "end": _iso(event.get("end"))} for event in found]
        host_bound = _host_bound(series, ts, tps, hardware, found)
    names = sorted(set(series["name"])) if len(series) else []
    return {
        "job": f"{job.cluster.name}/{job.job_id}",
        "gpus": gpus,
        "tokens_per_s": rate,
        "tokens_per_s_source": tps_source,
        "tokens_per_s_per_gpu": per_gpu,
        "model_flops_per_token": flops_per_token,
        "gpu_model": getattr(gpu_model, "name", None),
        "gpu_peak_tflops": peak,
        "mfu": mfu,
        "tensor_active": tensor_active,
        "gap_words": flops.saturation_gap_words(tensor_active, mfu),
        "energy_per_token_j": energy_per_token,
        "formula": flops.formula_words(config) if config is not None else None,
        "model": model_config_dict(record),
        "coverage": {"first": _iso(series["ts"].min()) if len(series) else None,
                     "last": _iso(series["ts"].max()) if len(series) else None,
                     "rows": int(len(series)), "names": names},
        "events": event_list,
        "host_bound": host_bound,
        "missing": missing,
    }
