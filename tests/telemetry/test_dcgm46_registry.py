"""The DCGM field registry against DCGM 4.6 itself (issue 34, acceptance 3): for every registry id, the name
DCGM 4.6's ``dcgm_fields.h`` gives it, the deprecated names it keeps for it, and the unit its field metadata
(``dcgm_fields.cpp``) states. The facts are an extract of the v4.6.0 sources, tests/telemetry/data/dcgm-4.6/
(README there: how and from which commit)."""
import csv
from pathlib import Path

import pytest

from apps.telemetry import fields

DATA = Path(__file__).parent / "data" / "dcgm-4.6" / "fields.csv"
ROWS = list(csv.DictReader(DATA.open(encoding="utf-8")))
BY_ID = {int(row["id"]): row for row in ROWS}


def test_every_registry_name_is_dcgm_46s():
    assert len(ROWS) == len(BY_ID) >= 130 and set(BY_ID) == set(fields.FIELDS)  # the extract covers the registry
    wrong = [f"{field_id}: registry {fields.FIELDS[field_id].name}, DCGM 4.6 {row['name']}"
             for field_id, row in BY_ID.items() if fields.FIELDS[field_id].name != row["name"]]
    # ... and every deprecated name 4.6 keeps for an id (its "renamed per DCGM Field Naming Standard" block)
    # resolves to that id.
    for field_id, row in BY_ID.items():
        for old in filter(None, row["deprecated_names"].split(";")):
            try:
                known = fields.lookup(old)
            except fields.UnknownField:
                wrong.append(f"{old} ({field_id}) is unknown")
                continue
            if known.id != field_id or old not in known.names:
                wrong.append(f"{old} resolves to {known.id} {known.name}, DCGM 4.6 says {field_id}")
    assert not wrong, "\n".join(wrong)


def test_tensor_pipe_fields_1013_to_1015_have_dcgm_46s_names():
    """dcgm_fields.h v4.6.0 lines 2611-2621: not ..._TENSOR_IMMA_UTIL_RATIO as the registry had it."""
    assert [fields.FIELDS[i].name for i in (1013, 1014, 1015)] == [
        "DCGM_FI_PROF_IMMA_UTIL_RATIO", "DCGM_FI_PROF_HMMA_UTIL_RATIO", "DCGM_FI_PROF_DFMA_UTIL_RATIO"]
    for field_id in (1013, 1014, 1015):
        assert fields.lookup(BY_ID[field_id]["name"]).id == field_id
    # Stored documents and saved queries may carry the registry's earlier spelling: it still resolves.
    for field_id, pipe in ((1013, "IMMA"), (1014, "HMMA"), (1015, "DFMA")):
        for name in (f"DCGM_FI_PROF_TENSOR_{pipe}_UTIL_RATIO", f"DCGM_FI_PROF_PIPE_TENSOR_{pipe}_ACTIVE"):
            assert fields.lookup(name).id == field_id and name in fields.FIELDS[field_id].names
        assert fields.FIELDS[field_id].display_name == f"DCGM_FI_PROF_PIPE_TENSOR_{pipe}_ACTIVE"


def test_every_unit_dcgms_metadata_states_is_the_registrys():
    """Where dcgm_fields.cpp gives a field a unit, the registry stores that unit ("#", dmon's "a number",
    says nothing about a text field such as the driver version, which the registry marks as text)."""
    stated = {field_id: row["unit"] for field_id, row in BY_ID.items() if row["unit"]}
    assert len(stated) >= 30  # C, W, mJ, KB/s, MB/s and # all occur
    wrong = []
    for field_id, unit in stated.items():
        known = fields.FIELDS[field_id]
        if unit == "#" and known.kind == fields.LABEL:
            assert known.unit == fields.TEXT
            continue
        if fields.DCGM_METADATA_UNITS.get(unit) != known.unit:
            wrong.append(f"{field_id} {known.name}: registry {known.unit!r}, DCGM metadata {unit!r}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("field_id", [440, 445, 449, 475, 480])
def test_nvlink_throughput_fields_are_mb_per_s_rates(field_id):
    """DCGM 4.6 states MB/s and publishes the average rate between two NVML counter reads
    (DcgmCacheManager::ReadAndCacheNvLinkBandwidth): a gauge, not a counter to difference."""
    known = fields.FIELDS[field_id]
    assert (known.unit, known.kind) == ("MB/s", fields.GAUGE)


def test_every_numeric_field_has_dcgms_dmon_tag():
    """A `dcgmi dmon -e <id>` table names its column by DCGM's short name: every field the registry stores
    (text fields are labels, never samples) resolves by it."""
    wrong = [f"{field.id}: registry {field.dmon}, DCGM {BY_ID[field.id]['dmon']}"
             for field in fields.FIELDS.values() if field.kind != fields.LABEL and field.dmon != BY_ID[field.id]["dmon"]]
    assert not wrong, "\n".join(wrong)
    assert fields.by_dmon_tag("SACLK").id == 110 and fields.by_dmon_tag("NVL17R").id == 1075
