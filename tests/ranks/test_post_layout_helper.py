"""deploy/ranks/belvedere-post-layout.py: every task of a job runs it, task 0 PUTs the rank map.

The portal's endpoint is stood in for by a small `http.server` on 127.0.0.1 that records every
request (real HTTP, real sockets); the "job" is N copies of the script started at once with the
environment srun would give them (RANK, WORLD_SIZE, LOCAL_RANK, ...) and a --hostname each.
"""
import ast
import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "ranks" / "belvedere-post-layout.py"
TOKEN = "bvj_3q8VQh2mZk1cYw9R0aTtLx"
JOB_PATH = "/api/v1/jobs/alps/123/layout/"


def load_script():
    spec = importlib.util.spec_from_file_location("belvedere_post_layout", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


helper = load_script()


# --------------------------------------------------------------------------------------------
# A stand-in portal
# --------------------------------------------------------------------------------------------
class Portal:
    """Records requests; answers with the (status, body) pairs in `answers`, then 200."""

    def __init__(self):
        self.requests = []
        self.answers = []
        portal = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                portal.requests.append({"method": "PUT", "path": self.path, "headers": dict(self.headers),
                                        "body": json.loads(body)})
                status, answer = portal.answers.pop(0) if portal.answers else (200, {"ok": True})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = do_GET = do_PATCH = do_PUT  # anything else is recorded too (and fails the tests)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jobs/alps/123/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def portal():
    server = Portal()
    yield server
    server.close()


@pytest.fixture
def job(tmp_path):
    token_file = tmp_path / "job-123.token"
    token_file.write_text(TOKEN + "\n")
    return {"dir": tmp_path / "rendezvous", "token_file": token_file, "tmp": tmp_path}


def task_env(rank, world_size, local_rank, job, url=None, **extra):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SLURM", "BELVEDERE", "TORCHELASTIC"))
           and key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
           and key.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "BELVEDERE_JOB_TOKEN_FILE": str(job["token_file"])})
    if local_rank is not None:
        env["LOCAL_RANK"] = str(local_rank)
    if url:
        env["BELVEDERE_JOB_URL"] = url
    env.update({key: str(value) for key, value in extra.items()})
    return env


def run_tasks(job, world_size, args, url=None, ranks=None, per_node=4, env_of=None, timeout=60):
    """Start the script once per rank, all at once (rank 0 last), and wait for all of them."""
    processes = {}
    for rank in reversed(list(ranks if ranks is not None else range(world_size))):
        env = task_env(rank, world_size, rank % per_node, job, url)
        if env_of:
            env.update(env_of(rank))
        command = [sys.executable, str(SCRIPT), "--dir", str(job["dir"]), "--hostname",
                   f"nid{1 + rank // per_node:06d}", *args]
        processes[rank] = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for rank, process in processes.items():
        stdout, stderr = process.communicate(timeout=timeout)
        results[rank] = (process.returncode, stdout, stderr)
    return results


def expected_ranks(world_size, per_node=4):
    return [{"rank": r, "host": f"nid{1 + r // per_node:06d}", "local_rank": r % per_node} for r in range(world_size)]


# --------------------------------------------------------------------------------------------
# The job posts its map
# --------------------------------------------------------------------------------------------
def test_eight_tasks_post_exactly_one_layout(portal, job):
    results = run_tasks(job, 8, ["--tp", "2", "--pp", "2"], url=portal.url)
    assert {rank: code for rank, (code, _, _) in results.items()} == dict.fromkeys(range(8), 0)
    assert len(portal.requests) == 1
    request = portal.requests[0]
    assert request["method"] == "PUT" and request["path"] == JOB_PATH
    assert request["headers"]["Authorization"] == f"JobToken {TOKEN}"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["body"] == {"tp": 2, "pp": 2, "cp": 1, "ep": 1, "dp": 2, "vpp": None, "order": "tp-cp-ep-dp-pp",
                               "ranks": expected_ranks(8)}
    code, stdout, stderr = results[0]
    assert stdout == ""
    assert stderr.count("\n") == 1
    assert stderr.startswith(f"belvedere-post-layout: posted the layout of 8 ranks (tp 2, pp 2, dp 2, cp 1, ep 1) "
                             f"to {portal.url.split('/jobs/')[0]}{JOB_PATH}: 200")
    assert all(results[rank][1:] == ("", "") for rank in range(1, 8))  # the other tasks say nothing
    assert not job["dir"].exists()  # task 0 cleans up


def test_sizes_from_the_megatron_command_line(portal, job):
    megatron = ("python pretrain_gpt.py --num-layers 32 --hidden-size 4096 --tensor-model-parallel-size 2 "
                "--pipeline-model-parallel-size=2 --virtual-pipeline-model-parallel-size 4 --use-tp-pp-dp-mapping "
                "--expert-model-parallel-size 2 --expert-tensor-parallel-size 1 --bf16")
    results = run_tasks(job, 8, ["--from-args-of", megatron], url=portal.url)
    assert all(code == 0 for code, _, _ in results.values()), results
    [request] = portal.requests
    assert request["body"] == {"tp": 2, "pp": 2, "cp": 1, "ep": 2, "etp": 1, "dp": 2, "vpp": 4,
                               "order": "tp-cp-ep-pp-dp", "num_layers": 32, "ranks": expected_ranks(8)}


def test_dry_run_prints_the_body_as_json(portal, job):
    results = run_tasks(job, 4, ["--tp", "2", "--dry-run"], url=None)
    code, stdout, stderr = results[0]
    assert code == 0
    body = json.loads(stdout)
    assert body == {"tp": 2, "pp": 1, "cp": 1, "ep": 1, "dp": 2, "vpp": None, "order": "tp-cp-ep-dp-pp",
                    "ranks": expected_ranks(4)}
    assert "dry run: would PUT (no usable BELVEDERE_JOB_URL)" in stderr
    assert portal.requests == []


def test_local_rank_falls_back_to_slurm_localid(job):
    # --gpus-per-task=1: every task sees one GPU, so the job sets LOCAL_RANK=0 everywhere.
    results = run_tasks(job, 8, ["--tp", "4", "--dry-run"],
                        env_of=lambda rank: {"LOCAL_RANK": "0", "SLURM_LOCALID": str(rank % 4)})
    code, stdout, stderr = results[0]
    assert code == 0, stderr
    assert json.loads(stdout)["ranks"] == expected_ranks(8)
    assert "local ranks from SLURM_LOCALID" in stderr


def test_files_of_an_earlier_step_are_ignored(portal, job, tmp_path):
    stale = tmp_path / ".belvedere-ranks-123"
    stale.mkdir()
    (stale / "rank-1.json").write_text(json.dumps({"tag": "123.0.", "rank": 1, "world_size": 2, "host": "nid000999",
                                                   "local_rank": 1, "slurm_localid": 1}))
    slurm = {"SLURM_JOB_ID": "123", "SLURM_STEP_ID": "1", "SLURM_SUBMIT_DIR": str(tmp_path)}
    env0 = task_env(0, 2, 0, job, portal.url, **slurm)
    env1 = task_env(1, 2, 1, job, portal.url, **slurm)
    command = [sys.executable, str(SCRIPT), "--tp", "2", "--hostname", "nid000001"]
    first = subprocess.Popen(command, env=env0, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # task 0 is waiting, and must not take the stale file
    second = subprocess.run(command, env=env1, capture_output=True, text=True, timeout=30)
    stdout, stderr = first.communicate(timeout=30)
    assert (first.returncode, second.returncode) == (0, 0), stderr
    [request] = portal.requests
    assert request["body"]["ranks"] == [{"rank": 0, "host": "nid000001", "local_rank": 0},
                                        {"rank": 1, "host": "nid000001", "local_rank": 1}]
    assert not stale.exists()


# --------------------------------------------------------------------------------------------
# It never breaks the job
# --------------------------------------------------------------------------------------------
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_portal_exits_0_with_one_line(job):
    url = f"http://127.0.0.1:{closed_port()}/jobs/alps/123/"
    results = run_tasks(job, 4, ["--tp", "4", "--http-timeout", "2"], url=url)
    code, stdout, stderr = results[0]
    assert code == 0
    assert stdout == ""
    assert stderr.count("\n") == 1
    assert stderr.startswith(f"belvedere-post-layout: could not reach the portal at "
                             f"{url.split('/jobs/')[0]}{JOB_PATH}: ")
    assert "Connection refused" in stderr or "refused" in stderr.lower()

    strict = run_tasks(job, 1, ["--tp", "1", "--strict", "--http-timeout", "2"], url=url)
    assert strict[0][0] == 1


def test_portal_errors_are_reported_and_busy_answers_retried(portal, job):
    portal.answers = [(400, {"ranks": ["host 'nid000001' is not a node of job 123"]})]
    code, _, stderr = run_tasks(job, 4, ["--tp", "2"], url=portal.url)[0]
    assert code == 0
    assert stderr.startswith(f"belvedere-post-layout: the portal answered 400 Bad Request to PUT http://127.0.0.1:")
    assert "is not a node of job 123" in stderr and stderr.count("\n") == 1

    portal.requests.clear()
    portal.answers = [(503, {"detail": "busy"})]
    code, _, stderr = run_tasks(job, 4, ["--tp", "2"], url=portal.url)[0]
    assert code == 0 and "posted the layout of 4 ranks" in stderr
    assert len(portal.requests) == 2


def test_a_missing_task_ends_the_wait(portal, job):
    started = time.monotonic()
    results = run_tasks(job, 4, ["--tp", "2", "--timeout", "1"], url=portal.url, ranks=[0, 1, 2])
    assert time.monotonic() - started < 30
    code, _, stderr = results[0]
    assert code == 0
    assert stderr.startswith("belvedere-post-layout: only 3 of 4 tasks wrote their file to ")
    assert "(missing: 3); does every task run this script?" in stderr
    assert portal.requests == []


@pytest.mark.parametrize("args, env, message", [
    (["--tp", "2"], {"BELVEDERE_JOB_URL": None}, "BELVEDERE_JOB_URL is not set"),
    (["--tp", "2"], {"BELVEDERE_JOB_TOKEN_FILE": None}, "BELVEDERE_JOB_TOKEN_FILE is not set"),
    (["--tp", "2"], {"BELVEDERE_JOB_TOKEN_FILE": "/nonexistent/job.token"}, "cannot read the job token from"),
    (["--tp", "2"], {"BELVEDERE_JOB_URL": "https://portal.example/admin/"}, "is not a job's page"),
    (["--tp", "2"], {"SLURM_JOB_ID": "124"}, "is the page of job 123, but this is job 124"),
    (["--tp", "3"], {}, "the world size 2 is not a multiple of tp*pp*cp = 3*1*1 = 3"),
    ([], {}, "no sizes: give --tp and --pp"),
    (["--tp", "two"], {}, "argument --tp: invalid int value: 'two'"),
    (["--from-args-of", "--tensor-model-parallel-size $TP"], {}, "is '$TP', not a whole number"),
    (["--tp", "2"], {"RANK": None, "SLURM_PROCID": None}, "RANK and SLURM_PROCID are unset"),
])
def test_problems_exit_0_with_one_line(job, args, env, message):
    base = task_env(0, 2, 0, job, "http://127.0.0.1:9/jobs/alps/123/")
    for key, value in env.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(SCRIPT), "--dir", str(job["dir"]), "--timeout", "30", *args],
                            env=base, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("belvedere-post-layout: ")
    assert message in result.stderr
    assert time.monotonic() - started < 20  # found before waiting for the other tasks
    strict = subprocess.run([sys.executable, str(SCRIPT), "--dir", str(job["dir"]), "--strict", *args],
                            env=base, capture_output=True, text=True, timeout=60)
    assert strict.returncode in (1, 2)


# --------------------------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("job_url, api", [
    ("https://portal/jobs/alps/123/", "https://portal/api/v1/jobs/alps/123/layout/"),
    ("https://belvedere.cscs.example/jobs/alps/1835002",
     "https://belvedere.cscs.example/api/v1/jobs/alps/1835002/layout/"),
    ("https://hpc.example.org:8443/belvedere/jobs/todi-2/77/",
     "https://hpc.example.org:8443/belvedere/api/v1/jobs/todi-2/77/layout/"),
])
def test_api_url_from_the_job_url(job_url, api):
    assert helper.api_url(job_url, {}) == api


@pytest.mark.parametrize("job_url", ["portal/jobs/alps/1/", "ftp://portal/jobs/alps/1/", "https://portal/jobs/alps/x/",
                                     "https://portal/jobs/alps/1/?next=/", "https://portal/jobs/al ps/1/"])
def test_bad_job_urls(job_url):
    with pytest.raises(helper.Failure, match="is not a job's page"):
        helper.api_url(job_url, {})


def test_reading_megatron_arguments():
    read = helper.read_megatron_args
    assert read("--tensor-model-parallel-size 8 --pipeline-model-parallel-size=4 --context-parallel-size 2 "
                "--num-layers-per-virtual-pipeline-stage 2 --num-layers 64 --decoder-first-pipeline-num-layers 6 "
                "--decoder-last-pipeline-num-layers 10 --use-tp-pp-dp-mapping --seq-length 8192") == {
        "tp": 8, "pp": 4, "cp": 2, "layers_per_virtual_stage": 2, "num_layers": 64, "first_stage_layers": 6,
        "last_stage_layers": 10, "tp_pp_dp_mapping": True}
    assert read("'--tensor-model-parallel-size' '2' --tensor-model-parallel-size 4") == {"tp": 4}  # the last one wins
    with pytest.raises(helper.UsageError, match="has no value"):
        read("--pipeline-model-parallel-size")


def test_explicit_flags_win_and_vpp_from_layers_per_stage():
    options = helper.build_parser().parse_args(
        ["--from-args-of", "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --num-layers 64 "
         "--num-layers-per-virtual-pipeline-stage 4", "--tp", "4"])
    assert helper.resolve_sizes(options, 64) == {"tp": 4, "pp": 4, "cp": 1, "ep": 1, "dp": 4, "vpp": 4,
                                                  "order": "tp-cp-ep-dp-pp", "num_layers": 64}


def test_the_script_runs_on_python_3_8():
    """Compute nodes' system Python may be old: no syntax newer than 3.8, standard library only."""
    source = SCRIPT.read_text()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
    for newer in (".removeprefix(", ".removesuffix(", "BooleanOptionalAction", "exit_on_error", "zoneinfo"):
        assert newer not in source, newer
    assert source.isascii()  # messages print on any locale
    assert os.access(SCRIPT, os.X_OK)
