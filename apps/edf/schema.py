"""The EDF JSON Schema served at /edf/schema.json, built from the validator's vocabulary.

For editors that validate TOML against JSON Schema (Taplo / Even Better TOML, IntelliJ): types,
allowed annotation values and descriptions, so completion and hover work outside the portal too.
The schema can only say what a schema can: the rules about combinations (hooks that need a
writable container, inheritance, variables, mount syntax) live in the validator. Unknown keys are
allowed, as the Container Engine ignores them (the validator warns).
"""
from __future__ import annotations

from .vocabulary import ANNOTATIONS, ARRAY, BOOLEAN, FIELDS, STRING, TABLE

SCHEMA_ID = "https://belvedere.invalid/edf/schema.json"

_PORT = r"^([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
_ABSOLUTE = r"^[/$]\S*\s*$"


def _kind_schema(kind: str, items: str | None) -> dict:
    if kind == ARRAY:
        return {"type": "array", "items": {"type": items}}
    if kind == TABLE:
        return {"type": "object"}
    return {"type": kind}


def _annotation_leaf(spec) -> dict:
    leaf = {"type": STRING, "description": spec.doc}
    if spec.kind == "enum":
        leaf["enum"] = list(spec.values) + list(spec.retired)
    elif spec.kind == "port":
        leaf["pattern"] = _PORT
    elif spec.kind == "path":
        leaf["pattern"] = _ABSOLUTE
    return leaf


def _annotations_schema() -> dict:
    """Nested objects, as TOML builds them from both spellings (dotted keys or [annotations.com.hooks.X])."""
    root: dict = {"type": "object", "description": FIELDS["annotations"].doc, "properties": {},
                  "additionalProperties": {"$ref": "#/$defs/annotationValue"}}
    for flat, spec in ANNOTATIONS.items():
        node = root
        parts = flat.split(".")
        for part in parts[:-1]:
            node = node["properties"].setdefault(part, {
                "type": "object", "properties": {}, "additionalProperties": {"$ref": "#/$defs/annotationValue"}})
        node["properties"][parts[-1]] = _annotation_leaf(spec)
        # A quoted key ("com.hooks.ssh.enabled" = "true") names the same annotation.
        root["properties"][flat] = _annotation_leaf(spec)
    return root


def edf_json_schema(schema_id: str = SCHEMA_ID) -> dict:
    properties = {}
    for key, spec in FIELDS.items():
        if key == "annotations":
            properties[key] = _annotations_schema()
            continue
        variants = [_kind_schema(kind, spec.items) for kind in spec.kinds]
        prop = variants[0] if len(variants) == 1 else {"anyOf": variants}
        prop["description"] = spec.doc
        if spec.default not in (None, "", [], {}):
            prop["default"] = spec.default
        if key == "env":
            prop["additionalProperties"] = {"type": STRING}
        properties[key] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": "Environment Definition File (EDF)",
        "description": "TOML container environment for srun --environment (CSCS Container Engine). "
                       "Checked more thoroughly by the portal's validator.",
        "type": "object",
        "properties": properties,
        "additionalProperties": True,
        "$defs": {"annotationValue": {"anyOf": [{"type": STRING}, {"type": "object", "additionalProperties": {
            "$ref": "#/$defs/annotationValue"}}]}},
    }
