"""A job's *score state*: every GPU's full-resolution scores, kept so that an update scores only what is new.

A scoring grids and scores each GPU on every column (bucket of the scoring step) of the job's window
(``products.score_columns``); the product pages read is a summary and a 300-column binning of those
arrays (``products.finish_scoring``). The state keeps the arrays themselves — the ``STATE_ARRAYS`` (S, C,
M, L, explanations, limiter, raw SM clock, power, temperature), the raw samples behind each column, the
GPUs in the job's node order — with a *fingerprint* of what a full scoring depends on (nodes, layout,
GPU model ceilings, step, the job's start). An update reads the store only from the first column that
was not yet final, scores those columns, splices them in (``ScoreState.splice``) and summarises again:
what it reads and scores follows the new samples, not the job's length.

Storage, in one folder per job: ``state.json`` (the fingerprint and the shape, written last and
atomically: it is what makes the rest valid), ``rows.npz`` (hosts and GPUs) and the columns in chunks of
``CHUNK_COLUMNS`` (``chunk-00000.npy``, one plain array of every kind, and ``counts-00000.npy``), so an
update rewrites the one or two chunks its columns fall in and nothing else. Reading the state back is a
copy out of the page cache (about 0.1 s for 4,096 GPUs × 3 h at 10 s, 260 MB). A state that does not
add up (a write killed midway, another format) reads as no state: the caller scores from scratch.

Node blocks of a split scoring (``save_columns``/``load_columns``) use one uncompressed file per block.

``locked`` serialises the writers of one job's state across processes (``flock``: released by the
kernel when its holder dies, so no lock outlives a killed worker).

Plain Python: numpy, no Django.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .products import STATE_ARRAYS, ScoredColumns, empty_columns, row_order

FORMAT = 1
CHUNK_COLUMNS = 60  # 10 minutes at 10 s, 1 h at 60 s: about 13 MB per chunk for 4,096 GPUs


def fingerprint_equal(a: dict | None, b: dict | None) -> bool:
    """Fingerprints compare as their JSON (what the state file keeps), so a tuple and a list are equal."""
    if a is None or b is None:
        return False
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@dataclass
class ScoreState:
    fingerprint: dict
    step_s: float
    origin_ns: int  # start of column 0 (the epoch-aligned bucket holding the job's start)
    hosts: np.ndarray  # (gpus,) object
    gpus: np.ndarray  # (gpus,) int16
    arrays: dict  # STATE_ARRAYS name -> (gpus, columns)
    counts: np.ndarray  # (columns,) int64 raw samples behind each column
    complete: int  # columns [0, complete) are final: the next update reads the store from column ``complete``

    @property
    def columns(self) -> int:
        return len(self.counts)

    @property
    def step_ns(self) -> int:
        return int(round(self.step_s * 1e9))

    def column_start_ns(self, column: int) -> int:
        return self.origin_ns + int(column) * self.step_ns

    def times(self) -> np.ndarray:
        return (self.origin_ns + np.arange(self.columns, dtype=np.int64) * self.step_ns).astype("datetime64[ns]")

    def scored(self) -> ScoredColumns:
        return ScoredColumns(self.hosts, self.gpus, self.times(), float(self.step_s), self.arrays, self.counts)

    @property
    def samples(self) -> int:
        return int(self.counts.sum())

    @classmethod
    def from_columns(cls, scored: ScoredColumns, *, fingerprint: dict, step_s: float, complete: int) -> "ScoreState":
        origin = int(scored.times[0].astype("datetime64[ns]").astype(np.int64))
        return cls(fingerprint=fingerprint, step_s=float(step_s), origin_ns=origin, hosts=np.asarray(scored.hosts, dtype=object),
                   gpus=np.asarray(scored.gpus, dtype="int16"), arrays=dict(scored.arrays),
                   counts=np.asarray(scored.counts, dtype=np.int64), complete=max(0, min(int(complete), len(scored.counts))))

    def splice(self, first: int, new: ScoredColumns, hosts_order: list[str] | None, complete: int) -> int:
        """Replace the columns from ``first`` on by ``new``'s (its first column must be column ``first``) and
        mark columns before ``complete`` final. GPUs that ``new`` has and the state lacks get rows (in the
        job's order) holding what an absent GPU scores; GPUs absent from ``new`` get the same in its columns.
        Returns the number of rows added."""
        if not 0 <= first <= self.columns:
            raise ValueError(f"column {first} is past the state's {self.columns} columns")
        expected = self.column_start_ns(first)
        got = int(new.times[0].astype("datetime64[ns]").astype(np.int64)) if len(new.times) else expected
        if got != expected:
            raise ValueError("the new columns do not start where the state's column they replace starts")
        position = {(host, int(gpu)): i for i, (host, gpu) in enumerate(zip(self.hosts, self.gpus))}
        added = [(host, int(gpu)) for host, gpu in zip(new.hosts, new.gpus) if (host, int(gpu)) not in position]
        kept = {name: array[:, :first] for name, array in self.arrays.items()}
        if added:
            hosts = np.concatenate([self.hosts, np.array([h for h, _ in added], dtype=object)])
            gpus = np.concatenate([self.gpus, np.array([g for _, g in added], dtype="int16")])
            order = row_order(hosts, gpus, hosts_order)
            old_rows = np.argsort(order)[:len(self.hosts)]  # where each old row goes
            for name, array in kept.items():
                grown = empty_columns(name, (len(hosts), first))
                grown[old_rows] = array
                kept[name] = grown
            self.hosts, self.gpus = hosts[order], gpus[order]
            position = {(host, int(gpu)): i for i, (host, gpu) in enumerate(zip(self.hosts, self.gpus))}
        rows = np.array([position[(host, int(gpu))] for host, gpu in zip(new.hosts, new.gpus)], dtype=np.int64)
        width = len(new.times)
        room = {name: _room(self.arrays[name], first, width) for name in STATE_ARRAYS} if not added else {}
        for name in STATE_ARRAYS:
            if room.get(name) is not None:  # allocated for it (``load_state(width=...)``): no copy of the old columns
                whole = room[name]
                target = whole[:, first:]
                target[...] = empty_columns(name, (1, 1))[0, 0]
                target[rows] = new.arrays[name]
                self.arrays[name] = whole
                continue
            block = empty_columns(name, (len(self.hosts), width))
            block[rows] = new.arrays[name]
            self.arrays[name] = np.concatenate([kept[name], block], axis=1)
        self.counts = np.concatenate([self.counts[:first], np.asarray(new.counts, dtype=np.int64)])
        self.complete = max(0, min(int(complete), self.columns))
        return len(added)


def _room(array: np.ndarray, first: int, width: int) -> np.ndarray | None:
    """The array ``array`` is the first ``first`` columns of, when that one is ``first + width`` wide."""
    base = array.base
    if (array.shape[1] == first and isinstance(base, np.ndarray) and base.ndim == 2
            and base.shape == (array.shape[0], first + width) and base.dtype == array.dtype and base.flags.c_contiguous and np.shares_memory(base[:, :1], array[:, :1])
            and (first == 0 or base.__array_interface__["data"][0] == array.__array_interface__["data"][0])):
        return base
    return None


# ---------------------------------------------------------------------------------------------
# Files


def _write_npz(path: Path, **arrays) -> None:
    temporary = path.with_name(path.name + ".tmp.npz")
    np.savez(temporary, **arrays)
    os.replace(temporary, path)


def _write_npy(path: Path, array: np.ndarray) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        np.save(handle, array)
    os.replace(temporary, path)


def _chunk_path(folder: Path, index: int) -> Path:
    return folder / f"chunk-{index:05d}.npy"


def _counts_path(folder: Path, index: int) -> Path:
    return folder / f"counts-{index:05d}.npy"


def save_state(folder: Path, state: ScoreState, from_column: int = 0) -> None:
    """Write the state: the chunks holding columns ``from_column`` on (all of them by default), the rows,
    then ``state.json``. Columns before ``from_column`` must be what the folder already holds.

    A chunk is one plain ``.npy`` of shape (arrays, GPUs, columns) in float32 (the limiter's -1..7 are
    exact in it) and one of its columns' sample counts: reading it back is a copy out of the page cache."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta_path = folder / "state.json"
    previous = _read_meta(meta_path)
    if previous is None or previous.get("gpus") != len(state.hosts) or previous.get("chunk_columns") != CHUNK_COLUMNS:
        from_column = 0
    if from_column == 0 or not (folder / "rows.npz").exists():
        _write_npz(folder / "rows.npz", hosts=state.hosts.astype("U"), gpus=state.gpus.astype("int16"))
    chunks = -(-state.columns // CHUNK_COLUMNS)
    for index in range(min(from_column, state.columns) // CHUNK_COLUMNS, chunks):
        part = slice(index * CHUNK_COLUMNS, min((index + 1) * CHUNK_COLUMNS, state.columns))
        stack = np.empty((len(STATE_ARRAYS), len(state.hosts), part.stop - part.start), dtype="float32")
        for i, name in enumerate(STATE_ARRAYS):
            stack[i] = state.arrays[name][:, part]
        _write_npy(_chunk_path(folder, index), stack)
        _write_npy(_counts_path(folder, index), np.asarray(state.counts[part], dtype=np.int64))
    for stale in [*folder.glob("chunk-*"), *folder.glob("counts-*")]:
        index = stale.name.split("-")[1].split(".")[0]
        if stale.name.endswith(".tmp") or not index.isdigit() or int(index) >= chunks:
            stale.unlink(missing_ok=True)
    meta = {"format": FORMAT, "fingerprint": state.fingerprint, "step_s": state.step_s, "origin_ns": state.origin_ns,
            "columns": state.columns, "complete": state.complete, "gpus": len(state.hosts), "chunk_columns": CHUNK_COLUMNS,
            "saved": time.time()}
    temporary = meta_path.with_name("state.json.tmp")
    temporary.write_text(json.dumps(meta, default=str))
    os.replace(temporary, meta_path)


def _read_meta(path: Path) -> dict | None:
    try:
        meta = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def read_fingerprint(folder: Path) -> dict | None:
    """The saved state's fingerprint and shape (``state.json``) without reading its arrays; None without a state."""
    return _read_meta(Path(folder) / "state.json")


def load_state(folder: Path, upto: int | None = None, width: int | None = None) -> ScoreState | None:
    """The saved state, or None when there is none or it does not add up. With ``upto``, only its columns
    before that (an update replaces the rest); with ``width``, the arrays are allocated that many columns
    wide, the ones past ``upto`` empty, so that ``splice`` writes the new columns in place."""
    folder = Path(folder)
    meta = _read_meta(folder / "state.json")
    if meta is None:
        return None
    try:
        columns = int(meta["columns"]) if upto is None else max(0, min(int(upto), int(meta["columns"])))
        gpus, per_chunk = int(meta["gpus"]), int(meta["chunk_columns"])
        with np.load(folder / "rows.npz", allow_pickle=False) as rows:
            hosts, gpu_ids = rows["hosts"].astype(object), rows["gpus"].astype("int16")
        if len(hosts) != gpus:
            return None
        allocated = max(columns, int(width or 0))
        arrays = {name: np.empty((gpus, allocated), dtype="int8" if name == "limiter" else "float32") for name in STATE_ARRAYS}
        if allocated > columns:
            for name, array in arrays.items():
                array[:, columns:] = empty_columns(name, (1, 1))[0, 0]
        counts = np.zeros(allocated, dtype=np.int64)
        for index in range(-(-columns // per_chunk)):
            first = index * per_chunk
            span = min(per_chunk, columns - first)
            stack = np.load(_chunk_path(folder, index), mmap_mode="r", allow_pickle=False)
            chunk_counts = np.load(_counts_path(folder, index), allow_pickle=False)
            if stack.shape[:2] != (len(STATE_ARRAYS), gpus) or stack.shape[2] < span or chunk_counts.shape[0] < span:
                return None
            counts[first:first + span] = chunk_counts[:span]
            for i, name in enumerate(STATE_ARRAYS):
                arrays[name][:, first:first + span] = stack[i, :, :span]
            del stack
    except (OSError, KeyError, ValueError):
        return None
    return ScoreState(fingerprint=meta["fingerprint"], step_s=float(meta["step_s"]), origin_ns=int(meta["origin_ns"]),
                      hosts=hosts, gpus=gpu_ids, arrays={name: array[:, :columns] for name, array in arrays.items()},
                      counts=counts[:columns], complete=min(int(meta["complete"]), columns))


def remove_state(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def save_columns(path: Path, scored: ScoredColumns) -> None:
    """One node block of a split scoring, uncompressed, written atomically (a block seen is a block done)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_npz(path, hosts=np.asarray(scored.hosts).astype("U"), gpus=np.asarray(scored.gpus, dtype="int16"),
               times=scored.times.astype("datetime64[ns]").astype(np.int64), interval_s=np.array(scored.interval_s),
               counts=np.asarray(scored.counts, dtype=np.int64), **{f"array_{name}": scored.arrays[name] for name in STATE_ARRAYS})


def load_columns(path: Path) -> ScoredColumns:
    with np.load(path, allow_pickle=False) as data:
        return ScoredColumns(hosts=data["hosts"].astype(object), gpus=data["gpus"], times=data["times"].astype("datetime64[ns]"),
                             interval_s=float(data["interval_s"]), counts=data["counts"],
                             arrays={name: data[f"array_{name}"] for name in STATE_ARRAYS})


def concatenate_blocks(blocks: list[ScoredColumns]) -> ScoredColumns:
    """Node blocks (each in the job's order, blocks in node order) as one: rows one after the other."""
    blocks = [block for block in blocks if len(block.hosts)]
    if not blocks:
        raise ValueError("no samples to score")
    first = blocks[0]
    for block in blocks[1:]:
        if not np.array_equal(block.times, first.times):
            raise ValueError("node blocks scored on different columns cannot be merged")
    return ScoredColumns(hosts=np.concatenate([b.hosts for b in blocks]), gpus=np.concatenate([b.gpus for b in blocks]),
                         times=first.times, interval_s=first.interval_s,
                         arrays={name: np.concatenate([b.arrays[name] for b in blocks]) for name in STATE_ARRAYS},
                         counts=np.sum([b.counts for b in blocks], axis=0).astype(np.int64))


@contextmanager
def locked(path: Path, timeout: float | None = None):
    """Hold an exclusive lock on ``path`` (a small file next to the state) for the block; waits for the
    holder, at most ``timeout`` seconds when given (then TimeoutError)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        if timeout is None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{path} stayed locked for {timeout:.0f} s") from None
                    time.sleep(0.05)
        yield
    finally:
        handle.close()
