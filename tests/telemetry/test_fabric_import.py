"""The fabric manager's switch-port counters: the parser (real event layout, malformed parts reported by line,
the good part kept) and POST /api/v1/telemetry/import/?format=fabric-manager (stored in the network table,
who may import)."""
import json
from datetime import datetime, timedelta, timezone

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone as django_tz
from rest_framework.authtoken.models import Token

from apps.telemetry.fabric import counter_rates, parse_fabric_export, port_number

T0 = "2026-11-24T10:00:00.000Z"


def sensor(location, counter, value, ts=T0, context="global", **extra):
    return {"Timestamp": ts, "Location": location, "ParentalIndex": 0, "PhysicalContext": counter, "Index": 0,
            "DeviceSpecificContext": context, "SubIndex": 0, "Value": value, **extra}


def event(*sensors, ts=T0):
    """One telemetry event in the envelope the fabric manager publishes (metrics.messages[].Events[])."""
    return {"metrics": {"messages": [{"Events": [{"EventTimestamp": ts, "MessageId": "CrayFabricPerfTelemetry.RFC3635",
                                                  "Oem": {"Sensors": list(sensors), "TelemetrySource": "FabricPerf"}}]}]}}


# As the fabric manager's stream is dumped: pretty-printed events, one after another.
EXPORT = "\n".join([
    json.dumps(event(
        sensor("x1000c0r3a0l40", "IfHCOutOctets", "1000000"),
        sensor("x1000c0r3a0l40", "IfHCInOctets", "2000"),
        sensor("x1000c0r3a0l40", "IfOutOctets", "99"),            # the 32-bit counter: the 64-bit one wins
        sensor("x1000c0r3a0l40", "IfHCOutUcastPkts", "700"),
        sensor("x1000c0r3a0l40", "IfHCOutMulticastPkts", "20"),
        sensor("x1000c0r3a0l40", "IfInErrors", "3"),
        sensor("x1000c0r3a0l40", "IfOutErrors", "4"),
        sensor("x1000c0r3a0l40", "txBW_global", "51.5"),          # a congestion metric, not a counter
        sensor("x1000c0r3b0a0l7", "IfHCOutOctets", "5", context="local"),
    ), indent=2),
    json.dumps(event(
        sensor("x1000c0r3a0l40", "IfHCOutOctets", "26000001000000", ts="2026-11-24T10:00:10.000Z"),
        sensor("x1000c0r3a0l99", "IfHCOutOctets", "1"),           # line of this sensor: port out of range
        sensor("x1000c0r3a0l41", "IfHCOutOctets", "many"),        # not a number
        sensor("x1000c0s1b0n0", "IfHCOutOctets", "1"),            # a node, not a switch port
        sensor("x1000c0r3a0l41", "IfHCOutOctets", "1", ts="yesterday"),
    ), indent=2),
    '{"metrics": {"messages": [{"Events": [ {"Oem": ',              # a broken document
    json.dumps(event(sensor("x1001c0r0a0l40", "IfHCInOctets", 123, Peer="x1000c0r3:40"))),
])


def line_of(text, needle, nth=0):
    lines = [number for number, line in enumerate(text.splitlines(), start=1) if needle in line]
    return lines[nth]


def test_the_export_gives_cumulative_port_rows_and_each_bad_part_its_line():
    result = parse_fabric_export(EXPORT, cluster="alps")
    frame = result.frame
    rows = {(h, n, f, ts.strftime("%H:%M:%S")): v for h, n, f, ts, v in
            zip(frame["host"], frame["nic"], frame["field"], frame["ts"], frame["value"])}
    assert rows[("x1000c0r3", "p40", "port_tx_bytes", "10:00:00")] == 1_000_000
    assert rows[("x1000c0r3", "p40", "port_tx_bytes", "10:00:10")] == 26_000_001_000_000
    assert rows[("x1000c0r3", "p40", "port_rx_bytes", "10:00:00")] == 2000
    assert rows[("x1000c0r3", "p40", "port_tx_packets", "10:00:00")] == 720     # unicast + multicast
    assert rows[("x1000c0r3", "p40", "port_errors", "10:00:00")] == 7           # in + out
    assert rows[("x1000c0r3", "p7", "port_tx_bytes", "10:00:00")] == 5          # the b0 controller suffix dropped
    assert rows[("x1001c0r0", "p40", "port_rx_bytes", "10:00:00")] == 123
    assert len(rows) == 7 and set(frame["cluster"]) == {"alps"}
    assert result.skipped == 1
    by_line = {error["line"]: error for error in result.errors}
    # an error is on the line where its sensor's object opens: two above its Location, eight above its Value
    assert by_line[line_of(EXPORT, "a0l99") - 2]["column"] == "Location"
    assert "out of range 0-63" in by_line[line_of(EXPORT, "a0l99") - 2]["message"]
    assert by_line[line_of(EXPORT, '"many"') - 8]["column"] == "Value"
    assert by_line[line_of(EXPORT, "x1000c0s1b0n0") - 2]["column"] == "Location"
    assert by_line[line_of(EXPORT, '"yesterday"') - 1]["column"] == "Timestamp"
    broken = by_line[line_of(EXPORT, '{"Oem": ')]
    assert "malformed JSON" in broken["message"] and isinstance(broken["column"], int)
    assert result.error_count == len(result.errors) == 5
    assert result.ports[("x1000c0r3", "p40")].kind == "global"
    assert result.ports[("x1000c0r3", "p7")].kind == "local"
    assert (result.ports[("x1001c0r0", "p40")].peer, result.ports[("x1001c0r0", "p40")].peer_port) == ("x1000c0r3", 40)


def test_envelopes_ports_and_times():
    bare = {"Events": [{"EventTimestamp": 1795600000, "Oem": {"Sensors": [
        {"Location": "x3000c0r15", "SubIndex": 12, "PhysicalContext": "IfHCInOctets", "Value": 10},
        {"Location": "x3000c0r15j17p0", "PhysicalContext": "LinkDownCount", "Value": "2"},
        {"Location": "x3000c0r15", "PhysicalContext": "IfHCInOctets", "Value": 10}]}}]}
    result = parse_fabric_export(json.dumps(bare), cluster="c")
    assert sorted(zip(result.frame["nic"], result.frame["field"])) == [("j17p0", "port_link_down"), ("p12", "port_rx_bytes")]
    assert result.frame["ts"].iloc[0] == datetime.fromtimestamp(1795600000, tz=timezone.utc)
    assert [error["column"] for error in result.errors] == ["Location"]
    assert port_number("p12") == 12 and port_number("j17p0") is None
    no_time = {"Events": [{"Oem": {"Sensors": [{"Location": "x3000c0r15a0l1", "PhysicalContext": "IfHCInOctets", "Value": 1}]}}]}
    assert parse_fabric_export(json.dumps(no_time), cluster="c").errors[0]["column"] == "Timestamp"
    given = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_fabric_export(json.dumps(no_time), cluster="c", ts=given).frame["ts"].iloc[0] == given
    wrong = parse_fabric_export('{"switches": []}', cluster="c")
    assert wrong.frame.empty and "metrics.messages" in wrong.errors[0]["message"]
    with pytest.raises(ValueError, match="at most 100"):
        parse_fabric_export(" " * 101, cluster="c", max_bytes=100)
    with pytest.raises(ValueError, match="empty"):
        parse_fabric_export("  \n", cluster="c")
    deep = parse_fabric_export("[" * 5000 + "]" * 5000, cluster="c")
    assert deep.frame.empty and deep.errors and deep.errors[0]["line"] == 1


def test_counter_rates_handle_resets():
    def rows(values, start=datetime(2026, 1, 1, tzinfo=timezone.utc)):
        return {"ts": [start + timedelta(seconds=10 * i) for i in range(len(values))], "value": values}

    import pandas as pd
    a = pd.DataFrame({"host": "s", "nic": "p1", "field": "port_tx_bytes", "cluster": "c", **rows([0.0, 100.0, 300.0])})
    b = pd.DataFrame({"host": "s", "nic": "p2", "field": "port_tx_bytes", "cluster": "c", **rows([500.0, 700.0, 50.0])})
    rates = counter_rates(pd.concat([b, a]))
    by_port = dict(zip(rates["nic"], rates["rate"]))
    assert by_port["p1"] == pytest.approx(300 / 20)
    assert by_port["p2"] == pytest.approx((200 + 50) / 20)  # the drop is a reset: 50 counted since it
    assert counter_rates(a.iloc[:1]).empty


# --- the API ---------------------------------------------------------------------------------------------

def post(api_client, key, text, *, keyword="Token", query="format=fabric-manager&cluster=alps"):
    headers = {"HTTP_AUTHORIZATION": f"{keyword} {key}"} if key else {}
    return api_client.generic("POST", f"/api/v1/telemetry/import/?{query}", text.encode(), content_type="text/plain", **headers)


@pytest.fixture
def service(db, make_user):
    user = make_user("fabric-collector")
    user.user_permissions.add(Permission.objects.get(codename="add_ingestbatch"))
    return Token.objects.create(user=user).key


def test_import_stores_port_counters_and_reports_bad_lines(api_client, service, store):
    response = post(api_client, service, EXPORT)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["accepted"], body["rejected"], body["errors_truncated"]) == (7, 5, False)
    assert {error["line"] for error in body["errors"]} >= {line_of(EXPORT, "a0l99") - 2}
    stored = store.read_net("alps", start=datetime(2026, 11, 24, tzinfo=timezone.utc), end=datetime(2026, 11, 25, tzinfo=timezone.utc))
    assert len(stored) == 7
    tx = stored[(stored.host == "x1000c0r3") & (stored.nic == "p40") & (stored.field == "port_tx_bytes")]
    assert tx["value"].tolist() == [1_000_000, 26_000_001_000_000]
    assert post(api_client, service, EXPORT).status_code == 200  # sent again: the same rows, replaced
    assert len(store.read_net("alps", hosts=["x1000c0r3"])) == 6


def test_nothing_good_is_a_400_naming_the_lines(api_client, service, store):
    bad = json.dumps(event(sensor("x1000c0r3a0l99", "IfHCOutOctets", "1")), indent=2)
    response = post(api_client, service, bad)
    assert response.status_code == 400
    assert f"line {line_of(bad, 'a0l99') - 2}:" in response.json()["detail"] and "out of range" in response.json()["detail"]
    assert post(api_client, service, "{oops").status_code == 400
    assert store.read_net("alps").empty


def test_who_may_import_switch_counters(api_client, make_user, store):
    from apps.jobs.models import Cluster, Job, JobToken

    text = json.dumps(event(sensor("x1000c0r3a0l40", "IfHCOutOctets", "1")))
    assert post(api_client, Token.objects.create(user=make_user("alice")).key, text).status_code == 403
    assert post(api_client, None, text).status_code in (401, 403)
    assert post(api_client, Token.objects.create(user=make_user("sam", is_staff=True)).key, text).status_code == 200
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=77, user_name="alice", account="a",
                             state="RUNNING", submit_time=django_tz.now() - timedelta(hours=1),
                             start_time=django_tz.now() - timedelta(minutes=30), node_list=["nid000010"])
    _, key = JobToken.issue(job)
    refused = post(api_client, key, text, keyword="JobToken", query="format=fabric-manager")
    assert refused.status_code == 403 and "job token may not import switch port counters" in refused.json()["detail"]


@pytest.mark.parametrize("ts", ["9999-12-31T23:59:59-23:59", "9999-01-01T00:00:00Z", "1000-01-01T00:00:00Z", 9e10])
def test_a_time_outside_the_years_is_that_lines_error_and_the_rest_is_kept(api_client, service, store, ts):
    """Issue 33, finding 3 (the class of 3d): a time whose UTC is past year 9999 was a 500 (OverflowError), and one past
    2262 or before 1677 made the store refuse the whole batch; it is its own line's Timestamp error, the rest stored."""
    text = json.dumps(event(sensor("x1000c0r3j17p0", "IfHCOutOctets", "1", ts=ts), sensor("x1000c0r3j17p1", "IfHCOutOctets", "1")),
                      indent=2)
    response = post(api_client, service, text)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["accepted"], body["rejected"]) == (1, 1)
    assert body["errors"][0]["column"] == "Timestamp" and "is not between 2000 and 2200" in body["errors"][0]["message"]
    assert store.read_net("alps")["nic"].tolist() == ["j17p1"]
