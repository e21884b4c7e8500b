"""Flight Recorder dumps of a Megatron-LM job as PyTorch's NCCL backend writes them on a timeout (format 2.10,
pickle, no stack frames), for the demo and the bench: every rank runs the same step again and again (six TP
all-reduces, a pipeline send and recv, the DP gradient all-reduce) and one rank goes wrong in the last step:

* ``never_entered``: the culprit never enters the last data-parallel all-reduce; its DP peers wait in it;
* ``mismatch``: the culprit's last TP all-reduce has another size (a code change that reshaped one rank's tensor).

Plain Python: no Django.
"""
from __future__ import annotations

import pickle
from typing import Iterator

from apps.ranks.layout import ParallelSizes, RankLayout

DESCS = {"tp": "TENSOR_MODEL_PARALLEL_GROUP", "pp": "PIPELINE_MODEL_PARALLEL_GROUP", "dp": "DATA_PARALLEL_GROUP"}
STEP_NS = 450_000_000  # one training step: 0.45 s
OP_NS = 50_000_000


def megatron_dumps(world: int, entries: int, *, tp: int, pp: int, culprit: int, kind: str = "never_entered",
                   end_ns: int, timeout_ms: int = 600_000) -> Iterator[tuple[int, bytes]]:
    """(rank, pickled dump) for every rank; the last step starts ``timeout_ms`` before ``end_ns`` (the dump)."""
    layout = RankLayout(ParallelSizes(tp=tp, pp=pp), world)
    groups = {kind_: layout.groups_array(kind_) for kind_ in ("tp", "pp", "dp")}
    names, index_of = {}, {}
    for group_kind in ("tp", "pp", "dp"):
        index_of[group_kind] = {int(r): i for i, row in enumerate(groups[group_kind]) for r in row}
        for index in range(groups[group_kind].shape[0]):
            names[(group_kind, index)] = str(len(names) + 1)
    steps = entries // 9 + 1
    start_ns = end_ns - timeout_ms * 1_000_000 - (steps - 1) * STEP_NS
    world_text = str(list(range(world)))
    for rank in range(world):
        coords = layout.coords(rank)
        pg = {k: names[(k, index_of[k][rank])] for k in ("tp", "pp", "dp")}
        config = {"0": {"name": "0", "desc": "default_pg", "ranks": world_text}}
        for group_kind in ("tp", "pp", "dp"):
            config[pg[group_kind]] = {"name": pg[group_kind], "desc": DESCS[group_kind],
                                      "ranks": str(groups[group_kind][index_of[group_kind][rank]].tolist())}
        rows, record, seqs, p2p_seq = [], 0, {"tp": 0, "dp": 0}, 0
        stage, after, before = coords["pp"], (coords["pp"] + 1) % pp, (coords["pp"] - 1) % pp
        plan = [("tp", "nccl:all_reduce")] * 6 + ([("pp", f"nccl:send {stage}->{after}"), ("pp", f"nccl:recv {stage}<-{before}")]
                                                 if pp > 1 else []) + [("dp", "nccl:all_reduce")]
        stuck = None
        for step in range(steps):
            last = step == steps - 1
            for position, (group_kind, op) in enumerate(plan):
                if last and kind == "never_entered" and group_kind == "dp" and rank == culprit:
                    continue
                created = start_ns + step * STEP_NS + position * OP_NS
                size = [1 << 22] if group_kind == "dp" else [1, 4096, 5120] if group_kind == "pp" else [4096, 5120]
                if last and kind == "mismatch" and group_kind == "tp" and rank == culprit and position == 5:
                    size = [4096, 2560]
                if group_kind == "pp":
                    p2p_seq += 1
                    seq, p2p = seqs["tp"], p2p_seq
                else:
                    seqs[group_kind] += 1
                    seq, p2p = seqs[group_kind], 0
                # the dump is taken while the last step's DP all-reduce (or the mismatched TP one) waits
                waiting = last and (group_kind == "dp" or (kind == "mismatch" and group_kind == "tp" and position == 5))
                waiting = waiting or stuck is not None
                if waiting and stuck is None:
                    stuck = record
                rows.append({"record_id": record, "pg_id": int(pg[group_kind]),
                             "process_group": (pg[group_kind], DESCS[group_kind]), "collective_seq_id": seq,
                             "p2p_seq_id": p2p, "op_id": record + 1, "profiling_name": op, "time_created_ns": created,
                             "input_sizes": [size], "input_dtypes": ["BFloat16"], "output_sizes": [size],
                             "output_dtypes": ["BFloat16"], "state": "started" if waiting else "completed",
                             "time_discovered_started_ns": created + 1_000_000,
                             "time_discovered_completed_ns": None if waiting else created + 40_000_000,
                             "frames": [], "is_p2p": group_kind == "pp", "retired": not waiting, "timeout_ms": timeout_ms})
                record += 1
        yield rank, pickle.dumps({"version": "2.10", "pg_config": config, "pg_status": {}, "comm_lib_version": "2.21.5",
                                  "entries": rows[-entries:]}, protocol=4)
