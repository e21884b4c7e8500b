"""What an EDF may contain: fields, annotations, mount flags, their allowed values and meaning.

One table read by the validator, the JSON Schema (``schema.py``) and the editor's completion, so
the three cannot drift apart. Facts from the CSCS Container Engine documentation and the Sarus
Suite ``raster`` schema (docs/reference: edf-vetnode-slurm.md §A). Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass

# TOML value kinds as named in messages and in the JSON Schema.
STRING, BOOLEAN, ARRAY, TABLE = "string", "boolean", "array", "table"


@dataclass(frozen=True)
class FieldSpec:
    kinds: tuple[str, ...]  # allowed TOML kinds
    items: str | None  # kind of array items, when an array is allowed
    default: object
    doc: str
    snippet: str  # what completion inserts after "key = "


FIELDS: dict[str, FieldSpec] = {
    "base_environment": FieldSpec(
        (STRING, ARRAY), STRING, "",
        "EDF(s) this file inherits from, in order: a bare name looked up in ${HOME}/.edf or EDF_PATH, "
        "an absolute path, or a ./relative path. At most 10 levels.",
        '"name"'),
    "image": FieldSpec(
        (STRING,), None, "",
        "Container image: [USER@][REGISTRY#]IMAGE[:TAG] (Docker Hub by default) or the path of a SquashFS "
        "file. Empty: no container.",
        '"nvcr.io#nvidia/pytorch:25.06-py3"'),
    "workdir": FieldSpec(
        (STRING,), None, None,
        "Initial working directory inside the container (default: the image's).",
        '"${SCRATCH}"'),
    "entrypoint": FieldSpec(
        (BOOLEAN,), None, False,
        "Run the image's entrypoint. Default false since 2025-09 (documented true before): write it explicitly. "
        "Alps Extended Images need true.",
        "true"),
    "writable": FieldSpec(
        (BOOLEAN,), None, True,
        "Writable container root filesystem (default true). The SSH and CUDA MPS hooks need it.",
        "true"),
    "mounts": FieldSpec(
        (ARRAY,), STRING, [],
        'Bind mounts, each "SOURCE:DESTINATION[:FLAGS]"; flags joined with +, e.g. "ro+private"; '
        '"FILE.sqsh:/dst:sqsh" mounts a SquashFS file. Appended to the mounts of base environments.',
        '["${SCRATCH}:${SCRATCH}"]'),
    "devices": FieldSpec(
        (ARRAY,), STRING, [],
        "Sarus Suite only: devices as CDI names (nvidia.com/gpu=all) or /dev paths. "
        "The production Container Engine does not read it.",
        '["nvidia.com/gpu=all"]'),
    "env": FieldSpec(
        (TABLE,), None, {},
        'Environment variables set in the container; values are strings ("1", not 1); "" unsets. '
        "Values may use ${HOST_VAR} but not other [env] entries.",
        ""),
    "annotations": FieldSpec(
        (TABLE,), None, {},
        "Hook controls, e.g. com.hooks.aws_ofi_nccl.enabled = \"true\". Values are strings.",
        ""),
}

TRUE_FALSE = ("true", "false")


@dataclass(frozen=True)
class AnnotationSpec:
    values: tuple[str, ...] | None  # allowed values; None: free text checked by ``kind``
    kind: str  # "enum", "path", "port", "version", "text"
    doc: str
    sarus_only: bool = False
    retired: tuple[str, ...] = ()  # values that used to be valid


ANNOTATIONS: dict[str, AnnotationSpec] = {
    "com.hooks.cxi.enabled": AnnotationSpec(
        TRUE_FALSE, "enum",
        "Inject the host's libfabric with the CXI provider (Slingshot). Set \"false\" for Alps Extended Images "
        "and Alpine images."),
    "com.hooks.aws_ofi_nccl.enabled": AnnotationSpec(
        TRUE_FALSE, "enum",
        "Inject the AWS OFI NCCL plugin and set NCCL/libfabric variables for Slingshot; implies the CXI hook."),
    "com.hooks.aws_ofi_nccl.variant": AnnotationSpec(
        ("cuda12", "cuda13", "cuda-dl", "rocm5", "rocm6"), "enum",
        "Plugin build: cuda-dl (recommended, dynamically linked; needs libcudart.so in the image), or a static "
        "build matching the image's CUDA/ROCm major. Ignored when netstack.source = \"artifact\".",
        retired=("cuda11",)),
    "com.hooks.netstack.source": AnnotationSpec(
        ("host", "artifact"), "enum", "Where the CXI and AWS OFI libraries come from."),
    "com.hooks.netstack.version": AnnotationSpec(
        None, "version", "Artifact release, e.g. \"latest\" or \"26.05.1\"."),
    "com.hooks.netstack.name": AnnotationSpec(
        None, "text", "Named artifact variant, e.g. \"default\" or \"shs:13.1.0\"."),
    "com.hooks.ssh.enabled": AnnotationSpec(
        TRUE_FALSE, "enum",
        "Start a Dropbear SSH server in the container; needs writable = true and srun --pty."),
    "com.hooks.ssh.authorize_ssh_key": AnnotationSpec(
        None, "path", "Absolute path of a public-key file to authorise (the file, not the key text)."),
    "com.hooks.ssh.port": AnnotationSpec(None, "port", "SSH port (default \"15263\")."),
    "com.hooks.nvidia_cuda_mps.enabled": AnnotationSpec(
        TRUE_FALSE, "enum", "Start and stop the CUDA MPS daemon; needs writable = true."),
    "com.hooks.dcgm.enabled": AnnotationSpec(
        TRUE_FALSE, "enum", "Mount the DCGM libraries (for jobreport and GPU metrics inside containers)."),
    "com.hooks.slurm.enabled": AnnotationSpec(
        TRUE_FALSE, "enum", "The Slurm hook (experimental; [env] ENROOT_SLURM_HOOK = \"0\" is the current switch)."),
    "com.pyxis.pytorch_remap_vars": AnnotationSpec(
        TRUE_FALSE, "enum", "Re-enable Pyxis' remapping of RANK/LOCAL_RANK from SLURM_PROCID/SLURM_LOCALID."),
    "com.pyxis.entrypoint_log": AnnotationSpec(
        TRUE_FALSE, "enum", "Print the entrypoint's output to the job's output."),
    "com.sarus.perfmon": AnnotationSpec(TRUE_FALSE, "enum", "Sarus Suite timing output.", sarus_only=True),
}

# Namespaces whose keys we know completely: anything else under them is a typo.
KNOWN_NAMESPACES = ("com.hooks.", "com.pyxis.")

MOUNT_FLAGS: dict[str, str] = {
    "ro": "read-only",
    "rw": "read-write",
    "private": "private propagation",
    "rprivate": "recursive private propagation",
    "slave": "slave propagation",
    "rslave": "recursive slave propagation",
    "shared": "shared propagation",
    "rshared": "recursive shared propagation",
    "nosuid": "ignore set-user-ID bits",
    "nodev": "no device files",
    "noexec": "no execution",
    "suid": "honour set-user-ID bits",
    "dev": "allow device files",
    "exec": "allow execution",
    "bind": "bind mount (the default)",
    "rbind": "recursive bind mount (the default)",
    "x-create=dir": "create the destination as a directory",
    "x-create=file": "create the destination as a file",
    "x-create=auto": "create the destination like the source (the default)",
    "sqsh": "mount a SquashFS file read-only (the only flag of its mount)",
}

# Variables set in every Slurm job on the system; referencing them without a default is safe.
JOB_VARIABLES = frozenset({
    "USER", "HOME", "SCRATCH", "PWD", "STORE", "PROJECT", "TMPDIR", "PATH", "LD_LIBRARY_PATH", "HOSTNAME",
    "CLUSTER_NAME", "LOGNAME", "SHELL",
})
JOB_VARIABLE_PREFIXES = ("SLURM_",)

MAX_BASE_DEPTH = 10
MAX_EDF_CHARS = 1_000_000
