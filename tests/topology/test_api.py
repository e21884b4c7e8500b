"""Topology REST API: summary, node list and detail, placement, discovery."""
import pytest

from apps.topology.generator import generate
from apps.topology.models import Node, TopologyRevision
from apps.topology.services import topology_apply
from tests.topology.conftest import SMALL


@pytest.fixture
def stored_small(db):
    topology_apply(generate(SMALL), source="test", prune=True)


@pytest.fixture
def alice(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    return api_client


def test_node_list_filters_by_group_and_switch(stored_small, alice):
    body = alice.get("/api/v1/topology/nodes/?group=1").json()
    assert body["count"] == 8 and {node["group"] for node in body["results"]} == {1}
    on_switch = alice.get("/api/v1/topology/nodes/?switch=1.3").json()["results"]
    assert [node["hostname"] for node in on_switch] == ["nid000013", "nid000014", "nid000015", "nid000016"]
    assert alice.get("/api/v1/topology/nodes/?group=1&switch=3").json()["count"] == 4
    error = alice.get("/api/v1/topology/nodes/?switch=x").json()
    assert error["errors"][0]["field"] == "switch"


def test_node_detail_lists_nics_with_their_switches_and_gpus(stored_small, alice):
    node = alice.get("/api/v1/topology/nodes/nid000006/").json()
    assert node["xname"] == "x1000c1s0b1n0" and node["group"] == 0
    assert [(nic["name"], nic["mac"], nic["group"], nic["switch"], nic["port"]) for nic in node["nics"]] == [
        ("hsn0", "02:00:00:00:00:81", 0, 2, 1),
        ("hsn1", "02:00:00:00:00:c1", 0, 3, 1),
    ]
    assert node["gpus"] == [{"index": 0, "nic": "hsn0"}, {"index": 1, "nic": "hsn1"}]
    assert alice.get("/api/v1/topology/nodes/nid999999/").status_code == 404


def test_placement_accepts_a_hostlist_and_a_list(stored_small, alice):
    by_expression = alice.post("/api/v1/topology/placement/", {"nodes": "nid[000001,000009]"}, format="json").json()
    by_list = alice.post("/api/v1/topology/placement/", {"nodes": ["nid000001", "nid000009"]}, format="json").json()
    assert by_expression == by_list
    assert by_list["groups"] == 2 and by_list["pairs"]["mean_hops"] == 2.0


@pytest.mark.parametrize("payload, field, text", [
    ({"nodes": ["nid000001", "nid424242"]}, "nodes", "unknown node 'nid424242'"),
    ({"nodes": "nid[0001-"}, "nodes", "not a valid hostlist expression"),
    ({"nodes": 42}, "nodes", "expected a list of hostnames"),
    ({}, "nodes", "This field is required."),
])
def test_placement_input_errors_name_the_problem(stored_small, alice, payload, field, text):
    response = alice.post("/api/v1/topology/placement/", payload, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == field
    assert text in response.json()["errors"][0]["message"]


DISCOVERY = {
    "hostname": "nid000777", "xname": "x1002c0s0b0n0", "gpus": 4, "gpu_model": "GH200",
    "nics": [{"name": f"hsn{i}", "mac": f"02:00:00:00:10:{0x40 * i:02x}"} for i in range(4)],
}


def test_discovery_needs_staff_or_the_permission(stored_small, api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    response = api_client.post("/api/v1/topology/discovery/", DISCOVERY, format="json")
    assert response.status_code == 403
    assert "topology.add_node" in response.json()["detail"]
    assert not Node.objects.filter(hostname="nid000777").exists()

    from django.contrib.auth.models import Permission

    service = make_user("svc-discovery")
    service.user_permissions.add(Permission.objects.get(codename="add_node", content_type__app_label="topology"))
    api_client.force_authenticate(service)
    response = api_client.post("/api/v1/topology/discovery/", DISCOVERY, format="json")
    assert response.status_code == 200, response.json()
    node = Node.objects.get(hostname="nid000777")
    assert node.group.number == 2 and sorted(node.nics.values_list("switch__index", flat=True)) == [0, 1, 2, 3]
    again = api_client.post("/api/v1/topology/discovery/", DISCOVERY, format="json").json()
    assert again["changed"] is False and again["revision"] is None


def test_discovery_batch_is_all_or_nothing_with_positioned_errors(stored_small, api_client, make_user):
    api_client.force_authenticate(make_user("root", is_staff=True))
    good = dict(DISCOVERY)
    bad = dict(DISCOVERY, hostname="nid000778", nics=[{"name": "hsn0", "mac": "02:00:01:00:00:00"}])
    revisions = TopologyRevision.objects.count()
    response = api_client.post("/api/v1/topology/discovery/", {"records": [good, bad]}, format="json")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == "records.1.nics.0.mac" and "02:00:00" in error["message"]
    assert not Node.objects.filter(hostname__in=["nid000777", "nid000778"]).exists()
    assert TopologyRevision.objects.count() == revisions


def test_discovery_rejects_hostile_hostnames(stored_small, api_client, make_user):
    api_client.force_authenticate(make_user("root", is_staff=True))
    response = api_client.post("/api/v1/topology/discovery/", dict(DISCOVERY, hostname="nid1 <script>"), format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "hostname"


def test_discovery_without_gpu_model_keeps_the_known_one(stored_small, api_client, make_user):
    api_client.force_authenticate(make_user("root", is_staff=True))
    record = {"hostname": "nid000001", "nics": [{"name": "hsn0", "mac": "02:00:00:00:00:00"}, {"name": "hsn1", "mac": "02:00:00:00:00:40"}]}
    before = Node.objects.get(hostname="nid000001")
    assert before.gpu_model == "GH200" and before.xname
    api_client.post("/api/v1/topology/discovery/", record, format="json")
    after = Node.objects.get(hostname="nid000001")
    assert (after.gpu_model, after.xname) == (before.gpu_model, before.xname)
