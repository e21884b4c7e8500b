"""The checks on constructed data with known answers: freshness, coverage, gaps and schema drift."""
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.catalog import quality

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def newest(**ages_s) -> pd.Series:
    return pd.Series({member.replace("_", "/"): NOW - timedelta(seconds=age) for member, age in ages_s.items()})


@pytest.mark.parametrize("age, state, status", [(0, "fresh", "pass"), (120, "fresh", "pass"), (121, "aging", "warn"),
                                                (600, "aging", "warn"), (601, "stale", "fail")])
def test_freshness_states_at_their_boundaries(age, state, status):
    result = quality.freshness(newest(a=age, b=age + 3000), NOW, warn=120, error=600)
    assert (result.measured["state"], result.status) == (state, status)
    assert result.measured["age_s"] == age and result.measured["newest"] == (NOW - timedelta(seconds=age)).isoformat()


def test_freshness_reports_the_members_that_lag():
    result = quality.freshness(newest(n1=10, n2=20, n3=30, n4=4000), NOW, warn=120, error=600)
    assert result.measured["state"] == "fresh"
    assert result.measured["stalest"][0] == ["n4", 4000.0]
    assert result.measured["p50_s"] == 25.0 and result.measured["max_s"] == 4000.0
    assert result.summary.startswith("Fresh: newest sample 10 s old (target: within 2 min, stale after 10 min)")


def test_no_data_is_stale():
    result = quality.freshness(pd.Series(dtype="datetime64[ns, UTC]"), NOW, warn=60, error=120)
    assert (result.status, result.measured["state"]) == ("fail", "stale")
    assert result.summary == "no data: the source has no sample in the check window"


def test_coverage_lists_the_missing_members_by_node():
    expected = {f"nid{n:06d}/{g}" for n in range(1, 11) for g in range(4)}
    present = expected - {f"nid000003/{g}" for g in range(4)} - {"nid000007/2"} | {"nid999999/0"}
    result = quality.coverage(present, expected, target=0.95, population="topology_gpus",
                              expected_per_host={f"nid{n:06d}": 4 for n in range(1, 11)})
    assert result.status == "fail"
    assert result.measured["ratio"] == pytest.approx(35 / 40)
    assert result.measured["missing"] == [{"member": "nid000003", "gpus": [0, 1, 2, 3], "whole": True},
                                          {"member": "nid000007", "gpus": [2], "whole": False}]
    assert result.measured["unexpected"] == 1 and result.measured["missing_count"] == 5
    assert result.summary == ("87.5% of 40 expected (topology_gpus) present, target 95.0%; missing: nid000003 (all GPUs), "
                              "and 1 node(s) with some GPUs missing")


def test_full_coverage_passes_and_an_empty_population_is_skipped():
    members = {"a", "b"}
    assert quality.coverage(members, members, target=1.0, population="clusters").status == "pass"
    assert quality.coverage(set(), set(), target=1.0, population="running_jobs").status == "skipped"


@settings(max_examples=200, deadline=None)
@given(expected=st.sets(st.integers(0, 300), min_size=1), present=st.sets(st.integers(0, 400)))
def test_coverage_ratio_is_present_over_expected(expected, present):
    result = quality.coverage({str(x) for x in present}, {str(x) for x in expected}, target=0.5, population="topology_nodes")
    assert result.measured["ratio"] == pytest.approx(len(expected & present) / len(expected), abs=1e-6)  # kept to 6 places
    assert result.measured["missing_count"] == len(expected - present)
    assert (result.status == "pass") == (len(expected & present) / len(expected) >= 0.5)


def counts(member: str, minutes: list[int]) -> pd.DataFrame:
    start = NOW - timedelta(hours=1)
    return pd.DataFrame({"member": member, "bucket": [start + timedelta(minutes=m) for m in minutes], "count": 4})


def test_gaps_inner_and_ongoing_with_their_exact_intervals():
    steady = counts("nid000001", list(range(60)))
    restart = counts("nid000002", [m for m in range(60) if not 20 <= m < 32])  # silent 12 min
    stopped = counts("nid000003", list(range(25)))  # silent since minute 25
    blip = counts("nid000004", [m for m in range(60) if m not in (40, 41)])  # 2 min: below the limit
    late = counts("nid000005", list(range(30, 60)))  # joined late: not a gap
    frame = pd.concat([steady, restart, stopped, blip, late])
    result = quality.gaps(frame, start=NOW - timedelta(hours=1), end=NOW, period=60, gap_after=3)
    assert result.status == "fail"
    gaps = {g["member"]: g for g in result.measured["gaps"]}
    assert sorted(gaps) == ["nid000002", "nid000003"]
    assert gaps["nid000002"] == {"member": "nid000002", "start": (NOW - timedelta(minutes=40)).isoformat(),
                                 "end": (NOW - timedelta(minutes=28)).isoformat(), "seconds": 720.0, "ongoing": False}
    assert gaps["nid000003"] == {"member": "nid000003", "start": (NOW - timedelta(minutes=35)).isoformat(), "end": NOW.isoformat(),
                                 "seconds": 2100.0, "ongoing": True}
    assert result.measured["ongoing"] == ["nid000003"] and result.measured["members"] == 5
    assert result.summary == "2 gap(s) in 2 of 5 members, 1 still silent (nid000003); longest 35 min on nid000003"


def test_closed_gaps_only_warn_and_none_pass():
    frame = counts("n", [m for m in range(60) if not 10 <= m < 20])
    assert quality.gaps(frame, start=NOW - timedelta(hours=1), end=NOW, period=60, gap_after=3).status == "warn"
    whole = counts("n", list(range(60)))
    result = quality.gaps(whole, start=NOW - timedelta(hours=1), end=NOW, period=60, gap_after=3)
    assert result.status == "pass" and result.summary == "no gap longer than 3 sampling periods (3 min) in 1 members"


def test_drift_tells_new_missing_renamed_and_changed_units():
    declared = {"power": {"unit": "W", "type": "double"}, "temp": {"unit": "°C"}, "sm_clock": {"unit": "MHz"},
                "util": {"unit": "percent"}}
    observed = {"power": {"unit": "mW", "type": "double"}, "gpu_temp_celsius": {"unit": "°C"}, "util": {"unit": "percent", "type": "integer"},
                "energy": {"unit": "mJ"}}
    result = quality.drift(declared, observed, aliases={"temp": "gpu_temp_celsius"})
    assert result.status == "fail"
    assert result.measured["missing"] == ["sm_clock"]
    assert result.measured["renamed"] == [{"column": "temp", "now": "gpu_temp_celsius"}]
    assert result.measured["unit_changes"] == [{"column": "power", "declared": "W", "observed": "mW"}]
    assert result.measured["new"] == ["energy"]
    assert result.summary == ("missing: sm_clock; renamed: temp → gpu_temp_celsius; unit changed: power W → mW; "
                              "new, not declared: energy")
    only_new = quality.drift({"a": {}}, {"a": {}, "b": {}})
    assert only_new.status == "warn"
    assert quality.drift({"a": {}}, {"a": {}, "b": {}}, report_new=False).status == "pass"
    assert quality.drift({"a": {}}, None).status == "skipped"


def test_the_product_state_comes_from_freshness():
    fresh = quality.freshness(newest(a=1), NOW, warn=60, error=120)
    assert quality.product_state([fresh]) == "fresh"
    assert quality.product_state([quality.Result("freshness", "skipped", "no source")]) == "unknown"


def test_job_members_are_never_named_in_summaries_and_are_cut_to_what_a_reader_may_see():
    """Issue 16 item 8: members that are jobs (alps/4242) must not reach readers who may not see the job."""
    assert quality.members_are_jobs({"source": {"kind": "model", "member_field": ["job__cluster__name", "job__job_id"]}, "slo": {}})
    assert quality.members_are_jobs({"source": {"kind": "model"}, "slo": {"coverage": {"population": "running_jobs"}}})
    assert not quality.members_are_jobs({"source": {"kind": "model", "member_field": "host"}, "slo": {}})
    assert not quality.members_are_jobs({"source": {"kind": "model", "member_field": "cluster__name"}, "slo": {}})
    frame = pd.concat([counts("alps/1", list(range(60))), counts("alps/2", list(range(25))), counts("alps/3", [m for m in range(60) if not 20 <= m < 32])])
    named = quality.gaps(frame, start=NOW - timedelta(hours=1), end=NOW, period=60, gap_after=3)
    private = quality.gaps(frame, start=NOW - timedelta(hours=1), end=NOW, period=60, gap_after=3, name_members=False)
    assert "alps/2" in named.summary and "alps/" not in private.summary
    assert private.summary == "2 gap(s) in 2 of 3 members, 1 still silent; longest 35 min" and private.measured == named.measured
    cover = quality.coverage({"alps/1"}, {"alps/1", "alps/2", "alps/3"}, target=0.9, population="running_jobs", name_members=False)
    assert "alps/" not in cover.summary and cover.summary.endswith("; 2 missing")
    cut = quality.redact_members("gaps", private.measured, {"alps/3"})
    assert [g["member"] for g in cut["gaps"]] == ["alps/3"] and cut["gaps_hidden"] == 1
    assert cut["ongoing"] == [] and cut["ongoing_hidden"] == 1 and cut["gap_count"] == 2
    assert quality.listed_members("coverage", cover.measured) == {"alps/2", "alps/3"}
    assert quality.redact_members("coverage", cover.measured, set())["missing"] == []


def test_hosts_sending_only_inside_jobs_are_silent_only_while_their_job_runs():
    """expected_while: jobs — a host that stopped with its job is no gap, one that stopped while its job
    runs is still silent, one that stopped long before its job ended had a closed gap."""
    ended_with_job = counts("nid000001", list(range(25)))  # job ended at minute 25
    died_in_job = counts("nid000002", list(range(25)))  # job still running
    died_before_end = counts("nid000003", list(range(10)))  # job ended at minute 40
    no_job = counts("nid000004", list(range(15)))  # no job in the map: nothing expected after its samples
    frame = pd.concat([ended_with_job, died_in_job, died_before_end, no_job])
    start = NOW - timedelta(hours=1)
    until = {"nid000001": start + timedelta(minutes=25), "nid000002": None, "nid000003": start + timedelta(minutes=40)}
    result = quality.gaps(frame, start=start, end=NOW, period=60, gap_after=3, expected_until=until)
    gaps = {g["member"]: g for g in result.measured["gaps"]}
    assert sorted(gaps) == ["nid000002", "nid000003"]
    assert gaps["nid000002"]["ongoing"] is True and gaps["nid000002"]["end"] == NOW.isoformat()
    assert gaps["nid000003"] == {"member": "nid000003", "start": (start + timedelta(minutes=10)).isoformat(),
                                 "end": (start + timedelta(minutes=40)).isoformat(), "seconds": 1800.0, "ongoing": False}
    assert result.measured["ongoing"] == ["nid000002"] and result.status == "fail"
    # Without the map every one of them would be "still silent".
    assert quality.gaps(frame, start=start, end=NOW, period=60, gap_after=3).measured["ongoing_count"] == 4
