"""Authorization matrix over every job page and job API endpoint.

Roles: the job's owner, a member of its Slurm account, another user, staff, anonymous, a job
token of another job, and the job's own token. Whoever may not see a job gets 404, never 403,
so job ids leak nothing; anonymous browsers are sent to the login page and come back.
"""
import pytest
from django.utils import timezone

from apps.jobs.models import Cluster, Job, JobToken

ROLES = ["owner", "member", "other", "staff", "anonymous", "other_job_token", "own_job_token"]
CAN_SEE = {"owner": True, "member": True, "other": False, "staff": True, "anonymous": False,
           "other_job_token": False, "own_job_token": True}


@pytest.fixture
def world(db, make_user):
    cluster = Cluster.objects.create(name="alps")
    now = timezone.now()
    target = Job.objects.create(cluster=cluster, job_id=1001, user_name="olive", account="a-llm01", state="RUNNING",
                                submit_time=now, start_time=now, nodes="", node_list=[])
    elsewhere = Job.objects.create(cluster=cluster, job_id=2002, user_name="oscar", account="a-moe02", state="RUNNING",
                                   submit_time=now, start_time=now)
    users = {
        "owner": make_user("olive"),
        "member": make_user("mia", accounts=["a-llm01"]),
        "other": make_user("oscar", accounts=["a-moe02"]),
        "staff": make_user("sam", is_staff=True),
    }
    _, other_key = JobToken.issue(elsewhere)
    _, own_key = JobToken.issue(target)
    return {"target": target, "users": users, "keys": {"other_job_token": other_key, "own_job_token": own_key}}


def client_for(role, world, client, api_client):
    if role in world["users"]:
        client.force_login(world["users"][role])
        api_client.force_authenticate(world["users"][role])
    elif role in world["keys"]:
        api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {world['keys'][role]}")
    return client, api_client


@pytest.mark.parametrize("role", ROLES)
def test_job_page(role, world, client, api_client):
    client, _ = client_for(role, world, client, api_client)
    response = client.get("/jobs/alps/1001/")
    if role == "anonymous":
        assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/jobs/alps/1001/"
    elif role in world["keys"]:
        # Job tokens are API credentials only: the browser session is anonymous.
        assert response.status_code == 302
    else:
        assert response.status_code == (200 if CAN_SEE[role] else 404)


@pytest.mark.parametrize("role", ROLES)
def test_job_api_detail(role, world, client, api_client):
    _, api = client_for(role, world, client, api_client)
    response = api.get("/api/v1/jobs/alps/1001/")
    if role == "anonymous":
        assert response.status_code == 401
    else:
        assert response.status_code == (200 if CAN_SEE[role] else 404), response.content
        if CAN_SEE[role]:
            assert response.json()["user_name"] == "olive"


@pytest.mark.parametrize("role", ROLES)
def test_job_api_list(role, world, client, api_client):
    _, api = client_for(role, world, client, api_client)
    response = api.get("/api/v1/jobs/")
    if role == "anonymous":
        assert response.status_code == 401
        return
    ids = {job["job_id"] for job in response.json()["results"]}
    assert (1001 in ids) == CAN_SEE[role]
    expected_other = role in {"other", "staff", "other_job_token"}
    assert (2002 in ids) == expected_other


@pytest.mark.parametrize("role", ROLES)
def test_job_list_page(role, world, client, api_client):
    client, _ = client_for(role, world, client, api_client)
    response = client.get("/jobs/?scope=all")
    if role not in world["users"]:
        assert response.status_code == 302
        return
    assert ('href="/jobs/alps/1001/"' in response.content.decode()) == CAN_SEE[role]


# Who may mint a token for job 1001: its Slurm user and staff. A member of its account sees the job
# (403, not 404) but may not get a token, which would let them write what they may only read.
MAY_ISSUE = {"owner": 201, "member": 403, "other": 404, "staff": 201}


@pytest.mark.parametrize("role", ROLES)
def test_issuing_a_job_token(role, world, client, api_client):
    _, api = client_for(role, world, client, api_client)
    response = api.post("/api/v1/jobs/alps/1001/token/")
    if role == "anonymous" or role in world["keys"]:
        assert response.status_code == 401  # a job token is no credential for minting more tokens
    else:
        assert response.status_code == MAY_ISSUE[role], response.content
    if response.status_code == 403:
        assert "olive" in response.json()["detail"]
    assert JobToken.objects.filter(job=world["target"]).count() == 1 + (response.status_code == 201)


def test_a_member_cannot_launder_write_rights_through_a_job_token(world, api_client):
    """Issue 16 item 1: the member, refused the layout PUT directly, must not get a token that can do it."""
    api_client.force_authenticate(world["users"]["member"])
    assert api_client.put("/api/v1/jobs/alps/1001/layout/", {"tp": 1, "pp": 1}, format="json").status_code == 403
    response = api_client.post("/api/v1/jobs/alps/1001/token/")
    assert response.status_code == 403
    assert "job_token" not in response.json()


def test_a_job_token_user_without_the_token_job_still_sees_only_its_job(world):
    """The selector reads the job from the token's stand-in user, so a view that forgets to pass
    ``token_job`` cannot widen a token to the owner's or account's jobs (or fail on it)."""
    from apps.accounts.selectors import project_list_for_user, slurm_accounts_for_user
    from apps.jobs.authentication import JobTokenUser
    from apps.jobs.selectors import job_get_for_user, job_list_for_user, job_may_act, job_may_issue_token

    elsewhere = Job.objects.get(job_id=2002)
    stand_in = JobTokenUser(world["target"])
    assert list(job_list_for_user(stand_in)) == [world["target"]]
    assert job_get_for_user(stand_in, "alps", 2002) is None
    assert slurm_accounts_for_user(stand_in) == set() and not project_list_for_user(stand_in).exists()
    assert job_may_act(stand_in, world["target"]) and not job_may_act(stand_in, elsewhere)
    assert not job_may_issue_token(stand_in, world["target"])
    owner, member, staff = (world["users"][r] for r in ("owner", "member", "staff"))
    assert job_may_act(owner, world["target"]) and job_may_act(staff, world["target"])
    assert not job_may_act(member, world["target"]) and not job_may_issue_token(member, world["target"])


@pytest.mark.parametrize("role", ROLES)
def test_posting_job_events(role, world, client, api_client):
    _, api = client_for(role, world, client, api_client)
    response = api.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 1001, "event": "end", "state": "COMPLETED"}, format="json")
    expected = {"anonymous": 401, "staff": 200}.get(role, 403 if role in world["users"] else 401)
    assert response.status_code == expected, response.content
    world["target"].refresh_from_db()
    assert (world["target"].state == "COMPLETED") == (role == "staff")
