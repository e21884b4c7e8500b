"""Per-job telemetry data products: a job's samples bucketed into a cube that pages read quickly.

A :class:`JobCube` holds, for every GPU of the job (rows: host, gpu), every field and every time
bucket, the sample count and the mean, min and max. It is built from a store's ``aggregate``
answer and saved next to the portal's data. Plain Python: no Django.

Layout on disk (``<job>.cube/``, a folder), made so that a running job's cube grows at the cost of
its new buckets, not of its length:

* ``head.npz`` — rows (hosts, gpus), fields, bucket starts, step, the sample count of each bucket, the
  list of chunk files and a little JSON (the job's node-list digest). Small: O(GPUs + buckets).
* chunk files ``<first bucket index>-<token>.npz`` — ``CHUNK_BUCKETS`` consecutive buckets each, one
  array per field and statistic (``f1002_mean`` …, shape GPUs × buckets of the chunk), so a page
  reading one field decompresses that field only. Every chunk but the last is deflated (level 1:
  a third of the default level's time for nearly its size); the last one, rewritten by every update,
  is stored plain.

:func:`extend_saved_cube` replaces the buckets from a given time on: it reads the head and the chunk
holding that time, writes that chunk and the new ones under a fresh token, then replaces the head
(atomically: readers see the old cube or the new one), and removes the chunk files no head names.
A reader that finds a chunk gone (it read the head just before a replacement) reads the head again.

Older products (one ``.npz`` file, per-field arrays or whole arrays) still load.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
import uuid
import zipfile
from dataclasses import dataclass, field as dataclass_field
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

    def save(self, path: Path, meta: dict | None = None) -> "CubeHead":
        """Write the whole cube in the chunked layout at ``path`` (a folder), replacing what is there."""
        return _write_cube(Path(path), self, first_chunk=0, kept_chunks=[], meta=meta or {})

    @staticmethod
    def fields_in(path: Path) -> list[int]:
        """The DCGM field ids a saved cube holds (a small array; nothing else is decompressed)."""
        path = Path(path)
        if path.is_dir():
            return [int(f) for f in read_head(path).fields]
        with np.load(path, allow_pickle=False) as data:
            return [int(f) for f in data["fields"]]

    @classmethod
    def load(cls, path: Path, fields=None) -> "JobCube":
        """The cube at ``path``; with ``fields``, only those of them it holds (in the order stored)."""
        path = Path(path)
        if path.is_dir():
            return _load_chunked(path, fields)
        with np.load(path, allow_pickle=False) as data:
            stored = data["fields"]
            keep = [i for i, f in enumerate(stored) if fields is None or int(f) in {int(x) for x in fields}]
            head = dict(hosts=data["hosts"].astype(object), gpus=data["gpus"], fields=stored[keep],
                        buckets=data["buckets"].astype("datetime64[ns]"), step=int(data["step"]))
            if "mean" in data.files:  # a cube saved before the per-field layout
                return cls(**head, **{name: data[name][:, keep, :] for name in ("count", "mean", "min", "max")})
            rows, columns = len(head["hosts"]), len(head["buckets"])
            arrays = {}
            for name, dtype in STAT_DTYPES:
                parts = [data[f"f{int(stored[i])}_{name}"] for i in keep]
                arrays[name] = np.stack(parts, axis=1) if parts else np.zeros((rows, 0, columns), dtype=dtype)
            return cls(**head, **arrays)


STAT_DTYPES = (("count", "int32"), ("mean", "float32"), ("min", "float32"), ("max", "float32"))
CHUNK_BUCKETS = 16
HEAD = "head.npz"
# Chunk files no head names are removed by the next write, unless written after that write began (a
# concurrent writer's); temporary files of a writer that died, after an hour.
ORPHAN_TEMPORARY_SECONDS = 3600


def node_digest(nodes) -> str:
    """A short digest of a job's node list, kept in the cube's head: a changed list means a full rebuild."""
    return hashlib.sha256("\n".join(str(n) for n in nodes or ()).encode()).hexdigest()[:16]


@dataclass
class CubeHead:
    """What a saved cube holds, without its data: enough to extend it or to say what it covers."""

    hosts: np.ndarray
    gpus: np.ndarray
    fields: np.ndarray
    buckets: np.ndarray  # datetime64[ns]
    step: int
    bucket_counts: np.ndarray  # (buckets,) int64: samples in each bucket, all GPUs and fields
    chunks: list[tuple[int, str]] = dataclass_field(default_factory=list)  # (first bucket index, file name)
    meta: dict = dataclass_field(default_factory=dict)

    @property
    def samples(self) -> int:
        return int(self.bucket_counts.sum())

    def coverage(self) -> tuple[np.datetime64 | None, np.datetime64 | None, int]:
        """As :meth:`JobCube.coverage`, from the head alone."""
        filled = np.flatnonzero(self.bucket_counts > 0)
        if not len(filled) or not len(self.hosts):
            return None, None, 0
        return self.buckets[filled[0]], self.buckets[filled[-1]] + np.timedelta64(int(self.step), "s"), len(self.hosts)


def read_head(path: Path) -> CubeHead:
    with np.load(Path(path) / HEAD, allow_pickle=False) as data:
        return CubeHead(hosts=data["hosts"].astype(object), gpus=data["gpus"], fields=data["fields"],
                        buckets=data["buckets"].astype("datetime64[ns]"), step=int(data["step"]),
                        bucket_counts=data["bucket_counts"].astype("int64"),
                        chunks=[(int(a), str(b)) for a, b in zip(data["chunk_starts"], data["chunk_files"])],
                        meta=json.loads(str(data["meta"])))


def _save_arrays(path: Path, arrays: dict, *, compress: bool) -> None:
    """An ``.npz`` np.load reads, written through a temporary file and renamed (never seen half written)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED,
                         compresslevel=1 if compress else None) as archive:
        for name, array in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as handle:
                np.lib.format.write_array(handle, np.asarray(array, order="C"), allow_pickle=False)
    temporary.replace(path)


def _write_cube(folder: Path, cube: JobCube, *, first_chunk: int, kept_chunks: list[tuple[int, str]], meta: dict,
                buckets_before: np.ndarray | None = None, counts_before: np.ndarray | None = None) -> CubeHead:
    """Write the chunks of ``cube`` from chunk ``first_chunk`` on (``cube`` holds every bucket from that
    chunk's first), keep ``kept_chunks`` before it, and replace the head. ``buckets_before`` and
    ``counts_before`` are the bucket starts and sample counts of the kept chunks."""
    began = time.time()
    if folder.exists() and not folder.is_dir():
        folder.unlink()  # an older single-file product at the same name
    folder.mkdir(parents=True, exist_ok=True)
    try:
        replaced = {name for _, name in read_head(folder).chunks}
    except (FileNotFoundError, KeyError, ValueError, OSError):
        replaced = set()
    token = uuid.uuid4().hex[:8]
    first = first_chunk * CHUNK_BUCKETS
    total = first + len(cube.buckets)
    written = []
    for start in range(first, total, CHUNK_BUCKETS):
        lo, hi = start - first, min(start + CHUNK_BUCKETS, total) - first
        arrays = {f"f{int(fid)}_{name}": getattr(cube, name)[:, index, lo:hi]
                  for index, fid in enumerate(cube.fields) for name, _ in STAT_DTYPES}
        name = f"{start:06d}-{token}.npz"
        _save_arrays(folder / name, arrays, compress=start + CHUNK_BUCKETS < total)
        written.append((start, name))
    chunks = list(kept_chunks) + written
    counts = cube.count.sum(axis=(0, 1), dtype=np.int64) if cube.count.size else np.zeros(len(cube.buckets), "int64")
    counts = np.concatenate([np.asarray(counts_before if counts_before is not None else [], dtype="int64")[:first], counts])
    buckets = np.concatenate([np.asarray(buckets_before if buckets_before is not None else [], dtype="datetime64[ns]")[:first],
                              np.asarray(cube.buckets).astype("datetime64[ns]")])
    head = CubeHead(hosts=cube.hosts, gpus=cube.gpus, fields=cube.fields, buckets=buckets, step=int(cube.step),
                    bucket_counts=counts, chunks=chunks, meta=meta)
    _save_arrays(folder / HEAD, {
        "hosts": np.asarray(cube.hosts).astype("U"), "gpus": np.asarray(cube.gpus, dtype="int16"),
        "fields": np.asarray(cube.fields, dtype="int32"),
        "buckets": buckets.astype("int64"), "step": np.array(int(cube.step)),
        "bucket_counts": counts, "chunk_starts": np.array([c[0] for c in chunks], dtype="int64"),
        "chunk_files": np.array([c[1] for c in chunks], dtype="U64"), "meta": np.array(json.dumps(meta))}, compress=False)
    _remove_unnamed(folder, {name for _, name in chunks} | {HEAD}, replaced, began)
    return head


def _remove_unnamed(folder: Path, named: set[str], replaced: set[str], began: float) -> None:
    """Remove the chunks the replaced head named and this one does not, and files nobody names that were
    there before this write began (a dead writer's; a concurrent writer's newer files stay)."""
    for entry in os.scandir(folder):
        if entry.name in named:
            continue
        try:
            age_limit = began - ORPHAN_TEMPORARY_SECONDS if entry.name.endswith(".tmp") else began - 1
            if entry.name in replaced or entry.stat().st_mtime < age_limit:
                os.unlink(entry.path)
        except FileNotFoundError:
            pass


def _chunk_arrays(folder: Path, name: str, fields, columns: int, rows: int) -> dict[str, np.ndarray]:
    with np.load(folder / name, allow_pickle=False) as data:
        out = {}
        for stat, dtype in STAT_DTYPES:
            parts = [data[f"f{int(f)}_{stat}"] for f in fields]
            out[stat] = np.stack(parts, axis=1) if parts else np.zeros((rows, 0, columns), dtype=dtype)
        return out


def _load_chunked(folder: Path, fields=None, attempts: int = 3) -> JobCube:
    for attempt in range(attempts):
        head = read_head(folder)
        wanted = None if fields is None else {int(x) for x in fields}
        keep = [f for f in head.fields if wanted is None or int(f) in wanted]
        rows, columns = len(head.hosts), len(head.buckets)
        arrays = {stat: np.full((rows, len(keep), columns), 0 if stat == "count" else np.nan, dtype=dtype)
                  for stat, dtype in STAT_DTYPES}
        try:
            for index, (start, name) in enumerate(head.chunks):
                end = head.chunks[index + 1][0] if index + 1 < len(head.chunks) else columns
                part = _chunk_arrays(folder, name, keep, end - start, rows)
                for stat in arrays:
                    arrays[stat][:, :, start:end] = part[stat]
        except FileNotFoundError:
            if attempt + 1 == attempts:
                raise
            continue  # replaced while we read: the new head names the new chunks
        return JobCube(hosts=head.hosts, gpus=head.gpus, fields=np.asarray(keep, dtype="int32"), buckets=head.buckets,
                       step=head.step, **arrays)
    raise AssertionError("unreachable")


def extend_saved_cube(folder: Path, tail: JobCube, since: np.datetime64) -> CubeHead:
    """Replace the saved cube's buckets from ``since`` on by ``tail``'s (same rows, fields and step: see
    :func:`align_cube`). Reads the head and the one chunk holding ``since``; writes that chunk and the ones
    after it. The cost follows the buckets replaced and added, not the cube's length."""
    folder = Path(folder)
    head = read_head(folder)
    if (int(tail.step) != head.step or list(tail.fields) != list(head.fields) or list(tail.hosts) != list(head.hosts)
            or list(tail.gpus) != list(head.gpus)):
        raise ValueError("the new buckets do not have the saved cube's rows, fields and step; rebuild it")
    keep_buckets = int(np.searchsorted(head.buckets, np.datetime64(since, "ns"), side="left"))
    first_chunk = keep_buckets // CHUNK_BUCKETS
    first = first_chunk * CHUNK_BUCKETS
    kept_chunks = [(start, name) for start, name in head.chunks if start < first]
    rows = len(head.hosts)
    if keep_buckets > first:  # the chunk holding ``since`` keeps its buckets before it
        name = next(name for start, name in head.chunks if start == first)
        part = _chunk_arrays(folder, name, head.fields, keep_buckets - first, rows)
        part = {stat: array[:, :, :keep_buckets - first] for stat, array in part.items()}
    else:
        part = {stat: np.zeros((rows, len(head.fields), 0), dtype=dtype) for stat, dtype in STAT_DTYPES}
    merged = JobCube(hosts=head.hosts, gpus=head.gpus, fields=head.fields,
                     buckets=np.concatenate([head.buckets[first:keep_buckets], tail.buckets.astype("datetime64[ns]")]),
                     step=head.step, **{stat: np.concatenate([part[stat], getattr(tail, stat)], axis=2)
                                        for stat, _ in STAT_DTYPES})
    return _write_cube(folder, merged, first_chunk=first_chunk, kept_chunks=kept_chunks, meta=head.meta,
                       buckets_before=head.buckets, counts_before=head.bucket_counts)


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


def align_cube(aggregated: pd.DataFrame, step: int, hosts, gpus, fields) -> JobCube | None:
    """An ``aggregate`` answer as a cube with exactly these rows (host, gpu) and fields, in that order — rows
    and fields without a sample in it stay empty — to extend a saved cube with. None when the answer holds a
    GPU or a field the layout lacks (the cube must then be rebuilt)."""
    hosts, gpus, fields = np.asarray(hosts, dtype=object), np.asarray(gpus), np.asarray(fields, dtype="int32")
    shape_rows, shape_fields = len(hosts), len(fields)
    if aggregated.empty:
        empty = {stat: np.zeros((shape_rows, shape_fields, 0), dtype=dtype) for stat, dtype in STAT_DTYPES}
        return JobCube(hosts=hosts, gpus=gpus, fields=fields, buckets=np.array([], dtype="datetime64[ns]"), step=step, **empty)
    if not shape_rows or not shape_fields:
        return None
    row_of = {(str(h), int(g)): i for i, (h, g) in enumerate(zip(hosts, gpus))}
    rows = np.fromiter((row_of.get((str(h), int(g)), -1) for h, g in zip(aggregated["host"], aggregated["gpu"])),
                       dtype=np.int64, count=len(aggregated))
    wanted = aggregated["field"].to_numpy().astype("int64")
    columns = np.searchsorted(fields, wanted)
    inside = np.minimum(columns, shape_fields - 1)
    if (rows < 0).any() or (columns >= shape_fields).any() or (fields[inside] != wanted).any():
        return None
    buckets = pd.DatetimeIndex(pd.to_datetime(aggregated["bucket"]).unique()).sort_values()
    times = buckets.get_indexer(pd.to_datetime(aggregated["bucket"]))
    shape = (shape_rows, shape_fields, len(buckets))
    count = np.zeros(shape, dtype="int32")
    count[rows, columns, times] = aggregated["count"].to_numpy()
    stats = {name: np.full(shape, np.nan, dtype="float32") for name in ("mean", "min", "max")}
    for name in stats:
        stats[name][rows, columns, times] = aggregated[name].to_numpy()
    return JobCube(hosts=hosts, gpus=gpus, fields=fields, buckets=buckets.tz_convert(None).to_numpy("datetime64[ns]"),
                   step=step, count=count, **stats)
