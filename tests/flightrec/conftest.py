"""Flight Recorder dumps written by PyTorch itself (CPU build, gloo), made once per test session.

``tests/flightrec/torch_dumps.py`` imports torch once and forks every rank of every scenario at once; the whole set
(pickle and JSON of 16 ranks in five scenarios) takes about one torch import plus a second. Tests that need torch
skip without it (``pip install torch==2.13.0``, requirements-dev.txt)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("torch_dumps.py")
WORLDS = {"healthy": 3, "skip": 4, "late": 3, "size": 3, "dead": 3}


@pytest.fixture(scope="session")
def torch_dumps(tmp_path_factory) -> Path:
    """The folder holding ``<scenario>/nccl_trace_rank_<N>`` (pickle) and ``.json`` for every scenario."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("flightrec-torch")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_FR_BUFFER_SIZE": "2000"}
    done = subprocess.run([sys.executable, str(SCRIPT), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def rank_files(folder: Path, scenario: str, fmt: str) -> dict[int, bytes]:
    """Rank -> the bytes PyTorch wrote (``fmt``: "pickle" or "json")."""
    suffix = ".json" if fmt == "json" else ""
    found = {}
    for rank in range(WORLDS[scenario]):
        path = folder / scenario / f"nccl_trace_rank_{rank}{suffix}"
        if path.exists():
            found[rank] = path.read_bytes()
    return found
