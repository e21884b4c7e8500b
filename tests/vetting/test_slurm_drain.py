"""Draining and returning nodes in a real Slurm 22.05 cluster (tests/slurm_cluster.py): Belvedere's
drain carries its reason; a node someone else drained is never returned by Belvedere."""
import pytest

from apps.vetting.scontrol import ActionRefused, SlurmNodeActions
from apps.vetting.models import NodeHealth, NodeHealthEvent
from apps.vetting.services import node_act

pytestmark = pytest.mark.integration


def state(cluster, node):
    return SlurmNodeActions(run_command).info(node)


def run_command(args, timeout):
    from apps.jobs.services import run_slurm_command

    return run_slurm_command(args, timeout)


def resume(cluster, node):
    cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=True)


def test_a_drain_through_belvedere_reaches_slurm_with_its_reason_and_is_returned(slurm_env, db, settings):
    settings.VETTING_ACTIONS_DRY_RUN = False
    node = "nid000003"
    try:
        NodeHealth.objects.create(host=node, state="drain_recommended", since="2026-11-23T10:00:00Z")
        event = node_act(node, "drain", actor="ops", reason="gpu-failures-7d: 3 failed GPU evaluations in 7 days")
        assert event.executed and not event.dry_run
        assert event.command.startswith(f"scontrol update NodeName={node} State=DRAIN 'Reason=Belvedere: ")
        info = state(slurm_env, node)
        assert info.drained and info.reason == "Belvedere: gpu-failures-7d: 3 failed GPU evaluations in 7 days"
        assert info.reason_user == "root" and info.reason_time  # Slurm's record of who and when
        assert slurm_env.node_states()[node].startswith("drain")
        assert NodeHealth.objects.get(host=node).drained_by_belvedere
        node_act(node, "return", actor="ops", reason="GPU reseated, vetting passed")
        # back in service; right after RESUME slurmctld may flag the node "not responding" (idle*) until its next ping
        assert not state(slurm_env, node).drained and slurm_env.node_states()[node] in ("idle", "idle*")
        assert list(NodeHealthEvent.objects.filter(host=node).order_by("id").values_list("executed", flat=True)) == [True, True]
    finally:
        if state(slurm_env, node).drained:
            resume(slurm_env, node)


def test_a_node_drained_by_someone_else_is_never_resumed(slurm_env, db, settings):
    settings.VETTING_ACTIONS_DRY_RUN = False
    node = "nid000004"
    slurm_env.run("scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=DIMM replacement, ticket 4711", check=True)
    try:
        backend = SlurmNodeActions(run_command, dry_run=False)
        with pytest.raises(ActionRefused, match="drained by root with reason 'DIMM replacement, ticket 4711', not by Belvedere"):
            backend.resume(node)
        # nor through the portal, whatever its own state says
        NodeHealth.objects.create(host=node, state="drained", since="2026-11-23T10:00:00Z", drained_by_belvedere=True)
        with pytest.raises(ActionRefused, match="not by Belvedere"):
            node_act(node, "return", actor="ops", reason="looks fine to me")
        info = state(slurm_env, node)
        assert info.drained and info.reason == "DIMM replacement, ticket 4711"
        assert NodeHealth.objects.get(host=node).state == "drained"
    finally:
        resume(slurm_env, node)


def test_a_dry_run_changes_nothing_in_slurm(slurm_env, db, settings):
    settings.VETTING_ACTIONS_DRY_RUN = True
    node = "nid000002"
    event = node_act(node, "drain", actor="ops", reason="testing the dry run")
    assert not event.executed and event.dry_run and "dry run" in event.output
    assert not state(slurm_env, node).drained and slurm_env.node_states()[node] == "idle"
    assert NodeHealth.objects.get(host=node).state == "healthy"  # nor here
