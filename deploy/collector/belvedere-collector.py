#!/usr/bin/env python3
"""belvedere-collector.py: sample the GPUs of a Slurm job step and send the samples to Belvedere.

One monitor per node samples the step's GPUs every --interval seconds (default 1) from

  * the node's DCGM host engine (--source dcgm), through DCGM's own Python bindings (pydcgm), or
  * NVML GPM in-process (--source gpm), through nvidia-ml-py (pynvml), without any daemon,

and emits samples {"ts", "host", "gpu", "uuid", "field", "value"} keyed by numeric DCGM field id
and in DCGM's units whatever the source (GPM percent -> ratio, MiB/s -> bytes/s, NVML mW -> W,
bytes -> MiB). --source auto (the default) uses DCGM when its bindings and host engine are there,
else GPM. The samples go in gzip'ed NDJSON batches to

    POST <portal>/api/v1/telemetry/samples/
    Authorization: JobToken <the job's token>        (or Token <an API token>)
    Content-Type: application/x-ndjson
    Content-Encoding: gzip

Beside the GPUs it reads the node's Slingshot NICs (HPE Cassini, --nics auto|on|off): the CXI
driver's telemetry items /sys/class/cxi/cxiN/device/telemetry/<item> (text "<value>@<s>.<ns>"),
the retry handler's statistics /var/run/cxi/cxiN/<stat>, the link state
/sys/class/cxi/cxiN/device/port/link and the hsnN netdev's byte counters, and sends rows
{"ts", "host", "nic": "hsnN", "field": "nic_tx_packets", "value"} with the portal's network field
names (apps/telemetry/netfields.py), counters cumulative as the driver reports them. cxiN is mapped
to its interface through the PCI device (/sys/class/cxi/cxiN/device/net/<iface>).

It reads the host side too (--host-metrics auto|on|off): CPU busy/iowait/steal per node and NUMA domain from
/proc/stat, memory, swap and memory pressure, the NUMA nodes' meminfo (on GH200 the GPUs' memory is a NUMA node
without CPUs: its page cache is page cache in GPU memory), and the Slurm job steps' CPU from their cgroup v2 and
processes (ranks and their data-loader workers), as rows {"ts", "host", "host_metrics": "numa0", "field":
"host_cpu_busy", "value"} (apps/telemetry/hostfields.py).

At the start it also sends the node's versions once (--versions on, the default): driver, CUDA driver, VBIOS,
InfoROM and serial from `nvidia-smi`, and the job's communication stack (NCCL, the OFI NCCL plugin,
libfabric, its CXI provider, the container image digest) from the environment, the libraries on
LD_LIBRARY_PATH and `fi_info`, as rows {"ts", "host", "version": "nccl", "value": "2.21.5"} (+ "gpu" for a GPU's
firmware, + "partition"): the portal keeps them as facts with first and last seen, never as samples.

Or, with --output FILE, into a local NDJSON file (FILE.gz: gzip'ed), or with --dry-run onto stdout.

Wrapper mode, the usual way to run it (every task of the step runs it; only local rank 0 of each
node monitors, every task runs the command and exits with its exit status):

    srun belvedere-collector.py -- python train.py --my-args

Standalone: belvedere-collector.py [options] samples until --duration has passed or it gets
SIGTERM/SIGINT/SIGHUP.

Options: --source dcgm|gpm|auto|none, --interval S (>= 0.1), --fields 1001,1002,...|default,
--gpus LIST|all (default $SLURM_STEP_GPUS, else $SLURM_JOB_GPUS, else all), --portal URL (default
$BELVEDERE_URL, else derived from $BELVEDERE_JOB_URL), --token-file FILE (default
$BELVEDERE_JOB_TOKEN_FILE; $BELVEDERE_TOKEN, if set, wins), --output FILE, --dry-run, --duration S,
--dcgm-address ADDR, --hostname NAME, batching and queue options (see --help).

It never breaks the job: a monitoring problem (no DCGM, no GPU, portal down, bad token) is one
line on stderr and the command runs on; samples that cannot be sent are kept in a bounded queue
and the oldest are dropped, with a warning, when it is full. In wrapper mode the exit status is
always the command's. See deploy/collector/README.md. Standard library only; Python 3.8 or newer.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import gzip
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

PROG = "belvedere-collector"
USER_AGENT = f"{PROG}/1"
ENDPOINT = "/api/v1/telemetry/samples/"
MIN_INTERVAL = 0.1  # DCGM profiling values are invalid below 100 ms on Hopper (DCGM issue #310)
MAX_INTERVAL = 3600.0
MAX_KEEP_SAMPLES = 5  # not 0 (unlimited): stale values through pydcgm on H100 (slurm-job-exporter #30)
MIB = 1024 * 1024
HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
UUID_RE = re.compile(r"^GPU-[0-9A-Fa-f][0-9A-Fa-f-]{7,}$")
DCGM_BINDINGS = ("/usr/share/datacenter-gpu-manager-4/bindings/python3",  # DCGM 4.x
                 "/usr/local/dcgm/bindings/python3")  # DCGM 3.x
PROC_GPUS = "/proc/driver/nvidia/gpus"
NVML_SUCCESS = 0
SI_KERNEL = 0x80  # siginfo si_code of kernel-generated signals (a terminal's ^C goes to its whole process group)

# --------------------------------------------------------------------------------------------
# The fields. Embedded (the agent runs without the portal's code) and checked against the
# portal's registry, apps/telemetry/fields.py, by tests/telemetry/collector/test_field_table.py.
# --------------------------------------------------------------------------------------------
PERCENT_TO_RATIO = 0.01  # GPM gives percent 0..100, DCGM a ratio 0..1
# DCGM field id -> (NVML GPM metric id, scale): GPM value x scale = the value in DCGM's unit.
GPM_FIELDS = {
    1001: (1, PERCENT_TO_RATIO),  # GR_ENGINE_ACTIVE      <- GRAPHICS_UTIL
    1002: (2, PERCENT_TO_RATIO),  # SM_ACTIVE             <- SM_UTIL
    1003: (3, PERCENT_TO_RATIO),  # SM_OCCUPANCY          <- SM_OCCUPANCY
    1004: (5, PERCENT_TO_RATIO),  # PIPE_TENSOR_ACTIVE    <- ANY_TENSOR_UTIL
    1005: (10, PERCENT_TO_RATIO),  # DRAM_ACTIVE          <- DRAM_BW_UTIL
    1006: (11, PERCENT_TO_RATIO),  # PIPE_FP64_ACTIVE     <- FP64_UTIL
    1007: (12, PERCENT_TO_RATIO),  # PIPE_FP32_ACTIVE     <- FP32_UTIL
    1008: (13, PERCENT_TO_RATIO),  # PIPE_FP16_ACTIVE     <- FP16_UTIL
    1009: (20, MIB),  # PCIE_TX_BYTES (bytes/s)           <- PCIE_TX_PER_SEC (MiB/s)
    1010: (21, MIB),  # PCIE_RX_BYTES                     <- PCIE_RX_PER_SEC
    1011: (61, MIB),  # NVLINK_TX_BYTES                   <- NVLINK_TOTAL_TX_PER_SEC
    1012: (60, MIB),  # NVLINK_RX_BYTES                   <- NVLINK_TOTAL_RX_PER_SEC
    1013: (9, PERCENT_TO_RATIO),  # PIPE_TENSOR_IMMA_ACTIVE <- IMMA_TENSOR_UTIL
    1014: (7, PERCENT_TO_RATIO),  # PIPE_TENSOR_HMMA_ACTIVE <- HMMA_TENSOR_UTIL
    1015: (6, PERCENT_TO_RATIO),  # PIPE_TENSOR_DFMA_ACTIVE <- DFMA_TENSOR_UTIL
    1016: (4, PERCENT_TO_RATIO),  # PIPE_INT_ACTIVE         <- INTEGER_UTIL
    1076: (100, MIB),  # C2C_TX_ALL_BYTES                 <- C2C_TOTAL_TX_PER_SEC
    1077: (102, MIB),  # C2C_TX_DATA_BYTES                <- C2C_DATA_TX_PER_SEC
    1078: (101, MIB),  # C2C_RX_ALL_BYTES                 <- C2C_TOTAL_RX_PER_SEC
    1079: (103, MIB),  # C2C_RX_DATA_BYTES                <- C2C_DATA_RX_PER_SEC
}
for _k in range(18):  # per NVLink: DCGM 1040 + 2k (TX) / 1041 + 2k (RX) <- GPM 63 + 2k / 62 + 2k
    GPM_FIELDS[1040 + 2 * _k] = (63 + 2 * _k, MIB)
    GPM_FIELDS[1041 + 2 * _k] = (62 + 2 * _k, MIB)

# Device fields the GPM source reads with plain NVML calls: DCGM id -> (adapter method, scale, DCGM unit).
NVML_DEVICE_FIELDS = {
    100: ("clock_sm", 1, "MHz"),  # SM_CLOCK
    113: ("max_clock_sm", 1, "MHz"),  # MAX_SM_CLOCK
    150: ("temperature_gpu", 1, "°C"),  # GPU_TEMP
    155: ("power_usage_mw", 0.001, "W"),  # POWER_USAGE: NVML mW -> W
    156: ("total_energy_mj", 1, "mJ"),  # TOTAL_ENERGY_CONSUMPTION
    252: ("memory_used_bytes", 1.0 / MIB, "MiB"),  # FB_USED: NVML bytes -> MiB
    203: ("utilization_gpu", 1, "percent"),  # GPU_UTIL (DCGM keeps NVML's percent, despite the 4.6 name)
    112: ("clocks_event_reasons", 1, "bitmask"),  # CLOCK_THROTTLE_REASONS
}

# What is watched by default: the saturation model's inputs plus health (dcgm-saturation.md §6.6).
DEFAULT_PROFILING = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1076, 1078)
DEFAULT_DEVICE = (203, 100, 113, 112, 150, 140, 155, 156, 252, 230, 311)
DEFAULT_FIELDS = DEFAULT_PROFILING + DEFAULT_DEVICE


def is_profiling(field_id: int) -> bool:
    """DCGM_FI_PROF_* ids (1001-1099): computed by the profiling module (on Hopper from NVML GPM)."""
    return 1000 < field_id < 1100


def scaled(value, scale):
    """value x scale, dividing by the integer reciprocal where there is one (37 / 100, not 37 * 0.01)."""
    if scale == 1:
        return value
    if scale < 1:
        return value / round(1 / scale)
    return value * scale


def number(value):
    """An int or a finite float, or None (NaN, infinity, blank, not a number)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --------------------------------------------------------------------------------------------
# Messages and errors
# --------------------------------------------------------------------------------------------
_SAY_LOCK = threading.Lock()


def say(message: str) -> None:
    try:
        with _SAY_LOCK:
            print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a closed stderr must not stop anything
        pass


class Failure(Exception):
    """Something that stops the monitoring; the message is the one line printed."""


class UsageError(Failure):
    pass


class SourceUnavailable(Failure):
    """A source cannot run here; the message says what to install or set."""


# --------------------------------------------------------------------------------------------
# Which GPUs: Slurm's SLURM_STEP_GPUS / SLURM_JOB_GPUS list device numbers (the N of /dev/nvidiaN,
# i.e. the device minor number), which are neither DCGM's GPU ids nor (always) NVML's indices.
# --------------------------------------------------------------------------------------------
class GpuSelection:
    def __init__(self, indices=None, uuids=(), origin="all GPUs"):
        self.indices = None if indices is None else frozenset(indices)  # None: every GPU
        self.uuids = frozenset(uuid.lower() for uuid in uuids)
        self.origin = origin

    @property
    def everything(self) -> bool:
        return self.indices is None and not self.uuids

    def matches(self, index, uuid) -> bool:
        if self.everything:
            return True
        if uuid and uuid.lower() in self.uuids:
            return True
        return index is not None and self.indices is not None and index in self.indices

    def __str__(self) -> str:
        return self.origin


def parse_gpu_list(text: str, origin: str) -> GpuSelection:
    """"0,1,2,3", "0-3", "GPU-<uuid>,...", or "all"; raises ValueError."""
    tokens = [token.strip() for token in text.split(",") if token.strip()]
    if not tokens:
        raise ValueError("no GPU given")
    if [token.lower() for token in tokens] == ["all"]:
        return GpuSelection(origin=origin)
    indices, uuids = set(), set()
    for token in tokens:
        span = re.match(r"^(\d{1,4})(?:-(\d{1,4}))?$", token)
        if span:
            first, last = int(span.group(1)), int(span.group(2) or span.group(1))
            if last < first:
                raise ValueError(f"{token!r} is an empty range")
            indices.update(range(first, last + 1))
        elif UUID_RE.match(token):
            uuids.add(token)
        else:
            raise ValueError(f"{token!r} is neither a GPU number nor a GPU UUID")
    return GpuSelection(indices, uuids, origin)


def gpus_from_env(env: dict) -> GpuSelection:
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        value = env.get(name, "").strip()
        if not value or value == "NoDevFiles":
            continue
        try:
            return parse_gpu_list(value, f"{name}={value}")
        except ValueError as error:
            say(f"{name}={value[:80]!r} cannot be read ({error}); ignoring it")
    return GpuSelection(origin="all GPUs")


def proc_gpu_minors(root: str = PROC_GPUS) -> dict:
    """GPU UUID (lower case) -> device minor number, from the driver's /proc/driver/nvidia/gpus/*/information."""
    table = {}
    try:
        entries = os.listdir(root)
    except OSError:
        return table
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "information")) as handle:
                text = handle.read(8192)
        except OSError:
            continue
        uuid = minor = None
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                continue
            key, value = key.strip(), value.strip()
            if key == "GPU UUID":
                uuid = value.lower()
            elif key == "Device Minor" and value.isdigit():
                minor = int(value)
        if uuid and minor is not None:
            table[uuid] = minor
    return table


def show_indices(indices) -> str:
    return ",".join(str(index) for index in sorted(indices)) or "-"


# --------------------------------------------------------------------------------------------
# Adapters: the only code that calls pydcgm and pynvml. Everything else talks to these methods,
# and the tests substitute an object with the same methods that records the calls and returns
# values in the libraries' own shapes and units.
# --------------------------------------------------------------------------------------------
class PynvmlAdapter:
    """nvidia-ml-py. Values come back in NVML's units (percent, MiB/s, mW, bytes, MHz, °C, mJ).

    Methods: init, shutdown, device_count, device_handle, device_uuid, device_minor, gpm_supported,
    gpm_sample_alloc, gpm_sample_free, gpm_sample_get, gpm_metrics_get, clock_sm, max_clock_sm,
    temperature_gpu, power_usage_mw, total_energy_mj, memory_used_bytes, utilization_gpu,
    clocks_event_reasons.
    """

    def __init__(self, module):
        self.nv = module

    @classmethod
    def load(cls) -> "PynvmlAdapter":
        try:
            import pynvml  # noqa: PLC0415 - optional, only here
        except ImportError:
            raise SourceUnavailable(f"NVML GPM needs nvidia-ml-py, which is not installed for {sys.executable}: "
                                    "pip install nvidia-ml-py (it provides the pynvml module; NVML itself comes "
                                    "with the NVIDIA driver)") from None
        return cls(pynvml)

    def init(self):
        self.nv.nvmlInit()

    def shutdown(self):
        self.nv.nvmlShutdown()

    def device_count(self) -> int:
        return int(self.nv.nvmlDeviceGetCount())

    def device_handle(self, index: int):
        return self.nv.nvmlDeviceGetHandleByIndex(index)

    def device_uuid(self, handle) -> str:
        uuid = self.nv.nvmlDeviceGetUUID(handle)
        return uuid.decode() if isinstance(uuid, bytes) else str(uuid)

    def device_minor(self, handle) -> int:
        return int(self.nv.nvmlDeviceGetMinorNumber(handle))

    def gpm_supported(self, handle) -> bool:
        return bool(self.nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)

    def gpm_sample_alloc(self):
        return self.nv.nvmlGpmSampleAlloc()

    def gpm_sample_free(self, sample):
        self.nv.nvmlGpmSampleFree(sample)

    def gpm_sample_get(self, handle, sample):
        self.nv.nvmlGpmSampleGet(handle, sample)

    def gpm_metrics_get(self, sample1, sample2, metric_ids) -> list:
        """[(metric id, nvmlReturn, value)] for the interval between two samples, in request order."""
        nv, results = self.nv, []
        ids = list(metric_ids)
        while ids:
            request = nv.c_nvmlGpmMetricsGet_t()
            chunk, ids = ids[:len(request.metrics)], ids[len(request.metrics):]
            request.version = nv.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(chunk)
            request.sample1 = sample1
            request.sample2 = sample2
            for position, metric_id in enumerate(chunk):
                request.metrics[position].metricId = metric_id
            nv.nvmlGpmMetricsGet(request)
            results.extend((int(request.metrics[i].metricId), int(request.metrics[i].nvmlReturn),
                            float(request.metrics[i].value)) for i in range(len(chunk)))
        return results

    def clock_sm(self, handle):
        return self.nv.nvmlDeviceGetClockInfo(handle, self.nv.NVML_CLOCK_SM)

    def max_clock_sm(self, handle):
        return self.nv.nvmlDeviceGetMaxClockInfo(handle, self.nv.NVML_CLOCK_SM)

    def temperature_gpu(self, handle):
        return self.nv.nvmlDeviceGetTemperature(handle, self.nv.NVML_TEMPERATURE_GPU)

    def power_usage_mw(self, handle):
        return self.nv.nvmlDeviceGetPowerUsage(handle)

    def total_energy_mj(self, handle):
        return self.nv.nvmlDeviceGetTotalEnergyConsumption(handle)

    def memory_used_bytes(self, handle):
        return self.nv.nvmlDeviceGetMemoryInfo(handle).used

    def numa_node(self, handle):
        """The NUMA node that is the GPU's memory on coherent platforms (GH200), NVML's nvmlDeviceGetNumaNodeId."""
        return self.nv.nvmlDeviceGetNumaNodeId(handle)

    def utilization_gpu(self, handle):
        return self.nv.nvmlDeviceGetUtilizationRates(handle).gpu

    def clocks_event_reasons(self, handle):
        read = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            self.nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return read(handle)


class PydcgmAdapter:
    """DCGM's object API (pydcgm), shipped with DCGM, not on PyPI. Values are pydcgm's DcgmFieldValue
    objects (.value, .ts in µs since the epoch, .isBlank) in DCGM's units.

    Methods: connect, supported_gpu_ids, gpu_uuid, create_group, add_gpu, create_field_group,
    watch_fields, get_latest, unwatch_fields, delete_field_group, delete_group, disconnect.
    """

    def __init__(self, pydcgm, dcgm_structs):
        self.pydcgm, self.structs = pydcgm, dcgm_structs
        self.handle = self.system = None

    @staticmethod
    def binding_dirs(env: dict) -> list:
        dirs = []
        home = env.get("DCGM_HOME", "").strip()
        if home:
            dirs += [os.path.join(home, "bindings", "python3"), os.path.join(home, "bindings")]
        return dirs + list(DCGM_BINDINGS)

    @classmethod
    def load(cls, env: dict) -> "PydcgmAdapter":
        dirs = cls.binding_dirs(env)
        for directory in reversed(dirs):
            if os.path.isdir(directory) and directory not in sys.path:
                sys.path.insert(0, directory)
        try:
            import dcgm_structs  # noqa: PLC0415 - optional, only here
            import pydcgm  # noqa: PLC0415
        except ImportError:
            raise SourceUnavailable(
                f"DCGM's Python bindings (pydcgm) are not in {', '.join(dirs)}: install the DCGM package "
                "(datacenter-gpu-manager-4-core) or set DCGM_HOME to DCGM's install prefix; in a container, "
                "add com.hooks.dcgm.enabled = \"true\" to the EDF's [annotations]") from None
        return cls(pydcgm, dcgm_structs)

    def connect(self, address: str):
        options = {"opMode": self.structs.DCGM_OPERATION_MODE_AUTO}
        if address.startswith("unix:") or address.startswith("/"):
            options["unixSocketPath"] = address[5:] if address.startswith("unix:") else address
        else:
            options["ipAddress"] = address  # never None: that would start an embedded engine
        self.handle = self.pydcgm.DcgmHandle(**options)
        self.system = self.handle.GetSystem()

    def supported_gpu_ids(self) -> list:
        return [int(gpu_id) for gpu_id in self.system.discovery.GetAllSupportedGpuIds()]

    def gpu_uuid(self, gpu_id: int) -> str:
        uuid = self.system.discovery.GetGpuAttributes(gpu_id).identifiers.uuid
        return uuid.decode() if isinstance(uuid, bytes) else str(uuid)

    def create_group(self, name: str):
        return self.pydcgm.DcgmGroup(self.handle, groupName=name, groupType=self.structs.DCGM_GROUP_EMPTY)

    def add_gpu(self, group, gpu_id: int):
        group.AddGpu(gpu_id)

    def create_field_group(self, name: str, field_ids):
        return self.pydcgm.DcgmFieldGroup(self.handle, name=name, fieldIds=list(field_ids))

    def watch_fields(self, group, field_group, update_us: int, max_keep_age_s: float, max_keep_samples: int):
        group.samples.WatchFields(field_group, update_us, max_keep_age_s, max_keep_samples)

    def get_latest(self, group, field_group) -> dict:
        """{gpu id: {field id: [DcgmFieldValue, ...]}} (oldest first)."""
        return group.samples.GetLatest(field_group).values

    def unwatch_fields(self, group, field_group):
        group.samples.UnwatchFields(field_group)

    def delete_field_group(self, field_group):
        field_group.Delete()

    def delete_group(self, group):
        group.Delete()

    def disconnect(self):
        if self.handle is not None:
            handle, self.handle = self.handle, None
            handle.Shutdown()


# --------------------------------------------------------------------------------------------
# Sources: open() / read() -> [(ts, gpu, uuid, field, value)] / close() (idempotent, also after a
# failed open) / describe().
# --------------------------------------------------------------------------------------------
class NoneSource:
    """Samples nothing: to try the plumbing (wrapper, output) where there is no GPU."""

    name = "none"

    def open(self):
        pass

    def read(self) -> list:
        return []

    def close(self):
        pass

    def describe(self) -> str:
        return "nothing (--source none)"


class DcgmSource:
    name = "dcgm"

    def __init__(self, fields, interval: float, selection: GpuSelection, run_name: str, address: str = "127.0.0.1",
                 adapter=None, env=None, proc_root: str = PROC_GPUS):
        self.fields = list(fields)
        self.interval = interval
        self.selection = selection
        self.run_name = run_name
        self.address = address
        self._adapter = adapter
        self.env = dict(os.environ) if env is None else env
        self.proc_root = proc_root
        self.dcgm = None
        self.gpus = {}  # DCGM gpu id -> (index, uuid)
        self.group = self.field_group = None
        self._connected = self._watching = False
        self._since_us = 0
        self._last_ts = {}

    def describe(self) -> str:
        gpus = show_indices(index for index, _ in self.gpus.values())
        return f"GPUs {gpus} through the DCGM host engine at {self.address} ({len(self.fields)} fields)"

    def open(self):
        try:
            self._open()
        except SourceUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - any DCGM error: one line, and auto tries GPM
            raise SourceUnavailable(f"DCGM at {self.address}: {type(error).__name__}: {error}") from None

    def _open(self):
        dcgm = self.dcgm = self._adapter if self._adapter is not None else PydcgmAdapter.load(self.env)
        try:
            dcgm.connect(self.address)
        except Exception as error:  # noqa: BLE001
            if "LibraryNotFound" in type(error).__name__ or "libdcgm" in str(error):
                raise SourceUnavailable(f"DCGM's library (libdcgm.so) could not be loaded ({error}): install the "
                                        "DCGM package of the host engine's major version; in a container, add "
                                        "com.hooks.dcgm.enabled = \"true\" to the EDF's [annotations]") from None
            raise SourceUnavailable(f"cannot connect to the DCGM host engine at {self.address} ({error}): is "
                                    "nv-hostengine running there? (--dcgm-address)") from None
        self._connected = True
        gpu_ids = dcgm.supported_gpu_ids()
        minors = proc_gpu_minors(self.proc_root)
        for gpu_id in gpu_ids:
            try:
                uuid = dcgm.gpu_uuid(gpu_id) or ""
            except Exception:  # noqa: BLE001 - then it is matched by number only
                uuid = ""
            minor = minors.get(uuid.lower())
            # Slurm numbers GPUs by device minor; without /proc/driver/nvidia, take DCGM's id for it.
            index = minor if minor is not None else (None if minors else gpu_id)
            if self.selection.matches(index, uuid):
                self.gpus[gpu_id] = (index if index is not None else gpu_id, uuid)
        if not self.gpus:
            raise SourceUnavailable(f"none of the GPUs of {self.selection} is among the {len(gpu_ids)} GPUs of the "
                                    f"DCGM host engine at {self.address}")
        if not minors and not self.selection.everything:
            say(f"{self.proc_root} is not readable: taking DCGM's GPU ids for Slurm's GPU numbers")
        self.group = dcgm.create_group(f"{self.run_name}-gpus")
        for gpu_id in self.gpus:
            dcgm.add_gpu(self.group, gpu_id)
        self._watch()

    def _watch(self):
        dcgm = self.dcgm
        update_us = int(round(self.interval * 1e6))
        keep_age = max(10.0, 3 * self.interval)
        self.field_group = dcgm.create_field_group(f"{self.run_name}-fields", self.fields)
        started = time.time()
        try:
            dcgm.watch_fields(self.group, self.field_group, update_us, keep_age, MAX_KEEP_SAMPLES)
        except Exception as error:  # noqa: BLE001
            device = [field for field in self.fields if not is_profiling(field)]
            if not device or len(device) == len(self.fields):
                raise SourceUnavailable(f"the DCGM host engine at {self.address} refused to watch fields "
                                        f"{','.join(map(str, self.fields))}: {error}") from None
            say(f"DCGM refused to watch the profiling fields ({error}; profiling needs nv-hostengine running as "
                "root and no other tool holding the counters); collecting the device fields only")
            field_group, self.field_group = self.field_group, None
            dcgm.delete_field_group(field_group)
            self.fields = device
            self.field_group = dcgm.create_field_group(f"{self.run_name}-device", device)
            started = time.time()
            dcgm.watch_fields(self.group, self.field_group, update_us, keep_age, MAX_KEEP_SAMPLES)
        self._watching = True
        self._since_us = int(started * 1e6)  # older values are someone else's, from before this watch

    def read(self) -> list:
        samples = []
        for gpu_id, per_field in self.dcgm.get_latest(self.group, self.field_group).items():
            if gpu_id not in self.gpus:
                continue
            index, uuid = self.gpus[gpu_id]
            for field_id, series in per_field.items():
                if not len(series):
                    continue
                latest = series[-1]
                if getattr(latest, "isBlank", False):
                    continue
                value = number(latest.value)
                stamp = int(latest.ts or 0)
                key = (gpu_id, field_id)
                if value is None or stamp < self._since_us or stamp <= self._last_ts.get(key, -1):
                    continue  # blank, not a number, stale, or already sent
                self._last_ts[key] = stamp
                samples.append((iso(stamp / 1e6), index, uuid, int(field_id), value))
        return samples

    def close(self):
        dcgm, group, field_group = self.dcgm, self.group, self.field_group
        steps = []
        if self._watching:
            steps.append(("stop watching the fields", lambda: dcgm.unwatch_fields(group, field_group)))
        if field_group is not None:
            steps.append(("delete the field group", lambda: dcgm.delete_field_group(field_group)))
        if group is not None:
            steps.append(("delete the GPU group", lambda: dcgm.delete_group(group)))
        if self._connected:
            steps.append(("disconnect", dcgm.disconnect))
        self._watching = self._connected = False
        self.group = self.field_group = None
        for what, step in steps:
            try:
                step()
            except Exception as error:  # noqa: BLE001 - carry on with the rest of the teardown
                say(f"DCGM teardown: could not {what}: {error}")


class _Device:
    def __init__(self, index, uuid, handle):
        self.index, self.uuid, self.handle = index, uuid, handle
        self.gpm = False
        self.buffers = []  # [older sample, newer sample]
        self.primed = False  # the older buffer holds a sample
        self.metric_ids = []
        self.probed = False
        self.broken = set()  # device fields NVML cannot read on this GPU
        self.noted = set()


class GpmSource:
    """NVML GPM in-process: two sample buffers per GPU, one new sample per interval, metrics over the
    interval between the last two, buffers swapped (dcgm-saturation.md §3.2)."""

    name = "gpm"

    def __init__(self, fields, interval: float, selection: GpuSelection, adapter=None):
        self.fields = list(fields)
        self.interval = interval
        self.selection = selection
        self._adapter = adapter
        self.by_metric = {GPM_FIELDS[field][0]: (field, GPM_FIELDS[field][1]) for field in self.fields
                          if field in GPM_FIELDS}
        self.device_fields = [field for field in self.fields if field in NVML_DEVICE_FIELDS]
        self.unsupported = [field for field in self.fields if field not in GPM_FIELDS and field not in NVML_DEVICE_FIELDS]
        self.nvml = None
        self.devices = []
        self._initialised = False

    def describe(self) -> str:
        gpus = show_indices(device.index for device in self.devices)
        collected = len(self.fields) - len(self.unsupported)
        return f"GPUs {gpus} through NVML GPM ({collected} fields)"

    def open(self):
        try:
            self._open()
        except SourceUnavailable:
            raise
        except Exception as error:  # noqa: BLE001
            raise SourceUnavailable(f"NVML GPM: {type(error).__name__}: {error}") from None

    def _open(self):
        nvml = self.nvml = self._adapter if self._adapter is not None else PynvmlAdapter.load()
        try:
            nvml.init()
        except Exception as error:  # noqa: BLE001
            raise SourceUnavailable(f"NVML could not start ({error}): is the NVIDIA driver loaded and a GPU "
                                    "visible here?") from None
        self._initialised = True
        count = nvml.device_count()
        for position in range(count):
            handle = nvml.device_handle(position)
            try:
                uuid = nvml.device_uuid(handle)
            except Exception:  # noqa: BLE001
                uuid = ""
            try:
                index = nvml.device_minor(handle)
            except Exception:  # noqa: BLE001
                index = position
            if not self.selection.matches(index, uuid):
                continue
            device = _Device(index, uuid, handle)
            self.devices.append(device)  # before allocating, so that close() frees what was allocated
            if not self.by_metric:
                continue
            try:
                device.gpm = nvml.gpm_supported(handle)
            except Exception:  # noqa: BLE001 - old driver: no GPM
                device.gpm = False
            if device.gpm:
                device.metric_ids = list(self.by_metric)
                device.buffers.append(nvml.gpm_sample_alloc())
                device.buffers.append(nvml.gpm_sample_alloc())
                try:
                    nvml.gpm_sample_get(handle, device.buffers[0])
                    device.primed = True
                except Exception:  # noqa: BLE001 - retried at the first read
                    device.primed = False
        if not self.devices:
            raise SourceUnavailable(f"NVML sees {count} GPU(s), none of them in {self.selection}")
        if self.unsupported:
            say(f"NVML GPM cannot give fields {','.join(map(str, self.unsupported))} (DCGM only); skipping them")
        without = [device.index for device in self.devices if self.by_metric and not device.gpm]
        if without:
            say(f"GPU(s) {show_indices(without)} do not support NVML GPM (Hopper or newer): no profiling fields there")

    def read(self) -> list:
        samples = []
        for device in self.devices:
            gpm = self._read_gpm(device) if device.gpm and device.metric_ids else []
            stamp = iso(time.time())
            samples.extend((stamp, device.index, device.uuid, field, value) for field, value in gpm)
            for field in self.device_fields:
                if field in device.broken:
                    continue
                method, scale, _ = NVML_DEVICE_FIELDS[field]
                try:
                    raw = getattr(self.nvml, method)(device.handle)
                except Exception as error:  # noqa: BLE001 - not supported here: drop the field for this GPU
                    device.broken.add(field)
                    say(f"GPU {device.index}: NVML cannot give field {field} ({error}); skipping it")
                    continue
                value = number(raw)
                if value is not None:
                    samples.append((stamp, device.index, device.uuid, field, scaled(value, scale)))
        return samples

    def _note(self, device, key, message):
        if key not in device.noted:
            device.noted.add(key)
            say(message)

    def _read_gpm(self, device) -> list:
        nvml = self.nvml
        try:
            nvml.gpm_sample_get(device.handle, device.buffers[1])
        except Exception as error:  # noqa: BLE001 - try again next interval
            self._note(device, "sample", f"GPU {device.index}: no GPM sample ({error})")
            return []
        if not device.primed:  # the first sample: nothing to compare with yet
            device.buffers.reverse()
            device.primed = True
            return []
        try:
            results = self._metrics(device)
        except Exception as error:  # noqa: BLE001
            self._note(device, "metrics", f"GPU {device.index}: GPM metrics failed ({error})")
            results = []
        device.buffers.reverse()  # the newer sample is the older one of the next interval
        values = []
        for metric_id, status, value in results:
            if status != NVML_SUCCESS or metric_id not in self.by_metric:
                continue
            value = number(value)
            if value is None:
                continue
            field, scale = self.by_metric[metric_id]
            values.append((field, scaled(value, scale)))
        return values

    def _metrics(self, device) -> list:
        older, newer = device.buffers
        try:
            return self.nvml.gpm_metrics_get(older, newer, device.metric_ids)
        except Exception as error:  # noqa: BLE001
            if device.probed or len(device.metric_ids) == 1:
                raise
            refusal = error
        # The driver refused the whole request: find the metric ids it does not know (e.g. C2C on H100).
        device.probed = True
        kept, refused, results = [], [], []
        for metric_id in device.metric_ids:
            try:
                results.extend(self.nvml.gpm_metrics_get(older, newer, [metric_id]))
                kept.append(metric_id)
            except Exception:  # noqa: BLE001
                refused.append(metric_id)
        device.metric_ids = kept
        fields = [self.by_metric[metric_id][0] for metric_id in refused]
        say(f"GPU {device.index}: the driver refuses GPM metrics {','.join(map(str, refused))} (fields "
            f"{','.join(map(str, fields))}; {refusal}); collecting the others")
        return results

    def close(self):
        nvml = self.nvml
        for device in self.devices:
            for buffer in device.buffers:
                try:
                    nvml.gpm_sample_free(buffer)
                except Exception as error:  # noqa: BLE001
                    say(f"GPU {device.index}: could not free a GPM sample: {error}")
            device.buffers = []
            device.gpm = False
        if self._initialised:
            self._initialised = False
            try:
                nvml.shutdown()
            except Exception as error:  # noqa: BLE001
                say(f"NVML shutdown failed: {error}")


class AutoSource:
    """DCGM when its bindings and host engine are there, else NVML GPM."""

    name = "auto"

    def __init__(self, make_dcgm, make_gpm):
        self._makers = (make_dcgm, make_gpm)
        self.chosen = None

    def open(self):
        reasons = []
        for make in self._makers:
            source = make()
            try:
                source.open()
                self.chosen = source
                return
            except SourceUnavailable as error:
                source.close()
                reasons.append(f"{source.name}: {error}")
        raise SourceUnavailable("no GPU source here. " + " | ".join(reasons))

    def read(self) -> list:
        return self.chosen.read()

    def close(self):
        if self.chosen is not None:
            self.chosen.close()

    def describe(self) -> str:
        return self.chosen.describe() if self.chosen is not None else "nothing"


# --------------------------------------------------------------------------------------------
# Slingshot NICs (HPE Cassini): the CXI driver's sysfs telemetry, the retry handler's statistics.
# The field table is embedded (the agent runs without the portal's code) and checked against the
# portal's registry, apps/telemetry/netfields.py, by tests/telemetry/collector/test_cassini.py.
# --------------------------------------------------------------------------------------------
NicSample = collections.namedtuple("NicSample", "ts nic field value")
# A version reading (apps/telemetry/versions.py's keys): gpu None for the node's.
VersionSample = collections.namedtuple("VersionSample", "ts gpu key value partition")
TRAFFIC_CLASSES = range(8)
# canonical field -> telemetry items under /sys/class/cxi/cxiN/device/telemetry/ (several: their sum)
CXI_TELEMETRY_FIELDS = {
    "nic_tx_packets": tuple(f"hni_pkts_sent_by_tc_{tc}" for tc in TRAFFIC_CLASSES),
    "nic_rx_packets": tuple(f"hni_pkts_recv_by_tc_{tc}" for tc in TRAFFIC_CLASSES),
    "nic_retries": ("pct_retry_srb_requests",),
    "nic_nacks_no_target_conn": ("pct_no_tct_nacks",),
    "nic_tx_paused": tuple(f"hni_tx_paused_{tc}" for tc in TRAFFIC_CLASSES),
    "nic_rx_paused": tuple(f"hni_rx_paused_{tc}" for tc in TRAFFIC_CLASSES),
    "nic_llr_replays": ("hni_llr_tx_replay_event",),
    "nic_uncorrected_codewords": ("hni_pcs_uncorrected_cw",),
}
# canonical field -> retry handler statistic under /var/run/cxi/cxiN/
CXI_RETRY_HANDLER_FIELDS = {"nic_nacks": "nacks", "nic_spt_timeouts": "spt_timeouts"}
# canonical field -> the interface's netdev statistic under /sys/class/net/hsnN/statistics/
NETDEV_FIELDS = {"nic_tx_bytes": "tx_bytes", "nic_rx_bytes": "rx_bytes"}
CXI_SYSFS, CXI_RETRY_HANDLER, NET_SYSFS = "/sys/class/cxi", "/var/run/cxi", "/sys/class/net"
CXI_DEVICE = re.compile(r"^cxi(\d+)$")


def read_text(path: str):
    """A small sysfs or run file's text, or None when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read(4096)
    except OSError:
        return None


def telemetry_value(text):
    """The counter of a CXI telemetry file: "<value>@<seconds>.<nanoseconds>\n" -> value (int); None if unreadable."""
    if text is None:
        return None
    head = text.strip().split("@", 1)[0].strip()
    return int(head) if head.isdigit() else None


def plain_value(text):
    """The integer in a retry-handler or netdev statistics file; None if unreadable."""
    if text is None:
        return None
    head = text.strip()
    return int(head) if head.lstrip("-").isdigit() else None


class CassiniSource:
    """The node's Cassini NICs: every cxiN under ``cxi_root``, named by its hsnN interface."""

    def __init__(self, cxi_root: str = CXI_SYSFS, rh_root: str = CXI_RETRY_HANDLER, net_root: str = NET_SYSFS,
                 clock=time.time):
        self.cxi_root, self.rh_root, self.net_root = cxi_root, rh_root, net_root
        self.clock = clock
        self.devices = []  # (cxiN, interface)
        self.link_up = {}  # device -> last link state seen (True/False)
        self.link_downs = {}  # device -> up->down transitions seen
        self.missing = set()  # (device, what) already said once

    def describe(self) -> str:
        return f"{len(self.devices)} Slingshot NIC(s) ({', '.join(i for _, i in self.devices)})"

    def open(self):
        try:
            names = os.listdir(self.cxi_root)
        except OSError as error:
            raise SourceUnavailable(f"no Slingshot NICs: {self.cxi_root}: {error.strerror or error}") from None
        devices = sorted((int(m.group(1)), name) for name in names if (m := CXI_DEVICE.match(name)))
        if not devices:
            raise SourceUnavailable(f"no Slingshot NICs: {self.cxi_root} has no cxi* device")
        self.devices = [(name, self.interface(name, number)) for number, name in devices]
        for name, _ in self.devices:
            self.link_downs.setdefault(name, 0)

    def interface(self, device: str, number: int) -> str:
        """cxiN's network interface: the PCI device's net/ entry, else the netdev whose device lists cxiN,
        else hsnN by number (said once)."""
        try:
            found = sorted(os.listdir(os.path.join(self.cxi_root, device, "device", "net")))
        except OSError:
            found = []
        if found:
            return found[0]
        try:
            for iface in sorted(os.listdir(self.net_root)):
                if os.path.exists(os.path.join(self.net_root, iface, "device", "cxi", device)):
                    return iface
        except OSError:
            pass
        say(f"{device}: no network interface found under {self.cxi_root}/{device}/device/net; calling it hsn{number}")
        return f"hsn{number}"

    def _note(self, device, what, message):
        if (device, what) not in self.missing:
            self.missing.add((device, what))
            say(f"{device}: {message}")

    def read(self) -> list:
        out = []
        for device, iface in self.devices:
            ts = iso(self.clock())
            telemetry = os.path.join(self.cxi_root, device, "device", "telemetry")
            for field, items in CXI_TELEMETRY_FIELDS.items():
                values = [telemetry_value(read_text(os.path.join(telemetry, item))) for item in items]
                if None in values:
                    self._note(device, field, f"{field} left out: telemetry item(s) "
                               f"{', '.join(i for i, v in zip(items, values) if v is None)} not readable in {telemetry}")
                    continue
                out.append(NicSample(ts, iface, field, sum(values)))
            for field, stat in CXI_RETRY_HANDLER_FIELDS.items():
                value = plain_value(read_text(os.path.join(self.rh_root, device, stat)))
                if value is None:
                    self._note(device, field, f"{field} left out: {self.rh_root}/{device}/{stat} not readable "
                               "(is the retry handler cxi_rh running?)")
                    continue
                out.append(NicSample(ts, iface, field, value))
            for field, stat in NETDEV_FIELDS.items():
                value = plain_value(read_text(os.path.join(self.net_root, iface, "statistics", stat)))
                if value is not None:
                    out.append(NicSample(ts, iface, field, value))
            state = read_text(os.path.join(self.cxi_root, device, "device", "port", "link"))
            if state is not None and state.strip():
                up = state.strip().lower().startswith("up")
                if self.link_up.get(device) is True and not up:
                    self.link_downs[device] += 1
                self.link_up[device] = up
                out.append(NicSample(ts, iface, "nic_link_up", 1 if up else 0))
                out.append(NicSample(ts, iface, "nic_link_down", self.link_downs[device]))
        return out

    def close(self):
        pass


# --------------------------------------------------------------------------------------------
# The host side (--host-metrics auto|on|off): CPU shares per node and NUMA domain from /proc/stat,
# memory from /proc/meminfo and the NUMA nodes' meminfo (on coherent-memory nodes such as GH200 the
# GPUs' memory is a NUMA node without CPUs: its FilePages is page cache resident in GPU memory), swap
# from /proc/vmstat, memory pressure from PSI, and the job steps' CPU time from their cgroup (v2) and
# their processes. Names: apps/telemetry/hostfields.py (checked by tests/telemetry/collector/test_host.py).
# --------------------------------------------------------------------------------------------
HostSample = collections.namedtuple("HostSample", "ts domain field value")
HOST_FIELD_NAMES = ("host_cpu_busy", "host_cpu_iowait", "host_cpu_steal", "host_mem_total", "host_mem_used",
                    "host_page_cache", "host_swap_used", "host_swap_out_pages", "host_mem_pressure",
                    "host_gpu_page_cache", "host_gpu_host_alloc", "host_job_cpu", "host_job_cpu_seconds",
                    "host_rank_cpu", "host_dataloader_cpu", "host_dataloader_workers")
PROC_ROOT, NODE_SYSFS = "/proc", "/sys/devices/system/node"
SLURM_CGROUP = "/sys/fs/cgroup/system.slice/slurmstepd.scope"
NUMA_NODE = re.compile(r"^node(\d+)$")
STEP_DIR = re.compile(r"^step_([A-Za-z0-9_]+)$")
JOB_DIR = re.compile(r"^job_(\d+)$")
KIB = 1024


def cpu_list(text) -> list:
    """A kernel CPU list ("0-3,8,10-11") as CPU numbers; [] for an empty or unreadable one."""
    out = []
    for part in (text or "").strip().split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        if low.isdigit() and (not high or high.isdigit()):
            out.extend(range(int(low), int(high or low) + 1))
    return out


def proc_stat_cpus(text) -> dict:
    """/proc/stat's cpu lines: {"cpu": (busy, iowait, steal, total), 0: (...), ...} in jiffies."""
    out = {}
    for line in (text or "").splitlines():
        if not line.startswith("cpu"):
            continue
        name, *values = line.split()
        numbers = [int(v) for v in values[:8] if v.isdigit()]
        if len(numbers) < 8:
            numbers += [0] * (8 - len(numbers))
        user, nice, system, idle, iowait, irq, softirq, steal = numbers[:8]
        busy = user + nice + system + irq + softirq  # guest time is already inside user and nice
        key = "cpu" if name == "cpu" else int(name[3:]) if name[3:].isdigit() else None
        if key is not None:
            out[key] = (busy, iowait, steal, busy + idle + iowait + steal)
    return out


def meminfo(text, prefix="") -> dict:
    """/proc/meminfo or a NUMA node's meminfo ("Node 4 FilePages:  123 kB") as {key: bytes}."""
    out = {}
    for line in (text or "").splitlines():
        if prefix:
            if not line.startswith(prefix):
                continue
            line = line[len(prefix):]
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (KIB if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def proc_times(text):
    """(ppid, utime + stime in ticks) from /proc/<pid>/stat; None when unreadable (the process ended)."""
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    try:  # after "pid (comm)": state ppid ... utime (14th of the line) stime (15th)
        return int(fields[1]), int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None


# Processes that start the training ranks rather than being one (their children are the ranks).
LAUNCHERS = {"torchrun", "bash", "sh", "dash", "zsh", "srun", "mpirun", "mpiexec", "accelerate", "deepspeed",
             "python-launcher", "apptainer", "singularity", "enroot", "pyxis", "conmon"}


def nvml_numa_map(adapter=None) -> dict:
    """{NUMA node: GPU index} from NVML (nvmlDeviceGetNumaNodeId: the GPU's memory as a NUMA node on coherent
    platforms); {} without NVML, without GPUs or on any NVML error (the host reader then maps by order)."""
    if adapter is not None and not hasattr(adapter, "numa_node"):
        return {}  # an adapter that cannot say (a test's recording one): left alone
    try:
        nvml = adapter or PynvmlAdapter.load()
        nvml.init()
    except Exception:  # no pynvml, no driver: the order it is
        return {}
    found = {}
    try:
        for index in range(nvml.device_count()):
            numa = nvml.numa_node(nvml.device_handle(index))
            if isinstance(numa, int) and numa >= 0:
                found[numa] = index
    except Exception:  # an NVML without the call, or a GPU that is not a NUMA node
        found = {}
    finally:
        try:
            nvml.shutdown()
        except Exception:
            pass
    return found


def split_ranks(procs: dict, names: dict) -> tuple[list, list]:
    """(ranks, data-loader workers) of a step's processes {pid: (ppid, ticks)} with their names: the ranks are the
    first processes below the step's roots (processes whose parent is outside the step) that are not launchers
    (torchrun, a shell, a container runtime: their children are the ranks), the workers every process below a rank."""
    children: dict = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    ranks, workers = [], []
    level = sorted(pid for pid, (ppid, _) in procs.items() if ppid not in procs)
    while level:
        below = []
        for pid in level:
            if names.get(pid, "") in LAUNCHERS and children.get(pid):
                below.extend(children[pid])
            else:
                ranks.append(pid)
        level = sorted(below)
    stack = [child for rank in ranks for child in children.get(rank, [])]
    while stack:
        pid = stack.pop()
        workers.append(pid)
        stack.extend(children.get(pid, []))
    return ranks, sorted(workers)


class HostSource:
    """The node's CPUs, memory and job steps. Shares need two reads: the first gives memory only."""

    def __init__(self, proc_root: str = PROC_ROOT, node_root: str = NODE_SYSFS, cgroup_root: str = SLURM_CGROUP,
                 clock=time.time, ticks_per_second=None, gpu_numa=None):
        self.proc, self.node_root, self.cgroup_root = proc_root, node_root, cgroup_root
        self.clock = clock
        self.ticks = ticks_per_second or (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
        self.gpu_numa = dict(gpu_numa or {})  # NUMA node -> GPU index (NVML's NUMA id), else by order
        self.numa_cpus = {}  # NUMA node with CPUs -> its CPUs
        self.gpu_nodes = {}  # NUMA node without CPUs holding memory -> GPU index
        self.last_cpu = None
        self.last_steps = {}  # domain -> (seconds, usage_usec, {pid: (ppid, ticks)})
        self.missing = set()

    def describe(self) -> str:
        gpus = f", GPU memory in NUMA node(s) {', '.join(map(str, self.gpu_nodes))}" if self.gpu_nodes else ""
        return f"the host ({len(self.numa_cpus)} NUMA domain(s) with CPUs{gpus})"

    def open(self):
        if read_text(os.path.join(self.proc, "stat")) is None:
            raise SourceUnavailable(f"no host metrics: {self.proc}/stat is not readable")
        try:
            names = sorted((int(m.group(1)), n) for n in os.listdir(self.node_root) if (m := NUMA_NODE.match(n)))
        except OSError:
            names = []
        memory_only = []
        for number, name in names:
            cpus = cpu_list(read_text(os.path.join(self.node_root, name, "cpulist")))
            if cpus:
                self.numa_cpus[number] = cpus
            elif meminfo(read_text(os.path.join(self.node_root, name, "meminfo")),
                         f"Node {number} ").get("MemTotal", 0) > 0:
                memory_only.append(number)
        for order, number in enumerate(memory_only):
            self.gpu_nodes[number] = self.gpu_numa.get(number, order)
        self.last_cpu = (self.clock(), proc_stat_cpus(read_text(os.path.join(self.proc, "stat"))))

    def _note(self, what, message):
        if what not in self.missing:
            self.missing.add(what)
            say(message)

    def read(self) -> list:
        now = self.clock()
        ts = iso(now)
        out = []
        cpus = proc_stat_cpus(read_text(os.path.join(self.proc, "stat")))
        if self.last_cpu is not None and cpus:
            before = self.last_cpu[1]
            out += self._shares(ts, "node", [before.get("cpu")], [cpus.get("cpu")])
            for number, members in self.numa_cpus.items():
                out += self._shares(ts, f"numa{number}", [before.get(c) for c in members],
                                    [cpus.get(c) for c in members])
        self.last_cpu = (now, cpus)
        out += self._memory(ts)
        for number, members in self.numa_cpus.items():
            info = meminfo(read_text(os.path.join(self.node_root, f"node{number}", "meminfo")), f"Node {number} ")
            for field, key in (("host_mem_total", "MemTotal"), ("host_mem_used", "MemUsed"),
                               ("host_page_cache", "FilePages")):
                if key in info:
                    out.append(HostSample(ts, f"numa{number}", field, info[key]))
        for number, gpu in self.gpu_nodes.items():
            info = meminfo(read_text(os.path.join(self.node_root, f"node{number}", "meminfo")), f"Node {number} ")
            if "FilePages" in info and "MemUsed" in info:
                domain = f"gpu{gpu}"
                out.append(HostSample(ts, domain, "host_mem_total", info.get("MemTotal", 0)))
                out.append(HostSample(ts, domain, "host_gpu_page_cache", info["FilePages"]))
                out.append(HostSample(ts, domain, "host_gpu_host_alloc", max(info["MemUsed"] - info["FilePages"], 0)))
        out += self._steps(ts, now)
        return out

    @staticmethod
    def _shares(ts, domain, before, after) -> list:
        if None in before or None in after or not after:
            return []
        delta = [sum(a[i] for a in after) - sum(b[i] for b in before) for i in range(4)]
        if delta[3] <= 0:
            return []
        return [HostSample(ts, domain, "host_cpu_busy", delta[0] / delta[3]),
                HostSample(ts, domain, "host_cpu_iowait", delta[1] / delta[3]),
                HostSample(ts, domain, "host_cpu_steal", delta[2] / delta[3])]

    def _memory(self, ts) -> list:
        info = meminfo(read_text(os.path.join(self.proc, "meminfo")))
        out = []
        if "MemTotal" in info:
            out.append(HostSample(ts, "node", "host_mem_total", info["MemTotal"]))
            if "MemAvailable" in info:
                out.append(HostSample(ts, "node", "host_mem_used", info["MemTotal"] - info["MemAvailable"]))
        if "Cached" in info:
            out.append(HostSample(ts, "node", "host_page_cache", info["Cached"]))
        if "SwapTotal" in info and "SwapFree" in info:
            out.append(HostSample(ts, "node", "host_swap_used", info["SwapTotal"] - info["SwapFree"]))
        for line in (read_text(os.path.join(self.proc, "vmstat")) or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "pswpout" and value.strip().isdigit():
                out.append(HostSample(ts, "node", "host_swap_out_pages", int(value)))
        pressure = read_text(os.path.join(self.proc, "pressure", "memory")) or ""
        for line in pressure.splitlines():
            if line.startswith("some "):
                for part in line.split()[1:]:
                    if part.startswith("avg10="):
                        out.append(HostSample(ts, "node", "host_mem_pressure", float(part[6:]) / 100))
        return out

    def _step_dirs(self) -> list:
        """(domain, path) of every job step's cgroup under the Slurm scope."""
        out = []
        try:
            jobs = sorted(n for n in os.listdir(self.cgroup_root) if JOB_DIR.match(n))
        except OSError:
            return out
        for job in jobs:
            try:
                steps = sorted(n for n in os.listdir(os.path.join(self.cgroup_root, job)) if STEP_DIR.match(n))
            except OSError:
                continue
            for step in steps:
                out.append((f"job{JOB_DIR.match(job).group(1)}.{STEP_DIR.match(step).group(1)}",
                            os.path.join(self.cgroup_root, job, step)))
        return out

    def _steps(self, ts, now) -> list:
        out = []
        seen = {}
        for domain, path in self._step_dirs():
            usage = None
            for line in (read_text(os.path.join(path, "cpu.stat")) or "").splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec" and value.strip().isdigit():
                    usage = int(value)
            if usage is None:
                self._note(("cgroup", path), f"{path}/cpu.stat has no usage_usec (cgroup v1?): job CPU left out")
                continue
            ncpus = len(cpu_list(read_text(os.path.join(path, "cpuset.cpus.effective")))) or 1
            pids = set()
            # Slurm's cgroup v2 layout: step_<id>/slurm holds slurmstepd, step_<id>/user/task_<n> the tasks
            tasks = os.path.join(path, "user")
            for folder, folders, files in os.walk(tasks if os.path.isdir(tasks) else path):
                folders[:] = [f for f in folders if f != "slurm"]
                if "cgroup.procs" in files:
                    pids.update(int(p) for p in (read_text(os.path.join(folder, "cgroup.procs")) or "").split()
                                if p.isdigit())
            procs, names = {}, {}
            for pid in sorted(pids):
                text = read_text(os.path.join(self.proc, str(pid), "stat"))
                found = proc_times(text)
                if found is not None:
                    procs[pid] = found
                    names[pid] = text.split("(", 1)[1].rsplit(")", 1)[0] if "(" in text else ""
            seen[domain] = (now, usage, procs)
            out.append(HostSample(ts, domain, "host_job_cpu_seconds", usage / 1e6))
            ranks, workers = split_ranks(procs, names)
            out.append(HostSample(ts, domain, "host_dataloader_workers", len(workers)))
            before = self.last_steps.get(domain)
            if before is None or now <= before[0]:
                continue
            seconds = now - before[0]
            out.append(HostSample(ts, domain, "host_job_cpu", min((usage - before[1]) / 1e6 / seconds / ncpus, 1.0)))
            for field, group in (("host_rank_cpu", ranks), ("host_dataloader_cpu", workers)):
                old = before[2]
                # a process new since the last read counts from zero; a recycled pid is unlikely within one interval
                ticks = sum(procs[p][1] - (old[p][1] if p in old else 0) for p in group)
                if group:
                    out.append(HostSample(ts, domain, field, max(ticks, 0) / self.ticks / seconds / len(group)))
        self.last_steps = seen
        return out

    def close(self):
        pass


class CombinedSource:
    """The GPU source and the NIC source read together; a node without Cassini NICs goes on with its GPUs."""

    def __init__(self, gpus, nics, required: bool = False):
        self.gpus, self.nics, self.required = gpus, nics, required

    def open(self):
        self.gpus.open()
        try:
            self.nics.open()
        except SourceUnavailable as error:
            if self.required:
                raise
            say(f"{error}; going on without it")
            self.nics = None

    def read(self) -> list:
        return self.gpus.read() + (self.nics.read() if self.nics is not None else [])

    def close(self):
        try:
            self.gpus.close()
        finally:
            if self.nics is not None:
                self.nics.close()

    def describe(self) -> str:
        return self.gpus.describe() + (f" and {self.nics.describe()}" if self.nics is not None else "")


# --------------------------------------------------------------------------------------------
# Sinks: put(samples) never blocks on the network; close() flushes within a bounded time.
# --------------------------------------------------------------------------------------------
def _row(sample, host: str) -> dict:
    if isinstance(sample, VersionSample):
        row = {"ts": sample.ts, "host": host, "version": sample.key, "value": sample.value}
        if sample.gpu is not None:
            row["gpu"] = sample.gpu
        if sample.partition:
            row["partition"] = sample.partition
        return row
    if isinstance(sample, HostSample):
        return {"ts": sample.ts, "host": host, "host_metrics": sample.domain, "field": sample.field,
                "value": sample.value}
    if isinstance(sample, NicSample):
        return {"ts": sample.ts, "host": host, "nic": sample.nic, "field": sample.field, "value": sample.value}
    ts, gpu, uuid, field, value = sample
    return {"ts": ts, "host": host, "gpu": gpu, "uuid": uuid, "field": field, "value": value}


def ndjson(samples, host: str) -> bytes:
    lines = [json.dumps(_row(sample, host), separators=(",", ":")) for sample in samples]
    return ("\n".join(lines) + "\n").encode() if lines else b""


class PrintSink:
    """--dry-run: NDJSON on stdout."""

    def __init__(self, host: str, would_send_to=None):
        self.host, self.would_send_to = host, would_send_to
        self.count = 0
        self._lock = threading.Lock()

    def describe(self) -> str:
        return "stdout (dry run)"

    def put(self, samples):
        with self._lock:
            sys.stdout.write(ndjson(samples, self.host).decode())
            sys.stdout.flush()
            self.count += len(samples)

    def close(self):
        where = f"; without --dry-run they would go to {self.would_send_to}" if self.would_send_to else ""
        say(f"dry run: printed {self.count} samples{where}")


class FileSink:
    """--output FILE: NDJSON appended to FILE (gzip'ed if it ends in .gz)."""

    def __init__(self, path: str, host: str):
        self.path, self.host = path, host
        self.count = 0
        try:
            self._file = gzip.open(path, "ab") if path.endswith(".gz") else open(path, "ab")  # noqa: SIM115
        except OSError as error:
            raise Failure(f"cannot write {path}: {error.strerror or error}") from None

    def describe(self) -> str:
        return self.path

    def put(self, samples):
        self._file.write(ndjson(samples, self.host))
        self._file.flush()
        self.count += len(samples)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
            say(f"wrote {self.count} samples to {self.path}")


class HttpSink:
    """Batches of gzip'ed NDJSON POSTed by a background thread; a bounded queue in between."""

    DROP_NOTE_EVERY = 60.0
    MAX_BACKOFF = 60.0
    DISABLING = (401, 403, 404, 405)  # bad token or no such endpoint: every further request would fail too
    RETRYING = (408, 425, 429)

    def __init__(self, url: str, authorization: str, host: str, batch_size: int = 1000, batch_seconds: float = 10.0,
                 queue_size: int = 60000, http_timeout: float = 10.0, flush_timeout: float = 10.0, urlopen=None):
        self.url, self.host = url, host
        self._authorization = authorization
        self.batch_size = max(1, int(batch_size))
        self.batch_seconds = batch_seconds
        self.queue_size = max(1, int(queue_size))
        self.http_timeout = http_timeout
        self.flush_timeout = flush_timeout
        self._urlopen = urlopen or urllib.request.urlopen
        self._cond = threading.Condition()
        self._queue = collections.deque()
        self._closing = False
        self._deadline = None
        self._disabled = None
        self._failing = None  # why the current run of failed attempts failed
        self._retry_at = 0.0
        self._backoff = 0.0
        self._last_attempt = time.monotonic()
        self._drop_noted_at = -self.DROP_NOTE_EVERY
        self._unreported_drops = 0
        self._reported_codes = set()
        self.received = self.sent = self.requests = self.dropped = 0
        self._thread = None  # started by the first put(), from the monitor's thread (which has the signals blocked)

    def describe(self) -> str:
        return self.url

    def put(self, samples):
        notes = []
        with self._cond:
            self.received += len(samples)
            if self._disabled is not None:
                self.dropped += len(samples)
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"{PROG}-sender", daemon=True)
                self._thread.start()
            self._queue.extend(samples)
            notes.append(self._trim())
            if len(self._queue) >= self.batch_size:
                self._cond.notify_all()
        self._say(notes)

    @staticmethod
    def _say(notes):
        for note in notes:
            if note:
                say(note)

    def _trim(self):
        """Drop the oldest samples beyond the queue's size (under the lock); a note at most once a minute."""
        overflow = len(self._queue) - self.queue_size
        if overflow <= 0:
            return None
        for _ in range(overflow):
            self._queue.popleft()
        self.dropped += overflow
        self._unreported_drops += overflow
        now = time.monotonic()
        if now - self._drop_noted_at < self.DROP_NOTE_EVERY:
            return None
        self._drop_noted_at, count, self._unreported_drops = now, self._unreported_drops, 0
        why = f"the portal is unreachable ({self._failing})" if self._failing else "sending cannot keep up"
        return f"{why}: dropped the {count} oldest samples (at most {self.queue_size} are kept in memory)"

    def _due(self, now: float):
        """True: send a batch now; None: the thread is done; a number: wait until then."""
        if self._disabled is not None:
            return None
        if self._closing and (not self._queue or now >= self._deadline):
            return None
        if not self._queue:
            return now + self.batch_seconds
        due = self._retry_at
        if not self._closing and len(self._queue) < self.batch_size:
            due = max(due, self._last_attempt + self.batch_seconds)
        if self._closing:
            due = min(due, self._deadline)
        return True if now >= due else due

    def _run(self):
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    due = self._due(now)
                    if due is None:
                        return
                    if due is True:
                        break
                    self._cond.wait(max(0.01, min(due - now, 1.0)))
                count = min(self.batch_size, len(self._queue))
                batch = [self._queue.popleft() for _ in range(count)]
                closing, deadline = self._closing, self._deadline
            self._last_attempt = time.monotonic()
            timeout = self.http_timeout if not closing else max(0.2, min(self.http_timeout, deadline - time.monotonic()))
            outcome, reason = self._send(batch, timeout)
            self._after(batch, outcome, reason)

    def _after(self, batch, outcome, reason):
        notes = []
        with self._cond:
            if outcome == "ok":
                if self._failing is not None:
                    notes.append(f"the portal at {self.url} answers again; sending resumed")
                self.sent += len(batch)
                self.requests += 1
                self._failing, self._backoff, self._retry_at = None, 0.0, 0.0
            elif outcome in ("retry", "smaller"):
                if outcome == "smaller":
                    self.batch_size = max(1, len(batch) // 2)
                else:
                    if self._failing is None:
                        notes.append(f"cannot send samples to {self.url} ({reason}); retrying with backoff, keeping "
                                     f"up to {self.queue_size} samples in memory")
                    self._failing = reason
                    self._backoff = min(self.MAX_BACKOFF, self._backoff * 2 or 1.0)
                    pause = min(self._backoff, 1.0) if self._closing else self._backoff
                    self._retry_at = time.monotonic() + pause
                self._queue.extendleft(reversed(batch))
                notes.append(self._trim())
            elif outcome == "drop":
                self.dropped += len(batch)
                self._failing = None
            else:  # "disable"
                self.dropped += len(batch) + len(self._queue)
                self._queue.clear()
                self._disabled = reason
                notes.append(f"{reason}; no more samples will be sent")
            self._cond.notify_all()
        self._say(notes)

    def _send(self, batch, timeout: float):
        body = gzip.compress(ndjson(batch, self.host), mtime=0)
        request = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Authorization": self._authorization,
            "Content-Type": "application/x-ndjson",
            "Content-Encoding": "gzip",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        })
        try:
            with self._urlopen(request, timeout=timeout) as response:
                response.read(65536)
            return "ok", None
        except urllib.error.HTTPError as error:
            try:
                detail = " ".join(error.read(600).decode("utf-8", "replace").split())[:300]
            except Exception:  # noqa: BLE001 - only for the message
                detail = ""
            what = f"HTTP {error.code}" + (f": {detail}" if detail else "")
            if error.code in self.DISABLING:
                return "disable", f"the portal at {self.url} refused the samples ({what})"
            if error.code == 413 and len(batch) > 1:
                return "smaller", what
            if error.code in self.RETRYING or error.code >= 500:
                return "retry", what
            if error.code not in self._reported_codes:  # bad data: drop this batch, say so once per code
                self._reported_codes.add(error.code)
                say(f"the portal at {self.url} rejected a batch of {len(batch)} samples ({what}); dropped it")
            return "drop", what
        except Exception as error:  # noqa: BLE001 - no connection, timeout, TLS, reset: all retried
            reason = str(getattr(error, "reason", None) or error) or type(error).__name__
            return "retry", reason

    def close(self):
        with self._cond:
            self._closing = True
            self._deadline = time.monotonic() + self.flush_timeout
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(self.flush_timeout + 1.0)
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            self.dropped += left
            failing, disabled = self._failing, self._disabled
            self._disabled = self._disabled or "closed"
        if left and not disabled:
            say(f"could not send the last {left} samples to {self.url} within {self.flush_timeout:g} s "
                f"({failing or 'still sending'}); dropped them")
        if self.received:
            dropped = f"; dropped {self.dropped}" if self.dropped else ""
            say(f"sent {self.sent} of {self.received} samples to {self.url} in {self.requests} requests{dropped}")


# --------------------------------------------------------------------------------------------
# Versions: the node's driver and firmware (nvidia-smi) and the job's communication stack
# --------------------------------------------------------------------------------------------
SMI_QUERY = "index,driver_version,vbios_version,inforom.img,serial"
SMI_KEYS = ("driver", "vbios", "inforom_image", "serial")
VERSION_TEXT = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]{0,198}[\x21-\x7e])?$")
LIBNCCL = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")
OFI_NCCL_PATH = re.compile(r"aws-ofi-nccl[-/_]v?(\d+\.\d+\.\d+(?:-aws)?)")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _command_output(run, args, env) -> str:
    try:
        done = run(args, capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _usable(value) -> bool:
    return bool(value) and bool(VERSION_TEXT.match(value)) and value.upper() not in ("N/A", "[N/A]", "[NOT SUPPORTED]")


def smi_versions(env: dict, run=subprocess.run) -> list:
    """(gpu or None, key, value) of the node's driver and GPUs from `nvidia-smi` ($BELVEDERE_NVIDIA_SMI: another
    command, for tests)."""
    smi = env.get("BELVEDERE_NVIDIA_SMI") or "nvidia-smi"
    found = []
    for line in _command_output(run, [smi, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader"], env).splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 1 + len(SMI_KEYS) or not cells[0].isdigit():
            continue
        for key, value in zip(SMI_KEYS, cells[1:]):
            if _usable(value):
                found.append((None if key == "driver" else int(cells[0]), key, value))
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", _command_output(run, [smi], env))
    if cuda:
        found.append((None, "cuda_driver", cuda.group(1)))
    return list(dict.fromkeys(found))


def stack_versions(env: dict, run=subprocess.run, listdir=os.listdir) -> dict:
    """The job's communication stack as {key: version}: NCCL ($NCCL_VERSION, as NGC images set it, else the
    libnccl.so.X.Y.Z on LD_LIBRARY_PATH), the OFI NCCL plugin (an aws-ofi-nccl-X.Y.Z directory on
    LD_LIBRARY_PATH or $NCCL_NET_PLUGIN, or $AWS_OFI_NCCL_VERSION), libfabric and its CXI provider (`fi_info
    --version`, `fi_info -l`), the container image digest ($BELVEDERE_IMAGE_DIGEST, else a sha256 digest in the
    image of the EDF named by $BELVEDERE_EDF)."""
    found = {}
    paths = [part for part in env.get("LD_LIBRARY_PATH", "").split(":") if part]
    if _usable(env.get("NCCL_VERSION", "")):
        found["nccl"] = env["NCCL_VERSION"]
    for directory in paths:
        try:
            names = listdir(directory)
        except OSError:
            continue
        for name in names:
            match = LIBNCCL.match(name)
            if match and "nccl" not in found:
                found["nccl"] = match.group(1)
    for text in [env.get("NCCL_NET_PLUGIN", "")] + paths:
        match = OFI_NCCL_PATH.search(text)
        if match and "ofi_nccl" not in found:
            found["ofi_nccl"] = match.group(1)
    if "ofi_nccl" not in found and _usable(env.get("AWS_OFI_NCCL_VERSION", "")):
        found["ofi_nccl"] = env["AWS_OFI_NCCL_VERSION"]
    fi_info = env.get("BELVEDERE_FI_INFO") or "fi_info"
    libfabric = re.search(r"^libfabric:\s*(\S+)", _command_output(run, [fi_info, "--version"], env), re.MULTILINE)
    if libfabric:
        found["libfabric"] = libfabric.group(1)
    cxi = re.search(r"^cxi:\s*\n\s*version:\s*(\S+)", _command_output(run, [fi_info, "-l"], env), re.MULTILINE)
    if cxi:
        found["cxi"] = cxi.group(1)
    digest = DIGEST.search(env.get("BELVEDERE_IMAGE_DIGEST", ""))
    if not digest and env.get("BELVEDERE_EDF"):
        try:
            with open(env["BELVEDERE_EDF"], encoding="utf-8") as handle:
                image = re.search(r"^\s*image\s*=\s*\"([^\"]*)\"", handle.read(65536), re.MULTILINE)
            digest = DIGEST.search(image.group(1)) if image else None
        except OSError:
            digest = None
    if digest:
        found["image_digest"] = digest.group(0)
    return {key: value for key, value in found.items() if _usable(value)}


def read_versions(env: dict, run=subprocess.run, listdir=os.listdir) -> list:
    """The node's and the job's versions as VersionSamples, read once when monitoring starts."""
    now = iso(time.time())
    partition = env.get("SLURM_JOB_PARTITION", "")
    partition = partition if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", partition or "") else ""
    samples = [VersionSample(now, gpu, key, value, partition) for gpu, key, value in smi_versions(env, run)]
    samples += [VersionSample(now, None, key, value, partition) for key, value in stack_versions(env, run, listdir).items()]
    return samples


# --------------------------------------------------------------------------------------------
# The monitor
# --------------------------------------------------------------------------------------------
class Monitor:
    def __init__(self, source, sink, interval: float, duration=None, stop=None, flush_timeout: float = 10.0,
                 versions=None):
        self.versions = versions  # () -> [VersionSample], sent once after the source opened
        self.source, self.sink = source, sink
        self.interval, self.duration = interval, duration
        self.stop = stop or threading.Event()
        self.flush_timeout = flush_timeout
        self.ok = None

    def run(self) -> bool:
        self.ok = True
        try:
            self.source.open()
            say(f"sampling {self.source.describe()} every {self.interval:g} s into {self.sink.describe()}")
            if self.versions is not None:
                try:
                    found = self.versions()
                except Exception as error:  # noqa: BLE001 - versions are a bonus, never a reason to stop
                    found = []
                    say(f"versions not read: {type(error).__name__}: {error}")
                if found:
                    self.sink.put(found)
            start = time.monotonic()
            deadline = start + self.duration if self.duration else None
            next_read = start + self.interval
            while not self._wait(next_read, deadline):
                samples = self.source.read()
                if samples:
                    self.sink.put(samples)
                next_read += self.interval
                now = time.monotonic()
                if next_read < now:  # fell behind (a slow read): skip the missed slots
                    next_read = now + self.interval
        except SourceUnavailable as error:
            self.ok = False
            say(str(error))
        except Exception as error:  # noqa: BLE001 - monitoring never takes the job down
            self.ok = False
            say(f"monitoring stopped: {type(error).__name__}: {error}")
        finally:
            for part in (self.source, self.sink):
                try:
                    part.close()
                except Exception as error:  # noqa: BLE001
                    say(f"closing {type(part).__name__}: {type(error).__name__}: {error}")
        return self.ok

    def _wait(self, until: float, deadline) -> bool:
        """Wait until `until`; True if the monitor should stop instead."""
        while True:
            if self.stop.is_set():
                return True
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return True
            if now >= until:
                return False
            end = until if deadline is None else min(until, deadline)
            self.stop.wait(max(0.0, min(end - now, 0.25)))

    def join_timeout(self) -> float:
        return self.flush_timeout + self.interval + 5.0


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------
class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see --help)")


def interval_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < MIN_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"{text} s is below the minimum of 0.1 s: DCGM profiling values sampled faster than every 100 ms are "
            "invalid on Hopper GPUs (NVIDIA); use --interval 0.1 or more (1 s is recommended)")
    if value > MAX_INTERVAL:
        raise argparse.ArgumentTypeError(f"{text} s is more than an hour")
    return value


def positive_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be more than 0")
    return value


def count_value(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def field_list(text: str) -> list:
    fields = []
    for token in (token.strip() for token in text.split(",")):
        if not token:
            continue
        if token.lower() in ("default", "profiling", "device"):
            fields += {"default": DEFAULT_FIELDS, "profiling": DEFAULT_PROFILING, "device": DEFAULT_DEVICE}[token.lower()]
        elif token.isdigit() and 0 < int(token) < 65536:
            fields.append(int(token))
        else:
            raise argparse.ArgumentTypeError(f"{token!r} is not a DCGM field id (a number such as 1002) or "
                                             "default/profiling/device")
    if not fields:
        raise argparse.ArgumentTypeError("no field given")
    return fields


def gpu_list(text: str) -> GpuSelection:
    try:
        return parse_gpu_list(text, f"--gpus {text}")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> Parser:
    parser = Parser(prog="belvedere-collector.py", description="Sample the job step's GPUs (DCGM or NVML GPM) and "
                    "send the samples to Belvedere. With -- COMMAND: run COMMAND in every task and monitor from "
                    "local rank 0 of each node.", epilog="See the top of the script and deploy/collector/README.md.")
    parser.add_argument("--source", choices=("auto", "dcgm", "gpm", "none"), default="auto",
                        help="dcgm: the node's DCGM host engine; gpm: NVML GPM in-process (nvidia-ml-py); auto "
                        "(default): dcgm if possible, else gpm; none: sample nothing")
    parser.add_argument("--interval", type=interval_value, default=1.0, metavar="SECONDS",
                        help="sampling interval (default 1; at least 0.1)")
    parser.add_argument("--fields", type=field_list, action="append", metavar="IDS",
                        help="DCGM field ids, comma-separated, or default/profiling/device (default: default)")
    parser.add_argument("--gpus", type=gpu_list, metavar="LIST",
                        help="GPU numbers (as in SLURM_STEP_GPUS) or UUIDs, or all (default: $SLURM_STEP_GPUS, "
                        "else $SLURM_JOB_GPUS, else all)")
    parser.add_argument("--duration", type=positive_value, metavar="SECONDS", help="stop monitoring after this long")
    parser.add_argument("--portal", metavar="URL", help="the portal (default $BELVEDERE_URL, else from "
                        "$BELVEDERE_JOB_URL)")
    parser.add_argument("--token-file", metavar="FILE", help="file with the token (default "
                        "$BELVEDERE_JOB_TOKEN_FILE; $BELVEDERE_TOKEN, if set, is used instead)")
    parser.add_argument("--output", metavar="FILE", help="append NDJSON to FILE instead of sending (FILE.gz: "
                        "gzip'ed; %%h host, %%j job id, %%s step id)")
    parser.add_argument("--dry-run", action="store_true", help="print the samples (NDJSON) on stdout instead")
    parser.add_argument("--dcgm-address", default="127.0.0.1", metavar="ADDR",
                        help="DCGM host engine: host[:port] or a unix socket path (default 127.0.0.1)")
    parser.add_argument("--hostname", help="this node's name in the portal (default $SLURMD_NODENAME, else the "
                        "short host name)")
    parser.add_argument("--batch-size", type=count_value, default=1000, metavar="N",
                        help="samples per request (default 1000)")
    parser.add_argument("--batch-seconds", type=positive_value, default=10.0, metavar="SECONDS",
                        help="send at least this often (default 10)")
    parser.add_argument("--queue-size", type=count_value, default=60000, metavar="N",
                        help="samples kept while the portal is unreachable; the oldest are dropped beyond (default "
                        "60000)")
    parser.add_argument("--http-timeout", type=positive_value, default=10.0, metavar="SECONDS",
                        help="timeout of one request (default 10)")
    parser.add_argument("--flush-timeout", type=positive_value, default=10.0, metavar="SECONDS",
                        help="at the end, wait at most this long for the last samples to be sent (default 10)")
    parser.add_argument("--nics", choices=("auto", "on", "off"), default="auto",
                        help="Slingshot NIC counters: auto (default): when the node has cxi devices; on: fail "
                        "without them; off: never")
    parser.add_argument("--cxi-sysfs", default=CXI_SYSFS, metavar="DIR",
                        help=f"the CXI driver's class directory (default {CXI_SYSFS})")
    parser.add_argument("--cxi-retry-handler", default=CXI_RETRY_HANDLER, metavar="DIR",
                        help=f"the retry handler's statistics (default {CXI_RETRY_HANDLER})")
    parser.add_argument("--net-sysfs", default=NET_SYSFS, metavar="DIR",
                        help=f"the network class directory (default {NET_SYSFS})")
    parser.add_argument("--host-metrics", choices=("auto", "on", "off"), default="auto",
                        help="the host side: CPU busy/iowait/steal per node and NUMA domain, memory, page cache (in GPU "
                        "memory on coherent-memory nodes), swap, memory pressure, the job steps' CPU time; auto "
                        "(default): when /proc/stat is readable; on: fail without it; off: never")
    parser.add_argument("--proc", default=PROC_ROOT, metavar="DIR", help=f"procfs (default {PROC_ROOT})")
    parser.add_argument("--node-sysfs", default=NODE_SYSFS, metavar="DIR",
                        help=f"the NUMA nodes' sysfs (default {NODE_SYSFS})")
    parser.add_argument("--cgroup-root", default=SLURM_CGROUP, metavar="DIR",
                        help=f"Slurm's cgroup v2 scope holding job_<id>/step_<id> (default {SLURM_CGROUP})")
    parser.add_argument("--versions", choices=("on", "off"), default="on",
                        help="send the node's driver and firmware versions and the job's communication stack (NCCL, "
                        "OFI NCCL plugin, libfabric, CXI provider, image digest) once at the start (default on)")
    parser.add_argument("--strict", action="store_true", help="standalone: exit 1 when monitoring fails "
                        "(default 0; wrapper mode always exits with the command's status)")
    return parser


def parse_options(argv) -> argparse.Namespace:
    options = build_parser().parse_args(argv)
    fields = [field for group in (options.fields or [DEFAULT_FIELDS]) for field in group]
    options.fields = list(dict.fromkeys(fields))  # no duplicates, order kept
    return options


def split_command(argv):
    """(own arguments, command after the first --, or None)."""
    if "--" in argv:
        position = argv.index("--")
        return argv[:position], argv[position + 1:]
    return argv, None


# --------------------------------------------------------------------------------------------
# Building the monitor from the options and the environment
# --------------------------------------------------------------------------------------------
def host_name(options, env: dict) -> str:
    host = options.hostname or env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not HOST_RE.match(host):
        raise Failure(f"the host name {host!r} is not one the portal accepts ([A-Za-z0-9_.-], at most 64 characters; "
                      "--hostname)")
    return host


def run_name(env: dict, host: str) -> str:
    """Unique DCGM group names: a leaked or concurrent group of another run never collides."""
    job = env.get("SLURM_JOB_ID") or "nojob"
    step = env.get("SLURM_STEP_ID") or "nostep"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"belvedere-{job}.{step}-{host}-{os.getpid()}")[:120]


def portal_base(options, env: dict) -> str:
    url = (options.portal or env.get("BELVEDERE_URL") or "").strip()
    if not url:
        job_url = env.get("BELVEDERE_JOB_URL", "").strip()
        if "/jobs/" in job_url:
            url = job_url[:job_url.rindex("/jobs/")]
    if not url:
        raise Failure("nowhere to send the samples: give --portal URL (or set BELVEDERE_URL; the portal's TaskProlog "
                      "sets BELVEDERE_JOB_URL), or --output FILE, or --dry-run")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise Failure(f"the portal URL {url[:120]!r} is not an http(s) URL such as https://belvedere.example.org")
    return url.rstrip("/")


def samples_url(base: str) -> str:
    return base + "/" if base.endswith(ENDPOINT.rstrip("/")) else base + ENDPOINT


def check_token(token: str, where: str) -> str:
    if not token or any(character.isspace() or ord(character) < 33 for character in token):
        raise Failure(f"{where} does not hold a token")
    return token


def authorization(options, env: dict) -> str:
    token = env.get("BELVEDERE_TOKEN", "").strip()
    if token:
        return "Token " + check_token(token, "BELVEDERE_TOKEN")
    path = options.token_file or env.get("BELVEDERE_JOB_TOKEN_FILE", "")
    if not path:
        raise Failure("no token: the job has no Belvedere token (BELVEDERE_JOB_TOKEN_FILE is unset; the portal's Prolog "
                      "gives one), so give --token-file or set BELVEDERE_TOKEN, or use --output FILE or --dry-run")
    try:
        with open(path) as handle:
            token = check_token(handle.readline().strip(), path)
    except OSError as error:
        raise Failure(f"cannot read the token from {path}: {error.strerror or error}") from None
    return ("JobToken " if token.startswith("bvj_") else "Token ") + token


def output_path(pattern: str, host: str, env: dict) -> str:
    values = {"h": host, "j": env.get("SLURM_JOB_ID") or "nojob", "s": env.get("SLURM_STEP_ID") or "nostep", "%": "%"}
    return re.sub(r"%([hjs%])", lambda match: values[match.group(1)], pattern)


def make_sink(options, env: dict, host: str):
    if options.dry_run:
        try:
            target = samples_url(portal_base(options, env))
        except Failure:
            target = None
        return PrintSink(host, target)
    if options.output:
        return FileSink(output_path(options.output, host, env), host)
    url = samples_url(portal_base(options, env))
    return HttpSink(url, authorization(options, env), host, batch_size=options.batch_size,
                    batch_seconds=options.batch_seconds, queue_size=options.queue_size,
                    http_timeout=options.http_timeout, flush_timeout=options.flush_timeout)


def make_source(options, env: dict, host: str, adapters=None):
    adapters = adapters or {}
    selection = options.gpus or gpus_from_env(env)

    def dcgm():
        return DcgmSource(options.fields, options.interval, selection, run_name(env, host), options.dcgm_address,
                          adapter=adapters.get("dcgm"), env=env)

    def gpm():
        return GpmSource(options.fields, options.interval, selection, adapter=adapters.get("nvml"))

    if options.source == "none":
        gpus = NoneSource()
    elif options.source == "dcgm":
        gpus = dcgm()
    elif options.source == "gpm":
        gpus = gpm()
    else:
        gpus = AutoSource(dcgm, gpm)
    nics = getattr(options, "nics", "off")
    if not (nics == "off" or (nics == "auto" and not os.path.isdir(options.cxi_sysfs))):
        gpus = CombinedSource(gpus, CassiniSource(options.cxi_sysfs, options.cxi_retry_handler, options.net_sysfs),
                              required=nics == "on")
    host = getattr(options, "host_metrics", "off")
    if host == "off" or (host == "auto" and not os.path.isfile(os.path.join(options.proc, "stat"))):
        return gpus
    gpu_numa = nvml_numa_map((adapters or {}).get("nvml")) if options.source != "none" else {}
    return CombinedSource(gpus, HostSource(options.proc, options.node_sysfs, options.cgroup_root, gpu_numa=gpu_numa),
                          required=host == "on")


def build_monitor(options, env: dict, stop: threading.Event, adapters=None) -> Monitor:
    host = host_name(options, env)
    source = make_source(options, env, host, adapters)
    sink = make_sink(options, env, host)
    versions = (lambda: read_versions(env)) if getattr(options, "versions", "on") == "on" else None
    return Monitor(source, sink, options.interval, options.duration, stop, options.flush_timeout, versions)


def is_monitor_task(env: dict) -> bool:
    """Local rank 0 of a node monitors (and any run outside a Slurm task)."""
    return env.get("SLURM_LOCALID", "").strip() in ("", "0")


# --------------------------------------------------------------------------------------------
# Standalone mode
# --------------------------------------------------------------------------------------------
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def standalone(argv, env: dict, adapters=None) -> int:
    try:
        options = parse_options(argv)
    except UsageError as error:
        say(str(error))
        return 2
    if not is_monitor_task(env):
        return 0  # local rank 0 of this node monitors
    stop = threading.Event()
    previous = {}

    def on_signal(signum, frame):  # noqa: ARG001
        stop.set()

    try:
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, on_signal)
        try:
            monitor = build_monitor(options, env, stop, adapters)
        except Failure as error:
            say(str(error))
            return 1 if options.strict else 0
        except Exception as error:  # noqa: BLE001
            say(f"unexpected error: {type(error).__name__}: {error}")
            return 1 if options.strict else 0
        ok = monitor.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0 if ok or not options.strict else 1


# --------------------------------------------------------------------------------------------
# Wrapper mode
# --------------------------------------------------------------------------------------------
FORWARDED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2",
                                                       "SIGCONT") if hasattr(signal, name))


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def should_forward(info, child_pid: int) -> bool:
    """Whether the command did not get this signal itself. slurmstepd signals every process of the
    step (scancel, time limit, --signal) and a terminal's ^C goes to the whole foreground process
    group (the command is in ours): forwarding those would deliver them twice."""
    if info is None:
        return True
    if info.si_code == SI_KERNEL:
        return False
    if info.si_pid == child_pid:
        return False
    return not (info.si_pid > 0 and process_name(info.si_pid) == "slurmstepd")


def exec_command(command) -> int:
    """Become the command (tasks that do not monitor): its exit status and signals are its own."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    for name in ("SIGPIPE", "SIGXFSZ"):  # Python ignores these; the command should not inherit that
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        say(f"{command[0]}: command not found")
        return 127
    except OSError as error:
        say(f"cannot run {command[0]}: {error.strerror or error}")
        return 126
    return 126  # not reached


def run_child(command, on_started, stop: threading.Event) -> int:
    """Run the command as a child, forward signals to it, return its returncode (negative: killed by
    that signal). `on_started` runs once the child runs (and signals are blocked: threads it starts
    inherit that, so every signal arrives in this thread)."""
    pending = []

    def on_signal(signum, frame):  # noqa: ARG001 - only until the signals are blocked
        pending.append((signum, None))

    previous = {}
    for signum in FORWARDED:
        if signal.getsignal(signum) != signal.SIG_IGN:  # ignored stays ignored, for us and the command
            previous[signum] = signal.signal(signum, on_signal)
    handled = tuple(previous)
    waiting = hasattr(signal, "sigtimedwait") and hasattr(signal, "pthread_sigmask")
    blocked = set(handled) | ({signal.SIGCHLD} if hasattr(signal, "SIGCHLD") else set())
    old_mask = None
    try:
        try:
            # close_fds=False: the task's inherited descriptors (e.g. PMI_FD of Slurm's PMI2) stay open.
            child = subprocess.Popen(command, close_fds=False)
        except FileNotFoundError:
            say(f"{command[0]}: command not found")
            return 127
        except OSError as error:
            say(f"cannot run {command[0]}: {error.strerror or error}")
            return 126
        if waiting:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            on_started()
        except Exception as error:  # noqa: BLE001
            say(f"monitoring did not start: {type(error).__name__}: {error}")

        def deliver(signum, info):
            if signum in STOP_SIGNALS:
                stop.set()  # the job is ending: tear down the monitoring now, before a SIGKILL
            if signum in handled and should_forward(info, child.pid):
                try:
                    os.kill(child.pid, signum)
                except OSError:
                    pass

        while True:
            while pending:
                deliver(*pending.pop(0))
            returncode = child.poll()
            if returncode is not None:
                return returncode
            if waiting:
                info = signal.sigtimedwait(blocked, 0.5)
                if info is not None and info.si_signo in handled:
                    deliver(info.si_signo, info)
            else:
                time.sleep(0.1)
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def wrap(argv, command, env: dict, adapters=None) -> int:
    monitor, stop = None, threading.Event()
    if is_monitor_task(env):
        try:
            options = parse_options(argv)
            monitor = build_monitor(options, env, stop, adapters)
        except Failure as error:
            say(f"{error}; running the command without monitoring")
        except SystemExit:  # --help
            pass
        except Exception as error:  # noqa: BLE001
            say(f"unexpected error: {type(error).__name__}: {error}; running the command without monitoring")
    if monitor is None:
        return exec_command(command)
    thread = threading.Thread(target=monitor.run, name=f"{PROG}-monitor", daemon=True)
    returncode = run_child(command, thread.start, stop)
    stop.set()
    if thread.ident is not None:
        try:
            thread.join(monitor.join_timeout())
        except KeyboardInterrupt:  # ^C while the last samples are sent: give up on them
            return returncode
        if thread.is_alive():
            say("the monitoring did not stop in time; leaving it")
    return returncode


def exit_like(returncode: int) -> int:
    """The command's status; for a command killed by a signal, die of the same signal."""
    if returncode >= 0:
        return returncode
    signum = -returncode
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    try:
        signal.signal(signum, signal.SIG_DFL)
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
        time.sleep(0.5)
    except (OSError, ValueError):
        pass
    return 128 + signum


def main(argv=None, env=None, adapters=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ) if env is None else env
    own, command = split_command(argv)
    if command is None:
        try:
            return standalone(own, env, adapters)
        except KeyboardInterrupt:
            return 130
    if not command:
        say("nothing to run after --")
        return 2
    return exit_like(wrap(own, command, env, adapters))


if __name__ == "__main__":
    sys.exit(main())
