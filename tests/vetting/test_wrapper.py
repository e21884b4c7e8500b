"""deploy/vetting/belvedere-vetnode.sh against a live portal: it shows vetnode's output, posts it with the
job's token, writes the failed nodes for --exclude and keeps vetnode's exit status; posting never fails
the job. The command it wraps prints a real vetnode run (tests/vetting/data) where srun + vetnode would."""
import os
import subprocess
from pathlib import Path

import pytest

from apps.vetting.models import VettingRun

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "deploy" / "vetting" / "belvedere-vetnode.sh"
VERBOSE = Path(__file__).parent / "data" / "vetnode-0.1.5-verbose-srun.txt"


def run_wrapper(tmp_path, *args, env=None, status=1):
    command = ["sh", "-c", f"cat '{VERBOSE}'; exit {status}"]
    return subprocess.run(["bash", str(SCRIPT), *args, "--", *command], capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path), **(env or {})})


@pytest.fixture
def in_job(live_server, job, tmp_path):
    from apps.jobs.services import job_token_issue

    token = tmp_path / "job-4242.token"
    token.write_text(job_token_issue(job, "prolog") + "\n")
    return {"BELVEDERE_JOB_URL": f"{live_server.url}/jobs/alps/4242/", "BELVEDERE_JOB_TOKEN_FILE": str(token), "SLURM_JOB_ID": "4242"}


def test_the_wrapper_posts_with_the_job_token_and_writes_the_exclude_file(tmp_path, in_job, transactional_db):
    config = tmp_path / "config.yaml"
    config.write_text("name: alps-ml-vetting\nevals: []\n")
    exclude = tmp_path / "cordoned.txt"
    result = run_wrapper(tmp_path, "--config", str(config), "--exclude-file", str(exclude), env=in_job)
    assert result.returncode == 1  # vetnode's status, not the wrapper's
    assert "| nid001235 | ❌" in result.stdout  # vetnode's output still in the job's output
    assert "recorded in Belvedere: http://" in result.stderr and "nodes that failed vetting: nid001235" in result.stderr
    assert exclude.read_text() == "nid001235\n"
    run = VettingRun.objects.get()
    assert (run.job.job_id, run.protocol_name, run.submitter, run.failed_hosts) == (4242, "alps-ml-vetting", "job alps/4242", ["nid001235"])
    assert len(run.protocol_hash) == 64 and run.results_total == 24
    assert not list(tmp_path.glob("belvedere-vetnode.*"))  # its temporary files are gone


def test_without_the_portal_the_job_still_gets_its_exclude_file(tmp_path, transactional_db):
    exclude = tmp_path / "cordoned.txt"
    env = {"BELVEDERE_JOB_URL": "http://127.0.0.1:9/jobs/alps/4242/", "BELVEDERE_JOB_TOKEN_FILE": str(tmp_path / "missing.token"),
           "SLURM_JOB_ID": "4242"}
    result = run_wrapper(tmp_path, "--exclude-file", str(exclude), env=env, status=0)
    assert result.returncode == 0 and "not posting: no portal address or job token" in result.stderr
    assert exclude.read_text() == "nid001235\n"
    token = tmp_path / "t.token"
    token.write_text("bvj_nothing")
    result = run_wrapper(tmp_path, "--exclude-file", str(exclude), env={**env, "BELVEDERE_JOB_TOKEN_FILE": str(token)}, status=0)
    assert result.returncode == 0 and "the portal did not take the results" in result.stderr
    assert exclude.read_text() == "nid001235\n" and VettingRun.objects.count() == 0


def test_usage_errors(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "give --config FILE" in result.stderr
    result = subprocess.run(["bash", str(SCRIPT), "--config", str(tmp_path / "nope.yaml")], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "cannot read the protocol" in result.stderr
