"""The collector's Slingshot NIC reader on a fake sysfs tree laid out as the CXI driver lays it out.

The tree (see apps/telemetry/README.md, "Collector: Slingshot NICs", for the sources): per device
``<cxi>/cxiN/device/telemetry/<item>`` holding ``<value>@<seconds>.<nanoseconds>\\n`` beside the
driver's special entries (``ALL-in-binary``, ``reset_counters``), ``<cxi>/cxiN/device/net/<iface>``
(the PCI device's netdev), ``<cxi>/cxiN/device/port/link``; the retry handler's
``<rh>/cxiN/<stat>`` (a plain integer, and a ``config/`` folder); the interface's
``<net>/<iface>/statistics/tx_bytes``. The interfaces are deliberately not numbered like the
devices (cxi0 -> hsn1), so the mapping is checked, not assumed.
"""
import json
import subprocess
import sys

import pytest

from apps.telemetry import netfields

from .recording import SCRIPT, load

collector = load()
TC = range(8)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_node(root, devices=(("cxi0", "hsn1"), ("cxi1", "hsn0")), link="up"):
    cxi, rh, net = root / "cxi", root / "rh", root / "net"
    for number, (device, iface) in enumerate(devices):
        base = 1000 * (number + 1)
        telemetry = cxi / device / "device" / "telemetry"
        for tc in TC:
            write(telemetry / f"hni_pkts_sent_by_tc_{tc}", f"{base + tc}@1764000000.123456789\n")
            write(telemetry / f"hni_pkts_recv_by_tc_{tc}", f"{2 * base + tc}@1764000000.123456789\n")
            write(telemetry / f"hni_tx_paused_{tc}", f"{tc}@1764000000.000000001\n")
            write(telemetry / f"hni_rx_paused_{tc}", "0@1764000000.000000001\n")
        write(telemetry / "pct_retry_srb_requests", f"{72057594037927935 - number}@1764000000.5\n")  # 2**56 - 1 - n
        write(telemetry / "pct_no_tct_nacks", "5@1764000000.5\n")
        write(telemetry / "hni_llr_tx_replay_event", "3@1764000000.5\n")
        write(telemetry / "hni_pcs_uncorrected_cw", "0@1764000000.5\n")
        write(telemetry / "ALL-in-binary", "\x00\x01")
        write(telemetry / "reset_counters", "")
        (cxi / device / "device" / "net" / iface).mkdir(parents=True)
        write(cxi / device / "device" / "port" / "link", f"{link}\n")
        write(rh / device / "nacks", f"{40 + number}\n")
        write(rh / device / "spt_timeouts", "2\n")
        write(rh / device / "config" / "config_file_path", "/etc/cxi_rh.conf\n")
        write(net / iface / "statistics" / "tx_bytes", f"{base * 64}\n")
        write(net / iface / "statistics" / "rx_bytes", f"{base * 32}\n")
    return str(cxi), str(rh), str(net)


def by_key(samples):
    return {(s.nic, s.field): s.value for s in samples}


def test_counters_are_summed_per_canonical_field_and_named_by_interface(tmp_path):
    source = collector.CassiniSource(*fake_node(tmp_path), clock=lambda: 1764000001.0)
    source.open()
    values = by_key(source.read())
    assert source.devices == [("cxi0", "hsn1"), ("cxi1", "hsn0")]
    assert values[("hsn1", "nic_tx_packets")] == sum(1000 + tc for tc in TC)
    assert values[("hsn0", "nic_tx_packets")] == sum(2000 + tc for tc in TC)
    assert values[("hsn1", "nic_rx_packets")] == sum(2000 + tc for tc in TC)
    assert values[("hsn1", "nic_retries")] == 2**56 - 1 and values[("hsn0", "nic_retries")] == 2**56 - 2
    assert values[("hsn1", "nic_tx_paused")] == sum(TC) and values[("hsn1", "nic_rx_paused")] == 0
    assert values[("hsn1", "nic_nacks")] == 40 and values[("hsn0", "nic_nacks")] == 41
    assert values[("hsn1", "nic_spt_timeouts")] == 2 and values[("hsn1", "nic_llr_replays")] == 3
    assert values[("hsn1", "nic_tx_bytes")] == 64000 and values[("hsn0", "nic_rx_bytes")] == 64000
    assert values[("hsn1", "nic_link_up")] == 1 and values[("hsn1", "nic_link_down")] == 0
    assert {field for _, field in values} <= set(netfields.NIC_FIELDS)


def test_link_down_transitions_are_counted(tmp_path):
    cxi, rh, net = fake_node(tmp_path, devices=(("cxi0", "hsn0"),))
    source = collector.CassiniSource(cxi, rh, net, clock=lambda: 1764000001.0)
    source.open()
    link = tmp_path / "cxi" / "cxi0" / "device" / "port" / "link"
    seen = []
    for state in ("up", "down", "down", "up", "down"):
        link.write_text(state + "\n")
        values = by_key(source.read())
        seen.append((values[("hsn0", "nic_link_up")], values[("hsn0", "nic_link_down")]))
    assert seen == [(1, 0), (0, 1), (0, 1), (1, 1), (0, 2)]


def test_a_missing_item_leaves_that_field_out_and_says_so_once(tmp_path, capsys):
    cxi, rh, net = fake_node(tmp_path, devices=(("cxi0", "hsn0"),))
    (tmp_path / "cxi" / "cxi0" / "device" / "telemetry" / "hni_pkts_sent_by_tc_5").unlink()
    (tmp_path / "rh" / "cxi0" / "nacks").write_text("garbage\n")
    source = collector.CassiniSource(cxi, rh, net, clock=lambda: 1764000001.0)
    source.open()
    first, second = by_key(source.read()), by_key(source.read())
    assert ("hsn0", "nic_tx_packets") not in first and ("hsn0", "nic_nacks") not in second
    assert ("hsn0", "nic_rx_packets") in first
    err = capsys.readouterr().err
    assert err.count("nic_tx_packets left out: telemetry item(s) hni_pkts_sent_by_tc_5") == 1
    assert err.count("nic_nacks left out") == 1


def test_without_a_net_entry_the_netdev_listing_its_cxi_device_names_it(tmp_path):
    cxi, rh, net = fake_node(tmp_path, devices=(("cxi0", "hsn3"),))
    (tmp_path / "cxi" / "cxi0" / "device" / "net" / "hsn3").rmdir()
    (tmp_path / "net" / "hsn3" / "device" / "cxi" / "cxi0").mkdir(parents=True)
    source = collector.CassiniSource(cxi, rh, net)
    source.open()
    assert source.devices == [("cxi0", "hsn3")]


def test_a_node_without_cxi_devices_is_unavailable_for_the_nic_source(tmp_path):
    with pytest.raises(collector.SourceUnavailable, match="no Slingshot NICs"):
        collector.CassiniSource(str(tmp_path / "absent")).open()
    (tmp_path / "empty").mkdir()
    with pytest.raises(collector.SourceUnavailable, match="has no cxi\\* device"):
        collector.CassiniSource(str(tmp_path / "empty")).open()


def test_the_embedded_table_matches_the_portal_registry():
    for field, items in collector.CXI_TELEMETRY_FIELDS.items():
        assert netfields.NET_FIELDS[field].driver_names == items, field
    for field, stat in collector.CXI_RETRY_HANDLER_FIELDS.items():
        assert netfields.NET_FIELDS[field].driver_names == (f"rh:{stat}",), field
    for field, stat in collector.NETDEV_FIELDS.items():
        assert netfields.NET_FIELDS[field].driver_names == (f"netdev:{stat}",), field
    assert set(netfields.CANONICAL_NIC_FIELDS) <= (set(collector.CXI_TELEMETRY_FIELDS) | set(collector.NETDEV_FIELDS)
                                                   | {"nic_link_down"})


def test_dry_run_prints_nic_rows_the_portal_parses(tmp_path):
    from datetime import datetime, timezone

    from apps.telemetry import ingest

    cxi, rh, net = fake_node(tmp_path)
    result = subprocess.run([sys.executable, str(SCRIPT), "--source", "none", "--nics", "on", "--dry-run",
                             "--duration", "1.5", "--interval", "1", "--hostname", "nid000007", "--cxi-sysfs", cxi,
                             "--cxi-retry-handler", rh, "--net-sysfs", net, "--host-metrics", "off"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert rows and all(set(row) == {"ts", "host", "nic", "field", "value"} for row in rows)
    parsed = ingest.parse_batch(enumerate(rows), now=datetime.now(timezone.utc), default_cluster="alps")
    assert parsed.errors == [] and len(parsed.net) == len(rows)
    assert set(parsed.net["nic"]) == {"hsn0", "hsn1"} and set(parsed.net["host"]) == {"nid000007"}
