"""The training-loop helper (belvedere_client.log) against real HTTP servers: batching, retries after the portal
comes back, dropping the oldest rows when the queue is full, nothing without settings, only rank 0; and, in a real
training-loop process, a portal killed or hanging mid-run does not slow or fail the loop (issue 20, acceptance 4).
The last test posts from a real process to the real portal with a job token."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

from belvedere_client.metrics import BelvedereMetricsWarning, Config, MetricsClient

from .recorder import RecordingServer

HERE = Path(__file__).parent
WAIT_S = 30  # how long a test waits for something that should happen soon (never a measured duration)


def wait_for(condition, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"waited {timeout} s for {what}")


def client_for(url: str, **options) -> MetricsClient:
    defaults = {"interval_s": 60.0, "batch_rows": 5, "timeout_s": 5.0, "backoff_s": 0.05, "backoff_max_s": 0.2}
    return MetricsClient(Config(url, "bvj_secret", "alps", "4242", **{**defaults, **options}))


@pytest.fixture
def server():
    recorder = RecordingServer()
    yield recorder
    recorder.stop()


def free_port() -> int:
    probe = RecordingServer()
    probe.stop()
    return probe.port


def test_full_batches_go_at_once_the_rest_on_flush_with_the_job_token(server):
    client = client_for(server.url, batch_rows=5)
    for step in range(12):
        client.log(step, {"tokens_per_s": 100.0 + step, "loss": None})
    wait_for(lambda: len(server.batches) >= 2, "the two full batches")
    assert [len(body["rows"]) for _, _, body in server.batches] == [5, 5]  # the interval (60 s) has not come
    assert client.flush(timeout=WAIT_S)
    path, headers, body = server.batches[-1]
    assert path == "/api/v1/jobs/alps/4242/metrics/"
    assert headers["Authorization"] == "JobToken bvj_secret" and headers["Content-Type"] == "application/json"
    assert [row["step"] for row in server.rows] == list(range(12))
    assert server.rows[3]["tokens_per_s"] == 103.0 and "loss" not in server.rows[3]  # None values left out
    assert all(set(row) == {"ts", "step", "tokens_per_s"} and row["ts"] > 1.7e9 for row in server.rows)
    assert client.counts["sent"] == 12 and client.counts["dropped"] == 0


def test_a_part_batch_goes_when_the_interval_comes(server):
    client = client_for(server.url, batch_rows=500, interval_s=0.2)
    for step in range(3):
        client.log(step, {"loss": 1.0})
    wait_for(lambda: server.batches, "the interval's batch")
    assert [row["step"] for row in server.rows] == [0, 1, 2]


def test_rows_wait_while_the_portal_is_away_and_go_once_when_it_comes_back():
    port = free_port()  # nobody listens here yet: connections are refused
    client = client_for(f"http://127.0.0.1:{port}", batch_rows=2)
    for step in range(5):
        client.log(step, {"iteration_s": 1.5})
    wait_for(lambda: client.counts["failed_posts"] >= 3, "failed posts with backoff")
    assert client.counts["sent"] == 0
    server = RecordingServer(port)
    try:
        assert client.flush(timeout=WAIT_S)
        assert [row["step"] for row in server.rows] == [0, 1, 2, 3, 4]  # each row once, in order
    finally:
        server.stop()


def test_a_server_error_is_retried_and_a_refusal_is_not(server):
    server.status = 503
    client = client_for(server.url, batch_rows=1)
    client.log(1, {"loss": 1.0})
    wait_for(lambda: client.counts["failed_posts"] >= 2, "retries of the 503")
    server.status = 201
    assert client.flush(timeout=WAIT_S) and [row["step"] for row in server.rows] == [1]
    server.status = 400  # the portal will never take this batch: dropped, counted, said once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.log(2, {"loss": 1.0})
        assert client.flush(timeout=WAIT_S)
    assert client.counts["refused"] == 1 and client.counts["failed_posts"] >= 2
    assert any("refused a batch" in str(w.message) for w in caught)


def test_a_full_queue_drops_the_oldest_rows_and_counts_them():
    port = free_port()
    client = client_for(f"http://127.0.0.1:{port}", batch_rows=10, max_queue=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(40):
            client.log(step, {"loss": float(step)})
    dropped_warnings = [w for w in caught if "queue is full" in str(w.message)]
    assert len(dropped_warnings) == 1 and dropped_warnings[0].category is BelvedereMetricsWarning
    server = RecordingServer(port)
    try:
        assert client.flush(timeout=WAIT_S)
    finally:
        server.stop()
    steps = [row["step"] for row in server.rows]
    # At most one batch in flight (10 rows) and a full queue (10 rows) survive; the newest are among them.
    assert steps == sorted(set(steps)) and steps[-10:] == list(range(30, 40))
    assert client.counts["dropped"] == 40 - len(steps) >= 20
    assert client.counts["sent"] == len(steps)


def test_bad_names_and_values_are_dropped_counted_and_said_once(server):
    client = client_for(server.url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(2):
            client.log(step, {"good": 1, "bad name": 1.0, "nan_value": float("nan"), "text": "1.0", "flag": True})
        client.log(-1, {"loss": 2.0})
    assert client.flush(timeout=WAIT_S)
    assert [{k: v for k, v in row.items() if k != "ts"} for row in server.rows] == [
        {"step": 0, "good": 1.0}, {"step": 1, "good": 1.0}, {"loss": 2.0}]  # a bad step is left out, not the row
    assert client.counts["bad_names"] == 2 and client.counts["bad_values"] == 7
    messages = [str(w.message) for w in caught]
    assert sum("metric name 'bad name'" in m for m in messages) == 1
    assert sum("finite numbers" in m for m in messages) == 1 and sum("step=-1" in m for m in messages) == 1


def run_script(code: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def test_without_settings_log_records_nothing_and_warns_once(client_env):
    code = ("import threading, warnings\nwarnings.simplefilter('always')\nimport belvedere_client as bv\n"
            "for i in range(100): bv.log(step=i, loss=1.0)\n"
            "print(threading.active_count(), bv.stats(), bv.flush())")
    result = run_script(code, client_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "{}", "True"]  # no sender thread, nothing counted
    assert result.stderr.count("BelvedereMetricsWarning") == 1
    assert "BELVEDERE_URL, BELVEDERE_JOB_TOKEN, BELVEDERE_CLUSTER, BELVEDERE_JOB_ID not set" in result.stderr


def test_the_slurm_job_and_the_taskprologs_token_file_are_enough(server, client_env, tmp_path):
    token = tmp_path / "job-77.token"
    token.write_text("bvj_from_file\n")
    env = {**client_env, "BELVEDERE_JOB_URL": f"{server.url}/jobs/daint/77/", "BELVEDERE_JOB_TOKEN_FILE": str(token),
           "SLURM_JOB_ID": "99", "SLURM_CLUSTER_NAME": "slurm-name", "SLURM_PROCID": "0"}
    result = run_script("import belvedere_client as bv\nbv.log(step=1, loss=0.5)", env)
    assert result.returncode == 0, result.stderr
    (path, headers, body), = server.batches  # sent by the atexit flush
    assert path == "/api/v1/jobs/daint/77/metrics/" and headers["Authorization"] == "JobToken bvj_from_file"
    assert body["rows"][0]["loss"] == 0.5


@pytest.mark.parametrize("rank_env, sent", [({"RANK": "3"}, False), ({"SLURM_PROCID": "1"}, False),
                                            ({"RANK": "0", "SLURM_PROCID": "5"}, True),
                                            ({"RANK": "2", "BELVEDERE_ALL_RANKS": "1"}, True)])
def test_only_rank_zero_sends_by_default(server, client_env, rank_env, sent):
    env = {**client_env, "BELVEDERE_URL": server.url, "BELVEDERE_JOB_TOKEN": "bvj_x", "BELVEDERE_CLUSTER": "alps",
           "BELVEDERE_JOB_ID": "5", **rank_env}
    result = run_script("import belvedere_client as bv\nbv.log(step=1, loss=0.5)\nprint(bv.flush(30))", env)
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr
    assert len(server.rows) == (1 if sent else 0) and "Warning" not in result.stderr


# -- acceptance 4: a dead or hanging portal does not slow the training loop --------------------------------------------
TIMEOUT_S = 5.0  # the helper's network timeout in the loop below


@pytest.mark.parametrize("portal_fate", ["killed", "hanging"])
def test_a_dead_or_hanging_portal_does_not_slow_or_fail_the_training_loop(client_env, portal_fate):
    portal = subprocess.Popen([sys.executable, str(HERE / "recorder.py")], stdout=subprocess.PIPE, text=True)
    loop = None
    try:
        port = int(portal.stdout.readline().split()[1])
        env = {**client_env, "BELVEDERE_URL": f"http://127.0.0.1:{port}", "BELVEDERE_JOB_TOKEN": "bvj_x",
               "BELVEDERE_CLUSTER": "alps", "BELVEDERE_JOB_ID": "7", "TEST_TIMEOUT_S": str(TIMEOUT_S),
               "TEST_INTERVAL_S": "0.05", "TEST_BATCH_ROWS": "5", "TEST_FLUSH_S": "0.5"}
        iterations, pause_at = 400, 100
        loop = subprocess.Popen([sys.executable, str(HERE / "training_loop.py"), str(iterations), str(pause_at), "0.005"],
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert loop.stdout.readline().startswith("paused")
        assert portal.stdout.readline().startswith("rows")  # the portal was receiving before it went
        if portal_fate == "killed":
            portal.kill()
            portal.wait()
        else:  # still accepts connections (the kernel does), never answers
            portal.send_signal(signal.SIGSTOP)
        loop.stdin.write("go\n")
        loop.stdin.flush()
        summary = json.loads(loop.stdout.readline())
        loop.wait(timeout=120)
        exited = time.time()
        assert loop.returncode == 0, loop.stderr.read()
    finally:
        for process in (loop, portal):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert summary["done"] == iterations
    stats = summary["stats"]
    assert stats["logged"] == iterations and stats["sent"] < iterations  # it really lost the portal mid-run
    # Far below the network timeout: no log() call, nor all of them after the portal went, waited on the network.
    assert summary["max_log_s"] < TIMEOUT_S / 10 and summary["sum_log_s_after"] < TIMEOUT_S / 10
    # The atexit flush gives up after its deadline (0.5 s) instead of waiting out a hanging request.
    assert exited - summary["end"] < TIMEOUT_S


# -- to the real portal ------------------------------------------------------------------------------------------------
def test_a_training_process_posts_to_the_portal_with_its_job_token(live_server, transactional_db, store, make_user,
                                                                   client_env):
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from apps.jobs.models import Cluster, Job
    from apps.jobs.services import job_token_issue

    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=4343, user_name="alice", account="a",
                             state="RUNNING", submit_time=timezone.now() - timedelta(minutes=5),
                             start_time=timezone.now() - timedelta(minutes=1), node_list=["nid000001"], gpus=4)
    key = job_token_issue(job, "test")
    env = {**client_env, "BELVEDERE_URL": live_server.url, "BELVEDERE_JOB_TOKEN": key, "SLURM_CLUSTER_NAME": "alps",
           "SLURM_JOB_ID": "4343", "SLURM_PROCID": "0"}
    code = ("import belvedere_client as bv\n"
            "for i in range(20): bv.log(step=i, tokens_per_s=5000.0 + i, iteration_s=2.5, loss=3.0 - 0.1 * i, **{'val.acc': 0.5})\n"
            "bv.event('checkpoint', seconds=12.0, step=19)\n"
            "import json; print(json.dumps([bv.flush(30), bv.stats()]))")
    result = run_script(code, env, timeout=120)
    assert result.returncode == 0, result.stderr
    flushed, stats = json.loads(result.stdout)
    assert flushed and stats["sent"] == 21 and stats["refused"] == 0, result.stdout + result.stderr
    user_token = Token.objects.create(user=make_user("alice")).key
    request = urllib.request.Request(f"{live_server.url}/api/v1/jobs/alps/4343/metrics/",
                                     headers={"Authorization": f"Token {user_token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        body = json.load(response)
    series = body["series"]
    assert series["tokens_per_s"]["value"] == [5000.0 + i for i in range(20)]
    assert series["tokens_per_s"]["step"] == list(range(20))
    assert series["loss"]["value"][-1] == pytest.approx(1.1) and len(series["val.acc"]["value"]) == 20
    assert series["event.checkpoint"]["value"] == [12.0] and series["event.checkpoint"]["step"] == [19]


def test_the_run_the_client_names_puts_its_job_into_the_campaign_of_that_run(live_server, transactional_db, store,
                                                                               client_env):
    """Issue 37: a campaign is found from "a job's --comment or the client's run key": a job whose training process
    sets BELVEDERE_RUN joins the job that named the same run with sbatch --comment run=NAME; a bad name is not sent
    (said once) and the portal refuses one naming the field."""
    from django.utils import timezone

    from apps.campaigns.models import CampaignJob
    from apps.campaigns.services import campaigns_detect
    from apps.jobs.models import Cluster, Job
    from apps.jobs.services import job_token_issue

    cluster = Cluster.objects.create(name="alps")
    now = timezone.now()
    first = Job.objects.create(cluster=cluster, job_id=5001, user_name="alice", account="a-llm", name="pretrain",
                               state="COMPLETED", submit_time=now - timedelta(hours=7), start_time=now - timedelta(hours=6),
                               end_time=now - timedelta(hours=2), node_list=["nid000001"], gpus=4,
                               comment="run=apertus-70b")
    second = Job.objects.create(cluster=cluster, job_id=5002, user_name="alice", account="a-llm", name="pretrain-resume",
                                state="RUNNING", submit_time=now - timedelta(hours=2), start_time=now - timedelta(minutes=5),
                                node_list=["nid000002"], gpus=4)
    key = job_token_issue(second, "test")
    env = {**client_env, "BELVEDERE_URL": live_server.url, "BELVEDERE_JOB_TOKEN": key, "SLURM_CLUSTER_NAME": "alps",
           "SLURM_JOB_ID": "5002", "SLURM_PROCID": "0", "BELVEDERE_RUN": "apertus-70b"}
    code = ("import belvedere_client as bv, json\n"
            "for i in range(3): bv.log(step=i, tokens_per_s=5000.0)\n"
            "print(json.dumps([bv.flush(30), bv.stats()]))")
    result = run_script(code, env, timeout=120)
    assert result.returncode == 0, result.stderr
    flushed, stats = json.loads(result.stdout)
    assert flushed and stats["sent"] == 3 and stats["refused"] == 0, result.stdout + result.stderr
    second.refresh_from_db()
    assert second.run_name == "apertus-70b"
    campaigns_detect()
    members = CampaignJob.objects.filter(job__in=[first, second]).select_related("campaign")
    assert {m.job_id for m in members} == {first.pk, second.pk}
    assert len({m.campaign_id for m in members}) == 1 and members[0].campaign.name == "apertus-70b"

    # a name the portal would refuse is not sent by the client (said once) ...
    bad = run_script(code, {**env, "BELVEDERE_RUN": "no spaces please"}, timeout=120)
    assert bad.returncode == 0 and "BELVEDERE_RUN" in bad.stderr
    assert json.loads(bad.stdout)[1]["refused"] == 0
    # ... and a body that names one anyway is refused naming the field, nothing stored
    request = urllib.request.Request(f"{live_server.url}/api/v1/jobs/alps/5002/metrics/", method="POST",
                                     data=json.dumps({"run": "no spaces", "rows": [{"step": 9, "loss": 1.0}]}).encode(),
                                     headers={"Authorization": f"JobToken {key}", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 400 and b'"run"' in refused.value.read()
    second.refresh_from_db()
    assert second.run_name == "apertus-70b"
