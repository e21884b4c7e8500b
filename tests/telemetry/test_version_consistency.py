"""A job whose nodes differ in driver, firmware or communication-stack versions names its minority nodes (issue 38,
acceptance 1); a uniform job gets no finding. And thermal outliers at a job's start, same finding style."""
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from django.utils import timezone as django_tz

from apps.telemetry import thermal, versions
from apps.telemetry.services import version_facts_record

# One partition: 12 nodes, two switches' worth of nodes (nid0012xx behind one switch, nid0013xx behind another).
MAJORITY = [f"nid{n:06d}" for n in range(1204, 1212)]
MINORITY = ["nid001200", "nid001201", "nid001300", "nid001301"]  # two on each switch
SEEN = datetime(2026, 12, 1, 8, 0, tzinfo=timezone.utc)


def values(minority_driver="550.54.15", stack=None):
    rows = {host: {"driver": "560.35.03", "vbios": "96.00.89.00.01", "nccl": "2.21.5"} for host in MAJORITY}
    rows.update({host: {"driver": minority_driver, "vbios": "96.00.89.00.01", "nccl": "2.21.5"} for host in MINORITY})
    for host, version in (stack or {}).items():
        rows[host]["nccl"] = version
    return rows


def test_the_minority_on_two_switches_is_named_exactly_with_both_versions():
    (found,) = versions.consistency(values())
    assert found.key == "driver" and found.hosts == tuple(MINORITY)
    assert found.hostlist == "nid[001200-001201,001300-001301]"
    assert found.sentence == ("4 of 12 nodes run driver 550.54.15 while 8 run 560.35.03: "
                              "nid[001200-001201,001300-001301]")


def test_a_uniform_job_has_no_minority_and_identities_are_never_compared():
    rows = values(minority_driver="560.35.03")
    for index, host in enumerate(rows):
        rows[host]["serial"] = f"16549220{index:05d}"  # every GPU has its own serial
    assert versions.consistency(rows) == []


def test_two_minorities_of_one_key_and_a_stack_minority_each_get_their_sentence():
    rows = values(stack={"nid001205": "2.18.3"})
    rows["nid001211"]["driver"] = "535.129.03"
    found = [(m.key, m.value, m.hosts) for m in versions.consistency(rows)]
    assert found == [("driver", "535.129.03", ("nid001211",)), ("driver", "550.54.15", tuple(MINORITY)),
                     ("nccl", "2.18.3", ("nid001205",))]
    assert versions.consistency(rows)[0].sentence.startswith("1 of 12 nodes runs driver 535.129.03 while 7 run 560.35.03")


def test_gpus_of_one_node_that_disagree_make_the_node_differ():
    facts = [{"host": "nid000001", "gpu": gpu, "key": "vbios", "value": "96.00.89.00.01"} for gpu in range(4)]
    facts[2]["value"] = "96.00.74.00.11"
    assert versions.node_values(facts) == {"nid000001": {"vbios": "96.00.74.00.11 / 96.00.89.00.01"}}


@pytest.fixture
def mixed_job(db):
    from apps.jobs.models import Cluster, Job, node_search_text

    hosts = sorted(MAJORITY + MINORITY)
    start = django_tz.now() - timedelta(minutes=30)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=3838, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, node_list=hosts, node_count=len(hosts),
                             node_search=node_search_text(hosts), partition="normal")
    rows = values()
    version_facts_record([versions.observation(host, None, key, value, start - timedelta(minutes=1), "normal")
                          for host, row in rows.items() for key, value in row.items() if key != "vbios"], source="preflight")
    return job


def test_the_job_page_and_its_first_screen_api_name_the_minority(mixed_job, make_user, client):
    from apps.jobs.models import Job, node_search_text

    client.force_login(make_user("alice"))
    body = client.get("/api/v1/jobs/alps/3838/first-screen/").json()
    (finding,) = [f for f in body["findings"] if f["source"] == "versions"]
    assert finding["title"] == "4 of 12 nodes run driver 550.54.15 while 8 run 560.35.03: nid[001200-001201,001300-001301]"
    assert finding["level"] == "warning" and "--exclude=nid[001200-001201,001300-001301]" in finding["action"]
    assert [m["hosts"] for m in body["versions"]["minorities"]] == [MINORITY]
    page = client.get("/jobs/alps/3838/").content.decode()
    assert "4 of 12 nodes run driver 550.54.15" in page
    # A uniform job of the majority's nodes: no finding.
    Job.objects.create(cluster=mixed_job.cluster, job_id=3839, user_name="alice", account="a-llm01", state="RUNNING",
                       submit_time=mixed_job.start_time, start_time=mixed_job.start_time, node_list=MAJORITY,
                       node_count=len(MAJORITY), node_search=node_search_text(MAJORITY))
    uniform = client.get("/api/v1/jobs/alps/3839/first-screen/").json()
    assert [f for f in uniform["findings"] if f["source"] == "versions"] == []
    assert uniform["versions"]["minorities"] == [] and uniform["versions"]["known"] == len(MAJORITY)


def _start_samples(hot_host=None, slow_host=None):
    rows = []
    for node in range(6):
        host = f"nid{node:06d}"
        for gpu in range(4):
            for minute in range(5):
                ts = SEEN + timedelta(minutes=minute)
                temp = 66 + gpu * 0.5 + (12 if host == hot_host else 0)
                clock = 1755 - (200 if host == slow_host else 0)
                rows += [(ts, host, gpu, 150, temp), (ts, host, gpu, 100, clock), (ts, host, gpu, 1002, 0.8)]
    # An idle GPU runs cool and is no peer.
    rows += [(SEEN, "nid000005", 3, 1002, 0.0), (SEEN, "nid000005", 3, 150, 35.0)]
    return pd.DataFrame(rows, columns=["ts", "host", "gpu", "field", "value"])


def test_a_node_running_hotter_or_clocking_lower_than_its_peers_under_the_same_load_is_named():
    (hot,) = thermal.outliers(_start_samples(hot_host="nid000002"))
    assert (hot.host, hot.hotter, hot.slower) == ("nid000002", True, False)
    assert hot.sentence == ("nid000002 runs 12 °C hotter (79 °C against 67 °C) than its peers under the same load "
                            "at the start of the job")
    (slow,) = thermal.outliers(_start_samples(slow_host="nid000004"))
    assert slow.slower and "clocks 11 % lower (1,555 MHz against 1,755 MHz)" in slow.sentence
    assert thermal.outliers(_start_samples()) == []


def test_drift_counts_changes_of_a_node_not_its_first_report():
    day = SEEN
    facts = [{"host": "nid000001", "gpu": -1, "key": "driver", "value": "555.42.06", "first_seen": day - timedelta(days=30)},
             {"host": "nid000001", "gpu": -1, "key": "driver", "value": "560.35.03", "first_seen": day},
             {"host": "nid000002", "gpu": -1, "key": "driver", "value": "555.42.06", "first_seen": day - timedelta(days=30)},
             {"host": "nid000002", "gpu": -1, "key": "driver", "value": "560.35.03", "first_seen": day + timedelta(hours=1)},
             {"host": "nid000003", "gpu": -1, "key": "nccl", "value": "2.21.5", "first_seen": day}]  # a first report
    facts += [{"host": "nid000001", "gpu": gpu, "key": "vbios", "value": v, "first_seen": day + timedelta(days=d)}
              for gpu in range(4) for d, v in ((0, "96.00.74.00.11"), (1, "96.00.89.00.01"))]
    assert versions.drift(facts) == [
        {"day": "2026-12-01", "key": "driver", "label": "driver", "value": "560.35.03", "nodes": 2},
        {"day": "2026-12-02", "key": "vbios", "label": "VBIOS", "value": "96.00.89.00.01", "nodes": 1}]


def test_a_hot_node_at_the_start_of_a_job_is_named_from_the_stored_samples(db, store, make_user, client):
    """Issue 38, thermal outliers, through the real store: the samples of the job's first minutes (as the collector
    posts them) name the node whose GPUs run 12 °C hotter under the same load on the first screen; the others not."""
    from apps.jobs.models import Cluster, Job, node_search_text
    from apps.telemetry.store import telemetry_store

    hosts = [f"nid{node:06d}" for node in range(6)]
    start = (django_tz.now() - timedelta(minutes=40)).replace(second=0, microsecond=0)
    Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=3840, user_name="alice", account="a-llm01",
                       state="RUNNING", submit_time=start, start_time=start, node_list=hosts, node_count=len(hosts),
                       node_search=node_search_text(hosts), partition="normal")
    rows = []
    for host in hosts:
        for gpu in range(4):
            for second in range(0, 12 * 60, 10):
                ts = start + timedelta(seconds=second)
                temp = 66 + gpu * 0.5 + (12 if host == "nid000003" else 0)
                for field, value in ((150, temp), (100, 1755.0), (1002, 0.8)):
                    rows.append({"ts": ts, "cluster": "alps", "host": host, "gpu": gpu, "uuid": f"GPU-{host}-{gpu}",
                                 "field": field, "value": value})
    frame = pd.DataFrame(rows)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    telemetry_store().write(frame)
    client.force_login(make_user("alice"))
    body = client.get("/api/v1/jobs/alps/3840/first-screen/").json()
    titles = [f["title"] for f in body["findings"]]
    hot = [title for title in titles if "hotter" in title]
    assert len(hot) == 1 and hot[0].startswith("nid000003 runs 12 °C hotter"), titles
    assert not [title for title in titles if any(h in title for h in hosts if h != "nid000003") and "hotter" in title]
