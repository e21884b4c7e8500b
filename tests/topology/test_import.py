"""import_topology and topology_apply: idempotent, reports changes, all or nothing."""
import io

import pytest
from django.core.management import CommandError, call_command

from apps.topology.formats import topology_to_json
from apps.topology.models import GlobalLink, Nic, Node, Switch, TopologyRevision


def run(*args) -> str:
    out = io.StringIO()
    call_command("import_topology", *args, stdout=out, stderr=out)
    return out.getvalue()


@pytest.fixture
def small_file(tmp_path, small_topology):
    path = tmp_path / "small.json"
    path.write_text(topology_to_json(small_topology))
    return path


@pytest.mark.django_db
def test_import_then_reimport_changes_nothing(small_file):
    output = run(str(small_file))
    assert "nodes: 24 added" in output and "nics: 48 added" in output and "switches: 12 added" in output
    assert (Node.objects.count(), Nic.objects.count(), Switch.objects.count(), GlobalLink.objects.count()) == (24, 48, 12, 3)
    assert TopologyRevision.objects.count() == 1
    assert "no changes" in run(str(small_file))
    assert TopologyRevision.objects.count() == 1


@pytest.mark.django_db
def test_reimport_reports_moved_nics_and_removed_nodes(small_file):
    run(str(small_file))
    text = small_file.read_text()
    # nid000001 hsn0 re-cabled from switch 0.0 port 0 to switch 0.2 port 1; nid000024 gone.
    text = text.replace('{"name": "hsn0", "mac": "02:00:00:00:00:00"}', '{"name": "hsn0", "mac": "02:00:00:00:00:81"}')
    lines = [line for line in text.splitlines() if '"nid000024"' not in line]
    lines[-3] = lines[-3].rstrip(",")  # the node before the removed last one now ends the list
    small_file.write_text("\n".join(lines))
    output = run(str(small_file))
    assert "nics: 1 moved to another switch" in output
    assert "nodes: 1 removed" in output
    assert "nid000001 hsn0 moved to switch 0.2" in output
    nic = Nic.objects.select_related("switch__group").get(node__hostname="nid000001", index=0)
    assert (nic.switch.group.number, nic.switch.index, nic.port) == (0, 2, 1)
    assert not Node.objects.filter(hostname="nid000024").exists()
    assert TopologyRevision.objects.count() == 2


@pytest.mark.django_db
def test_bad_file_imports_nothing_and_lists_every_problem(small_file):
    run(str(small_file))
    before = list(Nic.objects.order_by("pk").values_list("pk", "mac", "switch_id", "port"))
    text = small_file.read_text().replace("02:00:00:00:00:40", "not-a-mac").replace('"nid000010"', '"nid000010", "bogus": 1')
    small_file.write_text(text)
    out = io.StringIO()
    with pytest.raises(CommandError, match="2 problem"):
        call_command("import_topology", str(small_file), stdout=out, stderr=out)
    report = out.getvalue()
    assert "nodes.0.nics.1.mac" in report and "unknown keys ['bogus']" in report
    assert f"{small_file}:" in report  # file:line: prefix, like a compiler
    assert list(Nic.objects.order_by("pk").values_list("pk", "mac", "switch_id", "port")) == before


@pytest.mark.django_db
def test_dry_run_changes_nothing(small_file):
    output = run(str(small_file), "--dry-run")
    assert "Dry run" in output and "nodes: 24 added" in output
    assert Node.objects.count() == 0 and TopologyRevision.objects.count() == 0


@pytest.mark.django_db
def test_discovery_csv_adds_nodes_without_removing_others(tmp_path, small_file):
    run(str(small_file))
    csv_file = tmp_path / "discovery.csv"
    csv_file.write_text("hostname,xname,nic,mac\nnid000999,x1000c1s1b1n0,hsn0,02:00:00:00:10:05\n")
    output = run(str(csv_file))
    assert "nodes: 1 added" in output
    assert Node.objects.count() == 25
    node = Node.objects.get(hostname="nid000999")
    assert node.group.number == 2  # 0x1005 -> group 2, switch 0, port 5
    assert "no changes" in run(str(csv_file))


@pytest.mark.django_db
def test_preset_import_gives_the_reference_system_and_the_summary_api_says_so(api_client, make_user):
    output = run("--preset", "alps")
    assert "24 groups, 768 switches, 2688 nodes, 10752 nics, 10752 gpus" in output
    api_client.force_authenticate(make_user("alice"))
    summary = api_client.get("/api/v1/topology/summary/").json()
    assert {key: summary[key] for key in ("groups", "switches", "nodes", "nics", "gpus")} == {
        "groups": 24, "switches": 768, "nodes": 2688, "nics": 10752, "gpus": 10752,
    }
    assert summary["name"] == "alps"


@pytest.mark.django_db
def test_missing_and_binary_files_are_clear_errors(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run(str(tmp_path / "absent.json"))
    binary = tmp_path / "blob.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CommandError, match="not UTF-8"):
        run(str(binary))
    with pytest.raises(CommandError, match="either FILE or --preset"):
        run()
