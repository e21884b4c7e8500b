"""The job page's "Network" panel: the job's Slingshot NICs, verdict first.

* **First screen** (:func:`summary`): the NICs that stand out from the job's others (``nic_analysis.nic_outliers``),
  each as a finding naming the NIC and its counters — "hsn2 on nid000473 retries 30 % of its packets — the job's
  straggler" when the saturation scoring found that node lagging — and a fact saying how many NICs reported.
  Summaries are read on every page view: the NIC data is cached (``selectors.job_network``).
* **The section** (:func:`context`): the verdict, per-NIC throughput and retry heatmaps (drawn by the job page's
  heatmap script from ``GET /api/v1/jobs/<cluster>/<job_id>/network/heatmap/``) with the GPU heatmaps' row orders
  (rank, node, stage, replica, group: NIC k of a node where that node's GPU k is), the outliers with their numbers,
  and per dragonfly group the job's NIC traffic — honestly per group, since NIC counters do not say which global
  link a byte took. A running job's figures redraw in place with the page's live refresh.
* **No counters**: the panel says how to get them (the collector's Cassini reader).
"""
from __future__ import annotations

import math

from django.urls import NoReverseMatch, reverse

from apps.core.numbers import significant
from apps.core.panels import Fact, Finding, PanelSummary
from apps.telemetry.nic_analysis import percent_words, rate_words

from . import selectors

KEY = "network"


def _api(job, name: str) -> str:
    try:
        return reverse(f"network-api:{name}", kwargs={"cluster": job.cluster.name, "job_id": job.job_id})
    except NoReverseMatch:
        return f"/api/v1/jobs/{job.cluster.name}/{job.job_id}/network/" + ("heatmap/" if name == "heatmap" else "")


def verdict(job, data: dict, lagging: set[str] | None = None) -> str:
    """One sentence: the worst NIC and whether the job waits for it, or that the NICs are alike."""
    outliers = data["outliers"]
    if not data["reporting"]:
        return "No NIC counters for this job."
    if not outliers:
        return f"The job's {data['reporting']:,} NICs behave alike: no NIC retries, drops its link or idles more than the others."
    worst = outliers[0]
    lagging = selectors.straggler_hosts(job) if lagging is None else lagging
    kinds = worst.get("kinds") or []
    if "retries" in kinds:
        what = f"{worst['nic']} on {worst['host']} retries {percent_words(worst.get('retry_fraction'))} of its packets"
    elif "link" in kinds:
        what = f"{worst['nic']} on {worst['host']} lost its link {int(worst.get('link_down') or 0)} times"
    else:
        what = f"{worst['nic']} on {worst['host']} moves {percent_words(1 - (worst.get('traffic_ratio') or 1))} less than its peers"
    tail = " — the job's straggler" if worst["host"] in lagging else " — its node's GPUs keep pace so far"
    more = f" ({len(outliers) - 1} more NIC{'s' * (len(outliers) > 2)} stand out)" if len(outliers) > 1 else ""
    return what + tail + more + "."


def summary(job) -> PanelSummary | None:
    if job.start_time is None:
        return None
    data = selectors.job_network(job)
    part = PanelSummary()
    if data["error"] or not data["reporting"]:
        return None  # said in the panel; the first screen stays for what is known
    expected = len(job.node_list or []) * 4
    outliers = data["outliers"]
    part.facts.append(Fact("NICs", f"{len(outliers):,} stand out" if outliers else "alike",
                           f"{data['reporting']:,} of {expected:,} NICs reported counters", "warning" if outliers else "ok",
                           "fact-network"))
    lagging = selectors.straggler_hosts(job)
    for item in outliers[:3]:
        straggler = item["host"] in lagging
        title = item["reason"] + (" — the job's straggler." if straggler else ".")
        action = (f"The job waits for it: resubmit with --exclude={item['host']} and report the NIC to staff."
                  if straggler else f"Report {item['nic']} on {item['host']} to staff; if the job slows, exclude the node.")
        part.findings.append(Finding("critical" if straggler else "warning", title, action, "#network", KEY))
    return part


def context(job, request) -> dict:
    out = {"network_api_url": _api(job, "network"), "network_heatmap_url": _api(job, "heatmap"),
           "network_sorts": [(value, selectors.SORT_WORDS[value]) for value in selectors.SORTS],
           "network_metrics": [("traffic", "throughput (in + out)"), ("retries", "packets retried"), ("tx", "throughput out"),
                               ("rx", "throughput in")],
           "network_live": bool(job.is_active)}
    if job.start_time is None:
        out["network_reason"] = "The job has not started."
        return out
    data = selectors.job_network(job)
    if data["error"]:
        out["network_reason"] = f"The telemetry store could not be read: {data['error']}"
        return out
    if not data["reporting"]:
        out["network_reason"] = selectors.HOW_TO_COLLECT
        out["network_no_counters"] = True
        return out
    totals = data["totals"]
    if any("retries" in (item.get("kinds") or ["retries"]) for item in data["outliers"]):
        # a NIC that retries stands out on the retry scale (0-100 %), hardly on throughput: show that first
        out["network_metrics"] = sorted(out["network_metrics"], key=lambda pair: pair[0] != "retries")
    out.update(
        network_verdict=verdict(job, data),
        network_outliers=[{**item, "retry_words": percent_words(item.get("retry_fraction")),
                           "peers_words": percent_words(item.get("peers_retry_fraction")),
                           "retries_words": _big(item.get("retries")), "tx_packets_words": _big(item.get("tx_packets"))}
                          for item in data["outliers"]],
        network_reporting=data["reporting"], network_expected=len(job.node_list or []) * 4,
        network_step=data["step_s"],
        network_mean_tx=rate_words(float(totals["tx_bytes_s"].median())) if len(totals) else "–",
        network_mean_retry=percent_words(float(totals["retry_fraction"].median())) if len(totals) else "–",
        network_groups=[{**item, "tx_words": rate_words(item["tx_bytes_s"]), "rx_words": rate_words(item["rx_bytes_s"]),
                         "share_words": f"{significant(100 * item['share'], 2)} %"} for item in selectors.group_traffic(job, totals)],
    )
    return out


def _big(value) -> str:
    """A counter in words a person reads at a glance: ``5845496499`` -> ``5.85 billion``, ``31200`` -> ``31,200``."""
    if value is None or not math.isfinite(float(value)):
        return "–"
    value = float(value)
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if abs(value) >= scale:
            return f"{significant(value / scale)} {word}"
    return f"{value:,.0f}"
