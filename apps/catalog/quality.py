"""The quality checks of a data product, on plain data: freshness, coverage, gaps and schema drift.

Each check takes what a source observed (the newest sample per member, per-bucket sample counts,
the fields seen) and the product's targets, and returns a ``Result``: pass / warn / fail (or
skipped, with the reason), a one-line summary people read, and the measured values kept as history.
Members are the units a product is expected to cover: ``nid001234/2`` (a GPU), ``nid001234`` (a
node), ``alps/4242`` (a job), ``alps`` (a cluster).

Plain Python (pandas): no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pandas as pd

FRESH, AGING, STALE, UNKNOWN = "fresh", "aging", "stale", "unknown"
MAX_LISTED = 500  # members listed in a result; the counts are always complete


@dataclass
class Result:
    kind: str  # freshness, coverage, gaps, drift
    status: str  # pass, warn, fail, skipped, error
    summary: str
    measured: dict = field(default_factory=dict)


def age_text(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _utc(moment) -> pd.Timestamp:
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


# ---------------------------------------------------------------------------------------------
# Members that are jobs: whose job it is is not everyone's to know

JOB_POPULATIONS = ("running_jobs", "recent_jobs")
# measured keys that list members, per check kind: (key, how to read the member out of an item)
_MEMBER_LISTS = {
    "freshness": (("stalest", lambda item: item[0]),),
    "coverage": (("missing", lambda item: item["member"]),),
    "gaps": (("gaps", lambda item: item["member"]), ("ongoing", lambda item: item)),
}


def members_are_jobs(definition: dict) -> bool:
    """Whether a product's members are jobs (``alps/4242``): a model source whose member is a job id, or a
    coverage against a population of jobs. Their ids are shown only to those who may see the job."""
    member = (definition.get("source") or {}).get("member_field")
    fields = [member] if isinstance(member, str) else list(member or [])
    population = ((definition.get("slo") or {}).get("coverage") or {}).get("population")
    return bool(fields and fields[-1].split("__")[-1] == "job_id") or population in JOB_POPULATIONS


def listed_members(kind: str, measured: dict) -> set[str]:
    return {str(read(item)) for key, read in _MEMBER_LISTS.get(kind, ()) for item in measured.get(key) or []}


def redact_members(kind: str, measured: dict, visible: set[str]) -> dict:
    """``measured`` with its member lists cut to the ``visible`` members; ``<key>_hidden`` counts what was cut
    (the counts of the check itself stay whole)."""
    out = dict(measured)
    for key, read in _MEMBER_LISTS.get(kind, ()):
        items = measured.get(key)
        if not items:
            continue
        kept = [item for item in items if str(read(item)) in visible]
        out[key] = kept
        if len(kept) < len(items):
            out[f"{key}_hidden"] = len(items) - len(kept)
    return out


# ---------------------------------------------------------------------------------------------
# Freshness


def freshness(newest: pd.Series, now: datetime, *, warn: int, error: int) -> Result:
    """``newest``: member -> time of its newest sample. The product is Fresh while its newest sample is at
    most ``warn`` seconds old, Aging up to ``error``, Stale beyond (or with no sample at all); the ages of
    the members show whether a few lag behind."""
    now_ts = _utc(now)
    if newest is None or len(newest) == 0:
        return Result("freshness", "fail", "no data: the source has no sample in the check window",
                      {"state": STALE, "newest": None, "age_s": None, "members": 0})
    times = pd.to_datetime(newest, utc=True)
    ages = (now_ts - times).dt.total_seconds().clip(lower=0)
    newest_time = times.max()
    age = max(0.0, (now_ts - newest_time).total_seconds())
    state = FRESH if age <= warn else AGING if age <= error else STALE
    status = {FRESH: "pass", AGING: "warn", STALE: "fail"}[state]
    stalest = ages.sort_values(ascending=False).head(10)
    measured = {"state": state, "newest": newest_time.isoformat(), "age_s": round(age, 1), "members": int(len(ages)),
                "p50_s": round(float(ages.quantile(0.5)), 1), "p95_s": round(float(ages.quantile(0.95)), 1),
                "max_s": round(float(ages.max()), 1), "stalest": [[str(k), round(float(v), 1)] for k, v in stalest.items()],
                "warn_s": warn, "error_s": error}
    summary = (f"{state.capitalize()}: newest sample {age_text(age)} old (target: within {age_text(warn)}, stale after "
               f"{age_text(error)}); members' newest samples p50 {age_text(measured['p50_s'])}, p95 {age_text(measured['p95_s'])}")
    return Result("freshness", status, summary, measured)


# ---------------------------------------------------------------------------------------------
# Coverage


def group_missing(missing: list[str], expected_per_host: dict[str, int] | None = None) -> list[dict]:
    """Missing members grouped for people: a node whose every GPU is missing is one line."""
    if not missing:
        return []
    if not all("/" in member for member in missing) or expected_per_host is None:
        return [{"member": member} for member in missing]
    by_host: dict[str, list[str]] = {}
    for member in missing:
        host, _, gpu = member.partition("/")
        by_host.setdefault(host, []).append(gpu)
    out = []
    for host in sorted(by_host):
        gpus = sorted(by_host[host], key=lambda g: int(g) if g.isdigit() else g)
        whole = len(gpus) == expected_per_host.get(host, -1)
        out.append({"member": host, "gpus": [int(g) if g.isdigit() else g for g in gpus], "whole": whole})
    return out


def coverage(present: set[str], expected: set[str], *, target: float, population: str,
             expected_per_host: dict[str, int] | None = None, name_members: bool = True) -> Result:
    """Members present ÷ members expected; the missing members listed (grouped by node for GPUs). With
    ``name_members`` off (members that are jobs) the summary gives counts only; ``measured`` still lists them."""
    if not expected:
        return Result("coverage", "skipped", f"nothing expected: the population {population} is empty", {"expected": 0})
    found = present & expected
    missing = sorted(expected - present)
    ratio = len(found) / len(expected)
    grouped = group_missing(missing, expected_per_host)
    status = "pass" if ratio >= target else "fail"
    measured = {"ratio": round(ratio, 6), "present": len(found), "expected": len(expected), "missing_count": len(missing),
                "missing": grouped[:MAX_LISTED], "missing_groups": len(grouped), "unexpected": len(present - expected),
                "target": target, "population": population}
    what = ""
    if grouped and not name_members:
        what = f"; {len(missing):,} missing"
    elif grouped:
        whole = [g["member"] for g in grouped if g.get("whole")]
        shown = ", ".join(whole[:6]) if whole else ", ".join(g["member"] for g in grouped[:6])
        more = (len(whole) if whole else len(grouped)) - 6
        what = f"; missing: {shown}" + (f" and {more} more" if more > 0 else "")
        if whole and len(whole) < len(grouped):
            what += f" (all GPUs), and {len(grouped) - len(whole)} node(s) with some GPUs missing"
    summary = f"{ratio:.1%} of {len(expected):,} expected ({population}) present, target {target:.1%}{what}"
    return Result("coverage", status, summary, measured)


# ---------------------------------------------------------------------------------------------
# Gaps


def gaps(counts: pd.DataFrame, *, start: datetime, end: datetime, period: int, gap_after: int,
         name_members: bool = True, expected_until: dict | None = None) -> Result:
    """Intervals without samples longer than ``gap_after`` sampling periods, per member.

    ``counts``: one row per (member, bucket) that has samples (``bucket`` the start of a ``period``-wide
    bucket); buckets without samples are simply absent. A member silent until the end of the window has
    an *ongoing* gap; a silence before a member's first sample in the window is not counted (the member
    may be new). Members with no sample in the whole window are coverage's business, not listed here.

    ``expected_until`` (members sent by collectors inside jobs): member -> until when it was expected to send
    (the end of its last job in the window; None while a job still runs on it). A member that fell silent when
    its job ended is not silent *now*; one missing from the map ran no job in the window and is expected
    to send nothing after its samples."""
    start_ts, end_ts = _utc(start), _utc(end)
    limit = gap_after * period
    if counts is None or counts.empty:
        return Result("gaps", "skipped", "no samples in the window to look for gaps in", {"gaps": [], "members": 0})
    frame = counts[counts["count"] > 0][["member", "bucket"]].copy()
    frame["bucket"] = pd.to_datetime(frame["bucket"], utc=True)
    frame = frame.sort_values(["member", "bucket"], kind="stable")
    seconds = (frame["bucket"] - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    members = frame["member"].to_numpy()
    same = np.r_[False, members[1:] == members[:-1]]
    previous_end = np.r_[np.nan, seconds[:-1] + period]
    silence = np.where(same, seconds - previous_end, np.nan)
    inner = np.flatnonzero(same & (silence > limit))
    found = [(members[i], previous_end[i], seconds[i], False) for i in inner]
    first = np.flatnonzero(~same)
    last = np.r_[first[1:] - 1, len(seconds) - 1]
    # A member whose first sample comes late in the window may be new or back from a silence that began before
    # it: the window cannot tell, so only silences between samples and since the last one count.
    window_end = end_ts.timestamp()
    for i in last:  # silent until now (or until its job ended): ongoing
        until = window_end
        if expected_until is not None:
            ended = expected_until.get(str(members[i]), start_ts)
            until = window_end if ended is None else min(window_end, _utc(ended).timestamp())
        if until - (seconds[i] + period) > limit:
            found.append((members[i], seconds[i] + period, until, until >= window_end))
    found.sort(key=lambda g: (-(g[2] - g[1]), str(g[0])))
    listed = [{"member": str(m), "start": pd.Timestamp(a, unit="s", tz="UTC").isoformat(), "end": pd.Timestamp(b, unit="s", tz="UTC").isoformat(),
               "seconds": round(float(b - a), 1), "ongoing": bool(ongoing)} for m, a, b, ongoing in found]
    ongoing_members = sorted({g["member"] for g in listed if g["ongoing"]})
    members_with = sorted({g["member"] for g in listed})
    status = "fail" if ongoing_members else "warn" if listed else "pass"
    measured = {"gaps": listed[:MAX_LISTED], "gap_count": len(listed), "members": int(len(first)), "members_with_gaps": len(members_with),
                "ongoing": ongoing_members[:MAX_LISTED], "ongoing_count": len(ongoing_members), "limit_s": limit, "period_s": period,
                "start": start_ts.isoformat(), "end": end_ts.isoformat()}
    if not listed:
        summary = f"no gap longer than {gap_after} sampling periods ({age_text(limit)}) in {len(first):,} members"
    elif not name_members:  # members that are jobs: counts only (``measured`` lists them for those who may see them)
        summary = (f"{len(listed)} gap(s) in {len(members_with)} of {len(first):,} members"
                   + (f", {len(ongoing_members)} still silent" if ongoing_members else "")
                   + f"; longest {age_text(listed[0]['seconds'])}")
    else:
        longest = listed[0]
        summary = (f"{len(listed)} gap(s) in {len(members_with)} of {len(first):,} members"
                   + (f", {len(ongoing_members)} still silent ({', '.join(ongoing_members[:5])}"
                      + (f" and {len(ongoing_members) - 5} more" if len(ongoing_members) > 5 else "") + ")" if ongoing_members else "")
                   + f"; longest {age_text(longest['seconds'])} on {longest['member']}")
    return Result("gaps", status, summary, measured)


# ---------------------------------------------------------------------------------------------
# Schema drift


def drift(declared: dict[str, dict], observed: dict[str, dict] | None, *, aliases: dict[str, str] | None = None,
          report_new: bool = True) -> Result:
    """Declared columns against what the source has now: ``{name: {"unit", "type"}}`` each (observed None:
    the source cannot say). New columns are a warning; missing or renamed columns and changed units or
    types fail. ``aliases``: other names a column may appear under (a DCGM 4.6 rename), to tell a rename
    from a loss. ``report_new`` False: the product is a chosen subset of what the source holds
    (a model's columns, some DCGM fields), so undeclared columns are not news."""
    if observed is None:
        return Result("drift", "skipped", "the source does not describe its schema", {})
    aliases = aliases or {}
    renamed, missing, units, types = [], [], [], []
    seen_names = set(observed)
    for name, spec in declared.items():
        if name in observed:
            have = observed[name]
            if spec.get("unit") and have.get("unit") and spec["unit"] != have["unit"]:
                units.append({"column": name, "declared": spec["unit"], "observed": have["unit"]})
            if spec.get("type") and have.get("type") and spec["type"] != have["type"]:
                types.append({"column": name, "declared": spec["type"], "observed": have["type"]})
            continue
        alias = aliases.get(name)
        if alias and alias in observed:
            renamed.append({"column": name, "now": alias})
            seen_names.discard(alias)
        else:
            missing.append(name)
    new = sorted(seen_names - set(declared) - {r["now"] for r in renamed}) if report_new else []
    status = "fail" if (missing or renamed or units or types) else "warn" if new else "pass"
    parts = []
    if missing:
        parts.append(f"missing: {', '.join(missing[:8])}")
    if renamed:
        parts.append("renamed: " + ", ".join(f"{r['column']} → {r['now']}" for r in renamed[:8]))
    if units:
        parts.append("unit changed: " + ", ".join(f"{u['column']} {u['declared']} → {u['observed']}" for u in units[:8]))
    if types:
        parts.append("type changed: " + ", ".join(f"{t['column']} {t['declared']} → {t['observed']}" for t in types[:8]))
    if new:
        parts.append(f"new, not declared: {', '.join(new[:8])}" + (f" and {len(new) - 8} more" if len(new) > 8 else ""))
    summary = "; ".join(parts) if parts else f"all {len(declared)} declared columns present with their units and types"
    return Result("drift", status, summary, {"missing": missing, "renamed": renamed, "unit_changes": units, "type_changes": types,
                                             "new": new[:MAX_LISTED], "declared": len(declared), "observed": len(observed)})


def product_state(results: list[Result]) -> str:
    """Fresh / Aging / Stale from the freshness check; Unknown when it could not run."""
    for result in results:
        if result.kind == "freshness" and result.status in ("pass", "warn", "fail"):
            return result.measured.get("state", UNKNOWN)
    return UNKNOWN
