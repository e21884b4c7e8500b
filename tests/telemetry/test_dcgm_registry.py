"""Every field of dcgm-exporter's shipped counter lists resolves in the DCGM field registry.

The lists are read as shipped (tests/telemetry/data/dcgm-exporter/, copied verbatim; README there says
from which commit): ``DCGM FIELD, Prometheus metric type, help message``, ``#`` starts a comment. The
exporter also ships fields commented out (``# DCGM_FI_...,  counter, ...``) that sites switch on; those
must resolve too. A type the CSV declares as ``counter`` must be the registry's kind, except where the
CSV is known to be wrong about DCGM (listed below with the reason)."""
from pathlib import Path

import pytest

from apps.telemetry import fields

DATA = Path(__file__).parent / "data" / "dcgm-exporter"
LISTS = ("dcp-metrics-included.csv", "default-counters.csv")

# Where the CSV's declared type is not what DCGM reports: the registry follows DCGM.
CSV_TYPE_IS_WRONG = {
    # NVML's PCIe throughput: KB/s measured by the driver over a short window, a rate.
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT": "gauge",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT": "gauge",
    # Commented out as "counter" in one block, shipped active as "gauge" (bytes per second) below it.
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
    # Pages waiting for the next GPU reset: the reset clears it, so it is not monotonic.
    "DCGM_FI_DEV_RETIRED_PENDING": "gauge",
    # NVLink throughput: DCGM states MB/s and publishes the average rate between two reads of NVML's counters
    # (DCGM v4.6.0 DcgmCacheManager::ReadAndCacheNvLinkBandwidth; 4.6 renamed them ..._THROUGHPUT_...).
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": "gauge",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0": "gauge",
}


def read_list(path: Path, *, commented: bool) -> list[tuple[int, str, str]]:
    """(line number, field name, declared type) of each field line; ``commented`` gives the
    switched-off ``# DCGM_FI_...`` lines instead of the active ones."""
    entries = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if not commented:
                continue
            line = line[1:].strip()
            if not line.startswith("DCGM_FI_"):
                continue  # a real comment ("# Clocks", "# Format")
        elif commented:
            continue
        cells = [cell.strip() for cell in line.split(",")]
        assert len(cells) >= 2, f"{path.name}:{number}: expected 'FIELD, type, help', got {raw!r}"
        entries.append((number, cells[0], cells[1]))
    return entries


def all_entries(commented: bool):
    return [(name, number, field, kind) for name in LISTS
            for number, field, kind in read_list(DATA / name, commented=commented)]


def test_the_lists_are_the_shipped_files():
    """Guards against an empty or truncated copy making the other tests pass vacuously."""
    active = {field for _, _, field, _ in all_entries(False)}
    switched_off = {field for _, _, field, _ in all_entries(True)}
    assert len(active) >= 30 and len(switched_off) >= 25
    assert len(active | switched_off) >= 47  # the issue counted 47 fields in dcp-metrics-included.csv alone


@pytest.mark.parametrize("commented", [False, True], ids=["active", "commented-out"])
def test_every_shipped_field_resolves(commented):
    missing = []
    for list_name, number, name, _ in all_entries(commented):
        try:
            known = fields.lookup(name)
        except fields.UnknownField:
            missing.append(f"{list_name}:{number}: {name}")
            continue
        assert name in known.names, f"{list_name}:{number}: {name} resolved to {known.name} by tag or id, not by name"
    assert not missing, "fields of dcgm-exporter's lists missing from apps/telemetry/fields.py:\n" + "\n".join(missing)


@pytest.mark.parametrize("commented", [False, True], ids=["active", "commented-out"])
def test_declared_types_agree_with_the_registry(commented):
    wrong = []
    for list_name, number, name, declared in all_entries(commented):
        known = fields.lookup(name)
        expected = CSV_TYPE_IS_WRONG.get(name, declared)
        if declared == "counter" and known.kind != expected:
            wrong.append(f"{list_name}:{number}: {name} is a counter in the CSV, {known.kind} in the registry")
        if declared == "label" and known.kind != "label":
            wrong.append(f"{list_name}:{number}: {name} is a label in the CSV, {known.kind} in the registry")
    assert not wrong, "\n".join(wrong)


def test_the_exceptions_are_still_needed():
    """Each exception names a shipped field whose CSV type really differs from the registry's kind."""
    declared = {name: kind for _, _, name, kind in all_entries(False) + all_entries(True)}
    for name, kind in CSV_TYPE_IS_WRONG.items():
        assert name in declared and declared[name] != kind and fields.lookup(name).kind == kind, name


def test_a_missing_field_is_caught():
    """The check above can fail: a made-up line is not resolved."""
    with pytest.raises(fields.UnknownField):
        fields.lookup("DCGM_FI_DEV_NOT_A_FIELD")


# Ids, names (old and DCGM 4.6) as dcgm_fields.h and DCGM 4.6's dcgm_fields.py give them.
HEALTH_IDS = [
    (310, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", None),
    (311, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", None),
    (312, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", None),
    (313, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", None),
    (390, "DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL"),
    (391, "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL"),
    (392, "DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_PAGE_RETIRED_PENDING"),
    (393, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL"),
    (394, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"),
    (395, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
    (396, "DCGM_FI_DEV_ROW_REMAP_PENDING", None),
    (409, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL"),
    (419, "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL"),
    (429, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL"),
    (439, "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL"),
    (230, "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
    (202, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"),
]
OTHER_IDS = [
    (242, "DCGM_FI_DEV_SYNC_BOOST_VIOLATION"), (243, "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION"),
    (244, "DCGM_FI_DEV_LOW_UTIL_VIOLATION"), (245, "DCGM_FI_DEV_RELIABILITY_VIOLATION"),
    (206, "DCGM_FI_DEV_ENC_UTIL"), (207, "DCGM_FI_DEV_DEC_UTIL"), (526, "DCGM_FI_DEV_VGPU_LICENSE_STATUS"),
    (200, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"), (201, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT"),
    (440, "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0"), (1, "DCGM_FI_DRIVER_VERSION"),
]


@pytest.mark.parametrize("field_id, old, new", HEALTH_IDS)
def test_health_fields_have_dcgms_ids_and_both_names(field_id, old, new):
    known = fields.lookup(old)
    assert known.id == field_id and known.group == "health"
    assert fields.lookup(field_id) is known and fields.lookup(str(field_id)) is known
    if new:
        assert fields.lookup(new) is known and known.name == new and known.legacy == old


@pytest.mark.parametrize("field_id, name", OTHER_IDS)
def test_other_added_fields_have_dcgms_ids(field_id, name):
    assert fields.lookup(name).id == field_id


def test_violation_counters_are_cumulative_nanoseconds_like_power_and_thermal():
    for field_id in (240, 241, 242, 243, 244, 245):
        known = fields.FIELDS[field_id]
        assert (known.kind, known.unit) == ("counter", fields.NANOSECONDS), field_id


def test_field_ids_reports_every_unknown_name_at_once():
    assert fields.field_ids(["DCGM_FI_DEV_RETIRED_DBE", 313, "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL"]) == [391, 313]
    with pytest.raises(ValueError) as raised:
        fields.field_ids(["DCGM_FI_DEV_ENC_UTIL", "NOPE_1", "NOPE_2"])
    assert len(raised.value.args[0]) == 2
