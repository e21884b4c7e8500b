"""GET /api/v1/system/overview/, the page /system/ and its figures' JSON on a small seeded world: shape,
hand-computed aggregates, and who sees which job."""
import json

import pytest

from tests.system.seed import OTHER_JOB, OTHER_NAME, OWN_JOB, PASSWORD, build_world

pytestmark = pytest.mark.django_db

URL = "/api/v1/system/overview/"


@pytest.fixture
def world(db):
    return build_world()


def client_as(client, world, role):
    client.force_login(world["users"][role])
    return client


def test_overview_shape_and_hand_computed_aggregates(client, world):
    answer = client_as(client, world, "researcher").get(URL).json()
    assert set(answer) >= {"generated", "totals", "coverage", "jobs", "groups", "switches", "histogram", "network"}
    totals = answer["totals"]
    assert (totals["running_jobs"], totals["scored_jobs"], totals["allocated_gpus"], totals["idle_gpus"]) == (3, 2, 20, 1)
    assert totals["mean_s"] == pytest.approx((8 * 61.3 + 8 * 20.0) / 16, abs=0.06)
    assert answer["coverage"]["scored_jobs"] == 2 and answer["coverage"]["running_jobs"] == 3
    assert answer["coverage"]["newest_score"] is not None
    groups = {row["group"]: row for row in answer["groups"]}
    assert (groups[0]["jobs"], groups[0]["nodes"], groups[0]["gpus"], groups[0]["mean_s"], groups[0]["idle_gpus"]) == (1, 4, 8, 61.3, 1)
    assert (groups[1]["gpus"], groups[1]["mean_s"]) == (8, 20.0)
    assert (groups[2]["gpus"], groups[2]["mean_s"]) == (4, None)
    # no switch port counters in this world: the network says why it has no load, no group invents one
    assert answer["network"]["verdict"] is None and answer["network"]["matrix"] is None
    assert answer["network_note"].startswith("no switch port counters in the last")
    assert all(row["network"] is None for row in answer["switches"] + answer["groups"])
    assert sum(row["gpus"] for row in answer["switches"]) == 20  # every GPU on one switch (its NIC's)


def test_histogram_spreads_scores_over_each_jobs_overlap(client, world):
    histogram = client_as(client, world, "researcher").get(URL).json()["histogram"]
    day = {row["bin"]: row["gpu_hours"] for row in histogram["24h"]["bins"]}
    week = {row["bin"]: row["gpu_hours"] for row in histogram["7d"]["bins"]}
    # own: 2 h x 7 GPUs at 70 and 1 idle GPU at 0.5; other: 3 h x 8 GPUs at 20; unscored: 1 h x 4 GPUs
    assert day["70-80"] == pytest.approx(14, abs=0.02) and day["0-10"] == pytest.approx(2, abs=0.02)
    assert day["20-30"] == pytest.approx(24, abs=0.02) and day["unscored"] == pytest.approx(4, abs=0.02)
    assert day["90-100"] == 0  # the completed job ended 26 h ago
    assert week["90-100"] == pytest.approx(16, abs=0.02)  # ... and ran 4 h on 4 GPUs inside the week


def test_researcher_sees_own_jobs_named_and_others_anonymous(client, world):
    response = client_as(client, world, "researcher").get(URL)
    body = response.content.decode()
    assert OTHER_NAME not in body and str(OTHER_JOB) not in body and "otto" not in body and "a-other" not in body
    jobs = response.json()["jobs"]
    own = next(job for job in jobs if job["job_id"] == str(OWN_JOB))
    assert own["name"] == "own-train" and own["url"] == f"/jobs/alps/{OWN_JOB}/" and own["visible"]
    hidden = [job for job in jobs if not job["visible"]]
    assert len(hidden) == 1 and hidden[0]["label"] == "another project's job"
    assert hidden[0]["gpus"] == 8 and hidden[0]["score"] == 20.0 and hidden[0]["url"] is None


def test_the_other_project_sees_the_researchers_job_anonymous_and_staff_see_all(client, world):
    body = client_as(client, world, "other").get(URL).content.decode()
    assert "own-train" not in body and str(OWN_JOB) not in body and OTHER_NAME in body
    client.logout()
    body = client_as(client, world, "staff").get(URL).content.decode()
    assert "own-train" in body and OTHER_NAME in body


def test_unknown_cluster_is_a_400_that_names_it(client, world):
    response = client_as(client, world, "researcher").get(URL, {"cluster": "nowhere"})
    assert response.status_code == 400
    assert "no cluster named 'nowhere'" in response.content.decode() and "alps" in response.content.decode()
    assert client.get(URL, {"cluster": "alps"}).json()["totals"]["running_jobs"] == 3


def test_signed_in_users_only(client, world):
    assert client.get(URL).status_code in (401, 403)
    for path in ("/system/", "/system/data.json", "/system/histogram.json"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_page_opens_with_its_verdict(client, world):
    response = client_as(client, world, "researcher").get("/system/")
    html = response.content.decode()
    verdict = html.index('id="system-verdict"')
    assert verdict < html.index('id="system-map"')
    assert "2 of 3</strong> running jobs scored" in html
    assert "own-train" in html  # the researcher's job losing most GPU-hours
    assert OTHER_NAME not in html and str(OTHER_JOB) not in html


def test_figures_json_colours_every_node_and_hides_other_projects(client, world):
    response = client_as(client, world, "researcher").get("/system/data.json")
    body = response.content.decode()
    assert OTHER_NAME not in body and str(OTHER_JOB) not in body
    data = json.loads(body)
    plan = data["map"]
    assert len(plan["hosts"]) == len(plan["x"]) == len(plan["job"]) == 24
    on = {host: plan["job"][i] for i, host in enumerate(plan["hosts"])}
    jobs = data["jobs"]
    assert jobs[on["nid000001"]]["name"] == "own-train" and jobs[on["nid000009"]]["label"] == "another project's job"
    assert on["nid000024"] == -1  # free
    assert plan["straggler"][plan["hosts"].index("nid000003")] == 1
    assert plan["vetting_states"][plan["vetting"][plan["hosts"].index("nid000021")]] == "suspect"


def test_login_then_page(client, world):
    assert client.login(username="rita", password=PASSWORD)
    assert client.get("/system/").status_code == 200


def test_histogram_json_is_the_apis_histogram(client, world):
    client = client_as(client, world, "other")
    page = client.get("/system/histogram.json").json()["histogram"]
    assert page == client.get(URL).json()["histogram"]
    assert set(page) == {"24h", "7d"} and page["7d"]["gpu_hours"] > page["24h"]["gpu_hours"] > 0
