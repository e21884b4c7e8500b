"""Versions are facts, never samples (issue 38, acceptance 3).

The importers read DCGM's text fields from real-format dcgm-exporter text (the ``DCGM_FI_DRIVER_VERSION`` label
observed on every metric, tests/telemetry/data/importers/README.md) and from ``dcgmi dmon`` columns (``DRVER``,
``VBVER``: DCGM 4.6's tags, tests/telemetry/data/dcgm-4.6/fields.csv; the row layout is the importer fixtures'),
the samples endpoint takes the collector's version rows; each lands in ``VersionFact`` with first and last seen,
and no text field ever reaches the telemetry store.
"""
import importlib.util
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from apps.telemetry import fields, importers, versions
from apps.telemetry.backends.base import Query
from apps.telemetry.models import VersionFact

DATA = Path(__file__).parent / "data" / "importers"
NOW = datetime.now(timezone.utc).replace(microsecond=0)
TEXT_FIELD_IDS = {field.id for field in fields.FIELDS.values() if field.kind == fields.LABEL}

# dcgmi dmon -e 1002,1,85 on a 2-GPU node: the text columns as DeviceMonitor pads strings.
DMON_WITH_TEXT = """\
#Entity   SMACT        DRVER                    VBVER                    
ID                                                                       
GPU 0     0.812        560.35.03                96.00.89.00.01           
GPU 1     0.790        560.35.03                96.00.89.00.02           
GPU 0     0.815        560.35.03                96.00.89.00.01           
GPU 1     0.801        560.35.03                96.00.89.00.02           
"""


def test_exporter_labels_become_facts_and_no_text_field_becomes_a_sample():
    result = importers.parse_dcgm_exporter((DATA / "exporter_federate_both_hostname_labels.prom").read_text())
    assert sorted({(f.host, f.gpu, f.key, f.value) for f in result.facts}) == [
        ("nid001234", versions.NODE, "driver", "550.127.08"), ("nid005678", versions.NODE, "driver", "570.172.08")]
    assert result.samples > 0 and not set(result.frame["field"]) & TEXT_FIELD_IDS


def test_dmon_text_columns_become_facts_timed_like_their_rows():
    start = datetime(2026, 3, 2, 9, 15, tzinfo=timezone.utc)
    result = importers.parse_dcgmi_dmon(DMON_WITH_TEXT, host="nid000007", start=start, interval_s=2)
    assert not result.errors and set(result.frame["field"]) == {1002}
    facts = {(f.gpu, f.key, f.value, f.seen) for f in result.facts}
    assert (versions.NODE, "driver", "560.35.03", start) in facts
    assert (1, "vbios", "96.00.89.00.02", start + timedelta(seconds=2)) in facts
    assert {f.key for f in result.facts} == {"driver", "vbios"}


def test_imported_text_is_stored_as_facts_whose_last_seen_moves_and_the_store_has_no_text(api_client, service, store):
    text = (DATA / "exporter_h100_Hostname.prom").read_bytes()
    for minutes_ago in (30, 5):
        ts = (NOW - timedelta(minutes=minutes_ago)).isoformat().replace("+00:00", "Z")
        response = api_client.generic("POST", f"/api/v1/telemetry/import/?format=dcgm-exporter&cluster=alps&ts={ts}",
                                      text, content_type="text/plain", HTTP_AUTHORIZATION=f"Token {service}")
        assert response.status_code == 200, response.content
        assert response.json()["versions"] == 1
    fact = VersionFact.objects.get()  # one row: host, node, driver, value
    assert (fact.host, fact.gpu, fact.key, fact.value, fact.source) == ("nid001234", -1, "driver", "550.127.08", "dcgm-exporter")
    assert fact.first_seen == NOW - timedelta(minutes=30) and fact.last_seen == NOW - timedelta(minutes=5)
    stored = store.read(Query(start=NOW - timedelta(days=1), end=NOW + timedelta(days=1)))
    assert len(stored) and not set(stored["field"]) & TEXT_FIELD_IDS


def test_collector_rows_of_versions_and_dcgm_text_fields_are_facts_and_a_new_value_is_a_new_row(api_client, service, store):
    def post(rows):
        return api_client.generic("POST", "/api/v1/telemetry/samples/?cluster=alps", json.dumps(rows).encode(),
                                  content_type="application/json", HTTP_AUTHORIZATION=f"Token {service}")

    ts = (NOW - timedelta(minutes=10)).isoformat().replace("+00:00", "Z")
    later = (NOW - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    response = post([
        {"ts": ts, "host": "nid000001", "version": "nccl", "value": "2.21.5", "partition": "normal"},
        {"ts": ts, "host": "nid000001", "gpu": 2, "field": "DCGM_FI_DEV_VBIOS_VERSION", "value": "96.00.89.00.01"},
        {"ts": ts, "host": "nid000001", "gpu": 0, "field": 1002, "value": 0.5},
        {"ts": ts, "host": "nid000001", "gpu": 0, "field": 1, "value": 560},  # a number is no driver version
        {"ts": ts, "host": "nid000001", "version": "flux", "value": "1"},
    ])
    body = response.json()
    assert response.status_code == 200 and (body["accepted"], body["versions"], body["rejected"]) == (1, 2, 2), body
    assert [e["field"] for e in body["errors"]] == ["value", "version"]
    assert post([{"ts": later, "host": "nid000001", "version": "nccl", "value": "2.23.4"}]).status_code == 200
    rows = list(VersionFact.objects.filter(key="nccl").order_by("first_seen").values_list("value", "partition"))
    assert rows == [("2.21.5", "normal"), ("2.23.4", "normal")]  # the host's partition follows it
    stored = store.read(Query(start=NOW - timedelta(days=1), end=NOW + timedelta(days=1)))
    assert list(stored["field"]) == [1002]


def test_the_collector_reads_driver_firmware_and_the_communication_stack(tmp_path):
    spec = importlib.util.spec_from_file_location("collector", Path(__file__).parents[2] / "deploy/collector/belvedere-collector.py")
    collector = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collector)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$1\" in --query-gpu=*) printf '0, 560.35.03, 96.00.89.00.01, G520.0200.00.05, "
                   "1654922012345\\n1, 560.35.03, 96.00.89.00.01, G520.0200.00.05, [N/A]\\n' ;;\n"
                   "*) echo '| NVIDIA-SMI 560.35.03   Driver Version: 560.35.03   CUDA Version: 12.6 |' ;; esac\n")
    fi_info = tmp_path / "fi_info"
    fi_info.write_text("#!/bin/sh\ncase \"$1\" in --version) printf 'fi_info: 1.22.0\\nlibfabric: 1.22.0\\nlibfabric api: "
                       "1.22\\n' ;; -l) printf 'cxi:\\n    version: 0.1\\ntcp:\\n    version: 121.0\\n' ;; esac\n")
    for script in (smi, fi_info):
        script.chmod(0o755)
    lib = tmp_path / "aws-ofi-nccl-1.14.0" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2.21.5").write_text("")
    env = {"PATH": "/usr/bin:/bin", "BELVEDERE_NVIDIA_SMI": str(smi), "BELVEDERE_FI_INFO": str(fi_info),
           "LD_LIBRARY_PATH": f"{lib}:/nonexistent", "SLURM_JOB_PARTITION": "normal",
           "BELVEDERE_IMAGE_DIGEST": "docker.io/nvcr/pytorch@sha256:" + "ab" * 32}
    rows = [collector._row(sample, "nid000001") for sample in collector.read_versions(env)]
    got = {(row.get("gpu"), row["version"], row["value"]) for row in rows}
    assert got == {(None, "driver", "560.35.03"), (0, "vbios", "96.00.89.00.01"), (1, "vbios", "96.00.89.00.01"),
                   (0, "inforom_image", "G520.0200.00.05"), (1, "inforom_image", "G520.0200.00.05"),
                   (0, "serial", "1654922012345"), (None, "cuda_driver", "12.6"), (None, "nccl", "2.21.5"),
                   (None, "ofi_nccl", "1.14.0"), (None, "libfabric", "1.22.0"), (None, "cxi", "0.1"),
                   (None, "image_digest", "sha256:" + "ab" * 32)}
    assert {row["partition"] for row in rows} == {"normal"}


@pytest.mark.parametrize("value", ["", "N/A", "a" * 201, "560\n35", 12.5])
def test_what_is_no_version_is_refused_with_a_reason(value):
    with pytest.raises(versions.VersionError):
        versions.observation("nid000001", None, "driver", value if value != 12.5 else [value], NOW)
