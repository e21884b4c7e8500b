"""The storage app: write bursts found in rates built by hand, GET /api/v1/jobs/<cluster>/<job_id>/storage/ on
readings imported through the real parser (who may read it, a job token), the panel's first screen and its
empty state, and the demo's synthetic job_stats read back by the parser."""
from datetime import timedelta

import numpy as np
import pytest
from django.core.cache import cache
from django.utils import timezone as dj_timezone

from apps.jobs.models import Cluster, Job
from apps.storage import bursts, panel
from apps.storage.synthetic import IoProfile, Reading, counters
from apps.telemetry.lustre import parse_text

NOW = dj_timezone.now().replace(microsecond=0, second=0)
T0 = NOW - timedelta(hours=2)
OSTS = ("fs-OST0000", "fs-OST0001", "fs-OST0002")


def test_bursts_stand_out_of_the_steady_level_and_the_verdict_says_them():
    times = np.arange(np.datetime64("2026-01-01T00:00"), np.datetime64("2026-01-01T02:00"), np.timedelta64(60, "s"))
    rate = np.full(len(times), 5e6)
    rate[30:32] = 20e9   # 2 minutes at 20 GB/s
    rate[90:92] = 20e9
    found = bursts.find_bursts(times, rate, 60)
    assert [str(b["start"])[:16] for b in found] == ["2026-01-01T00:30", "2026-01-01T01:30"]
    assert found[0]["peak_rate"] == 20e9 and found[0]["write_bytes"] == pytest.approx(2 * 60 * 20e9, rel=0.01)
    # the GPUs: idle in the 60 s buckets of the first burst, no telemetry at the second
    gpu_times = times[:60]
    activity = np.full(60, 0.9)
    activity[30:32] = 0.05
    idle = bursts.idle_during(found, gpu_times, activity, 60)
    assert idle == [round(2 * 60 * (1 - 0.05 / 0.9)), None]  # two buckets at 0.05 of the usual 0.9
    words = bursts.verdict(found, idle)
    assert words == "Checkpoints: 2 bursts of ~2.4 TB every 60 min, writing at 20 GB/s; GPUs idle 113 s each (the 1 of 2 with GPU telemetry)"
    assert bursts.find_bursts(times, np.full(len(times), 5e6), 60) == []  # steady: no burst


def test_the_synthetic_counters_print_as_lustre_does_and_read_back():
    profile = IoProfile(job_id="alps.42", osts=OSTS, mdt="fs-MDT0000", read_bps=1e6, write_bps=1e6,
                        checkpoint_bytes=3e12, checkpoint_every_s=1800, start_epoch=T0.timestamp())
    reading = Reading(T0.timestamp() + 1900)
    reading.add(profile, 1900)
    result = parse_text(reading.text(), cluster="alps", ts=T0 + timedelta(seconds=1900))
    assert result.errors == [] and result.jobs == [("alps", 42)]
    written = result.frame[result.frame["name"].str.endswith("/write_bytes")]["value"].sum()
    # 1900 s at 1 MB/s plus one whole checkpoint (written 5..85 s after 1800 s)
    assert written == pytest.approx(1900 * 1e6 + 3e12, rel=1e-6)
    assert counters(profile, 1850)["fs-MDT0000"]["mkdir"][0] == 0  # 45 of 80 s: the directory counts when done


@pytest.fixture
def jobs(db, store):
    cache.clear()
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=2, name="other", user_name="mallory", account="a-other", state="RUNNING",
                       node_list=["nid000009"], node_count=1, gpus=4, start_time=T0)
    mine = Job.objects.create(cluster=cluster, job_id=1, name="train", user_name="alice", account="a-llm01", state="RUNNING",
                              node_list=["nid000001"], node_count=1, gpus=4, start_time=T0)
    return mine


def import_readings(store, job_id=1, minutes=60, every=30):
    """Readings every ``every`` s of a job with a 1.2 TB checkpoint 30 minutes in, through the real parser."""
    profile = IoProfile(job_id=f"alps.{job_id}", osts=OSTS, mdt="fs-MDT0000", read_bps=10e6, write_bps=1e6,
                        checkpoint_bytes=1.2e12, checkpoint_every_s=1800, start_epoch=T0.timestamp())
    for second in range(every, minutes * 60 + 1, every):
        reading = Reading(T0.timestamp() + second)
        reading.add(profile, second)
        result = parse_text(reading.text(), cluster="alps", ts=T0 + timedelta(seconds=second))
        store.write_job_series(result.frame)


def test_the_api_gives_rates_totals_and_bursts(api_client, make_user, jobs, store):
    import_readings(store)
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    answer = api_client.get("/api/v1/jobs/alps/1/storage/?step=30")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["step"] == 30 and body["coverage"]["readings"] == 120
    assert body["targets"] == ["fs-MDT0000", *OSTS]
    assert set(body["series"]) == {"time", "read_bytes", "write_bytes", "read_ops", "write_ops", "metadata_ops"}
    assert len(body["series"]["time"]) == len(body["series"]["write_bytes"])
    assert [burst["start"][:19] for burst in body["bursts"]] == [(T0 + timedelta(seconds=1800)).strftime("%Y-%m-%dT%H:%M:%S")]
    burst = body["bursts"][0]
    assert burst["write_bytes"] == pytest.approx(1.2e12, rel=0.05) and burst["peak_rate"] == pytest.approx(1.2e12 / 80, rel=0.2)
    assert body["totals"]["write_bytes"] == pytest.approx(1.2e12 + 3600 * 1e6, rel=1e-3)
    assert max(body["series"]["read_bytes"]) == pytest.approx(10e6, rel=0.05)
    assert min(v for v in body["series"]["write_bytes"] if v is not None) >= 0
    assert body["verdict"].startswith("Checkpoints: 1 burst of ~1.2 TB")
    assert "no GPU telemetry" in body["verdict"]


def test_only_those_who_may_see_the_job_read_it(api_client, make_user, jobs, store):
    from apps.jobs.services import job_token_issue

    import_readings(store)
    api_client.force_authenticate(make_user("mallory", accounts=["a-other"]))
    assert api_client.get("/api/v1/jobs/alps/1/storage/").status_code == 404
    api_client.force_authenticate(None)
    token = job_token_issue(jobs, created_by="alice")
    ok = api_client.get("/api/v1/jobs/alps/1/storage/", HTTP_AUTHORIZATION=f"JobToken {token}")
    assert ok.status_code == 200 and ok.json()["coverage"]["readings"] == 120
    assert api_client.get("/api/v1/jobs/alps/2/storage/", HTTP_AUTHORIZATION=f"JobToken {token}").status_code == 404


def test_bad_parameters_are_400s_and_a_job_without_stats_says_what_to_enable(api_client, make_user, jobs, store):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    assert api_client.get("/api/v1/jobs/alps/1/storage/?step=1").status_code == 400
    assert api_client.get("/api/v1/jobs/alps/1/storage/?since=0166-01-01").status_code == 400
    empty = api_client.get("/api/v1/jobs/alps/1/storage/").json()
    assert empty["coverage"] is None and empty["bursts"] == [] and "jobid_var=SLURM_JOB_ID" in empty["reason"]


@pytest.mark.parametrize("seconds_before_last", [0, 15, 29])
def test_a_window_holding_one_reading_per_counter_answers_no_rates(api_client, make_user, jobs, store, seconds_before_last):
    """Issue 33, finding 3c: ``?since=`` less than one reading interval before the last reading (35-55 s in the past
    on a live job read every 30 s) left one reading per counter, hence no rate, and the empty frame was a 500. It is
    a 200 with the readings' coverage, no series, and the totals the readings give."""
    import_readings(store, minutes=10)
    last = T0 + timedelta(seconds=600)
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    since = (last - timedelta(seconds=seconds_before_last)).strftime("%Y-%m-%dT%H:%M:%SZ")
    answer = api_client.get("/api/v1/jobs/alps/1/storage/", {"since": since})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["coverage"]["readings"] == 1 and body["bursts"] == [] and body["verdict"] == ""
    assert body["series"] == {"time": [], "read_bytes": [], "write_bytes": [], "read_ops": [], "write_ops": [],
                              "metadata_ops": []}
    assert body["totals"]["read_bytes"] == pytest.approx(10e6 * 600, rel=1e-3)


def test_the_panel_summary_and_page(client, make_user, jobs, store):
    assert panel.summary(jobs) is None  # no stats: nothing on the first screen
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get("/jobs/alps/1/").content.decode()
    assert 'id="storage-empty"' in page and "jobid_var=SLURM_JOB_ID" in page
    import_readings(store)
    cache.clear()
    part = panel.summary(jobs)
    assert part.findings[0].title.startswith("Checkpoints: 1 burst of ~1.2 TB") and part.findings[0].link == "#storage-figure"
    assert part.facts[0].value == "1.2 TB written"
    assert part.freshness[0].state == "stale"  # the readings stopped an hour ago while the job runs
    page = client.get("/jobs/alps/1/").content.decode()
    assert 'id="storage-figure"' in page and "Checkpoints: 1 burst" in page
    figure = client.get("/jobs/alps/1/panels/storage/io.json").json()
    assert [trace["name"] for trace in figure["data"]][:3] == ["write", "read", "metadata ops"]
    shaded = [shape for shape in figure["layout"]["shapes"] if shape["name"].startswith("burst")]
    assert len(shaded) == 2  # one burst on each of the two rows (no GPU telemetry, no tokens/s)
    assert figure["layout"]["uirevision"] == "storage"


def test_the_demo_feeder_sends_the_spans_readings_through_the_parser(jobs, store):
    from apps.core.demo import FeedContext
    from apps.storage import demo

    spec = demo._megatron_spec(jobs, NOW)
    context = FeedContext(seed=1, start=NOW - timedelta(minutes=5), end=NOW, origin=NOW - timedelta(minutes=5),
                          memory={"storage": {"jobs": [spec]}})
    summary = demo.feed(context)
    assert summary["readings"] == 10 and summary["rows"] > 0
    stored = store.read_job_series("alps", 1, names=[f"lustre/{demo.OSTS[0]}/write_bytes"])
    assert len(stored) == 10 and stored["value"].is_monotonic_increasing
    assert store.read_job_series("alps", 2).empty  # only the jobs the build gave I/O


def test_the_tokens_line_breaks_where_nothing_was_logged():
    from apps.storage.panel import _broken

    times = np.array(["2026-01-01T00:00", "2026-01-01T00:01", "2026-01-01T00:02", "2026-01-01T00:20", "2026-01-01T00:21"],
                     dtype="datetime64[ns]")
    x, y = _broken(times, [5.0, 6.0, 7.0, 1.0, 2.0])
    assert y == [5.0, 6.0, 7.0, None, 1.0, 2.0]  # no ramp drawn across the 18 silent minutes
    assert x[0] == "2026-01-01T00:00:00Z" and x[4] == "2026-01-01T00:20:00Z"
    assert _broken(times[:3], [1.0, 2.0, 3.0])[1] == [1.0, 2.0, 3.0]
