"""Slurm hostlists expanded as Slurm's hostlist.c does (issue 34, acceptance 2).

The cases are Slurm's own: its test suite (SchedMD/slurm at 284c3b95f08a2dc2478499837b03355e1b9c5c75,
testsuite/expect/test2.20, testsuite/slurm_unit/common/hostlist/hostlist_nth-test.c and
hostlist_iterator-test.c) and its documentation (doc/man/man1/scontrol.1, doc/man/man5/slurm.conf.5).
Where a test only counts hosts, the order asserted here is the one src/common/hostlist.c produces
(``_push_range_list`` expands the brackets before the last one from the right).
"""
import re

import pytest

from apps.core.hostlists import HostlistError, expand, tokens


@pytest.mark.parametrize("expression, hosts", [
    # testsuite/expect/test2.20: single, double and triple bracket host names, in scontrol's order.
    ("rack[0-3]", ["rack0", "rack1", "rack2", "rack3"]),
    ("rack[0-1]_blade[2,3]", ["rack0_blade2", "rack0_blade3", "rack1_blade2", "rack1_blade3"]),
    ("row[0,1]_rack[2-3]_blade[4,5]", [
        "row0_rack2_blade4", "row0_rack2_blade5", "row1_rack2_blade4", "row1_rack2_blade5",
        "row0_rack3_blade4", "row0_rack3_blade5", "row1_rack3_blade4", "row1_rack3_blade5"]),
    # testsuite/slurm_unit/common/hostlist/hostlist_nth-test.c
    ("host1,host2", ["host1", "host2"]),
    ("host[1-3],host5", ["host1", "host2", "host3", "host5"]),
    ("two[1-2]", ["two1", "two2"]),
    # hostlist_iterator-test.c: the ranged strings it expects after removing hosts
    ("b[1-3],c1,d[1-5],e1", ["b1", "b2", "b3", "c1", "d1", "d2", "d3", "d4", "d5", "e1"]),
    ("b[1-3],d[1,3-4]", ["b1", "b2", "b3", "d1", "d3", "d4"]),
    # scontrol(1): "tux[1-3]" is mapped to tux1, tux2 and tux3; hostlist keeps order and duplicates
    # ("tux2,tux1,tux2 = tux[2,1-2]", and sorted "tux[1-2,2]").
    ("tux[1-3]", ["tux1", "tux2", "tux3"]),
    ("tux[2,1-2]", ["tux2", "tux1", "tux2"]),
    ("tux[1-2,2]", ["tux1", "tux2", "tux2"]),
    ("tux2,tux1,tux2", ["tux2", "tux1", "tux2"]),
    # slurm.conf(5): comma separated names, lists and ranges, fixed width with leading zeros.
    ("alpha,beta,gamma", ["alpha", "beta", "gamma"]),
    ("lx[15,18,32-33]", ["lx15", "lx18", "lx32", "lx33"]),
    ("dev[0-8,18-25]", [f"dev{n}" for n in (*range(0, 9), *range(18, 26))]),
    ("lx[0-7]", [f"lx{n}" for n in range(8)]),
])
def test_slurms_own_cases(expression, hosts):
    assert expand(expression) == hosts


def test_slurm_conf_examples_sizes_and_widths():
    assert len(expand("linux[0-64,128]")) == 66 and expand("linux[0-64,128]")[-2:] == ["linux64", "linux128"]
    blades = expand("rack[0-63]_blade[0-41]")
    assert len(blades) == 64 * 42 and blades[:2] == ["rack0_blade0", "rack0_blade1"] and blades[-1] == "rack63_blade41"
    fixed = expand("linux[0000-1023]")
    assert (len(fixed), fixed[0], fixed[9], fixed[-1]) == (1024, "linux0000", "linux0009", "linux1023")
    # The width is that of the range's start as written: [8-10] is not padded, [08-10] is.
    assert expand("n[8-10]") == ["n8", "n9", "n10"] and expand("n[08-10]") == ["n08", "n09", "n10"]


@pytest.mark.parametrize("expression, hosts", [
    # The finding: a space separated two hosts, and python-hostlist made one host of "nid001234 nid001300".
    ("nid[001234-001235] nid001300", ["nid001234", "nid001235", "nid001300"]),
    ("nid001234\tnid001235\nnid001300", ["nid001234", "nid001235", "nid001300"]),
    ("  ,nid[000001-000002],, \n nid000010 ,", ["nid000001", "nid000002", "nid000010"]),
    # Separators inside brackets do not split the token; a comma there separates numbers.
    ("x[1-2,4] y[5]", ["x1", "x2", "x4", "y5"]),
    # Duplicates stay, in the order written (Slurm never sorts or uniques on create).
    ("nid000002,nid[000001-000002],nid000002", ["nid000002", "nid000001", "nid000002", "nid000002"]),
    # Text after the last bracket is a suffix; four brackets run B3, B2, B1 outermost, B4 innermost.
    ("a[1-2]b", ["a1b", "a2b"]),
    ("x[1-2]y[3-4]z[5-6]w[7]", ["x1y3z5w7", "x2y3z5w7", "x1y4z5w7", "x2y4z5w7",
                                "x1y3z6w7", "x2y3z6w7", "x1y4z6w7", "x2y4z6w7"]),
    ("", []),
    (" \t\n", []),
])
def test_whitespace_duplicates_suffixes_and_products(expression, hosts):
    assert expand(expression) == hosts


def test_tokens_split_outside_brackets_only():
    assert tokens("a[1, 2] b,c[3-4]") == ["a[1, 2]", "b", "c[3-4]"]


@pytest.mark.parametrize("expression, message", [
    ("nid[0001-", "'[' without ']'"),
    ("n[3-1]", "the end is below the start"),
    ("n[]", "invalid range ''"),
    ("n[1-2,x]", "invalid range 'x'"),
    ("n[1--2]", "negative numbers are not allowed"),
    ("n[0-65536]", "too many hosts in range"),
])
def test_what_slurm_refuses_is_refused_with_the_reason(expression, message):
    with pytest.raises(HostlistError, match=re.escape(message)):
        expand(expression)


def test_every_reader_of_a_node_list_uses_slurms_grammar():
    """The Slurm JSON importer keeps Slurm's order and duplicates; topology's node sets read whitespace
    as Slurm does and keep each node once."""
    from apps.jobs.slurm_json import expand_nodes
    from apps.topology.views import parse_node_set

    assert expand_nodes("nid[001234-001235] nid001300") == ("nid001234", "nid001235", "nid001300")
    assert parse_node_set("nid[001234-001235] nid001300\tnid001234") == (["nid001234", "nid001235", "nid001300"], None)
    names, problem = parse_node_set("nid[0001-")
    assert names == [] and "is not a hostlist expression" in problem
