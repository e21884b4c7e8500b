"""Flight Recorder: a 4,096-rank job's dumps (2,000 entries each, as PyTorch's default ring buffer holds) analysed
on one core, streaming, in bounded memory.

The dumps are written once into the run's work folder as PyTorch's NCCL backend writes them on a timeout (pickle,
version 2.10, no stack frames: TORCH_NCCL_TRACE_CPP_STACK off): a Megatron job of TP 8 x PP 4 x DP 128 whose ranks
run the same step over and over (a TP all-reduce per layer, pipeline sends and receives, the DP gradient
all-reduce), and one rank that never enters the last data-parallel all-reduce. The figure is
``analysis.Analyser`` over every file, one at a time, read with the plain-data unpickler, to the verdict (which
must name that rank); its peak memory (``ru_maxrss`` of a child process doing only this). The floor, in the same
run: reading the same files bare (``read_bytes``), and the standard library's own ``pickle.loads`` of each, which the
analysis never uses (this is our own file, written a moment ago).

Alone: ``python bench/bench_flightrec.py [--ranks N] [--entries M]``. Target: 4,096 x 2,000 in <= 60 s, <= 2 GB.
"""
from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Figure

TP, PP = 8, 4
CULPRIT_OFFSET = 5  # the culprit: rank world - CULPRIT_OFFSET
T0 = 1_790_000_000_000_000_000


def _groups(world: int):
    from apps.ranks.layout import ParallelSizes, RankLayout

    layout = RankLayout(ParallelSizes(tp=TP, pp=PP), world)
    return layout, {kind: layout.groups_array(kind) for kind in ("tp", "pp", "dp")}


def write_dumps(folder: Path, world: int, entries: int) -> int:
    """Write ``world`` dumps of ``entries`` entries (``apps.flightrec.synthetic``, the demo's writer); the total bytes."""
    from apps.flightrec.synthetic import megatron_dumps

    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for rank, data in megatron_dumps(world, entries, tp=TP, pp=PP, culprit=world - CULPRIT_OFFSET, end_ns=T0):
        (folder / f"nccl_trace_rank_{rank}").write_bytes(data)
        total += len(data)
    return total


def _analyse(folder: Path, world: int) -> dict:
    from apps.flightrec.analysis import Analyser
    from apps.flightrec.groups import GroupCatalogue

    layout, groups = _groups(world)
    catalogue = GroupCatalogue({kind: layout.groups(kind) for kind in ("tp", "pp", "dp")}, world_size=world)
    analyser = Analyser(world_size=world, catalogue=catalogue, frames=False)
    for rank in range(world):
        analyser.add_bytes(rank, (folder / f"nccl_trace_rank_{rank}").read_bytes())
    return analyser.result()


def _child(mode: str, folder: str, world: int) -> None:
    """Run one measurement in this (fresh) process and print {seconds, rss_mb, ...} as JSON."""
    folder = Path(folder)
    started, cpu = time.perf_counter(), time.process_time()
    answer = {}
    if mode == "analyse":
        result = _analyse(folder, world)
        answer = {"status": result["status"], "verdict": result["verdict"], "culprits": [c["rank"] for c in result["culprits"]]}
    elif mode == "bytes":
        answer = {"bytes": sum(len((folder / f"nccl_trace_rank_{r}").read_bytes()) for r in range(world))}
    else:
        count = 0
        for rank in range(world):
            count += len(pickle.loads((folder / f"nccl_trace_rank_{rank}").read_bytes())["entries"])
        answer = {"entries": count}
    answer["seconds"] = time.perf_counter() - started
    answer["cpu_seconds"] = time.process_time() - cpu
    answer["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(answer))


def _run_child(mode: str, folder: Path, world: int) -> dict:
    base = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(base)!r}); "
                           f"from bench.bench_flightrec import _child; _child({mode!r}, {str(folder)!r}, {world})"],
                          capture_output=True, text=True, check=True, cwd=base)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(workdir: Path, ranks: int = 4096, entries: int = 2000) -> dict:
    folder = workdir / f"flightrec-{ranks}x{entries}"
    started = time.perf_counter()
    size = write_dumps(folder, ranks, entries)
    written = time.perf_counter() - started
    bare = _run_child("bytes", folder, ranks)
    plain = _run_child("pickle", folder, ranks)
    analysed = _run_child("analyse", folder, ranks)
    return {"ranks": ranks, "entries": entries, "bytes": size, "write_seconds": written, "seconds": analysed["seconds"],
            "cpu_seconds": analysed["cpu_seconds"], "floor_pickle_cpu": plain["cpu_seconds"],
            "rss_mb": analysed["rss_mb"], "floor_bytes": bare["seconds"], "floor_pickle": plain["seconds"],
            "floor_pickle_rss_mb": plain["rss_mb"], "status": analysed["status"], "verdict": analysed["verdict"],
            "culprits": analysed["culprits"], "expected_culprit": ranks - CULPRIT_OFFSET}


def run(workdir: Path) -> list[Figure]:
    report = measure(workdir)
    found = report["culprits"] == [report["expected_culprit"]]
    note = (f"{report['ranks']:,} dumps x {report['entries']:,} entries ({report['bytes'] / 1e9:.2f} GB), CPU "
            f"{report['cpu_seconds']:.1f} s, peak RSS "
            f"{report['rss_mb']:,.0f} MB (target <= 60 s, <= 2 GB); standard pickle.loads of the same files "
            f"{report['floor_pickle']:.1f} s; culprit {'found' if found else 'NOT found'}: {report['verdict']}")
    return [Figure("flightrec: 4,096 rank dumps analysed", report["seconds"], report["floor_bytes"],
                   "reading the same files bare", note)]


if __name__ == "__main__":
    import os
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--entries", type=int, default=2000)
    options = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.embedded")
    print(json.dumps(measure(Path(tempfile.mkdtemp(prefix="bench-flightrec-")), options.ranks, options.entries), indent=1))
