"""The usage report's API: shapes, who sees what, bad parameters, and downloads that read back as the JSON."""
import csv
import io
from datetime import datetime, timedelta, timezone

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.django_db

URL = "/api/v1/reports/usage/"


@pytest.fixture
def world(make_user):
    """Two projects' jobs in the last days; alice is in a-llm01 only."""
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation

    now = datetime.now(timezone.utc).replace(microsecond=0)
    cluster = Cluster.objects.create(name="alps")

    def job(job_id, account, user, gpus, hours_ago, hours, score=None, idle=0, partition="normal", energy=None, busy=None):
        start = now - timedelta(hours=hours_ago)
        end = start + timedelta(hours=hours) if hours is not None else None
        record = Job.objects.create(cluster=cluster, job_id=job_id, user_name=user, account=account, partition=partition,
                                    state="COMPLETED" if end else "RUNNING", start_time=start, end_time=end, gpus=gpus,
                                    name=f"job-{job_id}")
        if score is not None or idle or energy is not None:
            per_gpu = [{"host": "n", "gpu": i, "busy": busy, "score": score} for i in range(gpus)] if busy is not None else []
            JobSaturation.objects.create(job=record, status="ready", score=score, idle_gpus=idle, energy_j=energy,
                                         per_gpu=per_gpu)
        return record

    job(1, "a-llm01", "alice", 8, hours_ago=10, hours=4, score=50.0, energy=3.6e6 * 4, busy=0.5)  # 32 GPU-h, half without work: loses 16
    job(2, "a-llm01", "carol", 4, hours_ago=6, hours=None, score=None, idle=4)  # running: 24 GPU-h, all idle
    job(3, "a-bio06", "bob", 16, hours_ago=30, hours=2, score=90.0, partition="debug", busy=0.9)  # 32 GPU-h, loses 3.2
    job(4, "a-bio06", "bob", 4, hours_ago=24 * 9, hours=2, score=10.0)  # before the default 7-day window
    alice = make_user("alice", accounts=["a-llm01"])
    staff = make_user("root", is_staff=True)
    make_user("bob", accounts=["a-bio06"])
    return {"alice": alice, "staff": staff, "now": now, "until": now.isoformat()}


def get(client, who, url=URL, **params):
    client.force_authenticate(who)
    return client.get(url, params)


def test_a_researcher_sees_only_their_projects(api_client, world):
    response = get(api_client, world["alice"], until=world["until"])  # the running job counts until then
    assert response.status_code == 200, response.content
    body = response.json()
    assert [row["key"] for row in body["rows"]] == ["a-llm01"]
    assert body["totals"]["gpu_hours"] == pytest.approx(32 + 24, rel=1e-3)
    assert body["totals"]["gpu_hours_lost"] == pytest.approx(16 + 24, rel=1e-3)
    assert body["totals"]["idle_gpu_hours"] == pytest.approx(24, rel=1e-3)
    assert body["biggest"]["key"] == "a-llm01"
    assert [job["job_id"] for job in body["top_jobs"]] == [2, 1]
    assert body["top_jobs"][0]["url"] == "/jobs/alps/2/"
    assert sum(body["histogram"]["jobs"]) == 1
    other = get(api_client, world["alice"], project="a-bio06")
    assert other.status_code == 404 and "a-bio06" in other.json()["detail"]
    assert get(api_client, world["alice"], user="bob").json()["rows"] == []


def test_staff_see_every_project_and_can_group_by_user(api_client, world):
    body = get(api_client, world["staff"], until=world["until"]).json()
    assert {row["key"]: round(row["gpu_hours"], 2) for row in body["rows"]} == {"a-llm01": 56.0, "a-bio06": 32.0}
    by_user = get(api_client, world["staff"], group_by="user", project="a-bio06").json()
    assert [(row["key"], row["jobs"]) for row in by_user["rows"]] == [("bob", 1)]  # job 4 is outside the window
    wide = get(api_client, world["staff"], project="a-bio06", since=(world["now"] - timedelta(days=10)).isoformat()).json()
    assert wide["totals"]["jobs"] == 2
    partition = get(api_client, world["staff"], group_by="partition", partition="debug").json()
    assert [row["key"] for row in partition["rows"]] == ["debug"]


def test_the_window_clips_jobs(api_client, world):
    since = (world["now"] - timedelta(hours=8)).isoformat()
    until = (world["now"] - timedelta(hours=5)).isoformat()
    body = get(api_client, world["alice"], since=since, until=until).json()
    # job 1 ran 10 h ago to 6 h ago: 2 h inside (8 GPUs); job 2 started 6 h ago: 1 h inside (4 GPUs)
    assert body["totals"]["gpu_hours"] == pytest.approx(8 * 2 + 4 * 1)
    assert body["window"]["since"].startswith(since[:19])


@pytest.mark.parametrize("params, field", [
    ({"since": "yesterday"}, "since"),
    ({"until": "2026-13-40"}, "until"),
    ({"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"}, "since"),
    ({"since": "2026-11-01T00:00:00Z", "until": "2026-11-01T00:00:00Z"}, "since"),
    ({"since": "0001-01-01T00:00:00Z"}, "since"),
    ({"until": "9999-12-31T23:59:59Z"}, "until"),
    ({"since": "2020-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
    ({"group_by": "colour"}, "group_by"),
    ({"project": "x" * 65}, "project"),
])
def test_bad_parameters_are_400_with_the_parameter_named(api_client, world, params, field):
    response = get(api_client, world["alice"], **params)
    assert response.status_code == 400, response.content
    assert field in {item["field"] for item in response.json()["errors"]}


def test_the_default_window_is_the_last_7_days(api_client, world):
    window = get(api_client, world["alice"]).json()["window"]
    since, until = (datetime.fromisoformat(window[name].replace("Z", "+00:00")) for name in ("since", "until"))
    assert until - since == timedelta(days=7) and abs(until - datetime.now(timezone.utc)) < timedelta(minutes=5)


def test_anonymous_is_refused(api_client, world):
    assert api_client.get(URL).status_code in (401, 403)


@pytest.mark.parametrize("group_by", ["project", "user"])
def test_downloads_read_back_as_the_json(api_client, world, group_by):
    body = get(api_client, world["staff"], group_by=group_by).json()
    assert set(body["downloads"]) == {"csv", "parquet"}
    rows = body["rows"]
    columns = ["group_by", "key", "jobs", "gpu_hours", "mean_saturation", "scored_share", "idle_gpu_hours",
               "gpu_hours_lost", "headroom_gpu_hours", "lost_known_share", "energy_kwh", "energy_share"]

    response = api_client.get(body["downloads"]["csv"])
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(parsed) == len(rows) and list(parsed[0]) == columns
    for got, want in zip(parsed, rows):
        for column in columns:
            if want[column] is None:
                assert got[column] == ""
            elif isinstance(want[column], str):
                assert got[column] == want[column]
            else:
                assert float(got[column]) == pytest.approx(want[column])

    response = api_client.get(body["downloads"]["parquet"])
    assert response.status_code == 200
    table = pq.read_table(io.BytesIO(response.content)).to_pylist()
    assert len(table) == len(rows)
    for got, want in zip(table, rows):
        assert list(got) == columns
        for column in columns:
            if want[column] is None or isinstance(want[column], str):
                assert got[column] == want[column]
            else:
                assert got[column] == pytest.approx(want[column])


def test_a_download_in_another_format_is_404(api_client, world):
    assert get(api_client, world["staff"], url="/api/v1/reports/usage.xlsx").status_code == 404
    assert get(api_client, world["alice"], url="/api/v1/reports/usage.csv", since="nope").status_code == 400


def test_the_answers_match_their_documentation(api_client, world):
    from tests.security.test_openapi_complete import assert_documented

    assert_documented("reports.UsageResponse", get(api_client, world["staff"]).json())
    assert_documented("reports.UsageResponse", get(api_client, world["alice"], user="nobody").json())  # empty: nulls


def test_a_job_whose_start_event_names_no_gpu_count_counts_the_gpus_it_was_scored_on(api_client, world, make_user):
    """Issue 34: a start event without a GPU count made a job 0 GPU-hours in reports although its GPUs were
    scored. The count comes from the event's TRES, else the topology's GPUs of its nodes, else the GPUs its
    telemetry showed; the report says which, and lists a job no source gives a count."""
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation

    service = make_user("svc-slurm")
    service.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    start = (world["now"] - timedelta(hours=3)).isoformat()
    end = (world["now"] - timedelta(hours=1)).isoformat()
    events = {  # job id: what the start event says besides the basics
        501: {"tres": "cpu=288,mem=460G,node=2,billing=288,gres/gpu=8"},  # TRES: 8 GPUs
        502: {"nodes": "nid[001001-001002]"},  # nodes the topology knows: 2 x 4 GPUs
        503: {"nodes": "x9000c0s0b0n[0-2]"},  # nodes nobody knows, scored on 12 GPUs
        504: {"nodes": "x9000c0s1b0n0"},  # nothing known at all
    }
    call_command("import_topology", "--preset", "alps", stdout=io.StringIO())
    api_client.force_authenticate(service)
    for job_id, extra in events.items():
        for event, time in (("start", start), ("end", end)):
            body = {"cluster": "alps", "job_id": job_id, "event": event, "time": time, "user": "alice", "account": "a-llm01",
                    **({"state": "COMPLETED"} if event == "end" else extra)}
            response = api_client.post("/api/v1/jobs/events/", body, format="json")
            assert response.status_code == 200, response.json()
    JobSaturation.objects.create(job=Job.objects.get(job_id=503), status="ready", score=60.0,
                                 per_gpu=[{"host": f"x9000c0s0b0n{n // 4}", "gpu": n % 4, "score": 60.0} for n in range(12)])
    assert Job.objects.get(job_id=501).gpus == 8 and Job.objects.get(job_id=502).gpus is None
    body = get(api_client, world["staff"], since=start, until=world["until"], group_by="user").json()
    row = next(r for r in body["rows"] if r["key"] == "alice")
    # alice's job 1 (8 GPUs x 4 h, ended before `since`: not counted) and the four: 8 x 2 + 8 x 2 + 12 x 2 + 0
    assert row["gpu_hours"] == pytest.approx(16 + 16 + 24)
    counts = body["gpu_counts"]
    assert {source: entry["jobs"] for source, entry in counts["inferred"].items()} == {"topology": 1, "telemetry": 1}
    assert counts["unknown_jobs"] == 1 and counts["unknown"] == ["alps/504"]
    assert counts["inferred"]["telemetry"]["gpu_hours"] == pytest.approx(24)
    # The page says it in words, without JavaScript.
    api_client.force_login(world["staff"])
    html = api_client.get("/reports/", {"window": "custom", "since": start[:16], "until": world["until"][:16]}).content.decode()
    assert "1 job from the GPUs of their nodes in the topology, 1 job from the GPUs seen in their telemetry" in html
    assert "1 job has no GPU count from any source (alps/504) and counts no GPU-hours" in html
