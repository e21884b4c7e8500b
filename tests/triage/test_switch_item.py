"""A switch finding in the staff inbox (issue 23): one item with the switch's nodes listed and one dry-run action for
all of them; the suspect nodes only it names have no items of their own. And the staff page's "what waits" count."""
import json

from django.utils import timezone

from apps.triage.models import TriageItem
from apps.triage.presenting import item_actions
from apps.triage.services import triage_sync

BEHIND = [f"nid0006{n:02d}" for n in range(40, 54)]  # 14 nodes behind switch 5.0


def _switch_of_14(sources):
    from apps.vetting.models import NodeHealth

    now = timezone.now()
    for host in BEHIND:
        NodeHealth.objects.create(host=host, state="suspect", since=now, reason="behind switch 5.0")
    NodeHealth.objects.filter(host=BEHIND[-1]).update(state="drained")
    sources["switch"].hosts = BEHIND
    sources["switch"].save()


def test_a_switch_is_one_item_listing_its_nodes_with_one_action(sources, client):
    _switch_of_14(sources)
    triage_sync()
    [item] = TriageItem.objects.filter(kind="bad_switch")
    assert item.title.endswith("14 nodes") and item.data["hosts"] == BEHIND
    assert item.data["nodes"][0] == [BEHIND[0], "suspect", "suspect"] and item.data["nodes"][-1] == [BEHIND[-1], "drained", "drained"]
    assert item.data["drainable"] == BEHIND[:-1]
    nodes = set(TriageItem.objects.filter(kind="failing_node").values_list("data__host", flat=True))
    # the 13 suspects are the switch's item; the drained one, a state of its own, keeps its row
    assert not nodes & set(BEHIND[:-1]) and BEHIND[-1] in nodes
    [drain] = [action for action in item_actions(item) if action["kind"] == "drain"]
    assert (drain["label"], drain["switch"], drain["href"]) == ("Dry-run drain 13 nodes", "5.0", "/vetting/triage/")

    client.force_login(sources["staff"])
    page = client.get("/staff/triage/?kind=bad_switch").content.decode()
    listed = page.split('class="triage-hosts small"')[1].split("</ul>")[0]
    assert all(f'data-host="{host}"' in listed for host in BEHIND) and "(drained)" in listed
    assert 'data-switch="5.0"' in page and ">Dry-run drain 13 nodes</button>" in page


def test_the_switch_action_the_inbox_sends_is_a_dry_run_that_changes_nothing(sources, client, settings):
    from apps.vetting.models import NodeHealth

    settings.VETTING_ACTIONS_DRY_RUN = False  # the inbox asks for a dry run whatever the setting
    _switch_of_14(sources)
    triage_sync()
    before = sorted(NodeHealth.objects.values_list("host", "state", "since"))
    client.force_login(sources["staff"])
    answer = client.post("/vetting/triage/", data=json.dumps({"switch": "5.0", "action": "drain", "reason": "low NCCL",
                                                              "dry_run": True}),
                         content_type="application/json", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200 and answer.json()["message"].startswith("switch 5.0: would drain 13 nodes")
    assert sorted(NodeHealth.objects.values_list("host", "state", "since")) == before


def test_the_staff_page_counts_the_open_items(sources, client):
    from apps.core.waiting import waiting_entries

    triage_sync()
    [entry] = [entry for entry in waiting_entries() if entry.key == "triage"]
    assert (entry.label, entry.order, entry.url_name) == ("triage items open", 20, "triage:inbox")
    opened = TriageItem.objects.filter(state__in=["new", "acknowledged"]).count()
    assert opened > 1 and entry.count(None) == opened
    TriageItem.objects.filter(kind="bad_switch").update(state="resolved")
    assert entry.count(None) == opened - 1
    client.force_login(sources["staff"])
    page = client.get("/staff/").content.decode()
    assert "triage items open" in page and 'href="/staff/triage/"' in page
