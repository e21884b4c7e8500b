"""The fleet's versions: the version map by partition and dragonfly group, the expected set of a partition (what the
prolog's pre-flight checks a node against), its minorities and the drift over time. Reads the version facts of
apps.telemetry (``selectors.versions_current``) and the topology's groups; the reasoning is
``apps.telemetry.versions`` (plain)."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from apps.telemetry import versions
from apps.telemetry.models import VersionFact
from apps.telemetry.selectors import partitions_of, versions_current
from apps.topology.models import Node

DRIFT_DAYS = 90


def fleet_versions(partition: str | None = None, *, now=None) -> dict:
    """{"partition", "nodes", "expected", "minorities", "by_partition", "by_group", "drift", "keys"} for the whole fleet
    or one partition's nodes."""
    now = now or timezone.now()
    where = partitions_of()
    rows = versions_current()
    values = versions.node_values(rows)
    if partition:
        values = {host: row for host, row in values.items() if where.get(host) == partition}
    groups = dict(Node.objects.filter(hostname__in=list(values)).values_list("hostname", "group__number"))
    by_group = versions.version_map(values, {host: str(number) for host, number in groups.items()})
    by_partition = versions.version_map(values, where)
    since = now - timedelta(days=DRIFT_DAYS)
    facts = VersionFact.objects.filter(last_seen__gte=since - timedelta(days=DRIFT_DAYS))  # a change and what it replaced
    if partition:
        facts = facts.filter(host__in=list(values))
    drift = versions.drift(list(facts.values("host", "gpu", "key", "value", "first_seen")), since=since)
    return {"partition": partition or None, "nodes": len(values),
            "expected": versions.expected_set(values) if partition else {},
            "minorities": [m.as_dict() for m in versions.consistency(values)] if partition else [],
            "by_partition": by_partition, "by_group": by_group, "drift": drift,
            "keys": {key: versions.KEYS[key].label for key in versions.COMPARED}}
