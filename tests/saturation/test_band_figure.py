"""The 10-90 % band over time (issue 35, item 6a): one closed polygon per run of known bins, never Plotly's
fill="tonexty" between two traces with gaps (which bridged a missing bin and drew wedges above the band), and a
legend above the plot instead of over the time axis. Plain figures, no server."""
import numpy as np
import pytest

from apps.saturation.figures import band_runs, bands
from apps.saturation.products import SaturationCube

BINS, GPUS, GAP = 30, 16, 12


def cube_with_a_gap() -> SaturationCube:
    """16 GPUs between 0.62 and 0.70 (the issue's spread), every GPU silent in bin 12 (a one-bin gap)."""
    rng = np.random.default_rng(7)
    S = (0.62 + 0.08 * rng.random((GPUS, BINS))).astype("float32")
    S[:, GAP] = np.nan
    start = np.datetime64("2026-03-01T10:00:00", "ns")
    return SaturationCube(hosts=np.array([f"nid{g // 4:06d}" for g in range(GPUS)], dtype=object), gpus=np.arange(GPUS) % 4,
                          bin_starts=start + np.arange(BINS) * np.timedelta64(60, "s"), bin_seconds=60.0,
                          values={"S": S, "C": S * 0.9, "M": S * 0.5, "L": S * 0.2}, warmup_end=None, steady_end=None)


def polygons(trace) -> list[tuple[list, list]]:
    """The closed shapes of a fill="toself" trace: its points split where x is None."""
    shapes, xs, ys = [], [], []
    for x, y in zip(list(trace.x) + [None], list(trace.y) + [None]):
        if x is None:
            if xs:
                shapes.append((xs, ys))
            xs, ys = [], []
        else:
            xs.append(x)
            ys.append(y)
    return shapes


def area(xs, ys) -> float:
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    return abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))) / 2


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_the_band_is_one_polygon_per_run_of_known_bins_and_fills_the_spread_only():
    cube = cube_with_a_gap()
    figure = bands(cube)
    assert not [trace.name for trace in figure.data if trace.fill and trace.fill.startswith("tonext")]
    band = next(trace for trace in figure.data if trace.name == "saturation S: 10-90 %")
    assert band.fill == "toself"
    with np.errstate(all="ignore"):
        low, high = (np.nanpercentile(cube.values["S"].astype(float), q, axis=0) for q in (10, 90))
    shapes = polygons(band)
    assert band_runs(low, high) == [(0, GAP - 1), (GAP + 1, BINS - 1)] and len(shapes) == 2  # the gap is not bridged
    times = [str(np.datetime_as_string(t, unit="s")) + "Z" for t in cube.bin_starts]
    for (xs, ys), run in zip(shapes, (range(0, GAP), range(GAP + 1, BINS))):
        assert set(xs) == {times[i] for i in run}  # no point of the shape in or across the gap
        # Nothing above the 90th percentile or below the 10th (the wedge reached 0.78 over a 0.62-0.70 spread) ...
        assert max(ys) <= max(high[i] for i in run) + 1e-9 and min(ys) >= min(low[i] for i in run) - 1e-9
        # ... and the shape's area is exactly the band's: the area between the edges, bin by bin.
        index = [times.index(x) for x in xs]
        band_area = np.trapezoid(high[list(run)] - low[list(run)], list(run))
        assert area(index, ys) == pytest.approx(band_area, rel=1e-6)
    # The edges are drawn too, broken at the gap rather than joined across it.
    edges = [trace for trace in figure.data if trace.legendgroup == "S" and trace.showlegend is False]
    assert len(edges) == 2 and all(trace.connectgaps is False and trace.y[GAP] is None for trace in edges)


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_the_band_legend_sits_above_the_plot_not_over_the_time_axis():
    legend = bands(cube_with_a_gap()).layout.legend
    assert legend.yanchor == "bottom" and legend.y >= 1  # its lowest edge above the plot area's top


@pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")
def test_a_limited_score_draws_its_bands_the_same_way(db):
    from apps.saturation.panel import limited_bands

    cube = cube_with_a_gap()
    cube.values = {"busy": cube.values["S"], "clock_factor": cube.values["C"]}
    figure = limited_bands(cube)
    assert not [trace.name for trace in figure.data if trace.fill and trace.fill.startswith("tonext")]
    band = next(trace for trace in figure.data if trace.name == "busy (utilisation): 10-90 %")
    assert band.fill == "toself" and len(polygons(band)) == 2
    assert figure.layout.legend.yanchor == "bottom" and figure.layout.legend.y >= 1
