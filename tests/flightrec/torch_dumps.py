"""One rank of a scenario, run by PyTorch itself (CPU build, gloo): it writes the rank's Flight Recorder dump as
PyTorch writes it, pickle (``_dump_fr_trace``) and JSON (``_dump_fr_trace_json``), into OUTDIR/SCENARIO/.

    python tests/flightrec/torch_dumps.py OUTDIR

imports torch once and forks every rank of every scenario at once (torch starts no thread before the fork), so
all the dumps take about one import and one timeout. Scenarios:

* ``healthy`` (3 ranks): three all-reduces and a sub-group's, all completed;
* ``skip`` (4 ranks, Megatron TP 2 x DP 2, groups made as Megatron makes them, with their ``group_desc``): rank 3
  skips its second data-parallel all-reduce; rank 1, its DP peer, waits until the timeout;
* ``late`` (3 ranks): rank 2 is delayed before the third all-reduce; at the dump it has not entered it;
* ``size`` (3 ranks): rank 1's third all-reduce has 5 elements where its peers' have 4 (a mismatched size);
* ``dead`` (3 ranks): rank 2 hangs in Python before the third all-reduce and leaves no dump.

Each rank's watchdog thread dumps one second after the scenario's last collective began, while a hung collective
is still in flight (its timeout is 6 s), as NCCL's watchdog does on a timeout; so every scenario ends about a
second after torch is imported. gloo records collectives only (no send/recv) and leaves ``state`` at
"scheduled": an entry in flight is one not ``retired``.
"""
import datetime
import os
import sys
import threading
import time

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=6)  # the collective timeout: longer than the dump's delay, so a hang is still pending
DUMP_AFTER_S = 1.0  # the watchdog's dump, after the scenario's last collective began


def dump(outdir: str, rank: int) -> None:
    pickled = c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=True, onlyActive=False)
    text = c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    for name, data in ((f"nccl_trace_rank_{rank}", pickled), (f"nccl_trace_rank_{rank}.json", text)):
        path = os.path.join(outdir, name)
        with open(path + ".part", "wb") as handle:
            handle.write(data if isinstance(data, bytes) else data.encode())
        os.replace(path + ".part", path)


def watchdog(outdir: str, rank: int, *, dumps: bool, expected: int) -> None:
    """As NCCL's watchdog does on a timeout with TORCH_NCCL_DUMP_ON_TIMEOUT=1: dump while the collectives are still
    in flight (gloo has no such watchdog; this thread plays it), then end the process. A rank that ``dumps=False``
    is dead or hung in Python: it leaves no file."""
    def fire():
        if dumps:
            dump(outdir, rank)
        # no rank ends before every rank dumped: an ending peer closes its sockets, which fails (and retires) the
        # collectives the others still wait in (the dead rank's watchdog waits too, holding its sockets open)
        for _ in range(100):
            if len([n for n in os.listdir(outdir) if n.endswith(".json")]) >= expected:
                break
            time.sleep(0.05)
        os._exit(0)

    timer = threading.Timer(DUMP_AFTER_S, fire)
    timer.daemon = True
    timer.start()


def main(scenario: str, rank: int, world: int, outdir: str) -> None:
    outdir = os.path.join(outdir, scenario)
    store = dist.FileStore(os.path.join(outdir, "store"), world)
    dist.init_process_group("gloo", rank=rank, world_size=world, store=store, timeout=TIMEOUT)
    four = torch.ones(4)
    if scenario == "skip":
        # Megatron's order tp-cp-ep-dp-pp with TP 2, DP 2: TP groups [0, 1], [2, 3]; DP groups [0, 2], [1, 3]
        tp = [dist.new_group(g, group_desc="TENSOR_MODEL_PARALLEL_GROUP") for g in ([0, 1], [2, 3])][rank // 2]
        dp = [dist.new_group(g, group_desc="DATA_PARALLEL_GROUP") for g in ([0, 2], [1, 3])][rank % 2]
    if scenario == "healthy":
        pair = dist.new_group([0, 1], group_desc="pair")
    dist.all_reduce(four)  # every rank here: the watchdogs start together
    watchdog(outdir, rank, dumps=not (scenario == "dead" and rank == 2), expected=world - (scenario == "dead"))
    try:
        if scenario == "healthy":
            dist.all_reduce(four)
            if rank < 2:
                dist.all_reduce(torch.ones(3), group=pair)
            dist.all_reduce(four)
        elif scenario == "skip":
            dist.all_reduce(torch.ones(8), group=tp)
            dist.all_reduce(torch.ones(16), group=dp)
            dist.all_reduce(torch.ones(8), group=tp)
            if rank != 3:
                dist.all_reduce(torch.ones(16), group=dp)
        elif scenario == "late":
            dist.all_reduce(four)
            if rank == 2:
                time.sleep(DUMP_AFTER_S * 3)
            dist.all_reduce(four)
        elif scenario == "size":
            dist.all_reduce(four)
            dist.all_reduce(torch.ones(5 if rank == 1 else 4))
            dist.all_reduce(four)
        elif scenario == "dead":
            dist.all_reduce(four)
            if rank == 2:
                time.sleep(DUMP_AFTER_S * 3)  # hung in Python; its watchdog leaves no dump
            dist.all_reduce(four)
    except RuntimeError as exc:  # a closed connection or a timeout: the dump was taken before it
        print(f"{scenario} rank {rank}: {str(exc)[:120]}", file=sys.stderr)
    time.sleep(DUMP_AFTER_S * 4)  # wait for the watchdog, which ends the process


SCENARIOS = {"healthy": 3, "skip": 4, "late": 3, "size": 3, "dead": 3}


def run_all(outdir: str) -> None:
    children = []
    for scenario, world in SCENARIOS.items():
        os.makedirs(os.path.join(outdir, scenario), exist_ok=True)
        for rank in range(world):
            pid = os.fork()
            if pid == 0:
                try:
                    main(scenario, rank, world, outdir)
                finally:
                    os._exit(3)
            children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    torch.set_num_threads(1)
    # The first dump with stack traces loads the symboliser (about a second); load it once here, before the fork,
    # without recording anything in the Flight Recorder's buffer.
    from torch.utils._traceback import CapturedTraceback

    CapturedTraceback.format_all([CapturedTraceback.extract(cpp=True)])
    run_all(sys.argv[1])
