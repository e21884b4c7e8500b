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
