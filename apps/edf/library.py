"""Starting points offered by the editor: small, commented EDFs that validate without errors."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EdfTemplate:
    key: str
    title: str
    summary: str
    text: str


TEMPLATES: dict[str, EdfTemplate] = {t.key: t for t in (
    EdfTemplate("pytorch", "NGC PyTorch with the NCCL hook",
                "Megatron-LM / PyTorch training over Slingshot: the AWS OFI NCCL plugin, scratch mounted.", """\
# NGC PyTorch for multi-node training on Slingshot.
image = "nvcr.io#nvidia/pytorch:25.06-py3"
mounts = [
  "${SCRATCH}:${SCRATCH}",
]
workdir = "${SCRATCH}"
entrypoint = false
writable = true

[env]
NCCL_DEBUG = "WARN"
# Slingshot: let the plugin choose the CXI devices; one rank per GPU.
CUDA_DEVICE_MAX_CONNECTIONS = "1"

[annotations]
com.hooks.aws_ofi_nccl.enabled = "true"
com.hooks.aws_ofi_nccl.variant = "cuda-dl"
"""),
    EdfTemplate("jax", "NGC JAX", "JAX with NCCL over Slingshot and XLA memory set for one process per GPU.", """\
# NGC JAX for multi-node training on Slingshot.
image = "nvcr.io#nvidia/jax:25.04-py3"
mounts = [
  "${SCRATCH}:${SCRATCH}",
]
workdir = "${SCRATCH}"
entrypoint = false

[env]
XLA_PYTHON_CLIENT_MEM_FRACTION = "0.9"
NCCL_DEBUG = "WARN"

[annotations]
com.hooks.aws_ofi_nccl.enabled = "true"
com.hooks.aws_ofi_nccl.variant = "cuda-dl"
"""),
    EdfTemplate("ssh", "SSH debugging", "Log in to a running container: Dropbear SSH on port 15263 (start with srun --pty).", """\
# Start with: srun --environment=NAME --pty bash   then, from a login node: ssh -p 15263 NODE
image = "nvcr.io#nvidia/pytorch:25.06-py3"
mounts = [
  "${SCRATCH}:${SCRATCH}",
]
workdir = "${SCRATCH}"
entrypoint = false
writable = true  # the SSH hook writes its keys into the container

[annotations.com.hooks.ssh]
enabled = "true"
authorize_ssh_key = "${HOME}/.ssh/container_key.pub"

[annotations.com.hooks.aws_ofi_nccl]
enabled = "true"
variant = "cuda-dl"
"""),
    EdfTemplate("minimal", "Minimal", "An image and your scratch, nothing else.", """\
image = "library/ubuntu:24.04"
mounts = ["${SCRATCH}:${SCRATCH}"]
workdir = "${SCRATCH}"
entrypoint = false
"""),
)}
