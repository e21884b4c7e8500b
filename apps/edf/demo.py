"""Demo part: saved EDFs with history, an inheritance chain and sharing.

The demo researcher owns a three-level chain (``alps-base`` ← ``megatron`` ← ``megatron-debug``),
an EDF whose history shows a fixed mistake, and one that still carries a warning; a colleague in
the demo's first project shares the team's base environment with it.
"""
from django.contrib.auth import get_user_model

from apps.accounts.demo import DEMO_EMAIL_DOMAIN
from apps.accounts.models import Project
from apps.core.demo import DemoContext, demo_part

from .models import EdfDocument
from .services import edf_create, edf_share, edf_update

ALPS_BASE = """\
# Shared base: NGC PyTorch with Slingshot-aware NCCL and the usual storage.
image = "nvcr.io#nvidia/pytorch:25.06-py3"
mounts = [
  "/capstor:/capstor",
  "${SCRATCH}:${SCRATCH}",
]
entrypoint = false
writable = true

[env]
NCCL_DEBUG = "WARN"
CUDA_DEVICE_MAX_CONNECTIONS = "1"

[annotations]
com.hooks.aws_ofi_nccl.enabled = "true"
com.hooks.aws_ofi_nccl.variant = "cuda-dl"
"""

MEGATRON_V1 = """\
base_environment = "alps-base"
workdir = "${SCRATCH}/megatron"
mounts = ["${SCRATCH}/datasets/pile.sqsh:/data:sqsh+ro"]

[env]
TRITON_CACHE_DIR = "${SCRATCH}/.triton"
"""

MEGATRON_V2 = """\
base_environment = "alps-base"
workdir = "${SCRATCH}/megatron"
# SquashFS datasets are read-only already; sqsh must be the only flag.
mounts = ["${SCRATCH}/datasets/pile.sqsh:/data:sqsh"]

[env]
TRITON_CACHE_DIR = "${SCRATCH}/.triton"
"""

MEGATRON_V3 = MEGATRON_V2 + 'PYTHONUNBUFFERED = "1"\nHF_HOME = "${SCRATCH}/hf"\n'

MEGATRON_DEBUG = """\
# Megatron environment plus an SSH server to attach a debugger.
# srun --environment=megatron-debug --pty bash
base_environment = "megatron"

[annotations.com.hooks.ssh]
enabled = "true"
authorize_ssh_key = "${HOME}/.ssh/container_key.pub"
"""

JAX_OLD = """\
image = "nvcr.io#nvidia/jax:24.04-py3"
mounts = ["${SCRATCH}:${SCRATCH}"]
workdir = "${SCRATCH}"
entrypoint = false

[annotations]
com.hooks.aws_ofi_nccl.enabled = "true"
com.hooks.aws_ofi_nccl.variant = "cuda11"
"""

TEAM_BASE = """\
# Team base for a-llm: pinned PyTorch, team storage, NCCL hook.
image = "nvcr.io#nvidia/pytorch:25.04-py3"
mounts = ["/capstor/store/cscs/llm:/store:ro"]
entrypoint = false

[env]
NCCL_DEBUG = "WARN"

[annotations]
com.hooks.aws_ofi_nccl.enabled = "true"
com.hooks.aws_ofi_nccl.variant = "cuda-dl"
"""


def reset() -> None:
    EdfDocument.objects.filter(owner__email__endswith="@" + DEMO_EMAIL_DOMAIN).delete()


@demo_part("edf", order=50, reset=reset)
def build(context: DemoContext) -> dict:
    User = get_user_model()
    demo = User.objects.get(username="demo")
    edf_create(demo, name="alps-base", text=ALPS_BASE, description="PyTorch + NCCL hook + capstor/scratch")
    megatron = edf_create(demo, name="megatron", text=MEGATRON_V1, description="Megatron-LM pretraining on the Pile")
    edf_update(demo, megatron, text=MEGATRON_V2, note="sqsh must be the only mount flag")
    edf_update(demo, megatron, text=MEGATRON_V3, note="unbuffered output, HF cache on scratch")
    edf_create(demo, name="megatron-debug", text=MEGATRON_DEBUG, description="megatron + SSH for debugging")
    edf_create(demo, name="jax-2024", text=JAX_OLD, description="old JAX setup (retired NCCL plugin variant)")

    documents = 4 + _share_team_base(demo)
    return {"edfs": documents, "versions": documents + 2}


def _share_team_base(demo) -> int:
    """A colleague in the demo user's first project shares the team's base environment; 1 if there is one."""
    first_project = Project.objects.filter(memberships__user=demo).order_by("slurm_account").first()
    if first_project is None:
        return 0
    colleague = get_user_model().objects.filter(memberships__project=first_project).exclude(pk=demo.pk).order_by("username").first()
    if colleague is None:
        return 0
    team = edf_create(colleague, name="team-base", text=TEAM_BASE, description=f"{first_project.slurm_account} team base environment")
    edf_share(colleague, team, [first_project.slurm_account])
    return 1
