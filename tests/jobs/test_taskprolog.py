"""deploy/slurm/belvedere-taskprolog.sh: the job's Belvedere URL, once, in every job's output.

The integration tests run real jobs on a local Slurm 22.05 cluster (``slurm_cluster``, see
tests/slurm_cluster.py) whose TaskProlog is the repository's script; the others run the script
directly with dash, as slurmstepd would, to check what it prints for odd settings.
"""
import os
import re
import shutil
import subprocess

import pytest

from tests.jobs.conftest import TASKPROLOG, TEST_URL

BANNER = re.compile(r"^Belvedere: .*$", re.MULTILINE)


def banner(cluster, job_id) -> str:
    return f"Belvedere: {TEST_URL}/jobs/{cluster.cluster_name}/{job_id}/"


def run_batch(cluster, tmp_path, script: str, *args: str, env=None, timeout=40, state="COMPLETED"):
    """Submit, wait for ``state``; returns (job id, stdout file text, `scontrol -o show job` line).

    stderr goes to its own file: srun may add notes there ("step creation temporarily disabled,
    retrying" while the previous step's resources are released), the banner is on stdout."""
    job_id = cluster.sbatch(script, "--output", str(tmp_path / "slurm-%j.out"), "--error",
                            str(tmp_path / "slurm-%j.err"), "--time=2", *args, cwd=tmp_path, env=env)
    cluster.wait_for_state(job_id, state, timeout=timeout)
    info = cluster.run("scontrol", "-o", "show", "job", str(job_id), check=True).stdout
    return job_id, (tmp_path / f"slurm-{job_id}.out").read_text(), info


# ---------------------------------------------------------------------------------------------
# On the cluster
# ---------------------------------------------------------------------------------------------
@pytest.mark.integration
def test_batch_job_on_two_nodes_prints_its_url_once(slurm_cluster, tmp_path):
    script = "#!/bin/sh\nsrun -N2 -n4 hostname\nsrun -N1 -n1 true\necho done\n"
    job_id, text, info = run_batch(slurm_cluster, tmp_path, script, "-N2", "-n4")

    assert "ExitCode=0:0" in info and "NumNodes=2" in info
    assert BANNER.findall(text) == [banner(slurm_cluster, job_id)], text
    pattern = rf"^Belvedere: {re.escape(TEST_URL)}/jobs/{slurm_cluster.cluster_name}/{job_id}/$"
    assert len(re.findall(pattern, text, re.MULTILINE)) == 1
    # The banner comes first (the batch step's TaskProlog runs before the script), then the
    # 4 tasks of step 0 and the script's own output: nothing was lost.
    lines = text.splitlines()
    assert lines[0] == banner(slurm_cluster, job_id)
    assert len(lines) == 1 + 4 + 1 and lines[-1] == "done"


@pytest.mark.integration
def test_step_id_leaked_from_the_submitting_shell_does_not_add_a_banner(slurm_cluster, tmp_path):
    # sbatch run from inside a job step (e.g. an `srun --pty bash` session) carries SLURM_STEP_ID=0
    # into the batch step's environment (seen with 22.05.8); the batch step must still print once
    # and step 0 of the batch job not at all.
    script = "#!/bin/sh\nsrun -n2 true\n"
    job_id, text, _ = run_batch(slurm_cluster, tmp_path, script, "-N1", "-n2",
                                env={"SLURM_STEP_ID": "0", "SLURM_STEPID": "0", "SLURM_PROCID": "0"})
    assert BANNER.findall(text) == [banner(slurm_cluster, job_id)], text


@pytest.mark.integration
def test_allocation_without_batch_script_prints_once_for_task_0_of_step_0(slurm_cluster, tmp_path):
    result = slurm_cluster.run("salloc", "-N2", "-n4", "--time=2", "sh", "-c", "srun -n4 hostname; srun -n1 hostname",
                               cwd=tmp_path, timeout=40, check=True)
    match = re.search(r"Granted job allocation (\d+)", result.stderr)
    assert match, result.stderr
    assert BANNER.findall(result.stdout) == [banner(slurm_cluster, match.group(1))], result.stdout
    assert len(result.stdout.splitlines()) == 1 + 4 + 1


CONFIGS = {
    "missing": None,
    "directory": "DIR",
    "binary garbage": os.urandom(4096) + b"\nBELVEDERE_URL=\x00\xff\x1b[2J\n",
    "bad url": b"BELVEDERE_URL=javascript:alert(1)\nBELVEDERE_URL=http://evil host/\n",
    "bad cluster": b"BELVEDERE_URL=http://belvedere.test\nBELVEDERE_CLUSTER=../../admin\n",
    "huge": b"# padding\n" * 200_000 + b"BELVEDERE_URL=http://belvedere.test\n",
}


@pytest.mark.integration
def test_missing_or_garbage_settings_never_break_the_job(slurm_cluster, tmp_path):
    """Each variant is its own job (submitted together, so the test stays fast)."""
    jobs = {}
    for name, content in CONFIGS.items():
        folder = tmp_path / name.replace(" ", "-")
        folder.mkdir()
        conf = folder / "taskprolog.env"
        if content == "DIR":
            conf.mkdir()
        elif content is not None:
            conf.write_bytes(content)
        script = "#!/bin/sh\nsrun -n2 echo step-ran\necho script-ran\n"
        job_id = slurm_cluster.sbatch(script, "-N1", "-n2", "--time=2", "--output", str(folder / "out.txt"),
                                      "--error", str(folder / "err.txt"), cwd=folder,
                                      env={"BELVEDERE_TASKPROLOG_CONF": str(conf)})
        jobs[name] = (job_id, folder / "out.txt")
    for name, (job_id, output) in jobs.items():
        slurm_cluster.wait_for_state(job_id, "COMPLETED", timeout=40)
        info = slurm_cluster.run("scontrol", "-o", "show", "job", str(job_id), check=True).stdout
        assert "ExitCode=0:0" in info, (name, info)
        text = output.read_text(errors="replace")
        assert text.splitlines() == ["step-ran", "step-ran", "script-ran"], (name, text)  # and no banner


@pytest.mark.integration
def test_token_file_is_exported_to_every_task(slurm_cluster, tmp_path):
    token_dir = slurm_cluster.workdir / "tokens"
    script = (
        "#!/bin/sh\n"
        "echo \"batch: $BELVEDERE_JOB_TOKEN_FILE $BELVEDERE_JOB_URL\"\n"
        "srun -N2 -n2 printenv BELVEDERE_JOB_TOKEN_FILE\n"
        "srun -n1 sh -c 'echo \"url: $BELVEDERE_JOB_URL\"'\n"
    )
    output = tmp_path / "slurm-%j.out"
    # Held, so the token file exists before the job starts (Belvedere's Prolog writes it there).
    job_id = slurm_cluster.sbatch(script, "--hold", "-N2", "-n2", "--time=2", "--output", str(output),
                                  "--error", str(tmp_path / "slurm-%j.err"), cwd=tmp_path)
    token = token_dir / f"job-{job_id}.token"
    token.write_text("bvj_test\n")
    token.chmod(0o600)
    slurm_cluster.run("scontrol", "release", str(job_id), check=True)
    slurm_cluster.wait_for_state(job_id, "COMPLETED", timeout=40)

    text = (tmp_path / f"slurm-{job_id}.out").read_text()
    url = f"{TEST_URL}/jobs/{slurm_cluster.cluster_name}/{job_id}/"
    lines = text.splitlines()
    assert lines[0] == banner(slurm_cluster, job_id)
    assert f"batch: {token} {url}" in lines
    assert lines.count(str(token)) == 2, text  # srun printenv, one per task
    assert f"url: {url}" in lines
    assert BANNER.findall(text) == [banner(slurm_cluster, job_id)]


@pytest.mark.integration
def test_no_token_file_no_export(slurm_cluster, tmp_path):
    script = "#!/bin/sh\nsrun -n1 sh -c 'echo \"token=[${BELVEDERE_JOB_TOKEN_FILE-unset}]\"'\n"
    job_id, text, _ = run_batch(slurm_cluster, tmp_path, script, "-N1", "-n1")
    assert "token=[unset]" in text.splitlines(), text


# ---------------------------------------------------------------------------------------------
# The script alone, as slurmstepd runs it (dash; stdout is what slurmstepd would read)
# ---------------------------------------------------------------------------------------------
def run_script(tmp_path, conf: str | None, **env):
    shell = shutil.which("dash") or shutil.which("sh")
    conf_path = tmp_path / "taskprolog.env"
    if conf is not None:
        conf_path.write_text(conf)
    environment = {"PATH": "/usr/bin:/bin", "BELVEDERE_TASKPROLOG_CONF": str(conf_path), **env}
    result = subprocess.run([shell, str(TASKPROLOG)], env=environment, capture_output=True, text=True, timeout=10)
    assert result.returncode == 0 and result.stderr == ""
    return result.stdout.splitlines()


GOOD_CONF = "export BELVEDERE_URL='https://belvedere.example.org/'\r\n# comment\n  BELVEDERE_CLUSTER=alps  \n"


def test_settings_file_is_parsed_not_sourced(tmp_path):
    marker = tmp_path / "pwned"
    conf = GOOD_CONF + f"$(touch {marker})\nBELVEDERE_CLUSTER=`touch {marker}`\n"
    lines = run_script(tmp_path, conf, SLURM_JOB_ID="77", SLURM_CLUSTER_NAME="daint")
    assert lines == []  # the last BELVEDERE_CLUSTER wins and is not a valid name
    assert not marker.exists()
    expected = ["print Belvedere: https://belvedere.example.org/jobs/alps/77/"]
    assert run_script(tmp_path, GOOD_CONF, SLURM_JOB_ID="77") == expected


def test_cluster_defaults_to_slurms_name(tmp_path):
    lines = run_script(tmp_path, "BELVEDERE_URL=https://b.example.org\n", SLURM_JOB_ID="5", SLURM_CLUSTER_NAME="daint")
    assert lines == ["print Belvedere: https://b.example.org/jobs/daint/5/"]


@pytest.mark.parametrize("env", [
    {"SLURM_JOB_ID": "12;rm -rf /"},
    {"SLURM_JOB_ID": "012"},
    {"SLURM_JOB_ID": ""},
    {"SLURM_JOB_ID": "1234567890123"},
    {"SLURM_JOB_ID": "5", "SLURM_CLUSTER_NAME": "a b"},
    {"SLURM_JOB_ID": "5", "SLURM_CLUSTER_NAME": "-x"},
    {"SLURM_JOB_ID": "5", "SLURM_CLUSTER_NAME": "x\nprint evil"},
])
def test_unsafe_job_id_or_cluster_prints_nothing(tmp_path, env):
    assert run_script(tmp_path, "BELVEDERE_URL=https://b.example.org\n", **env) == []


@pytest.mark.parametrize("url", ["ftp://b.example.org", "https://", "https://b.example.org/?q=1",
                                 "https://a@b.example.org", "https://b.example.org/x y", "//b.example.org",
                                 "https://b.example.org/%0a", "https://-b.example.org"])
def test_unsafe_url_prints_nothing(tmp_path, url):
    assert run_script(tmp_path, f"BELVEDERE_URL={url}\n", SLURM_JOB_ID="5", SLURM_CLUSTER_NAME="alps") == []


def test_url_in_the_jobs_environment_is_ignored(tmp_path):
    lines = run_script(tmp_path, None, SLURM_JOB_ID="5", SLURM_CLUSTER_NAME="alps",
                       BELVEDERE_URL="https://evil.example.org")
    assert lines == []


def test_only_the_batch_step_or_task_0_of_step_0_outside_batch_jobs_prints(tmp_path):
    # Outside slurmstepd the script falls back to SLURM_STEP_ID (unset in the batch step, as 22.05 does).
    conf = "BELVEDERE_URL=https://b.example.org\n"
    base = {"SLURM_JOB_ID": "9", "SLURM_CLUSTER_NAME": "alps"}
    url_line = ["print Belvedere: https://b.example.org/jobs/alps/9/"]
    assert run_script(tmp_path, conf, **base, SLURM_PROCID="0", ENVIRONMENT="BATCH") == url_line
    assert run_script(tmp_path, conf, **base, SLURM_STEP_ID="4294967291") == url_line
    assert run_script(tmp_path, conf, **base, SLURM_STEP_ID="0", SLURM_PROCID="0", ENVIRONMENT="BATCH") == []
    assert run_script(tmp_path, conf, **base, SLURM_STEP_ID="0", SLURM_PROCID="0") == url_line
    assert run_script(tmp_path, conf, **base, SLURM_STEP_ID="0", SLURM_PROCID="1") == []
    assert run_script(tmp_path, conf, **base, SLURM_STEP_ID="1", SLURM_PROCID="0") == []
    assert run_script(tmp_path, conf, **base, SLURM_STEP_ID="4294967290", SLURM_PROCID="0") == url_line


def test_token_exports_need_a_readable_file_in_a_safe_directory(tmp_path):
    tokens = tmp_path / "tok"
    tokens.mkdir()
    (tokens / "job-9.token").write_text("x")
    conf = f"BELVEDERE_URL=https://b.example.org\nBELVEDERE_JOB_TOKEN_DIR={tokens}/\n"
    env = {"SLURM_JOB_ID": "9", "SLURM_CLUSTER_NAME": "alps", "SLURM_STEP_ID": "3", "SLURM_PROCID": "2"}
    assert run_script(tmp_path, conf, **env) == [
        f"export BELVEDERE_JOB_TOKEN_FILE={tokens}/job-9.token",
        "export BELVEDERE_JOB_URL=https://b.example.org/jobs/alps/9/",
    ]
    assert run_script(tmp_path, conf, **dict(env, SLURM_JOB_ID="10")) == []
    assert run_script(tmp_path, "BELVEDERE_JOB_TOKEN_DIR=relative/dir\n", **env) == []
    # Without a usable URL the token file is still exported (the job's code may use it), the URL not.
    assert run_script(tmp_path, f"BELVEDERE_JOB_TOKEN_DIR={tokens}\n", **env) == [
        f"export BELVEDERE_JOB_TOKEN_FILE={tokens}/job-9.token"]
