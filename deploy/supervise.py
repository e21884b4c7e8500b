"""Start web, worker and beat under supervisord for ``make run`` (see deploy/supervisord.conf).

Ctrl-C in the terminal reaches supervisord alone, which stops its three processes gracefully and
exits 0; so does SIGTERM or SIGINT sent to this process. ``make run`` then ends without an error. The worker
first finishes the tasks it is running, for at most ``BELVEDERE_STOP_GRACE_SECONDS`` (default 30; then it is
killed and those tasks run again at the next start).

``--demo`` (``make run``): web answers at once while ``manage.py demo`` builds the demo beside it (a child of
this process, its output on the terminal; a loaded demo is left as it is in a second). The build's progress
is on the login and home pages (apps/core/demo_progress.py). Worker and beat start when the build has ended,
through supervisorctl: beside the build's one long SQLite transaction their writes would only wait and fail.
The demo lives — ``DEMO_FEEDER`` is on for the three processes (beat schedules ``core.feed_demo``, the
worker runs it) unless the environment already says otherwise (``DEMO_FEEDER=false make run`` keeps the
demo as built). Production never runs this.
(The terminal's foreground is handed to supervisord's process group, as a shell does for a job:
otherwise make would get the Ctrl-C too and end with "Interrupt", status 130.)
"""
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
#: How long Ctrl-C or SIGTERM lets the worker finish its running tasks before it is killed
#: (BELVEDERE_STOP_GRACE_SECONDS; supervisord.conf's stopwaitsecs for the worker).
DEFAULT_STOP_GRACE_SECONDS = 30


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    unknown = [arg for arg in args if arg != "--demo"]
    if unknown:
        print(f"supervise.py: unknown argument(s) {' '.join(unknown)}; the only one is --demo", file=sys.stderr)
        return 2
    bin_dir = Path(sys.executable).parent
    data_dir = Path(os.environ.get("BELVEDERE_DATA_DIR") or BASE_DIR / "var").resolve()
    run_dir = data_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, BELVEDERE_BASE_DIR=str(BASE_DIR), BELVEDERE_BIN=str(bin_dir), BELVEDERE_RUN_DIR=str(run_dir),
               BELVEDERE_BIND=os.environ.get("BELVEDERE_BIND", "127.0.0.1:8000"), PYTHONUNBUFFERED="1")
    grace = os.environ.get("BELVEDERE_STOP_GRACE_SECONDS", "").strip() or str(DEFAULT_STOP_GRACE_SECONDS)
    if not grace.isdigit() or int(grace) < 1:
        print(f"supervise.py: BELVEDERE_STOP_GRACE_SECONDS={grace!r} is not a whole number of seconds (1 or more); "
              f"unset it for the default of {DEFAULT_STOP_GRACE_SECONDS}", file=sys.stderr)
        return 2
    env["BELVEDERE_STOP_GRACE_SECONDS"] = grace
    demo = "--demo" in args
    if demo:
        env.setdefault("DEMO_FEEDER", "true")
        # The demo's telemetry stays bounded (issue 40): an hour per table, raw samples for 6 hours (a job running longer
        # is drawn in minute buckets anyway), 1-minute rollups for three days (the demo's hang two days ago included),
        # 10-minute rollups for two weeks, a retention pass every 10 minutes (the environment may say otherwise).
        for name, value in (("TELEMETRY_PARTITION_HOURS", "1"), ("TELEMETRY_RETENTION_RAW_DAYS", "0.25"),
                            ("TELEMETRY_RETENTION_1M_DAYS", "3"), ("TELEMETRY_RETENTION_10M_DAYS", "14"),
                            ("TELEMETRY_RETENTION_SECONDS", "600")):
            env.setdefault(name, value)
    env["BELVEDERE_START_BACKGROUND"] = "false" if demo else "true"
    configuration = str(BASE_DIR / "deploy" / "supervisord.conf")
    try:
        terminal = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        terminal = None
    own_foreground = terminal is not None and os.tcgetpgrp(terminal) == os.getpgrp()
    supervisor = subprocess.Popen([str(bin_dir / "supervisord"), "--configuration", configuration],
                                  cwd=BASE_DIR, env=env, process_group=0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # this process writes to the terminal from the background later
    if own_foreground:
        os.tcsetpgrp(terminal, supervisor.pid)
    build = None
    if demo:
        build = subprocess.Popen([sys.executable, str(BASE_DIR / "manage.py"), "demo"], cwd=BASE_DIR, env=env)
        threading.Thread(target=_start_background_after, args=(build, supervisor, bin_dir, configuration, env),
                         daemon=True).start()

    def forward(signum, frame):
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    code = supervisor.wait()
    if build is not None and build.poll() is None:  # stopped while building: the transaction is rolled back
        build.terminate()
        build.wait()
    if own_foreground:
        os.tcsetpgrp(terminal, os.getpgrp())
    print("Belvedere stopped (web, worker and beat).", flush=True)
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM) else code


def _start_background_after(build: subprocess.Popen, supervisor: subprocess.Popen, bin_dir: Path, configuration: str,
                            env: dict) -> None:
    """Once the demo build has ended (built, already loaded or failed), start worker and beat."""
    code = build.wait()
    if supervisor.poll() is not None:
        return
    if code != 0:
        print(f"The demo build failed (exit status {code}; see above); the portal runs without it. "
              "make run builds it again at its next start.", file=sys.stderr, flush=True)
    for _ in range(50):  # supervisord opens its socket a moment after it starts
        started = subprocess.run([str(bin_dir / "supervisorctl"), "--configuration", configuration, "start", "worker", "beat"],
                                 cwd=BASE_DIR, env=env, capture_output=True, text=True)
        if started.returncode == 0 or supervisor.poll() is not None:
            return
        threading.Event().wait(0.2)
    print(f"Could not start worker and beat: {started.stdout}{started.stderr}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
