"""The Slurm command runner: run one Slurm client command (``squeue``, ``sacct``, ``scontrol``) and return
its standard output, or raise :class:`SlurmCommandError` with one line saying what went wrong.

The jobs app owns it (cluster syncs read ``squeue``/``sacct`` through it); other apps that act on the
cluster through the Slurm commands (vetting drains and resumes nodes with ``scontrol``) import it from
here, the public service, not from ``apps.jobs.services``.

Plain Python: no Django import. Standard library only.
"""
import shutil
import subprocess


class SlurmCommandError(RuntimeError):
    pass


def run_slurm_command(args: list[str], timeout: float) -> str:
    if shutil.which(args[0]) is None:
        raise SlurmCommandError(f"{args[0]} was not found on PATH; install the Slurm client or set the cluster's sync mode")
    try:
        completed = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SlurmCommandError(f"{' '.join(args)} did not answer within {timeout:g} s") from None
    if completed.returncode != 0:
        message = (completed.stderr or completed.stdout).strip().splitlines()
        raise SlurmCommandError(f"{' '.join(args)} failed (exit {completed.returncode}): {message[-1] if message else 'no output'}")
    return completed.stdout
