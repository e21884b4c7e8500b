"""The topology of a Slingshot dragonfly system as plain data.

Pure: must not import django.

System → group (usually one cabinet) → switch → edge port → NIC; a node holds NICs and GPUs, and
each NIC may sit on a different switch, so ranks are mapped rank → NIC → switch, never
node → switch. Group, switch and port of a NIC come from its algorithmic MAC when it has one.

Every consumer (database import, generator, placement metrics, graph, figures) exchanges these
records, so the same code serves a real system discovered from its NICs and a synthetic one.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Nic:
    """One NIC of a node: its Linux name (hsn0…), MAC, and where it plugs into the fabric."""

    name: str
    index: int
    group: int
    switch: int
    port: int
    mac: str | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """A compute node: hostname, xname when known, the group it sits in, its NICs and GPUs."""

    hostname: str
    group: int
    nics: tuple[Nic, ...]
    xname: str | None = None
    cabinet: str | None = None
    gpus: int = 0
    gpu_model: str = ""


@dataclass(frozen=True, slots=True)
class Switch:
    """A Rosetta switch, identified by (group, index within the group)."""

    group: int
    index: int
    xname: str | None = None


@dataclass(frozen=True, slots=True)
class GlobalLink:
    """``links`` parallel L2 cables between switch (group_a, switch_a) and (group_b, switch_b)."""

    group_a: int
    switch_a: int
    group_b: int
    switch_b: int
    links: int = 1


@dataclass
class Topology:
    """A whole system. ``parameters`` records how it was made (generator settings, assumptions)."""

    name: str
    nodes: list[Node]
    switches: list[Switch]
    global_links: list[GlobalLink]
    parameters: dict = field(default_factory=dict)

    @property
    def groups(self) -> list[int]:
        return sorted({switch.group for switch in self.switches} | {node.group for node in self.nodes})

    def counts(self) -> dict[str, int]:
        """The summary counts shown on the topology page and by the summary API."""
        return {
            "groups": len(self.groups),
            "switches": len(self.switches),
            "nodes": len(self.nodes),
            "nics": sum(len(node.nics) for node in self.nodes),
            "gpus": sum(node.gpus for node in self.nodes),
        }
