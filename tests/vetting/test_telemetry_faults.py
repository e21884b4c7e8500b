"""Hardware faults found in running jobs' telemetry raise node health (issue 35, item 5): the job page called the NIC
retrying 30 % of its packets and the hot GPU critical while saying "All 128 nodes are healthy now". They reach node
health through apps.core.node_findings (the saturation app fills it), as the GPU-health counters do."""
from datetime import timedelta

import pytest
from django.utils import timezone

NIC = {"host": "nid000473", "nic": "hsn2", "kinds": ["retries"], "retry_fraction": 0.31,
       "reason": "hsn2 on nid000473: 31 % of packets retried, its peers < 1 %"}
HOT = {"level": "gpu", "host": "nid000474", "gpu": 2, "signal": "temperature", "cause": "running hot",
       "reason": "rank 9, nid000474 GPU 2: temperature 11 °C above its peers for 42 min, running hot"}


def running(job_id, stragglers, *, state="RUNNING"):
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation

    start = timezone.now() - timedelta(hours=2)
    job = Job.objects.create(cluster=Cluster.objects.get_or_create(name="alps")[0], job_id=job_id, name="megatron",
                             user_name="alice", account="a-llm01", state=state, submit_time=start, start_time=start, gpus=8,
                             node_list=["nid000473", "nid000474"])
    JobSaturation.objects.create(job=job, status="ready", score=64.0, computed=timezone.now(), stragglers=stragglers)
    return job


@pytest.mark.django_db
def test_a_nic_retrying_and_a_hot_gpu_make_their_nodes_suspect_once():
    from apps.vetting.models import NodeHealth, NodeHealthEvent
    from apps.vetting.selectors import node_states
    from apps.vetting.services import TELEMETRY_ACTOR, node_act, telemetry_findings_evaluate

    running(1200123, [{"level": "nic", "host": "nid000473", "nic": "hsn2", "signal": "nic_retries", "network": [NIC]}, HOT])
    running(1200124, [{"level": "nic", "host": "nid000473", "nic": "hsn2", "signal": "nic_retries", "network": [NIC]}])
    running(1200125, [HOT | {"host": "nid000999"}], state="COMPLETED")  # an ended job speaks no more
    assert telemetry_findings_evaluate() == {"nodes": 2, "raised": 2}
    assert node_states() == {"nid000473": "suspect", "nid000474": "suspect"}
    nic = NodeHealth.objects.get(host="nid000473")
    assert nic.reason.startswith("Telemetry: hsn2 on nid000473: 31 % of packets retried")
    assert "alps/1200123" in nic.reason and "alps/1200124" in nic.reason
    hot = NodeHealth.objects.get(host="nid000474")
    assert "running hot" in hot.reason and hot.severity == "critical"
    assert NodeHealthEvent.objects.filter(actor=TELEMETRY_ACTOR).count() == 2
    # idempotent: the same evidence raises nothing again
    assert telemetry_findings_evaluate()["raised"] == 0
    # staff clear the NIC's node: the evidence from before the clear does not bring it back
    node_act("nid000473", "clear", actor="sam", reason="reseated the cable")
    assert telemetry_findings_evaluate()["raised"] == 0
    assert NodeHealth.objects.get(host="nid000473").state == "healthy"


@pytest.mark.django_db
def test_the_evaluation_beat_runs_it():
    from apps.vetting.models import NodeHealth
    from apps.vetting.tasks import evaluate_rules_task

    running(1200126, [HOT])
    outcome = evaluate_rules_task.apply().get()
    assert outcome["telemetry_faults"] == {"nodes": 1, "raised": 1}
    assert NodeHealth.objects.get(host="nid000474").state == "suspect"
