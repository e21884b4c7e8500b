"""The collector's two sources, driven through recording adapters that answer like pynvml and pydcgm.

What is checked: the emitted samples carry DCGM field ids and DCGM's units whatever the source
(GPM percent -> ratio, MiB/s -> bytes/s, NVML mW -> W, bytes -> MiB), Slurm's GPU numbers are
matched by device minor / UUID, blank / NaN / unsupported / stale values are left out, and every
DCGM group, field group, watch and GPM buffer is released: at the end, after an exception in the
middle of a run, and on SIGTERM.
"""
import math
import os
import re
import signal
import sys
import threading
import time

import pytest

from .recording import (
    DCGM_FP64_BLANK, GPM_MIB_S, GPM_PERCENT, MIB, UUID0, UUID1, NotSupported, RecordingDcgm, RecordingNvml, gpu,
    load, two_gpus, value,
)

collector = load()
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
ALL = collector.GpuSelection()


def by_field(samples, gpu_index=None):
    return {field: value for _, index, _, field, value in samples if gpu_index is None or index == gpu_index}


# --------------------------------------------------------------------------------------------
# NVML GPM
# --------------------------------------------------------------------------------------------
def test_gpm_values_become_dcgm_ids_and_units():
    nvml = two_gpus()
    source = collector.GpmSource(collector.DEFAULT_FIELDS, 1.0, ALL, adapter=nvml)
    source.open()
    samples = source.read()
    source.close()

    for index, uuid in ((0, UUID0), (1, UUID1)):
        values = by_field(samples, index)
        # Percent -> ratio, DCGM's id for each GPM metric.
        assert values[1001] == pytest.approx(0.7125) and values[1002] == pytest.approx(0.625)
        assert values[1003] == pytest.approx(0.30) and values[1004] == pytest.approx(0.45)
        assert values[1005] == pytest.approx(0.555) and values[1006] == 0.0
        assert values[1007] == pytest.approx(0.12) and values[1008] == pytest.approx(0.015)
        # MiB/s -> bytes/s; 20 is TX (1009), 21 RX (1010); 61 is NVLink TX (1011), 60 RX (1012).
        assert values[1009] == 2048 * MIB and values[1010] == 512.25 * MIB
        assert values[1011] == 0.5 * MIB and values[1012] == 0.0
        # Not supported (nvmlReturn 3) and NaN are missing, not zero.
        assert 1076 not in values and 1078 not in values
        # Plain NVML: mW -> W, bytes -> MiB, the rest as NVML gives it.
        assert values[155] == 215.5 and values[252] == 40960.0
        assert (values[100], values[113], values[150], values[156], values[203], values[112]) == \
            (1755, 1980, 47, 123456789, 93, 0x4)
        # DCGM-only fields are not made up.
        assert not {140, 230, 311} & set(values)
    assert all(ISO_Z.match(ts) for ts, *_ in samples)
    assert {(index, uuid) for _, index, uuid, _, _ in samples} == {(0, UUID0), (1, UUID1)}
    assert len(GPM_PERCENT) + len(GPM_MIB_S) - 2 + 8 == len(by_field(samples, 0))


def test_gpm_call_sequence_swaps_buffers_and_frees_them():
    nvml = RecordingNvml([gpu(0, UUID0, metrics={2: [10.0, 20.0, 30.0]})])
    source = collector.GpmSource([1002, 155], 0.1, ALL, adapter=nvml)
    source.open()
    reads = [by_field(source.read()) for _ in range(3)]
    source.close()

    assert [read[1002] for read in reads] == [pytest.approx(0.1), pytest.approx(0.2), pytest.approx(0.3)]
    assert [read[155] for read in reads] == [215.5] * 3
    names = nvml.names()
    assert names[:6] == ["init", "device_count", "device_handle", "device_uuid", "device_minor", "gpm_supported"]
    assert names.count("gpm_sample_alloc") == 2
    # Each interval: one new sample, metrics over (older, newer) -- the recorder asserts the order -- then swap.
    gets = [args[1] for name, args in nvml.calls if name == "gpm_sample_get"]
    metrics = [args[:2] for name, args in nvml.calls if name == "gpm_metrics_get"]
    assert gets == [nvml.buffers[0], nvml.buffers[1], nvml.buffers[0], nvml.buffers[1]]
    assert metrics == [(nvml.buffers[0], nvml.buffers[1]), (nvml.buffers[1], nvml.buffers[0]),
                       (nvml.buffers[0], nvml.buffers[1])]
    # Teardown: both buffers freed once, then nvmlShutdown, last.
    assert names[-3:] == ["gpm_sample_free", "gpm_sample_free", "shutdown"]
    assert all(buffer.freed for buffer in nvml.buffers) and not nvml.initialised
    source.close()  # idempotent
    assert nvml.names().count("shutdown") == 1


def test_gpm_takes_slurms_gpu_numbers_as_device_minors():
    """NVML's order is not Slurm's: NVML device 0 here is /dev/nvidia1."""
    nvml = RecordingNvml([gpu(1, UUID1), gpu(0, UUID0, metrics={2: 50.0})])
    selection = collector.gpus_from_env({"SLURM_STEP_GPUS": "0"})
    source = collector.GpmSource([1002, 150], 1.0, selection, adapter=nvml)
    source.open()
    samples = source.read()
    source.close()
    assert {(index, uuid) for _, index, uuid, _, _ in samples} == {(0, UUID0)}
    assert by_field(samples) == {1002: 0.5, 150: 47}
    handles = {args[0].position for name, args in nvml.calls if name == "gpm_sample_get"}
    assert handles == {1}
    assert nvml.names().count("gpm_sample_alloc") == 2  # none for the other job's GPU


def test_gpm_finds_the_metrics_the_driver_refuses(capsys):
    """C2C metrics (100, 101) exist only in newer drivers: the request is retried metric by metric once."""
    nvml = RecordingNvml([gpu(0, UUID0, metrics={2: 40.0, 20: 1.0, 100: 3.0, 101: 4.0})], reject_in_batch={100, 101})
    source = collector.GpmSource([1002, 1009, 1076, 1078], 1.0, ALL, adapter=nvml)
    source.open()
    first, second = by_field(source.read()), by_field(source.read())
    source.close()
    assert first == second == {1002: 0.4, 1009: 1.0 * MIB}
    assert "refuses GPM metrics 100,101 (fields 1076,1078" in capsys.readouterr().err
    last = [args[2] for name, args in nvml.calls if name == "gpm_metrics_get"][-1]
    assert last == (2, 20)


def test_gpm_skips_what_nvml_cannot_read(capsys):
    nvml = RecordingNvml([gpu(0, UUID0, gpm=False, total_energy_mj=NotSupported())])
    source = collector.GpmSource([1002, 156, 150], 1.0, ALL, adapter=nvml)
    source.open()
    reads = [by_field(source.read()) for _ in range(2)]
    source.close()
    assert reads == [{150: 47}, {150: 47}]
    err = capsys.readouterr().err
    assert err.count("NVML cannot give field 156 (Not Supported)") == 1
    assert "do not support NVML GPM" in err
    assert "gpm_sample_alloc" not in nvml.names() and nvml.names()[-1] == "shutdown"


def test_gpm_says_which_fields_need_dcgm(capsys):
    source = collector.GpmSource(collector.DEFAULT_FIELDS, 1.0, ALL, adapter=two_gpus())
    source.open()
    source.close()
    assert "NVML GPM cannot give fields 140,230,311 (DCGM only)" in capsys.readouterr().err


def test_gpm_without_nvidia_ml_py_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    source = collector.GpmSource([1002], 1.0, ALL)
    with pytest.raises(collector.SourceUnavailable, match=r"pip install nvidia-ml-py"):
        source.open()
    source.close()


def test_gpm_without_a_driver_says_so():
    nvml = RecordingNvml([], fail_init=NotSupported())
    source = collector.GpmSource([1002], 1.0, ALL, adapter=nvml)
    with pytest.raises(collector.SourceUnavailable, match=r"NVML could not start .*driver"):
        source.open()
    source.close()
    assert "shutdown" not in nvml.names()


def test_gpm_teardown_after_an_exception_in_the_middle_of_a_run(tmp_path, capsys):
    class FullDisk(collector.FileSink):
        def put(self, samples):
            raise OSError(28, "No space left on device")

    nvml = two_gpus()
    source = collector.GpmSource([1002], 0.1, ALL, adapter=nvml)
    monitor = collector.Monitor(source, FullDisk(str(tmp_path / "out.ndjson"), "nid000001"), 0.1, duration=5)
    started = time.monotonic()
    assert monitor.run() is False
    assert time.monotonic() - started < 2
    assert "monitoring stopped: OSError" in capsys.readouterr().err
    assert all(buffer.freed for buffer in nvml.buffers) and len(nvml.buffers) == 4
    assert nvml.names()[-1] == "shutdown"


# --------------------------------------------------------------------------------------------
# DCGM
# --------------------------------------------------------------------------------------------
UUIDS = {0: "GPU-aaaaaaaa-0000-0000-0000-000000000000", 1: "GPU-bbbbbbbb-0000-0000-0000-000000000000",
         2: "GPU-cccccccc-0000-0000-0000-000000000000", 3: "GPU-dddddddd-0000-0000-0000-000000000000"}
MINORS = {0: 2, 1: 0, 2: 3, 3: 1}  # DCGM gpu id -> /dev/nvidiaN: DCGM's numbering is its own


@pytest.fixture
def proc(tmp_path):
    """A /proc/driver/nvidia/gpus like the driver's (tabs and all)."""
    root = tmp_path / "gpus"
    for gpu_id, uuid in UUIDS.items():
        directory = root / f"0009:0{gpu_id}:00.0"
        directory.mkdir(parents=True)
        (directory / "information").write_text(
            f"Model: \t\t NVIDIA GH200 120GB\nIRQ:   \t\t 0\nGPU UUID: \t {uuid}\nVideo BIOS: \t ??.??.??.??.??\n"
            f"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0009:0{gpu_id}:00.0\n"
            f"Device Minor: \t {MINORS[gpu_id]}\nGPU Firmware: \t 550.54.15\nGPU Excluded:\t No\n")
    return str(root)


def dcgm_source(dcgm, proc, fields=(1002, 1009, 155, 252, 1076, 230, 150), gpus="0,1", interval=1.0):
    selection = collector.gpus_from_env({"SLURM_STEP_GPUS": gpus})
    return collector.DcgmSource(list(fields), interval, selection, "belvedere-77.0-nid000001-123", "127.0.0.1",
                                adapter=dcgm, proc_root=proc)


def test_dcgm_call_sequence_values_and_teardown(proc):
    t1 = int(time.time() * 1e6) + 1_000_000
    t2 = t1 + 1_000_000
    stale = t1 - 3600 * 1_000_000

    def reading(ts_1002, ts_rest):
        per_gpu = {
            1002: [value(0.40, ts_1002 - 1_000_000), value(0.42, ts_1002)],
            1009: [value(123456789, ts_rest)],
            155: [value(215.5, ts_rest)],
            252: [value(40960, stale)],  # from before our watch: someone else's
            1076: [value(DCGM_FP64_BLANK, ts_rest, blank=True)],
            230: [value(None, ts_rest, blank=True)],
            150: [],
        }
        return {1: dict(per_gpu), 3: dict(per_gpu), 0: {1002: [value(0.99, ts_rest)]}}

    dcgm = RecordingDcgm(UUIDS, readings=[reading(t1, t1), reading(t1, t2)])
    source = dcgm_source(dcgm, proc)
    source.open()
    first, second = source.read(), source.read()
    source.close()

    # SLURM_STEP_GPUS=0,1 are /dev/nvidia0 and /dev/nvidia1, which DCGM calls GPUs 1 and 3.
    assert [args for name, args in dcgm.calls if name == "add_gpu"] == [
        ("belvedere-77.0-nid000001-123-gpus", 1), ("belvedere-77.0-nid000001-123-gpus", 3)]
    assert [args for name, args in dcgm.calls if name == "create_field_group"] == [
        ("belvedere-77.0-nid000001-123-fields", (1002, 1009, 155, 252, 1076, 230, 150))]
    assert [args for name, args in dcgm.calls if name == "watch_fields"] == [
        ("belvedere-77.0-nid000001-123-gpus", "belvedere-77.0-nid000001-123-fields", 1_000_000, 10.0, 5)]
    assert dcgm.calls[0] == ("connect", ("127.0.0.1",))

    iso1, iso2 = collector.iso(t1 / 1e6), collector.iso(t2 / 1e6)
    assert sorted(first) == sorted([
        (iso1, 0, UUIDS[1], 1002, 0.42), (iso1, 0, UUIDS[1], 1009, 123456789), (iso1, 0, UUIDS[1], 155, 215.5),
        (iso1, 1, UUIDS[3], 1002, 0.42), (iso1, 1, UUIDS[3], 1009, 123456789), (iso1, 1, UUIDS[3], 155, 215.5)])
    # The second read: 1002 has not changed (same timestamp), the others are new.
    assert sorted(second) == sorted([
        (iso2, 0, UUIDS[1], 1009, 123456789), (iso2, 0, UUIDS[1], 155, 215.5),
        (iso2, 1, UUIDS[3], 1009, 123456789), (iso2, 1, UUIDS[3], 155, 215.5)])
    assert dcgm.names()[-4:] == ["unwatch_fields", "delete_field_group", "delete_group", "disconnect"]
    source.close()  # idempotent
    assert dcgm.names().count("disconnect") == 1


def test_dcgm_interval_is_the_watch_frequency(proc):
    dcgm = RecordingDcgm(UUIDS)
    source = dcgm_source(dcgm, proc, interval=0.2)
    source.open()
    source.close()
    [(_, _, update_us, keep_age, keep_samples)] = [args for name, args in dcgm.calls if name == "watch_fields"]
    assert (update_us, keep_age, keep_samples) == (200_000, 10.0, 5)


def test_dcgm_matches_uuids_too(proc):
    dcgm = RecordingDcgm(UUIDS)
    source = dcgm_source(dcgm, proc, gpus=UUIDS[2])
    source.open()
    source.close()
    assert [args[1] for name, args in dcgm.calls if name == "add_gpu"] == [2]
    assert source.gpus == {2: (3, UUIDS[2])}


def test_dcgm_without_proc_takes_dcgm_ids_for_slurm_numbers(tmp_path, capsys):
    dcgm = RecordingDcgm(UUIDS)
    source = dcgm_source(dcgm, str(tmp_path / "missing"), gpus="2")
    source.open()
    source.close()
    assert source.gpus == {2: (2, UUIDS[2])}
    assert "taking DCGM's GPU ids for Slurm's GPU numbers" in capsys.readouterr().err


def test_dcgm_none_of_the_steps_gpus(proc):
    dcgm = RecordingDcgm({0: UUIDS[0]})
    source = dcgm_source(dcgm, proc, gpus="3")
    with pytest.raises(collector.SourceUnavailable, match=r"none of the GPUs of SLURM_STEP_GPUS=3 is among the 1 GPUs"):
        source.open()
    source.close()
    assert dcgm.names()[-1] == "disconnect" and "create_group" not in dcgm.names()


def test_dcgm_profiling_refused_falls_back_to_device_fields(proc, capsys):
    now = int(time.time() * 1e6) + 1_000_000
    dcgm = RecordingDcgm(UUIDS, refuse_profiling=True,
                         readings=[{1: {155: [value(300.0, now)], 150: [value(51, now)]}}])
    source = dcgm_source(dcgm, proc)
    source.open()
    samples = source.read()
    source.close()
    assert by_field(samples) == {155: 300.0, 150: 51}
    assert "collecting the device fields only" in capsys.readouterr().err
    created = [args for name, args in dcgm.calls if name == "create_field_group"]
    assert created[1] == ("belvedere-77.0-nid000001-123-device", (155, 252, 230, 150))
    assert [args for name, args in dcgm.calls if name == "delete_field_group"] == [
        ("belvedere-77.0-nid000001-123-fields",), ("belvedere-77.0-nid000001-123-device",)]
    assert all(group.deleted for group in dcgm.field_groups.values())
    assert all(group.deleted for group in dcgm.groups.values())


def test_dcgm_teardown_after_an_exception_in_the_middle_of_a_run(proc, tmp_path, capsys):
    dcgm = RecordingDcgm(UUIDS, fail_latest_at=2)
    source = dcgm_source(dcgm, proc, interval=0.1)
    sink = collector.FileSink(str(tmp_path / "out.ndjson"), "nid000001")
    assert collector.Monitor(source, sink, 0.1, duration=10).run() is False
    assert "monitoring stopped: DCGMError: Host engine connection invalid" in capsys.readouterr().err
    assert dcgm.names()[-4:] == ["unwatch_fields", "delete_field_group", "delete_group", "disconnect"]


def test_dcgm_teardown_on_sigterm(tmp_path):
    """Standalone, in this process: SIGTERM arrives in the middle of the run; the handler only stops
    the loop, and the group, field group and watch are released before main() returns."""
    now = int(time.time() * 1e6) + 1_000_000

    def reading(call, fields):
        return {0: {1002: [value(0.5, now + call)], 155: [value(200.0, now + call)]}}

    def on_latest(call):
        if call == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    dcgm = RecordingDcgm({0: UUID0}, readings=reading, on_latest=on_latest)
    out = tmp_path / "out.ndjson"
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3", "SLURMD_NODENAME": "nid000007", "SLURM_LOCALID": "0"}
    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    code = collector.main(["--source", "dcgm", "--interval", "0.1", "--duration", "30", "--host-metrics", "off",
                           "--output", str(out),
                           "--gpus", "all"], env, adapters={"dcgm": dcgm})
    assert code == 0 and time.monotonic() - started < 5
    assert signal.getsignal(signal.SIGTERM) is before
    name = f"belvedere-4242.3-nid000007-{os.getpid()}"
    assert dcgm.names()[-4:] == ["unwatch_fields", "delete_field_group", "delete_group", "disconnect"]
    assert [args for n, args in dcgm.calls if n == "create_group"] == [(f"{name}-gpus",)]
    assert dcgm.latest_calls == 2
    assert len(out.read_text().splitlines()) == 4


def test_dcgm_connection_refused_says_where(proc):
    dcgm = RecordingDcgm(UUIDS, fail_connect=RuntimeError("Host engine connection invalid/disconnected"))
    source = dcgm_source(dcgm, proc)
    with pytest.raises(collector.SourceUnavailable, match=r"cannot connect to the DCGM host engine at 127\.0\.0\.1 .*"
                                                         r"nv-hostengine running"):
        source.open()
    source.close()
    assert dcgm.names() == ["connect"]


def test_dcgm_without_bindings_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "pydcgm", None)
    monkeypatch.setitem(sys.modules, "dcgm_structs", None)
    source = collector.DcgmSource([1002], 1.0, ALL, "x", env={"DCGM_HOME": str(tmp_path)})
    with pytest.raises(collector.SourceUnavailable) as raised:
        source.open()
    message = str(raised.value)
    assert "\n" not in message
    for text in (f"{tmp_path}/bindings/python3", "/usr/share/datacenter-gpu-manager-4/bindings/python3",
                 "/usr/local/dcgm/bindings/python3", "datacenter-gpu-manager-4-core", "set DCGM_HOME",
                 'com.hooks.dcgm.enabled = "true"'):
        assert text in message
    source.close()


def test_dcgm_bindings_directories_go_on_the_path(monkeypatch, tmp_path):
    bindings = tmp_path / "bindings" / "python3"
    bindings.mkdir(parents=True)
    (bindings / "dcgm_structs.py").write_text("DCGM_OPERATION_MODE_AUTO = 1\nDCGM_GROUP_EMPTY = 1\n")
    (bindings / "pydcgm.py").write_text("LOADED_FROM = __file__\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "pydcgm", raising=False)
    monkeypatch.delitem(sys.modules, "dcgm_structs", raising=False)
    adapter = collector.PydcgmAdapter.load({"DCGM_HOME": str(tmp_path)})
    assert adapter.pydcgm.LOADED_FROM == str(bindings / "pydcgm.py")
    assert sys.path[0] == str(bindings)


# --------------------------------------------------------------------------------------------
# auto
# --------------------------------------------------------------------------------------------
def make_auto(dcgm, nvml, fields=(1002, 155)):
    return collector.AutoSource(
        lambda: collector.DcgmSource(list(fields), 1.0, ALL, "belvedere-x", adapter=dcgm, proc_root="/nonexistent"),
        lambda: collector.GpmSource(list(fields), 1.0, ALL, adapter=nvml))


def test_auto_prefers_dcgm():
    dcgm, nvml = RecordingDcgm({0: UUID0}), two_gpus()
    source = make_auto(dcgm, nvml)
    source.open()
    source.close()
    assert source.chosen.name == "dcgm" and nvml.calls == []


def test_auto_falls_back_to_gpm():
    dcgm = RecordingDcgm({0: UUID0}, fail_connect=RuntimeError("Connection refused"))
    nvml = two_gpus()
    source = make_auto(dcgm, nvml)
    source.open()
    values = by_field(source.read(), 1)
    source.close()
    assert source.chosen.name == "gpm" and values == {1002: 0.625, 155: 215.5}
    assert nvml.names()[-1] == "shutdown"


def test_auto_with_neither_says_both_reasons():
    dcgm = RecordingDcgm({0: UUID0}, fail_connect=RuntimeError("Connection refused"))
    nvml = RecordingNvml([], fail_init=RuntimeError("Driver Not Loaded"))
    source = make_auto(dcgm, nvml)
    with pytest.raises(collector.SourceUnavailable) as raised:
        source.open()
    message = str(raised.value)
    assert "dcgm: cannot connect to the DCGM host engine" in message and "gpm: NVML could not start" in message
    source.close()


def test_monitor_reads_at_the_interval():
    nvml = two_gpus()
    source = collector.GpmSource([1002], 0.1, ALL, adapter=nvml)
    seen = []

    class Sink:
        def describe(self):
            return "a list"

        def put(self, samples):
            seen.append((time.monotonic(), samples))

        def close(self):
            pass

    stop = threading.Event()
    monitor = collector.Monitor(source, Sink(), 0.1, duration=0.55, stop=stop)
    monitor.run()
    assert 3 <= len(seen) <= 6
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    assert all(0.05 < gap < 0.35 for gap in gaps)
    assert all(math.isclose(value, 0.625) for _, samples in seen for *_, value in samples)
