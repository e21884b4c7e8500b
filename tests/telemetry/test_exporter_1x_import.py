"""dcgm-exporter 1.x metric names (``dcgm_gpu_temp``...) on import (issue 34, acceptance 3): the registry's map
is go-dcgm's ``OLD_DCGM_FI``, every name of 2.x's 1.x-compatibility list resolves to the same field, and the
text the 1.x exporter wrote imports onto the same field ids as DCGM names would. Sources and how the 1.x
output was produced: tests/telemetry/data/dcgm-exporter-1.x/README.md."""
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest

from apps.telemetry import fields
from apps.telemetry.backends.base import Query
from apps.telemetry.importers import parse_dcgm_exporter

DATA = Path(__file__).parent / "data" / "dcgm-exporter-1.x"
SCRAPE = "2026-03-02T09:15:30Z"


def go_map() -> dict[str, int]:
    text = (DATA / "go-dcgm-OLD_DCGM_FI.go.txt").read_text()
    return {name: int(number) for name, number in re.findall(r'"(dcgm_\w+)":\s*(\d+),', text)}


def compat_list() -> list[str]:
    """Every metric name of 1.x-compatibility-metrics.csv, the commented-out ones too."""
    names = []
    for line in (DATA / "1.x-compatibility-metrics.csv").read_text().splitlines():
        cell = line.lstrip("# ").split(",")[0].strip()
        if cell.startswith("dcgm_"):
            names.append(cell)
    return names


def test_the_registrys_1x_names_are_go_dcgms_map():
    expected = go_map()
    assert len(expected) == 41  # guards against a truncated copy
    assert fields.EXPORTER_1X_NAMES == expected
    for name, field_id in expected.items():
        assert fields.lookup(name).id == field_id and fields.by_exporter_1x_name(name).id == field_id


def test_every_name_of_the_1x_compatibility_list_resolves_to_go_dcgms_field():
    names, expected = compat_list(), go_map()
    assert len(names) >= 40
    assert [name for name in names if name not in expected] == []
    assert {name: fields.lookup(name).id for name in names} == {name: expected[name] for name in names}


def test_the_1x_awk_exporters_output_imports_onto_the_dcgm_field_ids():
    text = (DATA / "awk-exporter-dcp.prom").read_text()
    lines = [line for line in text.splitlines() if line.startswith("dcgm_")]
    result = parse_dcgm_exporter(text, host="nid001234", cluster="alps", ts=SCRAPE)
    assert result.errors == [] and result.skipped == 0 and result.notes == []
    assert result.samples == len(lines) == 72
    frame = result.frame
    assert set(frame.host) == {"nid001234"} and set(frame.gpu) == {0, 1}
    assert set(frame.uuid) == {"GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323", "GPU-0c3b1a77-5d2e-4f5a-9a0c-2b8e6a1d4c90"}
    assert (frame.ts == pd.Timestamp(SCRAPE)).all()
    # The N/A cells (200, 201, 449) printed nothing, the script never printed 1009/1010 (commented out, "TODO");
    # every other name of go-dcgm's map is there.
    assert set(frame.field) == set(go_map().values()) - {200, 201, 449, 1009, 1010}

    def value(gpu, field_id):
        return frame[(frame.gpu == gpu) & (frame.field == field_id)].value.tolist()

    assert value(0, 150) == [47] and value(0, 155) == [312.527] and value(0, 252) == [79200]
    assert value(1, 230) == [43] and value(1, 240) == [1200000] and value(1, 202) == [2]
    assert value(0, 1002) == [0.873] and value(1, 1004) == [0.519]  # ratios as dmon prints them


def test_the_1x_readme_sample_imports():
    """NVIDIA's own sample of the 1.x exporter behind node_exporter (7.824041e+06 as node_exporter writes it)."""
    result = parse_dcgm_exporter((DATA / "readme-sample.prom").read_text(), host="gpu-node-1", ts=SCRAPE)
    assert result.errors == [] and result.skipped == 0
    assert dict(zip(result.frame.field, result.frame.value)) == {
        150: 34, 203: 0, 155: 31.737, 100: 135, 156: 7824041.0, 230: 0}
    assert set(result.frame.uuid) == {"GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323"}


def test_1x_names_and_dcgm_names_land_on_the_same_samples():
    """The same reading printed by dcgm-exporter 2.x with DCGM names, and with the 1.x compatibility list."""
    labels = 'gpu="0",UUID="GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323",device="nvidia0",modelName="NVIDIA H100"'
    new = parse_dcgm_exporter(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 47\nDCGM_FI_PROF_SM_ACTIVE{{{labels}}} 0.873\n",
                              host="nid001234", ts=SCRAPE)
    old = parse_dcgm_exporter(f"dcgm_gpu_temp{{{labels}}} 47\ndcgm_fi_prof_sm_active{{{labels}}} 0.873\n",
                              host="nid001234", ts=SCRAPE)
    assert old.errors == new.errors == []
    pd.testing.assert_frame_equal(old.frame, new.frame)


# --- through the API --------------------------------------------------------------------------------
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def test_import_api_stores_1x_named_exporter_text(api_client, service, store):
    text = (DATA / "awk-exporter-dcp.prom").read_bytes()
    ts = (NOW - timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    response = api_client.generic(
        "POST", f"/api/v1/telemetry/import/?format=dcgm-exporter&cluster=alps&host=nid001234&ts={ts}", text,
        content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
    assert response.status_code == 200, response.content
    assert response.json()["accepted"] == 72 and response.json()["errors"] == []
    data = store.read(Query(start=NOW - timedelta(days=1), end=NOW + timedelta(days=1)))
    assert len(data) == 72 and {150, 203, 1002, 1005} <= set(data.field) and set(data.host) == {"nid001234"}
