"""Software and firmware versions of nodes and GPUs as facts, and whether a set of nodes agrees on them.

A version is a **fact**, never a sample: one row per (host, GPU, key, value) with the first and the last
time it was seen (``apps.telemetry.models.VersionFact``). This module is the vocabulary and the reasoning;
the model and the services store what it returns.

Keys (``KEYS``), each with its level and its family:

* from DCGM's text fields (``fields.LABEL``; the collector reads them, dcgm-exporter prints them as labels
  such as ``DCGM_FI_DRIVER_VERSION="550.127.08"``, ``dcgmi dmon -e 1,85`` prints them in columns):
  ``driver`` (1), ``nvml`` (2), ``brand`` (51), ``serial`` (53), ``inforom_oem`` (56), ``inforom_ecc`` (80),
  ``inforom_power`` (81), ``inforom_image`` (82), ``vbios`` (85);
* from NVML or ``nvidia-smi`` (the collector, the pre-flight): ``cuda_driver``;
* the job's communication stack (the collector's ``--versions`` in the ``srun`` wrapper, the pre-flight):
  ``nccl``, ``ofi_nccl`` (the aws-ofi-nccl plugin), ``libfabric``, ``cxi`` (libfabric's CXI provider),
  ``image_digest`` (the container image of the job's EDF).

Node-level keys are stored with ``gpu = NODE`` (-1); GPU-level keys per GPU index. ``consistency`` compares the
nodes of a job (or a partition) key by key and names the minority nodes as a compressed hostlist:
"4 of 512 nodes run driver 550.54 while 508 run 560.35: nid[001200-001203]". Plain Python: no Django.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import hostlist

from . import fields

NODE = -1  # the gpu of a node-level fact

DRIVER, FIRMWARE, STACK, IDENTITY = "driver", "firmware", "communication stack", "identity"


@dataclass(frozen=True)
class Key:
    name: str
    label: str  # in words: "driver", "VBIOS"
    level: str  # "node" or "gpu"
    family: str  # DRIVER, FIRMWARE, STACK or IDENTITY (identities differ by nature: never compared)
    dcgm: int | None = None  # the DCGM text field it comes from


KEYS: dict[str, Key] = {key.name: key for key in (
    Key("driver", "driver", "node", DRIVER, 1),
    Key("cuda_driver", "CUDA driver", "node", DRIVER),
    Key("nvml", "NVML", "node", DRIVER, 2),
    Key("vbios", "VBIOS", "gpu", FIRMWARE, 85),
    Key("inforom_image", "InfoROM image", "gpu", FIRMWARE, 82),
    Key("inforom_oem", "OEM InfoROM", "gpu", FIRMWARE, 56),
    Key("inforom_ecc", "ECC InfoROM", "gpu", FIRMWARE, 80),
    Key("inforom_power", "power InfoROM", "gpu", FIRMWARE, 81),
    Key("nccl", "NCCL", "node", STACK),
    Key("ofi_nccl", "OFI NCCL plugin", "node", STACK),
    Key("libfabric", "libfabric", "node", STACK),
    Key("cxi", "CXI provider", "node", STACK),
    Key("image_digest", "container image", "node", STACK),
    Key("serial", "GPU serial", "gpu", IDENTITY, 53),
    Key("brand", "GPU brand", "gpu", IDENTITY, 51),
)}
BY_DCGM: dict[int, str] = {key.dcgm: key.name for key in KEYS.values() if key.dcgm is not None}
COMPARED = tuple(name for name, key in KEYS.items() if key.family != IDENTITY)
# What a pre-flight compares with its partition's expected set (the rest is reported, not required).
EXPECTED = ("driver", "cuda_driver", "vbios", "inforom_image")
MAX_VALUE = 200
_VALUE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]{0,198}[\x21-\x7e])?$")  # printable ASCII, no blanks at the ends


class VersionError(ValueError):
    """A key or value that is not a version fact; the message says which and why."""


@dataclass(frozen=True)
class Observation:
    """One reading of a version: ``host`` (and ``gpu``, ``NODE`` for the node) had ``value`` for ``key`` at ``seen``."""

    host: str
    gpu: int
    key: str
    value: str
    seen: datetime
    partition: str = ""


def key_for(name_or_field) -> str:
    """The key of a version name (``driver``) or of a DCGM text field (its id, current or legacy name)."""
    if isinstance(name_or_field, str) and name_or_field in KEYS:
        return name_or_field
    if isinstance(name_or_field, bool) or not isinstance(name_or_field, (str, int)):
        raise VersionError(f"a version key is text ({', '.join(KEYS)}), not {type(name_or_field).__name__}")
    try:
        known = fields.lookup(name_or_field)
    except fields.UnknownField:
        raise VersionError(f"{name_or_field!r} is not a version: use one of {', '.join(KEYS)} "
                           "or a DCGM text field (DCGM_FI_DRIVER_VERSION, DCGM_FI_DEV_VBIOS_VERSION, ...)") from None
    if known.id not in BY_DCGM:
        raise VersionError(f"{known.display_name} ({known.id}) is not a version text field")
    return BY_DCGM[known.id]


def clean_value(value) -> str:
    """The value as stored: printable ASCII of 1..200 characters, blanks at the ends dropped."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise VersionError(f"a version is text, not {type(value).__name__}")
    text = str(value).strip()
    if not text or len(text) > MAX_VALUE or not _VALUE.match(text):
        raise VersionError(f"a version is printable ASCII of 1 to {MAX_VALUE} characters, not {text[:40]!r}")
    if text.upper() in ("N/A", "[N/A]", "NOT SUPPORTED", "[NOT SUPPORTED]"):
        raise VersionError(f"{text!r} is no version")
    return text


def observation(host: str, gpu: int | None, key: str, value, seen: datetime, partition: str = "") -> Observation:
    """An :class:`Observation` with its key checked and its gpu at the key's level (node keys: ``NODE``)."""
    name = key_for(key)
    level = KEYS[name].level
    if level == "node":
        gpu = NODE
    elif gpu is None or gpu < 0:
        raise VersionError(f"{KEYS[name].label} is a GPU's version: give the GPU index")
    return Observation(host, int(gpu), name, clean_value(value), seen, partition or "")


def from_exporter_labels(labels: dict, host: str, gpu: int | None, seen: datetime) -> list[Observation]:
    """The text fields dcgm-exporter attaches to a sample as labels (``DCGM_FI_DRIVER_VERSION="550.127.08"``)."""
    found = []
    for label, value in labels.items():
        if not label.startswith("DCGM_FI_"):
            continue
        try:
            found.append(observation(host, gpu, key_for(label), value, seen))
        except VersionError:
            continue  # a non-version label or an empty value: not a fact
    return found


def hostlist_of(hosts) -> str:
    return hostlist.collect_hostlist(sorted(set(hosts))) if hosts else ""


# ---------------------------------------------------------------------------------------------
# A node's versions and whether nodes agree
# ---------------------------------------------------------------------------------------------
def node_values(facts) -> dict[str, dict[str, str]]:
    """{host: {key: value}} from current facts (dicts or objects with host, gpu, key, value). A GPU-level key
    whose GPUs disagree within the node reads "a / b" (sorted)."""
    per_gpu: dict[tuple[str, str], set[str]] = {}
    for fact in facts:
        get = fact.get if isinstance(fact, dict) else (lambda name, _f=fact: getattr(_f, name))
        per_gpu.setdefault((get("host"), get("key")), set()).add(get("value"))
    out: dict[str, dict[str, str]] = {}
    for (host, key), values in per_gpu.items():
        out.setdefault(host, {})[key] = " / ".join(sorted(values))
    return out


@dataclass(frozen=True)
class Minority:
    """Nodes that differ from the majority for one key."""

    key: str
    value: str
    hosts: tuple[str, ...]
    majority_value: str
    majority_count: int
    total: int  # nodes with a known value for the key

    @property
    def family(self) -> str:
        return KEYS[self.key].family

    @property
    def hostlist(self) -> str:
        return hostlist_of(self.hosts)

    @property
    def sentence(self) -> str:
        label = KEYS[self.key].label
        count = len(self.hosts)
        verb = "runs" if count == 1 else "run"
        node = "node" if self.total == 1 else "nodes"
        return (f"{count} of {self.total} {node} {verb} {label} {self.value} while {self.majority_count} "
                f"run {self.majority_value}: {self.hostlist}")

    def as_dict(self) -> dict:
        return {"key": self.key, "label": KEYS[self.key].label, "family": self.family, "value": self.value,
                "hosts": list(self.hosts), "hostlist": self.hostlist, "majority_value": self.majority_value,
                "majority_count": self.majority_count, "total": self.total, "sentence": self.sentence}


def majority(values: dict[str, str]) -> tuple[str, int] | None:
    """The most common value of {host: value} and its count; a tie goes to the value seen on the first host
    in name order (stable across calls). None when empty."""
    if not values:
        return None
    counts = Counter(values.values())
    first_host = {}
    for host in sorted(values):
        first_host.setdefault(values[host], host)
    value = min(counts, key=lambda v: (-counts[v], first_host[v]))
    return value, counts[value]


def consistency(values_by_host: dict[str, dict[str, str]], keys=COMPARED) -> list[Minority]:
    """Every minority of ``values_by_host`` ({host: {key: value}}), key by key in ``keys`` order, the smaller
    minorities first within a key. Nodes without a value for a key are not counted for it; a uniform set of
    nodes gives []."""
    out = []
    for key in keys:
        values = {host: row[key] for host, row in values_by_host.items() if key in row}
        top = majority(values)
        if top is None or len(set(values.values())) < 2:
            continue
        value, count = top
        others: dict[str, list[str]] = {}
        for host, other in values.items():
            if other != value:
                others.setdefault(other, []).append(host)
        for other, hosts in sorted(others.items(), key=lambda item: (len(item[1]), item[0])):
            out.append(Minority(key, other, tuple(sorted(hosts)), value, count, len(values)))
    return out


def expected_set(values_by_host: dict[str, dict[str, str]], keys=EXPECTED) -> dict[str, dict]:
    """The majority of each key over a partition's nodes: {key: {"value", "nodes", "of"}} (what a pre-flight checks)."""
    out = {}
    for key in keys:
        values = {host: row[key] for host, row in values_by_host.items() if key in row}
        top = majority(values)
        if top is not None:
            out[key] = {"value": top[0], "nodes": top[1], "of": len(values)}
    return out


@dataclass
class MapCell:
    """One (partition or group, key) of the fleet's version map: values with their node counts, most first."""

    values: list[tuple[str, int]] = field(default_factory=list)

    @property
    def mixed(self) -> bool:
        return len(self.values) > 1


def version_map(values_by_host: dict[str, dict[str, str]], where: dict[str, str], keys=COMPARED) -> dict[str, dict[str, list]]:
    """{place: {key: [[value, nodes], ...]}} with ``where`` = {host: place} (a partition or a dragonfly group);
    hosts with no place are under "". Values most common first."""
    cells: dict[str, dict[str, Counter]] = {}
    for host, row in values_by_host.items():
        place = where.get(host, "")
        for key in keys:
            if key in row:
                cells.setdefault(place, {}).setdefault(key, Counter())[row[key]] += 1
    return {place: {key: [[value, n] for value, n in sorted(counter.items(), key=lambda item: (-item[1], item[0]))]
                    for key, counter in per_key.items()}
            for place, per_key in sorted(cells.items())}


def drift(facts, keys=COMPARED, since=None) -> list[dict]:
    """Version changes over time from facts (host, gpu, key, value, first_seen): a fact that replaced an earlier value
    of the same host, GPU and key is a change (a node's first report is not). Per day, key and new value, how many
    nodes changed to it, oldest first: [{"day", "key", "label", "value", "nodes"}]; ``since``: changes from then on."""
    by_slot: dict[tuple, list] = {}
    for fact in facts:
        if fact["key"] in keys:
            by_slot.setdefault((fact["host"], fact.get("gpu", NODE), fact["key"]), []).append(fact)
    hosts: dict[tuple, set] = {}
    for (host, _gpu, key), rows in by_slot.items():
        rows.sort(key=lambda row: row["first_seen"])
        for earlier, row in zip(rows, rows[1:]):
            if row["value"] != earlier["value"] and (since is None or row["first_seen"] >= since):
                hosts.setdefault((row["first_seen"].date().isoformat(), key, row["value"]), set()).add(host)
    return [{"day": day, "key": key, "label": KEYS[key].label, "value": value, "nodes": len(changed)}
            for (day, key, value), changed in sorted(hosts.items())]
