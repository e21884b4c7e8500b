"""Importers of ``dcgmi dmon`` output and dcgm-exporter text (apps.telemetry.importers).

Expected values are read off the fixture files by hand (line numbers in the comments), not
computed by the code under test. Layout sources: data/importers/README.md.
"""
from pathlib import Path

import pandas as pd
import pytest

from apps.telemetry import fields
from apps.telemetry.backends.base import COLUMNS
from apps.telemetry.importers import ImportResult, _parse_sample, parse_dcgm_exporter, parse_dcgmi_dmon

DATA = Path(__file__).parent / "data" / "importers"
T0 = "2026-03-02T09:15:00Z"


def read(name: str) -> str:
    return (DATA / name).read_text()


def at(seconds: float, base: str = T0) -> pd.Timestamp:
    return pd.Timestamp(base) + pd.Timedelta(seconds=seconds)


def values(result: ImportResult, host: str, gpu: int, field: int, ts: pd.Timestamp) -> list[float]:
    frame = result.frame
    match = frame[(frame.host == host) & (frame.gpu == gpu) & (frame.field == field) & (frame.ts == ts)]
    return match["value"].tolist()


def value(result: ImportResult, host: str, gpu: int, field: int, ts: pd.Timestamp) -> float:
    found = values(result, host, gpu, field, ts)
    assert len(found) == 1, f"expected one sample for {host} gpu {gpu} field {field} at {ts}, got {found}"
    return found[0]


def error_keys(result: ImportResult) -> set[tuple]:
    return {(error["line"], error["column"]) for error in result.errors}


def assert_canonical(frame: pd.DataFrame):
    assert list(frame.columns) == COLUMNS
    assert str(frame["ts"].dtype) == "datetime64[ns, UTC]"
    assert frame["gpu"].dtype == "int16" and frame["field"].dtype == "int32" and frame["value"].dtype == "float64"


# --- dcgmi dmon --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def h100():
    return parse_dcgmi_dmon(read("dmon_h100_4gpu_c17.txt"), host="nid001234", cluster="alps", start=T0)


def test_dmon_h100_ticks_values_and_repeated_header(h100):
    assert_canonical(h100.frame)
    assert h100.errors == [] and h100.lines == 72
    # 17 ticks x 4 GPUs x 7 columns, less the 20 N/A of the first tick (lines 3-6)
    assert h100.samples == 17 * 4 * 7 - 20 and h100.skipped == 20
    assert sorted(h100.frame.ts.unique()) == [at(k) for k in range(17)]
    assert set(h100.frame.cluster) == {"alps"} and set(h100.frame.uuid) == {""}
    # line 3, tick 0: GPU 0 profiling fields N/A, GPUTL 0, POWER 72.114
    assert values(h100, "nid001234", 0, 1001, at(0)) == []
    assert value(h100, "nid001234", 0, 203, at(0)) == 0
    assert value(h100, "nid001234", 0, 155, at(0)) == 72.114
    # line 8, tick 1, GPU 1
    assert value(h100, "nid001234", 1, 1001, at(1)) == 0.975
    assert value(h100, "nid001234", 1, 1003, at(1)) == 0.356
    assert value(h100, "nid001234", 1, 1005, at(1)) == 0.260
    assert value(h100, "nid001234", 1, 155, at(1)) == 629.806
    # line 62, tick 14, the last before the header printed again at line 63
    assert value(h100, "nid001234", 3, 1005, at(14)) == 0.361
    # lines 65-72, after the repeated header: ticks 15 and 16, not restarted at 0
    assert value(h100, "nid001234", 2, 1002, at(15)) == 0.850
    assert value(h100, "nid001234", 0, 155, at(15)) == 68.532
    assert value(h100, "nid001234", 3, 1004, at(16)) == 0.444
    assert value(h100, "nid001234", 3, 155, at(16)) == 645.581
    assert (h100.frame[h100.frame.field == 155].groupby("gpu").size() == 17).all()


def test_dmon_interval_and_gpus_in_descending_order():
    result = parse_dcgmi_dmon(read("dmon_gh200_sigint.txt"), host="nid005678", start=T0, interval_s=0.5)
    assert result.errors == []
    assert result.samples == 5 * 4 * 8 - 2 and result.skipped == 2
    assert sorted(result.frame.ts.unique()) == [at(0.5 * k) for k in range(5)]
    # line 3 (tick 0 starts with GPU 3) and line 6 (GPU 0 closes tick 0)
    assert value(result, "nid005678", 3, 1002, at(0)) == 0.638
    assert value(result, "nid005678", 3, 1011, at(0)) == 128000000000
    assert value(result, "nid005678", 0, 1005, at(0)) == 0.540
    # line 16, tick 3, GPU 2: NVLTX and NVLRX N/A, the rest kept
    assert values(result, "nid005678", 2, 1011, at(1.5)) == []
    assert values(result, "nid005678", 2, 1012, at(1.5)) == []
    assert value(result, "nid005678", 2, 1009, at(1.5)) == 273000000
    # line 22, tick 4, GPU 0
    assert value(result, "nid005678", 0, 1012, at(2.0)) == 124800000000
    assert value(result, "nid005678", 0, 150, at(2.0)) == 41
    assert value(result, "nid005678", 0, 252, at(2.0)) == 78412
    # the Ctrl-C trailer is a note, not an error
    assert [note["line"] for note in result.notes] == [25]


def test_dmon_rows_with_leading_timestamps_need_no_start():
    result = parse_dcgmi_dmon(read("dmon_timestamped.txt"), host="nid001234")
    assert result.errors == [] and result.samples == 16 and result.skipped == 2
    assert value(result, "nid001234", 0, 1002, pd.Timestamp("2026-03-02T09:15:00.011Z")) == 0.802  # line 3
    assert value(result, "nid001234", 1, 155, pd.Timestamp("2026-03-02T09:15:01.013Z")) == 598.125  # line 6
    assert values(result, "nid001234", 1, 1002, pd.Timestamp("2026-03-02T09:15:01.013Z")) == []  # N/A
    assert value(result, "nid001234", 1, 1005, pd.Timestamp("2026-03-02T09:15:02.017Z")) == 0.466  # line 8


def test_dmon_malformed_rows_are_reported_and_good_values_kept():
    result = parse_dcgmi_dmon(read("dmon_malformed.txt"), host="nid001234", start=T0)
    assert error_keys(result) == {
        (3, None),  # dcgmi's own error message
        (5, "SMACT"),  # 0.4o1
        (8, None),  # GPU x
        (10, "POWER"),  # stray text after the last column
        (11, "POWER"),  # '-'
    }
    assert result.samples == 26
    assert result.skipped == 6  # the GPU-I row's 5 known cells (line 6) and the blank SMACT (line 9)
    frame = result.frame
    # ESVTL is DCGM's dmon tag of 310 (ECC SBE volatile total, dcgm_fields.cpp v4.6.0; issue 34): its column is read.
    assert sorted(frame[frame.field == 310].gpu) == [0, 0, 0, 1, 1, 1] and set(frame[frame.field == 310].value) == {0}
    # tick 0 (lines 4-6)
    assert value(result, "nid001234", 0, 1002, at(0)) == 0.912
    assert value(result, "nid001234", 0, 156, at(0)) == 129931554972
    assert values(result, "nid001234", 1, 1002, at(0)) == []
    assert value(result, "nid001234", 1, 155, at(0)) == 690.002
    assert value(result, "nid001234", 1, 156, at(0)) == 129931554972
    # tick 1 (lines 7-9): GPU 0 repeats at line 7; line 9 has a blank SMACT cell
    assert value(result, "nid001234", 0, 155, at(1)) == 676.125
    assert values(result, "nid001234", 1, 1002, at(1)) == []
    assert value(result, "nid001234", 1, 156, at(1)) == 132
    assert value(result, "nid001234", 1, 155, at(1)) == 684.750
    # tick 2 (lines 10-11)
    assert value(result, "nid001234", 0, 1002, at(2)) == 0.915
    assert values(result, "nid001234", 0, 155, at(2)) == []
    assert value(result, "nid001234", 1, 203, at(2)) == 98
    assert values(result, "nid001234", 1, 155, at(2)) == []


def test_dmon_watch_error_is_a_clear_error():
    with pytest.raises(ValueError, match=r"line 3: .*Error setting watches\. Result: -33: This request is serviced"):
        parse_dcgmi_dmon(read("dmon_watch_error.txt"), host="nid001234", start=T0)


def test_dmon_needs_start_host_and_a_header():
    with pytest.raises(ValueError, match="pass start="):
        parse_dcgmi_dmon(read("dmon_h100_4gpu_c17.txt"), host="nid001234")
    with pytest.raises(ValueError, match="host is required"):
        parse_dcgmi_dmon(read("dmon_h100_4gpu_c17.txt"), host="", start=T0)
    with pytest.raises(ValueError, match="empty input"):
        parse_dcgmi_dmon(" \n\n", host="nid001234", start=T0)
    with pytest.raises(ValueError, match="no '#Entity' header"):
        parse_dcgmi_dmon(read("exporter_h100_Hostname.prom"), host="nid001234", start=T0)
    with pytest.raises(ValueError, match="dcgmi dmon printed no data: line 1: .*unable to establish a connection"):
        parse_dcgmi_dmon("Error: unable to establish a connection to the specified host: localhost\n"
                         "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
                         host="nid001234", start=T0)
    with pytest.raises(ValueError, match="interval_s"):
        parse_dcgmi_dmon(read("dmon_h100_4gpu_c17.txt"), host="nid001234", start=T0, interval_s=0)


def test_dmon_row_before_header_and_unknown_line():
    text = "GPU 0     0.5\n#Entity   SMACT        \nID                     \nGPU 0     0.500        \nhello\n"
    result = parse_dcgmi_dmon(text, host="n1", start="2026-03-02 09:15:00")  # naive start is UTC
    assert error_keys(result) == {(1, None), (5, None)}
    assert value(result, "n1", 0, 1002, at(0)) == 0.5


# --- dcgm-exporter -----------------------------------------------------------------------------

SCRAPE = "2026-03-02T09:15:30Z"


@pytest.fixture(scope="module")
def legacy():
    return parse_dcgm_exporter(read("exporter_h100_Hostname.prom"), cluster="alps", ts=SCRAPE)


def test_exporter_legacy_names_and_Hostname_label(legacy):
    assert_canonical(legacy.frame)
    assert legacy.errors == [] and legacy.lines == 117
    # 19 metrics x 4 GPUs + 1 DCGM_EXP_XID_ERRORS_COUNT; NVLINK_CRC is stored (a health counter), the XID count is
    # not a stored field, GPU 3's MEMORY_TEMP is DCGM's blank sentinel (line 18)
    assert legacy.samples == 75 and legacy.skipped == 2
    assert set(legacy.frame[legacy.frame.field == 409].gpu) == {0, 1, 2, 3}
    ts = pd.Timestamp(SCRAPE)
    assert set(legacy.frame.ts) == {ts} and set(legacy.frame.host) == {"nid001234"}
    assert value(legacy, "nid001234", 0, 1001, ts) == 0.962118  # line 81
    assert value(legacy, "nid001234", 1, 1002, ts) == 0.866072
    assert value(legacy, "nid001234", 2, 230, ts) == 45  # line 59, XID with err_code/err_msg labels
    assert value(legacy, "nid001234", 0, 156, ts) == 129931554972
    assert value(legacy, "nid001234", 2, 1009, ts) == 1180224
    assert value(legacy, "nid001234", 3, 155, ts) == 71.408
    assert values(legacy, "nid001234", 3, 140, ts) == []
    assert value(legacy, "nid001234", 2, 140, ts) == 41  # line 17
    uuids = legacy.frame.drop_duplicates("gpu").set_index("gpu")["uuid"]
    assert uuids[2] == "GPU-c2e47f18-96ab-41d3-8e0c-5f7a2b913d08"
    assert [note["line"] for note in legacy.notes if note["line"]] == [18]
    summary = " ".join(note["message"] for note in legacy.notes)
    assert "DCGM_EXP_XID_ERRORS_COUNT" in summary


def test_exporter_hostname_label_and_dcgm_46_names():
    result = parse_dcgm_exporter(read("exporter_gh200_hostname_dcgm46.prom"), ts=SCRAPE)
    ts = pd.Timestamp(SCRAPE)
    assert result.errors == []
    assert result.samples == 39 and result.skipped == 6  # one NaN, five Go/process/promhttp samples
    assert set(result.frame.host) == {"nid005678"}
    assert value(result, "nid005678", 0, 1002, ts) == 0.912004  # DCGM_FI_PROF_SM_UTIL_RATIO
    assert values(result, "nid005678", 3, 1002, ts) == []  # NaN, line 36
    assert value(result, "nid005678", 1, 155, ts) == 641.207  # DCGM_FI_DEV_BOARD_POWER_WATTS
    assert value(result, "nid005678", 2, 150, ts) == 50  # DCGM_FI_DEV_GPU_TEMP_CELSIUS
    assert value(result, "nid005678", 3, 203, ts) == 3  # DCGM_FI_DEV_GPU_UTIL_RATIO: still percent
    assert value(result, "nid005678", 0, 230, ts) == 0  # DCGM_FI_DEV_XID_ERROR
    assert value(result, "nid005678", 0, 1076, ts) == 3221225472
    assert [(note["line"], "NaN" in note["message"]) for note in result.notes if note["line"]] == [(36, True)]
    assert "go_goroutines" in result.notes[-1]["message"]


@pytest.mark.parametrize("legacy_name, new_name", [
    ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO"),
    ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"),
    ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
])
def test_legacy_and_new_names_give_the_same_field(legacy_name, new_name):
    text = (f'{legacy_name}{{gpu="0",UUID="GPU-a",Hostname="old-node"}} 1.5\n'
            f'{new_name}{{gpu="0",UUID="GPU-b",hostname="new-node"}} 2.5\n')
    result = parse_dcgm_exporter(text, ts=SCRAPE)
    frame = result.frame.set_index("host")
    assert frame.loc["old-node", "field"] == frame.loc["new-node", "field"] == fields.lookup(legacy_name).id
    assert frame.loc["old-node", "value"] == 1.5 and frame.loc["new-node", "value"] == 2.5


def test_federate_dump_with_both_hostname_spellings_and_sample_timestamps():
    result = parse_dcgm_exporter(read("exporter_federate_both_hostname_labels.prom"))  # no ts= needed
    assert result.errors == [] and result.samples == 8
    old, new = pd.Timestamp("2026-03-02T09:15:00.118Z"), pd.Timestamp("2026-03-02T09:15:07.540Z")
    assert value(result, "nid001234", 1, 155, old) == 590.113  # line 3, Hostname=
    assert value(result, "nid001234", 0, 1002, old) == 0.870112  # line 7
    assert value(result, "nid005678", 0, 1002, new) == 0.910566  # line 9, hostname=
    assert value(result, "nid005678", 1, 155, new) == 12.125  # line 5
    assert value(result, "nid005678", 1, 1002, new) == 0


def test_exporter_malformed_lines_are_reported_and_good_lines_kept():
    result = parse_dcgm_exporter(read("exporter_malformed.prom"), ts=SCRAPE)
    assert {error["line"] for error in result.errors} == {4, 5, 6, 9, 11, 12, 13, 16, 18, 19, 20, 21}
    assert (18, "hostname") in error_keys(result) and (13, "gpu") in error_keys(result)
    messages = {error["line"]: error["message"] for error in result.errors}
    assert "',' or '}'" in messages[4] and "no value" in messages[5] and "not closed" in messages[6]
    assert "invalid escape" in messages[16] and "twice" in messages[19] and "'extra'" in messages[21]
    ts = pd.Timestamp(SCRAPE)
    assert result.samples == 4
    assert value(result, "nid001234", 0, 150, ts) == 52  # line 3
    assert value(result, "nid001234", 0, 155, ts) == 601.227  # line 8: spaces after commas, trailing comma
    assert value(result, "nid001234", 0, 230, ts) == 13  # line 15: escaped quotes, backslashes, newline
    assert value(result, "nid001234", 2, 100, pd.Timestamp("2026-03-02T09:15:00.118Z")) == 1755  # line 23: tabs, own ts
    # +Inf (line 10), -Inf (line 22) and the MIG instance (line 17) are skipped, not errors
    assert result.skipped == 3
    assert [note["line"] for note in result.notes] == [10, 22, None]
    assert values(result, "nid001234", 0, 1001, ts) == []

    with_host = parse_dcgm_exporter(read("exporter_malformed.prom"), host="nid009999", ts=SCRAPE)
    assert 18 not in {error["line"] for error in with_host.errors}
    assert value(with_host, "nid009999", 1, 1001, ts) == 0.958804  # empty Hostname="" label: host= used
    assert set(with_host.frame.host) == {"nid001234", "nid009999"}  # labels win over host=


def test_label_value_escapes_are_decoded():
    name, labels, value_text, stamp = _parse_sample(read("exporter_malformed.prom").splitlines()[14])
    assert name == "DCGM_FI_DEV_XID_ERRORS" and value_text == "13" and stamp is None
    assert labels["err_msg"] == 'Graphics Engine Exception: "SM Warp Exception" in C:\\jobs\\run.sh\nsee dmesg'
    assert labels["gpu"] == "0" and labels["Hostname"] == "nid001234"


def test_exporter_needs_ts_and_host_when_the_text_lacks_them():
    with pytest.raises(ValueError, match="pass ts="):
        parse_dcgm_exporter(read("exporter_h100_Hostname.prom"))
    text = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 52\n'
    with pytest.raises(ValueError, match="pass host="):
        parse_dcgm_exporter(text, ts=SCRAPE)
    result = parse_dcgm_exporter(text, host="nid001234", ts=SCRAPE)
    assert value(result, "nid001234", 0, 150, pd.Timestamp(SCRAPE)) == 52
    with pytest.raises(ValueError, match="empty input"):
        parse_dcgm_exporter("\n")
    with pytest.raises(ValueError, match="no Prometheus text exposition"):
        parse_dcgm_exporter(read("dmon_h100_4gpu_c17.txt"), host="nid001234", ts=SCRAPE)


def test_dcgm_blank_sentinels_in_any_spelling_are_skipped():
    text = ('DCGM_FI_DEV_MEMORY_TEMP{gpu="0",Hostname="n"} 9223372036854775794\n'
            'DCGM_FI_DEV_MEMORY_TEMP{gpu="1",Hostname="n"} 9.223372036854776e+18\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="n"} 140737488355328.000000\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="1",Hostname="n"} 1.4073748835533e+14\n'  # as Prometheus prints 2**47 + 2
            'DCGM_FI_DEV_POWER_USAGE{gpu="2",Hostname="n"} 612.5\n')
    result = parse_dcgm_exporter(text, ts=SCRAPE)
    assert result.samples == 1 and result.skipped == 4 and result.errors == []
    assert [note["line"] for note in result.notes] == [1, 2, 3, 4]


def test_comment_only_exposition_is_empty_not_an_error():
    text = "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
    result = parse_dcgm_exporter(text)
    assert result.samples == 0 and result.errors == [] and result.lines == 2
    assert_canonical(result.frame)
