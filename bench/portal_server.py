"""The portal as ``make run`` serves it, for benchmarks that measure it from outside (a browser, many clients).

* :func:`portal_env` — the environment of a bench-owned embedded installation: its own data directory
  (SQLite, filesystem broker, telemetry store), never ``var/``, and none of the variables that would
  point it at PostgreSQL, Redis or another store.
* :func:`manage` / :func:`portal_python` — ``manage.py`` commands and short scripts in that installation.
* :class:`PortalServer` — gunicorn with the command line of ``[program:web]`` in ``deploy/supervisord.conf``
  (the one ``make run`` starts: 2 workers x 4 threads, ``--preload``), bound to a free loopback port.
"""
from __future__ import annotations

import configparser
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# Variables that would send the installation elsewhere than its own data directory.
FOREIGN = ("DATABASE_URL", "CELERY_BROKER_URL", "CACHE_URL", "ELASTICSEARCH_URL", "TELEMETRY_BACKEND", "SECRET_KEY",
           "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE")


def portal_env(data_dir: Path) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in FOREIGN and not key.startswith("BELVEDERE_")}
    env.update(BELVEDERE_DATA_DIR=str(Path(data_dir).resolve()), DJANGO_SETTINGS_MODULE="portal.settings.embedded",
               PYTHONUNBUFFERED="1")
    return env


def manage(data_dir: Path, *args: str, timeout: float = 1800) -> str:
    """``python manage.py ARGS`` in the installation at ``data_dir``; its output, or an error with its tail."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=portal_env(data_dir),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return done.stdout


def portal_python(data_dir: Path, code: str, timeout: float = 600):
    """Run ``code`` with Django set up on the installation at ``data_dir``; it prints one JSON line last,
    which is returned parsed."""
    script = "import django; django.setup()\n" + code
    done = subprocess.run([sys.executable, "-c", script], cwd=BASE_DIR, env=portal_env(data_dir),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"script in {data_dir} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def web_command(bind: str) -> list[str]:
    """The web command of ``make run`` (deploy/supervisord.conf), with its variables filled in."""
    config = configparser.RawConfigParser()
    config.read(BASE_DIR / "deploy" / "supervisord.conf")
    command = config.get("program:web", "command")
    values = {"ENV_BELVEDERE_BIN": str(Path(sys.executable).parent), "ENV_BELVEDERE_BIND": bind,
              "ENV_BELVEDERE_BASE_DIR": str(BASE_DIR)}
    for name, value in values.items():
        command = command.replace(f"%({name})s", value)
    if "%(" in command:
        raise RuntimeError(f"deploy/supervisord.conf's web command uses a variable this bench does not know: {command}")
    return command.split()


class PortalServer:
    """gunicorn as ``make run`` starts it, on the installation at ``data_dir``; a context manager.
    Its output (access log included) goes to ``data_dir/../web.log``."""

    def __init__(self, data_dir: Path, start_timeout: float = 120):
        self.data_dir = Path(data_dir)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.command = web_command(f"127.0.0.1:{self.port}")
        self.log_path = self.data_dir.parent / "web.log"
        self.start_timeout = start_timeout
        self.process: subprocess.Popen | None = None

    @property
    def workers_threads(self) -> str:
        words = self.command
        value = lambda flag: words[words.index(flag) + 1] if flag in words else "1"  # noqa: E731
        return f"{value('--workers')} workers x {value('--threads')} threads"

    def __enter__(self) -> "PortalServer":
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command, cwd=BASE_DIR, env=portal_env(self.data_dir), stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base}/healthz", timeout=5) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer /healthz within {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM to the server's own process group (gunicorn and its workers, nothing else), then SIGKILL."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def log_tail(self, characters: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-characters:]
        except FileNotFoundError:
            return ""


def print_table(figures) -> None:
    """The runner's table (bench/run.py), for a benchmark run on its own."""
    def fmt(seconds: float) -> str:
        return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"

    header = f"{'benchmark':<44} {'figure':>10} {'floor':>10} {'ratio':>7}  floor measured / note"
    print(header)
    print("-" * len(header))
    for figure in figures:
        print(f"{figure.name:<44} {fmt(figure.seconds):>10} {fmt(figure.floor_seconds):>10} {figure.ratio:>6.1f}x  {figure.floor_name}")
        if figure.note:
            print(f"{'':<44} {'':>10} {'':>10} {'':>7}  {figure.note}")
