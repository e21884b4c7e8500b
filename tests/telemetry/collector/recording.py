"""Recording adapters for deploy/collector/belvedere-collector.py, and a runner for subprocess tests.

The collector reaches pydcgm and pynvml only through two small adapter classes (PydcgmAdapter,
PynvmlAdapter). The classes here have the same methods, record every call, and answer in the
libraries' own shapes and units: GPM metrics as (metric id, nvmlReturn, value) with values in
percent and MiB/s, NVML power in mW and memory in bytes, pydcgm values as objects with .value,
.ts (µs since the epoch) and .isBlank, nested {gpu id: {field id: [values, oldest first]}}.

Run as a script, this file runs the collector's main() with a RecordingNvml adapter, so that a
test can start a real wrapper process (real child, real signals, real sockets) that produces
samples without a GPU:

    python recording.py --source gpm --portal URL ... -- COMMAND
"""
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "deploy" / "collector" / "belvedere-collector.py"
PROBE = REPO / "deploy" / "collector" / "gpm_probe.py"
MIB = 1024 * 1024
_MODULES = {}


def load(path=SCRIPT, name="belvedere_collector"):
    """The collector (or the probe) as a module; one instance per process."""
    if name not in _MODULES:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _MODULES[name] = module
    return _MODULES[name]


class NVMLError(Exception):
    """What pynvml raises: str() is NVML's error string."""

    def __init__(self, value, text):
        super().__init__(text)
        self.value = value


class NotSupported(NVMLError):
    def __init__(self):
        super().__init__(3, "Not Supported")


class InvalidArgument(NVMLError):
    def __init__(self):
        super().__init__(2, "Invalid Argument")


# --------------------------------------------------------------------------------------------
# NVML (nvidia-ml-py)
# --------------------------------------------------------------------------------------------
class Handle:
    def __init__(self, position):
        self.position = position

    def __repr__(self):
        return f"<nvmlDevice_t {self.position}>"


class Buffer:
    """An nvmlGpmSample_t: `taken` is when it was last filled (an increasing counter)."""

    def __init__(self, number):
        self.number, self.taken, self.freed = number, None, False

    def __repr__(self):
        return f"<nvmlGpmSample_t {self.number}>"


def gpu(minor, uuid, gpm=True, metrics=None, **device):
    """One GPU as NVML sees it. `metrics`: GPM metric id -> value (percent or MiB/s), or (nvmlReturn, value),
    or a list of either (one per interval, the last repeats). `device`: NVML device readings."""
    readings = dict(clock_sm=1755, max_clock_sm=1980, temperature_gpu=47, power_usage_mw=215500,
                    total_energy_mj=123456789, memory_used_bytes=40960 * MIB, utilization_gpu=93,
                    clocks_event_reasons=0x4)
    readings.update(device)
    return dict(minor=minor, uuid=uuid, gpm=gpm, metrics=metrics or {}, readings=readings)


class RecordingNvml:
    """Same methods as PynvmlAdapter."""

    def __init__(self, gpus, reject_in_batch=(), fail_init=None):
        self.gpus = list(gpus)
        self.reject_in_batch = set(reject_in_batch)  # metric ids the "driver" refuses (whole request fails)
        self.fail_init = fail_init
        self.calls = []
        self.buffers = []
        self.clock = 0
        self.intervals = {}  # position -> completed intervals
        self.initialised = False

    def _call(self, name, *args):
        self.calls.append((name, args))

    def names(self):
        return [name for name, _ in self.calls]

    def init(self):
        self._call("init")
        if self.fail_init:
            raise self.fail_init
        self.initialised = True

    def shutdown(self):
        self._call("shutdown")
        assert self.initialised, "nvmlShutdown without nvmlInit"
        self.initialised = False

    def device_count(self):
        self._call("device_count")
        return len(self.gpus)

    def device_handle(self, index):
        self._call("device_handle", index)
        return Handle(index)

    def device_uuid(self, handle):
        self._call("device_uuid", handle)
        return self.gpus[handle.position]["uuid"]

    def device_minor(self, handle):
        self._call("device_minor", handle)
        return self.gpus[handle.position]["minor"]

    def gpm_supported(self, handle):
        self._call("gpm_supported", handle)
        return self.gpus[handle.position]["gpm"]

    def gpm_sample_alloc(self):
        self._call("gpm_sample_alloc")
        buffer = Buffer(len(self.buffers))
        self.buffers.append(buffer)
        return buffer

    def gpm_sample_free(self, buffer):
        self._call("gpm_sample_free", buffer)
        assert not buffer.freed, f"{buffer} freed twice"
        buffer.freed = True

    def gpm_sample_get(self, handle, buffer):
        self._call("gpm_sample_get", handle, buffer)
        assert self.initialised and not buffer.freed
        self.clock += 1
        buffer.taken = self.clock
        buffer.position = handle.position

    def gpm_metrics_get(self, older, newer, metric_ids):
        self._call("gpm_metrics_get", older, newer, tuple(metric_ids))
        assert older is not newer and older.taken is not None and newer.taken is not None
        assert older.taken < newer.taken, "GPM metrics asked for with the samples the wrong way round"
        assert older.position == newer.position
        if len(metric_ids) > 1 and self.reject_in_batch & set(metric_ids) or set(metric_ids) <= self.reject_in_batch:
            raise InvalidArgument()
        position = newer.position
        done = self.intervals.get(position, 0)
        self.intervals[position] = done + 1
        results = []
        for metric_id in metric_ids:
            answer = self.gpus[position]["metrics"].get(metric_id, (3, 0.0))  # NVML_ERROR_NOT_SUPPORTED
            if isinstance(answer, list):
                answer = answer[min(done, len(answer) - 1)]
            status, value = answer if isinstance(answer, tuple) else (0, answer)
            results.append((metric_id, status, float(value)))
        return results

    def _reading(self, name, handle):
        self._call(name, handle)
        value = self.gpus[handle.position]["readings"][name]
        if isinstance(value, Exception):
            raise value
        return value

    def clock_sm(self, handle):
        return self._reading("clock_sm", handle)

    def max_clock_sm(self, handle):
        return self._reading("max_clock_sm", handle)

    def temperature_gpu(self, handle):
        return self._reading("temperature_gpu", handle)

    def power_usage_mw(self, handle):
        return self._reading("power_usage_mw", handle)

    def total_energy_mj(self, handle):
        return self._reading("total_energy_mj", handle)

    def memory_used_bytes(self, handle):
        return self._reading("memory_used_bytes", handle)

    def utilization_gpu(self, handle):
        return self._reading("utilization_gpu", handle)

    def clocks_event_reasons(self, handle):
        return self._reading("clocks_event_reasons", handle)


# --------------------------------------------------------------------------------------------
# DCGM (pydcgm)
# --------------------------------------------------------------------------------------------
DCGM_FP64_BLANK = 140737488355328.0  # dcgmvalue.DCGM_FP64_BLANK
DCGM_INT64_BLANK = 9223372036854775792  # dcgmvalue.DCGM_INT64_BLANK


def value(number, ts_us, blank=False):
    """A pydcgm DcgmFieldValue as the collector sees it."""
    return SimpleNamespace(value=number, ts=ts_us, isBlank=blank, fieldType="d" if isinstance(number, float) else "i")


class DCGMError(Exception):
    pass


class RecordingDcgm:
    """Same methods as PydcgmAdapter. `readings`: a list of {gpu id: {field id: [values]}}, one per
    get_latest (the last repeats), or a callable(call number, watched fields) returning one."""

    def __init__(self, gpus, readings=None, refuse_profiling=False, fail_connect=None, fail_latest_at=None,
                 on_latest=None):
        self.gpus = dict(gpus)  # DCGM gpu id -> uuid
        self.readings = readings or [{}]
        self.refuse_profiling = refuse_profiling
        self.fail_connect = fail_connect
        self.fail_latest_at = fail_latest_at
        self.on_latest = on_latest
        self.calls = []
        self.groups, self.field_groups = {}, {}
        self.watched = None
        self.latest_calls = 0
        self.connected = False

    def _call(self, name, *args):
        self.calls.append((name, args))

    def names(self):
        return [name for name, _ in self.calls]

    def connect(self, address):
        self._call("connect", address)
        if self.fail_connect:
            raise self.fail_connect
        self.connected = True

    def supported_gpu_ids(self):
        self._call("supported_gpu_ids")
        return sorted(self.gpus)

    def gpu_uuid(self, gpu_id):
        self._call("gpu_uuid", gpu_id)
        return self.gpus[gpu_id]

    def create_group(self, name):
        self._call("create_group", name)
        assert name not in self.groups, f"group name {name} used twice"
        group = SimpleNamespace(name=name, gpus=[], deleted=False)
        self.groups[name] = group
        return group

    def add_gpu(self, group, gpu_id):
        self._call("add_gpu", group.name, gpu_id)
        assert gpu_id in self.gpus
        group.gpus.append(gpu_id)

    def create_field_group(self, name, field_ids):
        self._call("create_field_group", name, tuple(field_ids))
        assert name not in self.field_groups, f"field group name {name} used twice"
        field_group = SimpleNamespace(name=name, fields=tuple(field_ids), deleted=False)
        self.field_groups[name] = field_group
        return field_group

    def watch_fields(self, group, field_group, update_us, max_keep_age_s, max_keep_samples):
        self._call("watch_fields", group.name, field_group.name, update_us, max_keep_age_s, max_keep_samples)
        if self.refuse_profiling and any(1000 < field < 1100 for field in field_group.fields):
            raise DCGMError("The third-party Profiling module returned an unrecoverable error")
        self.watched = (group, field_group)

    def get_latest(self, group, field_group):
        self._call("get_latest", group.name, field_group.name)
        assert self.watched == (group, field_group) and not group.deleted and not field_group.deleted
        self.latest_calls += 1
        if self.on_latest:
            self.on_latest(self.latest_calls)
        if self.fail_latest_at == self.latest_calls:
            raise DCGMError("Host engine connection invalid/disconnected")
        if callable(self.readings):
            return self.readings(self.latest_calls, field_group.fields)
        return self.readings[min(self.latest_calls, len(self.readings)) - 1]

    def unwatch_fields(self, group, field_group):
        self._call("unwatch_fields", group.name, field_group.name)
        self.watched = None

    def delete_field_group(self, field_group):
        self._call("delete_field_group", field_group.name)
        assert not field_group.deleted
        field_group.deleted = True

    def delete_group(self, group):
        self._call("delete_group", group.name)
        assert not group.deleted
        group.deleted = True

    def disconnect(self):
        self._call("disconnect")
        assert self.connected
        self.connected = False


# --------------------------------------------------------------------------------------------
# A standard two-GPU node for the subprocess runner and the HTTP tests
# --------------------------------------------------------------------------------------------
UUID0 = "GPU-5a1f3c1e-0000-4c55-8a3e-000000000000"
UUID1 = "GPU-5a1f3c1e-1111-4c55-8a3e-111111111111"
GPM_PERCENT = {1: 71.25, 2: 62.5, 3: 30.0, 5: 45.0, 10: 55.5, 11: 0.0, 12: 12.0, 13: 1.5}
GPM_MIB_S = {20: 2048.0, 21: 512.25, 60: 0.0, 61: 0.5, 100: (3, 0.0), 101: float("nan")}


def two_gpus():
    metrics = dict(GPM_PERCENT)
    metrics.update(GPM_MIB_S)
    return RecordingNvml([gpu(0, UUID0, metrics=dict(metrics)), gpu(1, UUID1, metrics=dict(metrics))])


if __name__ == "__main__":
    collector = load()
    sys.exit(collector.main(sys.argv[1:], adapters={"nvml": two_gpus()}))
