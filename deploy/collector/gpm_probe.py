#!/usr/bin/env python3
"""gpm_probe.py: run the collector's NVML GPM source on a real GPU and keep what NVML answered.

    python3 gpm_probe.py [--seconds 10] [--interval 1] [--out gpm-probe.json] [--gpus all]
                         [--fields default] [--load]

Needs nvidia-ml-py (pip install nvidia-ml-py, or a wheel carried to an offline machine:
pip install --no-index nvidia_ml_py-*.whl) and a Hopper-or-newer GPU for the GPM metrics. Writes a
JSON file with

  * "environment": host, Python, nvidia-ml-py, driver and NVML versions, the GPUs' names (best effort);
  * "settings": seconds, interval, fields, GPUs, number of reads;
  * "calls": every call the collector's GpmSource made to its NVML adapter, in order, with its
    arguments and what NVML returned, raw (percent, MiB/s, mW, bytes, ...). Device handles and GPM
    sample buffers appear as {"ref": "handle0"} / {"ref": "buffer1"}, non-finite floats as
    {"float": "nan"}, exceptions as {"error": class name, "message": text};
  * "samples": what the collector made of them: [ts, gpu, uuid, DCGM field id, value in DCGM's unit].

`ReplayNvml(document["calls"])` is an adapter that answers with the recorded results, in order, so a
test can put the recorded values through GpmSource again (`replay(document)`) and compare with
"samples": a real GPU's answers kept as a test fixture.

--load runs a bf16 matrix-multiply loop on every visible GPU during the probe (needs torch), so the
activity metrics are not all zero. Standard library only otherwise; Python 3.8 or newer.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTOR = os.path.join(HERE, "belvedere-collector.py")

LOAD = r"""
import sys, time
try:
    import torch
except ImportError:
    print("gpm_probe: torch is not installed here: no load", file=sys.stderr)
    sys.exit(0)
end = time.time() + float(sys.argv[1])
devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
xs = [torch.randn(8192, 8192, device=d, dtype=torch.bfloat16) for d in devices]
while time.time() < end:
    for x in xs:
        y = x @ x
    torch.cuda.synchronize()
"""


def load_collector():
    spec = importlib.util.spec_from_file_location("belvedere_collector", COLLECTOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("belvedere_collector", module)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------------------------
# JSON encoding of what crosses the adapter
# --------------------------------------------------------------------------------------------
class Refs:
    """Stable names for opaque NVML objects (device handles, sample buffers)."""

    def __init__(self):
        self.names, self.keep = {}, []

    def name(self, obj, kind):
        key = id(obj)
        if key not in self.names:
            self.names[key] = f"{kind}{sum(1 for name in self.names.values() if name.startswith(kind))}"
            self.keep.append(obj)  # so that the id is never reused
        return self.names[key]


def encode(value, refs, kind="object"):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, (list, tuple)):
        return [encode(item, refs) for item in value]
    return {"ref": refs.name(value, kind)}


def decode(value, objects):
    if isinstance(value, list):
        return tuple(decode(item, objects) for item in value)
    if isinstance(value, dict):
        if "float" in value:
            return float(value["float"])
        if "ref" in value:
            return objects.setdefault(value["ref"], Opaque(value["ref"]))
    return value


class Opaque:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<{self.name}>"


class Recorder:
    """Wraps an NVML adapter; every method call is logged with its arguments and result."""

    KINDS = {"device_handle": "handle", "gpm_sample_alloc": "buffer"}

    def __init__(self, adapter):
        self._adapter, self.calls, self._refs = adapter, [], Refs()

    def __getattr__(self, name):
        method = getattr(self._adapter, name)

        def call(*args):
            entry = {"method": name, "args": [encode(arg, self._refs) for arg in args]}
            try:
                result = method(*args)
            except Exception as error:
                entry["error"] = {"error": type(error).__name__, "message": str(error)}
                self.calls.append(entry)
                raise
            entry["result"] = encode(result, self._refs, self.KINDS.get(name, "object"))
            self.calls.append(entry)
            return result

        return call


class ReplayNvml:
    """An adapter answering with recorded results: per method, in the recorded order."""

    def __init__(self, calls):
        self.queues, self.objects = {}, {}
        for entry in calls:
            self.queues.setdefault(entry["method"], []).append(entry)

    def __getattr__(self, name):
        def call(*args):
            queue = self.queues.get(name)
            if not queue:
                raise AssertionError(f"{name} was not called this often in the recording")
            entry = queue.pop(0)
            if "error" in entry:
                raise type(entry["error"]["error"], (Exception,), {})(entry["error"]["message"])
            return decode(entry["result"], self.objects)

        return call


def replay(document, collector=None):
    """The samples GpmSource makes of the recorded NVML answers: [(gpu, uuid, field, value)]."""
    collector = collector or load_collector()
    settings = document["settings"]
    selection = collector.parse_gpu_list(settings["gpus"], "the recording")
    source = collector.GpmSource(settings["fields"], settings["interval"], selection,
                                 adapter=ReplayNvml(document["calls"]))
    samples = []
    source.open()
    try:
        for _ in range(settings["reads"]):
            samples.extend(source.read())
    finally:
        source.close()
    return [(gpu, uuid, field, value) for _, gpu, uuid, field, value in samples]


# --------------------------------------------------------------------------------------------
def environment(adapter) -> dict:
    info = {"host": socket.gethostname(), "python": sys.version.split()[0], "platform": platform.platform()}
    try:
        from importlib.metadata import version  # noqa: PLC0415

        info["nvidia_ml_py"] = version("nvidia-ml-py")
    except Exception:  # noqa: BLE001
        pass
    nv = getattr(adapter, "nv", None)  # the real PynvmlAdapter's pynvml module
    if nv is not None:
        for key, call in (("driver", lambda: nv.nvmlSystemGetDriverVersion()),
                          ("nvml", lambda: nv.nvmlSystemGetNVMLVersion()),
                          ("gpus", lambda: [nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i))
                                            for i in range(nv.nvmlDeviceGetCount())])):
            try:
                value = call()
                info[key] = [v.decode() if isinstance(v, bytes) else v for v in value] if isinstance(value, list) \
                    else (value.decode() if isinstance(value, bytes) else value)
            except Exception as error:  # noqa: BLE001
                info[key] = f"unknown ({error})"
    return info


def probe(options, adapter=None, collector=None) -> dict:
    collector = collector or load_collector()
    adapter = adapter or collector.PynvmlAdapter.load()
    recorder = Recorder(adapter)
    fields = collector.field_list(options.fields)
    selection = collector.parse_gpu_list(options.gpus, "--gpus")
    source = collector.GpmSource(fields, options.interval, selection, adapter=recorder)
    load = None
    if options.load:
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(options.seconds + 2 * options.interval)])
        time.sleep(min(3.0, options.seconds / 3))  # let it start before the first sample
    samples, reads = [], 0
    try:
        source.open()
        try:
            info = environment(adapter)  # after nvmlInit
            deadline = time.monotonic() + options.seconds
            while time.monotonic() < deadline:
                time.sleep(options.interval)
                samples.extend(source.read())
                reads += 1
        finally:
            source.close()
    finally:
        if load is not None:
            load.terminate()
            load.wait()
    return {
        "environment": info,
        "settings": {"seconds": options.seconds, "interval": options.interval, "fields": fields,
                     "gpus": options.gpus, "reads": reads, "load": bool(options.load)},
        "calls": recorder.calls,
        "samples": [[ts, gpu, uuid, field, encode(value, None)] for ts, gpu, uuid, field, value in samples],
    }


def main(argv=None, adapter=None) -> int:
    parser = argparse.ArgumentParser(prog="gpm_probe.py", description="Run the collector's NVML GPM source on this "
                                     "machine's GPUs and write NVML's raw answers and the converted samples to JSON.")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to sample (default 10)")
    parser.add_argument("--interval", type=float, default=1.0, help="sampling interval (default 1, at least 0.1)")
    parser.add_argument("--out", default="gpm-probe.json", help="the JSON file to write (default gpm-probe.json)")
    parser.add_argument("--gpus", default="all", help="GPU numbers (device minors) or UUIDs, or all (default)")
    parser.add_argument("--fields", default="default,1013,1014,1015,1016,1077,1079,1040,1041",
                        help="DCGM field ids (default: the collector's defaults plus the tensor-pipe, C2C data "
                        "and NVLink-0 fields)")
    parser.add_argument("--load", action="store_true", help="run a matmul loop on every GPU meanwhile (needs torch)")
    options = parser.parse_args(argv)
    if options.interval < 0.1:
        parser.error("--interval must be at least 0.1 s")
    collector = load_collector()
    try:
        document = probe(options, adapter, collector)
    except collector.SourceUnavailable as error:
        print(f"gpm_probe: {error}", file=sys.stderr)
        return 1
    with open(options.out, "w") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    fields = sorted({sample[3] for sample in document["samples"]})
    print(f"gpm_probe: {document['settings']['reads']} reads, {len(document['samples'])} samples of fields "
          f"{','.join(map(str, fields))} from {len(document['calls'])} NVML calls -> {options.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
