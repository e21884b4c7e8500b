"""The registry of network counters: Slingshot NIC (HPE Cassini, ``cxi``) and switch-port fields.

Each canonical field says its unit, its kind (``counter``: cumulative as the driver or fabric
manager reports it, rates come from differences; ``gauge``: a state or level read as-is), what it
means, and the driver names it is read from. NIC counters come from two places on a node (see
``apps/telemetry/README.md`` for the sources checked):

* the CXI driver's telemetry items, one file per item under
  ``/sys/class/cxi/cxiN/device/telemetry/<item>``, text ``<value>@<seconds>.<nanoseconds>``;
  Cassini counters are 56 bits wide (they wrap at 2**56) and restart at 0 when the driver reloads;
* the retry handler's statistics, one file per statistic under ``/var/run/cxi/cxiN/<stat>``
  (``/run/cxi`` on current systems), a plain integer. Their driver names carry the ``rh:`` prefix
  HPE's own tools use (``rh:nacks``); the bare file name is accepted too.

A field with several driver names (packets per traffic class) is their sum: the collector adds
them before it sends the canonical field, and ingestion refuses one of the parts under the
canonical name (it would store a fraction as the whole). The link state is a gauge the collector
reads from ``/sys/class/cxi/cxiN/device/port/link``; ``nic_link_down`` counts the up-to-down
transitions the collector saw (the driver exposes no such counter that could be verified).

Cassini's telemetry has no byte counter that could be verified (the HNI block counts packets by
size bucket and by traffic class, not octets). ``nic_tx_bytes``/``nic_rx_bytes`` therefore map
from the Ethernet netdev statistics of the ``hsnN`` interface, which count only the Ethernet/IP
traffic the ``cxi-eth`` driver carries, not libfabric RDMA traffic; a site with a better source
sends the canonical names itself. Retry fraction of a NIC over an interval:
``Δnic_retries / Δnic_tx_packets``.

Switch-port fields are what the fabric manager's port counters give (``apps/telemetry/fabric.py``
maps its names). Plain Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass

COUNTER, GAUGE = "counter", "gauge"
NIC, PORT = "nic", "port"
CASSINI_COUNTER_WRAP = 2 ** 56
TRAFFIC_CLASSES = range(8)


class UnknownNetField(ValueError):
    """A name that is neither a canonical network field nor a driver name of one."""


@dataclass(frozen=True)
class NetField:
    name: str
    scope: str  # "nic" (per hsnN interface of a node) or "port" (per switch port)
    unit: str
    kind: str  # "counter" or "gauge"
    meaning: str
    driver_names: tuple[str, ...] = ()  # several: their sum is the field
    source: str = ""  # where the driver names are read

    @property
    def summed(self) -> bool:
        return len(self.driver_names) > 1

    @property
    def wraps_at(self) -> int | None:
        """The value a counter of this field wraps at, where known (Cassini telemetry items: 2**56)."""
        return CASSINI_COUNTER_WRAP if self.source == TELEMETRY and self.kind == COUNTER else None

    def as_dict(self) -> dict:
        return {"name": self.name, "scope": self.scope, "unit": self.unit, "kind": self.kind, "meaning": self.meaning,
                "driver_names": list(self.driver_names), "source": self.source}


TELEMETRY = "cxi telemetry (/sys/class/cxi/cxiN/device/telemetry/<item>)"
RETRY_HANDLER = "cxi retry handler (/var/run/cxi/cxiN/<stat>)"
NETDEV = "Ethernet netdev statistics (/sys/class/net/hsnN/statistics/<stat>)"
PORT_STATE = "cxi port state (/sys/class/cxi/cxiN/device/port/link)"
FABRIC = "fabric manager port counters (apps/telemetry/fabric.py)"

_FIELDS = [
    NetField("nic_tx_bytes", NIC, "bytes", COUNTER,
             "Bytes sent on the interface's Ethernet netdev (IP traffic over cxi-eth; libfabric RDMA traffic is not "
             "counted there, and Cassini telemetry has no verified octet counter)",
             ("netdev:tx_bytes",), NETDEV),
    NetField("nic_rx_bytes", NIC, "bytes", COUNTER,
             "Bytes received on the interface's Ethernet netdev (IP traffic only, as nic_tx_bytes)",
             ("netdev:rx_bytes",), NETDEV),
    NetField("nic_tx_packets", NIC, "packets", COUNTER,
             "Packets the NIC sent to the fabric, all traffic classes (sum of hni_pkts_sent_by_tc_0..7)",
             tuple(f"hni_pkts_sent_by_tc_{tc}" for tc in TRAFFIC_CLASSES), TELEMETRY),
    NetField("nic_rx_packets", NIC, "packets", COUNTER,
             "Packets the NIC received from the fabric, all traffic classes (sum of hni_pkts_recv_by_tc_0..7)",
             tuple(f"hni_pkts_recv_by_tc_{tc}" for tc in TRAFFIC_CLASSES), TELEMETRY),
    NetField("nic_retries", NIC, "requests", COUNTER,
             "Requests the NIC re-sent from its source retry buffer (a lossy link or a congested or refusing target)",
             ("pct_retry_srb_requests",), TELEMETRY),
    NetField("nic_link_down", NIC, "events", COUNTER,
             "Times the collector saw the NIC's link go from up to down (counted by the collector since it started)",
             (), PORT_STATE),
    NetField("nic_link_up", NIC, "state", GAUGE, "1 while the NIC's link is up, 0 while it is down",
             ("port:link",), PORT_STATE),
    NetField("nic_nacks", NIC, "NACKs", COUNTER, "NACKs the retry handler received for this NIC's requests",
             ("rh:nacks",), RETRY_HANDLER),
    NetField("nic_nacks_no_target_conn", NIC, "NACKs", COUNTER,
             "NACKs because the target NIC had no connection entry free (target overloaded by many senders)",
             ("pct_no_tct_nacks",), TELEMETRY),
    NetField("nic_spt_timeouts", NIC, "timeouts", COUNTER,
             "Requests the retry handler saw time out (source packet tracking timeouts)",
             ("rh:spt_timeouts",), RETRY_HANDLER),
    NetField("nic_tx_paused", NIC, "cycles", COUNTER,
             "Clock cycles the NIC's transmit side was paused by the switch, all traffic classes (congestion; "
             "sum of hni_tx_paused_0..7)",
             tuple(f"hni_tx_paused_{tc}" for tc in TRAFFIC_CLASSES), TELEMETRY),
    NetField("nic_rx_paused", NIC, "cycles", COUNTER,
             "Clock cycles the NIC's receive side was paused, all traffic classes (sum of hni_rx_paused_0..7)",
             tuple(f"hni_rx_paused_{tc}" for tc in TRAFFIC_CLASSES), TELEMETRY),
    NetField("nic_llr_replays", NIC, "events", COUNTER,
             "Link-level retry replays the NIC sent (bit errors on its link to the switch)",
             ("hni_llr_tx_replay_event",), TELEMETRY),
    NetField("nic_uncorrected_codewords", NIC, "codewords", COUNTER,
             "FEC codewords the NIC could not correct (a failing cable or port)",
             ("hni_pcs_uncorrected_cw",), TELEMETRY),
    NetField("port_tx_bytes", PORT, "bytes", COUNTER, "Bytes the switch port sent", (), FABRIC),
    NetField("port_rx_bytes", PORT, "bytes", COUNTER, "Bytes the switch port received", (), FABRIC),
    NetField("port_tx_packets", PORT, "packets", COUNTER, "Packets the switch port sent", (), FABRIC),
    NetField("port_rx_packets", PORT, "packets", COUNTER, "Packets the switch port received", (), FABRIC),
    NetField("port_errors", PORT, "errors", COUNTER, "Errors the switch port counted (uncorrected, dropped)",
             (), FABRIC),
    NetField("port_link_down", PORT, "events", COUNTER, "Times the switch port's link went down", (), FABRIC),
]

NET_FIELDS: dict[str, NetField] = {field.name: field for field in _FIELDS}
NIC_FIELDS = tuple(name for name, field in NET_FIELDS.items() if field.scope == NIC)
PORT_FIELDS = tuple(name for name, field in NET_FIELDS.items() if field.scope == PORT)
CANONICAL_NIC_FIELDS = ("nic_tx_bytes", "nic_rx_bytes", "nic_tx_packets", "nic_rx_packets", "nic_retries",
                        "nic_link_down")

_BY_DRIVER_NAME: dict[str, NetField] = {}
for _field in _FIELDS:
    for _driver in _field.driver_names:
        _BY_DRIVER_NAME[_driver] = _field
        if _driver.startswith("rh:"):
            _BY_DRIVER_NAME[_driver[3:]] = _field  # the retry handler's bare file name
del _field, _driver


def lookup_net(name) -> NetField:
    """The network field a canonical name or a driver name stands for; UnknownNetField otherwise."""
    if not isinstance(name, str):
        raise UnknownNetField(f"network field must be a name, not {type(name).__name__}")
    key = name.strip()
    found = NET_FIELDS.get(key) or _BY_DRIVER_NAME.get(key)
    if found is None:
        found = NET_FIELDS.get(key.lower()) or _BY_DRIVER_NAME.get(key.lower())
    if found is None:
        raise UnknownNetField(f"unknown network field {name!r}: use a canonical name ({', '.join(NET_FIELDS)}) or a "
                              "driver name that maps to one (GET /api/v1/telemetry/fields/ lists them)")
    return found


def canonical_net_name(name) -> str:
    """The canonical name to store a value reported under ``name``. A driver name that is only one part
    of a summed field is refused: its value alone is not the field's."""
    field = lookup_net(name)
    key = str(name).strip()
    if key != field.name and key.lower() != field.name and field.summed:
        raise UnknownNetField(f"{name!r} is one of {len(field.driver_names)} counters summed into {field.name}; "
                              f"send their sum as {field.name}")
    return field.name


def driver_sources(scope: str = NIC) -> dict[str, NetField]:
    """Driver name -> field for every field of ``scope`` the collector reads itself."""
    return {driver: field for field in _FIELDS if field.scope == scope for driver in field.driver_names}
