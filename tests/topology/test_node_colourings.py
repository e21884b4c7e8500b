"""The topology page colours nodes by what higher apps register (apps.core.node_colourings), without importing them:
the registered colourings are offered in order between "node state" and "group", and one chosen colours the nodes
by its labels for the user looking."""
import json
import re

import pytest

from apps.core.node_colourings import NodeColouring, NodeLabels, register_node_colouring, unregister_node_colouring
from apps.topology.generator import generate
from apps.topology.services import topology_apply

from .conftest import SMALL


@pytest.fixture
def viewer(client, make_user, db):
    topology_apply(generate(SMALL), source="test", prune=True)
    client.force_login(make_user("alice"))
    return client


@pytest.fixture
def parity():
    """A colouring of the test's own: even nodes "even" (red), nid000001 "one", the rest unlabelled; the user's name
    goes into a label, so the page must pass the user looking."""
    seen = []

    def labels(user):
        seen.append(user.get_username())
        hosts = {f"nid{n:06d}": "even" for n in range(2, 25, 2)}
        return NodeLabels(labels={**hosts, "nid000001": f"one for {user.get_username()}"}, unlabelled="odd",
                          colours={"even": "#ff0000"}, muted=("never",))

    register_node_colouring(NodeColouring(key="parity", title="parity", order=15, labels=labels))
    yield seen
    unregister_node_colouring("parity")


def select_options(page: str) -> list[str]:
    select = re.search(r'<select id="colour-by" name="color">(.*?)</select>', page, re.S).group(1)
    return re.findall(r'<option value="([^"]*)"', select)


def test_registered_colourings_are_offered_between_node_state_and_group(viewer, parity):
    options = select_options(viewer.get("/topology/").content.decode())
    # jobs (10) and vetting (20) register theirs from AppConfig.ready(); the test's comes between them.
    assert [option for option in options if option] == ["state", "job", "parity", "vetting", "network", "group", "overlay"]


def test_a_registered_colouring_colours_the_nodes_by_its_labels_for_the_user_looking(viewer, parity):
    page = viewer.get("/topology/?color=parity").content.decode()
    data = json.loads(re.search(r'<script id="topology-figure-data" type="application/json">(.*?)</script>', page, re.S).group(1))
    traces = {re.sub(r" \(\d+\)$", "", trace["name"]): trace for trace in data["data"]}  # "even (12)"
    assert parity == ["alice"]
    assert "one for alice" in traces and "even" in traces and "odd" in traces
    assert sorted(item[0] for item in traces["even"]["customdata"]) == [f"nid{n:06d}" for n in range(2, 25, 2)]
    assert traces["even"]["marker"]["color"] == "#ff0000"


def test_an_unknown_colouring_falls_back_to_node_state(viewer):
    page = viewer.get("/topology/?color=parity").content.decode()
    assert '<option value="parity"' not in page
    assert "parity" not in select_options(page)
