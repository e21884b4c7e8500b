"""Copyable command lines for using an EDF, and text diffs between versions."""
from __future__ import annotations

import difflib
import shlex


def usage_snippets(*, name: str, owner: str, download_url: str, account: str | None, ssh: bool) -> dict[str, str]:
    """``install``: put the EDF where srun finds it; ``srun``: use it; ``sbatch``: a batch script."""
    quoted = shlex.quote(name)
    install = (f"mkdir -p ~/.edf && curl -fsS -H \"Authorization: Token $BELVEDERE_TOKEN\" \\\n"
               f"  {shlex.quote(download_url)} -o ~/.edf/{quoted}.toml")
    srun = f"srun --environment={quoted} --pty bash" if ssh else f"srun --environment={quoted} python train.py"
    sbatch = "\n".join([
        "#!/bin/bash",
        "#SBATCH --job-name=train",
        *([f"#SBATCH --account={shlex.quote(account)}"] if account else []),
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --gpus-per-node=4",
        "#SBATCH --time=01:00:00",
        "",
        "# The environment goes on srun, not on #SBATCH: a batch script inside the container",
        "# loses Slurm commands and hooks.",
        f"srun --environment={quoted} python train.py",
    ])
    return {"install": install, "srun": srun, "sbatch": sbatch}


def unified_diff(old: str, new: str, old_label: str, new_label: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_label, tofile=new_label))
