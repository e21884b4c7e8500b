"""Reads of the flightrec app: a job's analysis placed on its hardware, with the evidence of the same minutes.

The analysis body (``analysis.Analyser.result()``) names ranks; here each culprit gets its host, GPU, NIC, switch
and dragonfly group (the ranks app's layout, or Slurm's block placement over the job's nodes without one), its
Megatron coordinates, and what the hardware did around the time the job stopped progressing: the culprit GPU's
SM activity against the other GPUs of its node (an idle GPU among busy peers), GPU-health counters and XIDs that
rose (vetting's judgement of DCGM's counters), the node's Slingshot NICs (retries and link-down against the job's
other NICs, from the telemetry store's NIC counters through ``apps.telemetry.nic_analysis``, the functions the
network app reads them with: flightrec sits in the network app's layer and may not import it) and the node's
vetting state.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from apps.telemetry.backends.base import Query, TelemetryUnavailable

from .models import FlightAnalysis, FlightDump

SM_ACTIVE = 1002  # DCGM_FI_PROF_SM_ACTIVE
BEFORE = timedelta(minutes=5)
MAX_PLACED = 64
# The NICs compared with the culprits' in the minutes before the stop: the culprits' nodes and up to this many of
# the job's nodes in all (a 1,024-node job's window is still one store read).
NIC_PEER_HOSTS = 256
NIC_STEP_S = 30


def flight_analysis_get(job) -> FlightAnalysis | None:
    """The job's analysis row, read once per job object (the page's summary, context and version share it)."""
    memo = job.__dict__.get("_flightrec_analysis", False)
    if memo is False:
        memo = job.__dict__["_flightrec_analysis"] = FlightAnalysis.objects.filter(job=job).first()
    return memo


def hang_words(job) -> str | None:
    """The analysis' one-line verdict when the job's ranks were stuck or disagreed (``hang``, ``mismatch``); None
    without dumps or when they show a healthy job (``apps.core.hang_verdicts``' source)."""
    analysis = flight_analysis_get(job)
    if analysis is None or analysis.status not in ("hang", "mismatch"):
        return None
    return (analysis.body or {}).get("verdict") or None


def flight_dump_count(job) -> int:
    return FlightDump.objects.filter(job=job).count()


def _placement(job, ranks: list[int]) -> dict[int, dict]:
    from apps.ranks.layout import block_placement
    from apps.ranks.selectors import LayoutNoLongerFits, job_ranks

    try:
        placed = job_ranks(job)
    except LayoutNoLongerFits:
        placed = None
    if placed is not None:
        table = placed.table
        rows = table.rows([r for r in ranks if 0 <= r < table.world_size])
        return {row["rank"]: {"host": row["host"], "gpu": row["local_rank"], "nic": row["nic"], "switch": row["switch"],
                              "group": row["group"], "coords": {k: row[k] for k in ("tp", "pp", "dp", "cp", "ep") if k in row}}
                for row in rows}
    nodes = list(job.node_list or [])
    world = job.gpus or job.tasks or 0
    if not nodes or not world:
        return {}
    per_node = max(1, -(-world // len(nodes)))
    try:
        places = block_placement(world, nodes, per_node)
    except Exception:  # a node list that cannot hold the ranks: nothing placed, said by the null fields
        return {}
    return {r: {"host": places[r][0], "gpu": places[r][1], "nic": f"hsn{places[r][1]}", "switch": None, "group": None,
                "coords": {}} for r in ranks if 0 <= r < len(places)}


def _stop_time(body: dict, job) -> datetime | None:
    ns = body.get("last_progress_ns") or body.get("latest_ns")
    if ns:
        return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
    return job.end_time


def _gpu_activity(job, hosts: list[str], start: datetime, end: datetime) -> dict[tuple[str, int], float]:
    from apps.telemetry.store import telemetry_store

    try:
        frame = telemetry_store().read(Query(start=start, end=end, cluster=job.cluster.name, hosts=tuple(hosts),
                                             fields=(SM_ACTIVE,)))
    except (TelemetryUnavailable, ValueError):
        return {}
    if frame.empty:
        return {}
    means = frame.groupby(["host", "gpu"])["value"].mean()
    return {(host, int(gpu)): float(value) for (host, gpu), value in means.items()}


def _nic_activity(job, hosts: list[str], start: datetime, end: datetime) -> tuple[dict, dict]:
    """The job's NICs between ``start`` and ``end``: ({host: [outlier dicts of retries or link-down]},
    {(host, nic): totals row}). A NIC that only moved less than its peers is a symptom of the hang, not evidence."""
    from apps.telemetry.nic_analysis import NIC_COUNTERS, nic_outliers, nic_rates, nic_totals
    from apps.telemetry.store import telemetry_store

    others = [h for h in (job.node_list or []) if h not in hosts]
    peers = list(hosts) + others[:max(0, NIC_PEER_HOSTS - len(hosts))]
    try:
        frame = telemetry_store().aggregate_net(job.cluster.name, NIC_STEP_S, hosts=peers, fields=list(NIC_COUNTERS),
                                                start=start, end=end)
    except (TelemetryUnavailable, ValueError):
        return {}, {}
    if frame is None or frame.empty:
        return {}, {}
    rates = nic_rates(frame, NIC_STEP_S)
    totals = nic_totals(rates)
    if totals.empty:
        return {}, {}
    outliers: dict[str, list[dict]] = {}
    for item in nic_outliers(rates, totals):
        kinds = [k for k in item.kinds if k in ("retries", "link")]
        if item.host in hosts and kinds:
            outliers.setdefault(item.host, []).append({**item.as_dict(), "kinds": kinds})
    rows = {(str(row["host"]), str(row["nic"])): row for row in totals.to_dict("records") if row["host"] in hosts}
    return outliers, rows


def _nic_evidence(host: str, nic: str | None, outliers: dict, totals: dict) -> list[dict]:
    """The culprit node's NICs that retried or lost their link in the minutes before the stop (warning; critical
    when the culprit GPU's own NIC lost its link), else its own NIC's quiet numbers (info)."""
    from apps.telemetry.nic_analysis import MIN_PACKETS, percent_words

    found = []
    for item in outliers.get(host, []):
        own = item["nic"] == nic
        words = item["reason"]
        found.append({"kind": "network", "level": "critical" if own and "link" in item["kinds"] else "warning",
                      "words": f"{words} in the 5 minutes before the stop"
                               + ("" if own or not nic else f" (the culprit's GPU uses {nic})")})
    if found or not nic or (host, nic) not in totals:
        return found
    row = totals[(host, nic)]
    fraction = row.get("retry_fraction")
    downs = int(round(float(row.get("link_down") or 0)))
    retried = (f"{percent_words(float(fraction))} of packets retried" if fraction is not None and fraction == fraction
               and float(row.get("tx_packets") or 0) >= MIN_PACKETS else "too few packets sent to judge retries")
    link = "its link never went down" if downs == 0 else f"its link went down {downs} time{'s' * (downs != 1)}, as its peers' did"
    found.append({"kind": "network", "level": "info", "words": f"{nic} on {host}: {retried}, {link} in the 5 minutes before the stop"})
    return found


def evidence(job, body: dict, places: dict[int, dict]) -> dict[int, list[dict]]:
    """Per culprit rank, what the hardware said around the stop: [{kind, level, words}]."""
    from apps.vetting.selectors import job_gpu_health, node_states

    stop = _stop_time(body, job)
    found: dict[int, list[dict]] = {rank: [] for rank in places}
    if stop is None or not places:
        return found
    start, end = stop - BEFORE, stop + timedelta(minutes=1)
    hosts = sorted({p["host"] for p in places.values() if p.get("host")})
    activity = _gpu_activity(job, hosts, start, end)
    health = [change for change in job_gpu_health(job, start=start - timedelta(minutes=25), end=end) if change.host in hosts]
    states = node_states(hosts)
    nic_outliers, nic_totals = _nic_activity(job, hosts, start, stop)
    for rank, place in places.items():
        host, gpu = place.get("host"), place.get("gpu")
        mine = activity.get((host, gpu))
        peers = [value for (h, g), value in activity.items() if h == host and g != gpu]
        if mine is not None and peers:
            peer = sum(peers) / len(peers)
            idle = mine < 0.1 and peer > 0.3
            found[rank].append({"kind": "telemetry", "level": "critical" if idle else "info",
                                "words": f"SM activity {mine:.0%} in the 5 minutes before the stop"
                                         f"{' — idle' if idle else ''} while the other GPUs of {host} ran at {peer:.0%}"})
        for change in health:
            if change.host == host and change.gpu == gpu:
                found[rank].append({"kind": "gpu_health", "level": {"failed": "critical", "degraded": "warning"}.get(change.level, "info"),
                                    "words": f"{change.what} at {change.first_seen:%H:%M:%S} UTC ({change.name})"})
        if host:
            found[rank].extend(_nic_evidence(host, place.get("nic"), nic_outliers, nic_totals))
        if host in states:
            found[rank].append({"kind": "vetting", "level": "warning", "words": f"node {host} is {states[host].replace('_', ' ')} in vetting"})
    return found


def flight_body(job) -> dict | None:
    """The API's body: the analysis with each culprit placed and its evidence; None before any dump."""
    analysis = flight_analysis_get(job)
    if analysis is None:
        return None
    body = dict(analysis.body or {})
    body.setdefault("status", analysis.status)
    body["analysis_status"] = analysis.status
    body["computed"] = analysis.computed.isoformat() if analysis.computed else None
    body["dumps_stored"] = flight_dump_count(job)
    culprits = list(body.get("culprits") or [])
    ranks = [c["rank"] for c in culprits[:MAX_PLACED]]
    places = _placement(job, ranks)
    proof = evidence(job, body, places)
    for culprit in culprits:
        place = places.get(culprit["rank"], {})
        culprit.update(host=place.get("host"), gpu=place.get("gpu"), nic=place.get("nic"), switch=place.get("switch"),
                       group=place.get("group"), coords=place.get("coords", {}), evidence=proof.get(culprit["rank"], []))
    body["culprits"] = culprits
    for key in ("process_group", "collective", "findings", "missing_dumps", "ranks_dumped", "ranks_expected"):
        body.setdefault(key, None if key in ("process_group", "collective") else [] if key in ("findings", "missing_dumps") else 0)
    body["headline"] = headline(body)
    return body


def headline(body: dict) -> str:
    """The verdict with the first culprit's place: "nid001234 GPU 2 (PP stage 5, DP replica 12): rank ... never ..."."""
    verdict = body.get("verdict") or ""
    culprits = body.get("culprits") or []
    if not culprits or not culprits[0].get("host"):
        return verdict
    first = culprits[0]
    coords = first.get("coords") or {}
    where = ", ".join(f"{words} {coords[key]}" for key, words in (("pp", "PP stage"), ("dp", "DP replica"), ("tp", "TP rank"))
                      if key in coords)
    place = f"{first['host']} GPU {first['gpu']}" + (f" ({where})" if where else "")
    # An XID or ECC error says more than an idle GPU; a NIC that retried or lost its link, more than vetting's state.
    order = {"gpu_health": 0, "telemetry": 1, "network": 2, "vetting": 3}
    ranked = sorted((e for e in first.get("evidence", []) if e["level"] in ("critical", "warning")),
                    key=lambda e: (e["level"] != "critical", order.get(e["kind"], 3)))
    worst = ranked[0]["words"] if ranked else ""
    return f"{place}: {verdict}" + (f"; {worst}" if worst else "")
