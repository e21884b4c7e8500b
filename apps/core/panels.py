"""The job-panel registry: how apps put a section on the job page without the jobs app importing them.

Each app that has something to say about a job registers a :class:`JobPanel` from its
``AppConfig.ready()``::

    register_job_panel(JobPanel(key="saturation", title="GPU saturation", order=20,
                                template="saturation/_job_section.html",
                                context=saturation_context, summary=saturation_summary))

The job page renders the panels in ``order`` (lower first) below its first screen. ``context(job,
request)`` gives the panel's template what it needs to draw its *shell* (headings, controls, words,
API addresses) and must be cheap: figures load as JSON from the API after the first paint.
``summary(job)`` (optional) contributes to the first screen: :class:`Fact` tiles (the score, the
limiter, freshness), :class:`Finding` items (what is wrong, each with one thing to do) and
:class:`Freshness` per data source. Summaries are read on every page view, so they read rows, not
product files.

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from .registry import OrderedRegistry

LEVELS = ("critical", "warning", "info", "ok")  # most urgent first: the first screen sorts by it


@dataclass(frozen=True)
class Finding:
    """One thing the first screen says about the job, with one thing to do about it."""

    level: str  # one of LEVELS
    title: str  # what is wrong, in words ("GPU nid001234:2 runs 12 % below its peers")
    action: str = ""  # one thing to do ("Drain the node and resubmit without it")
    link: str | None = None  # where the evidence is (an anchor on the page or another page)
    source: str = ""  # the panel key that found it
    rank: int = 50  # lower first, before the level: how a finished job ended (rank 0) heads the list whatever its level

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"finding level {self.level!r} is not one of {', '.join(LEVELS)}")


@dataclass(frozen=True)
class Fact:
    """A number on the first screen: "Saturation 54 of 100", "limited by tensor cores"."""

    label: str
    value: str
    detail: str = ""
    level: str = "info"
    element_id: str | None = None
    rank: int = 50  # the first screen shows facts by rank, then in panel order (the job's state comes first)
    link: str | None = None  # where the value leads (a page about it: the job's training campaign)


@dataclass(frozen=True)
class Freshness:
    """What one data source has delivered for the job: its real first and last sample."""

    source: str  # "GPU telemetry (DCGM)"
    first: datetime | None
    last: datetime | None
    state: str  # "live", "lagging", "stale", "complete", "ends early", "none"
    words: str  # the sentence the first screen shows
    reporting: int | None = None  # GPUs (or nodes) that reported
    expected: int | None = None  # GPUs (or nodes) the job was allocated


@dataclass
class PanelSummary:
    facts: list[Fact] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    freshness: list[Freshness] = field(default_factory=list)
    # Plain JSON-able data the job's first-screen API gives beside the findings, by name ("versions",
    # "preflight"): what the first screen's words are made of, for scripts.
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobPanel:
    key: str  # also the panel's element id: "panel-<key>"
    title: str
    order: int
    template: str
    context: Callable[[Any, Any], dict]  # (job, request) -> template context
    summary: Callable[[Any], PanelSummary | None] | None = None
    # Figures the panel's JavaScript loads after the first paint, served by the job page at
    # ``/jobs/<cluster>/<job_id>/panels/<key>/<name>.json``: name -> (job, query) -> Plotly figure dict.
    figures: dict[str, Callable[[Any, Any], dict]] = field(default_factory=dict)
    # A short string that changes whenever the panel's data changes (product refreshed): the figure
    # answers' ETag and cache key. None: not cacheable (computed on every request).
    version: Callable[[Any], str | None] | None = None


_panels: OrderedRegistry[JobPanel] = OrderedRegistry(key=lambda panel: panel.key)


def register_job_panel(panel: JobPanel) -> None:
    """Add ``panel`` to every job page; registering the same key again replaces it (reloads in tests)."""
    _panels.add(panel)


def job_panel(key: str) -> JobPanel | None:
    return _panels.get(key)


def job_panels() -> list[JobPanel]:
    """The registered panels, in page order."""
    return _panels.entries()


def first_screen(job, panels: list[JobPanel] | None = None) -> PanelSummary:
    """Every panel's summary for ``job`` merged: findings by rank (how the job ended first), then most urgent
    first, in panel order within a level."""
    merged = PanelSummary()
    for panel in panels if panels is not None else job_panels():
        if panel.summary is None:
            continue
        part = panel.summary(job)
        if part is None:
            continue
        merged.facts.extend(part.facts)
        merged.findings.extend(part.findings)
        merged.freshness.extend(part.freshness)
        merged.data.update(part.data)
    merged.findings.sort(key=lambda finding: (finding.rank, LEVELS.index(finding.level)))
    merged.facts.sort(key=lambda fact: fact.rank)
    return merged
