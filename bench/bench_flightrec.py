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
    """Write ``world`` dumps of ``entries`` entries; returns the total bytes."""
    layout, groups = _groups(world)
    names = {}  # (kind, index) -> pg name, in creation order as Megatron creates them
    for kind in ("tp", "pp", "dp"):
        for index in range(groups[kind].shape[0]):
            names[(kind, index)] = str(len(names) + 1)
    index_of = {kind: {int(r): i for i, row in enumerate(groups[kind]) for r in row} for kind in ("tp", "pp", "dp")}
    culprit = world - CULPRIT_OFFSET
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    # one step: 6 TP all-reduces, a send and a recv to the pipeline neighbours, 1 DP all-reduce = 9 entries
    steps = entries // 9 + 1
    for rank in range(world):
        coords = layout.coords(rank)
        tp_pg = names[("tp", index_of["tp"][rank])]
        pp_pg = names[("pp", index_of["pp"][rank])]
        dp_pg = names[("dp", index_of["dp"][rank])]
        config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}}
        for kind, pg in (("tp", tp_pg), ("pp", pp_pg), ("dp", dp_pg)):
            members = groups[kind][index_of[kind][rank]].tolist()
            desc = {"tp": "TENSOR_MODEL_PARALLEL_GROUP", "pp": "PIPELINE_MODEL_PARALLEL_GROUP", "dp": "DATA_PARALLEL_GROUP"}[kind]
            config[pg] = {"name": pg, "desc": desc, "ranks": str(members)}
        rows, record, tp_seq, dp_seq, p2p_seq = [], 0, 0, 0, 0
        stage, nxt = coords["pp"], (coords["pp"] + 1) % PP
        for step in range(steps):
            plan = [("tp", "nccl:all_reduce")] * 6 + [("pp", f"nccl:send {stage}->{nxt}"),
                                                      ("pp", f"nccl:recv {stage}<-{(stage - 1) % PP}"), ("dp", "nccl:all_reduce")]
            for kind, op in plan:
                last = step == steps - 1
                if kind == "dp" and last and rank == culprit:
                    continue  # never enters the last DP all-reduce
                if kind == "tp":
                    tp_seq += 1
                    pg, seq, p2p, size = (tp_pg, "TENSOR_MODEL_PARALLEL_GROUP"), tp_seq, 0, [4096, 8192]
                elif kind == "dp":
                    dp_seq += 1
                    pg, seq, p2p, size = (dp_pg, "DATA_PARALLEL_GROUP"), dp_seq, 0, [1 << 22]
                else:
                    p2p_seq += 1
                    pg, seq, p2p, size = (pp_pg, "PIPELINE_MODEL_PARALLEL_GROUP"), 0, p2p_seq, [1, 4096, 8192]
                waiting = last and kind == "dp"
                created = T0 + (step * 9 + len(rows) % 9) * 50_000_000
                rows.append({"record_id": record, "pg_id": int(pg[0]), "process_group": pg, "collective_seq_id": seq,
                             "p2p_seq_id": p2p, "op_id": record + 1, "profiling_name": op, "time_created_ns": created,
                             "input_sizes": [size], "input_dtypes": ["BFloat16"], "output_sizes": [size],
                             "output_dtypes": ["BFloat16"], "state": "started" if waiting else "completed",
                             "time_discovered_started_ns": created + 1000, "time_discovered_completed_ns": None if waiting else created + 40_000_000,
                             "frames": [], "is_p2p": kind == "pp", "retired": not waiting, "timeout_ms": 600_000})
                record += 1
        rows = rows[-entries:]
        data = pickle.dumps({"version": "2.10", "pg_config": config, "pg_status": {}, "comm_lib_version": "2.21.5",
                             "entries": rows}, protocol=2 if False else 4)
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
    started = time.perf_counter()
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
            "rss_mb": analysed["rss_mb"], "floor_bytes": bare["seconds"], "floor_pickle": plain["seconds"],
            "floor_pickle_rss_mb": plain["rss_mb"], "status": analysed["status"], "verdict": analysed["verdict"],
            "culprits": analysed["culprits"], "expected_culprit": ranks - CULPRIT_OFFSET}


def run(workdir: Path) -> list[Figure]:
    report = measure(workdir)
    found = report["culprits"] == [report["expected_culprit"]]
    note = (f"{report['ranks']:,} dumps x {report['entries']:,} entries ({report['bytes'] / 1e9:.2f} GB), peak RSS "
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
