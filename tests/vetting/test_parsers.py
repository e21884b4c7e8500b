"""Parsers on real vetnode and dcgmi diag output; malformed input gets line-precise errors."""
from pathlib import Path

import pytest

from apps.vetting.parsers import detect, parse, parse_run_document
from apps.vetting.records import ParseError

DATA = Path(__file__).parent / "data"


def read(name):
    return (DATA / name).read_text()


def table(run):
    """{(host, local rank, eval): outcome}"""
    return {(r.host, r.local_rank, r.eval_name): r.outcome for r in run.results}


def test_vetnode_verbose_output_gives_every_rank_and_evaluation():
    run = parse(read("vetnode-0.1.5-verbose-srun.txt"))
    assert run.source == "vetnode" and run.hosts == ["nid001234", "nid001235"] and run.failed_hosts == ["nid001235"]
    assert len(run.results) == 8 * 3
    failed = [r for r in run.results if r.outcome == "fail"]
    assert {(r.host, r.rank, r.local_rank, r.eval_name) for r in failed} == {("nid001235", 4 + i, i, "Check GPU") for i in range(4)}
    gpu = next(r for r in failed if r.rank == 5)
    assert gpu.eval_type == "vetnode.evaluations.gpu_eval.GPUEval" and gpu.status == "FAILED"
    assert [g["temp"] for g in gpu.metrics["gpus"]] == [92, 93, 94, 95] and gpu.elapsed_s == pytest.approx(0.0458586, rel=1e-4)
    env = next(r for r in run.results if r.eval_name == "Env-Check" and r.rank == 0)
    assert env.metrics["found"]["FI_MR_CACHE_MONITOR"] == "userfaultfd" and env.metrics["missing"] == []
    assert next(r for r in run.results if r.eval_name == "Internet-Access").metrics == {}  # metrics=None


def test_vetnode_summary_alone_says_the_same_as_verbose():
    """Without --verbose only rank 0's table exists; one evaluation failed anywhere, so it is named."""
    plain, verbose = parse(read("vetnode-0.1.5-plain.txt")), parse(read("vetnode-0.1.5-verbose-srun.txt"))
    assert table(plain) == table(verbose)
    failed = next(r for r in plain.results if r.outcome == "fail")
    assert failed.rank is None and "the only evaluation that failed anywhere" in failed.message


def test_vetnode_without_verbose_and_several_failing_evaluations_says_which_it_could_be():
    text = read("vetnode-0.1.5-plain.txt").replace("Evaluating Env-Check: ✅  ✅  ✅  ✅", "Evaluating Env-Check: ✅  ✅  ✅  ❌")
    run = parse(text)
    [summary] = {r.message for r in run.results if r.host == "nid001235" and r.outcome == "fail"}
    assert summary == "failed one of: Check GPU, Env-Check (run vetnode with --verbose to know which)"
    assert table(run)[("nid001234", 0, "Check GPU")] == "pass"  # the table's ✅: nothing failed on that rank


def test_an_evaluation_that_raised_is_unknown_and_a_warning_not_a_cordon():
    run = parse(read("vetnode-0.1.5-internet-fail.txt"))
    unknown = [r for r in run.results if r.eval_name == "Internet-Access"]
    assert len(unknown) == 8 and {r.outcome for r in unknown} == {"unknown"}
    assert "Connection refused" in unknown[0].message and run.failed_hosts == ["nid001235"]
    assert run.warnings == ["Internet-Access raised ([Errno 111] Connection refused): vetnode shows ❓ and does not cordon the node for it"]


def test_legacy_vetnode_output_with_vetted_and_cordon_lines():
    run = parse(read("vetnode-0.0.8-legacy.txt"))
    assert run.source == "vetnode-legacy" and run.protocol_name == "Fixture Vetting"
    assert table(run) == {("nid001234", None, "Check GPU"): "pass", ("nid001234", None, "Internet-Access"): "pass",
                          ("nid001235", None, "Check GPU"): "fail", ("nid001235", None, "Internet-Access"): "pass"}
    bare = parse("some job output\nVetted: nid000001\nCordon: nid000002\nmore output\n")
    assert table(bare) == {("nid000001", None, "vetnode verdict"): "pass", ("nid000002", None, "vetnode verdict"): "fail"}


def by_host_and_eval(run):
    """{(host, eval): sorted outcomes of its ranks}"""
    out = {}
    for r in run.results:
        out.setdefault((r.host, r.eval_name), []).append(r.outcome)
    return {key: sorted(value) for key, value in out.items()}


def test_vetnode_0_0_8_unexpected_exceptions_say_why_the_node_was_cordoned():
    """Real vetnode 0.0.8 output: an evaluation that raised prints only the error and a traceback, then Cordon."""
    run = parse(read("vetnode-0.0.8-raised.txt"))
    assert run.source == "vetnode-legacy" and run.protocol_name == "Belvedere capture"
    assert run.failed_hosts == ["nid001234", "nid001235"]
    errors = {(r.host, r.eval_name): r for r in run.results if r.status == "ERROR"}
    # the traceback's vetnode/evaluations/internet_access.py frame names it; nid001234's result gives its name
    refused = errors[("nid001235", "Internet-Access")]
    assert refused.outcome == "fail" and refused.eval_type == "vetnode.evaluations.internet_access.InternetAccessEval"
    assert refused.message == "raised [Errno 111] Connection refused: vetnode cordoned the node for it"
    # GPUEval raised on both nodes: no node printed its name, its module says which evaluation it was
    for host in ("nid001234", "nid001235"):
        gpu = errors[(host, "unexpected exception in gpu_eval")]
        assert gpu.eval_type == "vetnode.evaluations.gpu_eval" and "'nvidia-smi'" in gpu.message and gpu.outcome == "fail"
    assert not [r for r in run.results if r.eval_name == "vetnode verdict"]  # each Cordon is explained by its errors
    # CUDAEval could not be loaded ("Skipped: CUDA"): vetnode never ran it and did not cordon for it
    cuda = [r for r in run.results if r.eval_name == "CUDA"]
    assert {r.host for r in cuda} == {"nid001234", "nid001235"} and {r.outcome for r in cuda} == {"unknown"}
    assert "No module named 'cuda'" in cuda[0].message
    assert run.warnings == ["CUDA raised on every rank (problem in vetnode.evaluations.cuda_eval - ModuleNotFoundError: "
                            "No module named 'cuda'): vetnode skips it and does not cordon the node for it"]
    assert by_host_and_eval(run)[("nid001234", "Internet-Access")] == ["pass"]


def test_vetnode_0_0_8_exception_without_its_traceback_is_named_by_its_place():
    """srun --error elsewhere: no traceback in the output; the node that printed a result at the same place names it."""
    text = "\n".join(line for line in read("vetnode-0.0.8-raised.txt").splitlines() if not line.startswith(" "))
    run = parse(text)
    errors = {(r.host, r.eval_name) for r in run.results if r.status == "ERROR"}
    assert errors == {("nid001234", "unexpected exception"), ("nid001235", "unexpected exception"), ("nid001235", "Internet-Access")}


def test_vetnode_0_0_13_an_evaluation_that_raised_on_every_rank_is_reported():
    """Real vetnode 0.0.13 output: a raised evaluation has no result line at all, only Skipped: and ❓, and vetnode
    says Vetted; nid001235's ranks printed nothing but Skipped lines."""
    run = parse(read("vetnode-0.0.13-raised.txt"))
    assert run.source == "vetnode-legacy" and run.failed_hosts == []
    table_ = by_host_and_eval(run)
    assert table_ == {("nid001234", "Internet-Access"): ["pass", "pass"], ("nid001234", "Check GPU"): ["unknown", "unknown"],
                      ("nid001235", "Check GPU"): ["unknown", "unknown"], ("nid001235", "Internet-Access"): ["unknown", "unknown"]}
    gpu = [r for r in run.results if r.eval_name == "Check GPU"]
    assert {r.rank for r in gpu if r.host == "nid001234"} == {0, 1}  # the ranks of the block's result lines
    assert all("[Errno 2] No such file or directory: 'nvidia-smi'" in r.message and "did not cordon" in r.message for r in gpu)
    assert run.warnings == [
        "Check GPU raised on every rank ([Errno 2] No such file or directory: 'nvidia-smi'): vetnode skips it and does not cordon the node for it",
        "Internet-Access raised on 2 of 4 ranks ([Errno 111] Connection refused): vetnode skips it and does not cordon the node for it"]


def test_vetnode_0_0_13_with_srun_labels_gives_each_rank_its_own():
    """srun -l: the label says whose Skipped line it is, however the ranks' lines interleave."""
    blocks, rank, lines = read("vetnode-0.0.13-raised.txt").splitlines(), 0, []
    for line in blocks:
        lines.append(f"{rank}: {line}")
        rank += line.startswith(("Vetted:", "Cordon:"))
    interleaved = sorted(lines, key=lambda line: int(line.split(":")[0]) % 2)  # ranks 0 and 2 first, then 1 and 3
    labelled = parse("\n".join(interleaved))
    assert by_host_and_eval(labelled) == by_host_and_eval(parse(read("vetnode-0.0.13-raised.txt")))
    assert by_host_and_eval(labelled)[("nid001235", "Internet-Access")] == ["unknown", "unknown"]
    assert {r.rank for r in labelled.results if r.host == "nid001234" and r.eval_name == "Check GPU"} == {0, 1}


@pytest.mark.parametrize("name", ["vetnode-0.1.5-raised-verbose-srun.txt", "vetnode-0.1.5-raised-plain.txt"])
def test_vetnode_0_1_5_an_evaluation_that_raised_is_unknown_on_each_rank_it_raised(name):
    """Real vetnode 0.1.5 output, with and without --verbose: Check GPU raised on every rank, Internet-Access on
    nid001235's ranks; nothing of either is dropped and nothing is a pass that raised."""
    run = parse(read(name))
    assert run.source == "vetnode" and run.failed_hosts == []
    assert by_host_and_eval(run) == {
        ("nid001234", "Check GPU"): ["unknown", "unknown"], ("nid001234", "Internet-Access"): ["pass", "pass"],
        ("nid001235", "Check GPU"): ["unknown", "unknown"], ("nid001235", "Internet-Access"): ["unknown", "unknown"]}
    assert all("'nvidia-smi'" in r.message for r in run.results if r.eval_name == "Check GPU")


def test_srun_labels_and_colours_are_understood():
    labelled = "\n".join(f"{i % 8}: \x1b[32m{line}\x1b[0m" for i, line in enumerate(read("vetnode-0.1.5-verbose-srun.txt").splitlines()))
    assert table(parse(labelled)) == table(parse(read("vetnode-0.1.5-verbose-srun.txt")))


@pytest.mark.parametrize("name, version, test, gpu", [
    ("dcgmi-diag-4x-r2-gpu2-memory-fail.json", "4.2.3", "memory", 2),
    ("dcgmi-diag-3x-r2-gpu2-memory-fail.json", "3.3.5", "GPU Memory", 2),
])
def test_dcgmi_diag_json_4x_and_3x(name, version, test, gpu):
    run = parse(read(name), host="nid000042")
    assert run.source == "dcgm-diag" and run.protocol_name == f"dcgmi diag (DCGM {version})" and run.hosts == ["nid000042"]
    [bad] = [r for r in run.results if r.outcome != "pass"]
    assert (bad.eval_name, bad.gpu, bad.status, bad.kind) == (test, gpu, "Fail", "dcgm_diag")
    assert bad.outcome == "critical"  # ISOLATE severity: take the GPU out
    assert bad.message.startswith("A memory mismatch was detected on GPU 2") and bad.message.endswith("(DCGM error 58)")
    per_gpu = [r for r in run.results if r.gpu is not None]
    assert {r.gpu for r in per_gpu} == {0, 1, 2, 3}


def test_dcgmi_diag_needs_the_host_and_reports_runtime_errors():
    with pytest.raises(ParseError, match="does not name its node"):
        parse(read("dcgmi-diag-4x-r2-gpu2-memory-fail.json"))
    with pytest.raises(ParseError, match="line 1: the diagnostic did not run: Error: unable to connect to the host engine"):
        parse('{"DCGM Diagnostic": {\n  "runtime_error": "Error: unable to connect to the host engine", "version": "4.2.3"}}',
              host="n1")


def test_detection():
    assert detect(read("vetnode-0.1.5-plain.txt")) == "vetnode" and detect(read("vetnode-0.0.8-legacy.txt")) == "vetnode-legacy"
    assert detect(read("dcgmi-diag-3x-r2-gpu2-memory-fail.json")) == "dcgm-diag" and detect('{"results": []}') == "json"
    with pytest.raises(ParseError, match="neither vetnode output"):
        detect("hello\nworld\n")


# ---------------------------------------------------------------------------------------------
# Malformed input: every problem at its line, nothing half-read


def problems(text, **kwargs):
    with pytest.raises(ParseError) as caught:
        parse(text, **kwargs)
    return caught.value.problems


def test_broken_result_lines_are_named_by_line_and_column():
    lines = read("vetnode-0.1.5-verbose-srun.txt").splitlines()
    lines[13] = lines[13].split(" metrics=")[0] + " metrics={'gpus': [{'id': '0000"  # cut off mid-value
    lines[20] = lines[20].replace("status=<EvalResultStatus.SUCCESS: 1>", "status")
    found = problems("\n".join(lines))
    assert [(line, message.split(":")[0]) for line, _, message in found] == [(14, "metrics"), (21, "expected field=value, found 'status elapsedtime=0.000153541'")]
    assert found[0][1] > 100  # the column of the cut value


def test_broken_tables_and_empty_uploads():
    text = read("vetnode-0.1.5-plain.txt")
    [(line, column, message)] = problems(text.replace("| nid001235 | ❌       |", "| nid001235 | X        |"))
    assert line == 11 and column == 15 and message == "nid001235 Rank-0: expected one of ✅ ❌ ⏭️ ❓, found 'X'"
    [(line, _, message)] = problems(text.replace("| nid001234 | ✅       | ✅       |", "| nid001234 | ✅       |"))
    assert line == 9 and message == "the row has 3 rank cells, the header 4"
    assert problems("   \n") == [(1, None, "the upload is empty")]
    assert problems("Igniting workers:  🚀  🚀 \n")[0][2].startswith("no vetnode results")


def test_broken_dcgm_json_points_at_the_line():
    text = read("dcgmi-diag-4x-r2-gpu2-memory-fail.json")
    [(line, column, message)] = problems(text.replace('"status" : "Fail"', '"status" : Fail', 1), host="n1")
    assert message.startswith("not JSON") and line == next(i for i, l in enumerate(text.splitlines(), 1) if '"Fail"' in l)
    [(line, _, message)] = problems(text.replace('"status" : "Fail"', '"status" : "Broken"', 1), host="n1")
    assert message == "memory: unknown status 'Broken' (expected Pass, Fail or Skip)" and line > 1


def test_the_run_document_reports_each_bad_result_by_path_and_line():
    text = """{
  "source": "health",
  "started": "2026-11-23T10:00:00Z",
  "results": [
    {"hostname": "nid000001", "check": "check_gpu_xid", "exit_code": 2, "message": "Xid 79: GPU fell off the bus"},
    {"hostname": "nid 2", "check": "x", "status": "OK"},
    {"hostname": "nid000003", "eval_name": "gpu", "status": "MAYBE"},
    {"hostname": "nid000004", "eval_name": "gpu", "status": 2, "rank": -1}
  ]
}"""
    with pytest.raises(ParseError) as caught:
        parse_run_document(text)
    assert [(line, message.split(":")[0]) for line, _, message in caught.value.problems] == [
        (6, "results.1.hostname"), (7, "results.2.status"), (8, "results.3.rank")]
    good = parse_run_document(text.replace('"nid 2"', '"nid000002"').replace('"MAYBE"', '"WARN"').replace('"rank": -1', '"rank": 1'))
    assert [(r.host, r.status, r.outcome, r.kind) for r in good.results] == [
        ("nid000001", "CRITICAL", "critical", "health"), ("nid000002", "OK", "pass", "health"),
        ("nid000003", "WARN", "warn", "health"), ("nid000004", "FAILED", "fail", "health")]
