"""Recordings made on a real NVIDIA H200 (driver 580.159.04, nvidia-ml-py 13.610.43, no DCGM host
engine) on 2026-11-26, by running on the GPU machine:

    python3 deploy/collector/gpm_probe.py --seconds 20 --interval 1 --load --out gpm-probe-h200.json
    python3 deploy/collector/belvedere-collector.py --source auto --interval 0.5 --duration 12 \
        --dry-run --hostname nid000001 > collector-dry-run-h200.ndjson   (a bf16 matmul loop running)

They check what the recording adapters of the other collector tests can only assume: what NVML GPM
really answers on Hopper, that the collector turns it into DCGM fields and units the saturation
model can read, and that the portal's ingestion takes the collector's real output whole.
"""
import gzip
import json
from collections import defaultdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from apps.telemetry import fields as field_registry
from apps.telemetry.ingest import parse_batch, split_samples

from .recording import PROBE, load

REAL = Path(__file__).parent / "real"
probe = load(PROBE, "gpm_probe")
RATIO_FIELDS = (1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1013, 1014, 1015, 1016)


@pytest.fixture(scope="module")
def document():
    return json.loads((REAL / "gpm-probe-h200.json").read_text())


@pytest.fixture(scope="module")
def dry_run():
    with gzip.open(REAL / "collector-dry-run-h200.ndjson.gz", "rb") as handle:
        return handle.read()


def by_field(samples):
    values = defaultdict(list)
    for _, _, _, field, value in samples:
        values[field].append(value)
    return values


def test_the_recording_is_of_a_real_hopper_gpu(document):
    assert document["environment"]["gpus"] == ["NVIDIA H200"]
    assert document["environment"]["driver"].startswith("580.")
    assert document["settings"]["reads"] == 20


def test_replaying_nvmls_real_answers_gives_the_recorded_samples(document):
    """GpmSource, fed NVML's recorded answers in order, makes the same samples it made on the GPU."""
    replayed = probe.replay(document)
    assert replayed == [(gpu, uuid, field, value) for _, gpu, uuid, field, value in document["samples"]]


def test_real_gpm_values_are_in_dcgm_units(document):
    values = by_field(document["samples"])
    for field in RATIO_FIELDS:
        assert values[field], f"GPM gave no value for field {field}"
        assert all(0.0 <= value <= 1.0 for value in values[field]), (field, min(values[field]), max(values[field]))
    # Under a bf16 matrix-multiply loop the tensor pipes (1004) and SMs (1002) are busy most of the time,
    # FP64 (1006) is idle, and power rises from idle towards the 700 W limit.
    assert max(values[1004]) > 0.8 and max(values[1002]) > 0.8
    assert max(values[1006]) == 0.0
    assert min(values[155]) < 150 < 500 < max(values[155]) <= 700
    assert set(values[113]) == {1980}  # the H200's maximum SM clock in MHz
    # Energy is a counter in mJ: it never decreases.
    assert values[156] == sorted(values[156])
    # PCIe traffic comes as bytes/s (GPM's MiB/s x 2^20), not MiB/s.
    assert max(values[1009]) > 1e6


def test_the_collector_real_output_is_accepted_whole_by_the_portal(dry_run):
    rows = split_samples(dry_run, "application/x-ndjson")
    first = datetime(2026, 11, 26, 9, 19, 30, tzinfo=timezone.utc)
    batch = parse_batch(rows, now=first + timedelta(minutes=1), default_cluster="alps")
    assert batch.errors == []
    assert len(batch.frame) == batch.rows == 506
    assert set(batch.frame["host"]) == {"nid000001"} and set(batch.frame["gpu"]) == {0}
    fields = set(batch.frame["field"])
    assert fields <= set(field_registry.FIELDS)
    # The saturation model's inputs are all there; the DCGM-only fields (140, 230, 311) are not faked.
    assert {1001, 1002, 1003, 1004, 1005, 1009, 1010, 155, 203, 100, 113} <= fields
    assert not fields & {140, 230, 311}
    busy = batch.frame[batch.frame["field"] == 1004]["value"]
    assert busy.min() > 0.3  # the matmul loop ran throughout the dry run
