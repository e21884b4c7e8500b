"""NIC counters into rates and outliers (apps/telemetry/nic_analysis.py), on counters as the driver reports them:
cumulative, 56 bits wide, restarting at zero after a driver reload."""
import numpy as np
import pandas as pd
import pytest

from apps.telemetry import nic_analysis as na
from apps.telemetry.backends.base import aggregate_net_frame

T0 = pd.Timestamp("2026-03-02 10:00:00", tz="UTC")
WRAP = 2 ** 56


def aggregate(samples: pd.DataFrame, step_s: int) -> pd.DataFrame:
    """What the store's aggregate_net answers (the backends' reference aggregation)."""
    return aggregate_net_frame(samples, step_s)


def counters(hosts, nics=("hsn0", "hsn1", "hsn2", "hsn3"), *, minutes=30, every_s=10, bytes_s=5e9, packet_bytes=4096,
             retry=0.004, special=None, seed=1):
    """Cumulative counters of steady traffic; ``special[(host, nic)]`` = dict(retry=, scale=, link_down_at=[s...],
    start=, reset_at=)."""
    rng = np.random.default_rng(seed)
    special = special or {}
    times = T0 + pd.to_timedelta(np.arange(0, minutes * 60, every_s), unit="s")
    rows = []
    for host in hosts:
        for nic in nics:
            spec = special.get((host, nic), {})
            rate = bytes_s * spec.get("scale", 1.0) * rng.uniform(0.97, 1.03, len(times))
            tx_bytes = np.cumsum(rate * every_s) + spec.get("start", 1e12)
            rx_bytes = np.cumsum(rate * every_s * 0.98) + spec.get("start", 1e12)
            packets = np.floor(tx_bytes / packet_bytes)
            retries = np.floor(np.cumsum(np.diff(np.concatenate([[0], packets])) * spec.get("retry", retry)
                                         * rng.uniform(0.9, 1.1, len(times))))
            down = np.zeros(len(times))
            for moment in spec.get("link_down_at", []):
                down[times >= T0 + pd.Timedelta(seconds=moment)] += 1
            series = {"nic_tx_bytes": tx_bytes, "nic_rx_bytes": rx_bytes, "nic_tx_packets": packets,
                      "nic_rx_packets": np.floor(rx_bytes / packet_bytes), "nic_retries": retries, "nic_link_down": down}
            if "reset_at" in spec:  # driver reload: every counter restarts at zero
                cut = times >= T0 + pd.Timedelta(seconds=spec["reset_at"])
                first = int(np.argmax(cut))
                for name, values in series.items():
                    values = values.copy()
                    values[cut] = values[cut] - values[first] + (values[first] - values[first - 1])
                    series[name] = values
            if spec.get("wrap"):
                series = {name: np.mod(values + (WRAP - values[len(values) // 2]) if name.endswith("bytes") else values, WRAP)
                          for name, values in series.items()}
            for name, values in series.items():
                rows.append(pd.DataFrame({"ts": times, "cluster": "alps", "host": host, "nic": nic, "field": name,
                                          "value": values.astype(float)}))
    return pd.concat(rows, ignore_index=True)


HOSTS = [f"nid{n:06d}" for n in (470, 471, 472, 473, 474, 475)]


def test_rates_from_steady_counters_are_the_traffic_sent():
    frame = aggregate(counters(HOSTS[:2], bytes_s=5e9), 60)
    rates = na.nic_rates(frame, 60)
    assert set(zip(rates["host"], rates["nic"])) == {(h, n) for h in HOSTS[:2] for n in ("hsn0", "hsn1", "hsn2", "hsn3")}
    assert rates["tx_bytes_s"].median() == pytest.approx(5e9, rel=0.02)
    assert rates["rx_bytes_s"].median() == pytest.approx(4.9e9, rel=0.02)
    assert rates["retry_fraction"].median() == pytest.approx(0.004, rel=0.1)
    assert (rates["tx_bytes_s"].dropna() > 0).all()
    totals = na.nic_totals(rates)
    # 30 min at 5 GB/s less the first sample's 10 s (no counter value before it)
    assert totals["tx_bytes"].median() == pytest.approx(5e9 * (1800 - 10), rel=0.02)


@pytest.mark.parametrize("step", [10, 60, 300])
def test_wrap_at_56_bits_is_not_a_negative_rate(step):
    samples = counters(HOSTS[:1], nics=("hsn0",), special={(HOSTS[0], "hsn0"): {"wrap": True}})
    raw = samples[samples["field"] == "nic_tx_bytes"]["value"].to_numpy()
    assert (np.diff(raw) < 0).sum() == 1  # the counter did wrap inside the window
    rates = na.nic_rates(aggregate(samples, step), step)
    assert (rates["tx_bytes_s"].dropna() > 0).all()
    assert rates["tx_bytes_s"].dropna().max() < 6e9
    totals = na.nic_totals(rates)
    assert totals.loc[0, "wraps"] == 1 and totals.loc[0, "resets"] == 0
    assert totals.loc[0, "tx_bytes"] == pytest.approx(5e9 * (1800 - 10), rel=0.02)


@pytest.mark.parametrize("step", [10, 60, 300])
def test_driver_reload_restarts_the_count_and_is_no_negative_rate(step):
    samples = counters(HOSTS[:1], nics=("hsn0",), special={(HOSTS[0], "hsn0"): {"reset_at": 905}})
    raw = samples[samples["field"] == "nic_tx_bytes"]["value"].to_numpy()
    assert raw[-1] < raw[len(raw) // 2 - 1]
    rates = na.nic_rates(aggregate(samples, step), step)
    assert (rates["tx_bytes_s"].dropna() >= 0).all()
    assert rates["tx_bytes_s"].dropna().max() < 6e9  # no bucket credits the whole old count
    totals = na.nic_totals(rates)
    assert totals.loc[0, "resets"] == 1 and totals.loc[0, "wraps"] == 0
    # the reset's own interval counted from zero: at most one sample's traffic off
    assert totals.loc[0, "tx_bytes"] == pytest.approx(5e9 * (1800 - 10), rel=0.02)


def test_gaps_in_the_samples_spread_their_traffic():
    samples = counters(HOSTS[:1], nics=("hsn0",))
    gap = (samples["ts"] >= T0 + pd.Timedelta(minutes=10)) & (samples["ts"] < T0 + pd.Timedelta(minutes=20))
    rates = na.nic_rates(aggregate(samples[~gap], 60), 60)
    after = rates[rates["bucket"] == T0 + pd.Timedelta(minutes=20)]
    assert after["seconds"].iloc[0] == pytest.approx(660)
    assert after["tx_bytes_s"].iloc[0] == pytest.approx(5e9, rel=0.03)


def test_a_nic_retrying_a_third_of_its_packets_is_named_with_its_counters():
    special = {("nid000473", "hsn2"): {"retry": 0.31, "scale": 0.6}}
    rates = na.nic_rates(aggregate(counters(HOSTS, special=special), 60), 60)
    found = na.nic_outliers(rates)
    assert [(o.host, o.nic) for o in found] == [("nid000473", "hsn2")]
    outlier = found[0]
    assert outlier.kinds[0] == "retries"
    assert outlier.retry_fraction == pytest.approx(0.31, rel=0.05)
    assert outlier.reason.startswith("hsn2 on nid000473: 31 % of packets retried, its peers < 1 %")
    assert outlier.retries == pytest.approx(0.31 * outlier.tx_packets, rel=0.05)
    assert outlier.peers == len(HOSTS) * 4 - 1


def test_a_healthy_job_has_no_outlier_though_its_nics_differ_a_little():
    rng = np.random.default_rng(3)
    special = {(h, n): {"retry": float(rng.uniform(0.001, 0.009)), "scale": float(rng.uniform(0.85, 1.15))}
               for h in HOSTS for n in ("hsn0", "hsn1", "hsn2", "hsn3")}
    rates = na.nic_rates(aggregate(counters(HOSTS, special=special), 60), 60)
    assert na.nic_outliers(rates) == []


def test_link_flaps_and_a_quiet_nic_are_outliers():
    special = {("nid000471", "hsn1"): {"link_down_at": [300, 900, 1500]},
               ("nid000474", "hsn3"): {"scale": 0.2}}
    rates = na.nic_rates(aggregate(counters(HOSTS, special=special), 60), 60)
    found = {(o.host, o.nic): o for o in na.nic_outliers(rates)}
    assert set(found) == {("nid000471", "hsn1"), ("nid000474", "hsn3")}
    assert found[("nid000471", "hsn1")].kinds == ["link"]
    assert "link went down 3 times, its peers never" in found[("nid000471", "hsn1")].reason
    assert found[("nid000474", "hsn3")].kinds == ["throughput"]
    assert found[("nid000474", "hsn3")].traffic_ratio == pytest.approx(0.2, abs=0.03)
    assert "80 % less than its peers" in found[("nid000474", "hsn3")].reason


def test_an_idle_job_has_no_quiet_nic():
    special = {("nid000474", "hsn3"): {"scale": 0.2}}
    rates = na.nic_rates(aggregate(counters(HOSTS, bytes_s=0.0, special=special), 60), 60)
    assert na.nic_outliers(rates) == []


def test_a_missing_nic_is_left_out_not_an_outlier():
    samples = counters(HOSTS, special={("nid000473", "hsn2"): {"retry": 0.31}})
    samples = samples[~((samples["host"] == "nid000472") & (samples["nic"] == "hsn0"))]
    samples = samples[~((samples["host"] == "nid000475") & (samples["field"] == "nic_retries"))]
    rates = na.nic_rates(aggregate(samples, 60), 60)
    assert ("nid000472", "hsn0") not in set(zip(rates["host"], rates["nic"]))
    assert rates[rates["host"] == "nid000475"]["retry_fraction"].isna().all()
    assert [(o.host, o.nic) for o in na.nic_outliers(rates)] == [("nid000473", "hsn2")]


def test_one_nic_per_node():
    samples = counters(HOSTS, nics=("hsn0",), special={("nid000473", "hsn0"): {"retry": 0.2}})
    found = na.nic_outliers(na.nic_rates(aggregate(samples, 60), 60))
    assert [(o.host, o.nic) for o in found] == [("nid000473", "hsn0")]
    assert found[0].peers == 5


def test_too_few_nics_only_the_absolute_alarm():
    mild = counters(HOSTS[:2], nics=("hsn0",), special={(HOSTS[0], "hsn0"): {"retry": 0.05}})
    assert na.nic_outliers(na.nic_rates(aggregate(mild, 60), 60)) == []
    bad = counters(HOSTS[:2], nics=("hsn0",), special={(HOSTS[0], "hsn0"): {"retry": 0.3}})
    found = na.nic_outliers(na.nic_rates(aggregate(bad, 60), 60))
    assert [(o.host, o.nic) for o in found] == [(HOSTS[0], "hsn0")]
    assert "too few NICs" in found[0].reason


def test_empty_input():
    empty = pd.DataFrame(columns=["bucket", "cluster", "host", "nic", "field", "count", "first", "last", "min", "max"])
    assert na.nic_rates(empty, 60).empty
    assert na.nic_totals(na.nic_rates(empty, 60)).empty
    assert na.nic_outliers(na.nic_rates(empty, 60)) == []


def test_the_bucket_still_filling_reads_at_the_nics_rate_not_as_a_drop():
    # 30 min at 10 s, then 40 s more: the last 120 s bucket holds 4 of its 12 samples (a running job's newest data)
    samples = counters(HOSTS[:2], minutes=32, bytes_s=5e9)
    samples = samples[samples["ts"] < T0 + pd.Timedelta(seconds=30 * 60 + 40)]
    rates = na.nic_rates(aggregate(samples, 120), 120)
    last = rates[rates["bucket"] == rates["bucket"].max()]
    full = rates[rates["bucket"] == rates["bucket"].max() - pd.Timedelta(seconds=120)]
    assert len(last) == 8 and last["tx_bytes_s"].to_numpy() == pytest.approx(5e9, rel=0.05)
    assert full["tx_bytes_s"].to_numpy() == pytest.approx(5e9, rel=0.05)
