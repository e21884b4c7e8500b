"""A product's sample query made runnable by the reader: ``{now}``/``{now-1h}`` become UTC times and
``{job}`` one of the reader's jobs (``cluster/id``), so "Run it" asks only for what the reader may see.

Plain Python: no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

NOW_PLACEHOLDER = re.compile(r"\{now(?:-(\d+)([mhd]))?\}")
JOB_PLACEHOLDER = "{job}"
UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def resolve_times(text: str, now: datetime) -> str:
    """``{now}`` and ``{now-1h}`` (m, h, d) as UTC times, so the query can be copied and run as it is."""
    now = now.replace(microsecond=0)

    def replace(match):
        moment = now
        if match.group(1):
            moment = now - timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    return NOW_PLACEHOLDER.sub(replace, text)


@dataclass(frozen=True)
class SampleQuery:
    """What the reader's "Run it" asks: ``api`` (None when the reader has no job to run it on), and a sentence
    saying whose data it reads."""

    api: str | None
    scope: str


def choose_query(sample: dict, *, staff: bool) -> str:
    """The declared query for staff; for everyone else its ``job_api`` form (the same question on one of their
    jobs) where the product declares one."""
    if not staff and sample.get("job_api"):
        return sample["job_api"]
    return sample.get("api", "")


def needs_job(text: str) -> bool:
    return JOB_PLACEHOLDER in text


def sample_query(sample: dict, *, staff: bool, now: datetime, job: str | None) -> SampleQuery:
    """The query as this reader runs it: ``job`` is their latest job that fits (``cluster/id``), or None."""
    text = choose_query(sample, staff=staff)
    if not text:
        return SampleQuery(None, "This product declares no sample query.")
    if needs_job(text):
        if job is None:
            return SampleQuery(None, "This query reads one of your jobs, and you have none with this data yet "
                                     "(staff: none on the machine).")
        scope = f"On job {job}, " + ("the latest with this data." if staff else "your latest with this data (yours or your projects').")
        return SampleQuery(resolve_times(text.replace(JOB_PLACEHOLDER, job), now), scope)
    return SampleQuery(resolve_times(text, now), "Staff: any node." if staff and sample.get("job_api") else
                       "As declared; the answer holds what you may see.")
