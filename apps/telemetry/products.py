"""Per-job telemetry data products: a job's samples bucketed into a cube that pages read quickly.

A :class:`JobCube` holds, for every GPU of the job (rows: host, gpu), every field and every time
bucket, the sample count and the mean, min and max. It is built from a store's ``aggregate``
answer and saved as a compressed ``.npz`` next to the portal's data. Plain Python: no Django.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROLLUP_FRIENDLY_STEPS = (10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400)
MAX_BUCKETS = 240


def choose_step(duration_s: float, max_buckets: int = MAX_BUCKETS) -> int:
    """The smallest friendly step (multiples of the store's rollups when long) giving at most
    ``max_buckets`` buckets over the job."""
    needed = max(duration_s / max_buckets, 1)
    for step in ROLLUP_FRIENDLY_STEPS:
        if step >= needed:
            return step
    return int(math.ceil(needed / 86400) * 86400)


@dataclass
class JobCube:
    hosts: np.ndarray  # (gpus,) host of each GPU row
    gpus: np.ndarray  # (gpus,) GPU index of each row
    fields: np.ndarray  # (fields,) DCGM ids
    buckets: np.ndarray  # (buckets,) datetime64[ns] bucket starts (UTC)
    step: int
    count: np.ndarray  # (gpus, fields, buckets) int32
    mean: np.ndarray  # float32, NaN where no sample
    min: np.ndarray
    max: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.mean.shape

    def field_index(self, field_id: int) -> int | None:
        matches = np.flatnonzero(self.fields == field_id)
        return int(matches[0]) if len(matches) else None

    def coverage(self) -> tuple[np.datetime64 | None, np.datetime64 | None, int]:
        """(first bucket holding a sample, end of the last one, GPUs with any sample): the data's real extent."""
        if self.count.size == 0:
            return None, None, 0
        filled = self.count.sum(axis=(0, 1)) > 0
        if not filled.any():
            return None, None, 0
        columns = np.flatnonzero(filled)
        last = self.buckets[columns[-1]] + np.timedelta64(int(self.step), "s")
        return self.buckets[columns[0]], last, int((self.count.sum(axis=(1, 2)) > 0).sum())

    def labels(self) -> list[str]:
        return [f"{host} GPU {gpu}" for host, gpu in zip(self.hosts, self.gpus)]

    def save(self, path: Path) -> None:
        """One array per field and statistic (``f1002_mean`` …), so a page that shows one field
        decompresses that field only: at 4,096 GPUs a whole cube is hundreds of MB in memory."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp.npz")
        per_field = {}
        for index, field_id in enumerate(self.fields):
            for name in ("count", "mean", "min", "max"):
                per_field[f"f{int(field_id)}_{name}"] = getattr(self, name)[:, index, :]
        np.savez_compressed(temporary, hosts=self.hosts.astype("U"), gpus=self.gpus, fields=self.fields,
                            buckets=self.buckets.astype("datetime64[ns]").astype("int64"), step=np.array(self.step),
                            **per_field)
        temporary.replace(path)  # readers never see half a file

    @staticmethod
    def fields_in(path: Path) -> list[int]:
        """The DCGM field ids a saved cube holds (a small array; nothing else is decompressed)."""
        with np.load(path, allow_pickle=False) as data:
            return [int(f) for f in data["fields"]]

    @classmethod
    def load(cls, path: Path, fields=None) -> "JobCube":
        """The cube at ``path``; with ``fields``, only those of them it holds (in the order stored)."""
        with np.load(path, allow_pickle=False) as data:
            stored = data["fields"]
            keep = [i for i, f in enumerate(stored) if fields is None or int(f) in {int(x) for x in fields}]
            head = dict(hosts=data["hosts"].astype(object), gpus=data["gpus"], fields=stored[keep],
                        buckets=data["buckets"].astype("datetime64[ns]"), step=int(data["step"]))
            if "mean" in data.files:  # a cube saved before the per-field layout
                return cls(**head, **{name: data[name][:, keep, :] for name in ("count", "mean", "min", "max")})
            rows, columns = len(head["hosts"]), len(head["buckets"])
            arrays = {}
            for name, dtype in (("count", "int32"), ("mean", "float32"), ("min", "float32"), ("max", "float32")):
                parts = [data[f"f{int(stored[i])}_{name}"] for i in keep]
                arrays[name] = np.stack(parts, axis=1) if parts else np.zeros((rows, 0, columns), dtype=dtype)
            return cls(**head, **arrays)


def build_cube(aggregated: pd.DataFrame, step: int, hosts: list[str] | None = None) -> JobCube:
    """Turn an ``aggregate`` answer (rows in any order) into the cube; ``hosts`` fixes the row order
    (the job's node order), otherwise hosts are sorted."""
    if aggregated.empty:
        empty = np.zeros((0, 0, 0), dtype="float32")
        return JobCube(np.array([], dtype=object), np.array([], dtype="int16"), np.array([], dtype="int32"),
                       np.array([], dtype="datetime64[ns]"), step, empty.astype("int32"), empty, empty, empty)
    order = {host: index for index, host in enumerate(hosts)} if hosts else None
    series = aggregated[["host", "gpu"]].drop_duplicates()
    series = series.assign(rank=series["host"].map(order) if order else 0).sort_values(["rank", "host", "gpu"], kind="stable")
    row_of = {(h, g): i for i, (h, g) in enumerate(zip(series["host"], series["gpu"]))}
    fields = np.sort(aggregated["field"].unique()).astype("int32")
    buckets = pd.DatetimeIndex(pd.to_datetime(aggregated["bucket"]).unique()).sort_values()
    shape = (len(row_of), len(fields), len(buckets))
    rows = np.fromiter((row_of[(h, g)] for h, g in zip(aggregated["host"], aggregated["gpu"])), dtype=np.int64, count=len(aggregated))
    columns = np.searchsorted(fields, aggregated["field"].to_numpy())
    times = buckets.get_indexer(pd.to_datetime(aggregated["bucket"]))
    cube = {name: np.full(shape, np.nan, dtype="float32") for name in ("mean", "min", "max")}
    count = np.zeros(shape, dtype="int32")
    count[rows, columns, times] = aggregated["count"].to_numpy()
    for name in cube:
        cube[name][rows, columns, times] = aggregated[name].to_numpy()
    return JobCube(hosts=series["host"].to_numpy(object), gpus=series["gpu"].to_numpy("int16"), fields=fields,
                   buckets=buckets.tz_convert(None).to_numpy("datetime64[ns]"), step=step, count=count, **cube)
