"""The client package is not installed in the portal's virtualenv: tests import it from its source folder, and
subprocesses get the same folder on PYTHONPATH."""
import os
import sys
from pathlib import Path

import pytest

CLIENT_SOURCE = Path(__file__).resolve().parents[2] / "clients" / "belvedere-client"
if str(CLIENT_SOURCE) not in sys.path:
    sys.path.insert(0, str(CLIENT_SOURCE))


@pytest.fixture
def client_env():
    """The environment for a subprocess using the client: its source on PYTHONPATH, no Belvedere or Slurm
    settings inherited from the machine running the tests."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BELVEDERE_", "SLURM_")) and k not in ("RANK", "PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    env["PYTHONPATH"] = str(CLIENT_SOURCE)
    return env
