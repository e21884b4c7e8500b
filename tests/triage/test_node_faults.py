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
