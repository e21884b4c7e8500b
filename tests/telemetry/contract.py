"""The contract every telemetry backend keeps, as a test class to subclass with a ``backend`` fixture.

The expected numbers are computed by the reference pandas aggregation (``aggregate_frame``) over the
samples the test wrote, not over what the backend returns, so a backend that loses or invents
samples fails here. Job series (``APP_COLUMNS``) are compared with the frame the test built.
"""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from apps.telemetry.backends.base import (
    APP_COLUMNS, COLUMNS, HOST_AGGREGATE_COLUMNS, HOST_COLUMNS, NET_AGGREGATE_COLUMNS, NET_COLUMNS, STATS, Query, aggregate_frame, latest_frame,
    sort_aggregate, sort_samples,
)
from apps.telemetry.retention import Retention, TierError

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


def app_synthetic(cluster="alps", job_id=4242, names=("loss", "tokens_per_s"), points=12, every_s=30, seed=2,
                  start=T0, markers=("event.checkpoint",)) -> pd.DataFrame:
    """A job's application series: per name ``points`` points ``every_s`` apart with steps 100, 101, ...
    (every other timestamp off the whole second by some nanoseconds), plus marker series with no step."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in names:
        for i in range(points):
            offset = pd.Timedelta(seconds=i * every_s) + pd.Timedelta(nanoseconds=(i % 2) * 123_456_789)
            ts = pd.Timestamp(start) + offset
            rows.append({"ts": ts, "cluster": cluster, "job_id": job_id, "name": name, "step": 100 + i,
                         "value": float(round(rng.random(), 6) * (1e5 if name == "tokens_per_s" else 10))})
    for name in markers:
        for i in range(0, points, 5):
            rows.append({"ts": pd.Timestamp(start) + pd.Timedelta(seconds=i * every_s + 7), "cluster": cluster,
                         "job_id": job_id, "name": name, "step": None, "value": 42.5})
    frame = pd.DataFrame(rows)
    frame["step"] = frame["step"].astype("Int64")
    frame["ts"] = frame["ts"].astype("datetime64[ns, UTC]")
    return frame[APP_COLUMNS]


def net_synthetic(cluster="alps", hosts=("nid000001", "nid000002"), nics=("hsn0", "hsn1"),
                  fields=("nic_tx_packets", "nic_retries"), minutes=10, every_s=10, seed=3, start=T0) -> pd.DataFrame:
    """Cumulative NIC counters: per series a random non-decreasing walk, every other timestamp off the
    whole second by some nanoseconds."""
    rng = np.random.default_rng(seed)
    rows = []
    for host in hosts:
        for nic in nics:
            for field in fields:
                value = float(rng.integers(0, 10**9))
                for i in range(minutes * 60 // every_s):
                    value += float(rng.integers(0, 10**6))
                    ts = pd.Timestamp(start) + pd.Timedelta(seconds=i * every_s, nanoseconds=(i % 2) * 7_000_001)
                    rows.append((ts, cluster, host, nic, field, value))
    frame = pd.DataFrame(rows, columns=NET_COLUMNS)
    frame["ts"] = frame["ts"].astype("datetime64[ns, UTC]")
    return frame


def sorted_net(frame: pd.DataFrame) -> pd.DataFrame:
    """What a network read answers: sorted by host, nic, field, ts (independently of the backends' helpers)."""
    return frame.sort_values(["host", "nic", "field", "ts"], kind="stable", ignore_index=True)


def expected_net_aggregate(frame: pd.DataFrame, step_s: int) -> pd.DataFrame:
    """Per bucket and series: count, value at the earliest and latest time, min, max; written out here
    with plain Python, independently of ``aggregate_net_frame``."""
    groups: dict = {}
    for row in frame.itertuples(index=False):
        ns = row.ts.value
        bucket = ns - ns % (step_s * 1_000_000_000)
        groups.setdefault((bucket, row.cluster, row.host, row.nic, row.field), []).append((ns, row.value))
    records = []
    for key in sorted(groups):
        points = sorted(groups[key])
        values = [v for _, v in points]
        records.append((pd.Timestamp(key[0], tz="UTC"), *key[1:], len(points), points[0][1], points[-1][1],
                        min(values), max(values)))
    return pd.DataFrame(records, columns=NET_AGGREGATE_COLUMNS)


def assert_net_frames_equal(actual: pd.DataFrame, expected: pd.DataFrame):
    assert list(actual.columns) == NET_COLUMNS
    assert str(actual["ts"].dtype) == "datetime64[ns, UTC]" and actual["value"].dtype == np.float64
    assert len(actual) == len(expected), (len(actual), len(expected))
    actual, expected = actual.reset_index(drop=True), expected.reset_index(drop=True)
    assert actual["ts"].astype("int64").tolist() == expected["ts"].astype("int64").tolist()
    for column in ("cluster", "host", "nic", "field", "value"):
        assert actual[column].tolist() == expected[column].tolist(), column


def sorted_app(frame: pd.DataFrame) -> pd.DataFrame:
    """What a read of one job answers: sorted by name, then time (independently of the backends' helpers)."""
    return frame.sort_values(["name", "ts"], kind="stable", ignore_index=True)


def assert_app_frames_equal(actual: pd.DataFrame, expected: pd.DataFrame):
    assert list(actual.columns) == APP_COLUMNS
    assert str(actual["ts"].dtype) == "datetime64[ns, UTC]"
    assert actual["job_id"].dtype == np.int64 and str(actual["step"].dtype) == "Int64"
    assert actual["value"].dtype == np.float64
    assert len(actual) == len(expected), (len(actual), len(expected))
    actual, expected = actual.reset_index(drop=True), expected.reset_index(drop=True)
    assert actual["ts"].astype("int64").tolist() == expected["ts"].astype("int64").tolist()
    for column in ("cluster", "job_id", "name", "value"):
        assert actual[column].tolist() == expected[column].tolist(), column
    as_list = lambda column: [None if pd.isna(v) else int(v) for v in column]  # noqa: E731
    assert as_list(actual["step"]) == as_list(expected["step"]), "step"


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


def host_synthetic(cluster="alps", hosts=("nid001234", "nid001235"), minutes=3, every_s=10, seed=7) -> pd.DataFrame:
    """Host samples of a GH200 node: CPU busy per node and NUMA domain, page cache per GPU, a job step's CPU."""
    rng = np.random.default_rng(seed)
    rows = []
    for host in hosts:
        for ts in pd.date_range(T0, periods=minutes * 60 // every_s, freq=f"{every_s}s", tz="UTC"):
            for domain, field in (("node", "host_cpu_busy"), ("numa0", "host_cpu_busy"), ("node", "host_mem_used"),
                                  ("gpu1", "host_gpu_page_cache"), ("job4242.0", "host_dataloader_cpu")):
                rows.append({"ts": ts, "cluster": cluster, "host": host, "domain": domain, "field": field,
                             "value": round(float(rng.random()), 6)})
    return pd.DataFrame(rows)[HOST_COLUMNS]


class HostContract:
    """Host samples (``hostfields``) in a backend: read back exactly, apart from the NIC samples."""

    def test_host_samples_read_back_exactly_and_apart_from_nic_samples(self, backend):
        data = host_synthetic()
        assert backend.write_host(data.sample(frac=1, random_state=3)) == len(data)
        backend.write_net(net_synthetic(minutes=2))
        out = backend.read_host("alps")
        expected = data.sort_values(["host", "domain", "field", "ts"], kind="stable", ignore_index=True)
        assert list(out.columns) == HOST_COLUMNS and len(out) == len(expected)
        assert out["domain"].tolist() == expected["domain"].tolist()
        assert out["field"].tolist() == expected["field"].tolist()
        assert np.allclose(out["value"].to_numpy(), expected["value"].to_numpy())
        assert (out["ts"].to_numpy() == expected["ts"].to_numpy()).all()
        nics = backend.read_net("alps", fields=["nic_retries", "nic_tx_packets"])
        assert len(nics) and not nics["field"].str.startswith("host_").any()

    def test_host_filters_by_domain_and_field_and_aggregates(self, backend):
        data = host_synthetic()
        backend.write_host(data)
        gpu = backend.read_host("alps", hosts=["nid001234"], domains=["gpu1"], fields=["host_gpu_page_cache"])
        assert len(gpu) == 18 and set(gpu["domain"]) == {"gpu1"}
        step = backend.aggregate_host("alps", 60, domains=["job4242.0"], fields=["host_dataloader_cpu"])
        assert list(step.columns) == HOST_AGGREGATE_COLUMNS and step["count"].sum() == 36
        assert np.isclose(step["max"].max(), data[data.field == "host_dataloader_cpu"]["value"].max())

    def test_a_bad_host_row_is_named_and_nothing_is_written(self, backend):
        data = host_synthetic(minutes=1)
        bad = data.copy()
        bad.loc[3, "field"] = "nic_retries"
        with pytest.raises(ValueError, match="row 3, column 'field'"):
            backend.write_host(bad)
        with pytest.raises(ValueError, match="not a host field"):
            backend.read_host("alps", fields=["nic_retries"])
        assert backend.read_host("alps").empty


class TierContract:
    """Retention tiers (issue 40): raw samples, 1-minute and 10-minute rollups, each with its own retention.

    Every test moves the store's clock (``backend.clock``) instead of waiting; the expected numbers come from the
    reference aggregation of what the test wrote, so a rollup that loses or invents a sample fails here."""

    DAY = timedelta(days=1)

    def at(self, backend, moment):
        """Stand the store's clock at ``moment``, with the issue's default tiers: raw 30 days, 1-min 90, 10-min 365."""
        backend.retention = Retention()
        backend.clock = lambda: moment

    def test_rollups_equal_aggregating_the_raw_samples_after_the_raw_samples_expired(self, backend):
        data = synthetic(minutes=40)
        backend.write(data)
        window = Query(start=T0, end=T0 + timedelta(hours=1))
        self.at(backend, T0 + 31 * self.DAY)
        gone = backend.expire()
        assert {(e.source, e.tier) for e in gone} >= {("gpu", "raw")}
        assert backend.read(window).empty
        for step in (60, 120, 600, 3600):
            assert_frames_equal(sort_aggregate(backend.aggregate(window, step)), aggregate_frame(data, step))
        # the whole table at 10 minutes, from the 1-minute tier or the 10-minute one, is the same
        self.at(backend, T0 + 91 * self.DAY)
        backend.expire()
        assert_frames_equal(sort_aggregate(backend.aggregate(window, 600)), aggregate_frame(data, 600))

    def test_a_read_finer_than_the_tier_that_holds_the_window_is_refused_naming_the_tier(self, backend):
        backend.write(synthetic(minutes=20))
        window = Query(start=T0, end=T0 + timedelta(hours=1))
        self.at(backend, T0 + 31 * self.DAY)
        with pytest.raises(TierError, match="1-minute rollups.*multiple of 60 s"):
            backend.aggregate(window, 10)
        with pytest.raises(TierError, match="percentiles need raw samples"):
            backend.aggregate(window, 60, STATS)
        self.at(backend, T0 + 91 * self.DAY)
        with pytest.raises(TierError, match="10-minute rollups.*multiple of 600 s"):
            backend.aggregate(window, 60)
        assert backend.aggregate(window, 600)["count"].sum() == 20 * 6 * 16
        self.at(backend, T0 + 366 * self.DAY)  # past every tier: nothing is kept, an empty answer at any step
        for step in (10, 60, 600):
            assert backend.aggregate(window, step).empty
        assert backend.aggregate_net("alps", 60, start=T0, end=T0 + timedelta(hours=1)).empty

    def test_a_window_across_the_raw_horizon_reads_raw_after_it_and_rollups_before_it(self, backend):
        data = synthetic(minutes=40)
        backend.write(data)
        window = Query(start=T0, end=T0 + timedelta(hours=1))
        horizon = T0 + timedelta(minutes=20)
        self.at(backend, horizon + 30 * self.DAY)
        # before the retention pass and after it, a raw read answers exactly what is not older than the setting
        for _ in range(2):
            assert_frames_equal(backend.read(window), sort_samples(data[data.ts >= horizon]))
            assert_frames_equal(sort_aggregate(backend.aggregate(window, 60)), aggregate_frame(data, 60))
            backend.expire()
        assert_frames_equal(sort_aggregate(backend.aggregate(Query(start=horizon, end=window.end), 10)),
                            aggregate_frame(data[data.ts >= horizon], 10))

    def test_retention_removes_exactly_what_is_older_than_each_tiers_setting(self, backend):
        hourly = pd.concat([synthetic(hosts=("nid000007",), gpus=(0,), fields=(1002,), minutes=1, every_s=30,
                                      start=T0 + day * self.DAY + timedelta(hours=hour), seed=day * 24 + hour)
                            for day in range(0, 400, 3) for hour in (0, 13)], ignore_index=True)
        backend.write(hourly)
        now = T0 + 400 * self.DAY + timedelta(hours=6)
        self.at(backend, now)
        everything = Query(start=T0 - self.DAY, end=now)
        planned = backend.expire(dry_run=True)
        assert planned and len(backend.expire(dry_run=True)) == len(planned)
        assert {e.tier for e in planned} == {"raw", "1m", "10m"}
        assert all(e.last <= backend.retention.horizon(e.tier, now) for e in planned)
        gone = backend.expire()
        assert sorted(e.partition for e in gone) == sorted(e.partition for e in planned)
        assert backend.expire() == []  # idempotent: nothing left to remove
        raw_horizon = now - timedelta(days=30)
        assert_frames_equal(backend.read(everything), sort_samples(hourly[hourly.ts >= raw_horizon]))
        m10_horizon = now - timedelta(days=365)
        kept = hourly[hourly.ts >= m10_horizon]
        first_bucket = pd.Timestamp(m10_horizon).ceil("600s")
        answer = sort_aggregate(backend.aggregate(Query(start=first_bucket, end=now), 600))
        assert_frames_equal(answer, aggregate_frame(kept[kept.ts >= first_bucket], 600))

    def test_network_and_host_rollups_answer_after_their_raw_samples_expired(self, backend):
        net = net_synthetic(minutes=20)
        host = host_synthetic(minutes=3)
        backend.write_net(net)
        backend.write_host(host)
        self.at(backend, T0 + 31 * self.DAY)
        backend.expire()
        assert backend.read_net("alps").empty and backend.read_host("alps").empty
        for step in (60, 600):
            got = backend.aggregate_net("alps", step, fields=sorted(set(net["field"])))
            got = got.sort_values(["bucket", "host", "nic", "field"], ignore_index=True)
            expected = expected_net_aggregate(net, step)
            assert got["bucket"].astype("int64").tolist() == expected["bucket"].astype("int64").tolist()
            for column in ("host", "nic", "field", "count", "first", "last", "min", "max"):
                assert got[column].tolist() == expected[column].tolist(), (step, column)
        pages = backend.aggregate_host("alps", 60, fields=["host_gpu_page_cache"])
        assert pages["count"].sum() == 2 * 18
        with pytest.raises(TierError, match="multiple of 60 s"):
            backend.aggregate_net("alps", 10, start=T0)

    def test_job_series_outlive_every_tier(self, backend):
        series = app_synthetic()
        backend.write_job_series(series)
        backend.write(synthetic(minutes=2))
        self.at(backend, T0 + 800 * self.DAY)
        backend.expire()
        assert_app_frames_equal(backend.read_job_series("alps", 4242), sorted_app(series))


class BackendContract(HostContract, TierContract):
    """Subclass with a ``backend`` fixture yielding an empty store. Its clock stands a day after ``T0`` (tests of
    the tiers move it), so the fixed sample times never age past a retention horizon as the calendar moves on."""

    @pytest.fixture(autouse=True)
    def _clock_a_day_after_t0(self, backend):
        backend.clock = lambda: T0 + timedelta(days=1)

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

    # -- job series ------------------------------------------------------------------------------

    def test_job_series_read_back_exactly_sorted_by_name_and_time(self, backend):
        data = app_synthetic()
        assert backend.write_job_series(data.sample(frac=1, random_state=5)) == len(data)
        out = backend.read_job_series("alps", 4242)
        assert out["name"].tolist()[0] == "event.checkpoint" and out["name"].tolist()[-1] == "tokens_per_s"
        assert_app_frames_equal(out, sorted_app(data))
        # what the caller passes as text, naive times and plain ints comes back canonical
        loose = pd.DataFrame({"ts": ["2026-11-21T11:00:00.5Z", datetime(2026, 11, 21, 11, 0, 1)], "cluster": "alps",
                              "job_id": ["4242", 4242], "name": "loss", "step": [7, None], "value": [1, 2.5]})
        assert backend.write_job_series(loose) == 2
        tail = backend.read_job_series("alps", 4242, names=["loss"], start=datetime(2026, 11, 21, 11, 0, 0))
        assert tail["ts"].tolist() == [pd.Timestamp("2026-11-21T11:00:00.5Z"), pd.Timestamp("2026-11-21T11:00:01Z")]
        assert tail["value"].tolist() == [1.0, 2.5] and tail["step"].isna().tolist() == [False, True]

    def test_job_series_written_again_replace_and_repeats_in_a_batch_keep_the_last(self, backend):
        data = app_synthetic()
        backend.write_job_series(data)
        assert backend.write_job_series(data) == len(data)
        assert len(backend.read_job_series("alps", 4242)) == len(data)
        changed = data.iloc[[0, 1, len(data) - 1]].assign(value=-3.0, step=pd.array([None, 9, 11], dtype="Int64"))
        backend.write_job_series(changed)
        expected = data.copy()
        expected.loc[changed.index, "value"] = -3.0
        new_steps = {0: None, 1: 9, len(data) - 1: 11}
        expected["step"] = pd.array([new_steps.get(i, step) for i, step in enumerate(data["step"])], dtype="Int64")
        assert_app_frames_equal(backend.read_job_series("alps", 4242), sorted_app(expected))
        point = data.iloc[[3]]
        assert backend.write_job_series(pd.concat([point.assign(value=1.0), point.assign(value=2.0)])) == 1
        out = backend.read_job_series("alps", 4242, names=[point["name"].iloc[0]])
        assert out.loc[out["ts"] == point["ts"].iloc[0], "value"].tolist() == [2.0]
        assert len(backend.read_job_series("alps", 4242)) == len(data)

    def test_job_series_names_filter(self, backend):
        data = app_synthetic()
        backend.write_job_series(data)
        assert_app_frames_equal(backend.read_job_series("alps", 4242, names=["loss"]),
                                sorted_app(data[data.name == "loss"]))
        assert_app_frames_equal(backend.read_job_series("alps", 4242, names="tokens_per_s"),
                                sorted_app(data[data.name == "tokens_per_s"]))
        both = ("event.checkpoint", "loss")
        assert_app_frames_equal(backend.read_job_series("alps", 4242, names=both),
                                sorted_app(data[data.name.isin(both)]))
        for nothing in ([], ["no_such_series"]):
            out = backend.read_job_series("alps", 4242, names=nothing)
            assert out.empty and list(out.columns) == APP_COLUMNS

    def test_job_series_time_window_is_half_open(self, backend):
        data = app_synthetic()
        backend.write_job_series(data)
        start, end = T0 + timedelta(seconds=60), T0 + timedelta(seconds=180)  # both on points of every series
        assert (data.ts == pd.Timestamp(start)).sum() == 2 and (data.ts == pd.Timestamp(end)).sum() == 2
        out = backend.read_job_series("alps", 4242, start=start, end=end)
        assert_app_frames_equal(out, sorted_app(data[(data.ts >= start) & (data.ts < end)]))
        assert_app_frames_equal(backend.read_job_series("alps", 4242, start=end),
                                sorted_app(data[data.ts >= end]))
        naive_end = end.replace(tzinfo=None)  # naive means UTC
        assert_app_frames_equal(backend.read_job_series("alps", 4242, end=naive_end),
                                sorted_app(data[data.ts < end]))
        assert backend.read_job_series("alps", 4242, start=T0 + timedelta(days=1)).empty
        with pytest.raises(ValueError, match="window is empty"):
            backend.read_job_series("alps", 4242, start=end, end=start)

    def test_job_series_unknown_step_stays_unknown(self, backend):
        data = app_synthetic()
        backend.write_job_series(data)
        out = backend.read_job_series("alps", 4242)
        markers = out["name"] == "event.checkpoint"
        assert markers.sum() == 3 and out.loc[markers, "step"].isna().all()
        assert out.loc[~markers, "step"].notna().all() and out.loc[~markers, "step"].min() == 100

    def test_job_series_belong_to_one_job_and_delete_by_job_or_cluster(self, backend):
        first, second = app_synthetic(job_id=1), app_synthetic(job_id=2, seed=3, names=("loss",))
        elsewhere = app_synthetic(cluster="todi", job_id=1, seed=4, markers=())
        backend.write_job_series(pd.concat([first, second, elsewhere], ignore_index=True))
        assert_app_frames_equal(backend.read_job_series("alps", 1), sorted_app(first))
        assert_app_frames_equal(backend.read_job_series("todi", 1), sorted_app(elsewhere))
        assert backend.read_job_series("alps", 3).empty
        assert backend.delete_job_series("alps", 1) == len(first)
        assert backend.read_job_series("alps", 1).empty
        assert_app_frames_equal(backend.read_job_series("alps", 2), sorted_app(second))
        assert backend.delete_job_series("alps", 1) == 0
        assert backend.delete_job_series("alps") == len(second)
        assert backend.read_job_series("alps", 2).empty
        assert_app_frames_equal(backend.read_job_series("todi", 1), sorted_app(elsewhere))
        assert backend.delete_job_series("nowhere") == 0

    @pytest.mark.parametrize("column, bad, problem", [
        ("name", "9lives", "is not a series name"),
        ("name", "x" * 65, "is not a series name"),
        ("value", float("nan"), "must be a finite number"),
        ("value", float("inf"), "must be a finite number"),
        ("ts", "yesterday", "is not a time"),
        ("ts", None, "is missing"),
        ("job_id", -1, "is not an integer >= 0"),
        ("step", 2.5, "is not an integer >= 0"),
    ])
    def test_an_invalid_job_series_row_is_named_and_nothing_is_written(self, backend, column, bad, problem):
        data = app_synthetic()
        data[column] = data[column].astype(object)
        data.loc[2, column] = bad
        with pytest.raises(ValueError) as caught:
            backend.write_job_series(data)
        assert f"row 2, column '{column}'" in str(caught.value) and problem in str(caught.value)
        assert backend.read_job_series("alps", 4242).empty

    def test_a_job_series_frame_without_a_column_is_refused(self, backend):
        with pytest.raises(ValueError, match="lacks column.*name"):
            backend.write_job_series(app_synthetic().drop(columns="name"))

    def test_job_series_and_gpu_samples_never_mix(self, backend):
        samples, series = synthetic(minutes=10), app_synthetic(points=20)  # same cluster, same time span
        backend.write(samples)
        backend.write_job_series(series)
        window = self.window()
        assert_frames_equal(backend.read(window), sort_samples(samples))
        assert_frames_equal(backend.latest(window), latest_frame(samples))
        assert_frames_equal(sort_aggregate(backend.aggregate(window, 600)), aggregate_frame(samples, 600))
        assert_app_frames_equal(backend.read_job_series("alps", 4242), sorted_app(series))
        assert backend.delete(self.window(cluster="alps")) == len(samples)
        assert_app_frames_equal(backend.read_job_series("alps", 4242), sorted_app(series))
        backend.write(samples)
        assert backend.delete_job_series("alps") == len(series)
        assert_frames_equal(backend.read(window), sort_samples(samples))

    # -- network samples -------------------------------------------------------------------------

    def test_network_samples_read_back_exactly_sorted(self, backend):
        data = net_synthetic()
        assert backend.write_net(data.sample(frac=1, random_state=4)) == len(data)
        assert_net_frames_equal(backend.read_net("alps"), sorted_net(data))
        assert backend.read_net("todi").empty and list(backend.read_net("todi").columns) == NET_COLUMNS

    def test_network_filters_and_half_open_window(self, backend):
        data = net_synthetic()
        backend.write_net(data)
        start, end = T0 + timedelta(minutes=2), T0 + timedelta(minutes=5)
        out = backend.read_net("alps", hosts=["nid000002"], nics="hsn1", fields=["nic_retries"], start=start, end=end)
        expected = data[(data.host == "nid000002") & (data.nic == "hsn1") & (data.field == "nic_retries")
                        & (data.ts >= start) & (data.ts < end)]
        assert len(expected) == 18
        assert_net_frames_equal(out, sorted_net(expected))
        assert backend.read_net("alps", hosts=[]).empty

    def test_network_samples_written_again_replace_and_repeats_keep_the_last(self, backend):
        data = net_synthetic(minutes=2)
        backend.write_net(data)
        assert backend.write_net(data) == len(data)
        assert len(backend.read_net("alps")) == len(data)
        changed = data.iloc[[0, 5, len(data) - 1]].assign(value=-1.0)
        backend.write_net(changed)
        expected = data.copy()
        expected.loc[changed.index, "value"] = -1.0
        assert_net_frames_equal(backend.read_net("alps"), sorted_net(expected))
        row = data.iloc[[7]]
        assert backend.write_net(pd.concat([row.assign(value=1.0), row.assign(value=2.0)])) == 1
        out = backend.read_net("alps", hosts=row["host"].tolist(), nics=row["nic"].tolist(),
                               fields=row["field"].tolist())
        assert out.loc[out["ts"] == row["ts"].iloc[0], "value"].tolist() == [2.0]

    @pytest.mark.parametrize("step", [60, 120, 7])
    def test_network_aggregates_give_first_last_min_max_count_per_bucket(self, backend, step):
        data = net_synthetic()
        backend.write_net(data)
        out = backend.aggregate_net("alps", step)
        assert list(out.columns) == NET_AGGREGATE_COLUMNS
        got = out.sort_values(["bucket", "host", "nic", "field"], ignore_index=True)
        expected = expected_net_aggregate(data, step)
        assert len(got) == len(expected)
        assert got["bucket"].astype("int64").tolist() == expected["bucket"].astype("int64").tolist()
        for column in ("host", "nic", "field", "count", "first", "last", "min", "max"):
            assert got[column].tolist() == expected[column].tolist(), column
        window = backend.aggregate_net("alps", 60, nics=["hsn0"], start=T0 + timedelta(seconds=30),
                                       end=T0 + timedelta(minutes=3))
        inside = data[(data.nic == "hsn0") & (data.ts >= T0 + timedelta(seconds=30)) & (data.ts < T0 + timedelta(minutes=3))]
        assert window["count"].sum() == len(inside)
        assert sorted(window["first"].tolist()) == sorted(expected_net_aggregate(inside, 60)["first"].tolist())

    def test_network_delete_by_cluster_or_hosts(self, backend):
        data = net_synthetic()
        other = net_synthetic(cluster="todi", hosts=("nid000009",), seed=5)
        backend.write_net(pd.concat([data, other], ignore_index=True))
        assert backend.delete_net("alps", hosts=["nid000001"]) == int((data.host == "nid000001").sum())
        assert_net_frames_equal(backend.read_net("alps"), sorted_net(data[data.host == "nid000002"]))
        assert backend.delete_net("alps") == int((data.host == "nid000002").sum())
        assert backend.read_net("alps").empty
        assert_net_frames_equal(backend.read_net("todi"), sorted_net(other))
        assert backend.delete_net("nowhere") == 0

    def test_an_invalid_network_row_is_named_and_nothing_is_written(self, backend):
        data = net_synthetic(minutes=1)
        data["value"] = data["value"].astype(object)
        data.loc[4, "value"] = float("nan")
        with pytest.raises(ValueError, match="row 4, column 'value'.*finite"):
            backend.write_net(data)
        bad_nic = net_synthetic(minutes=1).assign(nic="hsn 0")
        with pytest.raises(ValueError, match="row 0, column 'nic'"):
            backend.write_net(bad_nic)
        assert backend.read_net("alps").empty

    def test_network_samples_gpu_samples_and_job_series_never_mix(self, backend):
        samples, series, net = synthetic(minutes=10), app_synthetic(points=20), net_synthetic(minutes=10)
        backend.write(samples)
        backend.write_job_series(series)
        backend.write_net(net)
        window = self.window()
        assert_frames_equal(backend.read(window), sort_samples(samples))
        assert_frames_equal(sort_aggregate(backend.aggregate(window, 600)), aggregate_frame(samples, 600))
        assert_app_frames_equal(backend.read_job_series("alps", 4242), sorted_app(series))
        assert_net_frames_equal(backend.read_net("alps"), sorted_net(net))
        assert backend.delete(self.window(cluster="alps")) == len(samples)
        assert backend.delete_job_series("alps") == len(series)
        assert_net_frames_equal(backend.read_net("alps"), sorted_net(net))
        backend.write(samples)
        backend.write_job_series(series)
        assert backend.delete_net("alps") == len(net)
        assert_frames_equal(backend.read(window), sort_samples(samples))
        assert_app_frames_equal(backend.read_job_series("alps", 4242), sorted_app(series))

