"""Fixtures for the jobs tests: a real local Slurm cluster, and Slurm JSON captured from one.

``slurm_cluster`` starts a private Slurm 22.05 cluster (own munged, slurmctld, 4 slurmd) once per
test session, with the repository's TaskProlog (``deploy/slurm/belvedere-taskprolog.sh``)
configured; see ``tests/slurm_cluster.py``. It needs root and Debian's slurm-wlm and munge
(``bash .ci/install-slurm.sh``); elsewhere the tests that use it are skipped, and under
BELVEDERE_NO_SKIP=1 / CI=true a skip fails the run.
"""
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.slurm_cluster import LocalSlurmCluster

REPO = Path(__file__).resolve().parents[2]
TASKPROLOG = REPO / "deploy" / "slurm" / "belvedere-taskprolog.sh"
DATA_DIR = Path(__file__).resolve().parent / "data"
TEST_URL = "http://belvedere.test"


def _start(request, cluster_name: str, accounting: bool = False) -> LocalSlurmCluster:
    reason = LocalSlurmCluster.unavailable_reason(accounting=accounting)
    if reason:
        pytest.skip(reason)
    problem = LocalSlurmCluster.mysql_reachable() if accounting else None
    if problem:
        pytest.skip(f"Slurm accounting needs MariaDB/MySQL on 127.0.0.1:3306 (root, no password): {problem}")
    # Not under pytest's tmp_path: munged wants every directory above its socket searchable by all.
    workdir = Path(tempfile.mkdtemp(prefix=f"belvedere-{cluster_name}-"))
    workdir.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))
    token_dir = workdir / "tokens"
    token_dir.mkdir(mode=0o755)
    conf = workdir / "taskprolog.env"
    conf.write_text(
        "# Written by tests/jobs/conftest.py: what a site puts in /etc/belvedere/taskprolog.env\n"
        f"BELVEDERE_URL={TEST_URL}\n"
        f"BELVEDERE_CLUSTER={cluster_name}\n"
        f"BELVEDERE_JOB_TOKEN_DIR={token_dir}\n"
    )
    conf.chmod(0o644)
    cluster = LocalSlurmCluster(
        workdir, cluster_name=cluster_name, task_prolog=TASKPROLOG, accounting=accounting,
        # The TaskProlog runs with the job's environment, which sbatch/srun take from the client
        # environment: this is how it finds the settings file here (a site uses the default path).
        client_env={"BELVEDERE_TASKPROLOG_CONF": str(conf)},
    )
    request.addfinalizer(cluster.stop)
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def slurm_cluster(request) -> LocalSlurmCluster:
    """A started 4-node Slurm cluster ``testcluster`` (no accounting) with Belvedere's TaskProlog.

    TaskProlog settings: ``<workdir>/taskprolog.env`` (BELVEDERE_URL=http://belvedere.test, the
    cluster's name, BELVEDERE_JOB_TOKEN_DIR=``<workdir>/tokens``)."""
    return _start(request, "testcluster")


@pytest.fixture(scope="session")
def slurm_cluster_accounting(request) -> LocalSlurmCluster:
    """Like ``slurm_cluster`` plus a private slurmdbd, so ``sacct --json`` works.

    Needs MariaDB/MySQL on 127.0.0.1:3306 where root logs in without a password (the cluster
    creates, and drops at the end, its own database ``slurm_acct_<random>``)."""
    return _start(request, "acctcluster", accounting=True)


@pytest.fixture(scope="session")
def slurm_data() -> Path:
    """The folder of real Slurm JSON captured from a test cluster (see its README.md)."""
    return DATA_DIR


@pytest.fixture(scope="session")
def slurmrestd_socket(slurm_cluster) -> Path:
    """A slurmrestd for ``slurm_cluster`` (rest_auth/local, as user nobody, no accounting: every
    ``/slurmdb/`` path answers 404) on a Unix socket; its path. Skipped without the ``slurmrestd``
    binary (Debian package ``slurmrestd``, installed by ``.ci/install-slurm.sh``)."""
    reason = LocalSlurmCluster.slurmrestd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    return slurm_cluster.start_slurmrestd()
