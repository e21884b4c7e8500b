"""The explorer's arithmetic and bands (plain modules, no Django): buckets are the window divided by the step,
rows are counted apart; a band across many members shows min and max, and a silent member counts as 0."""
from datetime import datetime, timedelta, timezone

import pandas as pd

from apps.catalog.figures import bucket_count, empty_figure, series_figure, spread, window_note
from apps.catalog.queries import resolve_times, sample_query

T0 = datetime(2026, 11, 26, 19, 30, tzinfo=timezone.utc)


def test_buckets_are_the_span_over_the_step_and_rows_are_counted_apart():
    """Issue 23: "400 buckets of 60 s from 19:30 to 20:28" counted rows as buckets; 58 min at 60 s is 58."""
    end = T0 + timedelta(minutes=58)
    assert bucket_count(T0, end, 60) == 58
    assert bucket_count(T0, end + timedelta(seconds=1), 60) == 59  # a partial bucket counts
    assert bucket_count(T0, T0, 60) == 0
    assert window_note(T0, end, 60, 400) == "58 buckets of 60 s from 2026-11-26 19:30 to 20:28 UTC (400 rows read)."
    assert window_note(T0, T0 + timedelta(minutes=1), 60, 1) == "1 bucket of 60 s from 2026-11-26 19:30 to 19:31 UTC (1 row read)."


def fleet(hosts: int, silent: int, buckets: int = 10, silent_from: int = 6, late: int = 0) -> pd.DataFrame:
    """``hosts`` nodes at 300 W per bucket; the last ``silent`` of them send nothing from bucket ``silent_from`` on;
    the first ``late`` of them begin only at bucket 3."""
    rows = []
    for b in range(buckets):
        for h in range(hosts):
            if h >= hosts - silent and b >= silent_from or h < late and b < 3:
                continue
            rows.append({"bucket": T0 + timedelta(minutes=b), "host": f"nid{h:06d}", "gpu": 0, "field": 155, "mean": 300.0 + h % 5,
                         "min": 290.0, "max": 310.0})
    return pd.DataFrame(rows)


def test_a_band_shows_min_and_max_and_silent_members_pull_the_minimum_to_zero():
    """Issue 23: the median band of group 17 hid its 16 silent nodes."""
    frame = fleet(64, 16)
    per_group = frame.rename(columns={"host": "group"})[["group", "bucket", "mean"]]
    band = spread(per_group, "mean")
    assert list(band["silent"]) == [0] * 6 + [16] * 4
    assert list(band["min"])[:6] == [300.0] * 6 and list(band["min"])[6:] == [0.0] * 4
    assert set(band["max"]) == {304.0}
    assert all(value >= 300.0 for value in band[0.5])  # 16 of 64 at 0 hardly move the median: the min is what shows them
    figure, sentence = series_figure(frame, group_by="host", stat="mean", labels={155: "power (W)"}, window=(T0, T0 + timedelta(minutes=10)))
    names = [trace.name for trace in figure.data]
    assert names == ["power (W) max", None, "power (W) 10-90 % of 64 hosts", "power (W) median", "power (W) min (silent = 0)"]
    minimum = figure.data[-1]
    assert list(minimum.y)[-1] == 0.0 and list(minimum.customdata)[-1] == 16
    assert "min-max across 64 hosts, a silent one counted as 0 (16 hosts silent at the end" in sentence
    quiet, said = series_figure(fleet(64, 0), group_by="host", stat="mean", labels={155: "power (W)"})
    assert min(quiet.data[-1].y) == 300.0 and "none silent" in said
    # Nodes that only begin to report are not silent before their first sample: no zeros, no count.
    late = spread(fleet(64, 16, late=30).rename(columns={"host": "group"})[["group", "bucket", "mean"]], "mean")
    assert list(late["silent"]) == [0] * 6 + [16] * 4 and list(late["min"])[:6] == [300.0] * 6


def test_an_empty_figure_has_a_message_and_no_axes():
    figure = empty_figure("Choose one of your jobs")
    assert figure.layout.xaxis.visible is False and figure.layout.yaxis.visible is False
    assert figure.layout.annotations[0].text == "Choose one of your jobs"
    none, sentence = series_figure(None, group_by="host", stat="mean", labels={})
    assert sentence == "No samples in this window." and none.layout.xaxis.visible is False


def test_the_sample_query_is_the_readers():
    """Staff run the declared query; everyone else its job_api form on their latest job, or is told why not."""
    sample = {"api": "/api/v1/telemetry/series/?host=nid000001&start={now-1h}&end={now}",
              "job_api": "/api/v1/telemetry/series/?job={job}&field=155"}
    staff = sample_query(sample, staff=True, now=T0, job=None)
    assert staff.api == "/api/v1/telemetry/series/?host=nid000001&start=2026-11-26T18:30:00Z&end=2026-11-26T19:30:00Z"
    mine = sample_query(sample, staff=False, now=T0, job="alps/42")
    assert mine.api == "/api/v1/telemetry/series/?job=alps/42&field=155" and "your latest" in mine.scope
    none = sample_query(sample, staff=False, now=T0, job=None)
    assert none.api is None and "you have none" in none.scope
    assert sample_query({"api": "/api/v1/jobs/{job}/ranks/"}, staff=True, now=T0, job="alps/7").api == "/api/v1/jobs/alps/7/ranks/"
    assert sample_query({"api": "/api/v1/jobs/?limit=5"}, staff=False, now=T0, job=None).api == "/api/v1/jobs/?limit=5"
    assert resolve_times("{now-2d}", T0) == "2026-11-24T19:30:00Z"
