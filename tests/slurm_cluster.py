"""A real, private Slurm cluster on this one machine, for integration tests.

``LocalSlurmCluster`` writes a complete configuration into a scratch directory and starts, as
child processes of the test run:

* its own ``munged`` (own key, socket, pid, log and seed files; the system's /etc/munge and any
  running munged are not touched; Slurm finds it through ``AuthInfo=socket=...``);
* optionally its own ``slurmdbd`` on a dedicated MariaDB/MySQL database ``slurm_acct_<random>``
  (dropped again by :meth:`stop`), so that ``sacct --json`` answers;
* ``slurmctld`` and one ``slurmd -N <node>`` per node (all nodes are ``localhost`` on their own
  ports).
* on demand, :meth:`LocalSlurmCluster.start_slurmrestd`: a ``slurmrestd`` on a Unix socket
  (``rest_auth/local``, as user ``nobody``).

Every daemon runs in the foreground (``-D``/``-F``) as a subprocess that the helper owns. Every
process of the cluster (daemons, slurmstepd, job processes) carries the environment variable
``BELVEDERE_SLURM_TEST_CLUSTER=<random id>``, so :meth:`stop` can find and kill leftovers by pid.

Tested with Debian's slurm-wlm 22.05.8 and munge 0.5.15, as root (``.ci/install-slurm.sh``
installs them). Plain Python: no Django. Start-up takes about 1 s (3-4 s with accounting), stop
about 1 s. Things learnt on 22.05.8: ``scontrol`` has no ``--json`` (see :meth:`scontrol_job_json`),
``squeue --json`` ignores filters, clients reach slurmdbd through the munge socket named by
``AccountingStoragePass=socket=...`` (not ``AuthInfo``), and munged wants every directory above
its socket searchable by all (so the scratch directory is not under pytest's 0700 tmp_path).

Example::

    with LocalSlurmCluster(task_prolog="/path/prolog.sh", accounting=True) as cluster:
        job_id = cluster.sbatch("#!/bin/sh\\nsrun hostname\\n", "-N2", cwd=tmp_path)
        cluster.wait_for_state(job_id, "COMPLETED")
        print(cluster.sacct_json()["jobs"])
"""
from __future__ import annotations

import atexit
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LocalSlurmCluster", "SlurmClusterError"]

MARKER = "BELVEDERE_SLURM_TEST_CLUSTER"
SBIN = Path("/usr/sbin")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scontrol", "sinfo", "scancel", "munge", "unmunge")
ACCOUNTING_BINARIES = ("slurmdbd", "sacct", "sacctmgr", "mysql")
TERMINAL_STATES = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "TIMEOUT", "REVOKED",
})
# Client environment variables inherited from an enclosing Slurm job would change what sbatch/srun do.
_FOREIGN_PREFIXES = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SACCT_", "SINFO_", "SCONTROL_")


class SlurmClusterError(RuntimeError):
    """The cluster could not be started, or a Slurm command or job did not do what was asked."""


def _which(name: str) -> str | None:
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin:/sbin:/bin")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _free_port_block(count: int, low: int = 20000, high: int = 32000) -> int:
    """First port of ``count`` consecutive free TCP ports (below the usual ephemeral range)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(low, high - count)
        if all(_port_free(base + i) for i in range(count)):
            return base
    raise SlurmClusterError(f"no block of {count} free TCP ports found in {low}-{high}")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc.strerror})"
    return "\n".join(text.splitlines()[-lines:])


class LocalSlurmCluster:
    """A Slurm cluster (munged, optional slurmdbd, slurmctld, N slurmd) in a scratch directory.

    Parameters (all keyword-only but ``workdir``):

    workdir        scratch directory (created; default: a new temporary directory, removed by
                   :meth:`stop` unless ``keep_workdir``).
    cluster_name   ``ClusterName`` (lower case; default ``testcluster``).
    nodes          number of nodes ``nid000001`` ... (default 4); ``cpus``/``real_memory`` each.
    partition      the one default partition (``normal``).
    task_prolog    path for ``TaskProlog=`` (run by slurmstepd before every task), or None.
    prolog/epilog  paths for ``Prolog=``/``Epilog=`` (run by slurmd as root), or None.
    accounting     start a private slurmdbd on ``mysql_host:mysql_port`` (database
                   ``slurm_acct_<random>``, dropped by :meth:`stop`) so ``sacct`` works.
    extra_conf     more lines appended to slurm.conf.
    daemon_env     extra environment for the daemons (slurmd passes it on to Prolog/Epilog).
    client_env     extra environment for the client commands (:meth:`run`, :meth:`sbatch`); sbatch
                   and srun pass it on to the jobs, whose environment the TaskProlog sees.
    start_timeout  seconds to wait for the cluster to come up.
    """

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        cluster_name: str = "testcluster",
        nodes: int = 4,
        cpus: int = 2,
        real_memory: int = 1000,
        partition: str = "normal",
        task_prolog: str | os.PathLike | None = None,
        prolog: str | os.PathLike | None = None,
        epilog: str | os.PathLike | None = None,
        accounting: bool = False,
        account: str = "testaccount",
        extra_conf: Iterable[str] = (),
        daemon_env: dict[str, str] | None = None,
        client_env: dict[str, str] | None = None,
        start_timeout: float = 60,
        keep_workdir: bool = False,
        mysql_host: str = "127.0.0.1",
        mysql_port: int = 3306,
        mysql_user: str = "root",
        mysql_password: str = "",
    ):
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,39}", cluster_name):
            raise ValueError(f"cluster name {cluster_name!r}: lower-case letters, digits, '-', '_' only")
        if not 1 <= nodes <= 999:
            raise ValueError("nodes must be 1..999")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="slurm-test-"))
        self.cluster_name = cluster_name
        self.node_names = [f"nid{i:06d}" for i in range(1, nodes + 1)]
        self.cpus = cpus
        self.real_memory = real_memory
        self.partition = partition
        self.task_prolog = Path(task_prolog) if task_prolog else None
        self.prolog = Path(prolog) if prolog else None
        self.epilog = Path(epilog) if epilog else None
        self.accounting = accounting
        self.account = account
        self.extra_conf = list(extra_conf)
        self.daemon_env_extra = dict(daemon_env or {})
        self.client_env_extra = dict(client_env or {})
        self.start_timeout = start_timeout
        self.keep_workdir = keep_workdir
        self.mysql = {"host": mysql_host, "port": mysql_port, "user": mysql_user, "password": mysql_password}
        self.database = f"slurm_acct_{secrets.token_hex(4)}" if accounting else None
        self.cluster_id = secrets.token_hex(8)

        self.etc_dir = self.workdir / "etc"
        self.munge_dir = self.workdir / "munge"
        self.log_dir = self.workdir / "log"
        self.run_dir = self.workdir / "run"
        self.state_dir = self.workdir / "state"
        self.spool_dir = self.workdir / "spool"
        self.conf_path = self.etc_dir / "slurm.conf"
        self.dbd_conf_path = self.etc_dir / "slurmdbd.conf"
        self.munge_socket = self.munge_dir / "munge.socket"
        self.ctld_port: int | None = None
        self.node_port_base: int | None = None
        self.dbd_port: int | None = None
        self.slurmrestd_socket: Path | None = None

        self._procs: dict[str, subprocess.Popen] = {}
        self._logs: list = []
        self._database_created = False
        self._scontrol_has_json: bool | None = None
        self._started = False
        self._stopped = False
        atexit.register(self._atexit)

    # -----------------------------------------------------------------------------------------
    # Availability
    # -----------------------------------------------------------------------------------------
    @classmethod
    def unavailable_reason(cls, accounting: bool = False) -> str | None:
        """None when a cluster can be started here, else why not (for ``pytest.skip``)."""
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            return "a local Slurm test cluster needs root (slurmd runs jobs as their users)"
        names = [*DAEMONS, *CLIENTS] + (list(ACCOUNTING_BINARIES) if accounting else [])
        missing = [name for name in names if not _which(name)]
        if missing:
            return f"Slurm/munge not installed (missing {', '.join(missing)}): run `bash .ci/install-slurm.sh`"
        return None

    @classmethod
    def available(cls, accounting: bool = False) -> bool:
        """Whether the binaries exist and we are root (``accounting``: slurmdbd, sacct, mysql too)."""
        return cls.unavailable_reason(accounting) is None

    @classmethod
    def mysql_reachable(cls, host: str = "127.0.0.1", port: int = 3306, user: str = "root",
                        password: str = "") -> str | None:
        """None when the MariaDB/MySQL server answers with these credentials, else the error."""
        mysql = _which("mysql")
        if not mysql:
            return "no mysql client"
        args = [mysql, f"--host={host}", f"--port={port}", f"--user={user}", "--connect-timeout=3", "-e", "SELECT 1"]
        env = dict(os.environ, MYSQL_PWD=password) if password else dict(os.environ)
        try:
            result = subprocess.run(args, capture_output=True, text=True, timeout=10, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        return None if result.returncode == 0 else (result.stderr.strip() or f"mysql exit {result.returncode}")

    # -----------------------------------------------------------------------------------------
    # Environments
    # -----------------------------------------------------------------------------------------
    def _base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_PREFIXES)}
        env["SLURM_CONF"] = str(self.conf_path)
        env[MARKER] = self.cluster_id
        path = env.get("PATH", "")
        for extra in ("/usr/sbin", "/sbin"):
            if extra not in path.split(":"):
                path = f"{path}:{extra}" if path else extra
        env["PATH"] = path
        return env

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands (SLURM_CONF, the cluster marker, no foreign SLURM_*)."""
        env = self._base_env()
        env.update(self.client_env_extra)
        return env

    def _daemon_env(self) -> dict[str, str]:
        env = self._base_env()
        env.update(self.daemon_env_extra)
        return env

    # -----------------------------------------------------------------------------------------
    # Configuration
    # -----------------------------------------------------------------------------------------
    def _write_files(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # munged insists that every directory above its socket is searchable by all.
        os.chmod(self.workdir, 0o755)
        for folder in (self.etc_dir, self.log_dir, self.run_dir, self.state_dir, self.spool_dir,
                       *(self.spool_dir / name for name in self.node_names)):
            folder.mkdir(exist_ok=True)
        self.munge_dir.mkdir(exist_ok=True)
        os.chmod(self.munge_dir, 0o755)
        key = self.munge_dir / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
        os.chmod(key, 0o400)

        nodes = len(self.node_names)
        base = _free_port_block(nodes + 2)
        self.ctld_port, self.dbd_port, self.node_port_base = base, base + 1, base + 2
        self.conf_path.write_text(self.slurm_conf_text())
        if self.accounting:
            self.dbd_conf_path.write_text(self.slurmdbd_conf_text())
            os.chmod(self.dbd_conf_path, 0o600)  # slurmdbd refuses a readable one (it holds the DB password)

    def _node_range(self) -> str:
        first, last = self.node_names[0], self.node_names[-1]
        return first if first == last else f"nid[{first[3:]}-{last[3:]}]"

    def slurm_conf_text(self) -> str:
        w = self.workdir
        nodes = len(self.node_names)
        port_range = (f"{self.node_port_base}" if nodes == 1
                      else f"{self.node_port_base}-{self.node_port_base + nodes - 1}")
        lines = [
            "# Generated by tests/slurm_cluster.py: a private test cluster on localhost.",
            f"ClusterName={self.cluster_name}",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.state_dir}",
            f"SlurmdSpoolDir={self.spool_dir}/%n",
            f"SlurmctldPidFile={self.run_dir}/slurmctld.pid",
            f"SlurmdPidFile={self.run_dir}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.log_dir}/slurmctld.log",
            f"SlurmdLogFile={self.log_dir}/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            "ReturnToService=2",
            "JobCompType=jobcomp/none",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=30",
            # Quick shutdown and cancellation; finished jobs stay visible to scontrol for 5 min.
            "KillWait=2",
            "MinJobAge=300",
            "InactiveLimit=0",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "MessageTimeout=10",
            f"TmpFS={self.workdir}",
        ]
        if self.task_prolog:
            lines.append(f"TaskProlog={self.task_prolog}")
        if self.prolog:
            lines.append(f"Prolog={self.prolog}")
        if self.epilog:
            lines.append(f"Epilog={self.epilog}")
        if self.accounting:
            lines += [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=localhost",
                f"AccountingStoragePort={self.dbd_port}",
                # Clients (sacct, sacctmgr) and slurmctld authenticate to slurmdbd with the munge
                # socket named here, not with AuthInfo (checked with 22.05.8: without this line
                # sacctmgr tries /run/munge/munge.socket.2).
                f"AccountingStoragePass=socket={self.munge_socket}",
            ]
        else:
            lines.append("AccountingStorageType=accounting_storage/none")
        lines += [
            f"NodeName={self._node_range()} NodeHostname=localhost Port={port_range} "
            f"CPUs={self.cpus} RealMemory={self.real_memory} State=UNKNOWN",
            f"PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            *self.extra_conf,
        ]
        return "\n".join(lines) + "\n"

    def slurmdbd_conf_text(self) -> str:
        lines = [
            "# Generated by tests/slurm_cluster.py",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "DbdHost=localhost",
            f"DbdPort={self.dbd_port}",
            "SlurmUser=root",
            "DebugLevel=info",
            f"LogFile={self.log_dir}/slurmdbd.log",
            f"PidFile={self.run_dir}/slurmdbd.pid",
            "StorageType=accounting_storage/mysql",
            f"StorageHost={self.mysql['host']}",
            f"StoragePort={self.mysql['port']}",
            f"StorageUser={self.mysql['user']}",
            f"StorageLoc={self.database}",
        ]
        if self.mysql["password"]:
            lines.append(f"StoragePass={self.mysql['password']}")
        return "\n".join(lines) + "\n"

    # -----------------------------------------------------------------------------------------
    # Start / stop
    # -----------------------------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        # Foreground daemons copy their log to stdout, early fatal errors included.
        log = open(self.log_dir / f"{name}.stdout", "ab")
        self._logs.append(log)
        proc = subprocess.Popen(
            args, env=self._daemon_env(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            start_new_session=True,  # a Ctrl-C of the test run reaches stop(), not the daemons
            preexec_fn=_die_with_parent,  # a test run killed with SIGKILL leaves no daemons behind
        )
        self._procs[name] = proc
        return proc

    def _check_alive(self, *names: str) -> None:
        for name in names or list(self._procs):
            proc = self._procs.get(name)
            if proc is not None and proc.poll() is not None:
                raise SlurmClusterError(f"{name} exited with status {proc.returncode}")

    def _wait(self, what: str, predicate, timeout: float, watch: Iterable[str] = ()) -> None:
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            try:
                self._check_alive(*watch)
                if predicate():
                    return
            except SlurmClusterError:
                raise
            except Exception as exc:  # the predicate's own failure: keep the last one for the message
                last_error = f" ({exc})"
            if time.monotonic() > deadline:
                raise SlurmClusterError(f"timed out after {timeout:.0f}s waiting for {what}{last_error}")
            time.sleep(0.2)

    def start(self) -> LocalSlurmCluster:
        """Write the configuration and start every daemon; returns when all nodes are idle."""
        if self._started:
            return self
        reason = self.unavailable_reason(self.accounting)
        if reason:
            raise SlurmClusterError(reason)
        self._started = True
        try:
            self._start()
        except BaseException as exc:
            message = f"{exc}\n{self.log_tails()}" if isinstance(exc, SlurmClusterError) else None
            self.stop()
            if message:
                raise SlurmClusterError(f"Slurm test cluster did not start: {message}") from exc
            raise
        return self

    def _start(self) -> None:
        deadline = time.monotonic() + self.start_timeout

        def left() -> float:
            return max(1.0, deadline - time.monotonic())

        self._write_files()
        # 1. munge, private: own key, socket, pid, log and seed files.
        self._spawn("munged", [
            _which("munged"), "--foreground", f"--key-file={self.munge_dir / 'munge.key'}",
            f"--socket={self.munge_socket}", f"--pid-file={self.munge_dir / 'munged.pid'}",
            f"--log-file={self.log_dir / 'munged.log'}", f"--seed-file={self.munge_dir / 'munged.seed'}",
        ])
        self._wait("munged", self._munge_works, left(), watch=["munged"])

        # 2. accounting: slurmdbd (finds slurmdbd.conf next to $SLURM_CONF), then the associations.
        if self.accounting:
            problem = self.mysql_reachable(**self.mysql)
            if problem:
                raise SlurmClusterError(f"accounting: MariaDB/MySQL at {self.mysql['host']}:{self.mysql['port']} "
                                        f"not usable: {problem}")
            self._mysql(f"CREATE DATABASE `{self.database}`")
            self._database_created = True
            self._spawn("slurmdbd", [_which("slurmdbd"), "-D"])
            self._wait("slurmdbd",
                       lambda: self.run("sacctmgr", "-n", "-P", "show", "cluster", timeout=10).returncode == 0,
                       left(), watch=["slurmdbd"])
            for args in (
                ("add", "cluster", self.cluster_name),
                ("add", "account", self.account, f"cluster={self.cluster_name}", "Description=tests",
                 "Organization=tests"),
                ("add", "user", "root", f"account={self.account}", f"cluster={self.cluster_name}",
                 f"DefaultAccount={self.account}"),
            ):
                self.run("sacctmgr", "-i", *args, check=True, timeout=30)

        # 3. the controller.
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-c", "-i", "-f", str(self.conf_path)])
        self._wait("slurmctld", lambda: "UP" in self.run("scontrol", "ping", timeout=10).stdout, left(),
                   watch=["slurmctld"])

        # 4. one slurmd per node, all on localhost.
        for name in self.node_names:
            self._spawn(f"slurmd-{name}", [_which("slurmd"), "-D", "-N", name, "-f", str(self.conf_path)])
        self._wait(f"{len(self.node_names)} idle nodes", self._all_nodes_idle, left(),
                   watch=[f"slurmd-{n}" for n in self.node_names] + ["slurmctld"])

    def _munge_works(self) -> bool:
        if not self.munge_socket.exists():
            return False
        cred = subprocess.run([_which("munge"), "-n", "-S", str(self.munge_socket)], capture_output=True, timeout=5)
        if cred.returncode != 0:
            return False
        check = subprocess.run([_which("unmunge"), "-S", str(self.munge_socket)], input=cred.stdout,
                               capture_output=True, timeout=5)
        return check.returncode == 0

    def node_states(self) -> dict[str, str]:
        """``{node name: state}`` from sinfo (e.g. ``idle``, ``alloc``, ``down*``)."""
        result = self.run("sinfo", "-h", "-N", "-o", "%N %t", timeout=10)
        states = {}
        for line in result.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def _all_nodes_idle(self) -> bool:
        states = self.node_states()
        return all(states.get(name) == "idle" for name in self.node_names)

    def _mysql(self, sql: str) -> None:
        args = [_which("mysql"), f"--host={self.mysql['host']}", f"--port={self.mysql['port']}",
                f"--user={self.mysql['user']}", "--connect-timeout=5", "-e", sql]
        env = dict(os.environ, MYSQL_PWD=self.mysql["password"]) if self.mysql["password"] else dict(os.environ)
        result = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
        if result.returncode != 0:
            raise SlurmClusterError(f"mysql {sql!r}: {result.stderr.strip()}")

    def stop(self) -> None:
        """Cancel all jobs, stop the daemons, kill every leftover process, drop the database.

        Safe to call more than once, and after a start that failed halfway."""
        if self._stopped:
            return
        self._stopped = True
        errors = []
        ctld = self._procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            try:
                self.run("scancel", "--full", f"--partition={self.partition}", timeout=10)
                self._wait_no_jobs(timeout=10)
            except Exception as exc:  # keep stopping
                errors.append(f"scancel: {exc}")
        # slurmrestd and the nodes first, then the controller, then slurmdbd, munged last (the others
        # need it to say goodbye).
        order = ["slurmrestd", *(n for n in self._procs if n.startswith("slurmd-")), "slurmctld", "slurmdbd", "munged"]
        for name in order:
            proc = self._procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._kill_leftovers()
        for log in self._logs:
            log.close()
        if self._database_created:
            try:
                self._mysql(f"DROP DATABASE IF EXISTS `{self.database}`")
            except Exception as exc:
                errors.append(f"drop database {self.database}: {exc}")
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if errors:
            raise SlurmClusterError("; ".join(errors))

    def _wait_no_jobs(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.run("squeue", "-h", "-o", "%i", timeout=10)
            if result.returncode != 0 or not result.stdout.strip():
                return
            time.sleep(0.3)

    def _cluster_pids(self) -> list[int]:
        """Processes whose environment carries this cluster's marker (daemons, slurmstepd, job tasks)."""
        needle = f"{MARKER}={self.cluster_id}".encode()
        me = os.getpid()
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if needle in handle.read().split(b"\0"):
                        pids.append(int(entry))
            except OSError:
                continue
        return pids

    def _kill_leftovers(self) -> None:
        for sig, pause in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 1.0)):
            pids = self._cluster_pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline and self._cluster_pids():
                time.sleep(0.1)

    def _atexit(self) -> None:
        if not self._stopped:
            try:
                self.stop()
            except Exception:
                pass

    def __enter__(self) -> LocalSlurmCluster:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -----------------------------------------------------------------------------------------
    # slurmrestd (optional, started on demand)
    # -----------------------------------------------------------------------------------------
    @classmethod
    def slurmrestd_unavailable_reason(cls) -> str | None:
        """None when :meth:`start_slurmrestd` can work here, else why not (for ``pytest.skip``)."""
        if not _which("slurmrestd"):
            return "slurmrestd not installed (Debian package `slurmrestd`: run `bash .ci/install-slurm.sh`)"
        if not _which("setpriv"):
            return "setpriv (util-linux) not found: slurmrestd must be started as an unprivileged user"
        return None

    def start_slurmrestd(self, *, user: str = "nobody", timeout: float = 30) -> Path:
        """Start a slurmrestd for this cluster on a Unix socket and return the socket's path.

        It runs as ``user`` (slurmrestd refuses root and SlurmUser; ``setpriv`` drops root) with
        ``rest_auth/local``, which trusts the uid of the process at the other end of the socket
        (root included): no tokens. Plugins: ``openapi/v0.0.38``, plus ``openapi/dbv0.0.38`` when
        the cluster has accounting. 22.05's db plugin refuses to load without slurmdbd ("slurm not
        configured with slurmdbd") and takes slurmrestd down with it, so without accounting every
        ``/slurmdb/`` path answers 404, as on such a site. The socket is ``<workdir>/rest/slurmrestd.socket``
        (URL ``unix://<socket>``), the log ``<workdir>/log/slurmrestd.stdout``. :meth:`stop` stops it.
        Calling it again returns the socket of the running one."""
        import pwd

        if not self._started or self._stopped:
            raise SlurmClusterError("start_slurmrestd(): start the cluster first")
        running = self._procs.get("slurmrestd")
        if running is not None and running.poll() is None and self.slurmrestd_socket is not None:
            return self.slurmrestd_socket
        reason = self.slurmrestd_unavailable_reason()
        if reason:
            raise SlurmClusterError(reason)
        try:
            account = pwd.getpwnam(user)
        except KeyError:
            raise SlurmClusterError(f"start_slurmrestd(): no user {user!r} on this machine") from None
        folder = self.workdir / "rest"
        folder.mkdir(exist_ok=True)
        os.chown(folder, account.pw_uid, account.pw_gid)  # slurmrestd creates its socket there
        folder.chmod(0o755)
        sock = folder / "slurmrestd.socket"
        if sock.exists():
            sock.unlink()
        plugins = "openapi/v0.0.38" + (",openapi/dbv0.0.38" if self.accounting else "")
        self._spawn("slurmrestd", [
            _which("setpriv"), f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
            # The uid change clears the parent-death signal that _spawn set: set it again.
            "--pdeathsig=TERM",
            _which("slurmrestd"), "-a", "rest_auth/local", "-s", plugins, f"unix:{sock}",
        ])

        def answers() -> bool:
            if not sock.exists():
                return False
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(2)
                probe.connect(str(sock))
            return True

        try:
            self._wait("slurmrestd", answers, timeout, watch=["slurmrestd"])
        except SlurmClusterError as exc:
            raise SlurmClusterError(f"slurmrestd did not start: {exc}\n"
                                    f"{_tail(self.log_dir / 'slurmrestd.stdout', 20)}") from exc
        self.slurmrestd_socket = sock
        return sock

    # -----------------------------------------------------------------------------------------
    # Diagnostics
    # -----------------------------------------------------------------------------------------
    def log_paths(self) -> list[Path]:
        """Each daemon's output (``<name>.stdout``: everything it logged, in start order)."""
        names = ["munged", "slurmdbd", "slurmctld", *(f"slurmd-{n}" for n in self.node_names), "slurmrestd"]
        paths = [self.log_dir / f"{name}.stdout" for name in names]
        return [p for p in paths if p.exists()]

    def log_tails(self, lines: int = 25) -> str:
        """The last lines of every daemon's output, for error messages."""
        parts = []
        for path in self.log_paths():
            tail = _tail(path, lines)
            if tail.strip():
                parts.append(f"--- {path.name} (last {lines} lines) ---\n{tail}")
        return "\n".join(parts) if parts else f"(no daemon logs in {self.log_dir})"

    # -----------------------------------------------------------------------------------------
    # Clients
    # -----------------------------------------------------------------------------------------
    def run(self, *cmd: str, check: bool = False, timeout: float = 60, input: str | None = None,
            cwd: str | os.PathLike | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm client command (``run("squeue", "--json")``) with this cluster's environment.

        Returns the CompletedProcess (text). ``check``: raise SlurmClusterError on a non-zero exit."""
        full_env = self.env
        if env:
            full_env.update(env)
        args = [str(c) for c in cmd]
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input,
                                cwd=cwd or self.workdir, env=full_env)
        if check and result.returncode != 0:
            detail = result.stderr.strip() or result.stdout.strip()
            raise SlurmClusterError(f"{' '.join(args)} exited {result.returncode}: {detail}")
        return result

    def sbatch(self, script_text: str, *args: str, cwd: str | os.PathLike | None = None,
               env: dict[str, str] | None = None) -> int:
        """Submit ``script_text`` as a batch script (extra sbatch ``args``); returns the job id."""
        result = self.run("sbatch", "--parsable", *args, input=script_text, cwd=cwd, env=env, check=True)
        first = result.stdout.strip().splitlines()[-1].split(";")[0]
        if not first.isdigit():
            raise SlurmClusterError(f"sbatch printed no job id: {result.stdout!r}")
        return int(first)

    def _json(self, *cmd: str) -> dict:
        result = self.run(*cmd, check=True)
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError as exc:
            raise SlurmClusterError(f"{' '.join(cmd)}: not JSON ({exc}): {result.stdout[:500]!r}") from exc

    def squeue_json(self, *args: str) -> dict:
        """``squeue --json`` (all jobs the controller still knows, finished ones within MinJobAge)."""
        return self._json("squeue", "--json", *args)

    def scontrol_job_json(self, job_id: int | str) -> dict:
        """One job as JSON: ``scontrol --json show job <job_id>`` where scontrol has ``--json``.

        Slurm 22.05's scontrol has no JSON output (``--json`` arrived in 23.02), and its
        ``squeue --json`` ignores every filter (it always dumps all jobs). There the answer is
        ``squeue --json`` narrowed to the records of this job (or of this array's elements), in the
        same envelope: ``{"meta": ..., "errors": [...], "jobs": [...]}``. The job records are the
        OpenAPI v0.0.38 ones that slurmrestd's ``GET /slurm/v0.0.38/job/<id>`` also returns."""
        if self._scontrol_has_json is None:
            probe = self.run("scontrol", "--json", "show", "config", timeout=15)
            self._scontrol_has_json = probe.returncode == 0 and probe.stdout.lstrip().startswith("{")
        if self._scontrol_has_json:
            return self._json("scontrol", "--json", "show", "job", str(job_id))
        data = self.squeue_json()
        wanted = int(str(job_id).split("_")[0])
        data["jobs"] = [job for job in data.get("jobs", [])
                        if job.get("job_id") == wanted or job.get("array_job_id") == wanted]
        return data

    def sacct_json(self, *args: str) -> dict:
        """``sacct --json`` (default: all jobs of all users since the epoch); needs ``accounting=True``."""
        if not self.accounting:
            raise SlurmClusterError("sacct_json(): this LocalSlurmCluster runs without accounting; "
                                    "create it with accounting=True (slurmdbd + MariaDB/MySQL)")
        if not args:
            args = ("--allusers", "--starttime=1970-01-01T00:00:00")
        return self._json("sacct", "--json", *args)

    def job_states(self, job_id: int | str) -> list[str]:
        """States of the job (one per array element that the controller knows), [] when unknown."""
        result = self.run("scontrol", "-o", "show", "job", str(job_id), timeout=15)
        if result.returncode == 0:
            states = re.findall(r"(?:^|\s)JobState=(\S+)", result.stdout)
            if states:
                return states
        if self.accounting:
            result = self.run("sacct", "-n", "-X", "-P", "-o", "State", "-j", str(job_id), timeout=15)
            if result.returncode == 0:
                return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
        return []

    def wait_for_state(self, job_id: int | str, states: str | Iterable[str], timeout: float = 60) -> str:
        """Wait until the job (every array element) is in one of ``states``; returns the state.

        Raises SlurmClusterError on timeout, or as soon as the job ended in another state."""
        wanted = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        current: list[str] = []
        while True:
            current = self.job_states(job_id)
            if current and all(s in wanted for s in current):
                return current[0]
            if current and all(s in TERMINAL_STATES for s in current):
                raise SlurmClusterError(f"job {job_id} ended as {'/'.join(sorted(set(current)))}, "
                                        f"not {'/'.join(sorted(wanted))}")
            if time.monotonic() > deadline:
                queue = self.run("squeue", "-a", timeout=10).stdout
                raise SlurmClusterError(
                    f"job {job_id} not {'/'.join(sorted(wanted))} after {timeout:.0f}s (now {current or 'unknown'})\n"
                    f"{queue}\n{self.log_tails(15)}")
            time.sleep(0.2)

