"""Start web, worker and beat under supervisord for ``make run`` (see deploy/supervisord.conf).

Ctrl-C in the terminal reaches supervisord alone, which stops its three processes gracefully and
exits 0; so does SIGTERM or SIGINT sent to this process. ``make run`` then ends without an error.

``--demo`` (``make run``, which loads the demo first): the demo lives — ``DEMO_FEEDER`` is on for the
three processes (beat schedules ``core.feed_demo``, the worker runs it) unless the environment already
says otherwise (``DEMO_FEEDER=false make run`` keeps the demo as built). Production never runs this.
(The terminal's foreground is handed to supervisord's process group, as a shell does for a job:
otherwise make would get the Ctrl-C too and end with "Interrupt", status 130.)
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


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
    if "--demo" in args:
        env.setdefault("DEMO_FEEDER", "true")
    try:
        terminal = os.open("/dev/tty", os.O_RDWR)
    except OSError:
        terminal = None
    own_foreground = terminal is not None and os.tcgetpgrp(terminal) == os.getpgrp()
    supervisor = subprocess.Popen([str(bin_dir / "supervisord"), "--configuration", str(BASE_DIR / "deploy" / "supervisord.conf")],
                                  cwd=BASE_DIR, env=env, process_group=0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # this process writes to the terminal from the background later
    if own_foreground:
        os.tcsetpgrp(terminal, supervisor.pid)

    def forward(signum, frame):
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    code = supervisor.wait()
    if own_foreground:
        os.tcsetpgrp(terminal, os.getpgrp())
    print("Belvedere stopped (web, worker and beat).", flush=True)
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM) else code


if __name__ == "__main__":
    sys.exit(main())
