"""Reading the DCGM host engines of a running job's nodes from the portal side.

For sites that run ``nv-hostengine`` on every compute node and let the portal's workers reach it
(``TELEMETRY_DCGM_PORT``), a task can sample a running job without anything inside the job. The
DCGM call sequence (groups, field groups, watch, latest values, teardown on any exit) is the
collector's own (``deploy/collector/belvedere-collector.py``), loaded from the repository so there
is one implementation of it. Plain Python: no Django.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .backends.base import canonical, empty_frame

COLLECTOR = Path(__file__).resolve().parents[2] / "deploy" / "collector" / "belvedere-collector.py"


@lru_cache(maxsize=1)
def collector_module():
    spec = importlib.util.spec_from_file_location("belvedere_collector", COLLECTOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("belvedere_collector", module)
    spec.loader.exec_module(module)
    return module


def read_host(host: str, port: int, *, fields, seconds: float, interval: float, cluster: str,
              adapter=None, sleep=time.sleep) -> pd.DataFrame:
    """Watch every GPU of ``host``'s host engine for ``seconds`` at ``interval`` and return the samples.
    Raises the collector's SourceUnavailable with a one-line reason when the engine cannot be used."""
    collector = collector_module()
    source = collector.DcgmSource(fields, interval, collector.GpuSelection(),
                                  run_name=f"belvedere-live-{host}-{os.getpid()}-{int(time.time())}",
                                  address=f"{host}:{port}", adapter=adapter, proc_root="/nonexistent",
                                  env=dict(os.environ))
    rows = []
    source.open()
    try:
        deadline = time.monotonic() + seconds
        while True:
            sleep(interval)
            rows.extend(source.read())
            if time.monotonic() >= deadline:
                break
    finally:
        source.close()
    if not rows:
        return empty_frame()
    return canonical(pd.DataFrame({
        "ts": [datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(timezone.utc) for ts, *_ in rows],
        "cluster": cluster, "host": host,
        "gpu": [index for _, index, *_ in rows], "uuid": [uuid for _, _, uuid, *_ in rows],
        "field": [field for *_, field, _ in rows], "value": [value for *_, value in rows],
    }))
