"""Synthetic Slingshot NIC counters for demo jobs, consistent with the GPU telemetry's planted problems.

Every node has four NICs (hsn0-hsn3, one beside each GPU). The counters are cumulative, as the Cassini driver
reports them: ``nic_tx_bytes``, ``nic_rx_bytes``, ``nic_tx_packets``, ``nic_rx_packets``, ``nic_retries``,
``nic_link_down`` (flaps before the job stay at their count). Their values are a function of the run's own
seconds only (no running noise), so a window later in a run continues the counters exactly: the demo's feeder writes tick after
tick and the rates stay smooth.

Traffic follows a training run: light during the first ten minutes (warm-up, data loading), then each NIC moves
about ``TRAIN_BYTES_S`` each way, with a small per-NIC difference and a slow wobble. Retries are a few in a
thousand packets. Planted, when ``degraded`` names a (host, nic): that NIC retries ``DEGRADED_RETRY`` of its
packets and moves ``DEGRADED_SCALE`` of its peers' data — the degraded link behind the GPU telemetry's
``slow_nic`` node, whose GPUs wait in the collectives.

Plain Python: numpy and pandas, no Django.
"""
from __future__ import annotations

import zlib
from datetime import datetime
from typing import Iterator

import numpy as np
import pandas as pd

NICS = ("hsn0", "hsn1", "hsn2", "hsn3")
TRAIN_BYTES_S = 6.0e9  # per NIC and direction while training (a 200 Gb/s link is 25 GB/s)
WARMUP_S = 600.0
WARMUP_SHARE = 0.2
PACKET_BYTES = 2048.0  # mean payload per packet
DEGRADED_NIC = "hsn2"  # the NIC of the slow_nic node that is degraded
DEGRADED_RETRY = 0.30
DEGRADED_SCALE = 0.6
WOBBLE_S = 97.0  # period-ish of the slow wobble (seconds / 2 pi)
WOBBLE = 0.05


def _unit(*parts) -> float:
    """A number in [0, 1) fixed by the parts (the same NIC always gets the same one)."""
    return (zlib.crc32("/".join(str(p) for p in parts).encode()) % 1_000_003) / 1_000_003


def _traffic(seconds: np.ndarray) -> np.ndarray:
    """Seconds of full-rate traffic from the run's start to each moment: warm-up at a fifth, then full, with a
    wobble that never makes the count go back (its derivative stays above 1 - WOBBLE)."""
    seconds = np.asarray(seconds, dtype=float)
    warm = np.minimum(seconds, WARMUP_S)
    after = np.maximum(seconds - WARMUP_S, 0.0)
    return WARMUP_SHARE * warm + after + WOBBLE * WOBBLE_S * np.sin(after / WOBBLE_S)


def nic_counters(hosts: list[str], times, *, run_start, cluster: str = "alps", degraded: tuple[str, str] | None = None,
                 seed: int = 0) -> pd.DataFrame:
    """Canonical network samples (NET_COLUMNS) of the hosts' NICs at ``times`` (UTC datetimes) of a run that
    started at ``run_start``."""
    times = pd.DatetimeIndex(pd.to_datetime(list(times), utc=True))
    if not len(times) or not hosts:
        return pd.DataFrame(columns=["ts", "cluster", "host", "nic", "field", "value"])
    origin = pd.Timestamp(run_start)
    origin = origin.tz_localize("UTC") if origin.tzinfo is None else origin.tz_convert("UTC")
    run = np.maximum(((times - origin) / pd.Timedelta(seconds=1)).to_numpy(float), 0.0)
    full = _traffic(run)
    series_keys, blocks = [], []  # one DataFrame at the end: one per series cost 20 s of the test demo's build
    for host in hosts:
        for nic in NICS:
            bad = degraded is not None and (host, nic) == tuple(degraded)
            scale = (0.96 + 0.08 * _unit(seed, host, nic, "rate")) * (DEGRADED_SCALE if bad else 1.0)
            retry = DEGRADED_RETRY if bad else 0.001 + 0.006 * _unit(seed, host, nic, "retry")
            base = 1e12 * (1 + 50 * _unit(seed, host, nic, "boot"))  # counted since the node booted
            tx_bytes = base + TRAIN_BYTES_S * scale * full
            rx_bytes = 0.97 * base + 0.99 * TRAIN_BYTES_S * scale * full
            tx_packets = np.floor(tx_bytes / PACKET_BYTES)
            sent = np.floor(TRAIN_BYTES_S * scale * full / PACKET_BYTES)
            retries = np.floor(base / PACKET_BYTES * 0.002 + sent * retry)
            values = {"nic_tx_bytes": np.floor(tx_bytes), "nic_rx_bytes": np.floor(rx_bytes), "nic_tx_packets": tx_packets,
                      "nic_rx_packets": np.floor(rx_bytes / PACKET_BYTES), "nic_retries": retries,
                      "nic_link_down": np.full(len(times), float(int(4 * _unit(seed, host, nic, "boot-flaps"))))}
            for name, series in values.items():
                series_keys.append((host, nic, name))
                blocks.append(series.astype(float))
    n = len(times)
    keys = np.array(series_keys, dtype=object)
    return pd.DataFrame({"ts": np.tile(times.to_numpy(), len(series_keys)), "cluster": cluster,
                         "host": np.repeat(keys[:, 0], n), "nic": np.repeat(keys[:, 1], n),
                         "field": np.repeat(keys[:, 2], n), "value": np.concatenate(blocks)})


def nic_chunks(hosts: list[str], times, *, run_start, cluster: str = "alps", degraded: tuple[str, str] | None = None,
               seed: int = 0, hosts_per_chunk: int = 32) -> Iterator[pd.DataFrame]:
    """``nic_counters`` a few hosts at a time (a large job's samples never all in memory)."""
    hosts = list(hosts)
    for first in range(0, len(hosts), max(1, hosts_per_chunk)):
        yield nic_counters(hosts[first:first + hosts_per_chunk], times, run_start=run_start, cluster=cluster,
                           degraded=degraded, seed=seed)


def grid(start: datetime, end: datetime, step_s: int) -> list[pd.Timestamp]:
    """Epoch-aligned moments of ``step_s`` seconds in [start, end)."""
    first = pd.Timestamp(start).ceil(f"{int(step_s)}s")
    return list(pd.date_range(first, pd.Timestamp(end), freq=f"{int(step_s)}s", inclusive="left"))
