"""The collector's command line: options, Slurm's GPU lists, and wrapper mode run for real.

Wrapper-mode tests start the script as a real process (`python belvedere-collector.py ... --
python -c ...`) with the environment srun would give a task, so exit statuses, exec, signals and
the child process are the operating system's, not simulated.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from .recording import SCRIPT, UUID0, load

collector = load()
PY = sys.executable


def task_env(**extra):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SLURM_", "BELVEDERE_"))}
    env.update({"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "nid000001", "SLURM_LOCALID": "0",
                "SLURM_PROCID": "0"})
    env.update(extra)
    return env


def run(args, env=None, timeout=30, **kwargs):
    return subprocess.run([PY, str(SCRIPT), *args], env=env or task_env(), capture_output=True, text=True,
                          timeout=timeout, **kwargs)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("interval", ["0.05", "0.099", "0", "-1", "nan"])
def test_intervals_below_100_ms_are_refused(interval):
    with pytest.raises(collector.UsageError, match=r"--interval: .*below the minimum of 0\.1 s.*Hopper"):
        collector.parse_options(["--interval", interval])


def test_100_ms_is_accepted_and_1_s_is_the_default():
    assert collector.parse_options(["--interval", "0.1"]).interval == 0.1
    assert collector.parse_options([]).interval == 1.0


def test_standalone_with_a_bad_interval_exits_2_with_one_line():
    result = run(["--source", "none", "--dry-run", "--interval", "0.05"])
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("belvedere-collector: argument --interval: 0.05 s is below the minimum of 0.1 s")


def test_fields_option():
    assert collector.parse_options([]).fields == list(collector.DEFAULT_FIELDS)
    assert collector.parse_options(["--fields", "1002,155", "--fields", "1002,252"]).fields == [1002, 155, 252]
    assert collector.parse_options(["--fields", "device"]).fields == list(collector.DEFAULT_DEVICE)
    with pytest.raises(collector.UsageError, match="'SMACT' is not a DCGM field id"):
        collector.parse_options(["--fields", "SMACT"])


# --------------------------------------------------------------------------------------------
# Slurm's GPU lists
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, indices, uuids", [
    ("0,1,2,3", {0, 1, 2, 3}, set()),
    ("2", {2}, set()),
    ("0-3", {0, 1, 2, 3}, set()),
    ("1,4-5", {1, 4, 5}, set()),
    (f"{UUID0},3", {3}, {UUID0.lower()}),
])
def test_slurm_step_gpus(value, indices, uuids):
    selection = collector.gpus_from_env({"SLURM_STEP_GPUS": value, "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"})
    assert (set(selection.indices), set(selection.uuids)) == (indices, uuids)
    assert str(selection) == f"SLURM_STEP_GPUS={value}"
    assert selection.matches(min(indices), "") and not selection.matches(99, "GPU-other")


def test_the_steps_gpus_before_the_jobs_and_all_without_either():
    assert set(collector.gpus_from_env({"SLURM_JOB_GPUS": "4,5"}).indices) == {4, 5}
    assert set(collector.gpus_from_env({"SLURM_STEP_GPUS": "", "SLURM_JOB_GPUS": "4,5"}).indices) == {4, 5}
    assert set(collector.gpus_from_env({"SLURM_STEP_GPUS": "NoDevFiles", "SLURM_JOB_GPUS": "6"}).indices) == {6}
    assert collector.gpus_from_env({}).everything
    assert collector.parse_options(["--gpus", "all"]).gpus.everything
    assert set(collector.parse_options(["--gpus", "1,3"]).gpus.indices) == {1, 3}


def test_an_unreadable_gpu_list_is_said_and_skipped(capsys):
    selection = collector.gpus_from_env({"SLURM_STEP_GPUS": "gpu:a100:2", "SLURM_JOB_GPUS": "1"})
    assert set(selection.indices) == {1}
    assert "SLURM_STEP_GPUS='gpu:a100:2' cannot be read" in capsys.readouterr().err
    with pytest.raises(collector.UsageError, match="empty range"):
        collector.parse_options(["--gpus", "3-1"])


def test_proc_table_reads_minors(tmp_path):
    directory = tmp_path / "0000:0a:00.0"
    directory.mkdir()
    (directory / "information").write_text(f"Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t {UUID0.upper()}\n"
                                           "Bus Location: \t 0000:0a:00.0\nDevice Minor: \t 3\n")
    (tmp_path / "0000:0b:00.0").mkdir()  # unreadable entry: skipped
    assert collector.proc_gpu_minors(str(tmp_path)) == {UUID0.lower(): 3}
    assert collector.proc_gpu_minors(str(tmp_path / "missing")) == {}


# --------------------------------------------------------------------------------------------
# Destinations and tokens
# --------------------------------------------------------------------------------------------
def test_portal_from_the_job_url_and_the_endpoint():
    options = collector.parse_options([])
    env = {"BELVEDERE_JOB_URL": "https://belvedere.example.org/portal/jobs/alps/4242/"}
    base = collector.portal_base(options, env)
    assert collector.samples_url(base) == "https://belvedere.example.org/portal/api/v1/telemetry/samples/"
    options = collector.parse_options(["--portal", "http://127.0.0.1:8000/api/v1/telemetry/samples/"])
    assert collector.samples_url(collector.portal_base(options, {})) == "http://127.0.0.1:8000/api/v1/telemetry/samples/"
    with pytest.raises(collector.Failure, match="nowhere to send the samples"):
        collector.portal_base(collector.parse_options([]), {})
    with pytest.raises(collector.Failure, match="not an http"):
        collector.portal_base(collector.parse_options(["--portal", "ftp://x"]), {})


def test_tokens(tmp_path):
    options = collector.parse_options([])
    job_token = tmp_path / "job-4242.token"
    job_token.write_text("bvj_3q8VQh2mZk1cYw9R0aTtLx\n")
    assert collector.authorization(options, {"BELVEDERE_JOB_TOKEN_FILE": str(job_token)}) == \
        "JobToken bvj_3q8VQh2mZk1cYw9R0aTtLx"
    assert collector.authorization(options, {"BELVEDERE_TOKEN": "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
                                             "BELVEDERE_JOB_TOKEN_FILE": str(job_token)}) == \
        "Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"
    with pytest.raises(collector.Failure, match="no token"):
        collector.authorization(options, {})
    with pytest.raises(collector.Failure, match="cannot read the token"):
        collector.authorization(options, {"BELVEDERE_JOB_TOKEN_FILE": str(tmp_path / "gone")})


def test_output_name_placeholders():
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "1"}
    assert collector.output_path("gpu-%j.%s-%h.ndjson.gz", "nid000001", env) == "gpu-4242.1-nid000001.ndjson.gz"
    assert collector.output_path("100%%-%h", "n1", {}) == "100%-n1"


# --------------------------------------------------------------------------------------------
# Wrapper mode, for real
# --------------------------------------------------------------------------------------------
def test_the_wrapper_exits_with_the_commands_status(tmp_path):
    out = tmp_path / "samples.ndjson"
    result = run(["--source", "none", "--output", str(out), "--", PY, "-c",
                  "import sys; print('training'); sys.exit(3)"])
    assert result.returncode == 3
    assert result.stdout == "training\n"
    assert out.exists()  # local rank 0 monitored (nothing: --source none)
    assert "sampling nothing (--source none)" in result.stderr


def test_the_wrapper_dies_of_the_signal_that_killed_the_command(tmp_path):
    result = run(["--source", "none", "--output", str(tmp_path / "f"), "--", PY, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert result.returncode == -signal.SIGTERM


def test_the_wrapper_passes_arguments_and_stdin_untouched(tmp_path):
    result = run(["--source", "none", "--output", str(tmp_path / "f"), "--", PY, "-c",
                  "import sys; print(sys.argv[1:], sys.stdin.read())", "--interval", "0.01", "--", "x y"],
                 input="from stdin")
    assert result.returncode == 0
    assert result.stdout == "['--interval', '0.01', '--', 'x y'] from stdin\n"


def test_only_local_rank_0_monitors(tmp_path):
    command = ["--", PY, "-c", "import os, sys; sys.exit(int(os.environ['SLURM_LOCALID']) + 10)"]
    for local_id in ("0", "1", "3"):
        out = tmp_path / f"rank{local_id}.ndjson"
        result = run(["--source", "none", "--output", str(out), *command], env=task_env(SLURM_LOCALID=local_id))
        assert result.returncode == 10 + int(local_id)
        assert out.exists() == (local_id == "0")
        assert ("sampling" in result.stderr) == (local_id == "0")
    # Other ranks exec the command: it runs in the wrapper's own process.
    result = run(["--source", "none", "--", PY, "-c", "import os; print(os.getpid())"],
                 env=task_env(SLURM_LOCALID="1"))
    assert result.stderr == ""


def test_only_local_rank_0_monitors_standalone(tmp_path):
    out = tmp_path / "f.ndjson"
    result = run(["--source", "none", "--output", str(out), "--duration", "0.2"], env=task_env(SLURM_LOCALID="2"))
    assert (result.returncode, result.stderr, out.exists()) == (0, "", False)


def test_monitoring_problems_never_change_the_commands_status(tmp_path):
    # No DCGM here: one line, the command runs and its status is returned.
    result = run(["--source", "dcgm", "--output", str(tmp_path / "f"), "--", PY, "-c", "import sys; sys.exit(5)"],
                 env=task_env(DCGM_HOME=str(tmp_path)))
    assert result.returncode == 5
    assert "DCGM's Python bindings (pydcgm) are not in" in result.stderr
    # A bad option in wrapper mode: said once, the command still runs.
    result = run(["--interval", "0.01", "--", PY, "-c", "import sys; sys.exit(6)"])
    assert result.returncode == 6
    [line] = result.stderr.splitlines()
    assert "below the minimum of 0.1 s" in line and line.endswith("running the command without monitoring")
    # Nowhere to send: the same.
    result = run(["--source", "none", "--", PY, "-c", "import sys; sys.exit(7)"])
    assert result.returncode == 7 and "nowhere to send the samples" in result.stderr


def test_a_missing_command_is_127_and_nothing_after_dashes_is_2(tmp_path):
    result = run(["--source", "none", "--output", str(tmp_path / "f"), "--", "no-such-command-here"])
    assert result.returncode == 127 and "no-such-command-here: command not found" in result.stderr
    result = run(["--source", "none", "--", "no-such-command-here"], env=task_env(SLURM_LOCALID="1"))
    assert result.returncode == 127
    assert run(["--source", "none", "--"]).returncode == 2


CHILD = r"""
import os, signal, sys, time
count = 0
def on_usr1(signum, frame):
    global count
    count += 1
def on_term(signum, frame):
    print("usr1", count, flush=True)
    sys.exit(7)
signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, on_term)
print("ready", os.getpid(), flush=True)
while True:
    time.sleep(0.05)
"""

AS_SLURMSTEPD = r"""
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(15, b"slurmstepd", 0, 0, 0)  # PR_SET_NAME: /proc/<pid>/comm reads slurmstepd
for pid in sys.argv[1:]:
    os.kill(int(pid), signal.SIGUSR1)
"""


def start_wrapper(tmp_path):
    wrapper = subprocess.Popen([PY, str(SCRIPT), "--source", "none", "--output", str(tmp_path / "f"), "--",
                                PY, "-c", CHILD], env=task_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    line = wrapper.stdout.readline().split()
    assert line[0] == "ready", line
    return wrapper, int(line[1])


def finish(wrapper):
    time.sleep(0.3)
    wrapper.send_signal(signal.SIGTERM)
    stdout, stderr = wrapper.communicate(timeout=20)
    return wrapper.returncode, stdout, stderr


def test_signals_sent_to_the_wrapper_are_forwarded_once(tmp_path):
    wrapper, child = start_wrapper(tmp_path)
    assert child != wrapper.pid
    wrapper.send_signal(signal.SIGUSR1)
    returncode, stdout, stderr = finish(wrapper)
    assert (returncode, stdout) == (7, "usr1 1\n")
    assert "wrote 0 samples" in stderr  # SIGTERM also stopped the monitoring, cleanly


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc/<pid>/comm are Linux's")
def test_signals_from_slurmstepd_are_not_forwarded_again(tmp_path):
    """slurmstepd signals every process of the step (scancel, --signal, time limit): the command got it."""
    wrapper, child = start_wrapper(tmp_path)
    subprocess.run([PY, "-c", AS_SLURMSTEPD, str(wrapper.pid), str(child)], check=True, timeout=10)
    returncode, stdout, _ = finish(wrapper)
    assert (returncode, stdout) == (7, "usr1 1\n")
