"""Saved EDFs: versions, sharing, diff, download, and the authorization matrix over every page and endpoint.

Roles: the owner, a member of a project the EDF is shared with, a member of a project it is not
shared with, staff, anonymous, and a job token. Readers get 200, the rest 404 (an EDF's name leaks
nothing); only the owner changes it (others who can read it get 403).
"""
import pytest
from django.utils import timezone

from apps.edf.models import EdfDocument, EdfVersion
from apps.edf.services import edf_create, edf_share, edf_update

TEXT_V1 = 'image = "library/ubuntu:24.04"\nentrypoint = false\n'
TEXT_V2 = 'image = "library/ubuntu:24.10"\nentrypoint = false\nworkdir = "/tmp"\n'
BROKEN = 'image = "library/ubuntu:24.04"\nentrypoint = "yes"\n'

ROLES = ["owner", "member", "other", "staff", "anonymous", "job_token"]
READS = {"owner", "member", "staff"}


@pytest.fixture
def world(db, make_user):
    from apps.jobs.models import Cluster, Job, JobToken

    users = {
        "owner": make_user("olive", accounts=["a-llm01", "a-vis08"]),
        "member": make_user("mia", accounts=["a-llm01"]),
        "other": make_user("oscar", accounts=["a-moe02"]),
        "staff": make_user("sam", is_staff=True),
    }
    document = edf_create(users["owner"], name="train", text=TEXT_V1, description="training")
    edf_update(users["owner"], document, text=TEXT_V2, note="newer ubuntu")
    edf_share(users["owner"], document, ["a-llm01"])
    private = edf_create(users["owner"], name="private", text=TEXT_V1)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=7, user_name="olive",
                             account="a-llm01", state="RUNNING", submit_time=timezone.now())
    _, key = JobToken.issue(job)
    return {"users": users, "document": document, "private": private, "job_key": key}


def as_role(role, world, client, api_client):
    if role in world["users"]:
        client.force_login(world["users"][role])
        api_client.force_authenticate(world["users"][role])
    elif role == "job_token":
        api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {world['job_key']}")
    return client, api_client


# ------------------------------------------------------------------ services

def test_every_save_appends_a_version_and_unchanged_text_does_not(world):
    document, owner = world["document"], world["users"]["owner"]
    assert list(document.versions.order_by("number").values_list("number", "note")) == [(1, "created"), (2, "newer ubuntu")]
    assert edf_update(owner, document, text=TEXT_V2) is None
    broken = edf_update(owner, document, text=BROKEN, note="oops")
    assert (broken.number, broken.error_count) == (3, 1)
    assert EdfVersion.objects.get(document=document, number=1).text == TEXT_V1  # history is never rewritten


def test_sharing_needs_membership_and_only_the_owner_shares(world):
    from django.core.exceptions import PermissionDenied, ValidationError

    owner, member = world["users"]["owner"], world["users"]["member"]
    with pytest.raises(ValidationError, match="not a member of: a-moe02"):
        edf_share(owner, world["document"], ["a-llm01", "a-moe02"])
    assert list(world["document"].shared_with.values_list("slurm_account", flat=True)) == ["a-llm01"]  # unchanged
    with pytest.raises(PermissionDenied):
        edf_share(member, world["document"], ["a-llm01"])


# ------------------------------------------------------------------ the matrix: pages

@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("suffix", ["", "history/", "download/", "history/?from=1&to=2"])
def test_read_pages(role, suffix, world, client, api_client):
    client, _ = as_role(role, world, client, api_client)
    response = client.get(f"/edf/olive/train/{suffix}")
    if role in ("anonymous", "job_token"):
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    else:
        assert response.status_code == (200 if role in READS else 404)
    if response.status_code == 200 and suffix == "download/":
        assert response.content.decode() == TEXT_V2
        assert response["Content-Disposition"] == 'attachment; filename="train.toml"'


@pytest.mark.parametrize("role", ["owner", "member", "other", "staff"])
def test_unshared_edf_is_only_for_its_owner_and_staff(role, world, client, api_client):
    client, api = as_role(role, world, client, api_client)
    expected = 200 if role in ("owner", "staff") else 404
    assert client.get("/edf/olive/private/").status_code == expected
    assert api.get("/api/v1/edf/documents/olive/private/").status_code == expected
    listed = {(d["owner"], d["name"]) for d in api.get("/api/v1/edf/documents/").json()["results"]}
    assert (("olive", "private") in listed) == (role in ("owner", "staff"))
    assert (("olive", "train") in listed) == (role in READS)


@pytest.mark.parametrize("role", ROLES)
def test_save_page_post(role, world, client, api_client):
    client, _ = as_role(role, world, client, api_client)
    response = client.post("/edf/olive/train/", {"name": "train", "text": TEXT_V1, "description": "x", "note": "back"})
    owner_versions = world["document"].versions.count()
    if role == "owner":
        assert response.status_code == 302 and owner_versions == 3
    elif role in ("member", "staff"):
        # Readers who are not the owner save a copy of their own; the original is untouched.
        username = world["users"][role].username
        assert response.status_code == 302 and response["Location"] == f"/edf/{username}/train/"
        assert owner_versions == 2 and EdfDocument.objects.get(owner__username=username, name="train").latest.text == TEXT_V1
    elif role == "other":
        assert response.status_code == 404 and owner_versions == 2
    else:
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/") and owner_versions == 2


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", ["delete/", "restore/1/"])
def test_owner_only_page_actions(role, action, world, client, api_client):
    client, _ = as_role(role, world, client, api_client)
    response = client.post(f"/edf/olive/train/{action}")
    if role == "owner":
        assert response.status_code == 302
    elif role in ("member", "staff"):
        assert response.status_code == 403
    elif role == "other":
        assert response.status_code == 404
    else:
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    unchanged = role != "owner"
    assert EdfDocument.objects.filter(pk=world["document"].pk).exists() == (unchanged or action != "delete/")
    if unchanged:
        assert world["document"].versions.count() == 2


# ------------------------------------------------------------------ the matrix: API

def expect_api(role, response, allowed_status):
    if role in ("anonymous", "job_token"):
        assert response.status_code in (401, 403), response.content
    elif role == "other":
        assert response.status_code == 404
        assert set(response.json()) == {"detail", "errors"}
    else:
        assert response.status_code == allowed_status[role], (role, response.status_code, response.content)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("suffix", ["", "versions/", "diff/?from=1&to=2", "download/?version=1"])
def test_api_reads(role, suffix, world, client, api_client):
    _, api = as_role(role, world, client, api_client)
    response = api.get(f"/api/v1/edf/documents/olive/train/{suffix}")
    expect_api(role, response, {"owner": 200, "member": 200, "staff": 200})
    if response.status_code == 200 and suffix.startswith("diff"):
        assert '-image = "library/ubuntu:24.04"' in response.content.decode()
        assert '+workdir = "/tmp"' in response.content.decode()
    if response.status_code == 200 and suffix.startswith("download"):
        assert response.content.decode() == TEXT_V1


@pytest.mark.parametrize("role", ROLES)
def test_api_writes(role, world, client, api_client):
    _, api = as_role(role, world, client, api_client)
    owner_only = {"owner": 200, "member": 403, "staff": 403}
    expect_api(role, api.patch("/api/v1/edf/documents/olive/train/", {"text": TEXT_V1, "note": "revert"}, format="json"), owner_only)
    expect_api(role, api.put("/api/v1/edf/documents/olive/train/sharing/", {"projects": ["a-vis08"]}, format="json"), owner_only)
    expect_api(role, api.delete("/api/v1/edf/documents/olive/train/"), {"owner": 204, "member": 403, "staff": 403})
    if role != "owner":
        document = EdfDocument.objects.get(pk=world["document"].pk)
        assert document.versions.count() == 2
        assert list(document.shared_with.values_list("slurm_account", flat=True)) == ["a-llm01"]


def test_api_create_update_and_conflicts(world, api_client):
    api_client.force_authenticate(world["users"]["member"])
    response = api_client.post("/api/v1/edf/documents/", {"name": "mine", "text": TEXT_V1}, format="json")
    assert response.status_code == 201 and response.json()["latest"]["number"] == 1 and response.json()["can_edit"]
    again = api_client.post("/api/v1/edf/documents/", {"name": "mine", "text": TEXT_V1}, format="json")
    assert again.status_code == 400 and again.json()["errors"][0]["field"] == "name"
    patched = api_client.patch("/api/v1/edf/documents/mia/mine/", {"text": BROKEN, "note": "try"}, format="json").json()
    assert patched["latest"]["number"] == 2 and patched["latest"]["error_count"] == 1


@pytest.mark.parametrize("body, field", [
    ({"name": "../etc/passwd", "text": TEXT_V1}, "name"),
    ({"name": "x.toml", "text": TEXT_V1}, "name"),
    ({"name": "<script>alert(1)</script>", "text": TEXT_V1}, "name"),
    ({"name": "ok", "text": 12}, "text"),
    ({"name": "ok", "text": ["a"]}, "text"),
    ({"name": "ok", "text": "x" * 1_000_001}, "text"),
    ({"name": "ok", "text": "image = \"a\"\x00"}, "text"),
    ({"text": TEXT_V1}, "name"),
    ({"name": "train\n", "text": TEXT_V1}, "name"),  # issue 16 item 7: "$" let a trailing newline through
])
def test_api_rejects_bad_input_with_the_field_and_stores_nothing(body, field, world, api_client):
    api_client.force_authenticate(world["users"]["member"])
    response = api_client.post("/api/v1/edf/documents/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in {error["field"] for error in response.json()["errors"]}
    assert not EdfDocument.objects.filter(owner=world["users"]["member"]).exists()


def test_sharing_api_refuses_projects_the_owner_is_not_in(world, api_client):
    api_client.force_authenticate(world["users"]["owner"])
    response = api_client.put("/api/v1/edf/documents/olive/train/sharing/", {"projects": ["a-moe02"]}, format="json")
    assert response.status_code == 400 and "a-moe02" in response.json()["detail"]
    ok = api_client.put("/api/v1/edf/documents/olive/train/sharing/", {"projects": ["a-vis08", "a-llm01"]}, format="json")
    assert ok.status_code == 200 and sorted(ok.json()["shared_with"]) == ["a-llm01", "a-vis08"]


def test_page_form_errors_are_shown_not_raised(world, client):
    client.force_login(world["users"]["member"])
    response = client.post("/edf/new/", {"name": "bad name!", "text": TEXT_V1})
    assert response.status_code == 400 and "An EDF name as srun" in response.content.decode()
    response = client.post("/edf/new/", {"name": "fine", "text": "x" * 1_000_001})
    assert response.status_code == 400
    hostile = '<script>alert("x")</script>'
    response = client.post("/edf/new/", {"name": "fine", "text": f'image = "{hostile}"\n', "description": hostile})
    assert response.status_code == 302
    page = client.get("/edf/mia/fine/").content.decode()
    assert hostile not in page and "&lt;script&gt;" in page


def test_validate_api_resolves_saved_bases_the_caller_may_read(world, api_client):
    api_client.force_authenticate(world["users"]["member"])
    child = 'base_environment = "train"\nworkdir = "/tmp"\n'
    body = api_client.post("/api/v1/edf/validate/", {"text": child, "use_saved": True, "owner": "olive"}, format="json").json()
    assert body["resolved"]["chain"] == ["train", "this file"] and body["resolved"]["image"] == "library/ubuntu:24.10"
    private_child = 'base_environment = "private"\n'
    body = api_client.post("/api/v1/edf/validate/", {"text": private_child, "use_saved": True, "owner": "olive"}, format="json").json()
    assert [f["rule"] for f in body["findings"] if f["rule"].startswith("base-")] == ["base-unresolved"]  # not shared: not read


def test_schema_is_public_json(client):
    response = client.get("/edf/schema.json")
    assert response.status_code == 200 and response.json()["title"].startswith("Environment Definition File")


def test_index_lists_own_and_shared(world, client):
    client.force_login(world["users"]["member"])
    page = client.get("/edf/").content.decode()
    assert "/edf/olive/train/" in page and "/edf/olive/private/" not in page


@pytest.mark.parametrize("suffix, field", [
    ("diff/?to=%C2%B2", "to"),
    ("diff/?from=%C2%B2", "from"),
    ("diff/?to=6760759693754570375168", "to"),
    ("diff/?from=-1", "from"),
    ("download/?version=%C2%B2", "version"),
    ("download/?version=abc", "version"),
    ("download/?version=6760759693754570375168", "version"),
])
def test_bad_version_numbers_are_400s_naming_the_parameter(suffix, field, world, api_client):
    """Issue 16 item 6: int('²') after isdigit() (download) and int() on ?to= (diff) answered 500."""
    api_client.force_authenticate(world["users"]["owner"])
    response = api_client.get(f"/api/v1/edf/documents/olive/train/{suffix}")
    assert response.status_code == 400, response.content
    assert [error["field"] for error in response.json()["errors"]] == [field]
    assert api_client.get("/api/v1/edf/documents/olive/train/download/?version=9").status_code == 404


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("method", ["patch", "put", "delete"])
def test_a_document_deleted_between_lookup_and_lock_is_a_404_and_nothing_is_written(method, make_user, api_client):
    """Issue 16 item 10: PATCH (or sharing) of an EDF that a concurrent DELETE removed after the view found it
    raised DoesNotExist in select_for_update (500). The DELETE is committed by another thread, on its own
    database connection, at the moment this request starts its write: after the lookup, before the lock."""
    import threading

    from django.db import connection, connections

    owner = make_user("olive", accounts=["a-llm01"])
    document = edf_create(owner, name="train", text=TEXT_V1)
    pk = document.pk
    state = {"deleted": False}

    def concurrent_delete():
        try:
            EdfDocument.objects.filter(pk=pk).delete()
        finally:
            connections.close_all()

    def delete_before_lock(execute, sql, params, many, context):
        head = sql.lstrip().upper()
        if not state["deleted"] and (head.startswith("BEGIN") or
                                     (head.startswith("SELECT") and 'WHERE "edf_edfdocument"."id" = %s' in sql)):
            state["deleted"] = True
            other = threading.Thread(target=concurrent_delete)
            other.start()
            other.join()
        return execute(sql, params, many, context)

    api_client.force_authenticate(owner)
    url = "/api/v1/edf/documents/olive/train/"
    with connection.execute_wrapper(delete_before_lock):
        if method == "patch":
            response = api_client.patch(url, {"text": TEXT_V2, "description": "new", "note": "x"}, format="json")
        elif method == "put":
            response = api_client.put(url + "sharing/", {"projects": ["a-llm01"]}, format="json")
        else:
            response = api_client.delete(url)
    assert state["deleted"]
    assert response.status_code == 404, response.content
    assert "was deleted while this change was being saved; nothing was written" in response.json()["detail"]
    assert not EdfDocument.objects.filter(pk=pk).exists() and not EdfVersion.objects.filter(document_id=pk).exists()


@pytest.mark.parametrize("query, field", [("to=%C2%B2", "to"), ("from=%C2%B2", "from"), ("to=6760759693754570375168", "to"),
                                          ("from=0", "from")])
def test_history_page_names_a_bad_version_number_with_a_400(query, field, world, client):
    """Issue 16 item 6: the history page's ?to=² passed isdigit() and int() raised (500)."""
    client.force_login(world["users"]["owner"])
    response = client.get(f"/edf/olive/train/history/?{query}")
    assert response.status_code == 400
    page = response.content.decode()
    assert f"<p>{field}: " in page and "v1 → v2" in page  # the latest change is shown instead
    assert client.get("/edf/olive/train/history/?from=1&to=2").status_code == 200


@pytest.mark.parametrize("query", ["version=%C2%B2", "version=abc", "version=6760759693754570375168"])
def test_download_page_names_a_bad_version_with_a_400(query, world, client):
    client.force_login(world["users"]["owner"])
    response = client.get(f"/edf/olive/train/download/?{query}")
    assert response.status_code == 400 and response.content.decode().startswith("version: ")
    assert client.get("/edf/olive/train/download/?version=1").content.decode() == TEXT_V1
