"""Reading and writing topology files, and turning per-node discovery records into nodes.

Pure: must not import django.

Two input formats (documented in ``apps/topology/README.md``):

* **topology JSON** (``"format": "belvedere-topology/1"``): the whole system: nodes with their
  NICs, optional switches and global links;
* **discovery CSV**: one row per NIC, ``hostname,xname,nic,mac`` — what the Slurm prolog in
  ``deploy/slurm/`` sees on each node.

Parsers never stop at the first problem: they return every :class:`Problem` with its line, so a
bad file can be fixed in one pass, and nothing is imported while any problem remains.
"""
import csv
import io
import json
from dataclasses import dataclass

from apps.core.json_positions import LineDict, loads_with_lines

from .addresses import AddressError, decode_ama, parse_node_xname
from .model import GlobalLink, Nic, Node, Switch, Topology

FORMAT = "belvedere-topology/1"
CSV_COLUMNS = ("hostname", "xname", "nic", "mac")
MAX_NICS_PER_NODE = 8


@dataclass(frozen=True)
class Problem:
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = " ".join(part for part in (f"line {self.line}" if self.line else "", self.field or "") if part)
        return f"{where}: {self.message}" if where else self.message


class TopologyFormatError(ValueError):
    """The input has problems; ``problems`` lists all of them."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{len(problems)} problem(s)")
        self.problems = problems


# ---------------------------------------------------------------------------------------------
# Discovery records (one node as seen from the node itself)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiscoveredNic:
    name: str
    mac: str
    line: int | None = None


@dataclass(frozen=True)
class DiscoveryRecord:
    hostname: str
    nics: tuple[DiscoveredNic, ...]
    xname: str | None = None
    gpus: int | None = None
    gpu_model: str = ""
    line: int | None = None


def nic_index(name: str) -> int | None:
    """hsn3 → 3: the number of a Slingshot interface name (netdev hsnN); None for other names."""
    if not name.startswith("hsn"):
        return None
    digits = name[3:]
    return int(digits) if digits.isdigit() and len(digits) <= 2 else None


def node_from_discovery(record: DiscoveryRecord, field_prefix: str = "") -> tuple[Node | None, list[Problem]]:
    """Decode a discovery record: each NIC's MAC gives its group, switch and port."""
    problems: list[Problem] = []
    hostname = record.hostname.strip()
    if not hostname or any(character.isspace() for character in hostname) or len(hostname) > 64:
        problems.append(Problem(record.line, f"{field_prefix}hostname", f"{record.hostname!r} is not a hostname"))
    xname = None
    if record.xname:
        try:
            xname = str(parse_node_xname(record.xname))
        except AddressError as exc:
            problems.append(Problem(record.line, f"{field_prefix}xname", str(exc)))
    if not record.nics:
        problems.append(Problem(record.line, f"{field_prefix}nics", "a node needs at least one NIC to be placed on the network"))
    nics = []
    seen_indices: dict[int, str] = {}
    for position, discovered in enumerate(record.nics):
        where = f"{field_prefix}nics.{position}"
        index = nic_index(discovered.name)
        if index is None or index >= MAX_NICS_PER_NODE:
            problems.append(Problem(discovered.line or record.line, f"{where}.name",
                                    f"{discovered.name!r} is not a NIC name like hsn0-hsn{MAX_NICS_PER_NODE - 1}"))
            continue
        if index in seen_indices:
            problems.append(Problem(discovered.line or record.line, f"{where}.name", f"{discovered.name} appears twice"))
            continue
        seen_indices[index] = discovered.name
        try:
            address = decode_ama(discovered.mac)
        except AddressError as exc:
            problems.append(Problem(discovered.line or record.line, f"{where}.mac", str(exc)))
            continue
        nics.append(Nic(discovered.name, index, address.group, address.switch, address.port, address.mac))
    groups = sorted({nic.group for nic in nics})
    if len(groups) > 1:
        problems.append(Problem(record.line, f"{field_prefix}nics",
                                f"the NICs of {hostname} sit in different groups {groups}; a node belongs to one group"))
    if record.gpus is not None and not (0 <= record.gpus <= 16):
        problems.append(Problem(record.line, f"{field_prefix}gpus", f"{record.gpus} GPUs is not a plausible count (0-16)"))
    if problems:
        return None, problems
    cabinet = xname.split("c", 1)[0] if xname else None
    gpus = record.gpus if record.gpus is not None else len(nics)
    return Node(hostname, groups[0], tuple(sorted(nics, key=lambda nic: nic.index)), xname, cabinet, gpus, record.gpu_model), []


def parse_discovery_csv(text: str) -> list[DiscoveryRecord]:
    """Rows ``hostname,xname,nic,mac`` (header required; xname may be empty), grouped by host."""
    problems: list[Problem] = []
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise TopologyFormatError([Problem(1, None, "the file is empty; expected the header " + ",".join(CSV_COLUMNS))])
    header = [column.strip().lower() for column in header]
    missing = [column for column in ("hostname", "nic", "mac") if column not in header]
    if missing:
        raise TopologyFormatError([Problem(1, None, f"the header lacks {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}")])
    position = {column: header.index(column) for column in header if column in CSV_COLUMNS}
    rows: dict[str, dict] = {}
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            problems.append(Problem(line, None, f"expected {len(header)} columns ({','.join(header)}), found {len(row)}"))
            continue
        cell = {column: row[index].strip() for column, index in position.items()}
        hostname = cell["hostname"]
        entry = rows.setdefault(hostname, {"xname": "", "nics": [], "line": line})
        xname = cell.get("xname", "")
        if xname and entry["xname"] and xname != entry["xname"]:
            problems.append(Problem(line, "xname", f"{hostname} was given xname {entry['xname']} on line {entry['line']}, now {xname}"))
        entry["xname"] = entry["xname"] or xname
        entry["nics"].append(DiscoveredNic(cell["nic"], cell["mac"], line))
    if problems:
        raise TopologyFormatError(problems)
    return [
        DiscoveryRecord(hostname, tuple(entry["nics"]), entry["xname"] or None, None, "", entry["line"])
        for hostname, entry in rows.items()
    ]


def nodes_from_discovery(records: list[DiscoveryRecord], field_prefix: str = "") -> list[Node]:
    nodes, problems, seen = [], [], {}
    for position, record in enumerate(records):
        prefix = f"{field_prefix}.{position}." if field_prefix else ""
        if record.hostname in seen:
            problems.append(Problem(record.line, f"{prefix}hostname", f"{record.hostname} appears twice (first on line {seen[record.hostname]})"))
            continue
        seen[record.hostname] = record.line
        node, found = node_from_discovery(record, prefix)
        problems.extend(found)
        if node:
            nodes.append(node)
    if problems:
        raise TopologyFormatError(problems)
    return nodes


# ---------------------------------------------------------------------------------------------
# Topology JSON
# ---------------------------------------------------------------------------------------------
def _integer(value, line, field, low, high, problems) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(Problem(line, field, f"expected an integer, got {json.dumps(value)[:40]}"))
        return None
    if not low <= value <= high:
        problems.append(Problem(line, field, f"{value} is out of range {low}-{high}"))
        return None
    return value


def parse_topology_json(text: str) -> Topology:
    """Parse a ``belvedere-topology/1`` document; raise :class:`TopologyFormatError` listing every problem."""
    try:
        document = loads_with_lines(text)
    except json.JSONDecodeError as exc:
        raise TopologyFormatError([Problem(exc.lineno, None, f"not valid JSON: {exc.msg} (column {exc.colno})")]) from None
    if not isinstance(document, dict):
        raise TopologyFormatError([Problem(1, None, "the document must be a JSON object with a 'nodes' list")])
    problems: list[Problem] = []
    if document.get("format") != FORMAT:
        problems.append(Problem(document.line, "format", f"expected \"{FORMAT}\", got {json.dumps(document.get('format'))}"))
    unknown = sorted(set(document) - {"format", "name", "nodes", "switches", "global_links", "parameters"})
    if unknown:
        problems.append(Problem(document.line, None, f"unknown keys {unknown}"))
    raw_nodes = document.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        problems.append(Problem(document.line, "nodes", "must be a non-empty list of nodes"))
        raw_nodes = []

    nodes: list[Node] = []
    seen: dict[str, int] = {}
    for position, raw in enumerate(raw_nodes):
        where = f"nodes.{position}"
        line = raw.line if isinstance(raw, LineDict) else None
        problems_before = len(problems)
        if not isinstance(raw, dict):
            problems.append(Problem(line, where, "each node must be an object"))
            continue
        extra = sorted(set(raw) - {"hostname", "xname", "gpus", "gpu_model", "nics", "group"})
        if extra:
            problems.append(Problem(line, where, f"unknown keys {extra}"))
        hostname = raw.get("hostname")
        if not isinstance(hostname, str):
            problems.append(Problem(line, f"{where}.hostname", "missing or not a string"))
            continue
        if hostname in seen:
            problems.append(Problem(line, f"{where}.hostname", f"{hostname} appears twice (first on line {seen[hostname]})"))
            continue
        seen[hostname] = line
        gpus = raw.get("gpus")
        if gpus is not None:
            gpus = _integer(gpus, line, f"{where}.gpus", 0, 16, problems)
        raw_nics = raw.get("nics")
        if not isinstance(raw_nics, list):
            problems.append(Problem(line, f"{where}.nics", "must be a list of NICs"))
            continue
        explicit, discovered = [], []
        for nic_position, raw_nic in enumerate(raw_nics):
            nic_where = f"{where}.nics.{nic_position}"
            nic_line = raw_nic.line if isinstance(raw_nic, LineDict) else line
            if not isinstance(raw_nic, dict) or not isinstance(raw_nic.get("name"), str):
                problems.append(Problem(nic_line, nic_where, "each NIC must be an object with a 'name'"))
                continue
            if "mac" in raw_nic:
                discovered.append(DiscoveredNic(raw_nic["name"], raw_nic["mac"] if isinstance(raw_nic["mac"], str) else repr(raw_nic["mac"]), nic_line))
            else:
                # No algorithmic MAC (e.g. an older fabric): the position must be given outright.
                group = _integer(raw_nic.get("group"), nic_line, f"{nic_where}.group", 0, 511, problems)
                switch = _integer(raw_nic.get("switch"), nic_line, f"{nic_where}.switch", 0, 31, problems)
                port = _integer(raw_nic.get("port"), nic_line, f"{nic_where}.port", 0, 63, problems)
                index = nic_index(raw_nic["name"])
                if index is None:
                    problems.append(Problem(nic_line, f"{nic_where}.name", f"{raw_nic['name']!r} is not a NIC name like hsn0"))
                elif None not in (group, switch, port):
                    explicit.append(Nic(raw_nic["name"], index, group, switch, port, None))
        if discovered:
            record = DiscoveryRecord(hostname, tuple(discovered), raw.get("xname"), gpus, str(raw.get("gpu_model") or ""), line)
            node, found = node_from_discovery(record, f"{where}.")
            problems.extend(found)
            if node is None:
                continue
            nics = node.nics + tuple(explicit)
        else:
            nics = tuple(explicit)
            node = None
        if not nics:
            if len(problems) == problems_before:
                problems.append(Problem(line, f"{where}.nics", "a node needs at least one NIC to be placed on the network"))
            continue
        groups = sorted({nic.group for nic in nics})
        if len(groups) > 1:
            problems.append(Problem(line, f"{where}.nics", f"the NICs of {hostname} sit in different groups {groups}"))
            continue
        xname = node.xname if node else None
        if node is None and raw.get("xname"):
            try:
                xname = str(parse_node_xname(raw["xname"]))
            except AddressError as exc:
                problems.append(Problem(line, f"{where}.xname", str(exc)))
                continue
        nodes.append(Node(hostname, groups[0], tuple(sorted(nics, key=lambda nic: nic.index)), xname,
                          xname.split("c", 1)[0] if xname else None,
                          gpus if gpus is not None else len(nics), str(raw.get("gpu_model") or "")))

    switches = _parse_switches(document.get("switches", []), problems)
    links = _parse_links(document.get("global_links", []), problems)
    if problems:
        raise TopologyFormatError(problems)
    known = {(s.group, s.index) for s in switches}
    for node in nodes:
        for nic in node.nics:
            if (nic.group, nic.switch) not in known:
                known.add((nic.group, nic.switch))
                switches.append(Switch(nic.group, nic.switch, None))
    name = document.get("name") if isinstance(document.get("name"), str) else "imported"
    parameters = document.get("parameters") if isinstance(document.get("parameters"), dict) else {}
    return Topology(name, nodes, sorted(switches, key=lambda s: (s.group, s.index)), links, dict(parameters))


def _parse_switches(raw_switches, problems) -> list[Switch]:
    switches = []
    if not isinstance(raw_switches, list):
        problems.append(Problem(None, "switches", "must be a list"))
        return switches
    for position, raw in enumerate(raw_switches):
        line = raw.line if isinstance(raw, LineDict) else None
        if not isinstance(raw, dict):
            problems.append(Problem(line, f"switches.{position}", "each switch must be an object"))
            continue
        group = _integer(raw.get("group"), line, f"switches.{position}.group", 0, 511, problems)
        index = _integer(raw.get("switch"), line, f"switches.{position}.switch", 0, 31, problems)
        if group is not None and index is not None:
            switches.append(Switch(group, index, raw.get("xname") if isinstance(raw.get("xname"), str) else None))
    return switches


def _parse_links(raw_links, problems) -> list[GlobalLink]:
    links = []
    if not isinstance(raw_links, list):
        problems.append(Problem(None, "global_links", "must be a list"))
        return links
    for position, raw in enumerate(raw_links):
        where = f"global_links.{position}"
        line = raw.line if isinstance(raw, LineDict) else None
        ends = [raw.get(end) if isinstance(raw, dict) else None for end in ("a", "b")]
        if not all(isinstance(end, list) and len(end) == 2 for end in ends):
            problems.append(Problem(line, where, 'expected {"a": [group, switch], "b": [group, switch], "links": n}'))
            continue
        (ga, sa), (gb, sb) = ends
        values = [
            _integer(ga, line, f"{where}.a.0", 0, 511, problems), _integer(sa, line, f"{where}.a.1", 0, 31, problems),
            _integer(gb, line, f"{where}.b.0", 0, 511, problems), _integer(sb, line, f"{where}.b.1", 0, 31, problems),
            _integer(raw.get("links", 1), line, f"{where}.links", 1, 64, problems),
        ]
        if None in values:
            continue
        if values[0] == values[2]:
            problems.append(Problem(line, where, "a global link joins two different groups"))
            continue
        links.append(GlobalLink(*values))
    return links


def topology_to_json(topology: Topology) -> str:
    """Write a topology in the ``belvedere-topology/1`` format (what the parser reads back)."""
    document = {
        "format": FORMAT,
        "name": topology.name,
        "parameters": topology.parameters,
        "switches": [{"group": s.group, "switch": s.index, "xname": s.xname} for s in topology.switches],
        "global_links": [{"a": [l.group_a, l.switch_a], "b": [l.group_b, l.switch_b], "links": l.links} for l in topology.global_links],
        "nodes": [
            {
                "hostname": node.hostname,
                "xname": node.xname,
                "gpus": node.gpus,
                "gpu_model": node.gpu_model,
                "nics": [
                    {"name": nic.name, "mac": nic.mac} if nic.mac else
                    {"name": nic.name, "group": nic.group, "switch": nic.switch, "port": nic.port}
                    for nic in node.nics
                ],
            }
            for node in topology.nodes
        ],
    }
    lines = ["{"]
    keys = list(document)
    for position, key in enumerate(keys):
        comma = "," if position < len(keys) - 1 else ""
        value = document[key]
        if isinstance(value, list):
            # One item per line keeps diffs readable and error line numbers meaningful.
            lines.append(f'  "{key}": [')
            lines.extend(f"    {json.dumps(item)}{',' if i < len(value) - 1 else ''}" for i, item in enumerate(value))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f'  "{key}": {json.dumps(value)}{comma}')
    lines.append("}")
    return "\n".join(lines) + "\n"
