"""The node-finding registry: hardware faults that a job's telemetry found on a node, for the apps that judge nodes.

The saturation scoring finds a NIC retrying a third of its packets, a GPU running hot or held down in its clocks; the
job page shows them, but node health (vetting) and the staff triage inbox sit beside or above those apps and must
not import them (vetting and saturation are one layer). The app that finds them registers a source from its
``AppConfig.ready()``::

    register_node_finding_source(NodeFindingSource(key="saturation", findings=running_job_faults))

``findings(now)`` returns :class:`NodeFinding` rows, one per job that saw the fault; :func:`by_node` folds them into
one :class:`NodeFault` per node and kind (the triage inbox's item, the reason a node's state is raised), listing the
jobs that saw it. A fault stops when no source reports it any more.

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from .registry import OrderedRegistry

KINDS = {"nic_retries": "NIC retrying packets", "nic_link": "NIC link flapping", "hot_gpu": "GPU running hot",
         "throttled_gpu": "GPU clocks held down"}
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class NodeFinding:
    host: str
    kind: str  # one of KINDS
    severity: str  # critical (the job waits for it) or warning
    what: str  # "hsn2 on nid000473: 31 % of packets retried, its peers < 1 %"
    job: str = ""  # "alps/1200123"
    job_url: str = ""  # "/jobs/alps/1200123/"
    since: datetime | None = None  # when the job first saw it (None: not known)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.severity not in SEVERITY_ORDER:
            raise ValueError(f"severity {self.severity!r} is not one of {', '.join(SEVERITY_ORDER)}")


@dataclass
class NodeFault:
    """One fault on one node, however many jobs saw it: the worst severity and words, the earliest time seen."""

    host: str
    kind: str
    severity: str
    what: str
    jobs: list[tuple[str, str]] = field(default_factory=list)  # (job label, job url), in the order first seen
    since: datetime | None = None

    @property
    def kind_words(self) -> str:
        return KINDS[self.kind]


@dataclass(frozen=True)
class NodeFindingSource:
    key: str
    findings: Callable[[datetime], list[NodeFinding]]
    order: int = 100


_sources: OrderedRegistry[NodeFindingSource] = OrderedRegistry(key=lambda source: source.key)


def register_node_finding_source(source: NodeFindingSource) -> NodeFindingSource:
    """Add ``source``; the same key again replaces it."""
    return _sources.add(source)


def unregister_node_finding_source(key: str) -> None:
    _sources.remove(key)


def node_finding_sources() -> list[NodeFindingSource]:
    return _sources.entries()


def node_findings(now: datetime) -> list[NodeFinding]:
    """What every registered source finds now."""
    return [finding for source in _sources.entries() for finding in source.findings(now)]


def by_node(findings: list[NodeFinding]) -> list[NodeFault]:
    """One fault per (node, kind): the worst severity (and its words), every job that saw it, the earliest ``since``;
    sorted by host, then kind."""
    faults: dict[tuple[str, str], NodeFault] = {}
    for finding in findings:
        key = (finding.host, finding.kind)
        fault = faults.get(key)
        if fault is None:
            fault = faults[key] = NodeFault(finding.host, finding.kind, finding.severity, finding.what, since=finding.since)
        elif SEVERITY_ORDER[finding.severity] < SEVERITY_ORDER[fault.severity]:
            fault.severity, fault.what = finding.severity, finding.what
        if finding.since is not None and (fault.since is None or finding.since < fault.since):
            fault.since = finding.since
        if finding.job and finding.job not in [job for job, _ in fault.jobs]:
            fault.jobs.append((finding.job, finding.job_url))
    return [faults[key] for key in sorted(faults)]
