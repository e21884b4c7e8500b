"""Authorization matrix: a team's namespaces and requests are its members' and staff's; anyone else is told
they do not exist (404); only staff decide, and where a team names approvers, only they do.

Roles: alice and mia (a-llm01, the owners), bob (b-moe02), lena (staff, a-llm01's named approver),
sam (staff, not named), anonymous.
"""
import pytest

from apps.namespaces.models import ManagedNamespace, NamespaceRequest
from apps.namespaces.services import commit, submit
from tests.namespaces.conftest import request_spec

ROLES = ["alice", "mia", "bob", "lena", "sam", "anonymous"]
READS = {"alice", "mia", "lena", "sam"}


@pytest.fixture
def objects(world):
    first = submit(request_spec(), world["alice"])
    commit(first)
    prod = request_spec(name="prod", environment="prod", hostnames=[], blueprints=[],
                        quota={"cpu": {"requests": "4"}, "memory": {"requests": "8Gi"}})
    waiting = submit(prod, world["alice"])
    return {"namespace": ManagedNamespace.objects.get(name="a-llm01-mlflow"), "request": first, "waiting": waiting}


def login(role, world, client, api_client):
    if role != "anonymous":
        client.force_login(world[role])
        api_client.force_authenticate(world[role])
    return client, api_client


@pytest.mark.parametrize("role", ROLES)
def test_reading_the_api(role, world, objects, client, api_client):
    _, api = login(role, world, client, api_client)
    paths = ["/api/v1/namespaces/a-llm01-mlflow/", f"/api/v1/namespaces/requests/{objects['request'].pk}/",
             f"/api/v1/namespaces/requests/{objects['waiting'].pk}/"]
    for path in paths:
        expected = 401 if role == "anonymous" else 200 if role in READS else 404
        assert api.get(path).status_code == expected, path
    if role == "anonymous":
        assert api.get("/api/v1/namespaces/").status_code == 401
        return
    assert ("a-llm01-mlflow" in [n["name"] for n in api.get("/api/v1/namespaces/").json()]) == (role in READS)
    assert ({r["name"] for r in api.get("/api/v1/namespaces/requests/").json()} >= {"a-llm01-mlflow", "a-llm01-prod"}) == (role in READS)


@pytest.mark.parametrize("role", ROLES)
def test_reading_the_pages(role, world, objects, client, api_client):
    client, _ = login(role, world, client, api_client)
    paths = ["/namespaces/a-llm01-mlflow/", f"/namespaces/requests/{objects['request'].pk}/",
             "/namespaces/new/?namespace=a-llm01-mlflow"]
    for path in paths:
        response = client.get(path)
        if role == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), path
        else:
            assert response.status_code == (200 if role in READS else 404), path
    if role != "anonymous":
        index = client.get("/namespaces/").content.decode()
        assert ("a-llm01-mlflow" in index) == (role in READS)


@pytest.mark.parametrize("role", ROLES)
def test_deciding(role, world, objects, client, api_client):
    client, api = login(role, world, client, api_client)
    waiting = objects["waiting"]
    response = api.post(f"/api/v1/namespaces/requests/{waiting.pk}/approve/", {"reason": "manifests and capacity checked"}, format="json")
    expected = {"anonymous": 401, "lena": 200, "sam": 403}.get(role, 403)
    assert response.status_code == expected
    if role == "sam":
        assert response.json()["detail"] == f"only lena may decide on {waiting.number}"
    elif role in ("alice", "mia", "bob"):
        assert response.json()["detail"] == "Only staff decide on namespace requests."
    waiting.refresh_from_db()
    assert waiting.status == ("approved" if role == "lena" else "waiting_approval")
    queue = client.get("/namespaces/approvals/")
    if role == "anonymous":
        assert queue.status_code == 302
    elif role in ("lena", "sam"):
        assert queue.status_code == 200 and (waiting.number in queue.content.decode()) == (role == "lena" and waiting.status == "waiting_approval")
    else:
        assert queue.status_code == 403


@pytest.mark.parametrize("role", ["alice", "mia", "bob", "lena", "sam"])
def test_deciding_on_the_page(role, world, objects, client, api_client):
    client, _ = login(role, world, client, api_client)
    waiting = objects["waiting"]
    response = client.post(f"/namespaces/requests/{waiting.pk}/", {"decision": "reject", "reason": "not now"})
    assert response.status_code == (404 if role == "bob" else 302)
    waiting.refresh_from_db()
    assert waiting.status == ("rejected" if role == "lena" else "waiting_approval")


@pytest.mark.parametrize("role", ROLES)
def test_changing_and_tearing_down(role, world, objects, client, api_client):
    client, api = login(role, world, client, api_client)
    before = NamespaceRequest.objects.count()
    bigger = request_spec()
    bigger["quota"]["cpu"]["limits"] = "32"
    changed = api.post("/api/v1/namespaces/requests/", bigger, format="json")
    teardown = api.post("/api/v1/namespaces/a-llm01-mlflow/teardown/", {"reason": "mine now"}, format="json")
    page = client.post("/namespaces/a-llm01-mlflow/", {"action": "teardown", "reason": "mine now", "confirm_name": "a-llm01-mlflow"})
    namespace = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    if role == "anonymous":
        assert (changed.status_code, teardown.status_code, page.status_code) == (401, 401, 302)
    elif role == "bob":
        assert changed.status_code == 400 and "team: you are not a member of a-llm01" in changed.json()["detail"]
        assert teardown.status_code == 404 and page.status_code == 404
    elif role in ("alice", "mia"):
        assert changed.status_code == 201 and changed.json()["kind"] == "change"
        assert teardown.status_code == 202
    else:  # staff act for any team (the platform team helps a team out); it is recorded under their name
        assert changed.status_code == 201 and changed.json()["requested_by"] == role
        assert teardown.status_code == 202
    if role in ("anonymous", "bob"):
        assert NamespaceRequest.objects.count() == before and namespace.state == "committed"
    else:
        assert namespace.state == "tearing_down"
