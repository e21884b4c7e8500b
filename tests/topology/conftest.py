import pytest

from apps.topology.generator import ALPS_GH200, DragonflyParameters, generate

# A system small enough to check by hand: 3 groups; per group 2 chassis x 2 switch blades = 4
# switches and 2 chassis x 2 blades x 2 nodes = 8 nodes; 2 NICs per node (NIC h of a node in
# chassis c on switch 2c+h, so 4 NICs per switch); one L2 link per group pair, handed out
# round-robin: 0.0-1.0, 0.1-2.0, 1.1-2.1. Hostnames nid000001-08 (group 0; chassis 0 holds
# 01-04), nid000009-16 (group 1), nid000017-24 (group 2).
SMALL = DragonflyParameters(
    name="small", groups=3, chassis_per_cabinet=2, switch_blades_per_chassis=2, blades_per_chassis=2,
    nodes_per_blade=2, nics_per_node=2, gpus_per_node=2, global_links_per_group_pair=1,
)


@pytest.fixture(scope="session")
def small_topology():
    return generate(SMALL)


@pytest.fixture(scope="session")
def alps_topology():
    return generate(ALPS_GH200)
