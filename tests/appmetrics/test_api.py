"""The application-metrics API: rows in and out, the model config, log and TensorBoard uploads, who may write,
and efficiency numbers computed by hand."""
import math
from datetime import datetime, timedelta, timezone

import pytest
from rest_framework.test import APIClient

from apps.jobs.models import Cluster, Job
from apps.jobs.services import job_token_issue

NODES = [f"nid{n:06d}" for n in range(1, 9)]
T0 = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
TS = int(T0.timestamp()) + 600  # inside the job's run time: rows are refused outside its write window


@pytest.fixture
def job(db, store):
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=2, user_name="mallory", account="a-other", state="RUNNING",
                       node_list=NODES[:1], node_count=1, gpus=4, start_time=T0)
    return Job.objects.create(cluster=cluster, job_id=1, user_name="alice", account="a-llm01", state="RUNNING",
                              node_list=NODES, node_count=8, gpus=32, start_time=T0)


@pytest.fixture
def token(job):
    return job_token_issue(job, created_by="alice")


@pytest.fixture
def alice(api_client, make_user, job):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    return api_client


def rows(n=6, every=10.0, tps=100_000.0):
    return [{"ts": T0.timestamp() + 600 + i * every, "step": 10 * (i + 1), "tokens_per_s": tps, "loss": 3.0 - 0.01 * i}
            for i in range(n)]


def test_a_job_token_posts_rows_and_they_come_back_by_name(client, job, token):
    response = client.post("/api/v1/jobs/alps/1/metrics/", {"rows": rows()}, content_type="application/json",
                           HTTP_AUTHORIZATION=f"JobToken {token}")
    assert response.status_code == 201, response.content
    assert response.json()["rows"] == 12  # 6 rows x 2 metrics
    body = client.get("/api/v1/jobs/alps/1/metrics/?names=loss", HTTP_AUTHORIZATION=f"JobToken {token}").json()
    assert list(body["series"]) == ["loss"]
    assert body["series"]["loss"]["value"] == pytest.approx([3.0 - 0.01 * i for i in range(6)])
    assert body["series"]["loss"]["step"] == [10, 20, 30, 40, 50, 60]
    assert body["coverage"]["rows"] == 6
    assert datetime.fromisoformat(body["series"]["loss"]["ts"][0]) == T0 + timedelta(seconds=600)


def test_sending_the_same_rows_again_changes_nothing(alice, job):
    for _ in range(2):
        assert alice.post("/api/v1/jobs/alps/1/metrics/", rows(), format="json").status_code == 201
    assert alice.get("/api/v1/jobs/alps/1/metrics/").json()["coverage"]["rows"] == 12


@pytest.mark.parametrize("bad, where, words", [
    ({"ts": 1764000000000, "loss": 1.0}, "rows[1].ts", "milliseconds"),
    ({"ts": TS, "loss": "high"}, "rows[1].loss", "not a finite number"),
    ({"ts": TS, "1loss": 1.0}, "rows[1].1loss", "starts with a letter"),
    ({"ts": TS, "step": -3, "loss": 1.0}, "rows[1].step", "whole number"),
    ({"ts": TS}, "rows[1]", "no metric"),
])
def test_one_bad_row_refuses_the_batch_and_says_where(alice, job, bad, where, words):
    response = alice.post("/api/v1/jobs/alps/1/metrics/", {"rows": [rows(1)[0], bad]}, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert errors[0]["field"] == where and words in errors[0]["message"]
    assert alice.get("/api/v1/jobs/alps/1/metrics/").json()["coverage"]["rows"] == 0  # nothing half-written


def test_project_members_read_but_only_the_owner_staff_or_token_write(api_client, make_user, job):
    api_client.force_authenticate(make_user("bob", accounts=["a-llm01"]))
    assert api_client.get("/api/v1/jobs/alps/1/metrics/").status_code == 200
    assert api_client.post("/api/v1/jobs/alps/1/metrics/", rows(), format="json").status_code == 403
    assert api_client.put("/api/v1/jobs/alps/1/model/", {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 8, "vocab": 100},
                          format="json").status_code == 403
    api_client.force_authenticate(make_user("eve"))
    for path in ("metrics/", "model/", "efficiency/"):
        assert api_client.get(f"/api/v1/jobs/alps/1/{path}").status_code == 404


def test_a_job_token_writes_only_its_own_job(client, job, token):
    response = client.post("/api/v1/jobs/alps/2/metrics/", {"rows": rows()}, content_type="application/json",
                           HTTP_AUTHORIZATION=f"JobToken {token}")
    assert response.status_code == 404


def test_model_config_round_trip_and_refusals(alice, job):
    assert alice.get("/api/v1/jobs/alps/1/model/").status_code == 404
    config = {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 8, "vocab": 100, "global_batch": 16}
    body = alice.put("/api/v1/jobs/alps/1/model/", config, format="json").json()
    assert body["layers"] == 2 and body["source"] == "api" and body["model_flops_per_token"] > 0
    assert alice.get("/api/v1/jobs/alps/1/model/").json()["global_batch"] == 16
    response = alice.put("/api/v1/jobs/alps/1/model/", {**config, "heads": 5}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "heads"
    response = alice.put("/api/v1/jobs/alps/1/model/", {**config, "moe_experts": 8}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "moe_topk"
    assert alice.get("/api/v1/jobs/alps/1/model/").json()["heads"] == 4  # the refused PUT changed nothing


def test_efficiency_from_logged_throughput_and_a_stated_model(alice, job):
    # 8 nodes x 4 GPUs = 32 GPUs at a steady 100,000 tokens/s -> 3,125 tokens/s/GPU.
    alice.post("/api/v1/jobs/alps/1/metrics/", rows(n=60), format="json")
    config = {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 8, "vocab": 100, "gpu_peak_tflops": 1.0}
    model = alice.put("/api/v1/jobs/alps/1/model/", config, format="json").json()
    body = alice.get("/api/v1/jobs/alps/1/efficiency/").json()
    assert body["gpus"] == 32
    assert body["tokens_per_s_per_gpu"] == pytest.approx(3125.0)
    assert body["mfu"] == pytest.approx(3125.0 * model["model_flops_per_token"] / 1e12)
    assert body["energy_per_token_j"] is None and body["events"] == []
    assert any("telemetry" in why for why in body["missing"])


def _job_stats(at: float, written: int) -> str:
    """One reading of ``lctl get_param obdfilter.*.job_stats`` with job 1's bytes written so far."""
    return (f"obdfilter.scratch-OST0000.job_stats=\njob_stats:\n- job_id:          alps.1\n"
            f"  snapshot_time:   {at:.9f} secs.nsecs\n"
            f"  write_bytes:     {{ samples: {written >> 20}, unit: bytes, min: 1048576, max: 1048576, sum: {written}, sumsq: 0 }}\n")


def test_without_gpu_telemetry_a_checkpoint_is_explained_by_its_marker_and_the_lustre_writes(alice, job, make_user,
                                                                                              api_client):
    # a steady 100,000 tokens/s every 10 s for 20 min; at 10:20 a 60-s checkpoint: throughput at a quarter, marked
    start = T0.timestamp() + 600
    body = [{"ts": start + i * 10, "step": i + 1, "tokens_per_s": 25_000.0 if 60 <= i < 66 else 100_000.0}
            for i in range(120)]
    body.append({"ts": start + 600, "event.checkpoint": 60.0})
    assert alice.post("/api/v1/jobs/alps/1/metrics/", body, format="json").status_code in (200, 201)
    # Lustre read every 30 s: 3 GB/s (90 GB per reading) during the checkpoint, nothing else
    staff = APIClient()
    staff.force_authenticate(make_user("ops", is_staff=True))
    written = 0
    for k in range(41):
        at = start + 30 * k
        if start + 600 < at <= start + 660:
            written += 90 * 10**9
        answer = staff.generic("POST", f"/api/v1/telemetry/import/?format=lustre-jobstats&cluster=alps&ts={at:.0f}",
                               _job_stats(at, written), content_type="text/plain")
        assert answer.status_code == 200, answer.content
    efficiency = alice.get("/api/v1/jobs/alps/1/efficiency/").json()
    [event] = efficiency["events"]
    assert event["kind"] == "checkpoint" and event["start"].startswith("2026-11-24T10:20")
    assert "(event.checkpoint, took 60 s), writes 3.0 GB/s to the file system" in event["reason"]
    assert efficiency["coverage"]["names"] == ["event.checkpoint", "tokens_per_s"]  # the app's rows, not Lustre's
    assert any("GPU telemetry" in why for why in efficiency["missing"])


def test_efficiency_without_anything_says_what_is_missing(alice, job):
    body = alice.get("/api/v1/jobs/alps/1/efficiency/").json()
    assert body["mfu"] is None and body["tokens_per_s"] is None
    assert any("tokens_per_s" in why for why in body["missing"])
    assert any("model config" in why for why in body["missing"])


MEGATRON_LOG = """\
------------------------ arguments ------------------------
  global_batch_size ............................... 16
  hidden_size ..................................... 64
  num_attention_heads ............................. 4
  num_layers ...................................... 2
  padded_vocab_size ............................... 128
  seq_length ...................................... 8
-------------------- end of arguments ---------------------
 [2026-11-24 10:10:00] iteration       10/    1000 | consumed samples:          160 | elapsed time per iteration (ms): 500.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 5.000000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |
 [2026-11-24 10:10:05] iteration       20/    1000 | consumed samples:          320 | elapsed time per iteration (ms): banana | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 4.900000E+00 |
 [2026-11-24 10:10:10] iteration       30/    1000 | consumed samples:          480 | elapsed time per iteration (ms): 400.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 4.800000E+00 | loss scale: 1.0 | grad norm: 0.900 | number of skipped iterations:   0 | number of nan iterations:   0 |
"""


def test_a_megatron_log_gives_series_config_and_line_precise_errors(alice, job):
    response = alice.generic("POST", "/api/v1/jobs/alps/1/metrics/?format=megatron-log", MEGATRON_LOG.encode(),
                             content_type="text/plain")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["model_config"] is True
    assert [error["line"] for error in body["errors"]] == [10]
    model = alice.get("/api/v1/jobs/alps/1/model/").json()
    assert (model["layers"], model["hidden"], model["heads"], model["seq_len"], model["vocab"]) == (2, 64, 4, 8, 128)
    series = alice.get("/api/v1/jobs/alps/1/metrics/?names=iteration_s,tokens_per_s").json()["series"]
    assert series["iteration_s"]["value"] == pytest.approx([0.5, 0.4])
    assert series["iteration_s"]["step"] == [10, 30]
    # tokens/s = global batch x sequence length / iteration time = 16 x 8 / 0.5
    assert series["tokens_per_s"]["value"] == pytest.approx([256.0, 320.0])


def test_a_log_past_the_limit_is_refused(alice, job, settings):
    settings.APPMETRICS_MAX_LOG_BYTES = 1000
    response = alice.generic("POST", "/api/v1/jobs/alps/1/metrics/?format=megatron-log", MEGATRON_LOG.encode() * 3,
                             content_type="text/plain")
    assert response.status_code == 413


def test_a_tensorboard_file_imports(alice, job, tmp_path):
    from tensorboard.summary import Writer

    writer = Writer(str(tmp_path))
    for step in range(5):
        writer.add_scalar("lm loss", 4.0 - step / 10, step=step * 10)
    writer.flush()
    writer.close()
    [path] = list(tmp_path.glob("events.out.tfevents.*"))
    response = alice.generic("POST", "/api/v1/jobs/alps/1/metrics/?format=tensorboard", path.read_bytes(),
                             content_type="application/octet-stream")
    assert response.status_code == 201, response.content
    loss = alice.get("/api/v1/jobs/alps/1/metrics/?names=loss").json()["series"]["loss"]
    assert loss["step"] == [0, 10, 20, 30, 40]
    assert loss["value"] == pytest.approx([4.0, 3.9, 3.8, 3.7, 3.6])


def test_json_rows_must_say_they_are_json(alice, job):
    response = alice.generic("POST", "/api/v1/jobs/alps/1/metrics/", b"step,loss\n1,2\n", content_type="text/csv")
    assert response.status_code in (400, 415)
    assert "format" in response.json()["detail"] or "json" in response.json()["detail"].lower()


def test_long_series_are_thinned_to_the_point_budget(alice, job):
    alice.post("/api/v1/jobs/alps/1/metrics/", rows(n=500, every=1.0), format="json")
    body = alice.get("/api/v1/jobs/alps/1/metrics/?names=loss&max_points=50").json()["series"]["loss"]
    assert len(body["value"]) <= 50 and body["points"] == 500
    assert body["step"][0] == 10 and body["step"][-1] == 5000
    assert not math.isnan(body["value"][-1])


@pytest.mark.parametrize("query, field", [("since=0166-11-05T10:52:39Z", "since"), ("until=3591-06-11T04:26:41%2B08:13", "until"),
                                          ("since=2026-11-24T12:00:00Z&until=2026-11-24T11:00:00Z", "until")])
def test_a_window_outside_the_store_s_years_or_backwards_is_a_400_naming_it(alice, job, query, field):
    response = alice.get(f"/api/v1/jobs/alps/1/metrics/?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == field


def test_a_40_s_pause_of_every_gpu_is_named_from_the_stored_samples_without_a_telemetry_product(alice, job, store):
    """Issue 34: a 40-s pause of all GPUs inside one minute, throughput 80 % down, read "no hardware signal
    explains it". The efficiency answer reads the GPUs' samples around the dip from the store at their own
    resolution (every 10 s here) and names the pause."""
    import pandas as pd

    start = T0.timestamp() + 600
    pause = start + 600  # 10:20:00 to 10:20:40
    body = [{"ts": start + i * 10, "step": i + 1, "tokens_per_s": 20_000.0 if pause <= start + i * 10 < pause + 40 else 100_000.0}
            for i in range(120)]
    assert alice.post("/api/v1/jobs/alps/1/metrics/", body, format="json").status_code in (200, 201)
    stamps = [start + 10 * k for k in range(120)]
    store.write(pd.DataFrame([{"ts": pd.Timestamp(at, unit="s", tz="UTC"), "cluster": "alps", "host": host, "gpu": gpu,
                               "uuid": f"GPU-{host}-{gpu}", "field": 1002, "value": 0.0 if pause <= at < pause + 40 else 0.7}
                              for at in stamps for host in NODES for gpu in range(4)]))
    [event] = alice.get("/api/v1/jobs/alps/1/efficiency/").json()["events"]
    assert event["kind"] == "pause" and event["start"].startswith("2026-11-24T10:20:00")
    assert "all the GPUs paused together for 40 s from 10:20:00 (in their own samples, every 10 s)" in event["reason"]
