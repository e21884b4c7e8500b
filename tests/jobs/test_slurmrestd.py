"""The slurmrestd sync mode: the client's errors against real failures (a closed port, a missing
socket, a real HTTP server saying 401 or sending HTML), ``cluster_sync`` over HTTP, and a sync
from a real slurmrestd of the local test cluster (``tests/slurm_cluster.py``)."""
import json
import re
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import hostlist
import pytest

from apps.jobs.models import Cluster, Job
from apps.jobs.services import cluster_sync
from apps.jobs.slurm_json import parse_squeue
from apps.jobs.slurmrestd import SlurmRestClient, SlurmRestError

TOKEN = "eyJhbGciOiJIUzI1NiJ9.secret-token-value.c2lnbmF0dXJl"


# ---------------------------------------------------------------------------------------------
# A real HTTP server in a thread
# ---------------------------------------------------------------------------------------------
class FakeSlurmrestd:
    """``ThreadingHTTPServer`` on 127.0.0.1: ``routes[path] = (status, content type, body, delay)``;
    ``requests`` keeps (path with query, headers) of every request."""

    def __init__(self):
        self.routes: dict[str, tuple[int, str, bytes, float]] = {}
        self.requests: list[tuple[str, dict]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                fake.requests.append((self.path, dict(self.headers)))
                status, content_type, body, delay = fake.routes.get(
                    urlsplit(self.path).path, (404, "text/plain", b"Unable find requested URL.", 0))
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (timeout test)
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def route(self, path: str, status: int = 200, body: str | bytes = b"", content_type: str = "application/json",
              delay: float = 0) -> None:
        self.routes[path] = (status, content_type, body.encode() if isinstance(body, str) else body, delay)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def fake_restd():
    server = FakeSlurmrestd()
    yield server
    server.stop()


def closed_port() -> int:
    """A TCP port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def error_of(call) -> SlurmRestError:
    with pytest.raises(SlurmRestError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and TOKEN not in message and "secret-token" not in message
    return info.value


# ---------------------------------------------------------------------------------------------
# The client's errors
# ---------------------------------------------------------------------------------------------
def test_connection_refused_names_the_url():
    url = f"http://127.0.0.1:{closed_port()}"
    error = error_of(SlurmRestClient(url, user_name="belvedere", token=TOKEN).jobs)
    assert str(error) == f"slurmrestd {url}: GET /slurm/v0.0.38/jobs: connection refused " \
                         "(is slurmrestd running and listening there?)"
    assert error.status is None


def test_a_missing_unix_socket_names_the_path(tmp_path):
    path = tmp_path / "no-such.socket"
    error = error_of(SlurmRestClient(f"unix://{path}", token=TOKEN).jobs)
    assert str(error) == f"slurmrestd unix://{path}: GET /slurm/v0.0.38/jobs: no socket at {path}"


def test_a_unix_socket_nobody_listens_on_is_refused(tmp_path):
    path = tmp_path / "stale.socket"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))  # a socket file left behind by a dead slurmrestd
    sock.close()
    error = error_of(SlurmRestClient(f"unix://{path}").jobs)
    assert "connection refused" in str(error) and f"unix://{path}" in str(error)


def test_401_gives_the_status_and_the_first_line_of_the_body(fake_restd):
    fake_restd.route("/slurm/v0.0.38/jobs", 401, "Authentication failure\nrest_auth/jwt: token expired\n", "text/plain")
    error = error_of(SlurmRestClient(fake_restd.url, user_name="belvedere", token=TOKEN).jobs)
    assert str(error) == (f"slurmrestd {fake_restd.url}: GET /slurm/v0.0.38/jobs: "
                          "HTTP 401 Unauthorized: Authentication failure")
    assert error.status == 401
    # The credentials did go out, as slurmrestd's rest_auth/jwt wants them.
    [(path, headers)] = fake_restd.requests
    assert path == "/slurm/v0.0.38/jobs"
    assert headers["X-SLURM-USER-NAME"] == "belvedere" and headers["X-SLURM-USER-TOKEN"] == TOKEN


def test_a_token_echoed_by_the_server_is_not_repeated(fake_restd):
    fake_restd.route("/slurm/v0.0.38/jobs", 401, f"invalid token {TOKEN} for user belvedere", "text/plain")
    error = error_of(SlurmRestClient(fake_restd.url, user_name="belvedere", token=TOKEN).jobs)
    assert "invalid token <token> for user belvedere" in str(error)


def test_a_body_that_is_not_json(fake_restd):
    fake_restd.route("/slurm/v0.0.38/jobs", 200, "<html>\n<title>Sign in</title></html>", "text/html")
    error = error_of(SlurmRestClient(fake_restd.url, token=TOKEN).jobs)
    assert str(error) == (f"slurmrestd {fake_restd.url}: GET /slurm/v0.0.38/jobs: the answer is not JSON "
                          "(Content-Type text/html): <html>")


def test_slurms_own_error_document_is_quoted(fake_restd):
    # What 22.05.8 answers to /slurmdb/v0.0.38/jobs?start_time=<epoch seconds>.
    body = {"meta": {}, "errors": [{"description": "Unable to parse time format", "error_number": 9000,
                                    "error": "Query empty or not RFC7320 compliant", "source": "start_time"}]}
    fake_restd.route("/slurmdb/v0.0.38/jobs", 500, json.dumps(body, indent=2))
    error = error_of(lambda: SlurmRestClient(fake_restd.url).db_jobs(datetime.now(timezone.utc)))
    assert str(error).endswith("HTTP 500 Internal Server Error: Unable to parse time format: "
                               "Query empty or not RFC7320 compliant (source start_time)")


def test_no_answer_in_time(fake_restd):
    fake_restd.route("/slurm/v0.0.38/jobs", 200, "{}", delay=3)
    started = time.monotonic()
    error = error_of(SlurmRestClient(fake_restd.url, timeout=0.5, token=TOKEN).jobs)
    assert time.monotonic() - started < 2.5
    assert str(error) == f"slurmrestd {fake_restd.url}: GET /slurm/v0.0.38/jobs: no answer within 0.5 s"


@pytest.mark.parametrize("url, message", [
    ("ftp://host/x", "use http://host:port, https://host:port or unix:///path/to/socket"),
    ("unix://host/run/x.socket", "a Unix socket URL is unix:///absolute/path"),
    ("http://:6820", "no host"),
    ("http://host:notaport", "Port could not be cast"),
    ("https://user:hunter2@host:6820x", "slurmrestd URL 'https://host:6820x'"),
])
def test_unusable_urls_are_refused_at_once(url, message):
    with pytest.raises(SlurmRestError, match=re.escape(message)) as info:
        SlurmRestClient(url)
    assert "hunter2" not in str(info.value)


def test_db_jobs_asks_relative_to_now_and_drops_nothing_found(fake_restd):
    # 22.05.8 refuses epoch seconds and reads YYYY-MM-DDTHH:MM:SS in its own time zone; an empty
    # window answers 200 with the error 9003 where sacct --json says nothing.
    nothing = {"meta": {}, "errors": [{"description": "Nothing found", "error_number": 9003,
                                       "error": "Nothing found with query", "source": "slurmdb_jobs_get"}], "jobs": []}
    fake_restd.route("/slurmdb/v0.0.40/jobs", 200, json.dumps(nothing))
    two_hours_ago = datetime.now(timezone.utc) - timedelta(hours=2)
    body = SlurmRestClient(fake_restd.url, api_version="v0.0.40").db_jobs(two_hours_ago)
    assert json.loads(body)["errors"] == [] and json.loads(body)["jobs"] == []
    [(path, _)] = fake_restd.requests
    assert urlsplit(path).path == "/slurmdb/v0.0.40/jobs"
    [start] = parse_qs(urlsplit(path).query)["start_time"]
    assert re.fullmatch(r"now-\d+", start) and abs(int(start[4:]) - 7200) <= 2


# ---------------------------------------------------------------------------------------------
# cluster_sync over HTTP
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_cluster_sync_reads_both_documents_with_the_token_file(fake_restd, slurm_data, settings, tmp_path):
    token_file = tmp_path / "slurmrestd.token"
    token_file.write_text(f"SLURM_JWT={TOKEN}\n")  # what `scontrol token` prints
    settings.SLURMRESTD_USER_NAME, settings.SLURMRESTD_TOKEN_FILE = "belvedere", str(token_file)
    settings.SLURMRESTD_TOKEN = "not-this-one"
    fake_restd.route("/slurm/v0.0.38/jobs", 200, (slurm_data / "squeue_mixed.json").read_bytes())
    fake_restd.route("/slurmdb/v0.0.38/jobs", 200, (slurm_data / "sacct_finished.json").read_bytes())
    cluster = Cluster.objects.create(name="testcluster", sync_mode="slurmrestd", slurmrestd_url=fake_restd.url)
    counts = cluster_sync(cluster, since_hours=6)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok, cluster.last_sync_message
    assert counts["slurmrestd/jobs"]["jobs"] == 5 and counts["slurmrestd/slurmdb"]["jobs"] == 8
    assert Job.objects.get(cluster=cluster, job_id=7).state == "FAILED"
    assert Job.objects.get(cluster=cluster, job_id=1).node_list == ["nid000001", "nid000002"]
    assert [headers["X-SLURM-USER-TOKEN"] for _, headers in fake_restd.requests] == [TOKEN, TOKEN]
    assert abs(int(parse_qs(urlsplit(fake_restd.requests[1][0]).query)["start_time"][0][4:]) - 6 * 3600) <= 2
    # The token is read at every sync: a rotated one is used at once.
    token_file.write_text("rotated-token\n")
    cluster_sync(cluster)
    assert fake_restd.requests[-1][1]["X-SLURM-USER-TOKEN"] == "rotated-token"


@pytest.mark.django_db
def test_cluster_sync_failures_are_recorded_for_staff(fake_restd, settings, tmp_path):
    settings.SLURMRESTD_TOKEN = TOKEN
    cluster = Cluster.objects.create(name="alps", sync_mode="slurmrestd",
                                     slurmrestd_url=f"http://127.0.0.1:{closed_port()}")
    assert cluster_sync(cluster) == {}
    cluster.refresh_from_db()
    assert cluster.last_sync_ok is False
    assert "GET /slurm/v0.0.38/jobs: connection refused" in cluster.last_sync_message
    assert "GET /slurmdb/v0.0.38/jobs: connection refused" in cluster.last_sync_message
    assert TOKEN not in cluster.last_sync_message

    cluster.slurmrestd_url = ""
    cluster.save()
    cluster_sync(cluster)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok is False
    assert cluster.last_sync_message == "cluster alps syncs with slurmrestd but has no slurmrestd URL"

    settings.SLURMRESTD_TOKEN_FILE = str(tmp_path / "missing.token")
    cluster.slurmrestd_url = fake_restd.url
    cluster.save()
    cluster_sync(cluster)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok is False
    assert "missing.token: cannot read it (No such file or directory)" in cluster.last_sync_message
    assert fake_restd.requests == []


@pytest.mark.django_db
def test_no_accounting_is_a_note_and_bad_json_a_failure(fake_restd, slurm_data):
    fake_restd.route("/slurm/v0.0.38/jobs", 200, (slurm_data / "squeue_mixed.json").read_bytes())
    # /slurmdb/ is not routed: 404 "Unable find requested URL.", as 22.05 without slurmdbd answers.
    cluster = Cluster.objects.create(name="testcluster", sync_mode="slurmrestd", slurmrestd_url=fake_restd.url)
    counts = cluster_sync(cluster)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok and set(counts) == {"slurmrestd/jobs"}
    assert cluster.last_sync_message.startswith("slurmrestd/slurmdb: accounting is disabled on this cluster")
    assert "HTTP 404" in cluster.last_sync_message

    fake_restd.route("/slurm/v0.0.38/jobs", 200, '{"meta": {}, "jobs": [')  # cut short
    cluster_sync(cluster)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok is False and "slurmrestd/jobs: not JSON" in cluster.last_sync_message


# ---------------------------------------------------------------------------------------------
# A real slurmrestd
# ---------------------------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.django_db
def test_sync_from_a_real_slurmrestd(slurm_cluster, slurmrestd_socket, tmp_path, settings):
    tmp_path.chmod(0o755)
    job_id = slurm_cluster.sbatch("#!/bin/sh\nsrun -N2 -n2 sleep 120\n", "-N2", "--job-name=via-slurmrestd", "--time=5",
                                  f"--output={tmp_path}/slurm-%j.out", cwd=tmp_path)
    try:
        slurm_cluster.wait_for_state(job_id, "RUNNING", timeout=60)
        cluster = Cluster.objects.create(name=slurm_cluster.cluster_name, sync_mode="slurmrestd",
                                         slurmrestd_url=f"unix://{slurmrestd_socket}")
        counts = cluster_sync(cluster)
        cluster.refresh_from_db()
        assert cluster.last_sync_ok, cluster.last_sync_message
        job = Job.objects.get(cluster=cluster, job_id=job_id)
        shown = slurm_cluster.run("scontrol", "-o", "show", "job", str(job_id), check=True).stdout
        assert job.node_list == hostlist.expand_hostlist(re.search(r" NodeList=(\S+)", shown).group(1))
        assert (job.state, job.name, job.user_name, job.node_count, job.source) == (
            "RUNNING", "via-slurmrestd", "root", 2, "slurmrestd/jobs")
        # The same record as squeue --json gives.
        [from_squeue] = [record for record in parse_squeue(slurm_cluster.run("squeue", "--json", check=True).stdout,
                                                           cluster.name).jobs if record.job_id == job_id]
        assert job.node_list == list(from_squeue.node_list) and job.start_time == from_squeue.start_time
        # No slurmdbd here: slurmrestd runs without openapi/dbv0.0.38 and /slurmdb/ is a 404 - a note.
        assert set(counts) == {"slurmrestd/jobs"}
        assert "slurmrestd/slurmdb: accounting is disabled on this cluster" in cluster.last_sync_message
        assert "HTTP 404" in cluster.last_sync_message

        slurm_cluster.run("scancel", str(job_id), check=True)
        slurm_cluster.wait_for_state(job_id, "CANCELLED", timeout=30)
        cluster_sync(cluster)
        job.refresh_from_db()
        assert job.state == "CANCELLED" and job.end_time is not None and job.node_count == 2
    finally:
        slurm_cluster.run("scancel", str(job_id))

    # A plugin version this slurmrestd does not serve: the jobs path is a 404 too, and a failure.
    settings.SLURMRESTD_API_VERSION = "v0.0.37"
    cluster_sync(cluster)
    cluster.refresh_from_db()
    assert cluster.last_sync_ok is False
    assert f"slurmrestd unix://{slurmrestd_socket}: GET /slurm/v0.0.37/jobs: HTTP 404" in cluster.last_sync_message
