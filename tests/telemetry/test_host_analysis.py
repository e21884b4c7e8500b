"""Page cache held in GPU memory and host memory pressure, named from host samples (issue 39, acceptance 2)."""
from datetime import datetime, timezone

import pandas as pd

from apps.telemetry import host_analysis
from apps.telemetry.backends.base import HOST_COLUMNS

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)
GB = 1e9


def rows(*items):
    return pd.DataFrame([{"ts": T0 + pd.Timedelta(seconds=10 * i), "cluster": "alps", "host": host, "domain": domain,
                          "field": field, "value": value} for i, (host, domain, field, value) in enumerate(items)],
                        columns=HOST_COLUMNS)


def test_page_cache_in_gpu_memory_above_the_threshold_is_named():
    frame = rows(("nid001234", "gpu1", "host_gpu_page_cache", 20 * GB), ("nid001234", "gpu1", "host_gpu_page_cache", 23 * GB),
                 ("nid001234", "gpu0", "host_gpu_page_cache", 0.4 * GB), ("nid001235", "gpu3", "host_gpu_page_cache", 5.2 * GB),
                 ("nid001234", "node", "host_page_cache", 200 * GB))  # the node's own page cache is not GPU memory
    found = host_analysis.page_cache_in_gpu(frame, 4 * GB, phase="before the job")
    assert [item["sentence"] for item in found] == [
        "page cache holds 23 GB of GPU memory on nid001234 GPU 1 before the job",
        "page cache holds 5.2 GB of GPU memory on nid001235 GPU 3 before the job"]
    assert host_analysis.page_cache_in_gpu(frame, 30 * GB) == []


def test_memory_pressure_and_swapping_are_named_and_a_calm_node_is_not():
    frame = rows(("nid001234", "node", "host_mem_pressure", 0.02), ("nid001234", "node", "host_mem_pressure", 0.12),
                 ("nid001234", "node", "host_swap_out_pages", 1000), ("nid001234", "node", "host_swap_out_pages", 513_000),
                 ("nid001235", "node", "host_mem_pressure", 0.01), ("nid001235", "node", "host_swap_out_pages", 7),
                 ("nid001235", "node", "host_swap_out_pages", 7))
    found = host_analysis.memory_pressure(frame)
    assert [item["sentence"] for item in found] == [
        "host memory pressure on nid001234: tasks stalled on memory 12 % of the time, 2.1 GB swapped out"]
