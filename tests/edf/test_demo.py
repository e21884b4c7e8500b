"""The demo's EDFs: a three-level inheritance chain, a history with a fixed mistake, and sharing."""
import pytest

from apps.edf.selectors import edf_base_texts, edf_get_for_user, edf_list_for_user
from apps.edf.validator import validate

from tests.demo_snapshot import load_demo


def test_demo_user_has_a_chain_a_history_and_a_shared_edf(transactional_db, django_user_model):
    load_demo()
    demo = django_user_model.objects.get(username="demo")
    visible = {(d.owner.username, d.name) for d in edf_list_for_user(demo)}
    own = {name for owner, name in visible if owner == "demo"}
    assert own == {"alps-base", "megatron", "megatron-debug", "jax-2024"}
    assert any(owner != "demo" and name == "team-base" for owner, name in visible)

    debug = edf_get_for_user(demo, "demo", "megatron-debug")
    result = validate(debug.latest.text, base_environments=edf_base_texts(demo, demo), name="megatron-debug",
                      env={"USER": "demo", "HOME": "/users/demo", "SCRATCH": "/scratch/demo"})
    assert result.valid
    assert result.resolved["chain"] == ["alps-base", "megatron", "megatron-debug"]
    assert result.resolved["expanded"]["mounts"][-1] == "/scratch/demo/datasets/pile.sqsh:/data:sqsh"
    assert result.resolved["annotations"]["com.hooks.ssh.enabled"] == "true"

    megatron = edf_get_for_user(demo, "demo", "megatron")
    errors = list(megatron.versions.order_by("number").values_list("number", "error_count"))
    assert errors[0] == (1, 1) and all(count == 0 for _, count in errors[1:]) and len(errors) == 3
    jax = edf_get_for_user(demo, "demo", "jax-2024").latest
    assert (jax.error_count, jax.warning_count) == (0, 1)
