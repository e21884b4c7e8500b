"""apps.ranks.logparse: sizes and the rank → host map read from Megatron-LM + NCCL output.

The logs in data/ are fixtures written to look like real output (reference: topology-megatron.md
§2.4–2.6):

* megatron_2n_tp2_pp2_dp2.log: 2 GH200 nodes × 4 GPUs, TP=2 PP=2 DP=2, plain `srun` (no labels),
  every line stamped by `ts`, NCCL_DEBUG=INFO with the world communicator and the TP/DP/PP
  sub-communicators (ncclCommSplit) of every rank, TransformerEngine warnings in ANSI colours, two
  of them between rank 0's argument lines;
* megatron_128n_tp4_pp8_dp16_srun_l.log: an excerpt of a 128-node job (W=512, TP=4 PP=8 DP=16),
  `srun -l` labels, other ranks' warnings between rank 0's argument lines, the world communicator's
  init lines of all 512 ranks and the sub-communicators of some;
* broken_*.log: one task's own output file, a hand-edited log whose TP sizes disagree, a requeued
  job appended to one file (one node replaced), rank 0's dump garbled by another rank's output.

No Django: the module is pure.
"""
import re
import time
from pathlib import Path

import pytest

from apps.ranks import logparse
from apps.ranks.logparse import DEFAULT_ORDER, TP_PP_DP_ORDER, LogParseError, ParsedLog, parse_megatron_log

DATA = Path(__file__).resolve().parent / "data"
TWO_NODES = DATA / "megatron_2n_tp2_pp2_dp2.log"
ALPS_128 = DATA / "megatron_128n_tp4_pp8_dp16_srun_l.log"
ALPS_HOSTS = ([f"nid{n:06d}" for n in range(6000, 6048)] + [f"nid{n:06d}" for n in range(6112, 6176)]
              + [f"nid{n:06d}" for n in range(6300, 6316)])


def read(path: Path) -> str:
    return path.read_text()


def block_map(hosts: list[str], world_size: int, per_node: int = 4) -> list[dict]:
    return [{"rank": r, "host": hosts[r // per_node], "local_rank": r % per_node} for r in range(world_size)]


def args_dump(**values) -> list[str]:
    """A Megatron argument dump (name + dots to 48 + value, sorted case-insensitively)."""
    lines = sorted((f"  {name} {'.' * (48 - len(name))} {value}" for name, value in values.items()), key=str.lower)
    return ["------------------------ arguments ------------------------", *lines,
            "-------------------- end of arguments ---------------------"]


def world_line(world: int, dp: int, cp: int, tp: int, pp: int) -> str:
    return (f"using world size: {world}, data-parallel size: {dp}, context-parallel size: {cp}, hierarchical "
            f"context-parallel sizes: None, tensor-model-parallel size: {tp}, pipeline-model-parallel size: {pp}")


def comm_line(host: str, rank: int, nranks: int, local: int, nnodes: int = 2, local_ranks: int = 4,
              pid: int = 0) -> str:
    pid = pid or 1000 + rank
    return (f"{host}:{pid}:{pid} [{local}] NCCL INFO comm 0x55d3{rank:08x} rank {rank} nRanks {nranks} "
            f"nNodes {nnodes} localRanks {local_ranks} localRank {local} MNNVL 0")


def small_log(tp=2, pp=2, world=8, hosts=("nid000001", "nid000002"), extra=()) -> list[str]:
    dp = world // (tp * pp)
    lines = [world_line(world, dp, 1, tp, pp)]
    lines += args_dump(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, context_parallel_size=1,
                       data_parallel_size=dp, world_size=world, num_layers=16, use_tp_pp_dp_mapping=False,
                       virtual_pipeline_model_parallel_size=None)
    lines += [comm_line(hosts[r // 4], r, world, r % 4, nnodes=len(hosts)) for r in range(world)]
    return lines + list(extra)


# --------------------------------------------------------------------------------------------
# The realistic logs
# --------------------------------------------------------------------------------------------
def test_two_node_job_sizes_and_rank_map():
    parsed = parse_megatron_log(read(TWO_NODES))
    assert isinstance(parsed, ParsedLog)
    assert parsed.sizes == {"tp": 2, "pp": 2, "cp": 1, "ep": 1, "etp": 2, "dp": 2, "order": DEFAULT_ORDER,
                            "num_layers": 16, "world_size": 8}
    assert parsed.ranks == block_map(["nid006437", "nid006438"], 8)
    assert parsed.complete
    assert parsed.warnings == []
    assert parsed.sources == ["arguments", "world_size_line", "initialized_lines", "nccl_init", "net_ofi"]


def test_128_node_job_with_srun_labels():
    parsed = parse_megatron_log(read(ALPS_128))
    assert parsed.sizes == {"tp": 4, "pp": 8, "cp": 1, "ep": 1, "etp": 4, "dp": 16, "order": DEFAULT_ORDER,
                            "num_layers": 80, "world_size": 512}
    assert parsed.ranks == block_map(ALPS_HOSTS, 512)
    assert parsed.warnings == []
    assert "srun_labels" in parsed.sources and "nccl_init" in parsed.sources
    # §2.6: replica 1's last stage (pp_rank 7) is ranks 452-455 on node index 113.
    by_rank = {entry["rank"]: entry for entry in parsed.ranks}
    assert {by_rank[r]["host"] for r in range(452, 456)} == {ALPS_HOSTS[113]}


def test_sub_communicators_are_not_taken_for_global_ranks():
    text = read(TWO_NODES)
    # The fixture really holds sub-communicator lines whose communicator rank is a small number on
    # the *second* node (e.g. rank 1 of the DP group {5, 7}); they must not place global rank 1 there.
    assert re.search(r"nid006438:\d+:\d+ \[\d\] NCCL INFO comm 0x[0-9a-f]+ rank 1 nRanks 2 ", text)
    parsed = parse_megatron_log(text)
    assert {"rank": 1, "host": "nid006437", "local_rank": 1} in parsed.ranks

    # The same in a minimal log: only nRanks == world size counts.
    sub = [comm_line("nid000002", 0, 4, 0, pid=2004), comm_line("nid000002", 1, 4, 1, pid=2005),
           comm_line("nid000002", 1, 2, 0, nnodes=2, local_ranks=1, pid=2006)]
    parsed = parse_megatron_log("\n".join(small_log(extra=sub)))
    assert parsed.ranks == block_map(["nid000001", "nid000002"], 8)
    assert parsed.warnings == []


def test_windows_line_ends_ansi_colours_and_timestamps_change_nothing():
    expected = parse_megatron_log(read(ALPS_128))
    text = read(ALPS_128)
    assert parse_megatron_log(text.replace("\n", "\r\n")) == expected
    coloured = "\n".join(f"\x1b[2m[2026-11-21 10:00:{i % 60:02d}]\x1b[0m \x1b[36m{line}\x1b[0m"
                         for i, line in enumerate(text.split("\n")))
    assert parse_megatron_log(coloured) == expected
    # timestamps after the label (the program stamps its own lines)
    stamped = re.sub(r"^( *\d+: )", r"\g<1>2026-11-21T10:00:01.123Z ", text, flags=re.M)
    assert parse_megatron_log(stamped) == expected
    assert parse_megatron_log(text.encode()) == expected


def test_lines_of_other_ranks_inside_the_argument_dump_are_skipped():
    lines = small_log()
    start = lines.index("------------------------ arguments ------------------------")
    lines[start + 3:start + 3] = [
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:129: UserWarning: CUDA initialization",
        "nid000002:1006:1006 [2] NCCL INFO NET/OFI Selected Provider is cxi (found 4 nics)",
        "  warnings.warn(",
        "iteration       10/  500000 | consumed samples:          640",
    ]
    parsed = parse_megatron_log("\n".join(lines))
    assert parsed.sizes["tp"] == 2 and parsed.sizes["world_size"] == 8
    assert "net_ofi" in parsed.sources


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------
def test_order_vpp_experts_and_stage_layers_from_the_dump():
    lines = [world_line(64, 2, 2, 4, 4)]
    lines += args_dump(tensor_model_parallel_size=4, pipeline_model_parallel_size=4, context_parallel_size=2,
                       expert_model_parallel_size=8, expert_tensor_parallel_size=1, data_parallel_size=2,
                       virtual_pipeline_model_parallel_size=2, num_layers=30, decoder_first_pipeline_num_layers=6,
                       decoder_last_pipeline_num_layers=8, use_tp_pp_dp_mapping=True, world_size=64,
                       num_layers_per_virtual_pipeline_stage=None)
    parsed = parse_megatron_log("\n".join(lines))
    assert parsed.sizes == {"tp": 4, "pp": 4, "cp": 2, "ep": 8, "etp": 1, "dp": 2, "vpp": 2, "order": TP_PP_DP_ORDER,
                            "num_layers": 30, "first_stage_layers": 6, "last_stage_layers": 8, "world_size": 64}
    assert parsed.ranks == []
    assert any("no NCCL init lines" in warning for warning in parsed.warnings)


def test_vpp_from_layers_per_virtual_stage():
    lines = args_dump(tensor_model_parallel_size=1, pipeline_model_parallel_size=4, world_size=8, num_layers=32,
                      virtual_pipeline_model_parallel_size=None, num_layers_per_virtual_pipeline_stage=2)
    assert parse_megatron_log("\n".join(lines)).sizes["vpp"] == 4


def test_only_the_world_size_line():
    parsed = parse_megatron_log("0: " + world_line(16, 2, 2, 2, 2) + "\n")
    assert parsed.sizes == {"tp": 2, "pp": 2, "cp": 2, "dp": 2, "world_size": 16}
    assert parsed.sources == ["world_size_line"]
    assert any("no Megatron argument dump" in warning for warning in parsed.warnings)


def test_older_world_size_line_shapes():
    old = "using world size: 8, data-parallel-size: 4, tensor-model-parallel size: 2, pipeline-model-parallel size: 1 "
    assert parse_megatron_log(old).sizes == {"tp": 2, "pp": 1, "dp": 4, "world_size": 8}
    glued = ("using world size: 8, data-parallel size: 1, context-parallel size: 2, hierarchical context-parallel "
             "sizes: Nonetensor-model-parallel size: 2, encoder-tensor-model-parallel size: 0, pipeline-model-parallel "
             "size: 2, encoder-pipeline-model-parallel size: 0")
    assert parse_megatron_log(glued).sizes == {"tp": 2, "pp": 2, "cp": 2, "dp": 1, "world_size": 8}


# --------------------------------------------------------------------------------------------
# The rank map
# --------------------------------------------------------------------------------------------
def _drop(text: str, pattern: str) -> str:
    return "\n".join(line for line in text.split("\n") if not re.search(pattern, line))


def test_missing_ranks_are_a_warning():
    text = _drop(read(ALPS_128), r"^(508|509|510|511): .*NCCL INFO")
    parsed = parse_megatron_log(text)
    assert len(parsed.ranks) == 508 and not parsed.complete
    assert "NCCL lines give ranks for 508 of 512 ranks (missing: 508–511)" in parsed.warnings


def test_srun_labels_place_ranks_whose_world_init_line_is_missing():
    world_init = r"NCCL INFO (ncclCommInitRank )?comm 0x[0-9a-f]+ rank \d+ n[Rr]anks 512"
    text = _drop(read(ALPS_128), r"^(508|509|510|511): .*" + world_init)
    parsed = parse_megatron_log(text)
    assert parsed.ranks == block_map(ALPS_HOSTS, 512)
    assert any(warning.startswith("ranks 508–511 have no NCCL init line") for warning in parsed.warnings)


def test_srun_labels_that_are_not_ranks_are_ignored():
    # torchrun: one srun task per node; the label is the node, not the rank.
    lines = small_log()
    lines = [f"{int(m.group(1)) // 4}: {line}" if (m := re.search(r" rank (\d+) nRanks 8 ", line)) else line
             for line in lines]
    parsed = parse_megatron_log("\n".join(lines))
    assert parsed.ranks == block_map(["nid000001", "nid000002"], 8)
    assert any("srun labels are not the Megatron ranks" in warning for warning in parsed.warnings)


def test_older_nccl_init_lines_give_the_cuda_device():
    lines = small_log()[:-8] + [
        f"nid00000{1 + r // 4}:{900 + r}:{900 + r} [{r % 4}] NCCL INFO comm 0x7f{r:04x} rank {r} nranks 8 cudaDev "
        f"{r % 4} busId {r % 4}01000 - Init COMPLETE" for r in range(8)]
    assert parse_megatron_log("\n".join(lines)).ranks == block_map(["nid000001", "nid000002"], 8)


def test_host_names_that_are_not_unique_are_refused():
    # containers that all call themselves "localhost": two ranks in one GPU slot
    lines = small_log()[:-8] + [comm_line("localhost", r, 8, r % 4, pid=3000 + r) for r in range(8)]
    with pytest.raises(LogParseError, match="^ranks 0 and 4 both have local rank 0 on localhost"):
        parse_megatron_log("\n".join(lines))


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
def test_no_argument_dump_and_no_world_size_line():
    with pytest.raises(LogParseError) as error:
        parse_megatron_log(read(DATA / "broken_task5_only.log"))
    assert str(error.value).startswith(
        "no Megatron argument dump and no 'using world size' line: run with the default logging of rank 0 "
        "(the '---- arguments ----' block)")
    with pytest.raises(LogParseError, match="no Megatron argument dump"):
        parse_megatron_log("")


def test_arguments_and_world_size_line_disagree():
    with pytest.raises(LogParseError) as error:
        parse_megatron_log(read(DATA / "broken_tp_mismatch.log"))
    assert str(error.value).startswith(
        "the arguments say tensor_model_parallel_size=4 but the 'using world size' line says 8 (lines 130 and 11)")


def test_a_rank_on_two_hosts():
    with pytest.raises(LogParseError) as error:
        parse_megatron_log(read(DATA / "broken_requeued_two_runs.log"))
    message = str(error.value)
    assert message.startswith("rank 16 appears on two hosts (nid000005 and nid000009, lines ")
    assert "and 3 more ranks too" in message and "upload the output of one run" in message

    lines = small_log(world=32, tp=4, pp=2, hosts=[f"nid{n:06d}" for n in range(1, 9)])
    lines.append(comm_line("nid000009", 17, 32, 1, nnodes=8, pid=7777))
    first = 1 + next(i for i, line in enumerate(lines) if " rank 17 nRanks 32 " in line)
    with pytest.raises(LogParseError) as error:
        parse_megatron_log("\n".join(lines))
    assert str(error.value).startswith(
        f"rank 17 appears on two hosts (nid000005 and nid000009, lines {first} and {len(lines)}):")


def test_garbled_argument_line_is_named_by_its_line_number():
    with pytest.raises(LogParseError) as error:
        parse_megatron_log(read(DATA / "broken_garbled_arguments.log"))
    assert str(error.value).startswith("line 130: tensor_model_parallel_size is '2/usr/local/lib/python3.12/")

    filler = [f"nid000001:1:1 [0] NCCL INFO Channel {i % 24:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read"
              for i in range(4200)]
    lines = filler + small_log()
    number = lines.index(next(line for line in lines if "pipeline_model_parallel_size ." in line))
    lines[number] = lines[number].replace(" 2", " 2]lmost")
    with pytest.raises(LogParseError, match=rf"^line {number + 1:,}: pipeline_model_parallel_size is '2\]lmost'"):
        parse_megatron_log("\n".join(lines))
    assert number + 1 > 4000  # the message writes it as "line 4,2xx"


@pytest.mark.parametrize("bad, message", [
    ("using world size: , data-parallel size: 2", r"^line 1: the 'using world size' line has no world size"),
    ("using world size: 8, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: x2, "
     "pipeline-model-parallel size: 2", r"^line 1: the 'using world size' line gives tensor-model-parallel size 'x2'"),
    ("using world size: 8, data-parallel size: 2, context-parallel size: 1, tensor-model-par",
     r"^line 1: the 'using world size' line has no tensor- or pipeline-model-parallel size"),
])
def test_malformed_world_size_lines(bad, message):
    with pytest.raises(LogParseError, match=message):
        parse_megatron_log(bad + "\n")


def test_nccl_rank_not_below_nranks():
    lines = small_log()
    lines[-1] = comm_line("nid000002", 9, 8, 3)
    with pytest.raises(LogParseError, match=rf"^line {len(lines)}: NCCL says rank 9 in a communicator of nRanks 8"):
        parse_megatron_log("\n".join(lines))


def test_garbled_nccl_init_line_is_skipped_with_a_warning():
    lines = small_log()
    assert lines[-1][:66].endswith(" rank 7 nRank")
    lines[-1] = lines[-1][:66] + "nid000001:1001:1001 [1] NCCL INFO Connected all rings"
    parsed = parse_megatron_log("\n".join(lines))
    assert len(parsed.ranks) == 7
    assert any(w.startswith("unreadable NCCL init lines skipped") and str(len(lines)) in w for w in parsed.warnings)


def test_sizes_that_do_not_multiply_to_the_world_size():
    lines = args_dump(tensor_model_parallel_size=4, pipeline_model_parallel_size=3, world_size=32)
    with pytest.raises(LogParseError, match=r"world size 32 is not a multiple of tp·pp·cp = 4·3·1 = 12"):
        parse_megatron_log("\n".join(lines))
    lines = args_dump(tensor_model_parallel_size=4, pipeline_model_parallel_size=2, world_size=32, data_parallel_size=2)
    with pytest.raises(LogParseError, match=r"data_parallel_size=2 but world_size / \(tp·pp·cp\) = 32 / 8 = 4"):
        parse_megatron_log("\n".join(lines))


def test_two_runs_with_different_arguments():
    first = args_dump(tensor_model_parallel_size=2, pipeline_model_parallel_size=2, world_size=8)
    second = args_dump(tensor_model_parallel_size=4, pipeline_model_parallel_size=2, world_size=8)
    disagree = r"^two argument dumps disagree: tensor_model_parallel_size is 2 on line \d+ and 4"
    with pytest.raises(LogParseError, match=disagree):
        parse_megatron_log("\n".join(first + ["training ..."] + second))


def test_initialized_line_disagrees_with_the_arguments():
    lines = small_log() + ["> initialized tensor model parallel with size 4"]
    with pytest.raises(LogParseError,
                       match=r"^the arguments say tensor_model_parallel_size=2 but the '> initialized' line"):
        parse_megatron_log("\n".join(lines))


def test_cut_argument_dump_falls_back_to_the_world_size_line():
    lines = small_log()
    end = lines.index("-------------------- end of arguments ---------------------")
    cut = [line for line in lines[:end] if "tensor_model_parallel_size" not in line and "world_size" not in line]
    parsed = parse_megatron_log("\n".join(cut))
    assert parsed.sizes["tp"] == 2 and parsed.sizes["world_size"] == 8
    assert any("has no '---- end of arguments ----' line" in warning for warning in parsed.warnings)


def test_logs_over_the_size_limit_are_refused(monkeypatch):
    assert logparse.MAX_LOG_BYTES == 200 * 1024 * 1024
    monkeypatch.setattr(logparse, "MAX_LOG_BYTES", 1000)
    with pytest.raises(LogParseError, match=r"^the log is .* MB, more than the .* MB limit: upload its beginning"):
        parse_megatron_log("x" * 1001)
    with pytest.raises(LogParseError, match="limit"):
        parse_megatron_log(b"x" * 1001)
    assert parse_megatron_log(world_line(8, 2, 1, 2, 2)).sizes["world_size"] == 8  # under the limit


def test_log_parse_error_is_a_value_error():
    assert issubclass(LogParseError, ValueError)


# --------------------------------------------------------------------------------------------
# Speed (smoke test: printed, not asserted)
# --------------------------------------------------------------------------------------------
def test_speed_on_a_generated_20_mb_log(capsys):
    base = read(ALPS_128)
    hosts = ALPS_HOSTS
    chunk = []
    for step in range(200):
        for rank in range(0, 512, 3):
            host, local = hosts[rank // 4], rank % 4
            peer = f"{(rank + 1) % 512}[{(local + 1) % 4}]"
            chunk.append(f"{rank:3d}: {host}:{201000 + rank}:{201000 + rank} [{local}] NCCL INFO Channel "
                         f"{step % 24:02d}/0 : {rank}[{local}] -> {peer} via P2P/CUMEM/read")
        chunk.append(f"  0:  [2026-11-21 10:04:19] iteration {step:>8}/  250000 | consumed samples: {1024 * step:>12} "
                     "| elapsed time per iteration (ms): 9109.4 | lm loss: 1.089E+01 | loss scale: 1.0 |")
    filler = "\n".join(chunk) + "\n"
    text = base + filler * (20 * 1024 * 1024 // len(filler) + 1)
    assert len(text) > 20 * 1024 * 1024
    started = time.perf_counter()
    parsed = parse_megatron_log(text)
    elapsed = time.perf_counter() - started
    assert parsed.complete
    with capsys.disabled():
        print(f"\nlogparse: {len(text) / 1024 / 1024:.1f} MB, {text.count(chr(10)):,} lines in {elapsed:.2f} s")
