"""Triage at the switch's level (issue 23): a switch finding is one row with its nodes and one action for them; a
dry run says "would drain N nodes" and changes no node's state, counter or recommendation; only a real run does.
Also the result rows' GPU / rank and the timeline's health-change labels that never overlap."""
from datetime import datetime, timedelta, timezone as tz

import pytest

from apps.vetting.figures import LABEL_CHAR_PX, LABEL_LANE_PX, LABEL_PLOT_PX, node_timeline, state_labels
from apps.vetting.node_states import TransitionError, switch_rows, would_words
from apps.vetting.scontrol import SlurmNodeActions
from apps.vetting.tables import gpu_rank_words

BEHIND = [f"nid0006{n:02d}" for n in range(14)]


# --- plain ------------------------------------------------------------------------------------------
def test_a_switch_finding_is_one_row_that_takes_its_suspect_nodes_out_of_the_node_rows():
    states = {**{host: "suspect" for host in BEHIND}, BEHIND[0]: "drained", BEHIND[1]: "drain_recommended", "nid000999": "suspect"}
    rows, absorbed = switch_rows([("5.0", list(reversed(BEHIND)), {"why": "low NCCL"})], states, own_findings={BEHIND[1]})
    [row] = rows
    assert row["switch"] == "5.0" and row["why"] == "low NCCL"
    assert [host for host, _ in row["nodes"]] == BEHIND  # sorted, each once
    # drained already: no drain; the other 13 are drained by the one action
    assert row["drainable"] == BEHIND[1:]
    # the drained node and the one with a finding of its own keep their rows; the 12 plain suspects are the switch's
    assert absorbed == set(BEHIND[2:]) and "nid000999" not in absorbed
    assert row["others"] == [(BEHIND[0], "drained"), (BEHIND[1], "drain_recommended")]


def test_would_words_count_and_name_what_is_left_out():
    assert would_words("drain", BEHIND) == "would drain 14 nodes"
    assert would_words("drain", BEHIND[:1]) == "would drain 1 node"
    assert would_words("drain", BEHIND[1:], [(BEHIND[0], "is drained")]) == "would drain 13 nodes (1 left out: nid000600 is drained)"


def test_gpu_and_rank_tell_rows_of_one_node_apart():
    assert gpu_rank_words(2, None, None) == "GPU 2"
    assert gpu_rank_words(None, 5, 1) == "rank 5 (local 1)"
    assert gpu_rank_words(None, None, 3) == "local rank 3"
    assert gpu_rank_words(1, 9, 1) == "GPU 1 · rank 9 (local 1)"
    assert gpu_rank_words(None, None, None) == ""
    assert len({gpu_rank_words(None, None, local) for local in range(4)}) == 4


def _boxes(annotations, span):
    """(left s, right s, bottom px, top px) of each label, as state_labels measures them."""
    per_px = (span[1] - span[0]).total_seconds() / LABEL_PLOT_PX
    out = []
    for note in annotations:
        lines = note["text"].split("<br>")
        width = max(len(line.split(">", 1)[1].split("<", 1)[0]) for line in lines) * LABEL_CHAR_PX + 8
        centre = datetime.fromisoformat(note["x"]).timestamp()
        out.append((centre - width / 2 * per_px, centre + width / 2 * per_px, note["yshift"], note["yshift"] + len(lines) * LABEL_LANE_PX))
    return out


def test_labels_of_changes_at_one_moment_or_close_together_never_overlap():
    t0 = datetime(2026, 11, 1, tzinfo=tz.utc)
    moment = t0 + timedelta(days=20)
    events = [{"created": moment, "to_state": "drain_recommended"}, {"created": moment, "to_state": "drained"},
              {"created": moment + timedelta(seconds=1), "to_state": "in_repair"},  # one transaction, one moment
              {"created": moment + timedelta(days=2), "to_state": "returned"},  # close: its label would run into theirs
              {"created": t0 + timedelta(days=5), "to_state": "suspect"}]  # far: its own place on the first lane
    span = (t0, t0 + timedelta(days=30))
    annotations, lanes = state_labels(events, span=span)
    assert len(annotations) == 3
    shared = next(note for note in annotations if note["text"].count("<br>") == 2)  # one label, one line a change
    text = shared["text"]
    assert text.index("in repair") < text.index("drained") < text.index("drain recommended")  # the latest change on top
    boxes = _boxes(annotations, span)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]), (a, b)
    suspect = next(note for note in annotations if "suspect" in note["text"])
    returned = next(note for note in annotations if "returned" in note["text"])
    assert (suspect["yshift"], shared["yshift"], returned["yshift"]) == (2, 2, 2 + 3 * LABEL_LANE_PX)
    assert lanes == 4
    # the figure's top margin makes room for every lane
    rows = [{"time": t0 + timedelta(days=d), "eval_name": "gpu idle", "outcome": "pass", "status": "SUCCESS"} for d in range(30)]
    figure = node_timeline(rows, events)
    assert figure.layout.margin.t >= 24 + LABEL_LANE_PX * lanes


# --- the service and the page ----------------------------------------------------------------------
@pytest.fixture
def switch_world(db, make_user):
    from django.utils import timezone

    from apps.vetting.models import NodeHealth, Recommendation, Rule
    from apps.vetting.services import rules_ensure_built_in

    rules_ensure_built_in()
    now = timezone.now()
    for host in BEHIND:
        NodeHealth.objects.create(host=host, state="suspect", since=now, reason="switch 5.0: low NCCL bandwidth")
    NodeHealth.objects.filter(host=BEHIND[0]).update(state="in_repair")
    NodeHealth.objects.create(host="nid000777", state="drain_recommended", since=now, severity="critical")
    rec = Recommendation.objects.create(rule=Rule.objects.get(slug="nccl-low-same-switch"), rule_version=1, subject_kind="switch",
                                        subject="5.0", hosts=BEHIND, action="suspect", severity="warning",
                                        summary="switch 5.0: low NCCL bandwidth in 2 runs")
    return {"staff": make_user("ops", is_staff=True), "rec": rec}


def _snapshot():
    from apps.vetting.models import NodeHealth, Recommendation

    return (sorted(NodeHealth.objects.values_list("host", "state", "since", "reason", "drained_by_belvedere")),
            sorted(Recommendation.objects.values_list("pk", "status")))


def test_a_switch_dry_run_records_what_would_run_and_changes_no_state(switch_world, settings):
    from apps.vetting.models import NodeHealthEvent
    from apps.vetting.services import switch_act

    settings.VETTING_ACTIONS_DRY_RUN = False  # even where actions run for real, a dry run asked for is one
    asked = []
    backend = SlurmNodeActions(lambda command, timeout: asked.append(command) or "", dry_run=False)
    before = _snapshot()
    acted = switch_act("5.0", "drain", actor="ops", reason="NCCL low behind 5.0", dry_run=True, backend=backend)
    assert _snapshot() == before and asked == []
    assert acted.dry_run and acted.hosts == BEHIND[1:] and acted.skipped == [(BEHIND[0], "is in repair")]
    assert acted.words == ("switch 5.0: would drain 13 nodes (1 left out: nid000600 is in repair) "
                           "(dry run: nothing changed in Slurm or here)")
    events = NodeHealthEvent.objects.filter(action="drain")
    assert events.count() == 13 and all(e.dry_run and e.from_state == e.to_state == "suspect" for e in events)
    assert acted.as_dict()["commands"][0] == "scontrol update NodeName=nid000601 State=DRAIN 'Reason=Belvedere: switch 5.0: NCCL low behind 5.0'"


def test_a_real_switch_drain_needs_the_dry_runs_count_then_drains_and_resolves(switch_world, settings):
    from apps.vetting.models import NodeHealth, Recommendation
    from apps.vetting.services import switch_act

    asked = []
    backend = SlurmNodeActions(lambda command, timeout: asked.append(command) or "", dry_run=False)
    before = _snapshot()
    with pytest.raises(TransitionError, match="run the dry run first: it would now drain 13 nodes"):
        switch_act("5.0", "drain", actor="ops", reason="x", dry_run=False, backend=backend)
    with pytest.raises(TransitionError, match="it would now drain 13 nodes, not 14"):
        switch_act("5.0", "drain", actor="ops", reason="x", dry_run=False, expect=14, backend=backend)
    with pytest.raises(TransitionError, match="say why"):
        switch_act("5.0", "drain", actor="ops", reason="  ", dry_run=True, backend=backend)
    with pytest.raises(TransitionError, match="no open finding about switch 9.9"):
        switch_act("9.9", "drain", actor="ops", reason="x", dry_run=True, backend=backend)
    assert _snapshot() == before and asked == []
    acted = switch_act("5.0", "drain", actor="ops", reason="links down", dry_run=False, expect=13, backend=backend)
    assert not acted.dry_run and len(asked) == 13 and acted.words == "switch 5.0: drained 13 nodes; 1 left out: nid000600 is in repair"
    assert set(NodeHealth.objects.filter(host__in=BEHIND[1:]).values_list("state", flat=True)) == {"drained"}
    assert NodeHealth.objects.get(host=BEHIND[0]).state == "in_repair"
    assert Recommendation.objects.get(pk=switch_world["rec"].pk).status == "done"


def test_the_triage_page_shows_one_switch_row_and_its_dry_run_in_place(client, switch_world, settings):
    import json

    from apps.vetting.models import NodeHealthEvent

    settings.VETTING_ACTIONS_DRY_RUN = True
    client.force_login(switch_world["staff"])
    page = client.get("/vetting/triage/").content.decode()
    switches = page.split('id="triage-switch-table"')[1].split("</table>")[0]
    assert switches.count('class="switch-row"') == 1 and all(f'data-host="{host}"' in switches for host in BEHIND)
    assert "Dry run: drain 13 nodes" in switches and "in Slurm</button>" not in switches  # dry runs only: no real drain
    nodes = page.split('id="triage-nodes"')[1].split("</table>")[0]
    # the 13 suspects are the switch's; the node in repair and the critical node keep their rows
    assert [host for host in BEHIND if f'data-host="{host}"' in nodes] == [BEHIND[0]] and 'data-host="nid000777"' in nodes
    before = _snapshot()
    answer = client.post("/vetting/triage/", data=json.dumps({"switch": "5.0", "action": "drain", "reason": "NCCL low"}),
                         content_type="application/json", HTTP_ACCEPT="application/json")
    assert answer.status_code == 200
    body = answer.json()
    assert body["dry_run"] and body["count"] == 13 and body["message"].startswith("switch 5.0: would drain 13 nodes")
    assert _snapshot() == before and NodeHealthEvent.objects.filter(dry_run=True).count() == 13
    refused = client.post("/vetting/triage/", data=json.dumps({"switch": "5.0", "action": "repair", "reason": "x"}),
                          content_type="application/json", HTTP_ACCEPT="application/json")
    assert refused.status_code == 400 and "drained together" in refused.json()["errors"][0]["message"]
    bad = client.post("/vetting/triage/", data="{nope", content_type="application/json", HTTP_ACCEPT="application/json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "body"
    # without JavaScript: the form posts, the page says what would run and offers the switch again
    form = client.post("/vetting/triage/", {"switch": "5.0", "action": "drain", "reason": "NCCL low", "dry_run": "1"}, follow=True)
    assert "switch 5.0: would drain 13 nodes" in form.content.decode() and form.redirect_chain[-1][0].endswith("?preview=5.0#switch-5.0")
    assert _snapshot() == before


def test_where_actions_run_the_real_drain_follows_the_dry_run(client, switch_world, settings):
    settings.VETTING_ACTIONS_DRY_RUN = False
    client.force_login(switch_world["staff"])
    page = client.get("/vetting/triage/").content.decode()
    assert '<button type="submit" name="dry_run" value="0" class="button switch-drain-real" hidden>Drain 13 nodes in Slurm</button>' in page
    previewed = client.get("/vetting/triage/?preview=5.0").content.decode()
    assert 'name="expect" value="13"' in previewed and 'switch-drain-real">Drain 13 nodes in Slurm' in previewed
    refused = client.post("/vetting/triage/", {"switch": "5.0", "action": "drain", "reason": "x", "dry_run": "0"}, follow=True)
    assert "run the dry run first" in refused.content.decode()


def test_result_rows_say_which_gpu_and_rank(client, people, job, api_client):
    from pathlib import Path

    from apps.jobs.services import job_token_issue

    api_client.credentials(HTTP_AUTHORIZATION=f"JobToken {job_token_issue(job, 'test')}")
    data = (Path(__file__).parent / "data" / "vetnode-0.1.5-verbose-srun.txt").read_bytes()
    assert api_client.post("/api/v1/vetting/import/", data=data, content_type="text/plain").status_code == 201
    client.force_login(people["bob"])
    table = client.get("/vetting/?node=nid001234").content.decode().split('id="vetting-results"')[1]
    assert "<th" in table and "GPU / rank" in table
    cells = [cell.split("</td>")[0] for cell in table.split('<td class="gpu-rank">')[1:]]
    assert cells and all(cells) and any("rank" in cell for cell in cells)
