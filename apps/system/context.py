"""The job in context: which other jobs shared a job's dragonfly groups and switches while it ran, how loaded
they were, and which of its pipeline-stage boundaries cross into groups where they ran.

Rows in, findings out. The caller gives the job's hosts and window, where every host sits (group and the
switches its NICs attach to), the other jobs that overlapped the window in time (hosts, times, GPUs and
their saturation record: score 0-100, compute / memory / link 0-1, limiter) and, when the job reported a
Megatron layout, its pipelines (per pipeline, the host of each stage in stage order). :func:`job_context`
keeps the jobs that ran on the job's groups, with when they overlapped, and says per group how much of it
they held and how hard their GPUs worked.

What this is not: a measurement of the network. The neighbours' load is their GPU saturation (their
``link`` component is NVLink / PCIe / NVLink-C2C saturation of their GPUs, a hint of how much they
communicate) and their share of the group's nodes, never traffic measured on the global links;
:data:`NOT_MEASURED` says so, and where the Slingshot counters Belvedere does read are shown (NIC counters:
the job's Network panel; switch port counters: the system page).

Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Mapping, Sequence

HIGH_LINK = 0.6  # a neighbour whose GPUs' link saturation is at least this communicates heavily
NOT_MEASURED = ("The neighbours' load shown here is their GPU saturation (their link component is NVLink, PCIe and "
                "NVLink-C2C saturation of their GPUs: how hard they communicate) and their share of the group's nodes, "
                "not traffic measured on the dragonfly's global links. What Belvedere measures of the Slingshot network is "
                "shown elsewhere: the Cassini NIC counters of each node (this job's own traffic, retried packets and link "
                "events, per NIC and per group: the Network panel) and, where staff import them from the fabric manager, "
                "the Rosetta switches' port counters (the load on each global link: the system page). Neither says which "
                "job loaded a global link: a NIC counts traffic to its own group and to other groups alike, and a switch "
                "port carries every job's traffic together.")


@dataclass(frozen=True)
class Other:
    """Another job that overlapped the job's window in time."""

    key: int  # the caller's id for it (a primary key): never shown, the caller decides how it is named
    hosts: tuple[str, ...]
    start: datetime
    end: datetime | None  # None: still running
    gpus: int = 0
    score: float | None = None  # 0-100
    compute: float | None = None  # 0-1
    memory: float | None = None
    link: float | None = None
    limiter: str = ""

    @property
    def high_link(self) -> bool:
        return self.link is not None and self.link >= HIGH_LINK


@dataclass(frozen=True)
class Neighbour:
    other: Other
    groups: tuple[int, ...]  # the job's groups it ran on
    nodes_in_groups: int  # its nodes in those groups
    switches: int  # switches both jobs' NICs attach to
    since: datetime  # the overlap: from
    until: datetime | None  # to (None: both still running)


@dataclass(frozen=True)
class GroupLoad:
    group: int
    job_nodes: int  # this job's nodes in the group
    nodes: int | None  # the group's nodes (None: unknown)
    neighbours: int  # other jobs that ran there during the window
    neighbour_nodes: int  # their nodes in the group (summed: jobs that followed each other on a node count twice)
    mean_score: float | None  # node-weighted mean S of the scored neighbours there (0-100)
    top_link: float | None  # the highest link saturation among them (0-1)

    @property
    def share(self) -> float | None:
        """The neighbours' share of the group's nodes (at most 1)."""
        return min(1.0, self.neighbour_nodes / self.nodes) if self.nodes else None


@dataclass(frozen=True)
class Boundary:
    """A pipeline-stage boundary ``stage → stage + 1`` whose point-to-point traffic leaves a group."""

    stage: int
    pairs: tuple[tuple[int, int], ...]  # (group of stage, group of stage + 1), most pipelines first
    pipelines: int  # pipelines whose boundary crosses
    of: int  # pipelines in the layout
    neighbours: tuple[Neighbour, ...]  # jobs that ran on either group of a crossing, busiest link first

    @property
    def words(self) -> str:
        """"6→7 crosses group 3 → 4" (and the other pairs)."""
        pairs = ", ".join(f"{a} → {b}" for a, b in self.pairs[:3]) + (" …" if len(self.pairs) > 3 else "")
        return f"{self.stage}→{self.stage + 1} crosses group{'s' * (len(self.pairs) > 1)} {pairs}"


@dataclass
class JobContext:
    groups: list[GroupLoad] = field(default_factory=list)
    neighbours: list[Neighbour] = field(default_factory=list)
    boundaries: list[Boundary] = field(default_factory=list)
    job_switches: int = 0
    shared_switches: int = 0  # the job's switches another job's NICs also used during the window
    unplaced: tuple[str, ...] = ()  # the job's hosts the topology does not know

    @property
    def crowding(self) -> list[Neighbour]:
        """The neighbours that communicate heavily (link saturation at least HIGH_LINK), busiest first."""
        return [n for n in self.neighbours if n.other.high_link]


def _overlap(window: tuple[datetime, datetime | None], other: Other) -> tuple[datetime, datetime | None] | None:
    start, end = window
    since = max(start, other.start)
    ends = [moment for moment in (end, other.end) if moment is not None]
    until = min(ends) if ends else None
    if until is not None and until <= since:
        return None
    return since, until


def _neighbour_order(neighbour: Neighbour):
    link = neighbour.other.link
    return (link is None, -(link or 0.0), -neighbour.nodes_in_groups, neighbour.since, neighbour.other.key)


def job_context(*, hosts: Sequence[str], window: tuple[datetime, datetime | None],
                placement: Mapping[str, tuple[int, Sequence[tuple[int, int]]]], others: Iterable[Other],
                group_nodes: Mapping[int, int] | None = None, pipelines: Sequence[Sequence[str]] | None = None) -> JobContext:
    """The job's context.

    ``placement``: host -> (group, switches of its NICs as (group, index)); ``group_nodes``: group -> its
    nodes; ``window``: (start, end or None while running); ``pipelines``: per pipeline the host of each stage.
    """
    job_hosts = list(dict.fromkeys(hosts))
    result = JobContext(unplaced=tuple(h for h in job_hosts if h not in placement))
    groups_of_job: dict[int, int] = {}
    job_switches: set[tuple[int, int]] = set()
    for host in job_hosts:
        if host in placement:
            group, switches = placement[host]
            groups_of_job[group] = groups_of_job.get(group, 0) + 1
            job_switches.update(tuple(s) for s in switches)
    result.job_switches = len(job_switches)
    shared_switches: set[tuple[int, int]] = set()
    own = set(job_hosts)
    per_group: dict[int, list[tuple[Other, int]]] = {group: [] for group in groups_of_job}
    for other in others:
        overlap = _overlap(window, other)
        if overlap is None:
            continue
        counts: dict[int, int] = {}
        switches: set[tuple[int, int]] = set()
        for host in other.hosts:
            if host in own or host not in placement:
                continue
            group, host_switches = placement[host]
            if group in groups_of_job:
                counts[group] = counts.get(group, 0) + 1
                switches.update(tuple(s) for s in host_switches)
        if not counts:
            continue
        switches &= job_switches
        shared_switches |= switches
        for group, nodes in counts.items():
            per_group[group].append((other, nodes))
        result.neighbours.append(Neighbour(other, tuple(sorted(counts)), sum(counts.values()), len(switches), *overlap))
    result.shared_switches = len(shared_switches)
    result.neighbours.sort(key=_neighbour_order)
    for group in sorted(groups_of_job):
        there = per_group[group]
        scored = [(o.score, n) for o, n in there if o.score is not None]
        links = [o.link for o, _ in there if o.link is not None]
        result.groups.append(GroupLoad(
            group=group, job_nodes=groups_of_job[group], nodes=(group_nodes or {}).get(group),
            neighbours=len(there), neighbour_nodes=sum(n for _, n in there),
            mean_score=sum(s * n for s, n in scored) / sum(n for _, n in scored) if scored else None,
            top_link=max(links) if links else None))
    result.boundaries = _boundaries(pipelines or [], placement, result.neighbours)
    return result


def _boundaries(pipelines: Sequence[Sequence[str]], placement, neighbours: list[Neighbour]) -> list[Boundary]:
    crossing: dict[int, dict[tuple[int, int], int]] = {}  # stage -> (group, next group) -> pipelines
    for pipeline in pipelines:
        groups = [placement[h][0] if h in placement else None for h in pipeline]
        for stage in range(len(groups) - 1):
            a, b = groups[stage], groups[stage + 1]
            if a is None or b is None or a == b:
                continue
            pairs = crossing.setdefault(stage, {})
            pairs[(a, b)] = pairs.get((a, b), 0) + 1
    boundaries = []
    for stage in sorted(crossing):
        pairs = tuple(sorted(crossing[stage], key=lambda pair: (-crossing[stage][pair], pair)))
        touched = {group for pair in pairs for group in pair}
        there = tuple(n for n in neighbours if touched & set(n.groups))
        boundaries.append(Boundary(stage, pairs, sum(crossing[stage].values()), len(pipelines), there))
    return boundaries


def _pct(fraction: float | None) -> str:
    return "–" if fraction is None else f"{100 * fraction:.0f} %"


def load_words(other: Other) -> str:
    """"link saturation 88 %, S 41 of 100" (what is known of it)."""
    parts = []
    if other.link is not None:
        parts.append(f"link saturation {_pct(other.link)}")
    if other.score is not None:
        parts.append(f"S {other.score:.0f} of 100")
    return ", ".join(parts) or "not scored"


def crowding_finding(context: JobContext, clock) -> tuple[str, str] | None:
    """The first screen's warning when a heavily communicating job shared the job's groups: (title, action),
    never naming the other job (the first screen is the same for everybody who may see this job).
    ``clock(moment) -> str`` formats times."""
    crowding = context.crowding
    if not crowding:
        return None
    top = crowding[0]
    more = f" ({len(crowding) - 1} more heavy communicator{'s' * (len(crowding) > 2)} too)" if len(crowding) > 1 else ""
    boundary = next((b for b in context.boundaries if top in b.neighbours), None)
    where = f"group{'s' * (len(top.groups) > 1)} {', '.join(str(g) for g in top.groups)}"
    if boundary is not None:
        title = (f"Your pipeline boundary {boundary.words}, where another job ({load_words(top.other)}) "
                 f"{'has run there since' if top.until is None else 'ran there from'} {clock(top.since)}{more}.")
    else:
        title = (f"Another job ({load_words(top.other)}, {top.nodes_in_groups} nodes) shares dragonfly {where} with this "
                 f"job {'since' if top.until is None else 'from'} {clock(top.since)}{more}.")
    action = (f"Compare your step time before and after {clock(top.since)}: if it rose, the shared global links are a "
              "likely cause; resubmit asking Slurm for fewer groups (sbatch --switches=<n>@<max-wait>).")
    return title, action
