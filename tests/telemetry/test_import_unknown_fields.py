"""Unknown DCGM fields in imported text are kept out with ONE message per field (the field, the first line
it appears on, how many lines it had): never silently dropped, never one error per line."""
from datetime import datetime, timedelta, timezone

import pytest

from apps.telemetry import fields
from apps.telemetry.backends.base import Query
from apps.telemetry.importers import parse_dcgm_exporter, parse_dcgmi_dmon

SCRAPE = "2026-03-02T09:15:30Z"
LABELS = ('gpu="{gpu}",UUID="GPU-5b1e7c2a-0f4d-4e8b-9a61-{gpu:012d}",pci_bus_id="00000009:01:00.0",'
          'device="nvidia{gpu}",modelName="NVIDIA GH200 120GB",Hostname="nid001234",'
          'DCGM_FI_DRIVER_VERSION="550.54.15"')
# What dcgm-exporter serves with the health fields switched on, plus two fields this registry does not
# know: one a DCGM 4.x NVLink counter under a name the registry lacks, one a typo in a site's CSV.
METRICS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g: 1980),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", lambda g: 4 if g == 2 else 0),
    ("DCGM_FI_DEV_NVLINK_ERROR_DL_CRC", "counter", "NVLink CRC errors.", lambda g: 17),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement.", lambda g: 0),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors.",
     lambda g: 3 * g),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTL", "counter", "Total number of double-bit persistent ECC errors.", lambda g: 0),
]


def exporter_text(gpus: int = 4, metrics=METRICS) -> tuple[str, dict[str, int]]:
    """The exposition and the line number of each metric's first sample."""
    lines, first = [], {}
    for name, kind, help_text, value in metrics:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu in range(gpus):
            lines.append(f"{name}{{{LABELS.format(gpu=gpu)}}} {value(gpu)}")
            first.setdefault(name, len(lines))
    lines += ["# HELP DCGM_EXP_XID_ERRORS_COUNT Count of XID Errors within user-specified time window.",
              "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge",
              'DCGM_EXP_XID_ERRORS_COUNT{gpu="0",Hostname="nid001234",window_size_in_ms="300000",xid="79"} 0']
    return "\n".join(lines) + "\n", first


def test_one_message_per_unknown_field_with_its_first_line_and_count():
    text, first = exporter_text()
    result = parse_dcgm_exporter(text, cluster="alps", ts=SCRAPE)
    unknown = {error["column"]: error for error in result.errors}
    assert set(unknown) == {"DCGM_FI_DEV_NVLINK_ERROR_DL_CRC", "DCGM_FI_DEV_ECC_DBE_AGG_TOTL"}
    assert len(result.errors) == 2  # not one per line
    for name, error in unknown.items():
        assert error["line"] == first[name]
        assert name in error["message"] and f"line {first[name]}" in error["message"]
        assert "4 lines" in error["message"] and "left out" in error["message"]
    # the known fields, health counters included, are all kept
    frame = result.frame
    assert set(frame.field) == {100, 311, 392, 409}
    assert len(frame) == 16
    dbe = frame[(frame.field == 311) & (frame.gpu == 2)]
    assert dbe.value.tolist() == [4.0]
    assert sorted(frame[frame.field == 409].value) == [0.0, 3.0, 6.0, 9.0]


def test_a_large_scrape_with_an_unknown_field_everywhere_gets_one_message():
    text, first = exporter_text(gpus=512, metrics=METRICS[:3])
    result = parse_dcgm_exporter(text, cluster="alps", ts=SCRAPE)
    assert len(result.errors) == 1
    error = result.errors[0]
    assert error["line"] == first["DCGM_FI_DEV_NVLINK_ERROR_DL_CRC"] and "512 lines" in error["message"]
    assert result.samples == 2 * 512


def test_a_scrape_of_only_unknown_fields_stores_nothing_and_says_why():
    text, first = exporter_text(metrics=[METRICS[2]])
    result = parse_dcgm_exporter(text, cluster="alps", ts=SCRAPE)
    assert result.samples == 0
    assert [(e["line"], e["column"]) for e in result.errors] == [(first["DCGM_FI_DEV_NVLINK_ERROR_DL_CRC"],
                                                                  "DCGM_FI_DEV_NVLINK_ERROR_DL_CRC")]


def test_text_fields_are_known_but_never_samples():
    text = ('DCGM_FI_DRIVER_VERSION{gpu="0",Hostname="nid001234"} 550\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="nid001234"} 52\n')
    result = parse_dcgm_exporter(text, cluster="alps", ts=SCRAPE)
    assert result.errors == [] and result.samples == 1 and result.skipped == 1
    assert "DCGM_FI_DRIVER_VERSION" in " ".join(note["message"] for note in result.notes)


DMON = """#Entity   GPUTL   EDVTL   XYZZY   POWER
ID                                  W
GPU 0     100     0       7       688.410
GPU 1     99      0       7       690.002
GPU 0     100     0       8       676.125
GPU 1     100     0       N/A     684.750
#Entity   GPUTL   EDVTL   XYZZY   POWER
ID                                  W
GPU 0     100     1       9       689.500
GPU 1     98      0       9       681.000
"""


def test_dmon_unknown_tag_gets_one_message_across_repeated_headers():
    result = parse_dcgmi_dmon(DMON, host="nid001234", cluster="alps", start=SCRAPE)
    assert [(e["line"], e["column"]) for e in result.errors] == [(1, "XYZZY")]
    message = result.errors[0]["message"]
    assert "XYZZY" in message and "line 1" in message and "5 rows" in message  # the N/A cell has no value
    assert result.samples == 6 * 3
    assert set(result.frame.field) == {203, 311, 155}
    assert fields.lookup("EDVTL").id == 311


# --- through the API: the message reaches whoever posted the text -------------------------------
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def test_import_answer_names_each_unknown_field_once(api_client, service, store):
    text, first = exporter_text()
    ts = (NOW - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    response = api_client.generic("POST", f"/api/v1/telemetry/import/?format=dcgm-exporter&cluster=alps&ts={ts}",
                                  text.encode(), content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
    assert response.status_code == 200, response.content
    report = response.json()
    assert report["accepted"] == 16
    unknown = [error for error in report["errors"] if "unknown DCGM field" in error["message"]]
    assert sorted(error["line"] for error in unknown) == sorted([first["DCGM_FI_DEV_NVLINK_ERROR_DL_CRC"],
                                                                 first["DCGM_FI_DEV_ECC_DBE_AGG_TOTL"]])
    data = store.read(Query(start=NOW - timedelta(days=1), end=NOW + timedelta(days=1)))
    assert set(data.field) == {100, 311, 392, 409}
