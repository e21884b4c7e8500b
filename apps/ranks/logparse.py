"""Read a Megatron-LM job's parallel sizes and its rank → host map from the job's output.

Pure: must not import django. Standard library only; the upload view and the tests call
:func:`parse_megatron_log` with the text of a log and get plain data back.

What a running Megatron-LM job prints, and what is read from it
(reference: topology-megatron.md §2.4 and §2.5):

* rank 0's argument dump, between ``---- arguments ----`` and ``---- end of arguments ----``:
  one ``name ....... value`` line per argument (the sizes, ``use_tp_pp_dp_mapping``, the layer
  counts, ``world_size``);
* rank 0's ``using world size: W, data-parallel size: D, context-parallel size: C, ...,
  tensor-model-parallel size: T, pipeline-model-parallel size: P`` line, and in older versions
  ``> initialized tensor model parallel with size T`` (``initializing`` …) lines;
* with ``NCCL_DEBUG=INFO``, every rank's ``host:pid:tid [cudaDev] NCCL INFO ...`` lines; the init
  line of a communicator, ``comm 0x... rank r nRanks n nNodes m localRanks 4 localRank k MNNVL 0``
  (``rank r nranks n cudaDev d`` in older NCCL), gives the rank's host. Only communicators with
  ``n`` equal to the world size count: in them the communicator rank is the global rank, while
  the tensor-, pipeline- and data-parallel sub-communicators number their ranks from 0 again;
* ``srun -l`` labels (``123: ``) in front of lines: the Slurm task id. When NCCL lines are
  labelled and the labels agree with the NCCL ranks, they are checked against the init lines and
  place ranks whose init line is missing.

Tolerated: CRLF line ends, ANSI colour codes, timestamps in front of lines
(``[2026-11-21 10:00:01] ``, ``2026-11-21T10:00:01.123Z ``), and lines of other ranks between
rank 0's lines (labelled or not). Logs over :data:`MAX_LOG_BYTES` are refused.

Errors raise :class:`LogParseError` (a ``ValueError``) with one message that says what is missing
or inconsistent and what to do; a malformed relevant line is named as ``line 4,211: ...``
(1-based). What is incomplete but usable (some ranks without an init line, no NCCL lines at all)
is returned with ``warnings``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ARGS_END_RE",
    "ARGS_START_RE",
    "DEFAULT_ORDER",
    "MAX_LOG_BYTES",
    "TP_PP_DP_ORDER",
    "LogParseError",
    "ParsedLog",
    "argument_pair",
    "clean_line",
    "parse_megatron_log",
    "split_line_prefix",
]

MAX_LOG_BYTES = 200 * 1024 * 1024
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"  # --use-tp-pp-dp-mapping

HOST_MAX_LENGTH = 64  # the API's RankPlacementSerializer accepts host names of at most 64 characters
MAX_NOTED_LINES = 3  # garbled lines named one by one in the warnings before "and N more"
MAX_PREFIX_STAMPS = 3  # timestamps in a row in front of a line (a wrapper's, then Megatron's own)
MAX_DUMP_LINES = 20_000  # an argument dump without its end line stops counting after this many lines


class LogParseError(ValueError):
    """The log does not hold what is needed, or contradicts itself; the message says which."""


@dataclass(frozen=True)
class ParsedLog:
    """What one Megatron-LM log says about the job's layout.

    ``sizes``: only what was found (or follows from it: ``dp`` from the world size, ``vpp`` from
    ``num_layers_per_virtual_pipeline_stage``), among ``tp, pp, cp, ep, etp, dp, vpp, order,
    num_layers, first_stage_layers, last_stage_layers, world_size``; ``tp``, ``pp`` and
    ``world_size`` are always there. ``order`` is there when the argument dump is.
    ``ranks``: ``{"rank", "host", "local_rank"}`` dicts sorted by rank; complete when its length
    is the world size (``complete``), otherwise a warning says how many are missing.
    ``warnings``: human-readable lines. ``sources``: which kinds of evidence were found, in this
    order: ``arguments``, ``world_size_line``, ``initialized_lines``, ``nccl_init`` (init lines of the
    world communicator), ``srun_labels``, ``net_ofi`` (``NET/OFI Selected Provider`` lines).
    """

    sizes: dict
    ranks: list
    warnings: list
    sources: list

    @property
    def complete(self) -> bool:
        """True when ``ranks`` places every rank of the world."""
        return len(self.ranks) == self.sizes.get("world_size", -1)


# --------------------------------------------------------------------------------------------
# Line shapes
# --------------------------------------------------------------------------------------------
_ANSI_RE = re.compile(r"\x1b(?:\[[0-9;:?<=>]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_TIMESTAMP_RE = re.compile(
    r"\s*\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?: ?(?:Z|[+-]\d\d:?\d\d|UTC))?\]?:?(?: +|$)"
)
_LABEL_RE = re.compile(r"\s*(?:P[0-9]+ +)?([0-9]{1,7}): ")  # srun -l: "%*d: ", "P<component> %*d: " in het jobs
_ARGS_START_RE = re.compile(r"^\s*-{4,} arguments -{4,}\s*$")
_ARGS_END_RE = re.compile(r"^\s*-{4,} end of arguments -{4,}\s*$")
ARGS_START_RE = _ARGS_START_RE  # public: the first and last line of the argument dump (apps.appmetrics)
ARGS_END_RE = _ARGS_END_RE
_ARG_RE = re.compile(r"^\s*([A-Za-z_]\w*) (\.*) (.*)$")
_WORLD_RE = re.compile(r"using world size:\s*([^\s,]*)")
_WORLD_PARTS = (
    # (sizes key, what the line calls it, pattern)
    ("dp", "data-parallel size", re.compile(r"(?<![\w-])data-parallel[- ]size:\s*([^\s,]*)")),
    ("cp", "context-parallel size", re.compile(r"(?<![\w-])context-parallel size:\s*([^\s,]*)")),
    ("tp", "tensor-model-parallel size", re.compile(r"(?<!encoder-)tensor-model-parallel size:\s*([^\s,]*)")),
    ("pp", "pipeline-model-parallel size", re.compile(r"(?<!encoder-)pipeline-model-parallel size:\s*([^\s,]*)")),
)
_INITIALIZED_RE = re.compile(
    r"> initializ(?:ed|ing) (tensor model|pipeline model|context|data) parallel with size (\S+)"
)
_INITIALIZED_KEYS = {"tensor model": "tp", "pipeline model": "pp", "context": "cp", "data": "dp"}
# Numbers that reach int() are ASCII digits of bounded length: \d also matches other scripts' digits,
# and int() refuses strings of more than 4,300 digits (a garbled or hostile log must not be a 500).
_NCCL_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*):([0-9]+):([0-9]+) \[(-?[0-9]{1,9})\] NCCL INFO ")
_COMM_RE = re.compile(r"\bcomm (?:0x[0-9A-Fa-f]+|\(nil\)) rank ([0-9]{1,9}) n[Rr]anks ([0-9]{1,9})(?=\s|$)")
_COMM_LOCAL_RE = re.compile(r" nNodes ([0-9]{1,9}) localRanks ([0-9]{1,9}) localRank ([0-9]{1,9})\b")
_COMM_CUDADEV_RE = re.compile(r" cudaDev ([0-9]{1,9})\b")
_OFI_RE = re.compile(r"NET/OFI Selected [Pp]rovider is (\S+)")

# Argument dump: name -> (sizes key, smallest valid value); "use_tp_pp_dp_mapping" is a bool.
_ARG_KEYS = {
    "tensor_model_parallel_size": ("tp", 1),
    "pipeline_model_parallel_size": ("pp", 1),
    "context_parallel_size": ("cp", 1),
    "expert_model_parallel_size": ("ep", 1),
    "expert_tensor_parallel_size": ("etp", 1),
    "data_parallel_size": ("dp", 1),
    "virtual_pipeline_model_parallel_size": ("vpp", 1),
    "num_layers_per_virtual_pipeline_stage": ("layers_per_virtual_stage", 1),
    "num_layers": ("num_layers", 1),
    "decoder_first_pipeline_num_layers": ("first_stage_layers", 0),
    "decoder_last_pipeline_num_layers": ("last_stage_layers", 0),
    "world_size": ("world_size", 1),
    "encoder_tensor_model_parallel_size": ("encoder_tp", 0),
    "encoder_pipeline_model_parallel_size": ("encoder_pp", 0),
    "use_tp_pp_dp_mapping": ("tp_pp_dp_mapping", None),
}
_ARG_NAME = {key: name for name, (key, _) in _ARG_KEYS.items()}
_SIZE_KEYS = ("tp", "pp", "cp", "ep", "etp", "dp", "vpp", "order", "num_layers", "first_stage_layers",
              "last_stage_layers", "world_size")
_SOURCES = ("arguments", "world_size_line", "initialized_lines", "nccl_init", "srun_labels", "net_ofi")


def _is_dump_padding(name: str, dots: str) -> bool:
    """Megatron pads every name with dots to 48 characters (no dots for longer names)."""
    return len(name) + len(dots) == 48 or (not dots and len(name) >= 48)


_WHOLE_DIGITS = 12  # no size, layer count or world size comes near 10**12


def _whole(value: str, number: int, what: str) -> int | None:
    """``value`` as a whole number when it is written with the ASCII digits 0-9 (``"²".isdigit()`` is
    True and ``int("²")`` fails), else None; too many digits is a LogParseError naming the line."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    significant = value.lstrip("0") or "0"
    if len(significant) > _WHOLE_DIGITS:
        raise LogParseError(f"{_line(number)}: {what} has {len(significant):,} digits; the line is garbled or not from Megatron")
    return int(significant)


def _line(number: int) -> str:
    return f"line {number:,}"


def _shown(value: str, limit: int = 60) -> str:
    value = value.strip()
    return repr(value if len(value) <= limit else value[:limit] + "…")


def split_line_prefix(line: str) -> tuple[int | None, list[str], str]:
    """(srun label or None, the timestamps in front (as written, outermost first), the rest of the line).

    Public: apps.appmetrics.megatron_log reads Megatron's iteration lines with the same prefixes. Strips a
    timestamps, an ``srun -l`` label, and the timestamps after it (a wrapper's, and Megatron's own
    ``[2026-11-21 10:00:42]`` in front of its iteration lines), at most MAX_PREFIX_STAMPS on each side."""
    label = None
    stamps: list[str] = []
    for part in ("stamps", "label", "stamps"):
        if part == "label":
            match = _LABEL_RE.match(line)
            if match:
                label = int(match.group(1))
                line = line[match.end():]
            continue
        for _ in range(MAX_PREFIX_STAMPS):
            match = _TIMESTAMP_RE.match(line)
            if match is None:
                break
            stamps.append(match.group(0).strip())
            line = line[match.end():]
    return label, stamps, line


def _split_prefix(line: str) -> tuple[int | None, str]:
    """(srun label or None, the line without timestamp and label prefixes)."""
    label, _, rest = split_line_prefix(line)
    return label, rest


def clean_line(raw: str) -> str:
    """One line of a log without its CR (CRLF files) and ANSI colour codes. Public: apps.appmetrics uses it."""
    if raw.endswith("\r"):
        raw = raw[:-1]
    if "\x1b" in raw:
        raw = _ANSI_RE.sub("", raw)
    return raw


_clean = clean_line  # the name this module's own code uses


def argument_pair(line: str) -> tuple[str, str] | None:
    """(name, value) of one line of Megatron's argument dump (``  num_layers ........ 80``, prefixes already
    split off), or None when the line is not one: the name's dot padding must be Megatron's (48 characters).
    Public: apps.appmetrics.megatron_log reads the model config from the same dump."""
    match = _ARG_RE.match(line)
    if match is None or not _is_dump_padding(match.group(1), match.group(2)):
        return None
    return match.group(1), match.group(3).strip()


def _ranges(numbers: list[int], limit: int = 8) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0–2, 5, 7–8' (at most `limit` pieces, then '…')."""
    pieces, start, previous = [], None, None
    for number in sorted(numbers):
        if start is None:
            start = previous = number
        elif number == previous + 1:
            previous = number
        else:
            pieces.append((start, previous))
            start = previous = number
    if start is not None:
        pieces.append((start, previous))
    text = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in pieces[:limit])
    return text + (", …" if len(pieces) > limit else "")


# --------------------------------------------------------------------------------------------
# Collecting
# --------------------------------------------------------------------------------------------
class _ArgumentDump:
    """One '---- arguments ----' block: relevant values, with the line each came from."""

    def __init__(self, start_line: int, label: int | None):
        self.start_line = start_line
        self.label = label
        self.values: dict = {}
        self.lines: dict = {}
        self.ended = False

    def add(self, name: str, raw_value: str, number: int) -> None:
        key, minimum = _ARG_KEYS[name]
        value = raw_value.strip()
        if minimum is None:  # the one bool
            if value not in ("True", "False"):
                raise LogParseError(
                    f"{_line(number)}: {name} is {_shown(value)} in the argument dump, not True or False: the line is "
                    "garbled (output of several ranks mixed?); run with srun -l, or upload a clean log"
                )
            self.values[key], self.lines[key] = value == "True", number
            return
        if value == "None":
            return
        whole = _whole(value, number, name)
        if whole is None:
            raise LogParseError(
                f"{_line(number)}: {name} is {_shown(value)} in the argument dump, not a whole number: the line is "
                "garbled (output of several ranks mixed?); run with srun -l, or upload a clean log"
            )
        if whole < minimum:
            raise LogParseError(
                f"{_line(number)}: {name} is {whole} in the argument dump; it must be at least {minimum}"
            )
        self.values[key], self.lines[key] = whole, number


class _Collector:
    def __init__(self) -> None:
        self.dumps: list[_ArgumentDump] = []
        self.current: _ArgumentDump | None = None
        self.world_lines: list[tuple[int, dict]] = []  # (line, {key: value})
        self.initialized: dict = {}  # key -> (value, line)
        self.comms: dict = {}  # nRanks -> [(rank, host, local_rank | None, device, line, label)]
        self.label_hosts: dict = {}  # label -> (host, device, line)
        self.label_conflicts: dict = {}  # label -> (host, line, other host, other line)
        self.labelled_lines = 0
        self.garbled_comm_lines: list[int] = []
        self.ofi_providers: set = set()
        self.prefix_cache: dict = {}

    # -- rank 0's Megatron lines --------------------------------------------------------------
    def argument_line(self, number: int, raw: str) -> bool:
        """Inside a dump: consume the line if it belongs to it. False: look at it otherwise."""
        label, line = _split_prefix(_clean(raw))
        dump = self.current
        if dump.label is not None and label != dump.label:
            return False  # another rank's line in between
        if _ARGS_END_RE.match(line):
            dump.ended = True
            self.current = None
            return True
        if _ARGS_START_RE.match(line):
            self.start_dump(number, label)
            return True
        match = _ARG_RE.match(line)
        if match is None or not _is_dump_padding(match.group(1), match.group(2)):
            if number - dump.start_line > MAX_DUMP_LINES:
                self.current = None  # cut without its end line; stop looking
            return False
        if match.group(1) in _ARG_KEYS:
            dump.add(match.group(1), match.group(3), number)
        return True

    def start_dump(self, number: int, label: int | None) -> None:
        self.current = _ArgumentDump(number, label)
        self.dumps.append(self.current)

    def world_line(self, number: int, line: str) -> None:
        match = _WORLD_RE.search(line)
        if match is None:
            return
        values = {}
        world_size = _whole(match.group(1), number, "the world size")
        if world_size is None:
            raise LogParseError(
                f"{_line(number)}: the 'using world size' line has no world size ({_shown(line)}): the line is "
                "garbled; run with srun -l, or upload a clean log"
            )
        values["world_size"] = world_size
        tail = line[match.end():]
        for key, called, pattern in _WORLD_PARTS:
            part = pattern.search(tail)
            if part is None:
                continue
            size = _whole(part.group(1), number, f"the {called}")
            if size is None or size < 1:
                raise LogParseError(
                    f"{_line(number)}: the 'using world size' line gives {called} {_shown(part.group(1))}, not a "
                    "positive whole number: the line is garbled; run with srun -l, or upload a clean log"
                )
            values[key] = size
        if "tp" not in values or "pp" not in values:
            raise LogParseError(
                f"{_line(number)}: the 'using world size' line has no tensor- or pipeline-model-parallel size "
                f"({_shown(line, 120)}): the line is cut or garbled; run with srun -l, or upload a clean log"
            )
        self.world_lines.append((number, values))

    def initialized_line(self, number: int, line: str) -> None:
        match = _INITIALIZED_RE.search(line)
        if match is None:
            return
        key = _INITIALIZED_KEYS[match.group(1)]
        value = _whole(match.group(2), number, "the parallel size")
        if value is None:
            raise LogParseError(f"{_line(number)}: {_shown(line)} gives no whole number: the line is garbled")
        if key in self.initialized and self.initialized[key][0] != value:
            other_value, other_line = self.initialized[key]
            raise LogParseError(
                f"'> initialized {match.group(1)} parallel' says {other_value} on {_line(other_line)} and {value} on "
                f"{_line(number)}: the log holds more than one run; upload the output of one run"
            )
        self.initialized.setdefault(key, (value, number))

    # -- NCCL lines ------------------------------------------------------------------------------
    def nccl_line(self, number: int, raw: str) -> None:
        cut = raw.find(" NCCL INFO ")
        head = raw[:cut + 11]
        prefix = self.prefix_cache.get(head)
        if prefix is None:
            label, line = _split_prefix(_clean(head))
            match = _NCCL_RE.search(line)
            prefix = (label, match.group(1), int(match.group(4))) if match else ()
            if len(self.prefix_cache) > 200_000:
                self.prefix_cache.clear()
            self.prefix_cache[head] = prefix
        if not prefix:
            return
        label, host, device = prefix
        message = raw[cut + 11:]
        if label is not None:
            self.labelled_lines += 1
            seen = self.label_hosts.get(label)
            if seen is None:
                self.label_hosts[label] = (host, device, number)
            elif seen[0] != host and label not in self.label_conflicts:
                self.label_conflicts[label] = (seen[0], seen[2], host, number)
        if "comm " in message and " rank " in message:
            message = _clean(message)
            match = _COMM_RE.search(message)
            if match is None:
                if "comm 0x" in message and ("nRa" in message or "nra" in message):
                    self.garbled_comm_lines.append(number)
                return
            rank, nranks = int(match.group(1)), int(match.group(2))
            if len(host) > HOST_MAX_LENGTH:
                raise LogParseError(
                    f"{_line(number)}: the host name {_shown(host)} is longer than {HOST_MAX_LENGTH} characters"
                )
            if rank >= nranks:
                raise LogParseError(
                    f"{_line(number)}: NCCL says rank {rank} in a communicator of nRanks {nranks}: the line is "
                    "garbled; upload a clean log"
                )
            local = _COMM_LOCAL_RE.search(message, match.end())
            local_rank = None
            if local is not None:
                local_ranks, local_rank = int(local.group(2)), int(local.group(3))
                if local_rank >= local_ranks:
                    raise LogParseError(
                        f"{_line(number)}: NCCL says localRank {local_rank} of localRanks {local_ranks}: the line is "
                        "garbled; upload a clean log"
                    )
            else:
                cuda = _COMM_CUDADEV_RE.search(message, match.end())
                if cuda is not None:
                    device = int(cuda.group(1))
            self.comms.setdefault(nranks, []).append((rank, host, local_rank, device, number, label))
        elif "NET/OFI" in message:
            match = _OFI_RE.search(message)
            if match:
                self.ofi_providers.add(match.group(1))


def _collect(text: str) -> _Collector:
    found = _Collector()
    for number, raw in enumerate(text.split("\n"), 1):
        if found.current is not None and found.argument_line(number, raw):
            continue
        if " NCCL INFO " in raw:
            found.nccl_line(number, raw)
        elif "using world size" in raw:
            found.world_line(number, _split_prefix(_clean(raw))[1])
        elif " arguments --" in raw:
            label, line = _split_prefix(_clean(raw))
            if _ARGS_START_RE.match(line):
                found.start_dump(number, label)
        elif "parallel with size" in raw and "> initializ" in raw:
            found.initialized_line(number, _clean(raw))
    return found


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------
def _arguments(found: _Collector, warnings: list) -> tuple[dict, dict]:
    """The argument dump's values and their lines; several dumps must agree."""
    dumps = [dump for dump in found.dumps if dump.values]
    if not dumps:
        return {}, {}
    first = dumps[0]
    for other in dumps[1:]:
        for key in sorted(set(first.values) | set(other.values)):
            if first.values.get(key) != other.values.get(key):
                raise LogParseError(
                    f"two argument dumps disagree: {_ARG_NAME[key]} is {first.values.get(key)} on "
                    f"{_line(first.lines.get(key, first.start_line))} and {other.values.get(key)} on "
                    f"{_line(other.lines.get(key, other.start_line))}: the log holds more than one run; upload the "
                    "output of one run"
                )
    if not dumps[-1].ended:
        warnings.append(
            f"the argument dump that starts on {_line(dumps[-1].start_line)} has no '---- end of arguments ----' line "
            "(log cut?): arguments after the cut are unknown"
        )
    return dict(first.values), dict(first.lines)


def _world_line(found: _Collector) -> tuple[dict, int | None]:
    if not found.world_lines:
        return {}, None
    number, values = found.world_lines[0]
    for other_number, other in found.world_lines[1:]:
        if other != values:
            raise LogParseError(
                f"two 'using world size' lines disagree (lines {number:,} and {other_number:,}): the log holds more "
                "than one run; upload the output of one run"
            )
    return values, number


def _sizes(found: _Collector, warnings: list) -> dict:
    arguments, argument_lines = _arguments(found, warnings)
    world, world_number = _world_line(found)
    if not arguments and not world:
        raise LogParseError(
            "no Megatron argument dump and no 'using world size' line: run with the default logging of rank 0 "
            "(the '---- arguments ----' block); with one output file per task (--output=...%t), upload task 0's file"
        )

    # The same number from two kinds of lines must agree.
    for key in ("world_size", "tp", "pp", "cp", "dp"):
        if key in arguments and key in world and arguments[key] != world[key]:
            raise LogParseError(
                f"the arguments say {_ARG_NAME[key]}={arguments[key]} but the 'using world size' line says "
                f"{world[key]} (lines {argument_lines[key]:,} and {world_number:,}): the log holds more than one "
                "run? upload the output of one run"
            )
    for key, (value, number) in sorted(found.initialized.items()):
        if key in arguments and arguments[key] != value:
            raise LogParseError(
                f"the arguments say {_ARG_NAME[key]}={arguments[key]} but the '> initialized' line on {_line(number)} "
                f"says {value}: the log holds more than one run? upload the output of one run"
            )
        if key in world and world[key] != value:
            raise LogParseError(
                f"the 'using world size' line says {key} {world[key]} but the '> initialized' line on {_line(number)} "
                f"says {value}: the log holds more than one run? upload the output of one run"
            )

    sizes: dict = {}
    for source in (world, {key: value for key, (value, _) in found.initialized.items()}, arguments):
        sizes.update({key: value for key, value in source.items() if key in _SIZE_KEYS})
    if arguments:
        sizes["order"] = TP_PP_DP_ORDER if arguments.get("tp_pp_dp_mapping") else DEFAULT_ORDER
    if "world_size" not in sizes:
        raise LogParseError(
            "the argument dump has no world_size and there is no 'using world size' line: upload rank 0's complete "
            "output (the 'using world size' line comes just before the argument dump)"
        )
    for key in ("tp", "pp"):
        if key not in sizes:
            raise LogParseError(
                f"the log gives no {_ARG_NAME[key]}: the argument dump is cut before it and there is no 'using world "
                "size' line; upload rank 0's complete output"
            )

    world_size, tp, pp, cp = sizes["world_size"], sizes["tp"], sizes["pp"], sizes.get("cp", 1)
    encoder = arguments.get("encoder_tp", 0) or arguments.get("encoder_pp", 0)
    if encoder:
        warnings.append("the job has encoder parallelism (encoder_*_model_parallel_size > 0): only the decoder's "
                        "layout is described")
    elif world_size % (tp * pp * cp):
        raise LogParseError(
            f"the world size {world_size} is not a multiple of tp·pp·cp = {tp}·{pp}·{cp} = {tp * pp * cp}: the sizes "
            "come from different runs? upload the output of one run"
        )
    else:
        dp = world_size // (tp * pp * cp)
        if "dp" in sizes and sizes["dp"] != dp:
            raise LogParseError(
                f"the log says data_parallel_size={sizes['dp']} but world_size / (tp·pp·cp) = {world_size} / "
                f"{tp * pp * cp} = {dp}: the sizes come from different runs? upload the output of one run"
            )
        sizes["dp"] = dp
        ep, etp = sizes.get("ep", 1), sizes.get("etp", tp)
        if world_size % (ep * etp * pp):
            raise LogParseError(
                f"the world size {world_size} is not a multiple of ep·etp·pp = {ep}·{etp}·{pp} = {ep * etp * pp}: "
                "the sizes come from different runs? upload the output of one run"
            )
    if "vpp" not in sizes and arguments.get("layers_per_virtual_stage") and sizes.get("num_layers"):
        per_stage = sizes["num_layers"] // pp
        if per_stage % arguments["layers_per_virtual_stage"] == 0:
            sizes["vpp"] = per_stage // arguments["layers_per_virtual_stage"]
    if not arguments:
        warnings.append(
            "no Megatron argument dump, only the 'using world size' line: ep, vpp, the order "
            "(--use-tp-pp-dp-mapping) and the layer counts are unknown"
        )
    return {key: sizes[key] for key in _SIZE_KEYS if key in sizes}


def _ranks(found: _Collector, world_size: int, warnings: list, sources: list) -> list:
    entries = found.comms.get(world_size, [])
    placed: dict = {}  # rank -> [host, local_rank, device, line]
    local_conflicts = []
    host_conflicts: dict = {}  # rank -> (host, line, other host, other line)
    for rank, host, local_rank, device, number, _label in entries:
        seen = placed.get(rank)
        if seen is None:
            placed[rank] = [host, local_rank, device, number]
        elif seen[0] != host:
            host_conflicts.setdefault(rank, (seen[0], seen[3], host, number))
        elif local_rank is not None:
            if seen[1] is None:
                seen[1] = local_rank
            elif seen[1] != local_rank:
                local_conflicts.append((rank, host, seen[1], local_rank, seen[3], number))

    # srun -l labels: task ids; used when they are the ranks (Megatron launched by srun, not torchrun).
    labels_are_ranks = False
    if found.label_hosts:
        labelled = [(rank, label, number) for rank, _, _, _, number, label in entries if label is not None]
        mismatch = next(((rank, label, number) for rank, label, number in labelled if rank != label), None)
        if mismatch is not None:
            rank, label, number = mismatch
            warnings.append(
                f"the srun labels are not the Megatron ranks (task {label} printed the init line of rank {rank} on "
                f"{_line(number)}; torchrun?): the labels are not used"
            )
        elif labelled:
            labels_are_ranks = True
        elif not entries and set(found.label_hosts) == set(range(world_size)):
            labels_are_ranks = True
            warnings.append(
                f"no NCCL init line of the world communicator (nRanks {world_size}): ranks placed by the srun "
                "labels of other NCCL lines (task id taken as the rank; local rank from the CUDA device)"
            )
    if labels_are_ranks:
        for label, (host, line, other_host, other_line) in found.label_conflicts.items():
            host_conflicts.setdefault(label, (host, line, other_host, other_line))
        from_labels = []
        for label, (host, device, number) in found.label_hosts.items():
            if label >= world_size:
                continue
            seen = placed.get(label)
            if seen is None:
                placed[label] = [host, None, device, number]
                from_labels.append(label)
            elif seen[0] != host:
                host_conflicts.setdefault(label, (seen[0], seen[3], host, number))
        if from_labels and entries:
            warnings.append(
                f"ranks {_ranges(from_labels)} have no NCCL init line of the world communicator: placed by the srun "
                "labels of their other NCCL lines (local rank from the CUDA device)"
            )

    if host_conflicts:
        rank = min(host_conflicts)
        host, line, other_host, other_line = host_conflicts[rank]
        more = len(host_conflicts) - 1
        raise LogParseError(
            f"rank {rank} appears on two hosts ({host} and {other_host}, lines {line:,} and {other_line:,})"
            + (f", and {more} more rank{'s' if more > 1 else ''} too" if more else "")
            + ": the log holds more than one run (a requeued job?); upload the output of one run"
        )
    if local_conflicts:
        rank, host, first, second, line, other_line = min(local_conflicts)
        raise LogParseError(
            f"rank {rank} has two local ranks on {host} ({first} on {_line(line)}, {second} on {_line(other_line)}): "
            "the log holds more than one run; upload the output of one run"
        )

    ranks = []
    slots: dict = {}
    for rank in sorted(placed):
        host, local_rank, device, number = placed[rank]
        if local_rank is None:
            local_rank = device
        if local_rank is None or local_rank < 0:
            warnings.append(f"rank {rank} on {host}: no local rank or CUDA device in its NCCL lines; left out")
            continue
        other = slots.get((host, local_rank))
        if other is not None:
            raise LogParseError(
                f"ranks {other} and {rank} both have local rank {local_rank} on {host} (see {_line(number)}): the log "
                "holds more than one run, or the host names are not unique; upload the output of one run"
            )
        slots[(host, local_rank)] = rank
        ranks.append({"rank": rank, "host": host, "local_rank": local_rank})

    if entries:
        sources.append("nccl_init")
    if labels_are_ranks or found.labelled_lines or any(dump.label is not None for dump in found.dumps):
        sources.append("srun_labels")
    if not found.comms and not found.label_hosts:
        warnings.append(
            "no NCCL init lines: the exact rank → host map is unknown; run with NCCL_DEBUG=INFO (and srun -l), "
            "or post it from the job with belvedere-post-layout.py"
        )
    elif not ranks:
        sizes_seen = ", ".join(str(n) for n in sorted(found.comms)[:8])
        warnings.append(
            f"no NCCL init line of the world communicator (nRanks {world_size})"
            + (f"; the init lines seen are for communicators of {sizes_seen} ranks" if sizes_seen else "")
            + ": the exact rank → host map is unknown; upload the output of all ranks with NCCL_DEBUG=INFO"
        )
    elif len(ranks) < world_size:
        missing = sorted(set(range(world_size)) - {entry["rank"] for entry in ranks})
        warnings.append(f"NCCL lines give ranks for {len(ranks)} of {world_size} ranks (missing: {_ranges(missing)})")
    larger = sorted(n for n in found.comms if n > world_size)
    if larger:
        warnings.append(
            f"NCCL communicators of {larger[0]} ranks, more than the world size {world_size}: lines of another job? "
            "ignored"
        )
    if found.garbled_comm_lines:
        shown = ", ".join(f"{n:,}" for n in found.garbled_comm_lines[:MAX_NOTED_LINES])
        more = len(found.garbled_comm_lines) - MAX_NOTED_LINES
        warnings.append(
            f"unreadable NCCL init lines skipped (output of several ranks mixed?): lines {shown}"
            + (f" and {more} more" if more > 0 else "")
        )
    return ranks


def parse_megatron_log(text: str | bytes) -> ParsedLog:
    """Parse the output of a Megatron-LM job; see the module docstring. Raises LogParseError."""
    size = len(text)
    if size > MAX_LOG_BYTES:
        raise LogParseError(
            f"the log is {size / 1024 / 1024:,.0f} MB, more than the {MAX_LOG_BYTES // 1024 // 1024} MB limit: upload "
            "its beginning (for example `head -c 150M job.out`); the arguments and the NCCL init lines are near the top"
        )
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    found = _collect(text)
    warnings: list = []
    sources: list = []
    sizes = _sizes(found, warnings)
    if found.dumps and any(dump.values for dump in found.dumps):
        sources.append("arguments")
    if found.world_lines:
        sources.append("world_size_line")
    if found.initialized:
        sources.append("initialized_lines")
    ranks = _ranks(found, sizes["world_size"], warnings, sources)
    if found.ofi_providers:
        sources.append("net_ofi")
    sources.sort(key=_SOURCES.index)
    return ParsedLog(sizes=sizes, ranks=ranks, warnings=warnings, sources=sources)
