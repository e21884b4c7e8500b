"""PyTorch Flight Recorder dumps collected on the node (issue 36): the Prolog makes the job's folder under
BELVEDERE_FLIGHTREC_DIR, the TaskProlog points TORCH_NCCL_DEBUG_INFO_TEMP_FILE into it, the Epilog posts what the job
left there with the job's token and removes it; deploy/flightrec/belvedere-post-flightrec.sh does the same from the
batch script.

The scripts run for real (dash, and bash where it matters) with slurmd's environment faked; the POSTs go to
pytest-django's live server, so the job token, the flight-recorder endpoint, the dump checks and the analysis are
the real ones. The dumps are ``apps.flightrec.synthetic``'s NCCL-shaped pickles, made with the job's own times (a
dump from before the job's run is refused as another job's).
"""
import os
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from apps.flightrec.models import FlightDump
from apps.flightrec.synthetic import megatron_dumps
from apps.jobs.models import Job
from tests.jobs.test_prolog_epilog import (EPILOG, JOB_ID, PROLOG, SHELLS, job_token_get, run, script_env,
                                           token_file, wait_for, write_service_token)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TASKPROLOG = REPO / "deploy" / "slurm" / "belvedere-taskprolog.sh"
POST_SCRIPT = REPO / "deploy" / "flightrec" / "belvedere-post-flightrec.sh"
FLIGHT_URL = f"/api/v1/jobs/testcluster/{JOB_ID}/flight-recorder/"
CULPRIT = 3
OTHER_UID = 54321  # nobody's on this machine: "someone else"


def needs_root():
    if os.geteuid() != 0:
        pytest.skip("needs root, as slurmd runs the Prolog and Epilog: the folders are chowned to a job user")


@pytest.fixture
def node(request) -> Path:
    """A node's directories: the token directory and the Flight Recorder directory (root's, 0755, as under /run or
    /var/tmp). Not under pytest's tmp_path, whose 0700 parent no job user could cross."""
    tree = Path(tempfile.mkdtemp(prefix="belvedere-fr-"))
    tree.chmod(0o755)
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", str(tree)], check=False))
    for name in ("tokens", "flightrec"):
        (tree / name).mkdir(mode=0o755)
        (tree / name).chmod(0o755)
    return tree


def settings(tree: Path, **overrides) -> dict:
    return {"BELVEDERE_FLIGHTREC_DIR": str(tree / "flightrec"), "SLURM_JOB_NODELIST": "nid000001", **overrides}


def folder(tree: Path) -> Path:
    return tree / "flightrec" / str(JOB_ID)


def write_dumps(where: Path, *, world: int = 4) -> list[int]:
    """The ranks' dumps as PyTorch names them at the prefix <where>/nccl_trace_rank_: rank 3 never entered the last
    data-parallel all-reduce; the dumps were written a moment ago (the job's own run)."""
    end_ns = time.time_ns()
    ranks = []
    for rank, data in megatron_dumps(world, 40, tp=2, pp=1, culprit=CULPRIT, end_ns=end_ns, timeout_ms=60_000):
        (where / f"nccl_trace_rank_{rank}").write_bytes(data)
        ranks.append(rank)
    return ranks


def start_job(tree: Path, live_server, make_user, **overrides) -> str:
    """The real Prolog against the live portal: the job, its token file and (BELVEDERE_FLIGHTREC_DIR) its folder."""
    write_service_token(tree, make_user("svc", is_staff=True))
    prolog = run(PROLOG, tree, BELVEDERE_URL=live_server.url, **settings(tree, **overrides))
    assert prolog.returncode == 0 and f"Flight Recorder folder {folder(tree)}" in prolog.stderr, prolog.stderr
    return token_file(tree).read_text().strip()


def analysed(api_client, key: str) -> dict:
    from apps.flightrec.tasks import analyse_job

    job = Job.objects.get(job_id=JOB_ID)
    analyse_job.apply(args=(job.pk,)).get()  # the worker's task, run here (the live server queues it)
    response = job_token_get(api_client, key, FLIGHT_URL)
    assert response.status_code == 200, response.content
    return response.json()


# ---------------------------------------------------------------------------------------------
# Prolog and TaskProlog: the folder and the variables
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_prolog_makes_the_job_users_folder_and_the_taskprolog_points_pytorch_into_it(node, live_server, make_user):
    needs_root()
    shown = run(PROLOG, node, "--print", **settings(node, SLURM_JOB_UID=str(OTHER_UID)))
    assert f"would make the Flight Recorder folder {folder(node)} for uid {OTHER_UID}" in shown.stderr, shown.stderr
    assert not folder(node).exists()  # --print makes nothing
    start_job(node, live_server, make_user, SLURM_JOB_UID=str(OTHER_UID), SLURM_JOB_GID=str(OTHER_UID))
    info = folder(node).lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o700
    assert (info.st_uid, info.st_gid) == (OTHER_UID, OTHER_UID)

    # The TaskProlog runs as the job's user: the folder must be that user's own.
    conf = node / "taskprolog.env"
    conf.write_text(f"BELVEDERE_FLIGHTREC_DIR={node / 'flightrec'}/\n")

    def taskprolog(uid: int, **env) -> str:
        done = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sh", str(TASKPROLOG)],
                              env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": str(JOB_ID), "BELVEDERE_TASKPROLOG_CONF": str(conf),
                                   **env}, capture_output=True, text=True, timeout=30, cwd="/")
        assert done.returncode == 0
        return done.stdout

    assert taskprolog(OTHER_UID).splitlines() == [
        f"export TORCH_NCCL_DEBUG_INFO_TEMP_FILE={folder(node)}/nccl_trace_rank_",
        "export TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        "export TORCH_FR_BUFFER_SIZE=2000",
    ]
    # What the job set itself wins: its own prefix (nothing printed), or its own timeout and buffer choices.
    assert taskprolog(OTHER_UID, TORCH_NCCL_DEBUG_INFO_TEMP_FILE="/scratch/fr/x_") == ""
    assert taskprolog(OTHER_UID, TORCH_NCCL_DUMP_ON_TIMEOUT="0", TORCH_NCCL_TRACE_BUFFER_SIZE="500").splitlines() == [
        f"export TORCH_NCCL_DEBUG_INFO_TEMP_FILE={folder(node)}/nccl_trace_rank_"]
    # Another user (a job sharing the node) is not pointed at a folder it cannot write.
    assert taskprolog(OTHER_UID + 1) == ""


# ---------------------------------------------------------------------------------------------
# The Epilog posts the dumps
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_epilog_posts_the_job_folders_dumps_and_the_analysis_names_the_culprit(node, live_server, make_user,
                                                                                  api_client):
    key = start_job(node, live_server, make_user)
    ranks = write_dumps(folder(node))
    # Beside them: a link to a file the job's user may not read, and an unrelated file.
    victim = node / "secret"
    victim.write_text("root's\n")
    (folder(node) / "nccl_trace_rank_9").symlink_to(victim)
    (folder(node) / "notes.txt").write_text("not a dump\n")

    # --print says what would go, and changes nothing.
    shown = run(EPILOG, node, "--print", BELVEDERE_URL=live_server.url, **settings(node))
    assert shown.returncode == 0 and '"event":"end"' in shown.stdout
    assert "would post 4 Flight Recorder dump(s)" in shown.stderr and "1 file(s) in the Flight Recorder folder left out" in shown.stderr
    assert sorted(p.name for p in folder(node).iterdir())[:4] == [f"nccl_trace_rank_{r}" for r in ranks]
    assert token_file(node).exists() and not FlightDump.objects.exists()

    # The Epilog mode, as slurmd runs it: it returns at once, and its detached sender posts the end event, then the
    # dumps, with the job token it read before removing the file.
    epilog = subprocess.Popen(["sh", str(EPILOG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True, env=script_env(node, BELVEDERE_URL=live_server.url, **settings(node)))
    stdout, stderr = epilog.communicate(timeout=30)
    try:
        os.killpg(epilog.pid, signal.SIGKILL)  # slurmd kills the Epilog's process group once it exits
    except ProcessLookupError:
        pass
    assert (epilog.returncode, stdout, stderr) == (0, "", "")
    assert not token_file(node).exists()
    assert wait_for(lambda: FlightDump.objects.count() == 4 and not folder(node).exists(), 30), \
        (FlightDump.objects.count(), folder(node).exists())
    assert sorted(FlightDump.objects.values_list("rank", flat=True)) == ranks
    assert victim.read_text() == "root's\n" and Job.objects.get(job_id=JOB_ID).state == "ENDED"

    body = analysed(api_client, key)
    assert body["status"] == "hang" and body["ranks_dumped"] == 4
    assert [c["rank"] for c in body["culprits"]] == [CULPRIT]
    assert "rank 3 never entered all_reduce" in body["verdict"]


@pytest.mark.django_db(transaction=True)
def test_a_non_root_users_dumps_are_read_as_that_user(node, live_server, make_user):
    """Root reads nothing in the user's folder itself: a hard link to a file of root's (made here as root, as a node
    without protected_hardlinks would let the user do) is not the user's and is left out."""
    needs_root()
    start_job(node, live_server, make_user, SLURM_JOB_UID=str(OTHER_UID), SLURM_JOB_GID=str(OTHER_UID))
    ranks = write_dumps(folder(node))
    for path in folder(node).iterdir():
        os.chown(path, OTHER_UID, OTHER_UID)
        path.chmod(0o600)
    secret = node / "secret"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    os.link(secret, folder(node) / "nccl_trace_rank_7")

    epilog = run(EPILOG, node, "--foreground", BELVEDERE_URL=live_server.url,
                 **settings(node, SLURM_JOB_UID=str(OTHER_UID), SLURM_JOB_GID=str(OTHER_UID)))
    assert epilog.returncode == 0, epilog.stderr
    assert "posted 4 Flight Recorder dump(s) of job 4242" in epilog.stderr and "HTTP 201" in epilog.stderr, epilog.stderr
    assert "1 file(s) in the Flight Recorder folder left out" in epilog.stderr
    assert sorted(FlightDump.objects.values_list("rank", flat=True)) == ranks
    assert not folder(node).exists() and secret.read_text() == "root's\n"


def test_a_linked_folder_or_one_owned_by_someone_else_is_neither_read_nor_removed(node):
    needs_root()
    elsewhere = node / "elsewhere"
    elsewhere.mkdir()
    write_dumps(elsewhere)
    folder(node).symlink_to(elsewhere)
    env = settings(node, BELVEDERE_URL="http://127.0.0.1:9")
    (node / "jobs.token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    token_file(node).write_text("bvj_" + "A" * 43 + "\n")
    linked = run(EPILOG, node, "--foreground", **env)
    assert linked.returncode == 7  # the end event: nothing listens on port 9
    assert "is a link or not a directory; not read" in linked.stderr, linked.stderr
    assert "Flight Recorder dump" not in linked.stderr.replace("Flight Recorder folder", "")
    assert folder(node).is_symlink() and len(list(elsewhere.iterdir())) == 4

    folder(node).unlink()
    folder(node).mkdir(mode=0o700)
    write_dumps(folder(node))
    os.chown(folder(node), OTHER_UID, OTHER_UID)  # another user's folder, under this job's id
    token_file(node).write_text("bvj_" + "A" * 43 + "\n")
    foreign = run(EPILOG, node, "--foreground", **env)
    assert f"belongs to uid {OTHER_UID}, not the job's user ({os.getuid()}); not read" in foreign.stderr, foreign.stderr
    assert len(list(folder(node).iterdir())) == 4
    # --print says so too, and the TaskProlog of the job's user does not point PyTorch there.
    shown = run(EPILOG, node, "--print", **env)
    assert "not read" in shown.stderr and "would post" not in shown.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_portal_that_is_down_never_fails_the_job_and_the_folder_still_goes(node, shell):
    (node / "jobs.token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    folder(node).mkdir(mode=0o700)
    write_dumps(folder(node))
    env = settings(node, BELVEDERE_URL="http://127.0.0.1:9", BELVEDERE_FLIGHTREC_TIMEOUT="5")

    # Waited for: the end event and the dumps each fail with a log line; the exit status is the end event's.
    token_file(node).write_text("bvj_" + "A" * 43 + "\n")
    foreground = run(EPILOG, node, "--foreground", shell=shell, **env)
    assert foreground.returncode == 7, foreground.stderr
    assert "failed to post 4 Flight Recorder dump(s) of job 4242" in foreground.stderr
    assert "no HTTP answer" in foreground.stderr and "curl status 7" in foreground.stderr
    assert not folder(node).exists() and not token_file(node).exists()

    # The Epilog mode: exit 0 at once, nothing on its output; the detached sender still removes the folder.
    folder(node).mkdir(mode=0o700)
    write_dumps(folder(node))
    token_file(node).write_text("bvj_" + "A" * 43 + "\n")
    epilog = subprocess.Popen([shell, str(EPILOG)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True, env=script_env(node, **env))
    stdout, stderr = epilog.communicate(timeout=30)
    assert (epilog.returncode, stdout, stderr) == (0, "", "")
    assert not token_file(node).exists()
    assert wait_for(lambda: not folder(node).exists(), 30)

    # Without a job token (the Prolog got none) the dumps cannot go: said, and the folder removed.
    folder(node).mkdir(mode=0o700)
    write_dumps(folder(node))
    untokened = run(EPILOG, node, "--foreground", shell=shell, **env)
    assert "not posted: no job token" in untokened.stderr and not folder(node).exists()


def test_an_unsafe_flightrec_directory_is_neither_read_nor_emptied(node):
    folder(node).mkdir(mode=0o700)
    write_dumps(folder(node))
    (node / "flightrec").chmod(0o777)  # as a user could make it, e.g. under /tmp: folders could be planted there
    result = run(EPILOG, node, **settings(node, BELVEDERE_URL=None))
    assert result.returncode == 0 and "writable by group or others (mode 777)" in result.stderr, result.stderr
    assert len(list(folder(node).iterdir())) == 4
    relative = run(EPILOG, node, **settings(node, BELVEDERE_URL=None, BELVEDERE_FLIGHTREC_DIR="flightrec"))
    assert relative.returncode == 0 and "is not an absolute path" in relative.stderr, relative.stderr
    # Unset (the default), the Epilog says nothing and touches nothing there.
    off = run(EPILOG, node, **settings(node, BELVEDERE_URL=None, BELVEDERE_FLIGHTREC_DIR=None))
    assert (off.returncode, off.stderr) == (0, "") and len(list(folder(node).iterdir())) == 4


# ---------------------------------------------------------------------------------------------
# The batch script's own option: deploy/flightrec/belvedere-post-flightrec.sh
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_srun_wrapper_posts_the_dumps_at_the_prefix_with_the_job_token(node, live_server, make_user, api_client):
    key = start_job(node, live_server, make_user)
    scratch = node / "scratch" / str(JOB_ID)
    scratch.mkdir(parents=True)
    ranks = write_dumps(scratch)
    (scratch / "nccl_trace_rank_5").symlink_to(node / "secret")
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": str(JOB_ID), "SLURM_CLUSTER_NAME": "testcluster",
           "BELVEDERE_URL": live_server.url, "BELVEDERE_JOB_TOKEN_FILE": str(token_file(node)),
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(node / "scratch" / "%j" / "nccl_trace_rank_")}
    done = subprocess.run(["sh", str(POST_SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "posted 4 Flight Recorder dump(s)" in done.stderr and "HTTP 201" in done.stderr, done.stderr
    assert sorted(FlightDump.objects.values_list("rank", flat=True)) == ranks
    assert len(list(scratch.iterdir())) == 5  # the job's own files: left where they are
    assert analysed(api_client, key)["status"] == "hang"

    # Never fails the job: no token, a portal that is down, nothing at the prefix, no job id.
    for change in ({"BELVEDERE_JOB_TOKEN_FILE": str(node / "missing")}, {"BELVEDERE_URL": "http://127.0.0.1:9"},
                   {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(node / "empty" / "nccl_trace_rank_")}, {"SLURM_JOB_ID": ""}):
        other = subprocess.run(["sh", str(POST_SCRIPT)], env={**env, **change}, capture_output=True, text=True,
                               timeout=60)
        assert other.returncode == 0, (change, other.stderr)
    refused = subprocess.run(["sh", str(POST_SCRIPT)], env={**env, "BELVEDERE_URL": "http://127.0.0.1:9"},
                             capture_output=True, text=True, timeout=60)
    assert "belvedere-post-flightrec: failed to post" in refused.stderr and "curl status 7" in refused.stderr
    # The token is never on curl's command line (ps would show it to every user of the node).
    assert "JobToken $token" not in POST_SCRIPT.read_text()


# ---------------------------------------------------------------------------------------------
# On a real Slurm 22.05 cluster: Prolog, TaskProlog, the ranks writing their dumps, Epilog
# ---------------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_on_a_real_slurm_cluster_the_ranks_dumps_reach_the_portal(live_server, make_user, api_client, request):
    """slurmstepd hands the TaskProlog's exports to every task (each rank finds TORCH_NCCL_DEBUG_INFO_TEMP_FILE in
    its environment and writes its dump there, as PyTorch would), and the Epilog's sender survives slurmd."""
    from tests.slurm_cluster import LocalSlurmCluster

    reason = LocalSlurmCluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    workdir = Path(tempfile.mkdtemp(prefix="belvedere-fr-slurm-"))
    workdir.chmod(0o755)
    request.addfinalizer(lambda: subprocess.run(["rm", "-rf", str(workdir)], check=False))
    tokens, dumps_dir, made = workdir / "tokens", workdir / "flightrec", workdir / "made"
    made.mkdir()
    write_service_token(workdir, make_user("svc", is_staff=True))
    (workdir / "jobs.env").write_text(
        f"BELVEDERE_URL={live_server.url}\nBELVEDERE_TOKEN_FILE={workdir / 'jobs.token'}\n"
        f"BELVEDERE_JOB_TOKEN_DIR={tokens}\nBELVEDERE_DISCOVERY_SCRIPT=\nBELVEDERE_FLIGHTREC_DIR={dumps_dir}\n"
        "BELVEDERE_EPILOG_JITTER=0\nBELVEDERE_LOG_STDERR=1\n")
    (workdir / "taskprolog.env").write_text(f"BELVEDERE_URL={live_server.url}\nBELVEDERE_JOB_TOKEN_DIR={tokens}\n"
                                            f"BELVEDERE_FLIGHTREC_DIR={dumps_dir}\n")
    hooks = {}
    for name, script in (("prolog", PROLOG), ("epilog", EPILOG)):
        hooks[name] = workdir / f"{name}.sh"
        hooks[name].write_text(f"#!/bin/sh\nBELVEDERE_JOBS_CONFIG={workdir / 'jobs.env'} exec {script} "
                               f"2>>{workdir / name}.log\n")
        hooks[name].chmod(0o755)
    cluster = LocalSlurmCluster(workdir / "slurm", cluster_name="frtest", nodes=1, prolog=hooks["prolog"],
                                epilog=hooks["epilog"], task_prolog=TASKPROLOG)
    request.addfinalizer(cluster.stop)
    cluster.start()

    # Two ranks; rank 1 never entered the last data-parallel all-reduce. Each task copies its rank's dump to the
    # prefix it was given, which only the TaskProlog set.
    end_ns = time.time_ns()
    for rank, data in megatron_dumps(2, 40, tp=1, pp=1, culprit=1, end_ns=end_ns, timeout_ms=30_000):
        (made / f"rank{rank}").write_bytes(data)
    script = ("#!/bin/sh\n"
              "srun -n2 sh -c 'echo \"prefix=$TORCH_NCCL_DEBUG_INFO_TEMP_FILE on=$TORCH_NCCL_DUMP_ON_TIMEOUT\"; "
              f"cp {made}/rank$SLURM_PROCID \"$TORCH_NCCL_DEBUG_INFO_TEMP_FILE$SLURM_PROCID\"'\n")
    job_id = cluster.sbatch(script, "-N1", "-n2", "--time=2", "--output", str(workdir / "out-%j.txt"), cwd=workdir,
                            env={"BELVEDERE_TASKPROLOG_CONF": str(workdir / "taskprolog.env")})

    def logs():
        return "\n".join(f"{p.name}: {p.read_text()}" for p in workdir.glob("*.log")) + "\n" + cluster.log_tails(10)

    def stored():
        return sorted(FlightDump.objects.filter(job__cluster__name="frtest", job__job_id=job_id)
                      .values_list("rank", flat=True))

    assert wait_for(lambda: stored() == [0, 1], 60), logs()
    lines = (workdir / f"out-{job_id}.txt").read_text().splitlines()
    assert lines.count(f"prefix={dumps_dir}/{job_id}/nccl_trace_rank_ on=1") == 2, lines
    assert wait_for(lambda: not (dumps_dir / str(job_id)).exists(), 20), logs()
    # (The detached sender's log line goes to syslog on a node; here to /dev/null, as its stdio leaves slurmd's pipes.)
    # The analysis: rank 1 never entered the all-reduce rank 0 waited in.
    from apps.flightrec.tasks import analyse_job

    analyse_job.apply(args=(Job.objects.get(cluster__name="frtest", job_id=job_id).pk,)).get()
    api_client.force_authenticate(make_user("operator", is_staff=True))
    body = api_client.get(f"/api/v1/jobs/frtest/{job_id}/flight-recorder/").json()
    assert body["status"] == "hang" and body["ranks_dumped"] == 2 and [c["rank"] for c in body["culprits"]] == [1], body
