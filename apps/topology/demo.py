"""Demo part: the reference system (24 GH200 cabinets, 2,688 nodes) from the generator preset.

A topology imported from a real system is never touched: the part then builds nothing.
"""
from apps.core.demo import DemoContext, demo_part

from .generator import ALPS_GH200, generate
from .models import DragonflyGroup, GlobalLink, Nic, Node, NodeStateChoices, Switch, TopologyRevision
from .services import topology_apply

DEMO_SOURCE = "demo: preset alps"


def _only_demo_data() -> bool:
    return not TopologyRevision.objects.exclude(source=DEMO_SOURCE).exists()


def reset() -> None:
    if not _only_demo_data():
        return
    GlobalLink.objects.all().delete()
    Nic.objects.all().delete()
    Node.objects.all().delete()
    Switch.objects.all().delete()
    DragonflyGroup.objects.all().delete()
    TopologyRevision.objects.all().delete()


@demo_part("topology", order=20, reset=reset)
def build(context: DemoContext) -> dict:
    if not _only_demo_data():
        context.say("  topology     kept: a non-demo topology is loaded")
        return {}
    topology = generate(ALPS_GH200)
    topology_apply(topology, source=DEMO_SOURCE, prune=True)
    # A machine in service: most nodes idle, a few drained for repair, fewer down. (The jobs part
    # marks the nodes of running jobs as allocated.)
    hostnames = [node.hostname for node in topology.nodes]
    drained = context.rng.sample(hostnames, k=len(hostnames) * 3 // 100)
    down = context.rng.sample(sorted(set(hostnames) - set(drained)), k=len(hostnames) // 100)
    Node.objects.update(state=NodeStateChoices.STATE_IDLE)
    Node.objects.filter(hostname__in=drained).update(state=NodeStateChoices.STATE_DRAIN)
    Node.objects.filter(hostname__in=down).update(state=NodeStateChoices.STATE_DOWN)
    context.shared["hostnames"] = hostnames
    return {**topology.counts(), "drained": len(drained), "down": len(down)}
