"""Writes to the stored topology: whole-system imports and per-node discovery records.

Both go through :func:`topology_apply`, which compares the incoming plain-data topology with
what is stored, writes only the differences inside one transaction, and returns a report of
what changed. Applying the same input twice changes nothing the second time.
"""
from collections import Counter
from dataclasses import dataclass, field

from django.db import transaction

from apps.core.bulk import sync_rows
from apps.core.diff import RowDiff

from .model import Topology
from .models import DragonflyGroup, GlobalLink, Nic, Node, Switch, TopologyRevision


@dataclass
class ChangeReport:
    """What an import changed, by kind of object, with a few examples for people to read."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, kind: str, change: str, count: int = 1, example: str | None = None) -> None:
        if count:
            self.counts.setdefault(kind, Counter())[change] += count
            if example and len(self.examples) < 20:
                self.examples.append(example)

    @property
    def changed(self) -> bool:
        return any(sum(counter.values()) for counter in self.counts.values())

    def as_dict(self) -> dict:
        return {"changes": {kind: dict(counter) for kind, counter in self.counts.items()}, "examples": self.examples}

    def lines(self) -> list[str]:
        if not self.changed:
            return ["no changes: the stored topology already matches"]
        return [
            f"{kind}: " + ", ".join(f"{count} {change}" for change, count in sorted(counter.items()))
            for kind, counter in sorted(self.counts.items())
        ]

    def add_diff(self, kind: str, diff: RowDiff) -> None:
        """Count what a :func:`apps.core.bulk.sync_rows` wrote, without examples."""
        self.add(kind, "added", len(diff.added))
        self.add(kind, "changed", len(diff.changed))
        self.add(kind, "removed", len(diff.removed))


@transaction.atomic
def topology_apply(topology: Topology, *, source: str, prune: bool) -> tuple[ChangeReport, TopologyRevision | None]:
    """Make the stored topology match ``topology``.

    With ``prune`` (a whole-system import) nodes, switches, groups and global links that are not
    in ``topology`` are removed; without it (discovery records) only the given nodes are touched.
    """
    report = ChangeReport()
    group_ids = _sync_groups(topology, report)
    wanted_switches = _wanted_switches(topology)
    switch_ids = _sync_switches(wanted_switches, group_ids, report)
    node_ids = _sync_nodes(topology, group_ids, report, prune=prune)
    _sync_nics(topology, node_ids, switch_ids, report)
    if prune:
        _sync_global_links(topology, switch_ids, report)
        _prune_fabric(topology, [switch_ids[key] for key in wanted_switches], report)
    revision = None
    if report.changed:
        revision = TopologyRevision.objects.create(
            source=source[:200], name=topology.name if prune else "", parameters=topology.parameters if prune else {},
            summary=report.as_dict(),
        )
    return report, revision


def _sync_groups(topology: Topology, report: ChangeReport) -> dict[int, int]:
    """Add the missing groups and take their cabinet from the nodes; number -> pk of every group."""
    cabinets: dict[int, str] = {}
    for node in topology.nodes:
        if node.cabinet:
            cabinets.setdefault(node.group, node.cabinet)
    diff = sync_rows(
        DragonflyGroup.objects.all(), {number: {"cabinet": cabinets.get(number, "")} for number in topology.groups},
        key=["number"], fields=["cabinet"], build=lambda number, values: DragonflyGroup(number=number, **values),
        keep_when_empty=True, remove=False,  # empty groups are pruned at the end, once nothing refers to them
    )
    report.add_diff("groups", diff)
    return dict(DragonflyGroup.objects.values_list("number", "pk"))


def _wanted_switches(topology: Topology) -> dict[tuple[int, int], str]:
    """(group, index) -> xname of the listed switches, then of those the NICs name ("" when unknown)."""
    wanted = {(switch.group, switch.index): switch.xname or "" for switch in topology.switches}
    for node in topology.nodes:
        for nic in node.nics:
            wanted.setdefault((nic.group, nic.switch), "")
    return wanted


def _sync_switches(wanted: dict[tuple[int, int], str], group_ids: dict[int, int],
                   report: ChangeReport) -> dict[tuple[int, int], int]:
    """Add the missing switches and rename those given a new xname; (group, index) -> pk of every switch."""
    diff = sync_rows(
        Switch.objects.all(), {key: {"xname": xname} for key, xname in wanted.items()},
        key=["group__number", "index"], fields=["xname"],
        build=lambda key, values: Switch(group_id=group_ids[key[0]], index=key[1], **values),
        keep_when_empty=True, remove=False,  # unused switches are pruned at the end
    )
    report.add_diff("switches", diff)
    return {(group, index): pk for group, index, pk in Switch.objects.values_list("group__number", "index", "pk")}


def _sync_nodes(topology: Topology, group_ids: dict[int, int], report: ChangeReport, *, prune: bool) -> dict[str, int]:
    """Add, change and (with ``prune``) remove nodes; hostname -> pk of the given nodes."""
    wanted = {
        node.hostname: {"xname": node.xname or "", "group_id": group_ids[node.group], "cabinet": node.cabinet or "",
                        "gpus": node.gpus, "gpu_model": node.gpu_model}
        for node in topology.nodes
    }
    diff = sync_rows(
        Node.objects.all(), wanted, key=["hostname"], fields=["xname", "group_id", "cabinet", "gpus", "gpu_model"],
        build=lambda hostname, values: Node(hostname=hostname, **values),
        # A discovery record says what the node could see: a missing xname or GPU model means
        # "not known there", not "remove what an import said".
        keep_when_empty=not prune, remove=prune,
    )
    for change in diff.changed:
        report.add("nodes", "changed", 1, f"{change.key}: {', '.join(name.removesuffix('_id') for name in change.fields)} changed")
    if diff.added:
        report.add("nodes", "added", len(diff.added), f"{len(diff.added)} nodes added, e.g. {diff.added[0][0]}")
    gone = sorted(hostname for hostname, _ in diff.removed)
    report.add("nodes", "removed", len(gone), f"removed {', '.join(gone[:5])}{' ...' if len(gone) > 5 else ''}")
    return dict(Node.objects.filter(hostname__in=list(wanted)).values_list("hostname", "pk"))


def _sync_nics(topology: Topology, node_ids: dict[str, int], switch_ids: dict[tuple[int, int], int],
               report: ChangeReport) -> None:
    """The given nodes' NICs become exactly the incoming ones; a NIC on another switch is worth an example."""
    incoming = {(node.hostname, nic.index): nic for node in topology.nodes for nic in node.nics}
    wanted = {
        key: {"name": nic.name, "mac": nic.mac or "", "switch_id": switch_ids[(nic.group, nic.switch)], "port": nic.port}
        for key, nic in incoming.items()
    }
    diff = sync_rows(
        Nic.objects.filter(node__hostname__in=[node.hostname for node in topology.nodes]), wanted,
        key=["node__hostname", "index"], fields=["name", "mac", "switch_id", "port"],
        build=lambda key, values: Nic(node_id=node_ids[key[0]], index=key[1], **values), batch_size=5000,
    )
    for change in diff.changed:
        if "switch_id" in change.fields:
            nic = incoming[change.key]
            report.add("nics", "moved to another switch", 1, f"{change.key[0]} {nic.name} moved to switch {nic.group}.{nic.switch}")
        else:
            report.add("nics", "changed")
    report.add("nics", "added", len(diff.added))
    report.add("nics", "removed", len(diff.removed))


def _sync_global_links(topology: Topology, switch_ids: dict[tuple[int, int], int], report: ChangeReport) -> None:
    """Global links become exactly the incoming ones, parallel cables counted on one row per switch pair."""
    wanted: dict[tuple[int, int], dict] = {}
    for link in topology.global_links:
        a, b = switch_ids[(link.group_a, link.switch_a)], switch_ids[(link.group_b, link.switch_b)]
        row = wanted.setdefault((min(a, b), max(a, b)), {"links": 0})
        row["links"] += link.links
    diff = sync_rows(
        GlobalLink.objects.all(), wanted, key=["switch_a_id", "switch_b_id"], fields=["links"],
        build=lambda key, values: GlobalLink(switch_a_id=key[0], switch_b_id=key[1], **values), batch_size=5000,
    )
    report.add_diff("global links", diff)


def _prune_fabric(topology: Topology, wanted_switch_ids: list[int], report: ChangeReport) -> None:
    """Remove the switches nothing names or cables to, then the groups left empty."""
    unused = Switch.objects.exclude(pk__in=wanted_switch_ids).filter(nics__isnull=True)
    report.add("switches", "removed", unused.count())
    unused.delete()
    empty_groups = DragonflyGroup.objects.exclude(number__in=topology.groups).filter(nodes__isnull=True, switches__isnull=True)
    report.add("groups", "removed", empty_groups.count())
    empty_groups.delete()
