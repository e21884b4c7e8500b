"""A whole installation started as a newcomer does, in a terminal (a pseudo-terminal): the helpers of
tests/integration/test_run_command.py and the benches' smoke tests."""
import json
import os
import pty
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

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


def stop_in_terminal(pid: int, terminal: int, exit_code: int | None) -> None:
    """Teardown of a stack started with ``start_in_terminal``: Ctrl-C unless it already ended, then SIGKILL
    after a minute; the terminal is closed either way."""
    if exit_code is None and wait_exit(pid, 0) is None:
        os.write(terminal, b"\x03")
        if wait_exit(pid, 60) is None:
            os.kill(pid, signal.SIGKILL)
            wait_exit(pid, 10)
    os.close(terminal)


