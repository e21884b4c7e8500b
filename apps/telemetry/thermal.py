"""Thermal outliers at the start of a job: a node whose GPUs run hotter, or clock lower, than their peers under the
same load.

Input: the job's samples of the first minutes (``ts, host, gpu, field, value``; fields GPU temperature 150, SM
clock 100 and a load field, SM activity 1002 or GPU utilisation 203) from the telemetry store. Per GPU the mean of
each; the peers are the job's GPUs whose load is within ``load_tolerance`` of the job's median load (idle GPUs
and GPUs doing other work are not peers). A node is named when the median of its peer GPUs is ``min_delta_c``
hotter than the median of all peers, or its SM clock ``min_clock_drop`` lower, and at least ``min_nodes`` nodes
have peers to compare with. Same finding style as the version minorities: "nid000123 runs 11 °C hotter than its
peers under the same load at the start of the job (77 °C against 66 °C)". Plain Python (pandas): no Django.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

TEMP, CLOCK, SM_ACTIVE, GPU_UTIL = 150, 100, 1002, 203
FIELDS = (TEMP, CLOCK, SM_ACTIVE, GPU_UTIL)


@dataclass(frozen=True)
class ThermalOutlier:
    host: str
    gpus: int  # the node's GPUs among the peers
    temp_c: float | None
    peers_temp_c: float | None
    clock_mhz: float | None
    peers_clock_mhz: float | None
    hotter: bool
    slower: bool

    @property
    def sentence(self) -> str:
        parts = []
        if self.hotter:
            parts.append(f"runs {self.temp_c - self.peers_temp_c:.0f} °C hotter ({self.temp_c:.0f} °C against "
                         f"{self.peers_temp_c:.0f} °C)")
        if self.slower:
            drop = 1 - self.clock_mhz / self.peers_clock_mhz
            parts.append(f"clocks {drop * 100:.0f} % lower ({self.clock_mhz:,.0f} MHz against {self.peers_clock_mhz:,.0f} MHz)")
        return f"{self.host} " + " and ".join(parts) + " than its peers under the same load at the start of the job"

    def as_dict(self) -> dict:
        return {"host": self.host, "gpus": self.gpus, "temp_c": self.temp_c, "peers_temp_c": self.peers_temp_c,
                "clock_mhz": self.clock_mhz, "peers_clock_mhz": self.peers_clock_mhz, "hotter": self.hotter,
                "slower": self.slower, "sentence": self.sentence}


def outliers(samples: pd.DataFrame, *, min_delta_c: float = 8.0, min_clock_drop: float = 0.05,
             load_tolerance: float = 0.10, min_nodes: int = 4) -> list[ThermalOutlier]:
    """The nodes that stand out in ``samples`` (see the module); [] when there is too little to compare."""
    if samples is None or samples.empty:
        return []
    per_gpu = samples[samples["field"].isin(FIELDS)].pivot_table(index=["host", "gpu"], columns="field", values="value",
                                                                 aggfunc="mean")
    load_field = SM_ACTIVE if SM_ACTIVE in per_gpu.columns else GPU_UTIL if GPU_UTIL in per_gpu.columns else None
    if load_field is None or TEMP not in per_gpu.columns and CLOCK not in per_gpu.columns:
        return []
    load = per_gpu[load_field]
    if load_field == GPU_UTIL:
        load = load / 100.0
    median_load = load.median()
    if pd.isna(median_load) or median_load < 0.2:
        return []  # an idle start says nothing about cooling
    peers = per_gpu[(load - median_load).abs() <= load_tolerance]
    nodes = peers.groupby(level="host")
    if nodes.ngroups < min_nodes:
        return []
    found = []
    temp_all = peers[TEMP].median() if TEMP in peers.columns else None
    clock_all = peers[CLOCK].median() if CLOCK in peers.columns else None
    for host, rows in nodes:
        temp = rows[TEMP].median() if TEMP in rows.columns else None
        clock = rows[CLOCK].median() if CLOCK in rows.columns else None
        hotter = temp is not None and temp_all is not None and not pd.isna(temp) and temp - temp_all >= min_delta_c
        slower = (clock is not None and clock_all is not None and not pd.isna(clock) and clock_all > 0
                  and clock <= clock_all * (1 - min_clock_drop))
        if hotter or slower:
            found.append(ThermalOutlier(str(host), len(rows), _num(temp), _num(temp_all), _num(clock), _num(clock_all),
                                        bool(hotter), bool(slower)))
    return sorted(found, key=lambda o: o.host)


def _num(value) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value), 1)
