"""The README's run command, end to end: web, worker and beat start; /readyz proves a worker
process answered through the broker; the login printed on the terminal works."""
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fetch_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)
    except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
        return 0, {}


def process_command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.integration
def test_make_run_starts_web_worker_and_beat_and_the_printed_login_works(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"} and not key.startswith("BELVEDERE_")}
    env.update(BELVEDERE_DATA_DIR=str(tmp_path / "var"), BELVEDERE_BIND=f"127.0.0.1:{port}",
               BELVEDERE_BEAT_HEARTBEAT_SECONDS="2", C_FORCE_ROOT="1")
    log_path = tmp_path / "make-run.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(["make", "run"], cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        status, report = 0, {}
        while time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()[-3000:]
            status, report = fetch_json(f"{base}/readyz")
            if status == 200 and report["checks"]["beat"]["status"] == "ok":
                break
            time.sleep(1)
        output = log_path.read_text()
        assert status == 200, (report, output[-3000:])
        assert f"Belvedere is starting on http://127.0.0.1:{port}/" in output
        assert report["profile"] == "embedded"
        assert report["checks"]["database"]["vendor"] == "sqlite"
        broker = report["checks"]["broker"]
        assert broker["broker"] == "filesystem"
        command_line = process_command_line(broker["worker_pid"])
        assert "celery" in command_line and "worker" in command_line, command_line
        assert report["checks"]["beat"]["status"] == "ok", report

        username, password = re.search(r"researcher\s+user '([^']+)'\s+password '([^']+)'", output).groups()
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(f"{base}/accounts/login/", timeout=30).read()
        csrf = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
        form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": csrf}).encode()
        request = urllib.request.Request(f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/accounts/login/"})
        with opener.open(request, timeout=30) as response:
            page = response.read().decode()
            assert response.url == f"{base}/"
        assert "Welcome, Dana Demo" in page
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
