"""Sending: gzip'ed NDJSON batches POSTed to a stand-in portal (a real `http.server` on 127.0.0.1),
retries, the bounded queue, and a portal that cannot be reached at all."""
import gzip
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .recording import MIB, UUID0, UUID1, load

collector = load()
RUNNER = Path(__file__).with_name("recording.py")
PY = sys.executable
JOB_TOKEN = "bvj_3q8VQh2mZk1cYw9R0aTtLx"
PATH = "/api/v1/telemetry/samples/"


class Portal:
    """Records every request; answers with the (status, body) pairs in `answers`, then 202."""

    def __init__(self):
        self.requests = []
        self.answers = []
        portal = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                portal.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                        "body": body})
                status, answer = portal.answers.pop(0) if portal.answers else (202, {"accepted": True})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_PUT = do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def lines(self, request):
        return [json.loads(line) for line in gzip.decompress(request["body"]).decode().splitlines()]

    def samples(self):
        return [line for request in self.requests for line in self.lines(request)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def portal():
    server = Portal()
    yield server
    server.close()


def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def samples(count, start=0):
    return [(collector.iso(1_760_000_000 + i), 0, UUID0, 1002, i / 100) for i in range(start, start + count)]


def sink(url, **options):
    settings = dict(batch_size=1000, batch_seconds=0.05, queue_size=1000, http_timeout=2.0, flush_timeout=2.0)
    settings.update(options)
    return collector.HttpSink(url + PATH, "JobToken " + JOB_TOKEN, "nid000001", **settings)


# --------------------------------------------------------------------------------------------
def test_a_wrapped_job_sends_gzip_ndjson_to_the_portal(portal, tmp_path):
    """The whole chain in real processes: srun's task environment, the wrapper, its child, the monitor
    thread (GPM answers from the recording adapter) and the sender thread, against a live HTTP server."""
    token = tmp_path / "job-4242.token"
    token.write_text(JOB_TOKEN + "\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "BELVEDERE_"))}
    env.update({"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "nid000001",
                "SLURM_STEP_GPUS": "0,1", "BELVEDERE_JOB_TOKEN_FILE": str(token),
                "BELVEDERE_JOB_URL": f"{portal.url}/jobs/alps/4242/"})
    result = subprocess.run([PY, str(RUNNER), "--source", "gpm", "--interval", "0.1", "--batch-seconds", "0.2",
                             "--fields", "1002,1009,1010,155,252,1076", "--host-metrics", "off", "--",
                             PY, "-c", "import time; time.sleep(0.7)"],
                            env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert len(portal.requests) >= 2  # batched by time while the job ran, then the rest at the end
    for request in portal.requests:
        headers = {key.lower(): value for key, value in request["headers"].items()}
        assert (request["method"], request["path"]) == ("POST", PATH)
        assert headers["authorization"] == f"JobToken {JOB_TOKEN}"
        assert headers["content-type"] == "application/x-ndjson"
        assert headers["content-encoding"] == "gzip"
        assert headers["user-agent"].startswith("belvedere-collector/")
        assert request["body"][:2] == b"\x1f\x8b"
    received = portal.samples()
    assert all(set(line) == {"ts", "host", "gpu", "uuid", "field", "value"} for line in received)
    assert {(line["gpu"], line["uuid"]) for line in received} == {(0, UUID0), (1, UUID1)}
    assert {line["host"] for line in received} == {"nid000001"}
    values = {(line["field"], line["value"]) for line in received}
    assert values == {(1002, 0.625), (1009, 2048.0 * MIB), (1010, 512.25 * MIB), (155, 215.5), (252, 40960.0)}
    reads = len(received) // 10
    assert reads >= 3 and len(received) == 10 * reads
    assert f"sent {len(received)} of {len(received)} samples to {portal.url}{PATH}" in result.stderr


def test_batches_by_count_in_order(portal):
    out = sink(portal.url, batch_size=2, batch_seconds=30)
    out.put(samples(5))
    assert wait_for(lambda: len(portal.requests) == 2)
    out.close()
    assert [len(portal.lines(request)) for request in portal.requests] == [2, 2, 1]
    assert [line["value"] for line in portal.samples()] == [0.0, 0.01, 0.02, 0.03, 0.04]
    assert portal.samples()[0] == {"ts": "2025-10-09T08:53:20.000000Z", "host": "nid000001", "gpu": 0,
                                   "uuid": UUID0, "field": 1002, "value": 0.0}


def test_a_busy_portal_is_retried(portal, capsys):
    portal.answers = [(503, {"detail": "busy"})]
    out = sink(portal.url)
    out.put(samples(3))
    assert wait_for(lambda: len(portal.requests) == 2)
    out.close()
    assert [len(portal.lines(request)) for request in portal.requests] == [3, 3]
    err = capsys.readouterr().err
    assert 'cannot send samples to' in err and '(HTTP 503: {"detail": "busy"}); retrying with backoff' in err
    assert "answers again; sending resumed" in err and "sent 3 of 3 samples" in err


def test_a_refused_token_stops_the_sending(portal, capsys):
    portal.answers = [(401, {"detail": "Invalid token."})]
    out = sink(portal.url)
    out.put(samples(3))
    assert wait_for(lambda: out._disabled is not None)
    out.put(samples(2))
    out.close()
    assert len(portal.requests) == 1
    err = capsys.readouterr().err
    assert 'refused the samples (HTTP 401: {"detail": "Invalid token."}); no more samples will be sent' in err
    assert "sent 0 of 5 samples" in err and "dropped 5" in err


def test_too_large_halves_the_batch(portal):
    portal.answers = [(413, {"detail": "too large"})]
    out = sink(portal.url, batch_size=4)
    out.put(samples(4))
    assert wait_for(lambda: len(portal.requests) == 3)
    out.close()
    assert [len(portal.lines(request)) for request in portal.requests] == [4, 2, 2]
    assert len(portal.samples()) == 8  # the first (refused) batch was sent again, in halves


def test_rejected_data_is_dropped_and_said_once(portal, capsys):
    portal.answers = [(400, {"field": ["bad"]}), (400, {"field": ["bad"]})]
    out = sink(portal.url, batch_size=1)
    out.put(samples(3))
    assert wait_for(lambda: len(portal.requests) == 3)
    out.close()
    err = capsys.readouterr().err
    assert err.count("rejected a batch of 1 samples (HTTP 400") == 1
    assert "sent 1 of 3 samples" in err and "dropped 2" in err


def test_an_unreachable_portal_drops_the_oldest_and_never_blocks(capsys):
    out = sink(closed_port_url(), queue_size=3, flush_timeout=0.5)
    out.put(samples(2))
    assert wait_for(lambda: out._failing is not None)
    started = time.monotonic()
    out.put(samples(5, start=2))
    assert time.monotonic() - started < 0.1
    assert [sample[4] for sample in out._queue] == [0.04, 0.05, 0.06]  # the newest three are kept
    started = time.monotonic()
    out.close()
    assert time.monotonic() - started < 3
    err = capsys.readouterr().err
    assert "retrying with backoff, keeping up to 3 samples in memory" in err
    assert "the portal is unreachable (" in err and "dropped the 4 oldest samples (at most 3 are kept in memory)" in err
    assert "could not send the last 3 samples" in err and "sent 0 of 7 samples" in err and "dropped 7" in err


def test_an_unreachable_portal_does_not_change_the_jobs_exit_status():
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "BELVEDERE_"))}
    env.update({"SLURM_LOCALID": "0", "SLURMD_NODENAME": "nid000001", "BELVEDERE_TOKEN": "0123456789abcdef"})
    url = closed_port_url()
    started = time.monotonic()
    result = subprocess.run([PY, str(RUNNER), "--source", "gpm", "--interval", "0.1", "--portal", url,
                             "--queue-size", "5", "--batch-seconds", "0.1", "--flush-timeout", "0.5", "--",
                             PY, "-c", "import sys, time; time.sleep(1.2); sys.exit(4)"],
                            env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 4
    assert time.monotonic() - started < 6
    assert f"cannot send samples to {url}{PATH}" in result.stderr
    assert "dropped the" in result.stderr and "oldest samples (at most 5 are kept in memory)" in result.stderr
    assert "could not send the last 5 samples" in result.stderr
