"""Does a product's description promise what its schema holds? The measures its purpose and usage name
(power, temperature, utilisation, memory, …) must each be a column of its schema (by name, description or
DCGM field), so a page never promises data a product does not have (``dcgm-device`` once promised utilisation
and memory while its schema had power and temperature).

Plain Python: no Django.
"""
from __future__ import annotations

import re

# A measure a description may name -> words of which one must appear in a schema column (name or description).
MEASURES: dict[str, tuple[str, ...]] = {
    "power": ("power",),
    "energy": ("energy", "power"),
    "temperature": ("temperature", "temp"),
    "utilisation": ("util", "utilisation", "utilization", "active"),
    "utilization": ("util", "utilisation", "utilization", "active"),
    "memory": ("memory", "mem", "fb_", "dram"),
    "clock": ("clock",),
    "clocks": ("clock",),
    "fan": ("fan",),
    "ecc": ("ecc",),
    "xid": ("xid",),
    "tensor": ("tensor",),
    "dram": ("dram",),
    "nvlink": ("nvlink",),
    "pcie": ("pcie",),
    "bytes": ("bytes",),
    "packets": ("packets",),
    "congestion": ("congestion", "stall"),
    "score": ("score",),
}
# Words that, right before a measure, say the product does not hold it ("no utilisation", "not memory").
NEGATIONS = {"no", "not", "without"}
WORD = re.compile(r"[a-z][a-z0-9_]*")


def _schema_text(schema: list[dict], field_names: dict[int, str]) -> str:
    parts = []
    for column in schema:
        parts += [str(column.get("name") or ""), str(column.get("description") or "")]
        if column.get("field") is not None:
            parts.append(field_names.get(int(column["field"]), ""))
    return " ".join(parts).lower()


def unkept_promises(product: dict, field_names: dict[int, str] | None = None) -> list[str]:
    """The measures the description's purpose and usage name that no column of the schema holds, as sentences
    ("description.purpose names utilisation; the schema has no such column"). ``field_names``: DCGM id -> name."""
    text = _schema_text(product.get("schema") or [], field_names or {})
    problems = []
    for part in ("purpose", "usage"):
        words = WORD.findall(str((product.get("description") or {}).get(part) or "").lower())
        for index, word in enumerate(words):
            if word in MEASURES and (index == 0 or words[index - 1] not in NEGATIONS):
                if not any(hint in text for hint in MEASURES[word]):
                    problem = f"description.{part} names {word}; the schema has no such column"
                    if problem not in problems:
                        problems.append(problem)
    return problems
