"""deploy/slurm/belvedere-prolog.sh and belvedere-epilog.sh: job start/end events and the job token.

The scripts run for real (dash as /bin/sh, and bash) with the environment slurmd gives a node
Prolog/Epilog, faked; the POSTs go to pytest-django's live server, so the token check, the
events endpoint, the job token and the database are the real ones.
"""
import http.server
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import tempfile
import subprocess
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from apps.jobs.models import Job, JobToken

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PROLOG = REPO / "deploy" / "slurm" / "belvedere-prolog.sh"
EPILOG = REPO / "deploy" / "slurm" / "belvedere-epilog.sh"
SHELLS = [shell for shell in ("sh", "bash") if shutil.which(shell)]
JOB_ID = 4242
NODES = "nid[000001-000002]"
USER = pwd.getpwuid(os.getuid()).pw_name
EVENTS = "/api/v1/jobs/events/"
JOB_URL = f"/api/v1/jobs/testcluster/{JOB_ID}/"


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def node(tmp_path) -> Path:
    """A node's files: the token directory (root's, 0755, as /run/belvedere), no settings file."""
    (tmp_path / "tokens").mkdir(mode=0o755)
    (tmp_path / "tokens").chmod(0o755)  # whatever the umask
    return tmp_path


def script_env(tree: Path, **overrides) -> dict:
    """What slurmd gives a node Prolog/Epilog (faked), plus test settings; nothing from our shell."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tree),
        "LC_ALL": "C",
        "BELVEDERE_LOG_STDERR": "1",
        "BELVEDERE_JOBS_CONFIG": str(tree / "jobs.env"),
        "BELVEDERE_TOKEN_FILE": str(tree / "jobs.token"),
        "BELVEDERE_JOB_TOKEN_DIR": str(tree / "tokens"),
        "BELVEDERE_DISCOVERY_SCRIPT": "",
        "BELVEDERE_EPILOG_JITTER": "0",
        "BELVEDERE_TIMEOUT": "20",
        "SLURM_JOB_ID": str(JOB_ID),
        "SLURM_JOBID": str(JOB_ID),
        "SLURM_JOB_USER": USER,
        "SLURM_JOB_UID": str(os.getuid()),
        "SLURM_JOB_GID": str(os.getgid()),
        "SLURM_JOB_ACCOUNT": "a-llm01",
        "SLURM_JOB_PARTITION": "normal",
        "SLURM_JOB_NODELIST": NODES,
        "SLURM_CLUSTER_NAME": "testcluster",
        "SLURMD_NODENAME": "nid000001",
    }
    env.update(overrides)
    return {key: value for key, value in env.items() if value is not None}


def run(script: Path, tree: Path, *args: str, shell: str = "sh", timeout: float = 60,
        **overrides) -> subprocess.CompletedProcess:
    return subprocess.run([shell, str(script), *args], env=script_env(tree, **overrides),
                          capture_output=True, text=True, timeout=timeout)


def write_service_token(tree: Path, user) -> None:
    from rest_framework.authtoken.models import Token

    token_file = tree / "jobs.token"
    token_file.write_text(Token.objects.create(user=user).key + "\n")
    token_file.chmod(0o600)


def token_file(tree: Path, job_id: int = JOB_ID) -> Path:
    return tree / "tokens" / f"job-{job_id}.token"


def job_token_get(api_client, key: str, url: str = JOB_URL):
    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {key}")
    try:
        return api_client.get(url)
    finally:
        api_client.credentials()


def wait_for(predicate, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def printed(script: Path, tree: Path, **overrides) -> dict:
    result = run(script, tree, "--print", **overrides)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# ---------------------------------------------------------------------------------------------
# --print: the bodies, from Slurm's environment
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", [PROLOG, EPILOG], ids=["prolog", "epilog"])
def test_the_scripts_are_executable_posix_scripts(script):
    assert os.access(script, os.X_OK), "slurmd runs Prolog/Epilog directly: they must be executable"
    assert script.read_text().startswith("#!/bin/sh\n")


@pytest.mark.parametrize("shell", SHELLS)
def test_print_shows_the_start_event_with_the_hostlist_unchanged(node, shell):
    result = run(PROLOG, node, "--print", shell=shell, SLURM_JOB_NAME="train llama")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    time_sent = body.pop("time")
    assert body == {"cluster": "testcluster", "job_id": JOB_ID, "event": "start", "user": USER, "account": "a-llm01",
                    "name": "train llama", "partition": "normal", "nodes": NODES, "token": True}
    assert abs((timezone.now() - datetime.fromisoformat(time_sent.replace("Z", "+00:00"))).total_seconds()) < 120
    assert time_sent.endswith("Z")
    # --print touches nothing: no token file, no directory created.
    assert list((node / "tokens").iterdir()) == []
    assert run(PROLOG, node, "--print", BELVEDERE_JOB_TOKEN_DIR=str(node / "new")).returncode == 0
    assert not (node / "new").exists()


def test_print_uses_what_slurm_22_05_gives_a_node_prolog(node):
    # Observed with Slurm 22.05.8: a node Prolog gets SLURM_NODELIST, not SLURM_JOB_NODELIST, and
    # neither the account nor the job name.
    body = printed(PROLOG, node, SLURM_JOB_NODELIST=None, SLURM_NODELIST=NODES, SLURM_JOB_ACCOUNT=None,
                   SLURM_JOB_NAME=None)
    assert body["nodes"] == NODES
    assert "account" not in body and "name" not in body
    # BELVEDERE_CLUSTER names the cluster in the portal when it differs from Slurm's ClusterName.
    assert printed(PROLOG, node, BELVEDERE_CLUSTER="alps")["cluster"] == "alps"


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", [
    'evil", "user": "root", "x": "\nsecond line',
    'back\\slash\\", "token": false}',
    "tab\there\r\x01\x1b[2J",
    "naïve – 日本",
    "x" * 1000,
])
def test_a_hostile_job_name_never_breaks_the_json(node, shell, name):
    result = run(PROLOG, node, "--print", shell=shell, SLURM_JOB_NAME=name)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1  # one line
    body = json.loads(result.stdout)
    assert body["user"] == USER and body["token"] is True and body["cluster"] == "testcluster"
    assert set(body) == {"cluster", "job_id", "event", "user", "account", "name", "partition", "nodes", "time", "token"}
    # Printable ASCII only, at most 200 characters; what survives is the name as it was.
    assert len(body["name"]) <= 200 and all(" " <= char <= "~" for char in body["name"])
    if name.isascii() and name.isprintable() and len(name) <= 200:
        assert body["name"] == name


@pytest.mark.parametrize("overrides, problem", [
    ({"SLURM_JOB_USER": 'bob"; rm -rf /'}, "SLURM_JOB_USER"),
    ({"SLURM_JOB_USER": "bob\nroot"}, "SLURM_JOB_USER"),
    ({"SLURM_JOB_USER": None}, "SLURM_JOB_USER"),
    ({"SLURM_JOB_ID": "42; reboot", "SLURM_JOBID": None}, "SLURM_JOB_ID"),
    ({"SLURM_JOB_ID": None, "SLURM_JOBID": None}, "SLURM_JOB_ID"),
    ({"SLURM_CLUSTER_NAME": "test cluster"}, "cluster name"),
])
def test_a_start_event_without_a_valid_job_id_user_or_cluster_is_not_sent(node, overrides, problem):
    result = run(PROLOG, node, "--print", **overrides)
    assert result.returncode == 0
    assert result.stdout == ""
    assert problem in result.stderr and result.stderr.count("\n") == 1  # one harmless log line


def test_bad_optional_values_are_dropped_and_said(node):
    result = run(PROLOG, node, "--print", SLURM_JOB_ACCOUNT='a"b', SLURM_JOB_PARTITION="p\nq",
                 SLURM_JOB_NODELIST='nid[1-2]"}')
    body = json.loads(result.stdout)
    assert "account" not in body and "partition" not in body and "nodes" not in body
    assert "SLURM_JOB_ACCOUNT a?b" in result.stderr and "node list" in result.stderr


@pytest.mark.parametrize("exit_code2, exit_code, state, code", [
    ("3:0", "768", "FAILED", 3),        # the batch script exited 3 (seen with 22.05.8)
    (None, "768", "FAILED", 3),         # only the raw wait status
    ("0:0", "0", "ENDED", None),        # completed, or cancelled/timed out: 22.05.8 shows 0:0 for scancel
    ("0:9", "9", "ENDED", None),        # killed by a signal: cancelled, out of memory, ...
    (None, None, "ENDED", None),        # nothing known
    ("junk", "-1", "ENDED", None),
])
def test_print_shows_the_end_event_with_the_state_slurm_lets_the_epilog_know(node, exit_code2, exit_code, state, code):
    body = printed(EPILOG, node, SLURM_JOB_EXIT_CODE2=exit_code2, SLURM_JOB_EXIT_CODE=exit_code,
                   SLURM_JOB_DERIVED_EC="1792")
    body.pop("time")
    expected = {"cluster": "testcluster", "job_id": JOB_ID, "event": "end", "user": USER, "partition": "normal",
                "nodes": NODES, "state": state}
    if code is not None:
        expected["exit_code"] = code
    assert body == expected


def test_the_config_file_is_parsed_not_run_and_the_environment_wins(node, tmp_path):
    canary = tmp_path / "ran"
    (node / "jobs.env").write_text(
        "# site settings\n"
        "export BELVEDERE_CLUSTER=alps\n"
        "BELVEDERE_JOB_TOKENS='0'\n"
        "BELVEDERE_EPILOG_JITTER=3\n"
        f"touch {canary}\n"
        f"BELVEDERE_URL=$(touch {canary})\n"
        "PATH=/nowhere\n"
    )
    result = run(PROLOG, node, "--print")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["cluster"] == "alps" and "token" not in body
    assert not canary.exists()
    assert "unknown config setting PATH" in result.stderr
    assert json.loads(run(PROLOG, node, "--print", BELVEDERE_CLUSTER="daint").stdout)["cluster"] == "daint"
    # The Epilog reads the same file; each script accepts the other's settings without a word.
    assert "BELVEDERE_EPILOG_JITTER" not in result.stderr
    epilog = run(EPILOG, node, "--print")
    assert json.loads(epilog.stdout)["cluster"] == "alps"
    assert "BELVEDERE_JOB_TOKENS" not in epilog.stderr and "unknown config setting PATH" in epilog.stderr


def test_without_belvedere_url_both_exit_silently(node):
    token_file(node).write_text("bvj_left-over\n")
    for script in (PROLOG, EPILOG):
        result = run(script, node, BELVEDERE_URL=None)
        assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), script
    # The Epilog removes the job's token file even where no portal is configured.
    assert not token_file(node).exists()


# ---------------------------------------------------------------------------------------------
# Against the real portal (live server)
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_prolog_then_epilog_record_the_job_and_hand_out_a_working_job_token(node, live_server, make_user, api_client):
    write_service_token(node, make_user("svc", is_staff=True))

    # The Prolog mode, as slurmd runs it: the POST happens before it returns.
    prolog = run(PROLOG, node, BELVEDERE_URL=live_server.url, SLURM_JOB_NAME="train")
    assert prolog.returncode == 0 and prolog.stdout == "", prolog.stderr
    assert f"reported job {JOB_ID} on testcluster" in prolog.stderr and "HTTP 200" in prolog.stderr
    job = Job.objects.get(cluster__name="testcluster", job_id=JOB_ID)
    assert job.state == "RUNNING" and job.start_time is not None and job.end_time is None
    assert (job.user_name, job.account, job.partition, job.name) == (USER, "a-llm01", "normal", "train")
    assert job.nodes == NODES and job.node_list == ["nid000001", "nid000002"] and job.node_count == 2

    # The job token: in its file, for the job's user only, and it opens this job's API.
    path = token_file(node)
    info = path.stat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.getuid()
    assert oct(stat.S_IMODE((node / "tokens").stat().st_mode)) == oct(0o755)
    key = path.read_text().strip()
    assert key.startswith("bvj_") and path.read_text() == key + "\n"
    assert [p.name for p in (node / "tokens").iterdir()] == [path.name]  # no temporary file left
    response = job_token_get(api_client, key)
    assert response.status_code == 200, response.content
    assert response.json()["job_id"] == JOB_ID and response.json()["state"] == "RUNNING"
    assert JobToken.objects.filter(job=job).count() == 1

    # The Epilog, waited for: 22.05 says 0:0 for completed and cancelled jobs alike.
    epilog = run(EPILOG, node, "--foreground", BELVEDERE_URL=live_server.url,
                 SLURM_JOB_EXIT_CODE="0", SLURM_JOB_EXIT_CODE2="0:0", SLURM_JOB_DERIVED_EC="0")
    assert epilog.returncode == 0, epilog.stderr
    assert f"reported end of job {JOB_ID} on testcluster (ENDED)" in epilog.stderr
    job.refresh_from_db()
    assert job.state == "ENDED" and job.end_time is not None and job.exit_code is None
    assert not path.exists()

    # The token outlives the job by the grace period (JOB_TOKEN_GRACE_HOURS), so code finishing
    # up (or an epilog of its own) can still post; then it stops working.
    token = JobToken.objects.get(job=job)
    grace = timedelta(hours=settings.JOB_TOKEN_GRACE_HOURS)
    assert token.expires == job.end_time + grace
    assert token.is_valid() and not token.is_valid(now=job.end_time + grace + timedelta(seconds=1))
    response = job_token_get(api_client, key)
    assert response.status_code == 200 and response.json()["state"] == "ENDED"
    JobToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    response = job_token_get(api_client, key)
    assert response.status_code in (401, 403) and "expired" in response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_a_job_that_exited_non_zero_is_failed_and_the_epilog_never_waits(node, live_server, make_user):
    write_service_token(node, make_user("svc", is_staff=True))
    assert run(PROLOG, node, BELVEDERE_URL=live_server.url).returncode == 0
    assert token_file(node).exists()

    # slurmd starts the Epilog in its own process group and kills that group once the Epilog
    # exits; the sender must have left it (setsid) to survive.
    started = time.monotonic()
    epilog = subprocess.Popen(["sh", str(EPILOG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True,
                              env=script_env(node, BELVEDERE_URL=live_server.url, SLURM_JOB_EXIT_CODE="768",
                                             SLURM_JOB_EXIT_CODE2="3:0", BELVEDERE_EPILOG_JITTER="1"))
    stdout, stderr = epilog.communicate(timeout=10)
    elapsed = time.monotonic() - started
    try:
        os.killpg(epilog.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    assert epilog.returncode == 0 and stdout == "" and stderr == ""
    assert elapsed < 5  # it returns before the POST (and the jitter)
    assert not token_file(node).exists()  # removed before it returned
    assert wait_for(lambda: Job.objects.get(job_id=JOB_ID).state == "FAILED"), "the background POST never arrived"
    job = Job.objects.get(job_id=JOB_ID)
    assert job.exit_code == 3 and job.end_time is not None


@pytest.mark.django_db(transaction=True)
def test_a_token_without_the_permission_fails_in_foreground_only(node, live_server, make_user):
    from django.contrib.auth.models import Permission

    service = make_user("svc-slurm")
    write_service_token(node, service)

    refused = run(PROLOG, node, "--foreground", BELVEDERE_URL=live_server.url)
    assert refused.returncode == 22, refused.stderr  # curl --fail(-with-body) on HTTP >= 400
    assert "HTTP 403" in refused.stderr and "jobs.add_job" in refused.stderr
    assert not Job.objects.exists() and not token_file(node).exists()
    assert run(PROLOG, node, BELVEDERE_URL=live_server.url).returncode == 0  # the Prolog mode: 0 anyway

    # The documented set-up: a service account holding jobs.add_job (no staff rights).
    service.user_permissions.add(Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    allowed = run(PROLOG, node, "--foreground", BELVEDERE_URL=live_server.url)
    assert allowed.returncode == 0, allowed.stderr
    assert Job.objects.get(job_id=JOB_ID).state == "RUNNING" and token_file(node).exists()


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_portal_never_fails_or_long_delays_the_job(node, tmp_path, make_user):
    write_service_token(node, make_user("svc", is_staff=True))
    # Nothing listens on port 9 (discard): refused at once.
    started = time.monotonic()
    prolog = run(PROLOG, node, BELVEDERE_URL="http://127.0.0.1:9", BELVEDERE_TIMEOUT="5")
    assert prolog.returncode == 0 and prolog.stdout == ""
    assert time.monotonic() - started < 5
    assert "no HTTP answer" in prolog.stderr
    assert list((node / "tokens").iterdir()) == []

    # A portal that accepts the connection but never answers: the wait is BELVEDERE_TIMEOUT.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        prolog = run(PROLOG, node, BELVEDERE_URL=url, BELVEDERE_TIMEOUT="2")
        elapsed = time.monotonic() - started
    assert prolog.returncode == 0 and "no HTTP answer within 2s" in prolog.stderr and "curl status 28" in prolog.stderr
    assert 1.5 < elapsed < 6
    assert list((node / "tokens").iterdir()) == []
    foreground = run(PROLOG, node, "--foreground", BELVEDERE_URL="http://127.0.0.1:9")
    assert foreground.returncode == 7  # curl: could not connect


def test_a_portal_answering_500_gets_one_retry_within_the_time_budget(node):
    (node / "jobs.token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hits.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(500 if len(hits) == 1 else 200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"state":"RUNNING","job_token":"bvj_' + b"A" * 43 + b'"}' if len(hits) > 1 else b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = run(PROLOG, node, "--foreground", BELVEDERE_URL=f"http://127.0.0.1:{server.server_port}",
                     BELVEDERE_TIMEOUT="5")
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr
    assert len(hits) == 2 and hits[0] == hits[1]
    assert token_file(node).read_text() == "bvj_" + "A" * 43 + "\n"


@pytest.mark.django_db(transaction=True)
def test_an_unsafe_token_directory_is_not_used_and_no_token_is_issued(node, live_server, make_user):
    write_service_token(node, make_user("svc", is_staff=True))
    tokens = node / "tokens"
    tokens.chmod(0o777)  # as a user could make it, e.g. under /tmp
    result = run(PROLOG, node, "--foreground", BELVEDERE_URL=live_server.url)
    assert result.returncode == 0, result.stderr  # the start event itself was sent
    assert "writable by group or others" in result.stderr
    assert Job.objects.get(job_id=JOB_ID).state == "RUNNING"
    assert not JobToken.objects.exists()  # not asked for: there was nowhere safe to put it
    assert list(tokens.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_the_token_file_is_written_without_following_links(node, live_server, make_user, tmp_path):
    write_service_token(node, make_user("svc", is_staff=True))
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    token_file(node).symlink_to(victim)
    # A missing directory is created, root's and mode 0755.
    result = run(PROLOG, node, "--foreground", BELVEDERE_URL=live_server.url)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n"
    assert not token_file(node).is_symlink() and token_file(node).read_text().startswith("bvj_")

    fresh = node / "run" / "belvedere"
    result = run(PROLOG, node, "--foreground", BELVEDERE_URL=live_server.url, BELVEDERE_JOB_TOKEN_DIR=str(fresh) + "/")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o755 and fresh.stat().st_uid == os.getuid()
    assert (fresh / f"job-{JOB_ID}.token").exists()
    # A re-run (requeued job) replaces the file with a new token; the Epilog removes it.
    epilog = run(EPILOG, node, "--foreground", BELVEDERE_URL=live_server.url, BELVEDERE_JOB_TOKEN_DIR=str(fresh))
    assert epilog.returncode == 0, epilog.stderr
    assert list(fresh.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_all_nodes_of_a_job_start_at_once_and_each_gets_a_token(tmp_path, live_server, make_user):
    """Every node of a job runs the Prolog at the same moment; each needs its own token file."""
    nodes = [f"nid{i:06d}" for i in range(1, 5)]
    trees = {}
    for name in nodes:
        trees[name] = tmp_path / name
        (trees[name] / "tokens").mkdir(parents=True, mode=0o755)
        (trees[name] / "tokens").chmod(0o755)
    write_service_token(tmp_path, make_user("svc", is_staff=True))
    for tree in trees.values():
        shutil.copy(tmp_path / "jobs.token", tree / "jobs.token")
    processes = [
        subprocess.Popen(["sh", str(PROLOG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=script_env(tree, BELVEDERE_URL=live_server.url, SLURMD_NODENAME=name,
                                        SLURM_JOB_NODELIST="nid[000001-000004]"))
        for name, tree in trees.items()
    ]
    outputs = [process.communicate(timeout=60) for process in processes]
    assert all(process.returncode == 0 for process in processes)
    missing = [name for name, tree in trees.items() if not token_file(tree).exists()]
    assert not missing, [err for _, err in outputs]
    assert Job.objects.get(job_id=JOB_ID).node_count == 4
    assert JobToken.objects.filter(job__job_id=JOB_ID).count() == 4


# ---------------------------------------------------------------------------------------------
# The discovery script, started by the Prolog
# ---------------------------------------------------------------------------------------------
def fake_discovery(tree: Path, executable: bool = True) -> Path:
    script = tree / "belvedere-discovery.sh"
    script.write_text('#!/bin/sh\nprintf "%s|%s|%s\\n" "$*" "$SLURMD_NODENAME" "${BELVEDERE_URL-unset}" >> "$0.ran"\n')
    script.chmod(0o755 if executable else 0o644)
    return script


def test_the_prolog_starts_the_discovery_script_even_when_the_portal_is_down(node):
    script = fake_discovery(node)
    (node / "jobs.env").write_text("BELVEDERE_URL=http://127.0.0.1:9\n")
    (node / "jobs.token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    result = run(PROLOG, node, BELVEDERE_DISCOVERY_SCRIPT=str(script), BELVEDERE_TIMEOUT="2")
    assert result.returncode == 0
    # In the Prolog mode, with no arguments; the settings of jobs.env are not handed over (it
    # reads its own discovery.env).
    assert Path(f"{script}.ran").read_text() == "|nid000001|unset\n"
    # --foreground makes it wait too; --print never starts it.
    run(PROLOG, node, "--foreground", BELVEDERE_DISCOVERY_SCRIPT=str(script), BELVEDERE_TIMEOUT="2")
    run(PROLOG, node, "--print", BELVEDERE_DISCOVERY_SCRIPT=str(script))
    assert Path(f"{script}.ran").read_text().splitlines()[1:] == ["--foreground|nid000001|unset"]


def test_a_missing_or_non_executable_discovery_script_is_skipped(node):
    script = fake_discovery(node, executable=False)
    for path in (script, node / "missing.sh"):
        result = run(PROLOG, node, BELVEDERE_URL=None, BELVEDERE_DISCOVERY_SCRIPT=str(path))
        assert (result.returncode, result.stderr) == (0, "")
    assert not Path(f"{script}.ran").exists()
    # Root runs it: not when others could have changed it.
    script.chmod(0o777)
    result = run(PROLOG, node, BELVEDERE_URL=None, BELVEDERE_DISCOVERY_SCRIPT=str(script))
    assert result.returncode == 0 and "writable by group or others" in result.stderr
    assert not Path(f"{script}.ran").exists()
    # The default is the documented install path.
    assert "/etc/slurm/belvedere-discovery.sh" in PROLOG.read_text()


# ---------------------------------------------------------------------------------------------
# On a real Slurm 22.05 cluster: Prolog, TaskProlog, the job, Epilog
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_on_a_real_slurm_cluster_the_job_finds_its_token_and_the_epilog_reports_its_end(live_server, make_user,
                                                                                         request):
    from tests.slurm_cluster import LocalSlurmCluster

    reason = LocalSlurmCluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    # Not under pytest's tmp_path: munged wants every directory above its socket searchable by all.
    workdir = Path(tempfile.mkdtemp(prefix="belvedere-prolog-"))
    workdir.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))
    tokens = workdir / "tokens"
    write_service_token(workdir, make_user("svc", is_staff=True))
    (workdir / "jobs.env").write_text(
        f"BELVEDERE_URL={live_server.url}\nBELVEDERE_TOKEN_FILE={workdir / 'jobs.token'}\n"
        f"BELVEDERE_JOB_TOKEN_DIR={tokens}\nBELVEDERE_DISCOVERY_SCRIPT=\n"
        "BELVEDERE_EPILOG_JITTER=0\nBELVEDERE_LOG_STDERR=1\n"
    )
    (workdir / "taskprolog.env").write_text(f"BELVEDERE_URL={live_server.url}\nBELVEDERE_JOB_TOKEN_DIR={tokens}\n")
    # slurmd gives a Prolog no environment of ours (not even PATH): a site uses the default
    # /etc/belvedere/jobs.env; here a wrapper names the test's file and keeps the log lines.
    hooks = {}
    for name, script in (("prolog", PROLOG), ("epilog", EPILOG)):
        hooks[name] = workdir / f"{name}.sh"
        hooks[name].write_text(f"#!/bin/sh\nBELVEDERE_JOBS_CONFIG={workdir / 'jobs.env'} exec {script} "
                               f"2>>{workdir / name}.log\n")
        hooks[name].chmod(0o755)
    cluster = LocalSlurmCluster(workdir / "slurm", cluster_name="prologtest", nodes=2, prolog=hooks["prolog"],
                                epilog=hooks["epilog"], task_prolog=PROLOG.parent / "belvedere-taskprolog.sh")
    request.addfinalizer(cluster.stop)
    cluster.start()

    # The batch script prints its token (found through the TaskProlog's BELVEDERE_JOB_TOKEN_FILE,
    # so the file existed before the job's first task), then a step on both nodes, then fails.
    script = (
        "#!/bin/sh\n"
        'echo "file=$BELVEDERE_JOB_TOKEN_FILE"\n'
        'echo "token=$(cat "$BELVEDERE_JOB_TOKEN_FILE")"\n'
        "srun -N2 -n2 sh -c 'test -r \"$BELVEDERE_JOB_TOKEN_FILE\" && echo step-has-token'\n"
        "exit 3\n"
    )
    job_id = cluster.sbatch(script, "-N2", "-n2", "--time=2", "--output", str(workdir / "out-%j.txt"), cwd=workdir,
                            env={"BELVEDERE_TASKPROLOG_CONF": str(workdir / "taskprolog.env")})

    def ended():
        return Job.objects.filter(cluster__name="prologtest", job_id=job_id, state="FAILED").exists()

    def logs():
        return "\n".join(f"{p.name}: {p.read_text()}" for p in workdir.glob("*.log")) + "\n" + cluster.log_tails(10)

    assert wait_for(ended, 60), logs()
    job = Job.objects.get(cluster__name="prologtest", job_id=job_id)
    assert (job.user_name, job.partition, job.exit_code) == (USER, "normal", 3)
    assert job.node_list == ["nid000001", "nid000002"] and job.start_time <= job.end_time  # whole seconds
    lines = (workdir / f"out-{job_id}.txt").read_text().splitlines()
    assert f"file={tokens}/job-{job_id}.token" in lines, lines
    assert lines.count("step-has-token") == 2, lines
    key = next(line[len("token="):] for line in lines if line.startswith("token="))
    assert key.startswith("bvj_")
    assert wait_for(lambda: not any(tokens.iterdir()), 20), list(tokens.iterdir())
    # Still valid during the grace period after the end.
    from rest_framework.test import APIClient

    response = job_token_get(APIClient(), key, f"/api/v1/jobs/prologtest/{job_id}/")
    assert response.status_code == 200 and response.json()["state"] == "FAILED"
    assert "HTTP 200" in (workdir / "prolog.log").read_text()
