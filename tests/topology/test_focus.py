"""The topology page with a job's nodes highlighted and some of them in focus (a straggler), and the link other
apps build to it (issue 17: "a straggler's 'on the network' link opens the whole system with one red dot and
loses the job")."""
import json
import re
from html import unescape

import pytest

from apps.topology.generator import generate
from apps.topology.links import job_focus_url
from apps.topology.services import topology_apply
from apps.topology.views import parse_node_set

from .conftest import SMALL

JOB_NODES = [f"nid{n:06d}" for n in range(3, 15)]  # 12 nodes over groups 0 and 1
STRAGGLER = "nid000009"


@pytest.fixture
def viewer(client, make_user, db):
    topology_apply(generate(SMALL), source="test", prune=True)
    client.force_login(make_user("alice"))
    return client


def figure_of(page: str) -> dict:
    data = re.search(r'<script id="topology-figure-data" type="application/json">(.*?)</script>', page, re.S).group(1)
    return json.loads(data)


def hosts_in(figure: dict, name_start: str) -> list[str]:
    [trace] = [trace for trace in figure["data"] if trace["name"].startswith(name_start)]
    return sorted(item[0] for item in trace["customdata"])


def alert_of(page: str) -> str:
    return unescape(re.search(r'<p class="form-errors" role="alert">(.*?)</p>', page, re.S).group(1))


def test_the_link_keeps_the_job_overlay_and_singles_out_the_straggler(viewer):
    url = job_focus_url(JOB_NODES, [STRAGGLER], "alps/4242", label="straggler")
    assert url == "/topology/?nodes=nid%5B000003-000014%5D&focus=nid000009&job=alps%2F4242&label=straggler"
    response = viewer.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    figure = figure_of(page)
    names = [trace["name"] for trace in figure["data"]]
    assert "this job's nodes (12)" in names and "straggler (1)" in names and "other nodes (12)" in names
    assert hosts_in(figure, "this job's nodes") == JOB_NODES
    assert hosts_in(figure, "straggler") == [STRAGGLER]
    star = next(trace for trace in figure["data"] if trace["name"] == "straggler (1)")
    highlighted = next(trace for trace in figure["data"] if trace["name"] == "this job's nodes (12)")
    assert star["marker"]["symbol"] == "star" and star["marker"]["color"] != highlighted["marker"]["color"]
    assert star["marker"]["size"] > highlighted["marker"]["size"]
    line = unescape(re.search(r'<p id="focus-line"[^>]*>(.*?)</p>', page, re.S).group(1))
    text = " ".join(re.sub(r"<[^>]+>", " ", line).split())
    assert text.startswith("In focus (straggler): nid000009 (group 1, switch 1.")
    assert "among the 12 nodes of job alps/4242" in text and "Back to job alps/4242" in text
    assert 'href="/jobs/alps/4242/" id="focus-back"' in line
    assert "Placement of this job's nodes" in page and 'role="alert"' not in page
    # the form keeps the focus and the job when the colouring changes
    assert '<input type="hidden" name="focus" value="nid000009">' in page and 'name="job" value="alps/4242"' in page


def test_focus_alone_highlights_and_marks_those_nodes(viewer):
    page = viewer.get("/topology/?focus=nid000002,nid000020").content.decode()
    figure = figure_of(page)
    assert hosts_in(figure, "selected nodes") == ["nid000002", "nid000020"]
    assert hosts_in(figure, "focused") == ["nid000002", "nid000020"]
    assert "Back to job" not in page


@pytest.mark.parametrize("query, message", [
    ("nodes=nid[000003-000014]&focus=nid999999", "focus: nid999999 is not a node of this system"),
    ("nodes=nid[000003-000014]&focus=nid[0001-", "focus: 'nid[0001-' is not a hostlist expression"),
    ("nodes=nid[000003-000014]&focus=nid000009&job=alps", "job: Give the job as <cluster>/<job_id>, e.g. alps/1234"),
    ("nodes=nid[000003-000014]&focus=nid000009&job=al%20ps/12", "job: 'al ps' is not a cluster name"),
    ("nodes=nid[000003-000014]&focus=nid000009&job=alps/99999999999999999999", "job: The job id must be between 1 and"),
    ("nodes=nid[000003-000014]&focus=nid000009&label=%3Cb%3Eevil", "label: say focused, straggler, failed vetting; not '<b>evil'"),
    ("nodes=nid[000003-000014]&focus=" + ",".join(f"nid{n:06d}" for n in range(1, 70)), "focus: at most 64 nodes, got 69"),
])
def test_bad_parameters_are_named_and_the_rest_still_shows(viewer, query, message):
    response = viewer.get(f"/topology/?{query}")
    assert response.status_code == 200
    page = response.content.decode()
    assert message in alert_of(page)
    figure = figure_of(page)
    assert hosts_in(figure, "selected nodes") == JOB_NODES  # the valid parameters still apply
    assert "<b>evil" not in page


def test_unknown_job_nodes_are_named_and_the_focus_still_shows(viewer):
    page = viewer.get("/topology/?nodes=nid000003,nid424242&focus=nid000009&job=alps/7").content.decode()
    assert "nodes: 1 node(s) not in the topology: nid424242" in alert_of(page)
    figure = figure_of(page)
    assert hosts_in(figure, "focused") == [STRAGGLER] and hosts_in(figure, "selected nodes") == [STRAGGLER]


def test_job_focus_url_compresses_names_and_keeps_a_hostlist_as_given():
    url = job_focus_url(["nid000012", "nid000010", "nid000011", "nid000010"], "nid000011")
    assert url == "/topology/?nodes=nid%5B000010-000012%5D&focus=nid000011"
    assert job_focus_url("nid[000001-000004]", ["nid000002", "nid000004"], "alps/1", base="/portal/topology/") == (
        "/portal/topology/?nodes=nid%5B000001-000004%5D&focus=nid%5B000002%2C000004%5D&job=alps%2F1")
    names, problem = parse_node_set("nid[000002,000004]")
    assert problem is None and names == ["nid000002", "nid000004"]
    with pytest.raises(ValueError, match="label 'slow' is not one of focused, straggler, failed vetting"):
        job_focus_url(JOB_NODES, [STRAGGLER], label="slow")
