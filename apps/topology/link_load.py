"""Switch ports placed on the dragonfly, and the load of its links per group pair.

Pure: must not import django.

Which link a switch port is
---------------------------
A Rosetta switch has 64 ports: the 16 edge ports (``addresses.EDGE_PORTS``) go to NICs, the other 48 are
fabric ports, each cabled to a switch of the same group (local, L1) or of another group (global, L2). The
fabric manager knows the cabling (its ``fabric_template.json``); the stored topology knows only which switch
pairs are cabled (``GlobalLink``, and every pair of switches in a group). When the export names a port's
peer, :func:`place_port` uses it. Otherwise it uses **Belvedere's cabling convention** (modelled, not HPE's —
no public source gives the port of each cable): a switch's fabric ports, in port order, go first to the other
switches of its group in index order, then to its global links in the order the topology lists them (each
parallel cable its own port). The demo's counters follow the same convention, so they land on the demo's
links; on a real system give the peers, or the group pairs of global ports with no peer are "unknown".

Load
----
A Slingshot link carries 200 Gb/s = 25 GB/s in each direction (``LINK_BYTES_PER_S``). A group pair's load
is the bytes per second in its busier direction over the capacity of that direction (its cables × 25 GB/s):
a fraction on a physical scale, 1.0 = every cable of the pair full. Each direction is measured at both ends
(sent at one, received at the other); the larger of the two counts, so a pair with one end unreported is
still measured. A switch's load is the busiest of its fabric ports (port bytes/s over 25 GB/s).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .addresses import EDGE_PORTS
from .model import Topology

LINK_BYTES_PER_S = 25e9  # 200 Gb/s per direction
PORTS_PER_SWITCH = 64
FABRIC_PORTS: tuple[int, ...] = tuple(port for port in range(PORTS_PER_SWITCH) if port not in EDGE_PORTS)


@dataclass(frozen=True)
class PortPlace:
    """Where one switch port leads: ``kind`` edge | local | global | unknown; ``groups`` (own group, peer's group);
    ``peer`` (group, index) of the switch at the other end when known."""

    kind: str
    groups: tuple[int, int] | None
    peer: tuple[int, int] | None = None

    def as_dict(self) -> dict:
        return {"kind": self.kind, "groups": self.groups}


class PortMap:
    """Every port of ``topology`` placed by the cabling convention (see the module docstring), by switch xname."""

    def __init__(self, topology: Topology):
        self.switch_by_xname: dict[str, tuple[int, int]] = {}
        members: dict[int, list[int]] = {}
        for switch in topology.switches:
            if switch.xname:
                self.switch_by_xname[switch.xname.lower()] = (switch.group, switch.index)
            members.setdefault(switch.group, []).append(switch.index)
        globals_of: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self.links_per_pair: dict[tuple[int, int], int] = {}
        for link in topology.global_links:
            a, b = (link.group_a, link.switch_a), (link.group_b, link.switch_b)
            for _ in range(max(1, link.links)):
                globals_of.setdefault(a, []).append(b)
                globals_of.setdefault(b, []).append(a)
            pair = _pair(link.group_a, link.group_b)
            self.links_per_pair[pair] = self.links_per_pair.get(pair, 0) + max(1, link.links)
        self.places: dict[tuple[int, int], dict[int, PortPlace]] = {}
        for group, indices in members.items():
            for index in indices:
                peers = [(group, other) for other in sorted(indices) if other != index] + globals_of.get((group, index), [])
                self.places[(group, index)] = {
                    port: PortPlace("local" if peer[0] == group else "global", (group, peer[0]), peer)
                    for port, peer in zip(FABRIC_PORTS, peers)
                }

    def switch(self, xname: str) -> tuple[int, int] | None:
        return self.switch_by_xname.get(xname.lower())

    def port_of(self, switch: tuple[int, int], peer: tuple[int, int], nth: int = 0) -> int | None:
        """The port of ``switch`` cabled to ``peer`` (the ``nth`` such cable) by the convention."""
        found = [port for port, place in sorted(self.places.get(switch, {}).items()) if place.peer == peer]
        return found[nth] if nth < len(found) else None


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a <= b else (b, a)


def place_port(ports: PortMap, switch_xname: str, port: int | None, *, peer: str | None = None,
               kind: str | None = None) -> dict | None:
    """``{"kind": "global"|"local"|"edge"|"unknown", "groups": (own, peer's) or None}`` for port ``port`` of the
    switch named ``switch_xname``; None when the switch is not in the topology.

    ``peer`` (the other end's switch xname, from the export) wins over the convention; ``kind`` (the export's
    DeviceSpecificContext) is used when neither places the port."""
    return _place(ports, switch_xname, port, peer=peer, kind=kind).as_dict() if ports.switch(switch_xname) else None


def _place(ports: PortMap, switch_xname: str, port: int | None, *, peer: str | None = None,
           kind: str | None = None) -> PortPlace:
    own = ports.switch(switch_xname)
    if own is None:
        return PortPlace("unknown", None)
    if peer:
        other = ports.switch(peer)
        if other is not None:
            return PortPlace("local" if other[0] == own[0] else "global", (own[0], other[0]), other)
    if port is not None and port in EDGE_PORTS:
        return PortPlace("edge", None)
    if kind in ("edge", "ieee"):
        return PortPlace(kind, None)
    place = ports.places.get(own, {}).get(port) if port is not None else None
    if place is not None and (kind is None or kind == place.kind):
        return place
    return PortPlace(kind if kind in ("local", "global") else "unknown", (own[0], own[0]) if kind == "local" else None)


@dataclass
class PairLoad:
    """One group pair (a < b): bytes/s each way, its cables, and the busier direction's share of their capacity."""

    a: int
    b: int
    links: int
    a_to_b: float = 0.0
    b_to_a: float = 0.0
    ports: int = 0  # ports whose counters measured this pair

    @property
    def bytes_per_s(self) -> float:
        return max(self.a_to_b, self.b_to_a)

    @property
    def fraction(self) -> float | None:
        return self.bytes_per_s / (self.links * LINK_BYTES_PER_S) if self.links else None


@dataclass
class LinkLoad:
    """Loads computed from port rates: per group pair (measured ones only), per switch, and coverage."""

    pairs: dict[tuple[int, int], PairLoad] = field(default_factory=dict)
    switches: dict[tuple[int, int], float] = field(default_factory=dict)  # (group, index) -> busiest port fraction
    ports_measured: int = 0
    ports_unplaced: int = 0  # global ports whose group pair is unknown
    ports_unknown_switch: int = 0

    def busiest(self) -> PairLoad | None:
        measured = [pair for pair in self.pairs.values() if pair.fraction is not None]
        return max(measured, key=lambda pair: (pair.fraction, -pair.a, -pair.b)) if measured else None


def link_load(ports: PortMap, rates: Iterable[tuple[str, str | int | None, str, float]], *,
              peers: dict[tuple[str, str], str] | None = None, kinds: dict[tuple[str, str], str] | None = None) -> LinkLoad:
    """Load per group pair and per switch from port byte rates.

    ``rates``: (switch xname, port number or stored name ``p40``, field ``port_tx_bytes``|``port_rx_bytes``, bytes/s);
    other fields are ignored. ``peers``/``kinds``: what the export said per (switch xname, port name)."""
    peers, kinds = peers or {}, kinds or {}
    result = LinkLoad()
    seen: set[tuple[str, int | None]] = set()
    # (pair, direction "ab"/"ba", measured by "tx"/"rx") -> bytes/s
    sums: dict[tuple[tuple[int, int], str, str], float] = {}
    port_rates: dict[tuple[tuple[int, int], int | None], float] = {}
    for switch_xname, port, field_name, rate in rates:
        if field_name not in ("port_tx_bytes", "port_rx_bytes") or rate is None or rate != rate:
            continue
        name = port if isinstance(port, str) else f"p{port}"
        number = port if isinstance(port, int) else (int(port[1:]) if isinstance(port, str) and port[:1] == "p"
                                                      and port[1:].isdecimal() else None)
        own = ports.switch(switch_xname)
        if own is None:
            if (switch_xname, number) not in seen:
                result.ports_unknown_switch += 1
                seen.add((switch_xname, number))
            continue
        place = _place(ports, switch_xname, number, peer=peers.get((switch_xname, name)), kind=kinds.get((switch_xname, name)))
        if place.kind == "edge" or place.kind == "ieee":
            continue
        if (switch_xname, number) not in seen:
            seen.add((switch_xname, number))
            result.ports_measured += 1
            if place.kind == "global" and place.groups is None:
                result.ports_unplaced += 1
        key = (own, number)
        port_rates[key] = max(port_rates.get(key, 0.0), float(rate))
        if place.kind != "global" or place.groups is None:
            continue
        mine, theirs = place.groups
        pair = _pair(mine, theirs)
        outward = "ab" if mine == pair[0] else "ba"
        direction = outward if field_name == "port_tx_bytes" else ("ba" if outward == "ab" else "ab")
        measured_by = "tx" if field_name == "port_tx_bytes" else "rx"
        sums[(pair, direction, measured_by)] = sums.get((pair, direction, measured_by), 0.0) + float(rate)
        load = result.pairs.get(pair)
        if load is None:
            load = result.pairs[pair] = PairLoad(pair[0], pair[1], ports.links_per_pair.get(pair, 0))
        load.ports += field_name == "port_tx_bytes"
    for pair, load in result.pairs.items():
        load.a_to_b = max(sums.get((pair, "ab", "tx"), 0.0), sums.get((pair, "ab", "rx"), 0.0))
        load.b_to_a = max(sums.get((pair, "ba", "tx"), 0.0), sums.get((pair, "ba", "rx"), 0.0))
    for (switch, _number), rate in port_rates.items():
        result.switches[switch] = max(result.switches.get(switch, 0.0), rate / LINK_BYTES_PER_S)
    return result
