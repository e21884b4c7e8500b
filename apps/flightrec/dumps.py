"""One rank's PyTorch Flight Recorder dump, read as untrusted input.

PyTorch writes a rank's dump (``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` at the ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix,
or ``torch._C._distributed_c10d._dump_fr_trace``) as a pickle of plain containers, or as JSON
(``_dump_fr_trace_json``): ``{"version": "2.x", "pg_config": {name: {"name", "desc", "ranks": "[0, 1]"}},
"pg_status": {...}, "entries": [{record_id, pg_id, process_group: (name, desc), collective_seq_id, p2p_seq_id,
op_id, profiling_name, time_created_ns, input_sizes, input_dtypes, output_sizes, output_dtypes, state,
time_discovered_started_ns, time_discovered_completed_ns, frames, is_p2p, retired, timeout_ms}, ...]}``
(facts from PyTorch's ``torch/csrc/distributed/c10d/FlightRecorder*.hpp`` and its own reader,
``torch/distributed/flight_recorder/components/loader.py``, which calls ``pickle.load``).

**A dump is never unpickled with the standard unpickler.** :class:`PlainUnpickler` is the C unpickler with
``find_class`` and ``persistent_load`` refusing everything by name: without them no pickle opcode can reach a
callable (``REDUCE``, ``BUILD``, ``INST``, ``OBJ``, ``NEWOBJ`` and the extension registry all need a class
``find_class`` gives), so the only things it builds are the containers and scalars the opcodes make themselves
(dicts, lists, tuples, strings, bytes, numbers, booleans, None; sets and bytearrays, which :func:`read_dump`
refuses by name where it meets them). A pickle that would run code is refused before anything runs, naming the
global it asked for ("refused: the dump asks for os.system; a Flight Recorder dump holds only plain data").

Bounds: the caller bounds the bytes (``max_bytes``); entries beyond ``max_entries``, frames beyond
``MAX_FRAMES`` per entry and sizes beyond ``MAX_TENSORS`` per entry are refused or cut, so memory stays a small
multiple of the file. A truncated file is a :class:`DumpRefused` that says so.

Plain Python: no Django.
"""
from __future__ import annotations

import functools
import io
import json
import pickle
import re
from dataclasses import dataclass, field
from typing import Any

MAX_ENTRIES = 200_000  # PyTorch's default buffer is 2,000 (TORCH_FR_BUFFER_SIZE); 100x that is no ring buffer
MAX_FRAMES = 64  # frames kept per entry (the innermost first, as PyTorch records them)
MAX_TENSORS = 4096  # sizes or dtypes listed per entry (a coalesced all-gather of many tensors)
SUPPORTED_MAJOR = 2


class DumpRefused(ValueError):
    """The dump cannot be read; ``where`` names the field or position (for the API's error item)."""

    def __init__(self, message: str, where: str = "body"):
        super().__init__(message)
        self.where = where


class PlainUnpickler(pickle.Unpickler):
    """The C unpickler that builds plain containers only: every global and persistent id is refused by name."""

    def find_class(self, module, name):  # noqa: D401 - pickle's hook
        raise DumpRefused(f"refused: the dump asks for {module}.{name}; a Flight Recorder dump holds only plain data "
                          "(dicts, lists, tuples, strings, numbers, booleans, None), so nothing in it was run", "body")

    def persistent_load(self, pid):
        raise DumpRefused("refused: the dump asks for a persistent object; a Flight Recorder dump holds only plain data",
                          "body")


def plain_loads(data: bytes) -> Any:
    """Unpickle ``data`` building plain data only (see :class:`PlainUnpickler`); :class:`DumpRefused` otherwise."""
    try:
        return PlainUnpickler(io.BytesIO(data)).load()
    except DumpRefused:
        raise
    except EOFError:
        raise DumpRefused(f"the pickle is truncated: it ends after {len(data):,} bytes before its STOP opcode "
                          "(a dump copied while PyTorch was still writing it, or cut by a full disk)") from None
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "truncated" in text or "ran out of input" in text.lower():
            raise DumpRefused(f"the pickle is truncated after {len(data):,} bytes ({text})") from None
        raise DumpRefused(f"not a readable pickle: {text}") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, MemoryError, RecursionError,
            UnicodeDecodeError, OverflowError) as exc:
        raise DumpRefused(f"not a readable pickle: {type(exc).__name__}: {str(exc)[:200]}") from None


def sniff_format(data: bytes) -> str:
    """``pickle`` (protocol 2+ starts with PROTO 0x80), ``json`` (``{``) or ``tar`` (gzip magic)."""
    head = data[:2]
    if head[:1] == b"\x80":
        return "pickle"
    if head == b"\x1f\x8b":
        return "tar"
    if data.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "unknown"


# ---------------------------------------------------------------------------------------------
# Normalised entries
# ---------------------------------------------------------------------------------------------
@dataclass
class Entry:
    """One Flight Recorder entry, normalised (JSON's 0 for "no time" is None; state lower case)."""

    record_id: int
    pg_name: str
    pg_desc: str
    seq: int  # collective_seq_id
    p2p_seq: int
    op_id: int
    op: str  # profiling_name without the backend ("all_reduce", "send 0->1")
    is_p2p: bool
    input_sizes: tuple
    output_sizes: tuple
    input_dtypes: tuple
    output_dtypes: tuple
    state: str  # scheduled, started, completed
    retired: bool
    created_ns: int | None
    started_ns: int | None
    completed_ns: int | None
    timeout_ms: int | None
    frames: list[dict] = field(default_factory=list)

    @property
    def done(self) -> bool:
        """Completed: NCCL marks the state; gloo leaves it 'scheduled' and retires the entry when its work ends."""
        return self.state == "completed" or self.retired

    @property
    def last_ns(self) -> int:
        return max(self.completed_ns or 0, self.started_ns or 0, self.created_ns or 0)

    def to_dict(self, *, frames: bool = True) -> dict:
        body = {"record_id": self.record_id, "process_group": [self.pg_name, self.pg_desc],
                "collective_seq_id": self.seq, "p2p_seq_id": self.p2p_seq, "op_id": self.op_id, "op": self.op,
                "is_p2p": self.is_p2p, "input_sizes": [list(s) for s in self.input_sizes],
                "output_sizes": [list(s) for s in self.output_sizes], "input_dtypes": list(self.input_dtypes),
                "output_dtypes": list(self.output_dtypes), "state": self.state, "retired": self.retired,
                "time_created_ns": self.created_ns, "time_discovered_started_ns": self.started_ns,
                "time_discovered_completed_ns": self.completed_ns, "timeout_ms": self.timeout_ms}
        if frames:
            body["frames"] = self.frames
        return body


@dataclass
class PgConfig:
    name: str
    desc: str
    ranks: tuple[int, ...] | None  # None: the dump does not list them (gloo leaves pg_config empty)


@dataclass
class RankDump:
    rank: int
    version: str
    pg_config: dict[str, PgConfig]
    pg_status: dict[str, dict]
    entries: list[Entry]
    comm_lib_version: str = ""

    @property
    def first_ns(self) -> int | None:
        times = [e.created_ns for e in self.entries if e.created_ns]
        return min(times) if times else None

    @property
    def last_ns(self) -> int | None:
        times = [e.last_ns for e in self.entries if e.last_ns]
        return max(times) if times else None


def _kind(value) -> str:
    return type(value).__name__


def _int(value, where: str, *, optional: bool = False) -> int | None:
    if value is None or (optional and value == ""):
        if optional:
            return None
        raise DumpRefused(f"{where} is missing", where)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal() and value.isascii() and len(value) < 30:
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise DumpRefused(f"{where} is a {_kind(value)} ({str(value)[:40]!r}), not a whole number", where)


def _text(value, where: str) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    if value is None:
        return ""
    raise DumpRefused(f"{where} is a {_kind(value)}, not text", where)


def _sizes(value, where: str) -> tuple:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise DumpRefused(f"{where} is a {_kind(value)}, not a list of tensor shapes", where)
    if len(value) > MAX_TENSORS:
        raise DumpRefused(f"{where} lists {len(value):,} tensors (at most {MAX_TENSORS:,} are read)", where)
    shapes = []
    for shape in value:
        if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise DumpRefused(f"{where} holds {_kind(shape)} {str(shape)[:40]}, not a shape (a list of whole numbers)", where)
        shapes.append(tuple(shape))
    return tuple(shapes)


def _dtypes(value, where: str) -> tuple:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or len(value) > MAX_TENSORS or not all(isinstance(d, str) for d in value):
        raise DumpRefused(f"{where} is not a list of dtype names", where)
    return tuple(value)


def _frames(value, where: str) -> list[dict]:
    if not value:
        return []
    if not isinstance(value, (list, tuple)):
        raise DumpRefused(f"{where} is a {_kind(value)}, not a list of frames", where)
    frames = []
    for frame in value[:MAX_FRAMES]:
        if not isinstance(frame, dict):
            raise DumpRefused(f"{where} holds a {_kind(frame)}, not a frame", where)
        frames.append({"name": _text(frame.get("name"), where)[:200], "filename": _text(frame.get("filename"), where)[:300],
                       "line": _int(frame.get("line"), where, optional=True)})
    return frames


def _op_name(profiling_name: str) -> str:
    """"nccl:all_reduce" -> "all_reduce"; "gloo:send 0->1" -> "send 0->1"."""
    head, sep, rest = profiling_name.partition(":")
    return rest if sep and head.isalpha() and len(head) <= 10 else profiling_name


def _time(value, where: str) -> int | None:
    number = _int(value, where, optional=True)
    return number if number else None  # JSON writes 0 for "not discovered"


def entry_from(raw, where: str, *, frames: bool = True) -> Entry:
    if not isinstance(raw, dict):
        raise DumpRefused(f"{where} is a {_kind(raw)}, not an entry (a dict)", where)
    group = raw.get("process_group")
    if not isinstance(group, (list, tuple)) or len(group) != 2:
        raise DumpRefused(f"{where}.process_group is not a (name, description) pair", f"{where}.process_group")
    state = _text(raw.get("state"), f"{where}.state").lower()
    return Entry(
        record_id=_int(raw.get("record_id"), f"{where}.record_id"),
        pg_name=_text(group[0], f"{where}.process_group"), pg_desc=_text(group[1], f"{where}.process_group"),
        seq=_int(raw.get("collective_seq_id", 0), f"{where}.collective_seq_id"),
        p2p_seq=_int(raw.get("p2p_seq_id", 0), f"{where}.p2p_seq_id"),
        op_id=_int(raw.get("op_id", 0), f"{where}.op_id"),
        op=_op_name(_text(raw.get("profiling_name"), f"{where}.profiling_name")),
        is_p2p=bool(raw.get("is_p2p", False)),
        input_sizes=_sizes(raw.get("input_sizes"), f"{where}.input_sizes"),
        output_sizes=_sizes(raw.get("output_sizes"), f"{where}.output_sizes"),
        input_dtypes=_dtypes(raw.get("input_dtypes"), f"{where}.input_dtypes"),
        output_dtypes=_dtypes(raw.get("output_dtypes"), f"{where}.output_dtypes"),
        state=state, retired=bool(raw.get("retired", False)),
        created_ns=_time(raw.get("time_created_ns"), f"{where}.time_created_ns"),
        started_ns=_time(raw.get("time_discovered_started_ns"), f"{where}.time_discovered_started_ns"),
        completed_ns=_time(raw.get("time_discovered_completed_ns"), f"{where}.time_discovered_completed_ns"),
        timeout_ms=_int(raw.get("timeout_ms"), f"{where}.timeout_ms", optional=True),
        frames=_frames(raw.get("frames"), f"{where}.frames") if frames else [],
    )


@functools.lru_cache(maxsize=4096)
def _ranks_text(text: str) -> tuple[int, ...] | None:
    """ "[0, 1, 2]" -> (0, 1, 2) without eval; None when it is not such a list (every dump of a job repeats the
    default group's, so each distinct text is read once)."""
    inner = text.strip()
    if not inner.startswith("[") or not inner.endswith("]"):
        return None
    inner = inner[1:-1].strip()
    if not inner:
        return ()
    if not _RANK_LIST.fullmatch(inner):
        return None
    return tuple(int(part) for part in inner.split(","))


_RANK_LIST = re.compile(r"[0-9]{1,9}(\s*,\s*[0-9]{1,9})*")


def _ranks_of(text, where: str) -> tuple[int, ...] | None:
    """pg_config's ranks: PyTorch writes the list as text ("[0, 1, 2]"); read it without eval."""
    if isinstance(text, str) and len(text) < 10_000_000:
        ranks = _ranks_text(text)
        if ranks is not None:
            return ranks or None
    if isinstance(text, (list, tuple)):
        items = list(text)
    else:
        text = _text(text, where).strip()
        if not text.startswith("[") or not text.endswith("]"):
            raise DumpRefused(f"{where} is {text[:40]!r}, not a list of ranks", where)
        inner = text[1:-1].strip()
        items = [part.strip() for part in inner.split(",")] if inner else []
    ranks = tuple(_int(item, where) for item in items)
    return ranks or None  # "[]": gloo does not record the members


@dataclass
class Header:
    version: str
    pg_config: dict[str, PgConfig]
    pg_status: dict[str, dict]
    entries: list  # the raw entries, not read yet
    comm_lib_version: str = ""


def read_header(data: Any, *, max_entries: int = MAX_ENTRIES) -> Header:
    """Check what the unpickler or ``json.loads`` built is a Flight Recorder dump of a version read here; its
    process-group config read, its entries left raw (:func:`entry_from` reads one; the analysis reads them in bulk)."""
    if not isinstance(data, dict):
        raise DumpRefused(f"the dump is a {_kind(data)}, not a Flight Recorder dump (a dict with version and entries)")
    if "version" not in data or "entries" not in data:
        missing = [key for key in ("version", "entries") if key not in data]
        raise DumpRefused(f"not a Flight Recorder dump: it has no {' or '.join(missing)} "
                          f"(keys: {', '.join(sorted(str(k) for k in list(data)[:10]))})", missing[0])
    version = _text(data["version"], "version")
    major, _, minor = version.partition(".")
    if not (major.isdecimal() and minor.isdecimal()) or int(major) != SUPPORTED_MAJOR:
        raise DumpRefused(f"format version {version!r} is not read here: versions 2.x are (PyTorch 2.2 and later)", "version")
    raw_entries = data["entries"]
    if not isinstance(raw_entries, (list, tuple)):
        raise DumpRefused(f"entries is a {_kind(raw_entries)}, not a list", "entries")
    if len(raw_entries) > max_entries:
        raise DumpRefused(f"the dump has {len(raw_entries):,} entries; at most {max_entries:,} are read", "entries")
    configs = {}
    raw_config = data.get("pg_config") or {}
    if not isinstance(raw_config, dict):
        raise DumpRefused(f"pg_config is a {_kind(raw_config)}, not a dict", "pg_config")
    for key, value in raw_config.items():
        if not isinstance(value, dict):
            raise DumpRefused(f"pg_config[{str(key)[:40]!r}] is a {_kind(value)}, not a dict", "pg_config")
        name = _text(value.get("name", key), "pg_config.name") or _text(key, "pg_config")
        if not name:
            continue  # gloo writes {"": {"name": "", "desc": "", "ranks": "[]"}}
        configs[name] = PgConfig(name, _text(value.get("desc"), "pg_config.desc"),
                                 _ranks_of(value.get("ranks", "[]"), f"pg_config[{name!r}].ranks"))
    status = data.get("pg_status") or {}
    if not isinstance(status, dict):
        raise DumpRefused(f"pg_status is a {_kind(status)}, not a dict", "pg_status")
    return Header(version=version, pg_config=configs, pg_status={str(k): v for k, v in status.items() if isinstance(v, dict)},
                  entries=raw_entries, comm_lib_version=_text(data.get("comm_lib_version", ""), "comm_lib_version"))


def from_plain(data: Any, *, rank: int, frames: bool = True, max_entries: int = MAX_ENTRIES) -> RankDump:
    """The normalised dump from what the unpickler or ``json.loads`` built."""
    header = read_header(data, max_entries=max_entries)
    entries = [entry_from(raw, f"entries[{i}]", frames=frames) for i, raw in enumerate(header.entries)]
    return RankDump(rank=rank, version=header.version, pg_config=header.pg_config, pg_status=header.pg_status,
                    entries=entries, comm_lib_version=header.comm_lib_version)


def load_plain(data: bytes, fmt: str = "auto") -> Any:
    """The dump's plain data: the restricted unpickler for a pickle, ``json.loads`` for JSON."""
    if not data:
        raise DumpRefused("the dump is empty (0 bytes)")
    kind = sniff_format(data) if fmt == "auto" else fmt
    if kind == "pickle":
        return plain_loads(data)
    if kind == "json":
        try:
            return json.loads(data)
        except RecursionError:
            raise DumpRefused("the JSON nests too deep to be a Flight Recorder dump") from None
        except (UnicodeDecodeError, ValueError) as exc:
            text = str(exc)
            if isinstance(exc, json.JSONDecodeError) and (exc.pos >= len(data.rstrip()) - 1
                                                          or not data.rstrip().endswith((b"}", b"]"))):
                raise DumpRefused(f"the JSON is truncated: it ends after {len(data):,} bytes ({exc.msg})") from None
            raise DumpRefused(f"not readable JSON: {text[:200]}") from None
    raise DumpRefused("not a Flight Recorder dump: neither a pickle (it starts with 0x80) nor JSON (it starts with '{')")


def read_dump(data: bytes, *, rank: int, fmt: str = "auto", frames: bool = True, max_entries: int = MAX_ENTRIES) -> RankDump:
    """Read one rank's dump (pickle or JSON) from bytes; :class:`DumpRefused` with a clear reason otherwise."""
    return from_plain(load_plain(data, fmt), rank=rank, frames=frames, max_entries=max_entries)


def rank_from_filename(name: str) -> int | None:
    """The rank PyTorch appends to the ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix (``/tmp/nccl_trace_rank_12`` -> 12)."""
    base = name.rsplit("/", 1)[-1]
    for suffix in (".json", ".pkl", ".pickle"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    digits = ""
    for char in reversed(base):
        if not char.isdigit() or not char.isascii():
            break
        digits = char + digits
    return int(digits) if digits and len(digits) <= 9 else None


def _utc(ns: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def check_belongs(dump: RankDump, *, rank: int, world_size: int | None, window_ns: tuple[int, int] | None,
                  job_words: str) -> None:
    """Refuse a dump that cannot be ``job_words``' rank ``rank``: a rank outside the job, a default process group of
    another size, or entries created outside the job's run (its write window). :class:`DumpRefused` says which."""
    if world_size is not None and rank >= world_size:
        raise DumpRefused(f"rank {rank} is outside {job_words}'s ranks 0..{world_size - 1} ({world_size:,} ranks)", "rank")
    for config in dump.pg_config.values():
        if config.desc == "default_pg" and config.ranks and world_size is not None and len(config.ranks) != world_size:
            raise DumpRefused(f"this dump's default process group has {len(config.ranks):,} ranks but {job_words} has "
                              f"{world_size:,}: it belongs to another job", "pg_config")
    if window_ns is not None:
        times = [e.created_ns for e in dump.entries if e.created_ns]
        if times:
            first, last = min(times), max(times)
            if first < window_ns[0] or last > window_ns[1]:
                raise DumpRefused(f"its entries were created from {_utc(first)} to {_utc(last)}, but {job_words} ran from "
                                  f"{_utc(window_ns[0])} to {_utc(window_ns[1])} (its write window, margin included): it belongs to "
                                  "another job, or to an earlier run of this one", "entries.time_created_ns")
