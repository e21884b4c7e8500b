"""Writes to the stored topology: whole-system imports and per-node discovery records.

Both go through :func:`topology_apply`, which compares the incoming plain-data topology with
what is stored, writes only the differences inside one transaction, and returns a report of
what changed. Applying the same input twice changes nothing the second time.
"""
from collections import Counter
from dataclasses import dataclass, field

from django.db import transaction

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


@transaction.atomic
def topology_apply(topology: Topology, *, source: str, prune: bool) -> tuple[ChangeReport, TopologyRevision | None]:
    """Make the stored topology match ``topology``.

    With ``prune`` (a whole-system import) nodes, switches, groups and global links that are not
    in ``topology`` are removed; without it (discovery records) only the given nodes are touched.
    """
    report = ChangeReport()

    # Groups ------------------------------------------------------------------------------------
    cabinets: dict[int, str] = {}
    for node in topology.nodes:
        if node.cabinet:
            cabinets.setdefault(node.group, node.cabinet)
    groups = {group.number: group for group in DragonflyGroup.objects.all()}
    new_groups = [DragonflyGroup(number=n, cabinet=cabinets.get(n, "")) for n in topology.groups if n not in groups]
    DragonflyGroup.objects.bulk_create(new_groups)
    report.add("groups", "added", len(new_groups))
    changed_groups = []
    for number, group in groups.items():
        if number in cabinets and group.cabinet != cabinets[number]:
            group.cabinet = cabinets[number]
            changed_groups.append(group)
    DragonflyGroup.objects.bulk_update(changed_groups, ["cabinet"])
    report.add("groups", "changed", len(changed_groups))
    groups = {group.number: group for group in DragonflyGroup.objects.all()}

    # Switches ----------------------------------------------------------------------------------
    wanted_switches = {(s.group, s.index): s.xname for s in topology.switches}
    for node in topology.nodes:
        for nic in node.nics:
            wanted_switches.setdefault((nic.group, nic.switch), None)
    stored_switches = {(s.group.number, s.index): s for s in Switch.objects.select_related("group")}
    new_switches = [
        Switch(group=groups[g], index=i, xname=xname or "") for (g, i), xname in wanted_switches.items() if (g, i) not in stored_switches
    ]
    Switch.objects.bulk_create(new_switches)
    report.add("switches", "added", len(new_switches))
    renamed = []
    for key, switch in stored_switches.items():
        xname = wanted_switches.get(key)
        if xname and switch.xname != xname:
            switch.xname = xname
            renamed.append(switch)
    Switch.objects.bulk_update(renamed, ["xname"])
    report.add("switches", "changed", len(renamed))
    switch_ids = {(s.group.number, s.index): s.pk for s in Switch.objects.select_related("group")}

    # Nodes -------------------------------------------------------------------------------------
    stored_nodes = {node.hostname: node for node in Node.objects.all()}
    incoming = {node.hostname: node for node in topology.nodes}
    to_create, to_update = [], []
    for hostname, node in incoming.items():
        values = {
            "xname": node.xname or "",
            "group_id": groups[node.group].pk,
            "cabinet": node.cabinet or "",
            "gpus": node.gpus,
            "gpu_model": node.gpu_model,
        }
        stored = stored_nodes.get(hostname)
        if stored is None:
            to_create.append(Node(hostname=hostname, **values))
            continue
        if not prune:
            # A discovery record says what the node could see: a missing xname or GPU model
            # means "not known there", not "remove what an import said".
            values = {name: value for name, value in values.items() if value not in ("", None)}
        differences = [name for name, value in values.items() if getattr(stored, name) != value]
        if differences:
            for name in differences:
                setattr(stored, name, values[name])
            to_update.append(stored)
            report.add("nodes", "changed", 1, f"{hostname}: {', '.join(d.removesuffix('_id') for d in differences)} changed")
    Node.objects.bulk_create(to_create, batch_size=2000)
    Node.objects.bulk_update(to_update, ["xname", "group_id", "cabinet", "gpus", "gpu_model", "modified"], batch_size=2000)
    report.add("nodes", "added", len(to_create), f"{len(to_create)} nodes added, e.g. {to_create[0].hostname}" if to_create else None)
    if prune:
        gone = sorted(set(stored_nodes) - set(incoming))
        if gone:
            Node.objects.filter(hostname__in=gone).delete()
            report.add("nodes", "removed", len(gone), f"removed {', '.join(gone[:5])}{' ...' if len(gone) > 5 else ''}")
    node_ids = dict(Node.objects.filter(hostname__in=list(incoming)).values_list("hostname", "pk"))

    # NICs --------------------------------------------------------------------------------------
    stored_nics = {
        (hostname, index): (pk, name, mac, switch_id, port)
        for pk, hostname, index, name, mac, switch_id, port in Nic.objects.filter(node__hostname__in=list(incoming)).values_list(
            "pk", "node__hostname", "index", "name", "mac", "switch_id", "port"
        )
    }
    nic_create, nic_update = [], []
    incoming_nic_keys = set()
    for hostname, node in incoming.items():
        for nic in node.nics:
            key = (hostname, nic.index)
            incoming_nic_keys.add(key)
            values = (nic.name, nic.mac or "", switch_ids[(nic.group, nic.switch)], nic.port)
            stored = stored_nics.get(key)
            if stored is None:
                nic_create.append(Nic(node_id=node_ids[hostname], index=nic.index, name=values[0], mac=values[1], switch_id=values[2], port=values[3]))
            elif stored[1:] != values:
                if stored[3] != values[2]:
                    report.add("nics", "moved to another switch", 1, f"{hostname} {nic.name} moved to switch {nic.group}.{nic.switch}")
                else:
                    report.add("nics", "changed")
                nic_update.append(Nic(pk=stored[0], name=values[0], mac=values[1], switch_id=values[2], port=values[3]))
    Nic.objects.bulk_create(nic_create, batch_size=5000)
    Nic.objects.bulk_update(nic_update, ["name", "mac", "switch_id", "port"], batch_size=5000)
    report.add("nics", "added", len(nic_create))
    stale_nics = [stored[0] for key, stored in stored_nics.items() if key not in incoming_nic_keys]
    if stale_nics:
        Nic.objects.filter(pk__in=stale_nics).delete()
        report.add("nics", "removed", len(stale_nics))

    # Global links and pruning of the fabric -------------------------------------------------------
    if prune:
        wanted_links = {}
        for link in topology.global_links:
            a, b = switch_ids[(link.group_a, link.switch_a)], switch_ids[(link.group_b, link.switch_b)]
            key = (min(a, b), max(a, b))
            wanted_links[key] = wanted_links.get(key, 0) + link.links
        stored_links = {(l.switch_a_id, l.switch_b_id): l for l in GlobalLink.objects.all()}
        GlobalLink.objects.bulk_create(
            [GlobalLink(switch_a_id=a, switch_b_id=b, links=n) for (a, b), n in wanted_links.items() if (a, b) not in stored_links],
            batch_size=5000,
        )
        report.add("global links", "added", sum(1 for key in wanted_links if key not in stored_links))
        recabled = [l for key, l in stored_links.items() if key in wanted_links and l.links != wanted_links[key]]
        for link in recabled:
            link.links = wanted_links[(link.switch_a_id, link.switch_b_id)]
        GlobalLink.objects.bulk_update(recabled, ["links"])
        report.add("global links", "changed", len(recabled))
        removed = [l.pk for key, l in stored_links.items() if key not in wanted_links]
        GlobalLink.objects.filter(pk__in=removed).delete()
        report.add("global links", "removed", len(removed))
        unused = Switch.objects.exclude(pk__in=[switch_ids[key] for key in wanted_switches]).filter(nics__isnull=True)
        report.add("switches", "removed", unused.count())
        unused.delete()
        empty_groups = DragonflyGroup.objects.exclude(number__in=topology.groups).filter(nodes__isnull=True, switches__isnull=True)
        report.add("groups", "removed", empty_groups.count())
        empty_groups.delete()

    revision = None
    if report.changed:
        revision = TopologyRevision.objects.create(
            source=source[:200], name=topology.name if prune else "", parameters=topology.parameters if prune else {},
            summary=report.as_dict(),
        )
    return report, revision
