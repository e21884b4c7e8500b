"""apps.topology.addresses: Slingshot algorithmic MACs, NIDs, edge ports and Cray xnames.

Pure module: no database, no settings.
"""
import re

import pytest

from apps.topology.addresses import (
    EDGE_PORTS,
    AddressError,
    AlgorithmicMac,
    GpuXname,
    NicXname,
    NodeXname,
    SwitchXname,
    decode_ama,
    decode_nid,
    edge_port_logical,
    edge_port_physical,
    encode_ama,
    parse_gpu_xname,
    parse_nic_xname,
    parse_node_xname,
    parse_switch_xname,
    parse_xname,
)


# --- algorithmic MACs ------------------------------------------------------------------------

# The two worked examples of the HPE Slingshot fabric-validation page (reference notes §1.5).
@pytest.mark.parametrize(
    ("mac", "nid", "group", "switch", "port"),
    [
        ("02:00:00:00:07:ea", 2026, 0, 31, 42),
        ("02:00:00:05:42:b1", 344753, 168, 10, 49),
    ],
)
def test_hpe_worked_examples(mac, nid, group, switch, port):
    decoded = decode_ama(mac)
    assert decoded == AlgorithmicMac(nid=nid, group=group, switch=switch, port=port)
    assert decoded.mac == mac
    assert encode_ama(group, switch, port) == mac
    assert decode_nid(nid) == decoded


@pytest.mark.parametrize(
    "spelling",
    ["02:00:00:05:42:B1", "02-00-00-05-42-b1", "02-00-00-05-42-B1", "  02:00:00:05:42:b1\n", "\t02:00:00:05:42:b1 "],
)
def test_decode_accepts_case_separators_and_whitespace_and_gives_canonical_mac(spelling):
    decoded = decode_ama(spelling)
    assert (decoded.group, decoded.switch, decoded.port) == (168, 10, 49)
    assert decoded.mac == "02:00:00:05:42:b1"


def test_extremes_of_the_layout():
    assert encode_ama(0, 0, 0) == "02:00:00:00:00:00"
    assert encode_ama(511, 31, 63) == "02:00:00:0f:ff:ff"
    assert decode_ama("02:00:00:0f:ff:ff") == AlgorithmicMac(nid=0xFFFFF, group=511, switch=31, port=63)
    # Each field sits in its own bits: the lowest bit of each one.
    assert decode_ama(encode_ama(1, 0, 0)).nid == 1 << 11
    assert decode_ama(encode_ama(0, 1, 0)).nid == 1 << 6
    assert decode_ama(encode_ama(0, 0, 1)).nid == 1


def test_round_trip_all_groups_and_switches_with_a_few_ports():
    ports = (0, 1, 42, 63)
    seen = set()
    for group in range(512):
        for switch in range(32):
            for port in ports:
                mac = encode_ama(group, switch, port)
                decoded = decode_ama(mac)
                assert (decoded.group, decoded.switch, decoded.port) == (group, switch, port)
                assert decoded.mac == mac
                seen.add(mac)
    assert len(seen) == 512 * 32 * len(ports)  # no two places share a MAC


def test_round_trip_all_ports_for_a_few_groups_and_switches():
    for group in (0, 1, 168, 511):
        for switch in (0, 10, 31):
            for port in range(64):
                decoded = decode_ama(encode_ama(group, switch, port).upper().replace(":", "-"))
                assert (decoded.group, decoded.switch, decoded.port) == (group, switch, port)


def test_decode_nid_matches_decode_ama_over_the_whole_nid_space():
    for nid in range(0, 1 << 20, 997):
        decoded = decode_nid(nid)
        assert decoded.nid == nid
        assert decode_ama(decoded.mac) == decoded
        assert (decoded.group << 11) | (decoded.switch << 6) | decoded.port == nid


def test_algorithmic_mac_knows_its_edge_port():
    assert decode_ama("02:00:00:05:42:b1").edge_port == 13  # port 49 is an edge port
    assert decode_ama("02:00:00:00:07:ea").edge_port is None  # port 42 faces the fabric


def test_algorithmic_mac_refuses_inconsistent_fields():
    with pytest.raises(AddressError, match=r"AMA NID 2026 is group 0, switch 31, port 42, not group 1"):
        AlgorithmicMac(nid=2026, group=1, switch=31, port=42)


@pytest.mark.parametrize(
    ("mac", "message"),
    [
        ("02:00:00:07:ea", "MAC '02:00:00:07:ea': expected 6 octets separated by ':' or '-', found 5"),
        ("02:00:00:00:07:ea:01", "MAC '02:00:00:00:07:ea:01': expected 6 octets separated by ':' or '-', found 7"),
        ("0200000007ea", "MAC '0200000007ea': expected 6 octets separated by ':' or '-', found 1"),
        ("", "MAC '': empty"),
        ("   ", "MAC '   ': empty"),
        ("02:00:00:zz:07:ea", "MAC '02:00:00:zz:07:ea': octet 4 'zz' is not hexadecimal"),
        ("02:00:00:00:07:e ", "MAC '02:00:00:00:07:e ': octet 6 'e' must be exactly 2 hex digits"),
        ("02:00:00::07:ea", "MAC '02:00:00::07:ea': octet 4 '' is not hexadecimal"),
        ("02:00:00:+7:07:ea", "MAC '02:00:00:+7:07:ea': octet 4 '+7' is not hexadecimal"),
        ("02:00:00:7:07:ea", "MAC '02:00:00:7:07:ea': octet 4 '7' must be exactly 2 hex digits"),
        ("02:00:00:00:007:ea", "MAC '02:00:00:00:007:ea': octet 5 '007' must be exactly 2 hex digits"),
        ("02:00:00-00:07:ea", "MAC '02:00:00-00:07:ea': mixes ':' and '-' separators"),
        (
            "02:00:01:00:07:ea",
            "MAC '02:00:01:00:07:ea' is not a Slingshot algorithmic MAC: it must start with 02:00:00",
        ),
        (
            "00:40:a6:00:07:ea",
            "MAC '00:40:a6:00:07:ea' is not a Slingshot algorithmic MAC: it must start with 02:00:00",
        ),
        (
            "02:00:00:80:07:ea",
            "MAC '02:00:00:80:07:ea': the reserved top bit of the 24-bit suffix is set (0x8007ea >= 0x800000)",
        ),
        ("02:00:00:ff:ff:ff", "MAC '02:00:00:ff:ff:ff': the reserved top bit of the 24-bit suffix is set"),
        ("02:00:00:10:07:ea", "MAC '02:00:00:10:07:ea': suffix 0x1007ea has bits 20-22 set"),
    ],
)
def test_decode_ama_rejects_malformed_macs_saying_what_and_where(mac, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        decode_ama(mac)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "MAC None: expected a string, got NoneType"),
        (0x0200000007EA, "MAC 2199023257578: expected a string, got int"),
        (b"02:00:00:00:07:ea", "MAC b'02:00:00:00:07:ea': expected a string, got bytes"),
    ],
)
def test_decode_ama_rejects_non_strings_with_address_error(value, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        decode_ama(value)


def test_a_huge_input_gives_a_short_message():
    with pytest.raises(AddressError) as caught:
        decode_ama("02:" * 100_000)
    assert len(str(caught.value)) < 200
    assert "found 100001" in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((512, 0, 0), "AMA group 512 out of range 0-511"),
        ((-1, 0, 0), "AMA group -1 out of range 0-511"),
        ((0, 32, 0), "AMA switch 32 out of range 0-31"),
        ((0, -1, 0), "AMA switch -1 out of range 0-31"),
        ((0, 0, 64), "AMA port 64 out of range 0-63"),
        ((0, 0, -1), "AMA port -1 out of range 0-63"),
        ((True, 0, 0), "AMA group must be an int, got True (bool)"),
        ((0, "3", 0), "AMA switch must be an int, got '3' (str)"),
        ((0, 0, 1.0), "AMA port must be an int, got 1.0 (float)"),
    ],
)
def test_encode_ama_validates_ranges(arguments, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        encode_ama(*arguments)


@pytest.mark.parametrize(
    ("nid", "message"),
    [
        (1 << 20, "NID 1048576 out of range 0-1048575 (20 bits)"),
        (-1, "NID -1 out of range 0-1048575"),
        ("2026", "NID must be an int, got '2026' (str)"),
    ],
)
def test_decode_nid_validates(nid, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        decode_nid(nid)


# --- edge ports --------------------------------------------------------------------------------

def test_edge_ports_are_the_liquid_cooled_ones_in_order():
    assert EDGE_PORTS == (0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51)
    assert [edge_port_physical(logical) for logical in range(16)] == list(EDGE_PORTS)
    assert edge_port_physical(0) == 0
    assert edge_port_physical(4) == 16
    assert edge_port_physical(15) == 51


def test_edge_port_mapping_round_trips_and_other_ports_are_not_edge_ports():
    for logical in range(16):
        assert edge_port_logical(edge_port_physical(logical)) == logical
    non_edge = [physical for physical in range(64) if edge_port_logical(physical) is None]
    assert len(non_edge) == 48
    assert {4, 15, 20, 31, 36, 47, 52, 63} <= set(non_edge)
    assert not set(non_edge) & set(EDGE_PORTS)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: edge_port_physical(16), "logical edge port 16 out of range 0-15"),
        (lambda: edge_port_physical(-1), "logical edge port -1 out of range 0-15"),
        (lambda: edge_port_logical(64), "physical switch port 64 out of range 0-63"),
        (lambda: edge_port_logical(-1), "physical switch port -1 out of range 0-63"),
        (lambda: edge_port_logical("49"), "physical switch port must be an int, got '49' (str)"),
    ],
)
def test_edge_port_range_errors(call, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        call()


# --- xnames ------------------------------------------------------------------------------------

def test_alps_node_xnames_from_the_reference():
    first = parse_xname("x1100c0s6b0n0")
    second = parse_xname("x1100c0s6b1n0")
    assert first == NodeXname(cabinet=1100, chassis=0, slot=6, board=0, node=0)
    assert second == NodeXname(cabinet=1100, chassis=0, slot=6, board=1, node=0)
    assert (str(first), str(second)) == ("x1100c0s6b0n0", "x1100c0s6b1n0")
    assert first.chassis_xname == "x1100c0"
    assert first.cabinet_xname == "x1100"
    assert first.kind == "node"


def test_nic_gpu_and_switch_xnames():
    node = NodeXname(1100, 0, 6, 0, 0)
    assert parse_xname("x1100c0s6b0n0h3") == NicXname(node, 3) == node.nic(3)
    assert parse_xname("x1100c0s6b0n0a7") == GpuXname(node, 7) == node.gpu(7)
    assert str(node.nic(1)) == "x1100c0s6b0n0h1"
    assert str(node.gpu(2)) == "x1100c0s6b0n0a2"
    assert parse_xname("x1100c0r3") == SwitchXname(1100, 0, 3)
    controller = parse_xname("x6107c0r48b0")
    assert controller == SwitchXname(6107, 0, 48, 0)
    assert controller.kind == "switch controller"
    assert controller.blade_xname == SwitchXname(6107, 0, 48)
    assert (controller.cabinet_xname, controller.chassis_xname) == ("x6107", "x6107c0")


@pytest.mark.parametrize(
    "name",
    [
        "x1100c0s6b0n0",
        "x1100c0s6b1n0",
        "x0c0s0b0n0",
        "x9999c7s7b1n7",
        "x1100c0s6b0n0h0",
        "x1100c0s6b0n0h7",
        "x1100c0s6b1n0a0",
        "x1100c0s6b1n0a7",
        "x1100c0r0",
        "x1100c7r7",
        "x1100c3r5b0",
        "x6107c0r48b0",
        "x10c0r63",
    ],
)
def test_canonical_xnames_round_trip(name):
    parsed = parse_xname(name)
    assert str(parsed) == name
    assert parse_xname(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("X1100C0S6B0N0", "x1100c0s6b0n0"),
        ("x1100C0s6B1n0H2", "x1100c0s6b1n0h2"),
        ("  x1100c0s6b0n0a3\n", "x1100c0s6b0n0a3"),
        ("X6107C0R48B0", "x6107c0r48b0"),
    ],
)
def test_xnames_are_case_insensitive_and_normalised_to_lowercase(spelling, canonical):
    assert str(parse_xname(spelling)) == canonical


def test_round_trip_over_every_node_position_of_a_cabinet():
    for chassis in range(8):
        for slot in range(8):
            for board in range(2):
                for node in range(8):
                    xname = NodeXname(1100, chassis, slot, board, node)
                    assert parse_node_xname(str(xname)) == xname


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "xname '': empty"),
        ("  ", "xname '  ': empty"),
        ("x1100c0s9b0", "xname 'x1100c0s9b0': incomplete node name, expected 'n<node>' after 'b0'"),
        ("x1100c0s6", "xname 'x1100c0s6': incomplete node name, expected 'b<board>' after 's6'"),
        ("x1100", "xname 'x1100': incomplete name, expected 'c<chassis>' after 'x1100'"),
        ("x1100c0", "xname 'x1100c0': incomplete name, expected 's<slot>' or 'r<switch blade>' after 'c0'"),
        ("x1100c9s0b0n0", "xname 'x1100c9s0b0n0': chassis 9 out of range 0-7"),
        ("x10000c0s0b0n0", "xname 'x10000c0s0b0n0': cabinet 10000 out of range 0-9999"),
        ("x1100c0s8b0n0", "xname 'x1100c0s8b0n0': slot 8 out of range 0-7"),
        ("x1100c0s6b2n0", "xname 'x1100c0s6b2n0': board 2 out of range 0-1"),
        ("x1100c0s6b0n8", "xname 'x1100c0s6b0n8': node 8 out of range 0-7"),
        ("x1100c0s6b0n0h8", "xname 'x1100c0s6b0n0h8': NIC 8 out of range 0-7"),
        ("x1100c0s6b0n0a8", "xname 'x1100c0s6b0n0a8': GPU 8 out of range 0-7"),
        ("x1100c0r64", "xname 'x1100c0r64': switch blade 64 out of range 0-63"),
        ("x1100c0r3b8", "xname 'x1100c0r3b8': switch controller 8 out of range 0-7"),
        ("x1100c0s06b0n0", "xname 'x1100c0s06b0n0': slot '06' has a leading zero; write 's6'"),
        ("x01100c0s6b0n0", "xname 'x01100c0s6b0n0': cabinet '01100' has a leading zero; write 'x1100'"),
        ("x1100c00s6b0n0", "xname 'x1100c00s6b0n0': chassis '00' has a leading zero; write 'c0'"),
        ("x1100cs0b0n0", "xname 'x1100cs0b0n0': missing chassis number after 'c'"),
        ("x1100c0s6b0n", "xname 'x1100c0s6b0n': missing node number after 'n'"),
        ("xc0s6b0n0", "xname 'xc0s6b0n0': missing cabinet number after 'x'"),
        ("c0s6b0n0", "xname 'c0s6b0n0': must start with 'x<cabinet>', found 'c0s6b0n0'"),
        ("nid006363", "xname 'nid006363': must start with 'x<cabinet>', found 'nid006363'"),
        (
            "x1100c0q3",
            "xname 'x1100c0q3': unexpected 'q3' after 'c0', expected 's<slot>' or 'r<switch blade>'",
        ),
        (
            "x1100c0s6b0n0-foo",
            "xname 'x1100c0s6b0n0-foo': unexpected '-foo' after 'n0', "
            "expected 'h<NIC>', 'a<GPU>' or the end of the name",
        ),
        (
            "x1100c0s6b0n0h0a1",
            "xname 'x1100c0s6b0n0h0a1': unexpected 'a1' after 'h0', expected the end of the name",
        ),
        ("x1100c0r3b0n0", "xname 'x1100c0r3b0n0': unexpected 'n0' after 'b0', expected the end of the name"),
        ("x1100 c0s6b0n0", "xname 'x1100 c0s6b0n0': unexpected ' c0s6b0n0' after 'x1100', expected 'c<chassis>'"),
        ("x1100c0s6b0n0 ", None),  # surrounding whitespace is fine: not an error case
    ],
)
def test_parse_xname_rejects_malformed_names_saying_what_and_where(name, message):
    if message is None:
        assert str(parse_xname(name)) == name.strip()
        return
    with pytest.raises(AddressError, match=re.escape(message)):
        parse_xname(name)


def test_parse_xname_rejects_non_strings():
    with pytest.raises(AddressError, match=re.escape("xname 1100: expected a string, got int")):
        parse_xname(1100)
    with pytest.raises(AddressError, match=re.escape("xname None: expected a string, got NoneType")):
        parse_xname(None)


def test_a_pathological_cabinet_number_is_refused_quickly_and_briefly():
    with pytest.raises(AddressError, match=r"cabinet 111111111111… out of range 0-9999") as caught:
        parse_xname("x" + "1" * 10_000 + "c0s0b0n0")
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("helper", "name", "message"),
    [
        (parse_node_xname, "x1100c0s6b0n0h1", "xname 'x1100c0s6b0n0h1' is a NIC name, not a node name"),
        (parse_node_xname, "x1100c0s6b0n0a1", "xname 'x1100c0s6b0n0a1' is a GPU name, not a node name"),
        (parse_node_xname, "x1100c0r3", "xname 'x1100c0r3' is a switch name, not a node name"),
        (parse_node_xname, "x6107c0r48b0", "xname 'x6107c0r48b0' is a switch controller name, not a node name"),
        (parse_nic_xname, "x1100c0s6b0n0", "xname 'x1100c0s6b0n0' is a node name, not a NIC name"),
        (parse_gpu_xname, "x1100c0s6b0n0h0", "xname 'x1100c0s6b0n0h0' is a NIC name, not a GPU name"),
        (parse_switch_xname, "x1100c0s6b0n0", "xname 'x1100c0s6b0n0' is a node name, not a switch name"),
        (parse_node_xname, "x1100c0s9b0", "xname 'x1100c0s9b0': incomplete node name"),
    ],
)
def test_typed_parsers_name_what_they_found_instead(helper, name, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        helper(name)


def test_typed_parsers_return_their_type():
    assert parse_node_xname("x1100c0s6b0n0") == NodeXname(1100, 0, 6, 0, 0)
    assert parse_nic_xname("x1100c0s6b0n0h2") == NicXname(NodeXname(1100, 0, 6, 0, 0), 2)
    assert parse_gpu_xname("x1100c0s6b0n0a2") == GpuXname(NodeXname(1100, 0, 6, 0, 0), 2)
    assert parse_switch_xname("x1100c0r3b0") == SwitchXname(1100, 0, 3, 0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: NodeXname(1100, 9, 0, 0, 0), "NodeXname chassis 9 out of range 0-7"),
        (lambda: NodeXname(1100, 0, 0, 2, 0), "NodeXname board 2 out of range 0-1"),
        (lambda: NodeXname("1100", 0, 0, 0, 0), "NodeXname cabinet must be an int, got '1100' (str)"),
        (lambda: NodeXname(1100, 0, 6, 0, 0).nic(8), "NicXname 'x1100c0s6b0n0': NIC 8 out of range 0-7"),
        (lambda: NodeXname(1100, 0, 6, 0, 0).gpu(-1), "GpuXname 'x1100c0s6b0n0': GPU -1 out of range 0-7"),
        (lambda: NicXname("x1100c0s6b0n0", 0), "NicXname node must be a NodeXname, got 'x1100c0s6b0n0' (str)"),
        (lambda: SwitchXname(1100, 0, 64), "SwitchXname switch blade 64 out of range 0-63"),
        (lambda: SwitchXname(1100, 8, 0), "SwitchXname chassis 8 out of range 0-7"),
        (lambda: SwitchXname(1100, 0, 0, 8), "SwitchXname switch controller 8 out of range 0-7"),
    ],
)
def test_constructors_validate_too(build, message):
    with pytest.raises(AddressError, match=re.escape(message)):
        build()


def test_xnames_are_frozen_and_hashable():
    node = NodeXname(1100, 0, 6, 0, 0)
    with pytest.raises(AttributeError):
        node.slot = 5  # type: ignore[misc]
    assert len({node, parse_node_xname("X1100C0S6B0N0"), node.nic(0)}) == 2
