"""The README's run command, end to end, in a terminal (a pseudo-terminal): the login page answers while the
demo still builds in the background, with its progress; then web, worker and beat run; /readyz proves a worker process answered through the broker; the login printed on the
terminal works; a worker killed with SIGKILL comes back by itself while web keeps answering; Ctrl-C
stops everything and make ends without an error."""
import http.cookiejar
import json
import os
import pty
import re
import signal
import socket
import threading
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


def parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def new_worker_main(report: dict, killed: int) -> int | None:
    """The main process of the worker that answered readiness, if it is a new one. A pool child of
    the killed worker lives on for a moment as an orphan (its parent is then init, pid 1), and a
    ping it answered says nothing about the supervisor having started a new worker."""
    try:
        main = parent_pid(report["checks"]["broker"]["worker_pid"])
        command_line = process_command_line(main)
    except (FileNotFoundError, KeyError, TypeError, ProcessLookupError):
        return None
    if main in (killed, 1) or "celery" not in command_line or "worker" not in command_line:
        return None
    return main


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def start_in_terminal(args: list[str], env: dict, log_path: Path) -> tuple[int, int]:
    """Run ``args`` as the foreground job of a new pseudo-terminal; its output goes to ``log_path``.
    Returns (pid, terminal fd): writing b"\x03" to the fd is pressing Ctrl-C."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: session leader with the terminal as its controlling tty
        os.chdir(BASE_DIR)
        os.execvpe(args[0], args, env)

    def copy():
        with open(log_path, "ab", buffering=0) as log:
            while True:
                try:
                    data = os.read(terminal, 4096)
                except OSError:
                    return
                if not data:
                    return
                log.write(data)

    threading.Thread(target=copy, daemon=True).start()
    return pid, terminal


def wait_exit(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.2)
    return None


@pytest.mark.integration
def stop_in_terminal(pid: int, terminal: int, exit_code: int | None) -> None:
    """Teardown of a stack started with ``start_in_terminal``: Ctrl-C unless it already ended, then SIGKILL
    after a minute; the terminal is closed either way."""
    if exit_code is None and wait_exit(pid, 0) is None:
        os.write(terminal, b"\x03")
        if wait_exit(pid, 60) is None:
            os.kill(pid, signal.SIGKILL)
            wait_exit(pid, 10)
    os.close(terminal)


def test_make_run_starts_web_worker_and_beat_restarts_a_killed_worker_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"} and not key.startswith("BELVEDERE_")}
    # The test profile's demo sizes (portal/settings/test.py): what is tested here is the command, not the demo's size.
    env.update(BELVEDERE_DATA_DIR=str(tmp_path / "var"), BELVEDERE_BIND=f"127.0.0.1:{port}",
               BELVEDERE_BEAT_HEARTBEAT_SECONDS="2", C_FORCE_ROOT="1", TERM="dumb",
               DEMO_TELEMETRY_HOURS="0.25", DEMO_FLEET_HOURS="1")
    log_path = tmp_path / "make-run.log"
    started = time.monotonic()
    pid, terminal = start_in_terminal(["make", "run"], env, log_path)
    exit_code = None
    try:
        # The first page answers once the database is migrated, while the demo still builds: it says how far.
        deadline = time.monotonic() + 120
        first_page = ""
        while time.monotonic() < deadline and not first_page:
            assert wait_exit(pid, 0) is None, log_path.read_text(errors="replace")[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/accounts/login/", timeout=10) as response:
                    first_page = response.read().decode()
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.25)
        print(f"make run: first page after {time.monotonic() - started:.1f} s")
        assert "The demo system is being built" in first_page, first_page[:3000]
        assert re.search(r'<progress max="100" value="\d+"', first_page)
        building = fetch_json(f"{base}/demo-build")[1]
        assert building["state"] == "building" and building["parts_done"] < building["parts_total"], building
        assert "Belvedere is starting on" in log_path.read_text(errors="replace")

        deadline = time.monotonic() + 240
        status, report = 0, {}
        while time.monotonic() < deadline:
            assert wait_exit(pid, 0) is None, log_path.read_text(errors="replace")[-3000:]
            status, report = fetch_json(f"{base}/readyz")
            if status == 200 and report["checks"]["beat"]["status"] == "ok":
                break
            time.sleep(1)
        output = log_path.read_text(errors="replace")
        assert status == 200, (report, output[-3000:])
        assert f"Belvedere is starting on http://127.0.0.1:{port}/" in output
        assert report["profile"] == "embedded"
        assert report["checks"]["database"]["vendor"] == "sqlite"
        broker = report["checks"]["broker"]
        assert broker["broker"] == "filesystem"
        command_line = process_command_line(broker["worker_pid"])
        assert "celery" in command_line and "worker" in command_line, command_line
        assert report["checks"]["beat"]["status"] == "ok", report
        assert fetch_json(f"{base}/demo-build")[1]["state"] == "ready"
        print(f"make run: ready (demo built, worker and beat answering) after {time.monotonic() - started:.1f} s")

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

        # SIGKILL the worker (its main process; its pool children die with it): web keeps answering,
        # the supervisor starts a new worker, and readiness comes back with a new worker process.
        worker = parent_pid(broker["worker_pid"])
        assert "celery" in process_command_line(worker) and "worker" in process_command_line(worker)
        web_pids = {int(p) for p in re.findall(r"Booting worker with pid: (\d+)", output)}
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 120
        status, report, healthz = 0, {}, []
        while time.monotonic() < deadline:
            healthz.append(fetch_json(f"{base}/healthz")[0])
            status, report = fetch_json(f"{base}/readyz")
            if status == 200 and new_worker_main(report, worker) is not None:
                break
            time.sleep(1)
        assert status == 200, (report, log_path.read_text(errors="replace")[-3000:])
        assert not alive(worker) and set(healthz) == {200}, healthz
        assert all(alive(p) for p in web_pids), "web was restarted, it should have kept running"
        new_worker = new_worker_main(report, worker)
        assert new_worker is not None, report

        # Ctrl-C in the terminal: everything stops, and make ends without an error.
        os.write(terminal, b"\x03")
        exit_code = wait_exit(pid, 90)
        output = log_path.read_text(errors="replace")
        assert exit_code == 0, (exit_code, output[-3000:])
        assert "make: ***" not in output and "Belvedere stopped" in output
        assert not alive(new_worker) and not any(alive(p) for p in web_pids)
        assert fetch_json(f"{base}/healthz")[0] == 0
    finally:
        stop_in_terminal(pid, terminal, exit_code)
