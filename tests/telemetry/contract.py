"""The contract every telemetry backend keeps, as a test class to subclass with a ``backend`` fixture.

The expected numbers are computed by the reference pandas aggregation (``aggregate_frame``) over the
samples the test wrote, not over what the backend returns, so a backend that loses or invents
samples fails here.
"""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from apps.telemetry.backends.base import COLUMNS, STATS, Query, aggregate_frame, latest_frame, sort_aggregate, sort_samples

T0 = datetime(2026, 11, 21, 10, 0, 0, tzinfo=timezone.utc)


def synthetic(hosts=("nid000001", "nid000002"), gpus=(0, 1, 2, 3), fields=(1002, 155), minutes=30, every_s=10,
              cluster="alps", seed=1, start=T0) -> pd.DataFrame:
    """Regular samples with a deterministic random walk per series."""
    rng = np.random.default_rng(seed)
    times = pd.date_range(start, periods=minutes * 60 // every_s, freq=f"{every_s}s", tz="UTC")
    index = pd.MultiIndex.from_product([hosts, gpus, fields, times], names=["host", "gpu", "field", "ts"])
    frame = index.to_frame(index=False)
    frame["cluster"] = cluster
    frame["uuid"] = [f"GPU-{h[-2:]}{g}" for h, g in zip(frame["host"], frame["gpu"])]
    frame["value"] = rng.random(len(frame)).round(6) * np.where(frame["field"] == 155, 700.0, 1.0)
    return frame[COLUMNS]


def assert_frames_equal(actual: pd.DataFrame, expected: pd.DataFrame, *, rtol=1e-9, approximate=()):
    assert list(actual.columns) == list(expected.columns)
    assert len(actual) == len(expected), (len(actual), len(expected))
    actual, expected = actual.reset_index(drop=True), expected.reset_index(drop=True)
    for column in expected.columns:
        if column in approximate:
            assert np.allclose(actual[column], expected[column], rtol=0.05, atol=0.02), column
        elif expected[column].dtype.kind == "f":
            assert np.allclose(actual[column].to_numpy(float), expected[column].to_numpy(float), rtol=rtol, atol=1e-12), column
        else:
            assert actual[column].tolist() == expected[column].tolist(), column


class BackendContract:
    """Subclass with a ``backend`` fixture yielding an empty store."""

    def window(self, **kwargs):
        return Query(start=kwargs.pop("start", T0), end=kwargs.pop("end", T0 + timedelta(hours=1)), **kwargs)

    def test_written_samples_read_back_exactly_sorted_with_canonical_types(self, backend):
        data = synthetic()
        assert backend.write(data.sample(frac=1, random_state=3)) == len(data)
        out = backend.read(self.window())
        assert str(out["ts"].dtype) == "datetime64[ns, UTC]"
        assert out["gpu"].dtype == np.int16 and out["field"].dtype == np.int32 and out["value"].dtype == np.float64
        assert_frames_equal(out, sort_samples(data))

    def test_the_window_is_half_open_and_filters_apply(self, backend):
        data = synthetic()
        backend.write(data)
        start, end = T0 + timedelta(minutes=5), T0 + timedelta(minutes=10)
        out = backend.read(self.window(start=start, end=end, hosts=["nid000002"], gpus=[1, 3], fields=[155]))
        expected = data[(data.ts >= start) & (data.ts < end) & (data.host == "nid000002") & data.gpu.isin([1, 3])
                        & (data.field == 155)]
        assert len(expected) == 2 * 30
        assert_frames_equal(out, sort_samples(expected))
        assert backend.read(self.window(cluster="other")).empty

    def test_writing_the_same_batch_twice_changes_nothing_and_a_new_value_replaces(self, backend):
        data = synthetic(minutes=5)
        backend.write(data)
        backend.write(data)
        assert len(backend.read(self.window())) == len(data)
        changed = data.iloc[:10].assign(value=42.0)
        backend.write(changed)
        out = backend.read(self.window()).set_index(["host", "gpu", "field", "ts"])["value"]
        for row in changed.itertuples():
            assert out.loc[(row.host, row.gpu, row.field, row.ts)] == 42.0
        assert len(out) == len(data)

    def test_repeats_inside_a_batch_keep_the_last(self, backend):
        row = synthetic(minutes=1).iloc[:1]
        backend.write(pd.concat([row.assign(value=1.0), row.assign(value=2.0)]))
        out = backend.read(self.window())
        assert out["value"].tolist() == [2.0]

    @pytest.mark.parametrize("step, start_offset_s, end_offset_s", [
        (60, 0, 3600), (600, 0, 3600), (600, 75, 1500), (7, 3, 1000), (3600, 0, 3600), (120, 30, 1790), (10, 0, 600),
    ])
    def test_aggregates_match_the_reference(self, backend, step, start_offset_s, end_offset_s):
        data = synthetic()
        backend.write(data)
        query = self.window(start=T0 + timedelta(seconds=start_offset_s), end=T0 + timedelta(seconds=end_offset_s))
        inside = data[(data.ts >= query.start) & (data.ts < query.end)]
        assert_frames_equal(sort_aggregate(backend.aggregate(query, step)), aggregate_frame(inside, step))

    def test_percentiles_match_the_reference(self, backend):
        data = synthetic(minutes=20)
        backend.write(data)
        expected = aggregate_frame(data, 300, STATS)
        approximate = () if getattr(backend, "percentiles_exact", True) else ("p10", "p50", "p90")
        assert_frames_equal(sort_aggregate(backend.aggregate(self.window(), 300, STATS)), expected, approximate=approximate)

    def test_aggregates_follow_overwrites_and_deletes(self, backend):
        data = synthetic()
        backend.write(data)
        changed = data[data.field == 155].iloc[::7].assign(value=-5.0)
        backend.write(changed)
        current = data.set_index(["host", "gpu", "field", "ts"])
        current.loc[changed.set_index(["host", "gpu", "field", "ts"]).index, "value"] = -5.0
        current = current.reset_index()[COLUMNS]
        assert_frames_equal(sort_aggregate(backend.aggregate(self.window(), 600)), aggregate_frame(current, 600))
        cut = self.window(start=T0 + timedelta(minutes=7), end=T0 + timedelta(minutes=13), hosts=["nid000001"])
        removed = backend.delete(cut)
        kept = current[~((current.ts >= cut.start) & (current.ts < cut.end) & (current.host == "nid000001"))]
        assert removed == len(current) - len(kept)
        assert_frames_equal(sort_aggregate(backend.aggregate(self.window(), 600)), aggregate_frame(kept, 600))
        assert_frames_equal(sort_aggregate(backend.aggregate(self.window(), 60)), aggregate_frame(kept, 60))

    def test_latest_is_the_last_sample_of_each_series(self, backend):
        data = synthetic(minutes=3)
        backend.write(data)
        assert_frames_equal(backend.latest(self.window()), latest_frame(data))
        early = self.window(end=T0 + timedelta(seconds=25))
        assert_frames_equal(backend.latest(early), latest_frame(data[data.ts < early.end]))

    def test_an_empty_window_is_an_empty_canonical_frame(self, backend):
        backend.write(synthetic(minutes=1))
        out = backend.read(self.window(start=T0 + timedelta(days=1), end=T0 + timedelta(days=2)))
        assert out.empty and list(out.columns) == COLUMNS
        agg = backend.aggregate(self.window(start=T0 + timedelta(days=1), end=T0 + timedelta(days=2)), 60)
        assert agg.empty and list(agg.columns)[:6] == ["bucket", "cluster", "host", "gpu", "field", "count"]

    def test_non_finite_values_are_refused_and_nothing_is_written(self, backend):
        data = synthetic(minutes=1)
        data.loc[3, "value"] = float("nan")
        with pytest.raises(ValueError, match="finite"):
            backend.write(data)
        assert backend.read(self.window()).empty

    def test_check_says_it_is_usable(self, backend):
        assert isinstance(backend.check(), str)
