"""Switch port counters from the HPE Slingshot fabric manager, as rows of the network-samples table.

Plain Python: no Django (pandas and the topology's address parser only).

What the fabric manager exports
-------------------------------
The fabric manager collects the Rosetta switches' port counters and publishes them as Redfish-style
telemetry events (``GET /metrics`` of its telemetry API, the ``cray-fabric-perf-telemetry`` Kafka topic,
hmcollector dumps). One event, as it appears in public consumers of that stream (HPE's hms-hmcollector
routes ``CrayFabricPerfTelemetry*`` MessageIds to that topic; Intel's UCS tests parse recorded events;
ORNL's Frontier notes describe the tags)::

    {"metrics": {"messages": [{"Events": [{
        "EventTimestamp": "2026-11-24T10:00:00.000Z",
        "MessageId": "CrayFabricPerfTelemetry.RFC3635",
        "Oem": {"TelemetrySource": "FabricPerf", "Sensors": [
            {"Timestamp": "2026-11-24T10:00:00.000Z", "Location": "x1000c0r3a0l40",
             "PhysicalContext": "IfHCOutOctets", "DeviceSpecificContext": "global",
             "Index": 0, "SubIndex": 40, "ParentalIndex": 0, "Value": "123456789"}]}}]}]}}

* ``Location`` names the port: the switch xname (``xXcCrR``, optionally ``…bB``) followed by ``aAlL``
  (ASIC A, link L: the link number is taken as the ASIC port, 0-63) or ``jJpP`` (front-panel jack J,
  lane P: kept as the port name ``jJpP``; which ASIC port a jack is needs the cabling map). A Location
  that is only the switch takes its port from ``SubIndex`` (in the recorded events ``…l12`` comes with
  ``SubIndex`` 12). The port name stored is ``p<ASIC port>`` (``p40``) or ``jJpP``.
* ``PhysicalContext`` is the IF-MIB / RFC 3635 counter name; ``Value`` is a decimal string (numbers are
  accepted too), cumulative as the switch counts it.
* ``DeviceSpecificContext`` says what the port is cabled to: ``edge``/``cassini`` (a NIC), ``local``
  (a switch of the same group), ``global`` (another group), ``ieee`` (Ethernet). Kept per port in
  :attr:`FabricImport.ports`.
* Other metrics of the same stream (``Congestion`` ``txBW_global``, ``PauseDetails``, …) are not
  counters of this table: they are counted in ``skipped``, never errors.

Verified: the envelope, the sensor keys and the counter names (public recorded events and consumers).
Not verified (no public primary source found): the exact meaning of ``Index``/``SubIndex``/
``ParentalIndex`` for switch ports, and whether the ``…aAlL`` link number equals the ASIC port number.

Modelled, not verified: ``Peer``. The fabric manager's events carry no link peer (its topology file
``fabric_template.json`` does). A sensor may carry ``"Peer": "<switch xname>"`` or
``"<switch xname>:<port>"`` — Belvedere's own extension, for sites that join the two — and it places the
port on the topology without the cabling convention of :mod:`apps.topology.link_load`.

The same events may also be sent as several JSON documents one after another (a Kafka or hmcollector
dump, one document per line): each is read on its own, and a malformed one costs only itself.

Rows
----
``host`` = switch xname (the blade, ``x1000c0r3``; a ``…b0`` controller suffix is dropped so it matches
the topology), ``nic`` = port name, fields (cumulative counters, as reported):

==================  =======================================================================
port_tx_bytes       IfHCOutOctets (IfOutOctets when the 64-bit counter is absent)
port_rx_bytes       IfHCInOctets (IfInOctets)
port_tx_packets     IfHCOutUcastPkts + IfHCOutMulticastPkts + IfHCOutBroadcastPkts (32-bit names likewise)
port_rx_packets     IfHCInUcastPkts + IfHCInMulticastPkts + IfHCInBroadcastPkts
port_errors         IfInErrors + IfOutErrors
port_link_down      LinkDownCount / linkDownCount (a counter of link-down events; name modelled, not verified)
==================  =======================================================================

Components of one field reported at the same time are summed; a field's 64-bit name wins over its 32-bit one.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field as dataclass_field
from datetime import datetime, timezone

import pandas as pd

from apps.core.json_positions import LineDict, TooDeep, loads_with_lines
from apps.topology.addresses import AddressError, parse_switch_xname

from .backends.base import NET_COLUMNS

__all__ = ["FabricImport", "PortInfo", "COUNTERS", "PORT_FIELDS", "MAX_BYTES", "parse_fabric_export",
           "port_number", "counter_rates"]

MAX_BYTES = 64 * 1024 * 1024  # text larger than this is refused whole (the view's own limit is usually lower)
MAX_SENSORS = 2_000_000  # sensors read per text; the rest are reported once
MAX_ERRORS = 1000  # errors kept (all are counted)
COUNTER_WRAP = 2.0 ** 64  # Rosetta RFC 3635 "HC" counters are 64 bits wide

PORT_FIELDS = ("port_tx_bytes", "port_rx_bytes", "port_tx_packets", "port_rx_packets", "port_errors", "port_link_down")

# PhysicalContext -> (field, component, priority): components of one field are summed; of one component the
# higher priority (the 64-bit counter) wins.
COUNTERS: dict[str, tuple[str, str, int]] = {
    "IfHCOutOctets": ("port_tx_bytes", "octets", 2), "IfOutOctets": ("port_tx_bytes", "octets", 1),
    "IfHCInOctets": ("port_rx_bytes", "octets", 2), "IfInOctets": ("port_rx_bytes", "octets", 1),
    "IfHCOutUcastPkts": ("port_tx_packets", "ucast", 2), "IfOutUcastPkts": ("port_tx_packets", "ucast", 1),
    "IfHCOutMulticastPkts": ("port_tx_packets", "mcast", 2), "IfOutMulticastPkts": ("port_tx_packets", "mcast", 1),
    "IfHCOutBroadcastPkts": ("port_tx_packets", "bcast", 2), "IfOutBroadcastPkts": ("port_tx_packets", "bcast", 1),
    "IfHCInUcastPkts": ("port_rx_packets", "ucast", 2), "IfInUcastPkts": ("port_rx_packets", "ucast", 1),
    "IfHCInMulticastPkts": ("port_rx_packets", "mcast", 2), "IfInMulticastPkts": ("port_rx_packets", "mcast", 1),
    "IfHCInBroadcastPkts": ("port_rx_packets", "bcast", 2), "IfInBroadcastPkts": ("port_rx_packets", "bcast", 1),
    "IfInErrors": ("port_errors", "in", 1), "IfOutErrors": ("port_errors", "out", 1),
    "LinkDownCount": ("port_link_down", "down", 1), "linkDownCount": ("port_link_down", "down", 1),
}
_COUNTERS_LOWER = {name.lower(): value for name, value in COUNTERS.items()}
PORT_KINDS = {"edge": "edge", "cassini": "edge", "local": "local", "global": "global", "ieee": "ieee"}

_LOCATION = re.compile(r"(?P<switch>x\d+c\d+r\d+(?:b\d+)?)(?:a(?P<asic>\d+)l(?P<link>\d+)|(?P<jack>j\d+p\d+))?")
_NEXT_DOCUMENT = re.compile(r"\n[\[{]")
_PEER = re.compile(r"(?P<switch>x\d+c\d+r\d+(?:b\d+)?)(?:(?::|a\d+l)(?P<port>\d+))?")


@dataclass(frozen=True)
class PortInfo:
    """What the export says about one port besides its counters."""

    kind: str | None = None  # edge | local | global | ieee (DeviceSpecificContext), None when not given
    peer: str | None = None  # the switch xname at the other end (the Peer extension), None when not given
    peer_port: int | None = None


@dataclass
class FabricImport:
    """The counters read (``NET_COLUMNS``), the problems (``{"line", "column", "message"}``), what was skipped."""

    frame: pd.DataFrame
    errors: list[dict] = dataclass_field(default_factory=list)
    error_count: int = 0
    sensors: int = 0  # sensor objects read (good, bad and skipped)
    skipped: int = 0  # sensors that are not port counters of this table (congestion, pause metrics)
    ports: dict[tuple[str, str], PortInfo] = dataclass_field(default_factory=dict)

    @property
    def rejected(self) -> int:
        return self.error_count


def port_number(name: str) -> int | None:
    """The ASIC port of a stored port name (``p40`` -> 40); None for jack names (``j17p0``)."""
    if isinstance(name, str) and name.startswith("p") and name[1:].isdecimal():
        return int(name[1:])
    return None


class _Errors:
    def __init__(self, limit: int):
        self.items: list[dict] = []
        self.count = 0
        self.limit = limit

    def add(self, line, column, message: str) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append({"line": line, "column": column, "message": message})


def _timestamp(value) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if isinstance(value, bool) or value is None:
        raise ValueError("a time is required (ISO 8601 or seconds since the epoch)")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{value!r} is not a time")
        seconds = float(value)
        for scale in (1, 1e3, 1e6, 1e9):  # seconds, ms, µs or ns since the epoch
            if seconds / scale < 1e11:
                return _within_years(datetime.fromtimestamp(seconds / scale, tz=timezone.utc), value)
    if isinstance(value, str) and len(value) <= 64:
        text = value.strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            pass
        else:
            return _within_years(moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment, value)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "…"
    raise ValueError(f"{shown} is not a time (ISO 8601 like 2026-11-24T10:00:00Z, or seconds since the epoch)")


_EARLIEST, _LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2200, 1, 1, tzinfo=timezone.utc)


def _within_years(moment: datetime, given) -> datetime:
    """``moment`` in UTC; a ValueError (that line's error, the others kept) outside 2000..2200, whose times no
    switch sent and which past 2262 no pandas Timestamp holds (past 9999 in UTC, not even a datetime)."""
    if not _EARLIEST <= moment <= _LATEST:
        shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:40] + "…"
        raise ValueError(f"{shown} is not between 2000 and 2200")
    return moment.astimezone(timezone.utc)


def _value(value) -> float:
    if isinstance(value, bool):
        raise ValueError("a counter value, not a boolean")
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"\d{1,25}(\.\d+)?", text):
            raise ValueError(f"{value[:40]!r} is not a counter value (a non-negative number)")
        return float(text)
    if isinstance(value, (int, float)) and math.isfinite(value) and value >= 0:
        return float(value)
    raise ValueError(f"{value!r} is not a counter value (a non-negative number)")


def _switch(text: str) -> str:
    return str(parse_switch_xname(text).blade_xname)


def _location(sensor: dict) -> tuple[str, str]:
    location = sensor.get("Location")
    if not isinstance(location, str) or not location.strip():
        raise ValueError("Location is required: the port's xname (x1000c0r3a0l40) or the switch's with SubIndex")
    match = _LOCATION.fullmatch(location.strip().lower())
    if not match:
        raise ValueError(f"Location {location[:60]!r} is not a switch port (x<cabinet>c<chassis>r<switch>a<asic>l<link> "
                         "or …j<jack>p<lane>)")
    try:
        switch = _switch(match["switch"])
    except AddressError as exc:
        raise ValueError(f"Location: {exc}") from None
    if match["link"] is not None:
        port = int(match["link"])
    elif match["jack"] is not None:
        return switch, match["jack"]
    else:
        port = sensor.get("SubIndex")
        if isinstance(port, bool) or not isinstance(port, int):
            raise ValueError(f"Location {location[:60]!r} names only the switch and SubIndex gives no port number")
    if not 0 <= port <= 63:
        raise ValueError(f"port {port} out of range 0-63 (a Rosetta switch has 64 ports)")
    return switch, f"p{port}"


def _peer(value) -> tuple[str, int | None]:
    if not isinstance(value, str):
        raise ValueError("Peer must be the switch xname at the other end (x1005c2r1 or x1005c2r1:41)")
    match = _PEER.fullmatch(value.strip().lower())
    if not match:
        raise ValueError(f"Peer {value[:60]!r} is not a switch xname (x1005c2r1 or x1005c2r1:41)")
    try:
        switch = _switch(match["switch"])
    except AddressError as exc:
        raise ValueError(f"Peer: {exc}") from None
    return switch, (int(match["port"]) if match["port"] is not None else None)


def _events(document, line: int, errors: _Errors):
    """(event, line) for each event of a document in any of the accepted envelopes."""
    if isinstance(document, list):
        for item in document:
            yield from _events(item, getattr(item, "line", line), errors)
        return
    if not isinstance(document, dict):
        errors.add(line, None, "expected a JSON object with metrics.messages[].Events[], or Events[]")
        return
    if "metrics" in document:
        metrics = document["metrics"]
        messages = metrics.get("messages") if isinstance(metrics, dict) else None
        if not isinstance(messages, list):
            errors.add(getattr(metrics, "line", line), "messages", "metrics.messages must be a list of messages")
            return
        for message in messages:
            yield from _events(message, getattr(message, "line", line), errors)
        return
    if "messages" in document:
        yield from _events({"metrics": {"messages": document["messages"]}}, line, errors)
        return
    if "Events" in document:
        events = document["Events"]
        if not isinstance(events, list):
            errors.add(line, "Events", "Events must be a list of events")
            return
        for event in events:
            if isinstance(event, dict):
                yield event, getattr(event, "line", line)
            else:
                errors.add(line, "Events", "each event must be an object with Oem.Sensors")
        return
    if "Oem" in document or "MessageId" in document:
        yield document, line
        return
    errors.add(line, None, "expected metrics.messages[].Events[] (the fabric manager's telemetry events); "
                           f"found keys {', '.join(sorted(map(str, document))[:6]) or 'none'}")


def _documents(text: str, errors: _Errors):
    """(document, first line) for each JSON document of ``text``; malformed ones become errors."""
    decoder = json.JSONDecoder()
    position, size = 0, len(text)
    while True:
        while position < size and text[position] in " \t\r\n":
            position += 1
        if position >= size:
            return
        first_line = text.count("\n", 0, position) + 1
        try:
            _, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            # Resynchronise at the next line that opens a document at its first column (a dump's documents
            # start there; a pretty-printed document's inner lines are indented): the next one still counts.
            following = _NEXT_DOCUMENT.search(text, position + 1)
            if following is not None and following.start() < exc.pos:
                next_line = text.count("\n", 0, following.start() + 1) + 1
                errors.add(first_line, 1, f"malformed JSON: the document starting here is not complete before the "
                                          f"next one starts on line {next_line}")
            else:
                errors.add(exc.lineno, exc.colno, f"malformed JSON: {exc.msg}")
            if following is None:
                return
            position = following.start() + 1
            continue
        except RecursionError:
            errors.add(first_line, None, "malformed JSON: nested too deeply to read")
            return
        try:
            document = loads_with_lines(text[position:end])
        except TooDeep as exc:
            errors.add(first_line + exc.lineno - 1, None, f"malformed JSON: {exc.msg}")
            position = end
            continue
        yield document, first_line
        position = end


def _shift_lines(value, offset: int):
    """Make the object lines of a document absolute (its lines count from its own first line)."""
    if isinstance(value, LineDict):
        value.line += offset
        for item in value.values():
            _shift_lines(item, offset)
    elif isinstance(value, list):
        for item in value:
            _shift_lines(item, offset)


def parse_fabric_export(text: str, *, cluster: str, ts=None, max_bytes: int = MAX_BYTES,
                        max_errors: int = MAX_ERRORS, max_sensors: int = MAX_SENSORS) -> FabricImport:
    """The port counters in ``text`` (the fabric manager's telemetry events, see the module docstring).

    Every good sensor is kept; each bad one is an error with its line and the key at fault. ``ts`` (a
    datetime) stands in for sensors and events that carry no time. ``ValueError`` only when the text as a
    whole cannot be used (too large, empty, no cluster)."""
    if not cluster:
        raise ValueError("a cluster name is required")
    if len(text) > max_bytes:  # characters >= bytes / 4; the caller bounds bytes, this bounds the parse
        raise ValueError(f"the export has {len(text):,} characters; at most {max_bytes:,} are read at once "
                         "(send one export per switch group or time step)")
    if not text.strip():
        raise ValueError("the export is empty")
    errors = _Errors(max_errors)
    values: dict[tuple, tuple[int, float]] = {}
    ports: dict[tuple[str, str], PortInfo] = {}
    sensors = skipped = 0
    for document, first_line in _documents(text, errors):
        _shift_lines(document, first_line - 1)
        for event, event_line in _events(document, first_line, errors):
            oem = event.get("Oem")
            found = oem.get("Sensors") if isinstance(oem, dict) else None
            if not isinstance(found, list):
                errors.add(getattr(oem, "line", event_line), "Sensors", "an event needs Oem.Sensors, a list of sensors")
                continue
            event_ts = event.get("EventTimestamp")
            for sensor in found:
                sensors += 1
                if sensors > max_sensors:
                    if sensors == max_sensors + 1:
                        errors.add(getattr(sensor, "line", event_line), None,
                                   f"more than {max_sensors:,} sensors in one export; the rest were not read")
                    continue
                line = getattr(sensor, "line", event_line)
                if not isinstance(sensor, dict):
                    errors.add(event_line, "Sensors", "each sensor must be an object")
                    continue
                name = sensor.get("PhysicalContext")
                if not isinstance(name, str):
                    errors.add(line, "PhysicalContext", "PhysicalContext (the counter's name, e.g. IfHCOutOctets) is required")
                    continue
                counter = COUNTERS.get(name) or _COUNTERS_LOWER.get(name.lower())
                if counter is None:
                    skipped += 1
                    continue
                column = "Location"
                try:
                    switch, port = _location(sensor)
                    column = "Value"
                    value = _value(sensor.get("Value"))
                    column = "Timestamp"
                    given = sensor.get("Timestamp", event_ts)
                    moment = _timestamp(given if given is not None else ts)
                    column = "Peer"
                    peer = _peer(sensor["Peer"]) if sensor.get("Peer") is not None else (None, None)
                except ValueError as exc:
                    errors.add(line, column, str(exc))
                    continue
                context = sensor.get("DeviceSpecificContext")
                kind = PORT_KINDS.get(context.lower()) if isinstance(context, str) else None
                known = ports.get((switch, port))
                if known is None or (kind and not known.kind) or (peer[0] and not known.peer):
                    ports[(switch, port)] = PortInfo(kind or (known.kind if known else None),
                                                     peer[0] or (known.peer if known else None),
                                                     peer[1] if peer[0] else (known.peer_port if known else None))
                field, component, priority = counter
                key = (moment, switch, port, field, component)
                held = values.get(key)
                if held is None or priority >= held[0]:
                    values[key] = (priority, value)
    summed: dict[tuple, float] = {}
    for (moment, switch, port, field, _component), (_priority, value) in values.items():
        summed[(moment, switch, port, field)] = summed.get((moment, switch, port, field), 0.0) + value
    frame = pd.DataFrame({
        "ts": pd.to_datetime([key[0] for key in summed], utc=True),
        "cluster": pd.Series([cluster] * len(summed), dtype=object),
        "host": pd.Series([key[1] for key in summed], dtype=object),
        "nic": pd.Series([key[2] for key in summed], dtype=object),
        "field": pd.Series([key[3] for key in summed], dtype=object),
        "value": pd.Series(list(summed.values()), dtype="float64"),
    })[NET_COLUMNS]
    if len(frame):
        frame = frame.sort_values(["host", "nic", "field", "ts"], kind="stable").reset_index(drop=True)
    return FabricImport(frame=frame, errors=errors.items, error_count=errors.count, sensors=sensors,
                        skipped=skipped, ports=ports)


def counter_rates(frame: pd.DataFrame, *, wrap: float = COUNTER_WRAP) -> pd.DataFrame:
    """Per (host, nic, field) of a ``NET_COLUMNS`` frame of cumulative counters: the mean rate over its samples
    (units per second) as columns host, nic, field, rate, seconds, samples.

    A value lower than the one before is a reset (the counter restarted from zero: its new value is the
    increase) unless the drop is explained by a wrap at ``wrap``; a series with one sample has no rate."""
    columns = ["host", "nic", "field", "rate", "seconds", "samples"]
    if frame is None or not len(frame):
        return pd.DataFrame({column: [] for column in columns})
    data = frame.sort_values(["host", "nic", "field", "ts"], kind="stable")
    same = (data["host"].eq(data["host"].shift()) & data["nic"].eq(data["nic"].shift())
            & data["field"].eq(data["field"].shift()))
    value = data["value"].astype("float64")
    step = value - value.shift()
    wrapped = (step < 0) & (value.shift() > wrap * 0.75)
    step = step.where(step >= 0, value.where(~wrapped, value + wrap - value.shift()))
    seconds = (data["ts"] - data["ts"].shift()).dt.total_seconds()
    work = pd.DataFrame({"host": data["host"], "nic": data["nic"], "field": data["field"],
                         "increase": step.where(same, 0.0), "seconds": seconds.where(same, 0.0),
                         "samples": 1})
    grouped = work.groupby(["host", "nic", "field"], sort=True).agg(
        increase=("increase", "sum"), seconds=("seconds", "sum"), samples=("samples", "sum")).reset_index()
    grouped = grouped[grouped["seconds"] > 0]
    grouped["rate"] = grouped["increase"] / grouped["seconds"]
    return grouped[columns].reset_index(drop=True)
