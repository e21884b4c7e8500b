"""Topology JSON and discovery CSV: round trips, and every problem reported with its line."""
import pytest

from apps.topology.formats import (
    TopologyFormatError,
    nodes_from_discovery,
    parse_discovery_csv,
    parse_topology_json,
    topology_to_json,
)


def test_json_round_trip_keeps_the_whole_system(small_topology):
    parsed = parse_topology_json(topology_to_json(small_topology))
    assert parsed.nodes == small_topology.nodes
    assert parsed.switches == small_topology.switches
    assert parsed.global_links == small_topology.global_links
    assert parsed.name == "small"


def test_bad_json_file_reports_every_bad_line(small_topology):
    lines = topology_to_json(small_topology).splitlines()
    node_lines = [number for number, text in enumerate(lines, start=1) if '"hostname"' in text]
    bad = list(lines)
    bad[node_lines[0] - 1] = bad[node_lines[0] - 1].replace("02:00:00:00:00:00", "02:00:00:zz:00:00")
    bad[node_lines[3] - 1] = bad[node_lines[3] - 1].replace('"x1000c0s1b1n0"', '"x1000c9s1b1n0"')
    bad[node_lines[5] - 1] = bad[node_lines[5] - 1].replace('"gpus": 2', '"gpus": "two"')
    with pytest.raises(TopologyFormatError) as error:
        parse_topology_json("\n".join(bad))
    found = {(problem.line, problem.field) for problem in error.value.problems}
    assert found == {
        (node_lines[0], "nodes.0.nics.0.mac"),
        (node_lines[3], "nodes.3.xname"),
        (node_lines[5], "nodes.5.gpus"),
    }
    messages = " | ".join(problem.message for problem in error.value.problems)
    assert "02:00:00:zz:00:00" in messages and "chassis 9" in messages and '"two"' in messages


def test_malformed_json_points_at_the_line():
    with pytest.raises(TopologyFormatError) as error:
        parse_topology_json('{"format": "belvedere-topology/1",\n "nodes": [\n  {"hostname": "a",}\n ]\n}')
    [problem] = error.value.problems
    assert problem.line == 3 and "not valid JSON" in problem.message


def test_wrong_format_tag_and_duplicates_are_reported():
    text = (
        '{"format": "other/2", "nodes": [\n'
        ' {"hostname": "n1", "nics": [{"name": "hsn0", "mac": "02:00:00:00:00:00"}]},\n'
        ' {"hostname": "n1", "nics": [{"name": "hsn0", "mac": "02:00:00:00:00:40"}]}\n'
        "]}"
    )
    with pytest.raises(TopologyFormatError) as error:
        parse_topology_json(text)
    messages = [str(problem) for problem in error.value.problems]
    assert any("format" in message and "belvedere-topology/1" in message for message in messages)
    assert any(message.startswith("line 3 nodes.1.hostname: n1 appears twice (first on line 2)") for message in messages)


def test_nics_in_different_groups_are_refused():
    text = '{"format": "belvedere-topology/1", "nodes": [{"hostname": "n1", "nics": [' \
           '{"name": "hsn0", "mac": "02:00:00:00:00:00"}, {"name": "hsn1", "mac": "02:00:00:00:08:00"}]}]}'
    with pytest.raises(TopologyFormatError, match="problem") as error:
        parse_topology_json(text)
    assert "different groups [0, 1]" in error.value.problems[0].message


def test_discovery_csv_groups_rows_by_host_and_decodes_macs():
    text = "hostname,xname,nic,mac\n" \
           "nid000001,x1000c0s0b0n0,hsn0,02:00:00:00:00:00\n" \
           "nid000001,x1000c0s0b0n0,hsn1,02:00:00:00:00:40\n" \
           "nid000002,,hsn0,02-00-00-00-00-01\n"
    nodes = nodes_from_discovery(parse_discovery_csv(text))
    assert [(n.hostname, n.xname, n.group, [(c.switch, c.port) for c in n.nics]) for n in nodes] == [
        ("nid000001", "x1000c0s0b0n0", 0, [(0, 0), (1, 0)]),
        ("nid000002", None, 0, [(0, 1)]),
    ]


def test_discovery_csv_reports_every_bad_row():
    text = "hostname,xname,nic,mac\n" \
           "nid000001,x1000c0s0b0n0,hsn0,02:00:00:00:00:00\n" \
           "nid000002,x1000c0s0b1n0,hsn0\n" \
           "nid000003,x1000c0s1b0n0,eth0,02:00:00:00:00:02\n" \
           "nid000004,x1000c0s1b1n0,hsn0,aa:bb:cc:dd:ee:ff\n"
    with pytest.raises(TopologyFormatError) as error:
        nodes_from_discovery(parse_discovery_csv(text))
    assert [problem.line for problem in error.value.problems] == [3]  # column count first
    fixed = text.replace("nid000002,x1000c0s0b1n0,hsn0\n", "")
    with pytest.raises(TopologyFormatError) as error:
        nodes_from_discovery(parse_discovery_csv(fixed))
    problems = {(problem.line, problem.field) for problem in error.value.problems}
    assert problems == {(3, "nics.0.name"), (4, "nics.0.mac")}


def test_csv_without_required_columns_says_which():
    with pytest.raises(TopologyFormatError, match="problem") as error:
        parse_discovery_csv("host,mac\nn1,02:00:00:00:00:00\n")
    assert "hostname, nic" in error.value.problems[0].message
