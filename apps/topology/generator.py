"""Synthetic HPE Cray EX dragonfly systems, and the preset for the reference machine.

Pure: must not import django.

The generator lays systems out the way Cray EX liquid-cooled cabinets are built: one dragonfly
group per cabinet; each chassis holds compute blades (two nodes each, on boards b0/b1) in front
and switch blades behind; NIC h of every node in a chassis plugs into switch blade h of that
chassis, so the NICs of one node land on different switches. Global (L2) links join every pair
of groups with ``global_links_per_group_pair`` cables, spread round-robin over the switches of
each group. Every NIC gets the algorithmic MAC its (group, switch, port) implies, so a generated
system and a discovered one go through the same decoding.
"""
from dataclasses import asdict, dataclass, field
from itertools import combinations

from apps.core.perf import gc_paused

from .addresses import EDGE_PORTS, NodeXname, SwitchXname, encode_ama
from .model import GlobalLink, Nic, Node, Switch, Topology


@dataclass(frozen=True)
class DragonflyParameters:
    """Shape of a synthetic system. ``assumptions`` names the values no public source confirms."""

    name: str = "synthetic"
    groups: int = 4
    chassis_per_cabinet: int = 8
    switch_blades_per_chassis: int = 4
    blades_per_chassis: int = 7
    nodes_per_blade: int = 2
    nics_per_node: int = 4
    gpus_per_node: int = 4
    gpu_model: str = "GH200"
    edge_ports_per_switch: int = 16
    global_ports_per_switch: int = 17
    global_links_per_group_pair: int = 4
    first_cabinet: int = 1000
    cabinets_per_row: int = 6
    first_nid: int = 1
    assumptions: dict[str, str] = field(default_factory=dict)

    @property
    def switches_per_group(self) -> int:
        return self.chassis_per_cabinet * self.switch_blades_per_chassis

    @property
    def nodes_per_group(self) -> int:
        return self.chassis_per_cabinet * self.blades_per_chassis * self.nodes_per_blade

    def problems(self) -> list[str]:
        """Why these parameters cannot describe a buildable system (empty when they can)."""
        found = []
        for name in ("groups", "chassis_per_cabinet", "switch_blades_per_chassis", "blades_per_chassis",
                     "nodes_per_blade", "nics_per_node", "global_links_per_group_pair"):
            if getattr(self, name) < 1:
                found.append(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.groups > 512:
            found.append(f"groups: at most 512 fit the 9-bit group id of a Slingshot address, got {self.groups}")
        if self.switches_per_group > 32:
            found.append(f"switches per group (chassis x switch blades = {self.switches_per_group}) exceeds the 5-bit switch id (32)")
        if self.nics_per_node > self.switch_blades_per_chassis:
            found.append(
                f"nics_per_node ({self.nics_per_node}) exceeds switch_blades_per_chassis ({self.switch_blades_per_chassis}): "
                "each NIC of a node needs its own switch in the chassis"
            )
        nodes_per_chassis = self.blades_per_chassis * self.nodes_per_blade
        if nodes_per_chassis > min(self.edge_ports_per_switch, len(EDGE_PORTS)):
            found.append(f"{nodes_per_chassis} nodes per chassis need more than the {self.edge_ports_per_switch} edge ports of a switch")
        if self.nodes_per_blade > 2:
            found.append("nodes_per_blade: Cray EX blades carry at most two node boards (b0, b1)")
        global_ports = self.switches_per_group * self.global_ports_per_switch
        needed = (self.groups - 1) * self.global_links_per_group_pair
        if needed > global_ports:
            found.append(
                f"{self.groups - 1} other groups x {self.global_links_per_group_pair} links = {needed} global ports per group, "
                f"but a group has only {global_ports}"
            )
        return found

    def as_dict(self) -> dict:
        return asdict(self)


ALPS_GH200_ASSUMPTIONS = {
    "groups": "one dragonfly group per GH200 cabinet (Frontier / LUMI-G pattern); Alps' group count is not published",
    "switch_blades_per_chassis": "4 switch blades per chassis = 32 switches per group (Perlmutter / Frontier pattern)",
    "nic_cabling": "NIC h of a node plugs into switch blade h of its chassis (14 NICs per switch); Alps' cabling is not published",
    "global_links_per_group_pair": "4 L2 links per group pair, as on Frontier; unknown on Alps",
    "hostnames": "nid numbers run sequentially by cabinet, chassis, slot and board from nid000001; the real nid-to-xname table is site configuration",
    "cabinet_numbers": "cabinets x1000-x1005, x1100-x1105, x1200-x1205, x1300-x1305 (4 rows x 6, matching the example xname x1100c0s6b0n0)",
    "slots": "the 7 populated blade slots of a chassis are s0-s6",
    "group_ids": "group ids 0-23 in cabinet order; the fabric manager's ids may differ",
    "switch_xnames": "switch blade h of chassis c is xXcCrH",
}

#: The reference system: 24 GH200 cabinets, 8 chassis x 7 blades x 2 nodes, 4 GPUs and 4 NICs per
#: node (published by CSCS); everything in ``assumptions`` is our guess where nothing is published.
ALPS_GH200 = DragonflyParameters(
    name="alps",
    groups=24,
    chassis_per_cabinet=8,
    switch_blades_per_chassis=4,
    blades_per_chassis=7,
    nodes_per_blade=2,
    nics_per_node=4,
    gpus_per_node=4,
    gpu_model="GH200",
    global_links_per_group_pair=4,
    first_cabinet=1000,
    cabinets_per_row=6,
    first_nid=1,
    assumptions=ALPS_GH200_ASSUMPTIONS,
)

PRESETS = {"alps": ALPS_GH200}


class ParameterError(ValueError):
    """The parameters describe no buildable system; the message lists every problem."""


def cabinet_number(parameters: DragonflyParameters, group: int) -> int:
    row, column = divmod(group, parameters.cabinets_per_row)
    return parameters.first_cabinet + 100 * row + column


def generate(parameters: DragonflyParameters) -> Topology:
    """Build the system ``parameters`` describe. Same parameters, same system: no randomness."""
    problems = parameters.problems()
    if problems:
        raise ParameterError("; ".join(problems))
    with gc_paused():
        return _generate(parameters)


def _generate(parameters: DragonflyParameters) -> Topology:
    nodes: list[Node] = []
    switches: list[Switch] = []
    nid = parameters.first_nid
    nodes_per_chassis = parameters.blades_per_chassis * parameters.nodes_per_blade
    for group in range(parameters.groups):
        cabinet = cabinet_number(parameters, group)
        cabinet_xname = f"x{cabinet}"
        for chassis in range(parameters.chassis_per_cabinet):
            for blade in range(parameters.switch_blades_per_chassis):
                switch_index = chassis * parameters.switch_blades_per_chassis + blade
                switches.append(Switch(group, switch_index, str(SwitchXname(cabinet, chassis, blade))))
            for position in range(nodes_per_chassis):
                slot, board = divmod(position, parameters.nodes_per_blade)
                xname = NodeXname(cabinet, chassis, slot, board, 0)
                port = EDGE_PORTS[position]
                nics = tuple(
                    Nic(
                        name=f"hsn{index}",
                        index=index,
                        group=group,
                        switch=chassis * parameters.switch_blades_per_chassis + index,
                        port=port,
                        mac=encode_ama(group, chassis * parameters.switch_blades_per_chassis + index, port),
                    )
                    for index in range(parameters.nics_per_node)
                )
                nodes.append(
                    Node(
                        hostname=f"nid{nid:06d}",
                        group=group,
                        nics=nics,
                        xname=str(xname),
                        cabinet=cabinet_xname,
                        gpus=parameters.gpus_per_node,
                        gpu_model=parameters.gpu_model,
                    )
                )
                nid += 1
    return Topology(
        name=parameters.name,
        nodes=nodes,
        switches=switches,
        global_links=global_links(parameters.groups, parameters.switches_per_group, parameters.global_links_per_group_pair),
        parameters=parameters.as_dict(),
    )


def global_links(groups: int, switches_per_group: int, links_per_pair: int) -> list[GlobalLink]:
    """L2 cabling: each group pair gets ``links_per_pair`` links; each group hands out its
    switches round-robin so global ports wear evenly across the group."""
    next_switch = [0] * groups
    links: list[GlobalLink] = []
    for group_a, group_b in combinations(range(groups), 2):
        for _ in range(links_per_pair):
            switch_a = next_switch[group_a] % switches_per_group
            switch_b = next_switch[group_b] % switches_per_group
            next_switch[group_a] += 1
            next_switch[group_b] += 1
            links.append(GlobalLink(group_a, switch_a, group_b, switch_b, 1))
    return links
