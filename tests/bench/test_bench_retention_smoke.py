"""Smoke test of the retention and scale bench (bench/bench_retention.py) at a tiny size: a few GPUs for 3 intervals
of 1 s, a 2-day month, 3 day partitions per tier; every figure is produced and plausible, every row is stored, every
partition expires. No wall-clock time is asserted."""
from bench import bench_retention


def quiet(_line):
    pass


def test_ingest_and_size_figures(tmp_path):
    report = bench_retention.ingest(tmp_path, minutes=3 / 60, interval_s=1.0, gpus=8, floor_every=2, say=quiet)
    assert report["intervals"] == 3 and report["gpu_rows"] == 8 * 18 and report["nic_rows"] == 8 * 6
    assert report["cpu_mean"] > 0 and report["floor_mean"] > 0 and report["floor_samples"] == 2
    assert 0 < report["share"] and report["cpu_worst"] >= report["cpu_p50"]
    store = report["store"]
    footprint = store.footprint()
    assert footprint["samples"]["rows"] == 3 * 8 * 18
    assert footprint["net_samples"]["rows"] == 3 * 8 * 6
    assert footprint["rollup_60"]["rows"] == 8 * 18  # three seconds: one minute bucket per series and field

    size = bench_retention.store_size(store, tmp_path, report["gpus"], report["nics"])
    assert set(size["kinds"]) == set(bench_retention.ROWS_PER_DAY)
    assert all(entry["per_row"] > 0 and entry["per_day"] > 0 for entry in size["kinds"].values())
    assert size["machine_retained"] > 0 and size["live_used_bytes"] > 0
    figures = bench_retention.ingest_figures(report) + [bench_retention.size_figure(size, report)]
    assert all(figure.seconds > 0 and figure.floor_seconds > 0 and figure.note for figure in figures)


def test_month_query_reads_every_bucket_and_point(tmp_path):
    month = bench_retention.month_query(tmp_path, gpus=8, days=2, chain=4, campaigns=2, repeats=1, say=quiet)
    assert month["rollup_rows"] == 8 * 18 * 24 * 2
    assert month["agg_rows"] == month["expected_agg_rows"] == 8 * 24 * 2 and month["mean_ok"]
    assert month["allocations"] == 4 and month["curve_points"] == month["expected_points"] == 4 * 4 * 2160
    assert month["agg_wall"] > 0 and month["agg_floor"] > 0 and month["app_wall"] > 0 and month["app_floor"] > 0
    assert len(bench_retention.month_figures(month)) == 2


def test_retention_pass_drops_every_partition(tmp_path):
    days = {"samples": 1, "rollup_60": 2, "rollup_600": 3, "rollup_3600": 3}
    done = bench_retention.retention_pass(tmp_path, 4, days=days, say=quiet)
    assert done["partitions"] == done["planned"] == done["dropped"] == done["floor_tables"] == 9
    assert done["remaining"] == 0
    assert done["rows_by_kind"]["rollup_600"] == 3 * 4 * 18 * 144 and done["rows_by_kind"]["samples"] == 4 * 18 * 8640
    assert done["wall"] > 0 and done["floor_wall"] > 0 and done["dry_wall"] > 0
    figure, = bench_retention.expire_figures([done])
    assert "dropped 9 of 9" in figure.note
