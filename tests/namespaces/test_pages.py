"""The namespace pages without JavaScript: the form posts, shows problems next to their fields, and keeps
what was typed; the live check answers by form field; the pages show state, history and the diff."""
import pytest

from apps.namespaces.models import NamespaceRequest
from apps.namespaces.services import commit, submit
from tests.namespaces.conftest import request_spec


def form_data(**changes) -> dict:
    spec = request_spec()
    data = {"team": "a-llm01", "name": "mlflow", "environment": "dev", "purpose": spec["purpose"], "contacts": "jane.doe@example.org",
            "expires": spec["expires"], "psa": "restricted", "cpu_requests": "8", "cpu_limits": "16", "memory_requests": "32Gi",
            "memory_limits": "64Gi", "gpu_model_0": "h100", "gpu_profile_0": "1g.10gb", "gpu_count_0": "2",
            "storage_longhorn_size": "100Gi", "storage_longhorn_pvcs": "10", "hostnames": "a-llm01-mlflow.svc.alps.example.org",
            "bp_mlflow": "on", "bp_mlflow_hostname": "a-llm01-mlflow.svc.alps.example.org", "bp_mlflow_storage": "50Gi"}
    data.update(changes)
    return data


@pytest.fixture
def alice(world, client):
    client.force_login(world["alice"])
    return client


def test_the_form_submits_the_same_request_as_the_api(alice, world):
    response = alice.post("/namespaces/new/", form_data())
    request = NamespaceRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/namespaces/requests/{request.pk}/"
    from apps.namespaces.services import inventory
    from apps.namespaces.spec import normalise

    assert request.spec == normalise(request_spec(), inventory())
    page = alice.get(response["Location"]).content.decode()
    assert "was approved at once (inside your team&#x27;s envelope)" in page


def test_problems_are_shown_next_to_their_fields_and_the_input_is_kept(alice):
    response = alice.post("/namespaces/new/", form_data(name="ML_flow", cpu_requests="32", gpu_count_0="29", hostnames="", bp_mlflow_hostname=""))
    assert response.status_code == 400
    page = response.content.decode()
    assert '<span class="field-error" data-for="name">lowercase letters' in page
    assert '<span class="field-error" data-for="cpu_requests">32 is more than the limit 16</span>' in page
    assert "29 1g.10gb slices of NVIDIA H100 SXM 80GB asked, 28 left on the cluster" in page
    assert '<span class="field-error" data-for="bp_mlflow_hostname">required: the address users open</span>' in page
    assert 'value="ML_flow"' in page and 'value="29"' in page  # nothing typed is lost
    assert not NamespaceRequest.objects.exists()


def test_the_live_check_answers_by_form_field(alice):
    answer = alice.post("/namespaces/new/preview/", form_data(gpu_model_0="gh200", gpu_profile_0="1g.10gb", memory_limits="64 GB")).json()
    assert answer["valid"] is False and answer["name"] == "a-llm01-mlflow"
    assert answer["errors"]["gpu_profile_0"] == ["NVIDIA GH200 96GB: whole GPUs or the MIG profiles 1g.12gb, 3g.48gb"]
    assert answer["errors"]["memory_limits"][0].startswith("'64 GB' is not a Kubernetes quantity")
    good = alice.post("/namespaces/new/preview/", form_data(gpu_count_0="6")).json()
    assert good["valid"] is True and good["errors"] == {}
    assert good["needs_approval"] == ["nvidia.com/mig-1g.10gb: the team would hold 6, its envelope is 4"] and good["approvers"] == ["lena"]
    assert "requests.nvidia.com/mig-1g.10gb: '6'" in good["manifests"]


def test_the_live_check_answers_a_get_with_405_not_500(alice):
    """It answers POSTs only; a GET looked for a template it does not have (500)."""
    response = alice.get("/namespaces/new/preview/")
    assert response.status_code == 405 and response["Allow"] == "POST, OPTIONS"


def test_a_change_starts_from_what_is_there(alice, world):
    request = submit(request_spec(), world["alice"])
    commit(request)
    page = alice.get("/namespaces/new/?namespace=a-llm01-mlflow").content.decode()
    assert '<input type="hidden" name="change_of" value="a-llm01-mlflow">' in page
    assert 'name="cpu_limits" value="16"' in page and 'name="memory_limits" value="64Gi"' in page
    answer = alice.post("/namespaces/new/preview/", form_data(change_of="a-llm01-mlflow", cpu_limits="24")).json()
    assert answer["valid"] is True
    assert "-    limits.cpu: '16'\n+    limits.cpu: '24'\n" in answer["diff"]
    response = alice.post("/namespaces/new/", form_data(change_of="a-llm01-mlflow", cpu_limits="24"))
    change = NamespaceRequest.objects.latest("id")
    assert response.status_code == 302 and change.kind == "change" and change.namespace.name == "a-llm01-mlflow"


def test_the_namespace_page_shows_state_history_and_files(alice, world):
    request = submit(request_spec(), world["alice"])
    commit(request)
    request.refresh_from_db()
    page = alice.get("/namespaces/a-llm01-mlflow/").content.decode()
    assert 'id="ns-state">committed<' in page and f"({request.commit[:12]}); no Argo CD to report sync" in page
    assert '<dd id="ns-argo">not configured</dd>' in page
    assert f"{request.number} committed; no Argo CD configured" in page
    assert "<code>10-resourcequota.yaml</code>" in page and "requests.nvidia.com/mig-1g.10gb: &#x27;2&#x27;" in page
    request.refresh_from_db()
    detail = alice.get(f"/namespaces/requests/{request.pk}/").content.decode()
    assert request.commit[:12] in detail and 'id="req-diff"' in detail


def test_the_index_lists_namespaces_and_requests_under_way(alice, world):
    commit(submit(request_spec(), world["alice"]))
    submit(request_spec(name="prod", environment="prod", hostnames=[], blueprints=[],
                        quota={"cpu": {"requests": "4"}, "memory": {"requests": "8Gi"}}), world["mia"])
    page = alice.get("/namespaces/").content.decode()
    assert '<a href="/namespaces/a-llm01-mlflow/">a-llm01-mlflow</a>' in page
    assert "a-llm01-prod" in page and "waiting for approval" in page
