"""Acceptance 1 of issue 36: dumps PyTorch itself wrote (gloo, several processes) are analysed right, pickle and
JSON, and the verdicts agree with PyTorch's own analyser (``torch.distributed.flight_recorder``) where it runs.

PyTorch's analyser reads ``pg_config`` for every group's members; gloo leaves it empty (the analyser's KeyError on
gloo jobs), so for it alone the test writes in the members NCCL would have recorded. Its verdicts come as log
lines ("Not all ranks joining collective, sequence number: 3", "missing ranks: {2}", "Culprit rank 1; Error type:
SIZE_OR_SYNTAX_MISMATCH", "we missed FR dumps from ranks ({2})"), read here from its logger."""
import argparse
import logging
import pickle
import re

import pytest

from apps.flightrec.analysis import Analyser
from apps.flightrec.dumps import read_dump
from apps.flightrec.groups import GroupCatalogue
from apps.ranks.layout import ParallelSizes, RankLayout

from .conftest import WORLDS, rank_files

FORMATS = ("pickle", "json")


def catalogue(scenario: str) -> GroupCatalogue:
    if scenario != "skip":
        return GroupCatalogue(world_size=WORLDS[scenario])
    layout = RankLayout(ParallelSizes(tp=2, pp=1), 4)  # Megatron: TP 2 x DP 2
    return GroupCatalogue({kind: layout.groups(kind) for kind in ("tp", "dp", "pp")}, world_size=4)


def ours(folder, scenario: str, fmt: str) -> dict:
    analyser = Analyser(world_size=WORLDS[scenario], catalogue=catalogue(scenario))
    for rank, data in rank_files(folder, scenario, fmt).items():
        analyser.add_bytes(rank, data)
    return analyser.result()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_healthy_job_is_healthy(torch_dumps, fmt):
    result = ours(torch_dumps, "healthy", fmt)
    assert result["status"] == "healthy" and result["culprits"] == [] and result["ranks_dumped"] == 3
    assert result["process_groups"] == 2  # the default group and the pair


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_rank_that_skips_a_data_parallel_all_reduce_is_named_on_its_megatron_group(torch_dumps, fmt):
    result = ours(torch_dumps, "skip", fmt)
    assert result["status"] == "hang"
    assert [c["rank"] for c in result["culprits"]] == [3]
    assert result["collective"] == {"seq_id": 2, "op": "all_reduce", "sizes": [[16]], "dtypes": ["Float"], "p2p": False}
    group = result["process_group"]
    assert group["desc"] == "DATA_PARALLEL_GROUP" and group["ranks"] == [1, 3]  # gloo lists no members: the layout does
    assert group["megatron"] == {"kind": "dp", "index": 1, "label": "data-parallel group 1"}
    assert result["verdict"].startswith("rank 3 never entered all_reduce #2 of data-parallel group 1 (1 of 2 ranks waited")
    assert result["waiting"]["ranks"] == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_delayed_rank_never_entered_the_collective_its_peers_wait_in(torch_dumps, fmt):
    result = ours(torch_dumps, "late", fmt)
    assert result["status"] == "hang" and [c["rank"] for c in result["culprits"]] == [2]
    assert result["collective"]["seq_id"] == 3 and result["waiting"]["ranks"] == 2
    assert result["verdict"] == "rank 2 never entered all_reduce #3 of the default process group (2 of 3 ranks waited 6.0 s)"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_mismatched_size_names_the_odd_rank_and_both_sizes(torch_dumps, fmt):
    result = ours(torch_dumps, "size", fmt)
    assert result["status"] == "mismatch" and [c["rank"] for c in result["culprits"]] == [1]
    assert result["collective"]["seq_id"] == 3 and result["collective"]["sizes"] == [[4]]
    assert "sizes [[5]] instead of [[4]]" in result["verdict"]
    assert result["grid"]["rows"][0] == {"rank": 1, "cells": ["completed", "completed", "mismatch", "never entered"], "like": 0}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_dead_rank_leaves_no_dump_and_is_the_culprit(torch_dumps, fmt):
    result = ours(torch_dumps, "dead", fmt)
    assert result["status"] == "hang" and result["missing_dumps"] == [2] and result["ranks_dumped"] == 2
    assert [c["rank"] for c in result["culprits"]] == [2] and "left no dump" in result["culprits"][0]["reason"]
    assert result["collective"]["seq_id"] == 3


def test_pickle_and_json_read_the_same_entries_and_the_pickle_keeps_the_stack_frames(torch_dumps):
    pickled = read_dump(rank_files(torch_dumps, "size", "pickle")[1], rank=1)
    text = read_dump(rank_files(torch_dumps, "size", "json")[1], rank=1)
    assert pickled.version == text.version and pickled.version.startswith("2.")
    strip = [e.to_dict(frames=False) for e in pickled.entries]
    assert strip == [e.to_dict(frames=False) for e in text.entries]
    assert any(frame["name"] == "main" and frame["filename"].endswith("torch_dumps.py") for frame in pickled.entries[-1].frames)


# ---- PyTorch's own analyser --------------------------------------------------------------------------------------
def members(scenario: str, desc: str, rank: int) -> list[int]:
    if desc == "default_pg":
        return list(range(WORLDS[scenario]))
    if desc == "pair":
        return [0, 1]
    if desc.startswith("TENSOR"):
        return [0, 1] if rank < 2 else [2, 3]
    return [0, 2] if rank % 2 == 0 else [1, 3]


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def pytorch_verdict(folder, scenario: str) -> dict:
    """What torch.distributed.flight_recorder says: the first problem's kind, sequence id and ranks."""
    from torch.distributed.flight_recorder.components.builder import build_db

    details = {}
    for rank, data in rank_files(folder, scenario, "pickle").items():
        dump = pickle.loads(data)  # our own test's file, written by PyTorch a moment ago: trusted here, never in the app
        config = {name: {"name": name, "desc": desc, "ranks": str(members(scenario, desc, rank))}
                  for name, desc in {tuple(e["process_group"]) for e in dump["entries"]}}
        details[f"nccl_trace_rank_{rank}"] = {"host_name": f"host_rank{rank}", "rank": rank, "entries": dump["entries"],
                                              "version": dump["version"], "pg_config": config}
    version = next(iter(details.values()))["version"]
    args = argparse.Namespace(verbose=False, just_print_entries=False, allow_incomplete_ranks=True, mismatch_cap=10,
                              selected_ranks=None, pg_filters=None, print_stack_trace=False)
    handler, logger = Lines(), logging.getLogger("Flight Recorder")
    logger.addHandler(handler)
    try:
        build_db(details, args, version)
    finally:
        logger.removeHandler(handler)
    text = "\n".join(handler.lines)
    found = []  # the first problem it logs is its verdict
    if match := re.search(r"Not all ranks joining collective, sequence number: (\d+).*?missing ranks: \{([\d, ]+)\}", text, re.S):
        found.append((match.start(), {"kind": "missing", "seq": int(match[1]), "ranks": sorted(int(r) for r in match[2].split(","))}))
    if match := re.search(r"Collective sequence number: (\d+) has errors.*?Culprit rank (\d+); Error type: (\w+)", text, re.S):
        found.append((match.start(), {"kind": match[3], "seq": int(match[1]), "ranks": [int(match[2])]}))
    if match := re.search(r"missed FR dumps from ranks \(\{([\d, ]+)\}\)", text):
        found.append((match.start(), {"kind": "no dump", "ranks": sorted(int(r) for r in match[1].split(","))}))
    return min(found, key=lambda item: item[0])[1] if found else {"kind": "none"}


@pytest.mark.parametrize("scenario, kind", [("healthy", "none"), ("skip", "missing"), ("late", "missing"),
                                            ("size", "SIZE_OR_SYNTAX_MISMATCH"), ("dead", "no dump")])
def test_the_verdicts_agree_with_pytorchs_own_analyser(torch_dumps, scenario, kind):
    pytest.importorskip("torch.distributed.flight_recorder.components.builder")
    theirs = pytorch_verdict(torch_dumps, scenario)
    mine = ours(torch_dumps, scenario, "pickle")
    assert theirs["kind"] == kind
    if kind == "none":
        assert mine["status"] == "healthy"
        return
    assert sorted(c["rank"] for c in mine["culprits"]) == theirs["ranks"]
    if "seq" in theirs:
        assert mine["collective"]["seq_id"] == theirs["seq"]
    assert mine["status"] == ("mismatch" if kind == "SIZE_OR_SYNTAX_MISMATCH" else "hang")
