"""The job page's vetting panel: the vetting of the job's nodes before its start and their state now, kept
apart; which check failed with what it measured; whether this job is affected (issue 17).

Results are stored with the app's own service (``run_store``) or posted by the job's vetnode wrapper through
the import API; node states move with ``node_act`` and a Slurm backend that runs no Slurm."""
from datetime import timedelta
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from django.utils import timezone

from apps.core.panels import job_panels
from apps.vetting.scontrol import SlurmNodeActions
from apps.vetting.assessment import AFTER, BEFORE, DURING, CheckResult, NodeState, assess, evidence
from apps.vetting.panel import context, summary
from apps.vetting.records import Result, Run
from apps.vetting.services import node_act, run_store

A, B, C = "nid001234", "nid001235", "nid001236"
DATA = Path(__file__).parent / "data"
GPU_EVAL = "vetnode.evaluations.gpu_eval.GPUEval"
NCCL_EVAL = "vetnode.evaluations.nccl_lib_eval.NcclLibEval"
NO_SLURM = SlurmNodeActions(lambda command, timeout: "test: no Slurm asked", dry_run=False)


@pytest.fixture
def cluster(topology):
    from apps.jobs.models import Cluster

    return Cluster.objects.create(name="alps")


def make_job(cluster, *, start, end=None, hosts=(A, B, C), job_id=5151):
    from apps.jobs.models import Job, node_search_text

    return Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a-llm01",
                              state="COMPLETED" if end else "RUNNING", submit_time=start - timedelta(minutes=5), start_time=start,
                              end_time=end, node_list=list(hosts), node_count=len(hosts), node_search=node_search_text(hosts))


def gpu_idle(host, when, *, hot=False, cluster):
    temps = [35, 36, 71 if hot else 37, 36]
    gpus = [{"id": f"00000009:0{i + 1}:00.0", "temp": t, "memory_total": 97871, "memory_used": 0} for i, t in enumerate(temps)]
    run_store(Run(source="json", started=when, results=[
        Result(host=host, eval_name="gpu idle", eval_type=GPU_EVAL, kind="vetnode", status="FAILED" if hot else "SUCCESS",
               outcome="fail" if hot else "pass", local_rank=rank, metrics={"gpus": gpus}, thresholds={"max_temp": 50})
        for rank in range(4)]), cluster=cluster)


def nccl(host, when, gbs, *, cluster):
    run_store(Run(source="json", started=when, results=[
        Result(host=host, eval_name="nccl internode", eval_type=NCCL_EVAL, kind="vetnode", status="FAILED" if gbs < 16.11 else "SUCCESS",
               outcome="fail" if gbs < 16.11 else "pass", local_rank=0, metrics={"bandwidth": f"{gbs:.2f} GB/s"})]), cluster=cluster)


def test_the_panel_is_registered_for_the_job_page(db):
    panel = next(panel for panel in job_panels() if panel.key == "vetting")
    assert (panel.title, panel.order, panel.template) == ("Node vetting", 50, "vetting/_job_section.html")
    assert panel.context is context and panel.summary is summary


def test_a_check_that_failed_before_the_start_names_the_check_its_value_and_the_node_to_exclude(cluster):
    start = timezone.now() - timedelta(hours=2)
    gpu_idle(A, start - timedelta(days=3), hot=True, cluster=cluster)
    gpu_idle(B, start - timedelta(days=2), cluster=cluster)
    nccl(A, start - timedelta(days=1), 22.4, cluster=cluster)  # another check passing later does not clear 'gpu idle'
    gpu_idle(C, start - timedelta(days=9), hot=True, cluster=cluster)  # older than a week: not this job's vetting
    job = make_job(cluster, start=start)

    found = summary(job)
    [fact] = found.facts
    assert (fact.label, fact.value, fact.level) == ("Vetting", "1 of 3 nodes passed before start", "warning")
    assert "1 not checked" in fact.detail and "failed: nid001234" in fact.detail and "now: all healthy" in fact.detail
    [finding] = found.findings
    assert finding.level == "warning" and finding.source == "vetting" and finding.link == "#panel-vetting"
    assert finding.title.startswith("nid001234 failed 'gpu idle' before this job started (GPU 2 at 71 °C, limit 50 °C;")
    assert finding.action == "Resubmit excluding nid001234 (--exclude=nid001234)"

    values = context(job)["vetting"]
    assert values["level"] == "warning" and values["verdict"] == "Affects this job: it started on failing nodes: nid001234 failed 'gpu idle'."
    assert [(f["host"], f["check"], f["phase"], f["affects"]) for f in values["before_failures"]] == [(A, "gpu idle", BEFORE, True)]
    assert values["since_failures"] == [] and values["states"] == []
    assert values["unchecked_before"] == [C]
    assert values["now_words"] == "All 3 nodes are healthy now."

    html = render_to_string("vetting/_job_section.html", context(job))
    before, now = html.split('id="vetting-now"')
    assert 'id="vetting-before-failures"' in before and "GPU 2 at 71 °C, limit 50 °C" in before and "affects this job" in before
    assert "All 3 nodes are healthy now." in now and "affects this job" not in now


def test_a_later_pass_of_the_same_check_clears_the_node(cluster):
    start = timezone.now() - timedelta(hours=2)
    gpu_idle(A, start - timedelta(days=3), hot=True, cluster=cluster)
    gpu_idle(A, start - timedelta(days=1), cluster=cluster)
    for host in (B, C):
        gpu_idle(host, start - timedelta(days=1), cluster=cluster)
    job = make_job(cluster, start=start)
    found = summary(job)
    assert found.findings == []
    assert (found.facts[0].value, found.facts[0].level) == ("3 of 3 nodes passed before start", "ok")
    assert context(job)["vetting"]["verdict"] == "Nothing found that affects this job."


def test_a_check_failing_while_the_job_runs_is_critical_with_its_bandwidth_against_the_threshold(cluster):
    start = timezone.now() - timedelta(hours=3)
    for host in (A, B, C):
        nccl(host, start - timedelta(hours=5), 22.0, cluster=cluster)
    nccl(B, start + timedelta(hours=1), 9.5, cluster=cluster)
    nccl(B, start + timedelta(hours=2), 9.1, cluster=cluster)
    job = make_job(cluster, start=start)

    found = summary(job)
    assert found.facts[0].value == "3 of 3 nodes passed before start" and found.facts[0].level == "critical"
    [finding] = found.findings
    assert finding.level == "critical"
    assert finding.title.startswith("nid001235 failed 'nccl internode' while this job runs (9.5 GB/s measured, threshold 16.1 GB/s "
                                    "(vetnode's default min_bandwidth 15 GB/s);")
    assert finding.action == "Resubmit excluding nid001235 (--exclude=nid001235)"
    values = context(job)["vetting"]
    [row] = values["since_failures"]
    assert (row["host"], row["phase"], row["affects"], row["times"]) == (B, DURING, True, 2)
    assert values["before_failures"] == [] and values["checked_since"] == 1
    assert values["level"] == "critical" and values["verdict"] == "Affects this job: while it runs, nid001235 failed 'nccl internode'."


def test_a_failure_and_a_repair_after_the_job_ended_do_not_affect_it(cluster, settings):
    settings.VETTING_ACTIONS_DRY_RUN = False
    start, end = timezone.now() - timedelta(hours=5), timezone.now() - timedelta(hours=1)
    for host in (A, B, C):
        gpu_idle(host, start - timedelta(hours=12), cluster=cluster)
    gpu_idle(A, end + timedelta(minutes=30), hot=True, cluster=cluster)
    node_act(A, "drain", actor="ops", reason="GPU 2 at 71 °C idle", backend=NO_SLURM)
    node_act(A, "repair", actor="ops", reason="RMA: thermal pad on GPU 2", backend=NO_SLURM)
    job = make_job(cluster, start=start, end=end)

    found = summary(job)
    assert found.findings == []
    [fact] = found.facts
    assert fact.value == "3 of 3 nodes passed before start" and fact.level == "ok"
    assert fact.detail == "now: nid001234 in repair (after the job: not affecting it)"
    values = context(job)["vetting"]
    [row] = values["since_failures"]
    assert (row["host"], row["phase"], row["affects"]) == (A, AFTER, False)
    assert "after this job ended" in row["words"] and "not affecting this job" in row["words"]
    [state] = values["states"]
    assert (state["host"], state["state"], state["relation"], state["affects"]) == (A, "in_repair", AFTER, False)
    assert values["verdict"] == "Nothing found that affects this job. Later findings on its nodes do not affect it."
    assert values["now_words"] == "2 of 3 nodes are healthy now; 1 in repair."

    now_html = render_to_string("vetting/_job_section.html", context(job)).split('id="vetting-now"')[1]
    assert now_html.count("not affecting this job") == 2 and "affects this job" not in now_html
    assert "RMA: thermal pad on GPU 2" in now_html


def test_a_node_already_drained_at_the_start_affects_the_job(cluster, settings):
    settings.VETTING_ACTIONS_DRY_RUN = False
    node_act(C, "drain", actor="ops", reason="fan failure", backend=NO_SLURM)
    job = make_job(cluster, start=timezone.now())
    found = summary(job)
    [finding] = found.findings
    assert finding.level == "warning" and finding.title.startswith("nid001236 was already drained when this job started")
    assert "fan failure" in finding.title and finding.action == "Resubmit excluding nid001236 (--exclude=nid001236)"
    assert found.facts[0].value == "no check before start" and found.facts[0].level == "info"


def test_the_allocations_own_vetting_counts_as_at_the_start_not_during(job, api_client):
    """belvedere-vetnode.sh runs inside the job, so its results carry a time after the start: the job started on
    the node it failed, which is a warning, not a failure during the job."""
    from apps.jobs.services import job_token_issue

    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {job_token_issue(job, 'test')}")
    response = api_client.post("/api/v1/vetting/import/?protocol=alps-ml-vetting",
                               data=(DATA / "vetnode-0.1.5-verbose-srun.txt").read_bytes(), content_type="text/plain")
    assert response.status_code == 201
    found = summary(job)
    [finding] = found.findings
    assert finding.level == "warning" and finding.title.startswith("nid001235 failed 'Check GPU' before this job started (GPU 3 at 95 °C")
    values = context(job)["vetting"]
    assert [f["phase"] for f in values["before_failures"]] == ["start"] and values["since_failures"] == []
    assert values["runs"][0]["url"] == f"/vetting/runs/{response.json()['run']}/" and values["runs"][0]["failed"] == 1


def test_a_job_without_nodes_has_no_panel_content(cluster):
    from apps.jobs.models import Job

    job = Job.objects.create(cluster=cluster, job_id=77, user_name="alice", state="PENDING", submit_time=timezone.now())
    assert summary(job) is None and context(job) == {"vetting": None}
    assert "the job has no nodes yet" in render_to_string("vetting/_job_section.html", context(job))


# The decisions themselves, on plain rows (no database).

NOW = timezone.now().replace(microsecond=0)


def test_assess_separates_phases_and_keeps_the_worst_result_of_a_run():
    start, end = NOW - timedelta(hours=6), NOW - timedelta(hours=2)
    before = start - timedelta(days=1)
    bad = [CheckResult(A, before, "memory", "fail", gpu=1), CheckResult(A, before, "memory", "critical", gpu=2, message="DCGM error 58"),
           CheckResult(B, start + timedelta(hours=1), "nhc", "critical", message="Xid 79: GPU fell off the bus"),
           CheckResult(C, end + timedelta(minutes=5), "nhc", "fail", message="check_fs_used /tmp: 99 % used")]
    latest = {(A, "memory"): before, (B, "nhc"): before, (C, "nhc"): before}
    states = [NodeState(B, "suspect", start + timedelta(hours=2), "rule"), NodeState(C, "in_repair", end + timedelta(minutes=30))]
    result = assess([A, B, C], start=start, end=end, now=NOW, latest_before=latest, bad=bad, states=states)
    assert [(f.host, f.phase, f.affects, f.check.outcome) for f in result.failures] == [
        (B, DURING, True, "critical"), (A, BEFORE, True, "critical"), (C, AFTER, False, "fail")]
    assert result.failures[1].evidence == "GPU 2: DCGM error 58"
    assert result.failed_before == [A] and result.passed_before == 2
    by_host = {state.host: state for state in result.states}
    assert (by_host[B].relation, by_host[B].affects) == (DURING, False)  # suspect: the job keeps running on it
    assert (by_host[C].relation, by_host[C].affects) == (AFTER, False)
    assert result.verdict() == ("critical", "Affects this job: while it ran, nid001235 failed 'nhc'.")


def test_the_verdict_groups_nodes_by_the_check_they_failed():
    start = NOW - timedelta(hours=1)
    hosts = [f"nid{n:06d}" for n in range(1, 7)]
    moment = start - timedelta(hours=3)
    bad = [CheckResult(host, moment, "nccl", "fail") for host in hosts[:5]] + [CheckResult(hosts[5], moment, "gpu idle", "fail")]
    latest = {(host, name): moment for host in hosts for name in ("nccl", "gpu idle")}
    result = assess(hosts, start=start, end=None, now=NOW, latest_before=latest, bad=bad)
    assert result.verdict() == ("warning", "Affects this job: it started on failing nodes: 5 nodes failed 'nccl' (nid000001, nid000002, "
                                           "nid000003, nid000004 and 1 more); nid000006 failed 'gpu idle'.")
    assert result.before_words() == "0 of 6 nodes passed their latest checks before the start; 6 nodes failed."


def test_evidence_reads_the_results_own_bandwidth_threshold_as_vetnode_does():
    check = CheckResult(A, NOW, "nccl", "fail", eval_type=NCCL_EVAL, bandwidth_gbs=19.0, thresholds={"min_bandwidth": "20 GB/s"})
    assert evidence(check) == "19 GB/s measured, threshold 21.5 GB/s (min_bandwidth 20 GB/s)"
    assert evidence(CheckResult(A, NOW, "x", "fail", status="FAILED", metrics={"items": [1]})) == "status FAILED"
