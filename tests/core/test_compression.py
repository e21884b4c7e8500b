"""Compressed answers (issue 17): pages, JSON and the Plotly bundle, from the real web server.

The server is gunicorn started with ``make run``'s web command (deploy/supervisord.conf) under the
embedded profile ``make run`` uses, so what is checked is what a person's browser gets from the
default install: Django's gzip for pages and API answers, whitenoise's precompressed copies for the
static Plotly bundle. Requests go through ``http.client``, which leaves bodies as sent.
"""
import configparser
import gzip
import http.client
import json
import re
import socket
import sys
import time
import zlib
from datetime import timedelta
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
BUNDLE = BASE_DIR / "static" / "vendor" / "plotly" / "plotly-belvedere.min.js"
BUNDLE_URL = "/static/vendor/plotly/plotly-belvedere.min.js"
BROWSER_ACCEPT = "gzip, deflate, br, zstd"  # what Chromium sends


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def web_command(port: int) -> list[str]:
    """``make run``'s web command with this test's port and one worker process."""
    config = configparser.RawConfigParser()
    config.read(BASE_DIR / "deploy" / "supervisord.conf")
    words = config.get("program:web", "command").split()
    assert words[0].endswith("/gunicorn"), words
    args, skip = ["-m", "gunicorn"], False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in ("--bind", "--workers"):
            skip = True
        else:
            args.append(word)
    return args + ["--bind", f"127.0.0.1:{port}", "--workers", "1"]


def get(port: int, path: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One GET; header names lower-cased; the body exactly as the server sent it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {name.lower(): value for name, value in response.getheaders()}, response.read()
    finally:
        connection.close()


@pytest.fixture
def portal_server(transactional_db, start_service):
    """gunicorn serving the portal in the embedded profile; ``.url`` and ``.port`` set."""
    port = free_port()
    server = start_service("gunicorn-compression", web_command(port), ready_marker="Booting worker with pid",
                           DJANGO_SETTINGS_MODULE="portal.settings.embedded")
    deadline = time.monotonic() + 60
    while True:
        try:
            if get(port, "/healthz")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, server.log_text()[-3000:]
        time.sleep(0.2)
    server.port, server.url = port, f"http://127.0.0.1:{port}"
    return server


CSRF_TOKEN = re.compile(rb'(name="csrfmiddlewaretoken" value=")[^"]+(")')


def without_csrf_token(html: bytes) -> bytes:
    """Django masks the CSRF token afresh for every answer (which is also what defeats BREACH)."""
    return CSRF_TOKEN.sub(rb"\1TOKEN\2", html)


def test_a_page_is_gzipped_for_a_client_that_accepts_it_and_plain_for_one_that_does_not(portal_server):
    status, plain_headers, plain = get(portal_server.port, "/accounts/login/")
    assert status == 200 and plain_headers["content-type"].startswith("text/html")
    assert "content-encoding" not in plain_headers
    assert plain.startswith(b"<!doctype html>") and CSRF_TOKEN.search(plain)

    status, headers, body = get(portal_server.port, "/accounts/login/", {"Accept-Encoding": BROWSER_ACCEPT})
    assert status == 200
    assert headers["content-encoding"] == "gzip"
    assert "accept-encoding" in headers["vary"].lower()
    assert int(headers["content-length"]) == len(body) < len(plain)
    assert without_csrf_token(gzip.decompress(body)) == without_csrf_token(plain)


@pytest.fixture
def api_token(transactional_db):
    from django.contrib.auth import get_user_model
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from apps.jobs.models import Cluster, Job

    staff = get_user_model().objects.create_user("operator", password="unused-password", is_staff=True)
    cluster = Cluster.objects.create(name="alps")
    now = timezone.now()
    for number in range(30):
        Job.objects.create(cluster=cluster, job_id=5000 + number, user_name="alice", account="a-llm01", state="COMPLETED",
                           submit_time=now - timedelta(hours=3), start_time=now - timedelta(hours=2),
                           end_time=now - timedelta(hours=1), node_list=[f"nid{number:06d}"])
    return Token.objects.create(user=staff).key


def test_a_json_api_answer_is_gzipped_and_unpacks_to_the_plain_answer(portal_server, api_token):
    auth = {"Authorization": f"Token {api_token}", "Accept": "application/json"}
    status, plain_headers, plain = get(portal_server.port, "/api/v1/jobs/?limit=50", auth)
    assert status == 200 and plain_headers["content-type"].startswith("application/json")
    assert "content-encoding" not in plain_headers
    assert len(json.loads(plain)["results"]) == 30

    status, headers, body = get(portal_server.port, "/api/v1/jobs/?limit=50", {**auth, "Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["content-encoding"] == "gzip"
    assert "accept-encoding" in headers["vary"].lower()
    assert len(body) < len(plain)
    assert gzip.decompress(body) == plain


def test_the_plotly_bundle_is_sent_precompressed_under_the_embedded_default(portal_server):
    source = BUNDLE.read_bytes()

    status, headers, body = get(portal_server.port, BUNDLE_URL)
    assert status == 200 and "content-encoding" not in headers
    assert body == source and int(headers["content-length"]) == len(source)

    status, headers, body = get(portal_server.port, BUNDLE_URL, {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["content-encoding"] == "gzip"
    assert "accept-encoding" in headers["vary"].lower()
    assert len(body) < len(source) / 2
    assert gzip.decompress(body) == source
    gzip_size = len(body)

    # A browser also accepts brotli: it gets the smaller .br copy (Chromium unpacks it in
    # test_plotly_bundle.py; Python has no brotli decoder here, so the bytes are compared).
    status, headers, body = get(portal_server.port, BUNDLE_URL, {"Accept-Encoding": BROWSER_ACCEPT})
    assert status == 200 and headers["content-encoding"] == "br"
    assert body == BUNDLE.with_name(BUNDLE.name + ".br").read_bytes()
    assert len(body) < gzip_size


# ---------------------------------------------------------------------------------------------
# What the gzip middleware leaves alone: the answers are real Django responses, the middleware the
# portal's own class; only the view behind it is a function that returns the response.
# ---------------------------------------------------------------------------------------------
def through_middleware(response, accept_encoding: str = BROWSER_ACCEPT):
    from django.test import RequestFactory

    from apps.core.compression import PortalGZipMiddleware

    request = RequestFactory().get("/anything/", HTTP_ACCEPT_ENCODING=accept_encoding)
    return PortalGZipMiddleware(lambda request: response)(request)


def test_a_streamed_csv_download_is_gzipped_and_unpacks_to_every_row():
    from django.http import StreamingHttpResponse

    rows = [b"gpu,saturation\n"] + [f"{gpu},{gpu / 1000:.3f}\n".encode() for gpu in range(2000)]
    response = through_middleware(StreamingHttpResponse(iter(rows), content_type="text/csv; charset=utf-8"))
    assert response["Content-Encoding"] == "gzip"
    assert gzip.decompress(b"".join(response.streaming_content)) == b"".join(rows)


def test_server_sent_events_are_not_gzipped_so_each_event_leaves_at_once():
    from django.http import StreamingHttpResponse

    events = [f"data: {number}\n\n".encode() for number in range(3)]
    response = through_middleware(StreamingHttpResponse(iter(events), content_type="text/event-stream"))
    assert not response.has_header("Content-Encoding")
    stream = iter(response.streaming_content)
    assert [next(stream) for _ in events] == events


@pytest.mark.parametrize("content_type", ["application/vnd.apache.parquet", "image/png"])
def test_answers_compressed_already_are_left_as_they_are(content_type):
    from django.http import HttpResponse

    body = zlib.compress(bytes(range(256)) * 64)  # stands for zstd-compressed Parquet pages, PNG pixels
    response = through_middleware(HttpResponse(body, content_type=content_type))
    assert not response.has_header("Content-Encoding") and response.content == body


def test_a_partial_answer_is_left_as_it_is():
    from django.http import HttpResponse

    body = b"0123456789" * 100
    response = HttpResponse(body, status=206, content_type="text/plain")
    response["Content-Range"] = f"bytes 0-{len(body) - 1}/5000"
    response = through_middleware(response)
    assert not response.has_header("Content-Encoding") and response.content == body
