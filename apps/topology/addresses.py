"""Slingshot algorithmic MAC addresses and Cray xnames. Pure: must not import django.

Two naming schemes locate a NIC in an HPE Cray EX system, and the portal needs both:

* The **algorithmic MAC** (AMA) of a Slingshot NIC port is assigned at boot from where the port is
  cabled: ``02:00:00:`` followed by a 24-bit suffix whose low 20 bits are the Cassini NID =
  9-bit dragonfly group, 5-bit switch (within the group), 6-bit switch port. Reading
  ``/sys/class/net/hsnN/address`` on a node therefore tells us the group, switch and port of that
  NIC without any administrator export (reference notes, §1.5).
* The **xname** is the physical location HPE CSM gives every component, e.g. node
  ``x1100c0s6b0n0`` = cabinet 1100, chassis 0, blade slot 6, board 0, node 0; ``…h1`` is its NIC 1,
  ``…a2`` its GPU 2, and ``x1100c0r3`` a switch blade (reference notes, §1.4; liquid-cooled ranges).

Everything here takes and returns plain values, and every malformed input raises
:class:`AddressError` whose message says what is wrong and quotes the input, because these strings
come from files and prolog scripts on thousands of nodes and a bare "invalid" would be useless.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import ClassVar, NoReturn, TypeVar

__all__ = [
    "AMA_PREFIX",
    "EDGE_PORTS",
    "AddressError",
    "AlgorithmicMac",
    "GpuXname",
    "NicXname",
    "NodeXname",
    "SwitchXname",
    "Xname",
    "decode_ama",
    "decode_nid",
    "edge_port_logical",
    "edge_port_physical",
    "encode_ama",
    "parse_gpu_xname",
    "parse_nic_xname",
    "parse_node_xname",
    "parse_switch_xname",
    "parse_xname",
]


class AddressError(ValueError):
    """A MAC address, NID, port number or xname is malformed or out of range."""


# Inputs come from files written on thousands of nodes; a runaway line must not produce a
# megabyte-long error message, so quoted inputs are cut.
_QUOTE_LIMIT = 64


def _quote(value: object) -> str:
    if isinstance(value, str) and len(value) > _QUOTE_LIMIT:
        return repr(value[:_QUOTE_LIMIT] + "…")
    text = repr(value)
    return text if len(text) <= _QUOTE_LIMIT else text[:_QUOTE_LIMIT] + "…"


def _is_int(value: object) -> bool:
    # bool is an int subclass; True as a port number is always a caller bug.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(where: str, field: str, value: object, low: int, high: int, note: str = "") -> int:
    if not _is_int(value):
        raise AddressError(f"{where}{field} must be an int, got {_quote(value)} ({type(value).__name__})")
    if not low <= value <= high:
        raise AddressError(f"{where}{field} {value} out of range {low}-{high}{note}")
    return value


# --------------------------------------------------------------------------------------------
# Algorithmic MAC addresses
# --------------------------------------------------------------------------------------------

AMA_PREFIX = "02:00:00"

GROUP_BITS, SWITCH_BITS, PORT_BITS = 9, 5, 6
NID_BITS = GROUP_BITS + SWITCH_BITS + PORT_BITS
MAX_GROUP = (1 << GROUP_BITS) - 1
MAX_SWITCH = (1 << SWITCH_BITS) - 1
MAX_PORT = (1 << PORT_BITS) - 1
MAX_NID = (1 << NID_BITS) - 1
_RESERVED_TOP_BIT = 1 << 23

_HEX = frozenset(string.hexdigits)
# Six octets of exactly two ASCII hex digits; group 2 captures the first separator and the
# back-references make the other four repeat it.
_MAC = re.compile(r"([0-9A-Fa-f]{2})([:-])" + r"\2".join([r"([0-9A-Fa-f]{2})"] * 5))


def _explain_malformed_mac(mac: str, text: str) -> NoReturn:
    where = f"MAC {_quote(mac)}"
    if not text:
        raise AddressError(f"{where}: empty")
    octets = re.split(r"[:-]", text)
    if len(octets) != 6:
        raise AddressError(f"{where}: expected 6 octets separated by ':' or '-', found {len(octets)}")
    for position, octet in enumerate(octets, start=1):
        if not octet or not set(octet) <= _HEX:
            raise AddressError(f"{where}: octet {position} {_quote(octet)} is not hexadecimal")
        # int(..., 16) alone would accept '7' and '007'; both hide a dropped or extra digit.
        if len(octet) != 2:
            raise AddressError(f"{where}: octet {position} {_quote(octet)} must be exactly 2 hex digits")
    if len(set(re.findall(r"[:-]", text))) > 1:
        raise AddressError(f"{where}: mixes ':' and '-' separators; use one of them throughout")
    raise AddressError(f"{where}: not a MAC address")  # unreachable while the checks above cover _MAC


@dataclass(frozen=True)
class AlgorithmicMac:
    """One NIC port's place in the dragonfly, as encoded in its algorithmic MAC.

    ``nid`` and the three coordinates carry the same information twice; the constructor checks
    that they agree so that an instance can never describe two different places.
    """

    nid: int
    group: int
    switch: int
    port: int

    def __post_init__(self) -> None:
        _check_int("AMA ", "NID", self.nid, 0, MAX_NID, f" ({NID_BITS} bits)")
        expected = (self.nid >> (SWITCH_BITS + PORT_BITS), (self.nid >> PORT_BITS) & MAX_SWITCH, self.nid & MAX_PORT)
        if (self.group, self.switch, self.port) != expected:
            raise AddressError(
                f"AMA NID {self.nid} is group {expected[0]}, switch {expected[1]}, port {expected[2]}, "
                f"not group {self.group!r}, switch {self.switch!r}, port {self.port!r}"
            )

    @property
    def mac(self) -> str:
        """The canonical spelling: lowercase, ':'-separated."""
        return f"{AMA_PREFIX}:{self.nid >> 16:02x}:{(self.nid >> 8) & 0xFF:02x}:{self.nid & 0xFF:02x}"

    @property
    def edge_port(self) -> int | None:
        """The logical edge port (0-15) on a liquid-cooled switch, or None if ``port`` is not one."""
        return edge_port_logical(self.port)


def decode_nid(nid: int) -> AlgorithmicMac:
    """The place a Cassini NID (as printed by ``cxi_stat``) encodes."""
    _check_int("", "NID", nid, 0, MAX_NID, f" ({NID_BITS} bits)")
    return AlgorithmicMac(nid, nid >> (SWITCH_BITS + PORT_BITS), (nid >> PORT_BITS) & MAX_SWITCH, nid & MAX_PORT)


def encode_ama(group: int, switch: int, port: int) -> str:
    """The canonical algorithmic MAC of switch ``port`` of ``switch`` in dragonfly ``group``."""
    _check_int("AMA ", "group", group, 0, MAX_GROUP)
    _check_int("AMA ", "switch", switch, 0, MAX_SWITCH)
    _check_int("AMA ", "port", port, 0, MAX_PORT)
    return decode_nid((group << (SWITCH_BITS + PORT_BITS)) | (switch << PORT_BITS) | port).mac


def decode_ama(mac: str) -> AlgorithmicMac:
    """Group, switch, port and NID of a Slingshot algorithmic MAC such as ``02:00:00:05:42:b1``.

    Accepts either case, ':' or '-' between octets (one kind throughout), and surrounding
    whitespace, because that is what ``/sys/class/net/*/address``, ``ip link`` and hand-written
    CSV files produce between them.
    """
    if not isinstance(mac, str):
        raise AddressError(f"MAC {_quote(mac)}: expected a string, got {type(mac).__name__}")
    text = mac.strip()
    # One regex accepts the common, well-formed case; _explain_malformed_mac only runs to say what
    # is wrong (discovery imports decode every NIC of the system, so the happy path stays short).
    match = _MAC.fullmatch(text)
    if match is None:
        _explain_malformed_mac(mac, text)
    values = [int(octet, 16) for octet in match.group(1, 3, 4, 5, 6, 7)]
    if values[:3] != [0x02, 0x00, 0x00]:
        raise AddressError(f"MAC {_quote(mac)} is not a Slingshot algorithmic MAC: it must start with {AMA_PREFIX}")
    suffix = (values[3] << 16) | (values[4] << 8) | values[5]
    if suffix & _RESERVED_TOP_BIT:
        raise AddressError(
            f"MAC {_quote(mac)}: the reserved top bit of the 24-bit suffix is set (0x{suffix:06x} >= 0x800000)"
        )
    # The documented layout defines only the low 20 bits. HPE's own tools mask the rest away, but
    # doing so here would give two different MACs the same NID, so an address that does not fit is
    # refused rather than silently merged with another.
    if suffix > MAX_NID:
        raise AddressError(
            f"MAC {_quote(mac)}: suffix 0x{suffix:06x} has bits 20-22 set; the algorithmic layout "
            f"(9-bit group, 5-bit switch, 6-bit port) uses only the low 20 bits"
        )
    return decode_nid(suffix)


# On liquid-cooled ("Mountain") Rosetta switches the NIC-facing ports are these physical ports,
# numbered logical 0-15 in this order (HPE shasta_addr.c, reference notes §1.5).
EDGE_PORTS: tuple[int, ...] = (0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51)
_EDGE_LOGICAL = {physical: logical for logical, physical in enumerate(EDGE_PORTS)}


def edge_port_physical(logical: int) -> int:
    """The physical switch port of logical edge port ``logical`` (0-15)."""
    _check_int("", "logical edge port", logical, 0, len(EDGE_PORTS) - 1)
    return EDGE_PORTS[logical]


def edge_port_logical(physical: int) -> int | None:
    """The logical edge port (0-15) of physical switch port ``physical``; None for fabric ports."""
    _check_int("", "physical switch port", physical, 0, MAX_PORT)
    return _EDGE_LOGICAL.get(physical)


# --------------------------------------------------------------------------------------------
# Cray xnames
# --------------------------------------------------------------------------------------------

# Liquid-cooled ranges from HPE CSM. NIC indices go to 7 although Alps nodes have 4 NICs because
# other Slingshot systems (Aurora) have 8 per node. Switch blades go to 63, not 7: LLDP reports the
# switch controller of a rack (air-cooled, "River") switch with its rack-unit number, e.g.
# x6107c0r48b0, and discovery records must not be refused for that. The reference gives no range
# for a switch controller; 0-7 mirrors the other per-blade indices.
_RANGES: dict[str, tuple[int, int]] = {
    "cabinet": (0, 9999),
    "chassis": (0, 7),
    "slot": (0, 7),
    "board": (0, 1),
    "node": (0, 7),
    "NIC": (0, 7),
    "GPU": (0, 7),
    "switch blade": (0, 63),
    "switch controller": (0, 7),
}


def _check_component(where: str, field: str, value: object) -> int:
    low, high = _RANGES[field]
    return _check_int(where, field, value, low, high)


class _InChassis:
    """The cabinet and chassis an address (node, switch) sits in, as xnames."""

    cabinet: int
    chassis: int

    @property
    def cabinet_xname(self) -> str:
        return f"x{self.cabinet}"

    @property
    def chassis_xname(self) -> str:
        return f"x{self.cabinet}c{self.chassis}"


@dataclass(frozen=True)
class NodeXname(_InChassis):
    """``x{cabinet}c{chassis}s{slot}b{board}n{node}``, e.g. ``x1100c0s6b0n0``."""

    cabinet: int
    chassis: int
    slot: int
    board: int
    node: int

    kind: ClassVar[str] = "node"

    def __post_init__(self) -> None:
        for field in ("cabinet", "chassis", "slot", "board", "node"):
            _check_component("NodeXname ", field, getattr(self, field))

    def __str__(self) -> str:
        return f"x{self.cabinet}c{self.chassis}s{self.slot}b{self.board}n{self.node}"

    def nic(self, index: int) -> NicXname:
        return NicXname(self, index)

    def gpu(self, index: int) -> GpuXname:
        return GpuXname(self, index)


def _check_node(owner: str, node: object) -> None:
    if not isinstance(node, NodeXname):
        raise AddressError(f"{owner} node must be a NodeXname, got {_quote(node)} ({type(node).__name__})")


@dataclass(frozen=True)
class _NodePartXname:
    """``{node}{letter}{index}``: a numbered part of a node (NIC, GPU); subclasses name the letter and kind."""

    node: NodeXname
    index: int

    kind: ClassVar[str]
    letter: ClassVar[str]

    def __post_init__(self) -> None:
        owner = type(self).__name__
        _check_node(owner, self.node)
        _check_component(f"{owner} {str(self.node)!r}: ", self.kind, self.index)

    def __str__(self) -> str:
        return f"{self.node}{self.letter}{self.index}"


@dataclass(frozen=True)
class NicXname(_NodePartXname):
    """``{node}h{index}``: a node's high-speed-network NIC, e.g. ``x1100c0s6b0n0h1``."""

    kind: ClassVar[str] = "NIC"
    letter: ClassVar[str] = "h"


@dataclass(frozen=True)
class GpuXname(_NodePartXname):
    """``{node}a{index}``: a node's accelerator, e.g. ``x1100c0s6b0n0a2``."""

    kind: ClassVar[str] = "GPU"
    letter: ClassVar[str] = "a"


@dataclass(frozen=True)
class SwitchXname(_InChassis):
    """``x{cabinet}c{chassis}r{blade}``, optionally ``…b{controller}`` (what LLDP reports)."""

    cabinet: int
    chassis: int
    blade: int
    controller: int | None = None

    def __post_init__(self) -> None:
        _check_component("SwitchXname ", "cabinet", self.cabinet)
        _check_component("SwitchXname ", "chassis", self.chassis)
        _check_component("SwitchXname ", "switch blade", self.blade)
        if self.controller is not None:
            _check_component("SwitchXname ", "switch controller", self.controller)

    def __str__(self) -> str:
        controller = "" if self.controller is None else f"b{self.controller}"
        return f"x{self.cabinet}c{self.chassis}r{self.blade}{controller}"

    @property
    def kind(self) -> str:
        return "switch" if self.controller is None else "switch controller"

    @property
    def blade_xname(self) -> SwitchXname:
        """The switch blade itself, without the controller suffix."""
        return SwitchXname(self.cabinet, self.chassis, self.blade)


Xname = NodeXname | NicXname | GpuXname | SwitchXname


# The grammar as a small state machine: in each state, which letters may follow, what the number
# after each letter is called, and which state that leads to. None marks a complete name.
_START, _CABINET, _CHASSIS, _SLOT, _BOARD, _NODE, _SWITCH, _LEAF = range(8)
_NEXT: dict[int, dict[str, tuple[str, int]]] = {
    _START: {"x": ("cabinet", _CABINET)},
    _CABINET: {"c": ("chassis", _CHASSIS)},
    _CHASSIS: {"s": ("slot", _SLOT), "r": ("switch blade", _SWITCH)},
    _SLOT: {"b": ("board", _BOARD)},
    _BOARD: {"n": ("node", _NODE)},
    _NODE: {"h": ("NIC", _LEAF), "a": ("GPU", _LEAF)},
    _SWITCH: {"b": ("switch controller", _LEAF)},
    _LEAF: {},
}
_COMPLETE = {_NODE, _SWITCH, _LEAF}
_INCOMPLETE_KIND = {_CABINET: "name", _CHASSIS: "name", _SLOT: "node name", _BOARD: "node name"}
_TOKEN = re.compile(r"([a-z])([0-9]*)")


def _expected(state: int) -> str:
    options = [f"'{letter}<{field}>'" for letter, (field, _) in _NEXT[state].items()]
    if state in _COMPLETE:
        options.append("the end of the name")
    return options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]


def parse_xname(text: str) -> Xname:
    """The node, NIC, GPU or switch that xname ``text`` names (any case, surrounding whitespace ok).

    ``str()`` of the result is the canonical lowercase spelling, so ``str(parse_xname(s)) == s``
    for every canonical ``s``.
    """
    if not isinstance(text, str):
        raise AddressError(f"xname {_quote(text)}: expected a string, got {type(text).__name__}")
    where = f"xname {_quote(text)}"
    name = text.strip().lower()
    if not name:
        raise AddressError(f"{where}: empty")
    # Two passes: the shape of the name first, then the numbers, so that a truncated name is
    # reported as truncated even when one of its numbers is also out of range.
    state, position, previous = _START, 0, ""
    tokens: list[tuple[str, str]] = []
    while position < len(name):
        match = _TOKEN.match(name, position)
        letter = match.group(1) if match else ""
        if letter not in _NEXT[state]:
            found = name[position:]
            if state == _START:
                raise AddressError(f"{where}: must start with 'x<cabinet>', found {found!r}")
            raise AddressError(f"{where}: unexpected {found!r} after {previous!r}, expected {_expected(state)}")
        field, state = _NEXT[state][letter]
        digits = match.group(2)
        if not digits:
            raise AddressError(f"{where}: missing {field} number after '{letter}'")
        # Two spellings of one component (s6, s06) would make equal locations compare unequal as
        # strings, and xnames are used as keys.
        if len(digits) > 1 and digits[0] == "0":
            canonical = f"{letter}{digits.lstrip('0') or '0'}"
            raise AddressError(f"{where}: {field} {_quote(digits)} has a leading zero; write {_quote(canonical)}")
        tokens.append((field, digits))
        previous = f"{letter}{digits}"
        position = match.end()
    if state not in _COMPLETE:
        kind = _INCOMPLETE_KIND[state]
        raise AddressError(f"{where}: incomplete {kind}, expected {_expected(state)} after {previous!r}")
    values: dict[str, int] = {}
    for field, digits in tokens:
        low, high = _RANGES[field]
        # Compare lengths first: int() of a pathological digit string is slow and, past 4300
        # digits, refused by Python itself.
        if len(digits) > len(str(high)) or not low <= int(digits) <= high:
            shown = digits if len(digits) <= 12 else digits[:12] + "…"
            raise AddressError(f"{where}: {field} {shown} out of range {low}-{high}")
        values[field] = int(digits)
    if "switch blade" in values:
        controller = values.get("switch controller")
        return SwitchXname(values["cabinet"], values["chassis"], values["switch blade"], controller)
    node = NodeXname(values["cabinet"], values["chassis"], values["slot"], values["board"], values["node"])
    if "NIC" in values:
        return NicXname(node, values["NIC"])
    if "GPU" in values:
        return GpuXname(node, values["GPU"])
    return node


_Parsed = TypeVar("_Parsed", NodeXname, NicXname, GpuXname, SwitchXname)


def _parse_as(text: str, expected: type[_Parsed], kind: str) -> _Parsed:
    parsed = parse_xname(text)
    if not isinstance(parsed, expected):
        raise AddressError(f"xname {_quote(text)} is a {parsed.kind} name, not a {kind} name")
    return parsed


def parse_node_xname(text: str) -> NodeXname:
    """Like :func:`parse_xname`, but the name must be a node's."""
    return _parse_as(text, NodeXname, "node")


def parse_nic_xname(text: str) -> NicXname:
    """Like :func:`parse_xname`, but the name must be a NIC's."""
    return _parse_as(text, NicXname, "NIC")


def parse_gpu_xname(text: str) -> GpuXname:
    """Like :func:`parse_xname`, but the name must be a GPU's."""
    return _parse_as(text, GpuXname, "GPU")


def parse_switch_xname(text: str) -> SwitchXname:
    """Like :func:`parse_xname`, but the name must be a switch blade's or its controller's."""
    return _parse_as(text, SwitchXname, "switch")
