"""Acceptance 2 of issue 36: a dump is untrusted input. A pickle that would run code is refused by name and its
payload never runs; truncated dumps and wrong shapes get clear errors; point-to-point pairs left unmatched (which
gloo does not record, so these dumps are NCCL-shaped, as PyTorch's NCCL backend writes them) are found."""
import json
import os
import pickle

import pytest

from apps.flightrec.analysis import Analyser
from apps.flightrec.dumps import DumpRefused, plain_loads, rank_from_filename, read_dump


class Payload:
    """Unpickling this runs ``os.system`` (``__reduce__``): it would create ``marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def entry(record_id, seq, op="nccl:all_reduce", *, pg=("0", "default_pg"), sizes=((4,),), state="completed",
          p2p_seq=0, is_p2p=False, created=1_700_000_000_000_000_000):
    return {"record_id": record_id, "pg_id": 0, "process_group": pg, "collective_seq_id": seq, "p2p_seq_id": p2p_seq,
            "op_id": record_id + 1, "profiling_name": op, "time_created_ns": created + record_id * 1_000_000,
            "input_sizes": [list(s) for s in sizes], "input_dtypes": ["Float"] * len(sizes),
            "output_sizes": [list(s) for s in sizes], "output_dtypes": ["Float"] * len(sizes), "state": state,
            "time_discovered_started_ns": None, "time_discovered_completed_ns": None, "frames": [], "is_p2p": is_p2p,
            "retired": state == "completed", "timeout_ms": 600_000}


def dump(entries, *, ranks="[0, 1, 2]", version="2.10"):
    return {"version": version, "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": ranks}},
            "pg_status": {}, "entries": entries}


def test_a_pickle_that_would_run_code_is_refused_by_name_and_its_payload_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({"version": "2.10", "entries": [Payload(marker)]})
    with pytest.raises(DumpRefused, match=r"refused: the dump asks for posix\.system"):
        read_dump(evil, rank=0)
    with pytest.raises(DumpRefused, match="asks for posix.system"):
        Analyser().add_bytes(0, evil)
    assert not marker.exists()
    # the same payload through the standard unpickler would have run: the test can fail
    pickle.loads(evil)
    assert marker.exists()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_every_global_is_refused_whatever_the_protocol(tmp_path, protocol):
    for thing in (set, frozenset, complex, Payload(tmp_path / "x")):
        data = pickle.dumps({"version": "2.10", "entries": [thing]}, protocol=protocol)
        with pytest.raises(DumpRefused, match="refused: the dump asks for"):
            plain_loads(data)
    assert not (tmp_path / "x").exists()


def test_plain_data_builds_as_the_standard_unpickler_builds_it():
    data = {"version": "2.10", "a": [1, 2.5, None, True, b"x", ("t", 1)], "n": -(2**70)}
    for protocol in (3, 4, 5):  # protocol 2 writes bytes through _codecs.encode: refused like any global
        assert plain_loads(pickle.dumps(data, protocol=protocol)) == data


def test_a_truncated_pickle_and_a_truncated_json_say_so():
    whole = pickle.dumps(dump([entry(0, 1)]))
    with pytest.raises(DumpRefused, match="truncated"):
        read_dump(whole[: len(whole) // 2], rank=0)
    text = json.dumps(dump([entry(0, 1)])).encode()
    with pytest.raises(DumpRefused, match="truncated"):
        read_dump(text[:-7], rank=0)
    with pytest.raises(DumpRefused, match="empty"):
        read_dump(b"", rank=0)


@pytest.mark.parametrize("body, words", [
    ({"entries": []}, "no version"),
    ({"version": "3.0", "entries": []}, "format version '3.0' is not read here"),
    ({"version": "2.10", "entries": {}}, "entries is a dict, not a list"),
    ({"version": "2.10", "entries": [{"record_id": 0}]}, r"entries\[0\] is not a Flight Recorder entry"),
    ({"version": "2.10", "entries": [entry(0, "x")]}, "collective_seq_id must be a whole number, not str"),
    ([1, 2], "is a list, not a Flight Recorder dump"),
])
def test_wrong_shapes_are_refused_naming_what_and_where(body, words):
    for data in (pickle.dumps(body), json.dumps(body).encode()):
        with pytest.raises(DumpRefused, match=words):
            Analyser().add_bytes(0, data)


def test_not_a_dump_at_all():
    with pytest.raises(DumpRefused, match="neither a pickle"):
        read_dump(b"hello", rank=0)


def test_the_rank_in_pytorchs_file_names():
    assert rank_from_filename("/tmp/nccl_trace_rank_12") == 12
    assert rank_from_filename("dumps/nccl_trace_rank_7.json") == 7
    assert rank_from_filename("nccl_trace_rank_") is None


# ---- point-to-point (NCCL-shaped: gloo records no send/recv) ------------------------------------------------------
def pipeline_dumps(*, recv_posted: bool, recv_size=(4,)):
    """Three pipeline stages 0 -> 1 -> 2 over the default group: two micro-batches forward; the second send from
    stage 1 to 2 is in flight, and stage 2 posted (or not) the matching recv."""
    def send(rid, p2p, src, dst, done=True, size=(4,)):
        return entry(rid, 1, f"nccl:send {src}->{dst}", sizes=(size,), p2p_seq=p2p, is_p2p=True,
                     state="completed" if done else "started")

    def recv(rid, p2p, dst, src, done=True, size=(4,)):
        return entry(rid, 1, f"nccl:recv {dst}<-{src}", sizes=(size,), p2p_seq=p2p, is_p2p=True,
                     state="completed" if done else "started")

    first = [entry(0, 1)]
    rank0 = first + [send(1, 1, 0, 1), send(2, 2, 0, 1)]
    rank1 = first + [recv(1, 1, 1, 0), send(2, 2, 1, 2), recv(3, 3, 1, 0), send(4, 4, 1, 2, done=False)]
    rank2 = first + [recv(1, 1, 2, 1, size=recv_size)] + ([recv(2, 2, 2, 1, done=False)] if recv_posted else [])
    return {0: dump(rank0), 1: dump(rank1), 2: dump(rank2)}


def test_a_send_whose_recv_was_never_posted_names_the_receiver():
    analyser = Analyser(world_size=3)
    for rank, body in pipeline_dumps(recv_posted=False).items():
        analyser.add_bytes(rank, pickle.dumps(body))
    result = analyser.result()
    assert result["status"] == "hang" and [c["rank"] for c in result["culprits"]] == [2]
    assert result["collective"]["p2p"] is True
    assert "rank 2 never received send #2 from rank 1" in result["verdict"]


def test_a_p2p_size_mismatch_is_a_mismatch():
    analyser = Analyser(world_size=3)
    for rank, body in pipeline_dumps(recv_posted=True, recv_size=(8,)).items():
        analyser.add_bytes(rank, json.dumps(body).encode())
    result = analyser.result()
    assert result["status"] == "mismatch" and [c["rank"] for c in result["culprits"]] == [2]
    assert "receives [[8]]" in result["verdict"]


def test_matched_pairs_in_flight_are_not_a_problem():
    analyser = Analyser(world_size=3)
    for rank, body in pipeline_dumps(recv_posted=True).items():
        analyser.add_bytes(rank, pickle.dumps(body))
    assert analyser.result()["status"] == "healthy"


def test_a_rank_given_twice_is_refused():
    analyser = Analyser()
    analyser.add_bytes(0, pickle.dumps(dump([entry(0, 1)])))
    with pytest.raises(DumpRefused, match="rank 0 was given twice"):
        analyser.add_bytes(0, pickle.dumps(dump([entry(0, 1)])))
