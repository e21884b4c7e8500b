"""The README's run command, end to end, as a newcomer meets it: ``make run`` in a terminal (a pseudo-terminal).

One installation, one story (each step needs the ones before, and a second ``make run`` would cost minutes):

1. the login page answers while the demo still builds in the background, and says how far the build is;
2. web, worker and beat run: /readyz proves a worker process answered through the broker and beat beats;
   the login printed on the terminal works;
3. the demo lives (issue 18, acceptance 3), with a demo clock six times faster than real time
   (DEMO_CLOCK_SPEED, a tick every 5 s), after more than 15 demo minutes:

   * the running Megatron job still has its three stragglers: in the score beat's scoring keeps up to date,
     and in the samples the feeder wrote since the build (the throttled GPU, the hot GPU, the slow NIC);
   * the catalogue still names exactly the 16 silent nodes of group 17: in the checks beat runs, and in the
     same checks at demo time, over the fed minutes;
   * no demo job is "failed" for lack of fields: beat scores the running jobs (every 60 s here) and finds
     what it needs; the demo user's finished jobs have scores; a tick costs little CPU;
4. a worker killed with SIGKILL comes back by itself while web keeps answering;
5. Ctrl-C stops everything and make ends without an error.

What the stack holds is read with ``manage.py shell`` in the stack's own environment (its SQLite database and
telemetry store). The demo is built with the test profile's sizes (DEMO_TELEMETRY_HOURS), so that the test
takes a few minutes.
"""
import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .stack import (BASE_DIR, alive, fetch_json, free_port, new_worker_main, parent_pid, process_command_line,
                    start_in_terminal, stop_in_terminal, wait_exit)

pytestmark = pytest.mark.integration

SPEED = 6
DEMO_MINUTES = 15

CLOCK = """
import json
from apps.core.demo import demo_clock
clock = demo_clock()
print("RESULT:" + json.dumps({key: clock.get(key) for key in ("origin", "demo_time", "ticks", "last")} if clock else None,
                             default=str))
"""

REPORT = """
import json
from datetime import datetime, timedelta

import numpy as np
from django.utils import timezone

from apps.catalog.models import CheckRun, DataProduct
from apps.catalog.services import evaluate
from apps.catalog.sources import observe
from apps.core.demo import demo_clock
from apps.jobs.models import Job
from apps.saturation.models import JobSaturation
from apps.telemetry.backends.base import Query
from apps.telemetry.store import telemetry_store
from apps.telemetry.synthetic_jobs import default_planted
from apps.topology.models import Node

clock = demo_clock()
origin, demo_now = datetime.fromisoformat(clock["origin"]), datetime.fromisoformat(clock["demo_time"])
memory = clock["memory"]
out = {"origin": clock["origin"], "demo_time": clock["demo_time"], "ticks": clock["ticks"], "last": clock["last"]}

megatron = Job.objects.get(pk=memory["megatron"])
record = JobSaturation.objects.filter(job=megatron).first()
planted = default_planted(list(megatron.node_list))
out["megatron"] = {"state": megatron.state, "status": record and record.status, "computed": record and str(record.computed),
                   "stragglers": sorted([item["level"], item["host"], item.get("gpu")] for item in (record.stragglers or []))
                   if record else None,
                   "planted": planted.as_dict()}

# The planted problems in what the feeder wrote since the build (demo time), training minutes only.
frame = telemetry_store().read(Query(start=origin + timedelta(minutes=2), end=demo_now, cluster="alps",
                                     hosts=tuple(megatron.node_list), fields=(100, 150, 1004)))
elapsed = (frame.ts - megatron.start_time).dt.total_seconds()
training = frame[elapsed % 1800 >= 120]  # not the run's checkpoints (90 s every 30 minutes of the run)
medians = {field: training[training.field == field].groupby(["host", "gpu"])["value"].median() for field in (100, 150, 1004)}
throttled, hot = tuple(planted.throttled), tuple(planted.hot)
out["fed"] = {
    "minutes": (frame.ts.max() - frame.ts.min()).total_seconds() / 60 if len(frame) else 0,
    "throttled_clock_ratio": float(medians[100][throttled] / medians[100].drop(throttled).median()),
    "hot_excess_c": float(medians[150][hot] - medians[150].drop(hot).median()),
    "slow_nic_tensor_ratio": float(medians[1004][planted.slow_nic].max() / medians[1004].drop(planted.slow_nic, level="host").median()),
}

# The catalogue: beat's latest gap check, and the same checks at demo time.
product = DataProduct.objects.get(name="dcgm-device")
groups = dict(Node.objects.values_list("hostname", "group__number"))
latest = CheckRun.objects.filter(product=product, kind="gaps").order_by("-ran").first()
at_demo_time = {result.kind: result for result in evaluate(product.definition, observe(product.definition, demo_now), demo_now)}
out["catalog"] = {
    "silent_nodes": memory["silent_nodes"], "silent_groups": sorted({groups[h] for h in memory["silent_nodes"]}),
    "beat_latest": {"ran": str(latest.ran), "ongoing": latest.measured.get("ongoing"), "summary": latest.summary},
    "beat_runs_since_origin": CheckRun.objects.filter(product=product, kind="gaps", ran__gt=origin).count(),
    "demo_time": {"ongoing": at_demo_time["gaps"].measured.get("ongoing"), "freshness": at_demo_time["freshness"].measured.get("state"),
                  "members_with_gaps": at_demo_time["gaps"].measured.get("members_with_gaps"),
                  "summary": at_demo_time["gaps"].summary},
}

# Scores: no demo job failed for lack of fields; the demo user's finished jobs scored; the running jobs scored.
records = JobSaturation.objects.filter(job__cluster__name="alps").select_related("job")
out["failed"] = [[r.job.job_id, r.job.user_name, r.message[:200]] for r in records if r.status == "failed"]
now = timezone.now()
finished = Job.objects.filter(cluster__name="alps", user_name="demo", start_time__isnull=False, end_time__isnull=False,
                              end_time__lte=now - timedelta(seconds=30))
scored = {r.job_id: r for r in records}
out["demo_finished"] = [[job.job_id, job.state, scored[job.pk].status if job.pk in scored else None,
                         scored[job.pk].score if job.pk in scored else None] for job in finished]
running = Job.objects.filter(cluster__name="alps", state="RUNNING", start_time__lte=now - timedelta(minutes=3))
out["running"] = {"count": running.count(),
                  "statuses": sorted({(scored[job.pk].status if job.pk in scored else "none") for job in running}),
                  "unscored": [job.job_id for job in running if job.pk not in scored or scored[job.pk].status != "ready"][:20]}
out["timeline"] = {"started": Job.objects.filter(job_id__gte=1_300_000).count(),
                   "ended": Job.objects.filter(cluster__name="alps", end_time__gt=origin).count()}
print("RESULT:" + json.dumps(out, default=str))
"""


def shell(env: dict, script: str) -> dict | None:
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    return json.loads(lines[-1][len("RESULT:"):])


def minutes_between(first: str, second: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(second) - datetime.fromisoformat(first)).total_seconds() / 60



@pytest.mark.integration
def test_make_run_serves_at_once_builds_the_demo_keeps_it_alive_restarts_a_killed_worker_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "DEMO_FEEDER"} and not key.startswith("BELVEDERE_")}
    # The test profile's demo sizes (portal/settings/test.py): what is tested here is the command and the living demo.
    env.update(BELVEDERE_DATA_DIR=str(tmp_path / "var"), BELVEDERE_BIND=f"127.0.0.1:{port}", C_FORCE_ROOT="1", TERM="dumb",
               BELVEDERE_BEAT_HEARTBEAT_SECONDS="2", DEMO_CLOCK_SPEED=str(SPEED), DEMO_FEED_SECONDS="5",
               DEMO_TELEMETRY_HOURS="0.25", SATURATION_REFRESH_SECONDS="60")
    log_path = tmp_path / "make-run.log"
    started = time.monotonic()
    pid, terminal = start_in_terminal(["make", "run"], env, log_path)
    exit_code = None
    try:
        # 1. The first page answers once the database is migrated, while the demo still builds: it says how far.
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

        # 2. Web, worker and beat: readiness through the broker, beat's heartbeat, the printed login.
        deadline = time.monotonic() + 300
        status, report = 0, {}
        while time.monotonic() < deadline:
            assert wait_exit(pid, 0) is None, log_path.read_text(errors="replace")[-3000:]
            status, report = fetch_json(f"{base}/readyz")
            if status == 200 and report["checks"]["beat"]["status"] == "ok":
                break
            time.sleep(1)
        output = log_path.read_text(errors="replace")
        assert status == 200, (report, output[-3000:])
        print(f"make run: ready (demo built, worker and beat answering) after {time.monotonic() - started:.1f} s")
        assert f"Belvedere is starting on http://127.0.0.1:{port}/" in output
        assert "The demo lives" in output  # make run said so, and switched the feeder on itself (DEMO_FEEDER is not set here)
        assert fetch_json(f"{base}/demo-build")[1]["state"] == "ready"
        assert report["profile"] == "embedded"
        assert report["checks"]["database"]["vendor"] == "sqlite"
        broker = report["checks"]["broker"]
        assert broker["broker"] == "filesystem"
        command_line = process_command_line(broker["worker_pid"])
        assert "celery" in command_line and "worker" in command_line, command_line
        assert report["checks"]["beat"]["status"] == "ok", report
        username, password = re.search(r"researcher\s+user '([^']+)'\s+password '([^']+)'", output).groups()
        assert "Welcome, Dana Demo" in log_in(base, username, password)

        # 3. More than DEMO_MINUTES of demo time fed (SPEED x real time, a tick every 5 s) ...
        deadline = time.monotonic() + 420
        clock = None
        while time.monotonic() < deadline:
            assert wait_exit(pid, 0) is None, log_path.read_text(errors="replace")[-3000:]
            clock = shell(env, CLOCK)
            if clock and clock["ticks"] and minutes_between(clock["origin"], clock["demo_time"]) >= DEMO_MINUTES + 1:
                break
            time.sleep(10)
        assert clock and clock["ticks"] and minutes_between(clock["origin"], clock["demo_time"]) >= DEMO_MINUTES + 1, clock
        fifteen_at = time.time()

        # ... then beat's next rounds: the jobs scored (every 60 s) and the catalogue checked (every minute) on what was fed.
        deadline = time.monotonic() + 300
        report = None
        while time.monotonic() < deadline:
            assert wait_exit(pid, 0) is None, log_path.read_text(errors="replace")[-3000:]
            report = shell(env, REPORT)
            scored_after = report["megatron"]["computed"] and _moment(report["megatron"]["computed"]) > fifteen_at
            if (scored_after and not report["running"]["unscored"] and report["catalog"]["beat_runs_since_origin"]
                    and all(status == "ready" for _, _, status, _ in report["demo_finished"])):
                break
            time.sleep(10)
        summary = json.dumps(report, indent=1)
        print(summary)
        assert minutes_between(report["origin"], report["demo_time"]) >= DEMO_MINUTES, summary
        # The Megatron job runs on, with its three stragglers where they were planted.
        megatron = report["megatron"]
        planted = megatron["planted"]
        assert megatron["state"] == "RUNNING" and megatron["status"] == "ready", summary
        assert _moment(megatron["computed"]) > fifteen_at, summary  # scored again after the feeder fed 15 demo minutes
        assert megatron["stragglers"] == sorted([["gpu", *planted["throttled"]], ["gpu", *planted["hot"]],
                                                 ["node", planted["slow_nic"], None]]), summary
        fed = report["fed"]
        assert fed["minutes"] >= DEMO_MINUTES - 3, summary
        assert fed["throttled_clock_ratio"] < 0.8 and fed["hot_excess_c"] >= 12 and fed["slow_nic_tensor_ratio"] < 0.92, summary
        # The catalogue names exactly the 16 silent nodes of group 17, in beat's checks and at demo time.
        catalog = report["catalog"]
        silent = sorted(catalog["silent_nodes"])
        assert len(silent) == 16 and catalog["silent_groups"] == [17], summary
        assert catalog["beat_runs_since_origin"] >= 1 and sorted(catalog["beat_latest"]["ongoing"]) == silent, summary
        assert sorted(catalog["demo_time"]["ongoing"]) == silent and catalog["demo_time"]["freshness"] == "fresh", summary
        assert catalog["demo_time"]["members_with_gaps"] == 16 + 3, summary  # and the three restarted exporters' closed gap
        # Scores: nothing failed for lack of fields; every running job and the demo user's finished jobs scored.
        assert not [job for job in report["failed"] if "fields" in job[2]], summary
        assert report["running"]["count"] >= 40 and report["running"]["unscored"] == [], summary
        assert len(report["demo_finished"]) >= 5, summary
        assert all(status == "ready" and score is not None for _, _, status, score in report["demo_finished"]), summary
        # The demo moved on: jobs ended and started; and feeding it stays cheap: over the feeder's ticks, the median
        # CPU per demo second is under a tenth of a core (at the default speed of 1, a 30-s tick under 3 s of CPU).
        # The median of every tick, not the last one: a tick that catches up after a busy moment feeds more demo
        # seconds, and one tick's CPU time varies with what else the machine runs.
        assert report["timeline"]["ended"] >= 1 and report["timeline"]["started"] >= 1, summary
        ticks = feeder_ticks(log_path.read_text(errors="replace"))
        assert len(ticks) >= 10, ticks
        per_demo_second = sorted(tick["cpu_s"] / tick["demo_seconds"] for tick in ticks)
        assert per_demo_second[len(per_demo_second) // 2] < 0.1, ticks


        # 4. SIGKILL the worker (its main process; its pool children die with it): web keeps answering, the
        # supervisor starts a new worker, and readiness comes back with a new worker process.
        # The worker may be busy scoring (the ping then waits behind its tasks, and /readyz warns without a pid):
        # wait for a ping it answers, which names the process.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, report = fetch_json(f"{base}/readyz")
            if status == 200 and report["checks"]["broker"]["status"] == "ok":
                break
            time.sleep(1)
        assert status == 200 and report["checks"]["broker"]["status"] == "ok", report
        worker = parent_pid(report["checks"]["broker"]["worker_pid"])
        assert "celery" in process_command_line(worker) and "worker" in process_command_line(worker)
        web_pids = {int(p) for p in re.findall(r"Booting worker with pid: (\d+)", log_path.read_text(errors="replace"))}
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 120
        healthz = []
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

        # 5. Ctrl-C in the terminal: everything stops, and make ends without an error.
        os.write(terminal, b"\x03")
        exit_code = wait_exit(pid, 90)
        output = log_path.read_text(errors="replace")
        assert exit_code == 0, (exit_code, output[-3000:])
        assert "make: ***" not in output and "Belvedere stopped" in output
        assert not alive(new_worker) and not any(alive(p) for p in web_pids)
        assert fetch_json(f"{base}/healthz")[0] == 0
    finally:
        stop_in_terminal(pid, terminal, exit_code)


def log_in(base: str, username: str, password: str) -> str:
    """Log in through the form as a browser does; the page it lands on."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{base}/accounts/login/", timeout=30).read()
    csrf = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
    form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": csrf}).encode()
    request = urllib.request.Request(f"{base}/accounts/login/", data=form, headers={"Referer": f"{base}/accounts/login/"})
    with opener.open(request, timeout=30) as response:
        assert response.url == f"{base}/"
        return response.read().decode()


def feeder_ticks(log: str) -> list[dict]:
    """Every tick of the demo feeder the worker logged ("Task core.feed_demo[...] succeeded in ...: {...}") that fed
    demo time: {demo_seconds, cpu_s, ...}."""
    import ast
    import re

    found = []
    for match in re.finditer(r"Task core\.feed_demo\[[^\]]+\] succeeded in [0-9.]+s: (\{.*\})\s*$", log, re.MULTILINE):
        tick = ast.literal_eval(match.group(1))
        if tick.get("fed") and tick.get("demo_seconds"):
            found.append(tick)
    return found


def _moment(text: str) -> float:
    """A datetime the report printed, as seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()
