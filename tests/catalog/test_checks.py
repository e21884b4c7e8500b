"""The checks end to end on constructed data in a real embedded store and the database: known freshness,
coverage with the exact missing members, gaps with their intervals, drift, incidents that open and close,
and the demo's planted gap found to the node."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command

from apps.catalog.definitions import load_product
from apps.catalog.models import CheckRun, DataProduct, Incident
from apps.catalog.services import field_units, run_checks
from tests.catalog.test_definitions import GOOD
from tests.demo_snapshot import load_demo

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
SILENT = [f"nid{n:06d}" for n in range(1001, 1009)]  # stopped 30 minutes ago
HALF = "nid000500"  # GPU 2 never reported
RESTARTED = "nid000700"  # silent from 40 to 25 minutes ago


@pytest.fixture
def topology(db):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    from apps.topology.models import Node

    return sorted(Node.objects.values_list("hostname", flat=True))


def product_row(text: str = GOOD, **slo) -> DataProduct:
    definition = load_product(text.replace("slo:\n", "checks: {every: 5m, window: 1h}\nslo:\n"), "p.yaml", field_units=field_units())
    definition["slo"].update(slo)
    definition["file"] = "p.yaml"
    return DataProduct.objects.create(name=definition["name"], title=definition["title"], domain=definition["domain"],
                                      status="active", owner_team="ops", owner_contact="ops@example.org", version="1.0.0",
                                      definition=definition, source_file="p.yaml", digest=definition["digest"], loaded=NOW)


def write_fleet(store, hosts, *, end=NOW, minutes=60, planted=True):
    times = pd.date_range(end=end - timedelta(minutes=1), periods=minutes, freq="60s", tz="UTC")
    rows = []
    for first in range(0, len(hosts), 500):
        chunk = hosts[first:first + 500]
        host = np.repeat(chunk, 4 * len(times))
        gpu = np.tile(np.repeat(np.arange(4), len(times)), len(chunk))
        ts = np.tile(times, 4 * len(chunk))
        frame = pd.DataFrame({"ts": ts, "cluster": "alps", "host": host, "gpu": gpu, "uuid": "", "field": 155, "value": 300.0})
        minute = ((frame["ts"] - times[0]).dt.total_seconds() // 60).astype(int)
        drop = (frame["host"].isin(SILENT) & (minute >= minutes - 30)) | ((frame["host"] == HALF) & (frame["gpu"] == 2)) \
            | ((frame["host"] == RESTARTED) & (minute >= minutes - 40) & (minute < minutes - 25))
        rows.append(frame[~drop] if planted else frame)
    for frame in rows:
        store.write(frame)


@pytest.fixture
def fleet(topology, store):
    write_fleet(store, topology)
    return store


def latest(product, kind) -> CheckRun:
    return CheckRun.objects.filter(product=product, kind=kind).order_by("-ran", "-id").first()


def test_checks_on_a_known_fleet(fleet, topology):
    product = product_row(**{"coverage": {"target": 0.999, "population": "topology_gpus", "within": None}})
    runs = {run.kind: run for run in run_checks(product, now=NOW)}
    assert runs["freshness"].status == "pass" and runs["freshness"].measured["age_s"] == 60.0  # the last sample is a minute old
    coverage = runs["coverage"].measured
    assert coverage["expected"] == len(topology) * 4 and coverage["missing_count"] == 8 * 4 + 1
    assert coverage["missing"] == [{"member": HALF, "gpus": [2], "whole": False},
                                   *({"member": host, "gpus": [0, 1, 2, 3], "whole": True} for host in SILENT)]
    assert runs["coverage"].status == "fail"
    gaps = {g["member"]: g for g in runs["gaps"].measured["gaps"]}
    assert sorted(gaps) == sorted([*SILENT, RESTARTED])
    assert gaps[RESTARTED] == {"member": RESTARTED, "start": (NOW - timedelta(minutes=40)).isoformat(),
                               "end": (NOW - timedelta(minutes=25)).isoformat(), "seconds": 900.0, "ongoing": False}
    assert all(gaps[host]["ongoing"] and gaps[host]["start"] == (NOW - timedelta(minutes=30)).isoformat() for host in SILENT)
    assert runs["drift"].status == "pass"
    product.refresh_from_db()
    assert product.state == "fresh" and product.coverage == pytest.approx(1 - 33 / (len(topology) * 4), abs=1e-6)
    assert product.next_run == NOW + timedelta(minutes=5) and product.summary["coverage"]["status"] == "fail"
    assert {(i.kind, i.closed) for i in Incident.objects.filter(product=product)} == {("coverage", None), ("gaps", None)}


def test_incidents_open_once_and_close_when_restored(fleet, topology):
    product = product_row(**{"coverage": {"target": 0.999, "population": "topology_gpus", "within": None}})
    run_checks(product, now=NOW)
    run_checks(product, now=NOW + timedelta(seconds=30))
    assert Incident.objects.filter(product=product, kind="coverage").count() == 1  # still the same incident
    later = NOW + timedelta(minutes=5)  # everyone's last sample is 6 minutes old then: still present
    write_fleet(fleet, [*SILENT, HALF], end=later, minutes=5, planted=False)  # the silent nodes report again
    run_checks(product, now=later)
    incident = Incident.objects.get(product=product, kind="coverage")
    assert incident.closed == later and incident.closed_by.status == "pass" and incident.opened == NOW
    assert latest(product, "coverage").measured["missing_count"] == 0


def test_a_source_that_stopped_is_stale_with_its_last_sample_time(fleet):
    product = product_row()
    runs = {run.kind: run for run in run_checks(product, now=NOW + timedelta(hours=3))}
    assert runs["freshness"].status == "fail" and runs["freshness"].measured["state"] == "stale"
    assert runs["freshness"].measured["newest"] == (NOW - timedelta(minutes=1)).isoformat()
    assert runs["freshness"].summary.startswith("Stale: newest sample 3.0 h old")
    assert runs["freshness"].measured["notes"][0].startswith("no sample in the last 1:00:00; looked back 31 days")
    assert runs["drift"].status == "skipped"  # nothing recent to read the schema from
    product.refresh_from_db()
    assert product.state == "stale" and product.newest_sample == NOW - timedelta(minutes=1)


def test_drift_when_the_registry_unit_no_longer_matches(fleet):
    product = product_row()
    product.definition["schema"][1]["unit"] = "kW"  # as if the registry (DCGM) had changed its unit under the product
    runs = {run.kind: run for run in run_checks(product, now=NOW)}
    assert runs["drift"].status == "fail" and runs["drift"].summary == "unit changed: 155 kW → W"


def test_an_unreadable_source_skips_its_checks_and_says_why(topology, store):
    text = GOOD.replace("source: {kind: telemetry}", "source: {kind: telemetry, store: nowhere}")
    product = product_row(text)
    runs = run_checks(product, now=NOW)
    assert {run.status for run in runs} == {"skipped"}
    assert runs[0].summary == "source unavailable: no telemetry store named 'nowhere' in TELEMETRY_BACKENDS"
    product.refresh_from_db()
    assert product.state == "unknown" and not Incident.objects.exists()


def test_a_model_source_with_node_members(topology):
    from apps.vetting.models import VettingResult, VettingRun

    text = GOOD.replace("source: {kind: telemetry}", "source: {kind: model, model: vetting.VettingResult, time_field: time, member_field: host}")
    text = text.replace("  - {name: power, type: double, unit: W, field: 155}\n", "  - {name: host, type: string, column: host}\n")
    text = text.replace("  coverage: {target: 0.99, population: topology_gpus}\n  sampling_period: 60s\n",
                        "  coverage: {target: 0.5, population: topology_nodes, within: 7d}\n").replace("warn: 2m, error: 10m", "warn: 2d, error: 7d")
    from apps.jobs.models import Cluster

    run = VettingRun.objects.create(cluster=Cluster.objects.create(name="alps"), source="vetnode", started=NOW - timedelta(days=1))
    vetted = topology[: len(topology) // 2 + 1]
    VettingResult.objects.bulk_create([VettingResult(run=run, time=NOW - timedelta(days=1 + i % 5), host=host, eval_name="gpu idle",
                                                     kind="vetnode", status="SUCCESS", outcome="pass") for i, host in enumerate(vetted)])
    product = product_row(text)
    runs = {r.kind: r for r in run_checks(product, now=NOW)}
    assert runs["freshness"].measured["age_s"] == 86400.0 and runs["freshness"].status == "pass"
    assert runs["coverage"].status == "pass" and runs["coverage"].measured["present"] == len(vetted)
    assert runs["coverage"].measured["missing"][0] == {"member": topology[len(topology) // 2 + 1]}
    assert runs["drift"].status == "pass"


@pytest.mark.engine_independent  # what the demo planted; the checks' queries on each engine are the tests above
def test_the_demo_gap_shows_the_exact_missing_nodes(transactional_db, store):
    from django.utils import timezone

    from apps.telemetry.backends.base import Query
    from apps.topology.models import Node

    load_demo()
    device = DataProduct.objects.get(name="dcgm-device")
    coverage = latest(device, "coverage")
    assert coverage.status == "fail"
    missing = [group["member"] for group in coverage.measured["missing"]]
    assert all(group["whole"] for group in coverage.measured["missing"])
    # The planted silence: the first sixteen nodes of group 17 that are up and ran none of the demo jobs with profiling telemetry.
    profiled = set(store.latest(Query(start=timezone.now() - timedelta(days=30), end=timezone.now() + timedelta(minutes=1),
                                      fields=(1001,)))["host"])
    group_17 = Node.objects.filter(group__number=17).exclude(state="down").order_by("hostname").values_list("hostname", flat=True)
    assert missing == [host for host in group_17 if host not in profiled][:16]
    gaps = latest(device, "gaps").measured
    assert sorted(gaps["ongoing"]) == sorted(missing)
    assert Incident.objects.filter(product=device, kind="coverage", closed__isnull=True).exists()
    stale = DataProduct.objects.get(name="gpu-error-counters")
    assert stale.state == "stale" and latest(stale, "freshness").summary.startswith("Stale: newest sample 2.")
    assert DataProduct.objects.get(name="slingshot-nic-counters").state == "unknown"
    assert DataProduct.objects.get(name="dcgm-profiling").state == "fresh"
