"""The per-communicator verdicts on the job page and in the layout API (issue 35, item 8): the same level
and sentence in both, a row for CP and EP even when unused, and a data-parallel all-reduce that crosses
a global link pair measured saturated (switch port counters in the telemetry store, read through the
"network" link colouring the system app registers) called critical while the job runs."""
import html
from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

# alps: 112 nodes per dragonfly group; two nodes of group 0 and two of group 1.
NODES = ["nid000001", "nid000002", "nid000113", "nid000114"]
SATURATION = 0.9


@pytest.fixture
def job(alps_job):
    return alps_job(NODES)


def write_pair_load(store, pair: tuple[int, int], fraction: float) -> None:
    """Cumulative tx/rx counters of every global port of ``pair``, at ``fraction`` of 25 GB/s, for the last minutes."""
    from apps.system.selectors import port_map
    from apps.topology.link_load import LINK_BYTES_PER_S
    from apps.topology.selectors import topology_current

    topology = topology_current()
    xname_of = {(switch.group, switch.index): switch.xname for switch in topology.switches}
    now = timezone.now()
    rows = []
    for switch, places in port_map(topology).places.items():
        for port, place in places.items():
            if place.kind == "global" and tuple(sorted(place.groups)) == pair:
                for minutes in (4, 1):
                    seconds = 600 - 60 * minutes
                    for field in ("port_tx_bytes", "port_rx_bytes"):
                        rows.append({"ts": now - timedelta(minutes=minutes), "cluster": "alps", "host": xname_of[switch],
                                     "nic": f"p{port}", "field": field, "value": float(fraction * LINK_BYTES_PER_S * seconds)})
    assert rows
    frame = pd.DataFrame(rows)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    store.write_net(frame)


def rows_of(page: str) -> dict[str, str]:
    table = page[page.index('id="rank-spans"'):]
    table = table[:table.index("</table>")]
    rows = {}
    for chunk in table.split('<tr data-kind="')[1:]:
        rows[chunk[:chunk.index('"')]] = chunk[:chunk.index("</tr>")]
    return rows


def test_page_and_api_give_each_communicator_the_same_verdict_and_a_saturated_global_link_is_named(
        alice, job, client, django_user_model, store):
    write_pair_load(store, (0, 1), SATURATION)
    body = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 1}, format="json").json()
    verdicts = {span["kind"]: (span["level"], span["verdict"]) for span in body["communicators"]}
    assert verdicts["tp"][0] == "ok" and verdicts["tp"][1].startswith("fast: NVLink")
    # The four DP groups (one per tensor lane) each span nodes in groups 0 and 1, whose links are full.
    level, words = verdicts["dp"]
    assert level == "critical"
    assert words.startswith("exposed: the gradient all-reduce crosses the 4 global links between dragonfly groups 0 ↔ 1")
    assert "are saturated, at 90 % of their capacity" in words
    assert verdicts["cp"] == ("ok", "not used: CP 1, no context parallelism (no ring attention).")
    assert verdicts["ep"] == ("ok", "not used: EP 1, no expert parallelism (no all-to-all).")
    client.force_login(django_user_model.objects.get(username="alice"))
    page = client.get("/jobs/alps/1/").content.decode()
    rows = rows_of(page)
    assert {"tp", "cp", "ep", "dp", "pp", "mp"} <= set(rows)  # CP and EP have their rows even when unused
    for kind in ("tp", "cp", "ep", "dp"):
        level, words = verdicts[kind]
        assert f'data-level="{level}"' in rows[kind] and html.escape(words) in rows[kind]
    assert 'class="status status--fail">critical</span>' in rows["dp"]
    assert alice.get("/api/v1/jobs/alps/1/layout/").json()["communicators"] == body["communicators"]


def test_without_a_measurement_or_once_the_job_ended_the_dp_verdict_claims_no_load(alice, job, store):
    body = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 1}, format="json").json()
    dp = next(span for span in body["communicators"] if span["kind"] == "dp")
    assert dp["level"] == "warning" and "saturated" not in dp["verdict"]  # no counters: exposed, nothing more
    write_pair_load(store, (0, 1), SATURATION)
    job.state = "COMPLETED"
    job.save(update_fields=["state"])
    dp = next(span for span in alice.get("/api/v1/jobs/alps/1/layout/").json()["communicators"] if span["kind"] == "dp")
    assert dp["level"] == "warning" and "saturated" not in dp["verdict"]  # a load measured now says nothing of it
