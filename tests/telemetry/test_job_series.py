"""The canonical job-series table (``base.canonical_app``): what it accepts, how it says what it refuses;
and the demo reset removing the demo cluster's series. The backends' side is in ``contract.py``."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from apps.telemetry.backends.base import (
    APP_COLUMNS, Query, TelemetryBackend, TelemetryUnavailable, app_window, canonical_app, empty_app_frame,
)


def rows(**changes) -> pd.DataFrame:
    frame = pd.DataFrame({
        "ts": ["2026-11-21T10:00:00Z", "2026-11-21T10:00:30.25Z", "2026-11-21T10:01:00Z"],
        "cluster": "alps", "job_id": [4242, 4242, 4242], "name": ["loss", "loss", "event.checkpoint"],
        "step": [100, 101, None], "value": [2.5, 2.25, 1.0]})
    for column, (row, value) in changes.items():
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
    return frame


def test_a_good_frame_becomes_the_canonical_columns_and_types():
    out = canonical_app(rows())
    assert list(out.columns) == APP_COLUMNS
    assert str(out["ts"].dtype) == "datetime64[ns, UTC]" and out["job_id"].dtype == np.int64
    assert str(out["step"].dtype) == "Int64" and out["value"].dtype == np.float64
    assert out["cluster"].dtype == object and out["name"].dtype == object
    assert out["ts"].iloc[1] == pd.Timestamp("2026-11-21T10:00:30.25Z")
    assert out["step"].isna().tolist() == [False, False, True]


def test_times_may_be_datetimes_naive_ones_being_utc_and_other_zones_converted():
    frame = rows()
    frame["ts"] = [datetime(2026, 11, 21, 10, 0), pd.Timestamp("2026-11-21T11:00:30", tz="Europe/Zurich"),
                   datetime(2026, 11, 21, 10, 1, tzinfo=timezone.utc)]
    out = canonical_app(frame)
    assert out["ts"].tolist() == [pd.Timestamp("2026-11-21T10:00:00Z"), pd.Timestamp("2026-11-21T10:00:30Z"),
                                  pd.Timestamp("2026-11-21T10:01:00Z")]


def test_step_may_be_left_out_and_is_then_unknown():
    out = canonical_app(rows().drop(columns="step"))
    assert out["step"].isna().all() and str(out["step"].dtype) == "Int64"


def test_job_ids_and_steps_beyond_float_precision_stay_exact():
    frame = rows()
    frame["job_id"] = np.array([2**60 + 1] * 3, dtype="int64")
    frame["step"] = pd.array([2**55 + 3, 0, None], dtype="Int64")
    out = canonical_app(frame)
    assert out["job_id"].tolist() == [2**60 + 1] * 3
    assert out["step"].iloc[0] == 2**55 + 3


@pytest.mark.parametrize("name", ["a", "tokens_per_s", "event.checkpoint", "train/loss:avg-1", "A" + "b" * 63])
def test_series_names_that_fit_the_rule_are_kept(name):
    assert canonical_app(rows(name=(0, name)))["name"].iloc[0] == name


@pytest.mark.parametrize("name", ["", "1loss", "_loss", "loss rate", "lösung", "b" * 65, "loss\n"])
def test_series_names_that_do_not_fit_are_refused_naming_row_and_column(name):
    with pytest.raises(ValueError, match=r"^job series row 1, column 'name': .* is not a series name \(a letter"):
        canonical_app(rows(name=(1, name)))


@pytest.mark.parametrize("column, value, message", [
    ("ts", 1795255200, "row 2, column 'ts': 1795255200 is a number, not a time"),
    ("ts", "21/11/2026", "row 2, column 'ts': '21/11/2026' is not a time"),
    ("ts", None, "row 2, column 'ts': None is missing"),
    ("ts", "3000-01-01T00:00:00Z", "row 2, column 'ts': '3000-01-01T00:00:00Z' is outside the years 1677-2262"),
    ("cluster", "", "row 2, column 'cluster': '' is not a cluster name"),
    ("cluster", None, "row 2, column 'cluster': None is missing"),
    ("cluster", 7, "row 2, column 'cluster': 7 is not text"),
    ("job_id", "abc", "row 2, column 'job_id': 'abc' is not an integer"),
    ("job_id", -3, "row 2, column 'job_id': -3 is not an integer >= 0"),
    ("job_id", None, "row 2, column 'job_id': None is missing"),
    ("step", -1, "row 2, column 'step': -1 is not an integer >= 0"),
    ("step", 1.5, "row 2, column 'step': 1.5 is not an integer >= 0"),
    ("value", "fast", "row 2, column 'value': 'fast' is not a number"),
    ("value", None, "row 2, column 'value': None is missing"),
    ("value", float("-inf"), "row 2, column 'value': -inf must be a finite number"),
])
def test_a_bad_cell_is_named_by_row_column_and_value(column, value, message):
    with pytest.raises(ValueError) as caught:
        canonical_app(rows(**{column: (2, value)}))
    assert str(caught.value).startswith(f"job series {message}")


def test_the_first_bad_row_is_the_one_named():
    frame = rows()
    frame["value"] = [1.0, float("nan"), float("nan")]
    with pytest.raises(ValueError, match="row 1, column 'value'"):
        canonical_app(frame)


def test_a_numeric_time_column_is_refused():
    frame = rows()
    frame["ts"] = [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="row 0, column 'ts': 1.0 is a number, not a time"):
        canonical_app(frame)


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match="lacks column\\(s\\) job_id, value"):
        canonical_app(rows().drop(columns=["job_id", "value"]))


def test_an_empty_frame_is_the_empty_canonical_frame():
    out = canonical_app(rows().iloc[:0])
    assert out.empty and list(out.columns) == APP_COLUMNS
    assert out.dtypes.astype(str).tolist() == empty_app_frame().dtypes.astype(str).tolist() == [
        "datetime64[ns, UTC]", "object", "int64", "object", "Int64", "float64"]


def test_the_read_window_is_checked():
    assert app_window(None, None) == (None, None)
    assert app_window("2026-11-21T10:00:00Z", None)[0] == pd.Timestamp("2026-11-21T10:00:00Z").value
    with pytest.raises(ValueError, match="window is empty"):
        app_window(datetime(2026, 11, 21, 10), datetime(2026, 11, 21, 10))
    with pytest.raises(ValueError, match="job series start 'soon' is not a time"):
        app_window("soon", None)


class SamplesOnly(TelemetryBackend):
    """A site's backend written before job series: it loads, and says it lacks them."""

    name = "site store"

    def write(self, frame):
        return 0

    def read(self, query: Query):
        return pd.DataFrame()

    def delete(self, query: Query):
        return 0


def test_a_backend_without_job_series_says_so_by_name():
    store = SamplesOnly()
    for call in (lambda: store.write_job_series(rows()), lambda: store.read_job_series("alps", 1),
                 lambda: store.delete_job_series("alps")):
        with pytest.raises(TelemetryUnavailable, match="site store \\(SamplesOnly\\) keeps no job series"):
            call()
    assert store.read(Query(start=datetime(2026, 1, 1), end=datetime(2026, 1, 1) + timedelta(hours=1))).empty


def test_the_demo_reset_removes_the_demo_clusters_job_series_and_no_others(store):
    """``store`` (tests/conftest.py) is a fresh embedded store configured as the portal's default."""
    from apps.telemetry.demo import DEMO_CLUSTER, reset

    demo, other = canonical_app(rows().assign(cluster=DEMO_CLUSTER)), canonical_app(rows().assign(cluster="todi"))
    store.write_job_series(pd.concat([demo, other], ignore_index=True))
    reset()
    assert store.read_job_series(DEMO_CLUSTER, 4242).empty
    assert len(store.read_job_series("todi", 4242)) == 3
