"""Capture real Slurm JSON from a private test cluster into this folder (see README.md).

Run as root on a machine with Slurm (``bash .ci/install-slurm.sh``), slurmrestd (apt package
``slurmrestd``, only for scontrol_job_running.json) and MariaDB on 127.0.0.1:3306:

    .venv/bin/python tests/jobs/data/capture.py [--out tests/jobs/data]

Writes squeue_empty.json, squeue_mixed.json, scontrol_job_running.json, sacct_finished.json and
prints the job ids for README.md. The files are Slurm's output byte for byte: never edit them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.slurm_cluster import LocalSlurmCluster, SlurmClusterError  # noqa: E402

FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def wait(what, predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise SlurmClusterError(f"timed out waiting for {what}")


def squeue_states(cluster) -> dict[str, str]:
    """{"<job id>" or "<array id>_<task>": state} from squeue's text output."""
    out = cluster.run("squeue", "-h", "-r", "-o", "%i %T", check=True).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def step_running(cluster, job_id) -> bool:
    out = cluster.run("squeue", "-h", "-s", "-j", str(job_id), "-o", "%i", check=True).stdout
    return f"{job_id}.0" in out.split()


def slurmrestd_job(cluster, job_id) -> bytes:
    """GET /slurm/v0.0.38/job/<id> from a slurmrestd on a unix socket (rest_auth/local, as nobody)."""
    restd = shutil.which("slurmrestd") or "/usr/sbin/slurmrestd"
    if not os.path.exists(restd):
        raise SlurmClusterError("slurmrestd not installed (apt-get install slurmrestd)")
    folder = cluster.workdir / "rest"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o777)
    sock = folder / "rest.sock"
    env = cluster.env
    # slurmrestd refuses to run as root or SlurmUser; rest_auth/local trusts the socket peer's uid.
    proc = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", restd,
                             "-a", "rest_auth/local", "-s", "openapi/v0.0.38", f"unix:{sock}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(folder / "slurmrestd.log", "wb"))
    try:
        wait("slurmrestd socket", sock.exists, 20)
        result = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "curl", "-sS",
                                 "--fail", "--unix-socket", str(sock), f"http://localhost/slurm/v0.0.38/job/{job_id}"],
                                capture_output=True, timeout=30, check=True)
        return result.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent))
    out = Path(parser.parse_args().out)
    reason = LocalSlurmCluster.unavailable_reason(accounting=True)
    if reason:
        sys.exit(reason)
    work = Path(tempfile.mkdtemp(prefix="belvedere-capture-"))
    work.chmod(0o755)
    jobs_dir = work / "jobs"
    jobs_dir.mkdir()
    ids = {}
    with LocalSlurmCluster(cluster_name="testcluster", accounting=True) as cluster:
        version = cluster.run("sinfo", "--version", check=True).stdout.strip()

        def sbatch(name, script, *args):
            ids[name] = cluster.sbatch(script, "-J", name, "-o", str(jobs_dir / f"{name}-%j.out"), *args, cwd=jobs_dir)
            return ids[name]

        def save(filename, data: bytes):
            json.loads(data)  # it is JSON
            (out / filename).write_bytes(data)
            print(f"wrote {out / filename} ({len(data)} bytes)")

        save("squeue_empty.json", cluster.run("squeue", "--json", check=True).stdout.encode())

        # 4 nodes x 2 CPUs. A running 2-node job (2 tasks per node, a running step) fills
        # nid000001-2; an array of 4 tasks of 2 CPUs each: 2 run on nid000003-4, 2 pend; a 2-node
        # job pends behind them (Resources/Priority).
        running = sbatch("train-multinode", "#!/bin/sh\nsrun -N2 -n4 sleep 300\n",
                         "-N2", "--ntasks-per-node=2", "--time=10", "--comment=captured by tests/jobs/data/capture.py")
        wait("the multi-node job's step 0", lambda: step_running(cluster, running))
        array = sbatch("array-sweep", "#!/bin/sh\nsleep 8\n", "--array=0-3", "-N1", "-n1", "-c2", "--time=5")
        pending = sbatch("waits-for-nodes", "#!/bin/sh\nsrun hostname\n", "-N2", "-n4", "--time=5")
        wait("2 array tasks running, 2 pending", lambda: sorted(
            state for key, state in squeue_states(cluster).items() if key.startswith(f"{array}_")
        ) == ["PENDING", "PENDING", "RUNNING", "RUNNING"])
        wait("the pending job to be evaluated", lambda: cluster.run(
            "squeue", "-h", "-j", str(pending), "-o", "%r").stdout.strip() not in ("", "None"))
        save("squeue_mixed.json", cluster.run("squeue", "--json", check=True).stdout.encode())
        save("scontrol_job_running.json", slurmrestd_job(cluster, running))

        # Finished jobs for sacct: completed, failed (exit 3), cancelled (the running one), the array.
        completed = sbatch("completes", "#!/bin/sh\nsrun -n1 echo hello\n", "-N1", "-n1", "--time=5")
        failed = sbatch("fails-exit-3", "#!/bin/sh\necho about to fail >&2\nexit 3\n", "-N1", "-n1", "--time=5")
        cluster.run("scancel", str(running), check=True)
        all_ids = [running, array, pending, completed, failed]

        def all_final():
            sacct = cluster.run("sacct", "-n", "-P", "-X", "-a", "--starttime=1970-01-01", "-o", "JobID,State",
                                check=True).stdout
            states = {}
            for line in sacct.splitlines():
                job, state = line.split("|", 1)
                states[job] = state.split()[0]
            expected = [str(i) for i in (running, pending, completed, failed)] + [f"{array}_{t}" for t in range(4)]
            return all(states.get(j) in FINAL for j in expected)

        wait("every job finished in accounting", all_final, timeout=90)
        time.sleep(2)  # step records
        save("sacct_finished.json", cluster.run(
            "sacct", "--json", "--allusers", "--starttime=1970-01-01T00:00:00", check=True).stdout.encode())
        print(json.dumps({"slurm": version, "ids": ids, "all": all_ids,
                          "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
