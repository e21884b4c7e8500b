"""Read access to the stored topology, as plain data for the computing modules.

Every process keeps the last topology it loaded and the matching :class:`TopologyIndex`; one
cheap query for the latest revision tells whether they are still current.
"""
import threading

from django.db.models import QuerySet

from .model import GlobalLink as GlobalLinkRecord
from .model import Nic as NicRecord
from .model import Node as NodeRecord
from .model import Switch as SwitchRecord
from .model import Topology
from .models import GlobalLink, Nic, Node, Switch, TopologyRevision
from .placement import TopologyIndex

_lock = threading.Lock()
_cache: dict = {"revision": object(), "topology": None, "index": None}


def topology_revision_latest() -> TopologyRevision | None:
    return TopologyRevision.objects.order_by("-id").first()


def _load() -> Topology:
    nics_by_host: dict[str, list[NicRecord]] = {}
    for hostname, index, name, mac, group, switch, port in Nic.objects.values_list(
        "node__hostname", "index", "name", "mac", "switch__group__number", "switch__index", "port"
    ).order_by("node__hostname", "index"):
        nics_by_host.setdefault(hostname, []).append(NicRecord(name, index, group, switch, port, mac or None))
    nodes = [
        NodeRecord(hostname, group, tuple(nics_by_host.get(hostname, ())), xname or None, cabinet or None, gpus, gpu_model)
        for hostname, group, xname, cabinet, gpus, gpu_model in Node.objects.values_list(
            "hostname", "group__number", "xname", "cabinet", "gpus", "gpu_model"
        ).order_by("group__number", "xname", "hostname")
    ]
    switches = [SwitchRecord(g, i, x or None) for g, i, x in Switch.objects.values_list("group__number", "index", "xname").order_by("group__number", "index")]
    links = [
        GlobalLinkRecord(ga, sa, gb, sb, n)
        for ga, sa, gb, sb, n in GlobalLink.objects.values_list(
            "switch_a__group__number", "switch_a__index", "switch_b__group__number", "switch_b__index", "links"
        )
    ]
    named = TopologyRevision.objects.exclude(name="").order_by("-id").first()
    return Topology(named.name if named else "system", nodes, switches, links, named.parameters if named else {})


def _current() -> dict:
    # id and time together: an id alone can come back after a rolled-back transaction.
    revision = TopologyRevision.objects.order_by("-id").values_list("id", "created").first()
    with _lock:
        if _cache["revision"] != revision:
            topology = _load()
            _cache.update(revision=revision, topology=topology, index=TopologyIndex(topology))
        return dict(_cache)


def topology_current() -> Topology:
    """The stored topology as plain data (cached per process until the next revision)."""
    return _current()["topology"]


def topology_index_current() -> TopologyIndex:
    """The array index of the stored topology, for placement metrics (cached like the topology)."""
    return _current()["index"]


def node_states() -> dict[str, str]:
    return dict(Node.objects.values_list("hostname", "state"))


def node_list(group: int | None = None, switch: tuple[int, int] | None = None) -> QuerySet[Node]:
    """Nodes with their NICs, optionally only those in ``group`` or with a NIC on ``switch``."""
    queryset = Node.objects.select_related("group").prefetch_related("nics__switch__group").order_by("hostname")
    if group is not None:
        queryset = queryset.filter(group__number=group)
    if switch is not None:
        queryset = queryset.filter(nics__switch__group__number=switch[0], nics__switch__index=switch[1]).distinct()
    return queryset


def node_get(hostname: str) -> Node | None:
    return node_list().filter(hostname=hostname).first()
