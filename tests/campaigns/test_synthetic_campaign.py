"""Issue 37, acceptance 1: a synthetic campaign built through the APIs — job events, application metrics with iterations
and checkpoint markers, telemetry scored by the saturation scoring — with planted failures (a node failure, an NCCL
timeout, a time limit without a final checkpoint, a restart from an older checkpoint). Goodput and every badput part
match the hand computation below within 1 %, and each failure's cause is named.

Five allocations of 8 GPUs (2 nodes), times in hours after each job's start; checkpoints take 90 s (0.025 h); a restore
marker says 360 s (0.1 h); progress rows every 0.1 h, 60 iterations each, from 0.5 h:

  job  span   end          progress     checkpoints (iteration)         resumes from   kept up to
  5001 4.0    TIMEOUT      0.5-3.9      1.5, 2.5, 3.5, 3.9 final (2100)  –              all (next resumes 2100)
  5002 3.05   NODE_FAIL    0.5-3.0      1.5 (2760), 2.5 (3360)          2100           3360 (t = 2.5)
  5003 2.5    FAILED 134   0.5-2.0      1.5 (4020)                      3360           3360: nothing (5004 goes back)
  5004 3.05   TIMEOUT      0.5-3.0      1.5 (4020), 2.5 (4620)          3360 (older!)  4620 (t = 2.5)
  5005 2.1    COMPLETED    0.5-2.0      1.5 (5280), 2.0 final (5580)    4620           all

By hand, in GPU-hours (x 8 GPUs):
  5001: startup 0.5 h = 4; checkpoints 4 x 0.025 = 0.8; shutdown (3.9 -> 4.0 less the final save's 0.025) = 0.6;
        kept training 3.4 - 3 x 0.025 = 3.325 h of which 1 GPU in 8 idle (the scoring's rule) = 3.325 idle,
        23.275 productive.                                                                    total 32
  5002: startup 0.4 h = 3.2, restore 0.8, checkpoints 0.4, lost (2.5 -> 3.0 less 0.025) 3.8, hang 0.05 h = 0.4,
        productive (2.0 - 0.025) = 15.8.                                                      total 24.4
  5003: startup 3.2, restore 0.8, checkpoint 0.2, lost (0.5 -> 2.0 less 0.025) 11.8, hang 0.5 h = 4.0.  total 20
  5004: as 5002: 3.2, 0.8, 0.4, lost 3.8, hang 0.4, productive 15.8.                          total 24.4
  5005: startup 3.2, restore 0.8, checkpoints 0.4, shutdown 0.6, productive (1.5 - 0.025) = 11.8.      total 16.8
"""
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from tests.telemetry.contract import synthetic

pytestmark = pytest.mark.django_db
GPUS = 8
NODES = "nid[000001-000002]"
HOSTS = ("nid000001", "nid000002")

EXPECTED = {
    "allocated": 117.6, "productive": 66.675,
    "badput": {"startup": 16.8, "restore": 3.2, "checkpoint": 2.2, "lost_work": 19.4, "hang": 4.8, "dips": 0.0,
               "idle": 3.325, "bad_nodes": 0.0, "shutdown": 1.2},
    "queue_hours": 0.5 + 1.45 + 1.5 + 0.45,  # 4.0 -> 4.5, 7.55 -> 9.0, 11.5 -> 13.0, 16.05 -> 16.5
}
# (job id, start h after T0, span h, end state, exit code, last progress h, checkpoints [(h, final?)], restore step)
PLAN = [
    (5001, 0.0, 4.0, "TIMEOUT", None, 3.9, [1.5, 2.5, 3.5, 3.9], None),
    (5002, 4.5, 3.05, "NODE_FAIL", None, 3.0, [1.5, 2.5], 2100),
    (5003, 9.0, 2.5, "FAILED", 134, 2.0, [1.5], 3360),
    (5004, 13.0, 3.05, "TIMEOUT", None, 3.0, [1.5, 2.5], 3360),
    (5005, 16.5, 2.1, "COMPLETED", 0, 2.0, [1.5, 2.0], 4620),
]


def _close(actual, expected, what):
    assert actual == pytest.approx(expected, rel=0.01, abs=0.01), f"{what}: {actual} != {expected} (by hand)"


@pytest.fixture
def campaign_world(api_client, make_user, store, settings):
    settings.CAMPAIGN_CACHE_SECONDS = 0
    from apps.jobs.models import Job
    from apps.saturation.services import job_saturation_refresh

    service = make_user("svc-slurm")
    service.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    owner = make_user("ada")
    t0 = (timezone.now() - timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    for job_id, at, span, state, code, last, checkpoints, restore in PLAN:
        start, end = t0 + timedelta(hours=at), t0 + timedelta(hours=at + span)
        api_client.force_authenticate(service)
        answer = api_client.post("/api/v1/jobs/events/", {
            "cluster": "alps", "job_id": job_id, "event": "start", "user": "ada", "account": "a-llm01",
            "name": "apertus-syn", "nodes": NODES, "gpus": GPUS, "time": start.isoformat()}, format="json")
        assert answer.status_code == 200, answer.json()
        end_event = {"cluster": "alps", "job_id": job_id, "event": "end", "state": state, "time": end.isoformat()}
        if code is not None:
            end_event["exit_code"] = code
        assert api_client.post("/api/v1/jobs/events/", end_event, format="json").status_code == 200
        first_step = restore if restore is not None else 0
        rows = []
        k = 0
        while 0.5 + 0.1 * k <= last + 1e-9:
            moment = start + timedelta(hours=0.5 + 0.1 * k)
            rows.append({"ts": moment.timestamp(), "step": first_step + 60 * (k + 1), "tokens_per_s": 400_000.0,
                         "iteration_s": 0.6, "loss": 3.0 - 0.0001 * (first_step + 60 * (k + 1))})
            k += 1
        for hours in checkpoints:
            step = first_step + 60 * (round((hours - 0.5) / 0.1) + 1)
            rows.append({"ts": (start + timedelta(hours=hours)).timestamp(), "step": step, "event.checkpoint": 90.0})
        if restore is not None:
            rows.append({"ts": (start + timedelta(hours=0.3)).timestamp(), "step": restore, "event.restore": 360.0})
        api_client.force_authenticate(owner)
        posted = api_client.post(f"/api/v1/jobs/alps/{job_id}/metrics/", rows, format="json")
        assert posted.status_code in (200, 201), posted.json()
    # telemetry of the first allocation: GPU 0 of nid000001 does nothing (idle by the scoring's rule)
    first = Job.objects.get(cluster__name="alps", job_id=5001)
    frame = synthetic(hosts=HOSTS, fields=(1001, 1002, 1004, 1005, 155), minutes=240, every_s=60, start=first.start_time)
    frame["value"] = np.where(frame["field"] == 155, 300.0, 0.6) + 0.3 * frame["value"] / np.where(frame["field"] == 155, 700.0, 1.0)
    idle = (frame["host"] == "nid000001") & (frame["gpu"] == 0)
    frame.loc[idle, "value"] = 0.0
    store.write(frame)
    record = job_saturation_refresh(first)
    assert record.status == "ready", record.message
    api_client.force_authenticate(owner)
    made = api_client.post("/api/v1/campaigns/", {"name": "apertus-syn", "jobs": [f"alps/{p[0]}" for p in PLAN]}, format="json")
    assert made.status_code == 201, made.json()
    return api_client, made.json()["id"]


def test_goodput_and_every_badput_part_match_the_hand_computation(campaign_world):
    api_client, pk = campaign_world
    body = api_client.get(f"/api/v1/campaigns/{pk}/").json()
    _close(body["allocated_gpu_hours"], EXPECTED["allocated"], "allocated")
    _close(body["productive_gpu_hours"], EXPECTED["productive"], "productive")
    _close(body["goodput"], EXPECTED["productive"] / EXPECTED["allocated"], "goodput")
    for part, hours in EXPECTED["badput"].items():
        _close(body["badput"][part], hours, part)
    _close(body["queue_hours"], EXPECTED["queue_hours"], "queue")
    per_job = {row["job"]: row for row in body["jobs"]}
    _close(per_job["alps/5003"]["productive_gpu_hours"], 0.0, "5003 productive")
    _close(per_job["alps/5002"]["badput"]["lost_work"], 3.8, "5002 lost")
    # each failure named, with what it cost (lost work + hang)
    causes = {row["job"]: (row["cause"], row["lost_gpu_hours"]) for row in body["failures"]}
    assert {job: cause for job, (cause, _) in causes.items()} == {
        "alps/5002": "node failure", "alps/5003": "NCCL timeout", "alps/5004": "time limit without a final checkpoint"}
    for job, lost in (("alps/5002", 4.2), ("alps/5003", 15.8), ("alps/5004", 4.2)):
        _close(causes[job][1], lost, f"{job} cost")
    nccl = next(row for row in body["failures"] if row["job"] == "alps/5003")
    assert "SIGABRT" in nccl["evidence"] and "30 min" in nccl["evidence"]
    assert body["older_restarts"] == [{"job": "alps/5004", "resumed_from": 3360, "newest_checkpoint": 4020}]
    # MTBF: 14.7 allocated hours over 3 failures; 29.4 node-hours / 3 / 1000 per 1,000 nodes
    _close(body["mtbf_hours"], 4.9, "MTBF")
    _close(body["mtbf_hours_per_1000_nodes"], 0.0098, "MTBF per 1,000 nodes")
    checkpoint = body["checkpoint"]
    assert checkpoint["cost_s"] == 90.0 and checkpoint["interval_s"] == 3600.0
    m = 4.9 * 3600
    ratio = 90 / (2 * m)
    _close(checkpoint["young_daly_s"], (2 * 90 * m) ** 0.5 * (1 + ratio ** 0.5 / 3 + ratio / 9) - 90, "Young-Daly")


def test_csv_and_the_page_say_the_same(campaign_world, client):
    api_client, pk = campaign_world
    csv = api_client.get(f"/api/v1/campaigns/{pk}/jobs.csv")
    assert csv.status_code == 200 and csv["Content-Type"].startswith("text/csv")
    lines = csv.content.decode().splitlines()
    assert lines[0].startswith("job,name,state") and len(lines) == 6
    assert "alps/5003" in lines[3] and "NCCL timeout" in lines[3]
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="ada"))
    page = client.get(f"/campaigns/{pk}/").content.decode()
    assert "56.7 %" in page and "NCCL timeout" in page and "node failure" in page
    # the member job's first screen links to the campaign
    screen = client.get("/jobs/alps/5002/summary/").content.decode()
    assert f'href="/campaigns/{pk}/"' in screen and "allocation 2 of 5" in screen
