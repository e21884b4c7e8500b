"""Hardware faults found in telemetry reach the triage inbox (issue 35, item 5): once per node and kind, not once per
job; the item lists the jobs that saw it and resolves when it stops; the node's own item does not repeat it."""
import pytest

from apps.triage.models import TriageItem
from apps.triage.services import triage_sync
from tests.vetting.test_telemetry_faults import HOT, NIC, running

NIC_STRAGGLER = {"level": "nic", "host": "nid000473", "nic": "hsn2", "signal": "nic_retries", "network": [NIC]}


@pytest.mark.django_db
def test_a_fault_seen_by_two_jobs_is_one_item_listing_both_and_resolves_when_it_stops(make_user, client):
    from apps.vetting.services import telemetry_findings_evaluate

    first = running(1200123, [NIC_STRAGGLER, HOT])
    running(1200124, [NIC_STRAGGLER])
    telemetry_findings_evaluate()  # the nodes are suspect now, by these faults
    triage_sync()
    faults = {item.key: item for item in TriageItem.objects.filter(kind="node_fault")}
    assert set(faults) == {"node_fault:nid000473/nic_retries", "node_fault:nid000474/hot_gpu"}
    nic = faults["node_fault:nid000473/nic_retries"]
    assert [job["job"] for job in nic.data["jobs"]] == ["alps/1200123", "alps/1200124"]
    assert nic.title == "nid000473: NIC retrying packets, seen by 2 jobs"
    assert "31 % of packets retried" in nic.detail and nic.url == "/vetting/nodes/nid000473/"
    assert faults["node_fault:nid000474/hot_gpu"].severity == "critical"
    # the suspect state these faults raised is not a second item for the same node
    assert not TriageItem.objects.filter(kind="failing_node").exists()
    client.force_login(make_user("sam", is_staff=True))
    page = client.get("/staff/triage/").content.decode()
    assert 'data-job="alps/1200123"' in page and 'data-job="alps/1200124"' in page

    # the hot GPU's job ends: its fault stops and its item resolves; the NIC's, still seen by 1200124, stays open
    first.state = "COMPLETED"
    first.save()
    triage_sync()
    hot = TriageItem.objects.get(key="node_fault:nid000474/hot_gpu")
    assert hot.state == "resolved" and hot.note == "cleared at source"
    nic = TriageItem.objects.get(key="node_fault:nid000473/nic_retries")
    assert nic.state == "new" and [job["job"] for job in nic.data["jobs"]] == ["alps/1200124"]
    # the node stays suspect until staff clear it: now its own item says so
    assert TriageItem.objects.filter(kind="failing_node", key="failing_node:nid000474", state="new").exists()


@pytest.mark.django_db
def test_what_a_gpu_held_down_cost_the_jobs_is_on_its_node_item_not_on_the_jobs():
    """The wait for a GPU whose clock the hardware holds down is lost to hardware (apps.saturation.waste): the node's
    item carries it, summed over the jobs that waited, and no job is called wasteful for it."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.saturation.models import JobSaturation

    now = timezone.now()
    clock = {"level": "gpu", "host": "nid000474", "gpu": 1, "signal": "sm_clock", "deviation": -0.5, "duration_s": 3600.0,
             "start": (now - timedelta(hours=1)).isoformat(), "end": now.isoformat(),
             "reason": "rank 5, nid000474 GPU 1: SM clock 50 % below its peers for 60 min"}
    job = running(1200130, [clock])
    rows = [{"host": host, "gpu": gpu, "busy": 1.0, "score": 64.0} for host in ("nid000473", "nid000474") for gpu in range(4)]
    JobSaturation.objects.filter(job=job).update(per_gpu=rows, steady_found=True, steady_start=now - timedelta(hours=1),
                                                 scored_until=now)
    triage_sync()
    item = TriageItem.objects.get(key="node_fault:nid000474/throttled_gpu")
    # 7 GPUs waited half of the steady hour, over the 2 h the job has run: 7 × 2 h × 0.5 × (1 h / 1 h steady) = 7.0
    assert item.gpu_hours_lost == pytest.approx(7.0, abs=0.01)
    assert "it has cost 7.0 GPU-hours of the jobs' time so far (alps/1200130 7.0)" in item.detail
    assert not TriageItem.objects.filter(kind="wasteful_job").exists()  # 0 lost by the job itself: no verdict
