"""apps/core/heatmaps.py: colour ranges that show outliers, deviation from peers, row aggregation that keeps
an outlier, windows and rebinning, the one-byte encoding. Pure: no database, no settings."""
import base64
import json

import numpy as np
import pytest

from apps.core import heatmaps as h

T0 = np.datetime64("2026-01-01T10:00:00", "ns")
TEN_S = np.timedelta64(10, "s")


def starts(count: int, step_s: int = 10) -> np.ndarray:
    return T0 + np.arange(count) * np.timedelta64(step_s, "s")


def megatron_rows(gpus: int, *, per_node: int = 4, pp: int = 8, tp: int = 4) -> list[dict]:
    """Ranks laid out as Megatron does (tp fastest, then pp, then dp), ``per_node`` GPUs a node, 512 GPUs a group."""
    return [{"host": f"nid{i // per_node:06d}", "gpu": i % per_node, "rank": i, "tp": i % tp, "pp": (i // tp) % pp,
             "dp": i // (tp * pp), "group": i // 512, "switch": f"{i // 512}.{(i // 64) % 8}"} for i in range(gpus)]


def decoded(body: dict, key: str = "z") -> np.ndarray:
    return h.decode_u8(body[key], (len(body["rows"]), len(body["times"])), body["scale"]["zmin"], body["scale"]["zmax"])


def position(value: float, scale: dict) -> float:
    """Where a value lands on the colour scale, 0..1 (clipped as the encoding clips)."""
    return float(np.clip((value - scale["zmin"]) / (scale["zmax"] - scale["zmin"]), 0, 1))


# ---------------------------------------------------------------------------------------------
# Physical ranges


def test_physical_ranges_put_a_hot_gpu_in_the_top_tenth_and_a_throttled_clock_in_the_bottom_tenth():
    rng = np.random.default_rng(3)
    facts = h.facts_of(type("H100", (), {"name": "H100 SXM", "max_sm_clock_mhz": 1980.0})())
    temperature = 55 + rng.normal(0, 4, (64, 30))  # training GPUs 40-67 °C ...
    temperature[17] = 82.8 + rng.normal(0, 0.3, 30)  # ... and the hot one
    clock = 1930 + rng.normal(0, 5, (64, 30))
    clock[5] = 1390
    rows = megatron_rows(64)
    hot = h.compact(h.Binned(temperature, starts(30), 10.0), rows, quantity=h.SATURATION_QUANTITIES["temperature"], facts=facts)
    slow = h.compact(h.Binned(clock, starts(30), 10.0), rows, quantity=h.SATURATION_QUANTITIES["sm_clock"], facts=facts)
    assert (hot["scale"]["zmin"], hot["scale"]["zmax"], hot["scale"]["kind"], hot["scale"]["bad"]) == (30.0, 87.0, "physical", "high")
    assert (slow["scale"]["zmin"], slow["scale"]["zmax"], slow["scale"]["bad"]) == (1590.0, 1980.0, "low")
    assert "1,590 MHz" in slow["scale"]["source"] and "1,980 MHz" in slow["scale"]["source"] and "H100 SXM" in slow["scale"]["source"]
    hot_cells, slow_cells = decoded(hot), decoded(slow)
    assert all(position(v, hot["scale"]) >= 0.9 for v in hot_cells[17])
    assert all(position(v, hot["scale"]) < 0.9 for v in np.delete(hot_cells, 17, axis=0).ravel())
    assert all(position(v, slow["scale"]) <= 0.1 for v in slow_cells[5])
    assert all(position(v, slow["scale"]) > 0.7 for v in np.delete(slow_cells, 5, axis=0).ravel())


def test_what_the_data_says_beats_the_models_defaults():
    facts = h.with_measurements(h.ModelFacts(name="GH200"), max_sm_clock=np.array([[1755.0, np.nan], [1755.0, 1755.0]]),
                                temperature=np.array([[60.0, 61.0]]), temperature_margin=np.array([[25.0, 24.0]]),
                                power_limit=np.array([[np.nan, 600.0]]))
    assert h.physical_range("sm_clock", facts)[:2] == (1590.0, 1755.0) and "field 113" in h.physical_range("sm_clock", facts)[2]
    assert h.physical_range("temperature", facts)[:2] == (30.0, 85.0) and "153" in h.physical_range("temperature", facts)[2]
    assert h.physical_range("power", facts)[:2] == (0.0, 600.0) and "field 160" in h.physical_range("power", facts)[2]
    assert h.physical_range("power", h.ModelFacts())[:2] == (0.0, 700.0)
    assert h.physical_range("fraction", facts)[:2] == (0.0, 1.0)
    assert h.physical_range("percent", facts)[:2] == (0.0, 100.0)


def test_other_quantities_span_the_datas_true_extremes_never_a_percentile():
    values = np.concatenate([np.full(990, 50.0), np.linspace(0, 1, 9), [4000.0]])
    low, high, words = h.physical_range("data", h.ModelFacts(), values)
    assert (low, high) == (0.0, 4000.0) and "4,000" in words and "no clipping" in words
    assert h.physical_range("data", h.ModelFacts(), [np.nan])[:2] == (0.0, 1.0)
    same_low, same_high, _ = h.physical_range("data", h.ModelFacts(), [7.0, 7.0])
    assert same_low < 7.0 < same_high


def test_bad_directions():
    assert {m: q.bad for m, q in h.SATURATION_QUANTITIES.items()} == {
        "S": "low", "C": "low", "M": "low", "L": "low", "S_busy": "low", "busy": "low", "clock_factor": "low",
        "sm_clock": "low", "power": "low", "temperature": "high", "power_capped": "high", "thermal": "high"}
    assert h.telemetry_quantity(150, "°C") == h.Quantity("temperature", "high", "°C")
    assert h.telemetry_quantity(100, "MHz").kind == "sm_clock" and h.telemetry_quantity(155, "W").kind == "power"
    assert h.telemetry_quantity(1002, "ratio") == h.Quantity("fraction", "low", "")
    assert h.telemetry_quantity(203, "percent").kind == "percent"
    assert h.telemetry_quantity(140, "°C") == h.Quantity("data", "high", "°C")
    assert h.telemetry_quantity(1011, "bytes/s") == h.Quantity("data", "low", "bytes/s")


# ---------------------------------------------------------------------------------------------
# Deviation from peers


def test_deviation_is_value_minus_the_median_of_its_own_peer_group_per_bin():
    values = np.array([[10.0, 20.0], [12.0, 20.0], [14.0, np.nan],  # group 0
                       [100.0, 5.0], [101.0, 6.0], [90.0, 7.0]])  # group 1
    groups = np.array([0, 0, 0, 1, 1, 1])
    dev, limit = h.deviation(values, groups)
    assert dev[:, 0].tolist() == [-2.0, 0.0, 2.0, 0.0, 1.0, -10.0]
    assert dev[:2, 1].tolist() == [0.0, 0.0] and np.isnan(dev[2, 1]) and dev[3:, 1].tolist() == [-1.0, 0.0, 1.0]
    assert limit == 10.0
    alone, _ = h.deviation(np.array([[1.0], [np.nan]]), np.array([0, 0]))
    assert np.isnan(alone).all()  # one GPU reporting has no peers to differ from
    assert h.deviation(np.array([[1.0], [1.001]]), np.array([0, 0]), floor=0.05)[1] == 0.05  # noise does not fill the scale


def test_deviation_mode_makes_the_straggler_stand_out_on_a_diverging_scale():
    rng = np.random.default_rng(0)
    rows = megatron_rows(256)
    clock = 1930 + rng.normal(0, 4, (256, 40))
    clock[np.array([r["pp"] for r in rows]) == 3] -= 150  # stage 3 is slower as a whole: no outlier among its peers
    clock[77, 10:] -= 300
    groups = np.array([r["pp"] * 4 + r["tp"] for r in rows])
    body = h.compact(h.Binned(clock, starts(40), 10.0), rows, quantity=h.SATURATION_QUANTITIES["sm_clock"],
                     facts=h.ModelFacts(), mode="deviation", peer_groups=groups)
    scale = body["scale"]
    assert scale["kind"] == "deviation" and scale["zmin"] == -scale["zmax"] and 290 < scale["zmax"] < 320
    assert scale["colorscale"][0][1] == "#b2182b"  # low is bad: the bottom of the scale is red
    cells = decoded(body)
    assert all(position(v, scale) < 0.1 for v in cells[77, 10:])
    others = np.delete(cells, 77, axis=0)
    assert np.all(np.abs(others) < 0.1 * scale["zmax"])  # the slow stage compared with itself is not news
    hot = h.compact(h.Binned(clock, starts(40), 10.0), rows, quantity=h.SATURATION_QUANTITIES["temperature"],
                    facts=h.ModelFacts(), mode="deviation", peer_groups=groups)
    assert hot["scale"]["colorscale"][-1][1] == "#b2182b"  # high is bad: the top is red


# ---------------------------------------------------------------------------------------------
# Rows


def test_aggregation_keeps_a_planted_outliers_value_and_the_mean():
    rng = np.random.default_rng(1)
    gpus = 2048  # on 512 nodes
    rows = megatron_rows(gpus)
    power = 600 + rng.normal(0, 5, (gpus, 50))
    power[1001, :] = 450.0  # one GPU power-capped
    temperature = 60 + rng.normal(0, 1, (gpus, 50))
    temperature[1500, :] = 82.8
    body = h.compact(h.Binned(power, starts(50), 10.0), rows, quantity=h.SATURATION_QUANTITIES["power"], facts=h.ModelFacts())
    assert body["aggregated_by"] == "node" and len(body["rows"]) == 512
    node = next(i for i, row in enumerate(body["rows"]) if row["host"] == rows[1001]["host"])
    assert body["rows"][node] == {"label": "nid000250 (4 GPUs)", "host": "nid000250", "gpu": None, "rank": None, "pp": 2,
                                  "dp": 31, "tp": None, "group": 1, "switch": "1.7", "members": 4}
    z, mean = decoded(body), decoded(body, "mean")
    step = 700 / 254
    assert np.allclose(z[node], 450.0, atol=step) and np.allclose(mean[node], (450 + 3 * 600) / 4, atol=3 * step)
    assert np.all(z[np.arange(512) != node] > 560)
    hot = h.compact(h.Binned(temperature, starts(50), 10.0), rows, quantity=h.SATURATION_QUANTITIES["temperature"],
                    facts=h.ModelFacts())
    hot_node = next(i for i, row in enumerate(hot["rows"]) if row["host"] == rows[1500]["host"])
    assert np.all([position(v, hot["scale"]) >= 0.9 for v in decoded(hot)[hot_node]])  # the maximum, high being bad
    every = h.compact(h.Binned(power, starts(50), 10.0), rows, quantity=h.SATURATION_QUANTITIES["power"], facts=h.ModelFacts(),
                      rows_mode="gpu")
    assert len(every["rows"]) == gpus and every["aggregated_by"] is None and every["mean"] is None


def test_aggregation_uses_the_members_minima_when_they_are_known():
    rows = megatron_rows(8, per_node=4)
    means = np.full((8, 3), 1900.0)
    lows = means.copy()
    lows[6, 1] = 1200.0  # a dip inside one bucket that the bucket mean hides
    body = h.compact(h.Binned(means, starts(3), 10.0, low=lows, high=means, weights=np.full((8, 3), 6)), rows,
                     quantity=h.SATURATION_QUANTITIES["sm_clock"], facts=h.ModelFacts(), max_rows=4)
    assert [row["label"] for row in body["rows"]] == ["nid000000 (4 GPUs)", "nid000001 (4 GPUs)"]
    assert decoded(body)[1, 1] == 1590.0  # clipped to the bottom of the scale
    assert np.allclose(decoded(body, "mean")[1], 1900.0, atol=2)


def test_too_many_nodes_aggregate_by_the_sort_key_with_separators():
    rows = megatron_rows(64, per_node=1)  # 64 nodes
    order = sorted(range(64), key=lambda i: (rows[i]["pp"], i))
    values = np.ones((64, 4))
    body = h.compact(h.Binned(values, starts(4), 10.0), rows, quantity=h.SATURATION_QUANTITIES["S"], facts=h.ModelFacts(),
                     order=order, sort="pp", max_rows=16)
    assert body["aggregated_by"] == "pp" and [row["label"] for row in body["rows"]] == [f"stage {s} (8 GPUs)" for s in range(8)]
    assert body["separators"] == [{"row": s, "label": f"stage {s}"} for s in range(8)]
    by_rank = h.compact(h.Binned(values, starts(4), 10.0), rows, quantity=h.SATURATION_QUANTITIES["S"], facts=h.ModelFacts(),
                        sort="rank", max_rows=16)
    assert by_rank["aggregated_by"] == "node" and by_rank["separators"] == []
    assert [row["label"] for row in by_rank["rows"][:2]] == ["nid000000 … nid000003 (4 GPUs)", "nid000004 … nid000007 (4 GPUs)"]
    assert len(by_rank["rows"]) == 16


def test_row_labels_and_separators_per_gpu():
    rows = megatron_rows(32)
    order = sorted(range(32), key=lambda i: (rows[i]["pp"], i))
    body = h.compact(h.Binned(np.zeros((32, 2)), starts(2), 10.0), rows, quantity=h.SATURATION_QUANTITIES["S"],
                     facts=h.ModelFacts(), order=order, sort="pp")
    assert [row["label"] for row in body["rows"][:5]] == ["r0 nid000000:0", "r1 nid000000:1", "r2 nid000000:2", "r3 nid000000:3",
                                                          "r4 nid000001:0"]
    assert [(s["row"], s["label"]) for s in body["separators"]] == [(4 * s, f"stage {s}") for s in range(8)]
    assert h.row_label({"host": "nid000042", "gpu": 3}) == "nid000042:3"
    groups = h.separators([{"group": 2}, {"group": 2}, {"group": 12}, {"group": None}], "group")
    assert groups == [{"row": 0, "label": "group 2"}, {"row": 2, "label": "group 12"}, {"row": 3, "label": "no group"}]


# ---------------------------------------------------------------------------------------------
# Time


def test_window_and_rebin():
    values = np.arange(2 * 100, dtype=float).reshape(2, 100)
    values[1, 40:60] = np.nan
    data = h.Binned(values, starts(100), 10.0)
    whole = h.compact(data, [{"host": "a", "gpu": 0}, {"host": "a", "gpu": 1}], quantity=h.Quantity("data", "low"),
                      facts=h.ModelFacts(), bins=10)
    assert len(whole["times"]) == 10 and whole["bin_seconds"] == 100.0 and whole["times"][1] == "2026-01-01T10:01:40Z"
    assert whole["window"] == {"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T10:16:40Z"}
    z = decoded(whole)
    assert np.allclose(z[0], np.arange(10) * 10 + 4.5, atol=199 / 254) and np.isnan(z[1, 4:6]).all()
    zoom = h.compact(data, [{"host": "a", "gpu": 0}, {"host": "a", "gpu": 1}], quantity=h.Quantity("data", "low"),
                     facts=h.ModelFacts(), bins=10, start=T0 + 20 * TEN_S + np.timedelta64(5, "s"), end=T0 + 30 * TEN_S)
    assert zoom["times"][0] == "2026-01-01T10:03:20Z" and len(zoom["times"]) == 10 and zoom["bin_seconds"] == 10.0
    assert zoom["window"] == {"start": "2026-01-01T10:03:25Z", "end": "2026-01-01T10:05:00Z"}
    assert zoom["coverage"] == whole["coverage"] == {"first": "2026-01-01T10:00:00Z", "last": "2026-01-01T10:16:40Z"}
    assert h.window_columns(starts(100), 10.0, T0 + 200 * TEN_S, None) == (100, 100)


def test_rebin_weights_means_by_samples_and_keeps_extremes():
    data = h.Binned(np.array([[1.0, 3.0, np.nan]]), starts(3), 10.0, low=np.array([[0.5, 2.0, np.nan]]),
                    high=np.array([[1.5, 9.0, np.nan]]), weights=np.array([[3, 1, 0]]))
    merged = h.rebin(data, 1)
    assert merged.values.tolist() == [[1.5]] and merged.low.tolist() == [[0.5]] and merged.high.tolist() == [[9.0]]
    assert merged.weights.tolist() == [[4.0]] and merged.bin_seconds == 30.0


def test_coverage_is_the_real_extent_and_the_warmup_is_shaded_only_where_it_is():
    values = np.full((2, 10), np.nan)
    values[0, 3:7] = 1.0
    assert h.coverage(values, starts(10), 10.0) == {"first": "2026-01-01T10:00:30Z", "last": "2026-01-01T10:01:10Z"}
    assert h.coverage(np.full((2, 3), np.nan), starts(3), 10.0) == {"first": None, "last": None}
    first = T0 + 3 * TEN_S
    assert h.warmup_shading(T0 + 5 * TEN_S, first) == [{"start": "2026-01-01T10:00:30Z", "end": "2026-01-01T10:00:50Z",
                                                        "label": "warm-up"}]
    assert h.warmup_shading(T0 + 2 * TEN_S, first) == []  # the data starts after the warm-up ended
    assert h.warmup_shading(None, first) == []
    assert h.warmup_shading(T0 + 5 * TEN_S, first, T0 + 6 * TEN_S, None) == []  # zoomed past it


def test_regular_grid_fills_skipped_buckets():
    buckets = np.array([T0, T0 + 60 * TEN_S // 10, T0 + 3 * 60 * TEN_S // 10])
    full, (means, counts) = h.regular_grid(buckets, 60, np.array([[1.0, 2.0, 3.0]]), np.array([[6, 6, 6]], dtype=np.int32))
    assert len(full) == 4 and np.isnan(means[0, 2]) and means[0, 3] == 3.0 and counts.tolist() == [[6, 6, 0, 6]]


# ---------------------------------------------------------------------------------------------
# Encoding


def test_u8_round_trip_clips_and_marks_missing_cells():
    matrix = np.array([[0.0, 0.5, 1.0, np.nan], [-3.0, 7.0, 0.25, 0.999]])
    text = h.encode_u8(matrix, 0.0, 1.0)
    raw = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
    assert raw.tolist() == [0, 127, 254, 255, 0, 254, 64, 254]
    back = h.decode_u8(text, (2, 4), 0.0, 1.0)
    assert np.isnan(back[0, 3]) and back[1, 0] == 0.0 and back[1, 1] == 1.0
    finite = np.isfinite(matrix) & (matrix >= 0) & (matrix <= 1)
    assert np.all(np.abs(back[finite] - matrix[finite]) <= 0.5 / 254 + 1e-12)


def test_a_4096_gpu_heatmap_stays_small():
    rng = np.random.default_rng(2)
    rows = megatron_rows(4096)
    values = np.clip(0.6 + rng.normal(0, 0.05, (4096, 300)), 0, 1)
    body = h.compact(h.Binned(values, starts(300), 10.0), rows, quantity=h.SATURATION_QUANTITIES["S"], facts=h.ModelFacts())
    size = len(json.dumps(body))
    assert len(body["rows"]) == 1024 and size < 1_100_000, size  # the json answer of the same matrix: about 5 MB


def test_node_table():
    hosts = np.array(["b", "b", "a"], dtype=object)
    counts = np.array([[[6, 6]], [[6, 0]], [[0, 0]]])
    means = np.array([[[10.0, 20.0]], [[40.0, np.nan]], [[np.nan, np.nan]]])
    lows = np.array([[[9.0, 18.0]], [[30.0, np.nan]], [[np.nan, np.nan]]])
    highs = np.array([[[11.0, 21.0]], [[55.0, np.nan]], [[np.nan, np.nan]]])
    names, gpus, table = h.node_stats(hosts, counts, means, lows, highs)
    assert names == ["b", "a"] and gpus == [2, 1]
    assert table[0] == [{"min": 9.0, "mean": pytest.approx(70 / 3, abs=0.01), "max": 55.0}]
    assert table[1] == [{"min": None, "mean": None, "max": None}]


def test_numbers_in_words():
    assert [h.number(v) for v in (1590.0, 82.83, 0.04567, 123456.0, 0.0)] == ["1,590", "82.8", "0.0457", "123,000", "0"]
