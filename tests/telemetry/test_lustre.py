"""Lustre job_stats as ``lctl get_param`` prints them (2.15 with ns times, start/elapsed, sumsq and histograms; 2.10
with whole seconds and reqs): the parser, the rates, and POST /api/v1/telemetry/import/?format=lustre-jobstats."""
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from apps.telemetry.lustre import job_io, job_ref, monotone, parse_text, totals

DATA = Path(__file__).parent / "data" / "lustre"
NEW = (DATA / "jobstats-2.15.txt").read_text()
OLD = (DATA / "jobstats-2.10.txt").read_text()
T0 = datetime(2025, 11, 24, 16, 0, tzinfo=timezone.utc)


def series(frame, name, job_id=1200772):
    rows = frame[(frame["name"] == name) & (frame["job_id"] == job_id)]
    assert len(rows) == 1, (name, rows)
    return float(rows["value"].iloc[0])


def test_several_targets_and_jobs_with_cluster_prefixed_and_quoted_ids():
    result = parse_text(NEW, cluster="alps", ts=T0)
    assert result.errors == []
    assert result.targets == ["scratch-OST0003", "scratch-OST0004", "scratch-MDT0000"]
    assert result.entries == 5
    assert result.jobs == [("alps", 1200772), ("alps", 1200811)]  # "alps:1200811" is printed quoted
    frame = result.frame
    assert series(frame, "lustre/scratch-OST0003/write_bytes") == 41943040
    assert series(frame, "lustre/scratch-OST0003/write_ops") == 10
    assert series(frame, "lustre/scratch-OST0003/read_bytes") == 2101248
    assert series(frame, "lustre/scratch-OST0004/write_bytes") == 50331648
    assert series(frame, "lustre/scratch-MDT0000/open") == 516
    assert series(frame, "lustre/scratch-MDT0000/getattr") == 1030
    assert series(frame, "lustre/scratch-OST0003/read_bytes", job_id=1200811) == 104857600
    # the OSTs' latency counters repeat the op counts: not stored
    assert not frame["name"].str.endswith(("/read", "/write")).any()
    assert set(frame["ts"]) == {pd.Timestamp(T0)} and frame["step"].isna().all()
    # cp.0 (jobid_name=%e.%u) is not a Slurm job: counted, said once, not an error
    assert result.not_jobs == {"cp.0": 1} and "cp.0" in result.not_jobs_words()


def test_the_old_format_whole_seconds_reqs_and_bare_ids():
    result = parse_text(OLD, cluster="alps", ts=T0)
    assert result.errors == []
    assert result.jobs == [("alps", 1200772)]
    assert series(result.frame, "lustre/scratch-OST0000/write_bytes") == 5242880
    assert series(result.frame, "lustre/scratch-OST0000/punch") == 1
    assert series(result.frame, "lustre/scratch-MDT0000/close") == 10
    assert result.not_jobs == {"bash.4711": 1}


@pytest.mark.parametrize("text, expected", [
    ("alps.1200772", ("alps", 1200772)), ("alps:1200772", ("alps", 1200772)), ("alps_1200772", ("alps", 1200772)),
    ("alps-1200772", ("alps", 1200772)), ("todi-dev-77", ("todi-dev", 77)), ("1200772", ("santis", 1200772)),
    ("cp.0", None), ("bash.4711", None), ("1200772.0", None), ("", None), ("alps.", None),
])
def test_job_ids_of_the_sites_jobid_name(text, expected):
    assert job_ref(text, "santis", {"alps", "santis", "todi-dev"}) == expected
    assert job_ref("alps.5", "santis") is None  # a prefix that is no cluster of the portal


def test_malformed_lines_are_named_and_the_good_part_is_kept():
    lines = NEW.splitlines()
    bad = list(lines)
    bad[7] = bad[7].replace("sum:         41943040", "sum:         4194x040")  # line 8: write_bytes
    bad[5] = "  elapsed_time:    soon secs.nsecs"                                 # line 6
    bad.insert(20, "this is not job_stats")                                        # line 21
    bad.append("  open:            { samples:  12, unit: usecs }")                # a stat of the last entry: fine
    result = parse_text("\n".join(bad), cluster="alps", ts=T0)
    by_line = {error["line"]: error for error in result.errors}
    assert set(by_line) == {6, 8, 21}
    assert by_line[8]["column"] == "write_bytes" and "'4194x040' is not a whole number" in by_line[8]["message"]
    assert "elapsed_time" == by_line[6]["column"]
    assert "not a line of job_stats" in by_line[21]["message"]
    frame = result.frame
    # the bad line's series is missing, its neighbours are kept
    assert not ((frame["name"] == "lustre/scratch-OST0003/write_bytes") & (frame["job_id"] == 1200772)).any()
    assert series(frame, "lustre/scratch-OST0003/read_bytes") == 2101248
    assert series(frame, "lustre/scratch-OST0004/write_bytes") == 50331648


def test_a_wrong_unit_an_entry_without_target_and_a_length_limit():
    text = ("- job_id: alps.5\n  write_bytes: { samples: 1, unit: bytes, sum: 10 }\n"
            "obdfilter.s-OST0001.job_stats=\njob_stats:\n- job_id: alps.5\n"
            "  write_bytes: { samples: 1, unit: usecs, min: 1, max: 1, sum: 10 }\n"
            "  read_bytes:  { samples: 2, unit: bytes, min: 1, max: 1, sum: 20 }\n")
    result = parse_text(text, cluster="alps", ts=T0)
    assert [e["line"] for e in result.errors] == [1, 2, 6]
    assert "before any" in result.errors[0]["message"] and "unit: 'usecs' is not bytes" in result.errors[2]["message"]
    assert series(result.frame, "lustre/s-OST0001/read_bytes", job_id=5) == 20
    limited = parse_text(NEW, cluster="alps", ts=T0, max_bytes=400)
    assert limited.errors[-1]["message"].startswith("the text is longer than 400")
    assert len(limited.frame) < len(parse_text(NEW, cluster="alps", ts=T0).frame)


def frame_of(points: dict[str, list[tuple[float, float]]], job_id=7) -> pd.DataFrame:
    rows = [{"ts": T0 + timedelta(seconds=s), "cluster": "alps", "job_id": job_id, "name": name, "step": pd.NA, "value": v}
            for name, items in points.items() for s, v in items]
    return pd.DataFrame(rows)


def test_rates_are_summed_over_targets_spread_between_readings_and_never_negative():
    frame = frame_of({
        "lustre/s-OST0000/write_bytes": [(0, 1000), (60, 61000), (120, 121000)],      # 1000 B/s
        "lustre/s-OST0001/write_bytes": [(0, 0), (60, 120000), (120, 120000)],        # 2000 B/s, then nothing
        "lustre/s-MDT0000/open": [(0, 5), (60, 65), (120, 20)],                       # 1/s, then expired: 20 since
        "lustre/s-OST0000/punch": [(0, 0), (60, 600)],                                # an OST op: no metadata
        "tokens_per_s": [(0, 1.0), (60, 2.0)],                                        # not Lustre: ignored
    })
    rates = job_io(frame, 60)
    assert list(rates["time"]) == [pd.Timestamp(T0), pd.Timestamp(T0 + timedelta(seconds=60))]
    assert rates["write_bytes_per_s"].tolist() == pytest.approx([3000.0, 1000.0])
    assert rates["metadata_ops_per_s"].tolist() == pytest.approx([1.0, 20 / 60])
    assert (rates[["read_bytes_per_s", "write_ops_per_s"]].to_numpy() == 0).all()
    assert (rates.drop(columns="time").to_numpy() >= 0).all()
    # readings 2 minutes apart, 30-second buckets: the increase spread evenly
    sparse = job_io(frame_of({"lustre/s-OST0000/read_bytes": [(0, 0), (120, 1200)]}), 30)
    assert sparse["read_bytes_per_s"].tolist() == pytest.approx([10.0] * 4)


def test_monotone_and_totals_count_restarts():
    assert monotone(np.array([5.0, 8.0, 2.0, 4.0])).tolist() == [5.0, 8.0, 10.0, 12.0]
    frame = frame_of({"lustre/s-OST0000/write_bytes": [(0, 100), (60, 300), (120, 50)],
                      "lustre/s-MDT0000/mkdir": [(0, 2), (60, 3)]})
    assert totals(frame)["write_bytes"] == 350 and totals(frame)["metadata_ops"] == 3


# ---------------------------------------------------------------- the import API

@pytest.fixture
def jobs(db):
    from apps.jobs.models import Cluster, Job

    cluster = Cluster.objects.create(name="alps")
    mine = Job.objects.create(cluster=cluster, job_id=1200772, user_name="alice", account="a-llm01", state="RUNNING",
                              node_list=["nid000001"], node_count=1, gpus=4, start_time=T0 - timedelta(hours=3))
    Job.objects.create(cluster=cluster, job_id=1200811, user_name="bob", account="a-other", state="RUNNING",
                       node_list=["nid000002"], node_count=1, gpus=4, start_time=T0 - timedelta(hours=1))
    return mine


@pytest.fixture
def staff(api_client, make_user):
    user = make_user("ops")
    user.is_staff = True
    user.save()
    api_client.force_authenticate(user)
    return api_client


def post(client, text, query="ts=1764000000", **headers):
    return client.generic("POST", f"/api/v1/telemetry/import/?format=lustre-jobstats&cluster=alps&{query}", text,
                          content_type="text/plain", **headers)


def test_the_import_stores_every_jobs_counters(staff, jobs, store):
    answer = post(staff, NEW)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["jobs"] == ["alps/1200772", "alps/1200811"] and body["rejected"] == 0 and body["not_jobs"] == 1
    assert body["accepted"] == len(parse_text(NEW, cluster="alps", ts=T0).frame)
    stored = store.read_job_series("alps", 1200772, names=["lustre/scratch-OST0004/write_bytes"])
    assert stored["value"].tolist() == [50331648.0]
    assert stored["ts"].iloc[0] == pd.Timestamp(1764000000, unit="s", tz="UTC")


def test_a_job_token_writes_its_own_job_only(api_client, jobs, store):
    from apps.jobs.services import job_token_issue

    token = job_token_issue(jobs, created_by="alice")
    answer = post(api_client, NEW, HTTP_AUTHORIZATION=f"JobToken {token}")
    assert answer.status_code == 200, answer.content
    assert answer.json()["jobs"] == ["alps/1200772"] and answer.json()["rejected"] > 0
    assert "a job token writes its own job" in answer.json()["errors"][-1]["message"]
    assert store.read_job_series("alps", 1200811).empty
    assert not store.read_job_series("alps", 1200772).empty


def test_no_good_entry_is_a_400_listing_the_problems_and_ts_is_required(staff, jobs, store):
    broken = "obdfilter.s-OST0000.job_stats=\njob_stats:\n- job_id: alps.1200772\n  write_bytes: { samples: x }\n"
    answer = post(staff, broken)
    assert answer.status_code == 400
    assert "line 4: write_bytes: samples: 'x' is not a whole number" in answer.json()["detail"]
    only_others = post(staff, "obdfilter.s-OST0000.job_stats=\n- job_id: cp.0\n  write_bytes: { samples: 1, sum: 2 }\n")
    assert only_others.status_code == 400 and "not a Slurm job" in only_others.json()["detail"]
    no_ts = post(staff, NEW, query="")
    assert no_ts.status_code == 400 and "ts is required" in no_ts.json()["detail"]
    assert store.read_job_series("alps", 1200772).empty
