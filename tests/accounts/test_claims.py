"""OIDC claims → user, staff flag and project memberships."""
import pytest

from apps.accounts.claims import ClaimsError, ClaimsMapping, map_claims

MAPPING = ClaimsMapping(staff_group="hpc-staff", account_group_prefix="slurm-")


def test_claims_map_to_username_staff_and_accounts():
    identity = map_claims(
        {"preferred_username": "alice", "email": "a@x.org", "groups": ["/slurm-a-llm01", "slurm-a-moe02", "hpc-staff", "slurm-"]},
        MAPPING,
    )
    assert identity.username == "alice"
    assert identity.is_staff is True
    assert identity.slurm_accounts == {"a-llm01", "a-moe02"}


def test_missing_username_claim_is_refused_with_its_name():
    with pytest.raises(ClaimsError, match="preferred_username"):
        map_claims({"email": "a@x.org"}, MAPPING)


def test_single_group_string_is_accepted():
    assert map_claims({"preferred_username": "bob", "groups": "slurm-a-wx04"}, MAPPING).slurm_accounts == {"a-wx04"}


@pytest.mark.django_db
def test_user_sync_follows_the_provider_for_known_projects(make_user):
    from apps.accounts.models import Project
    from apps.accounts.selectors import slurm_accounts_for_user
    from apps.accounts.services import user_sync_from_identity

    make_user("someone", accounts=["a-llm01", "a-moe02", "a-wx04"])
    alice = make_user("alice", accounts=["a-wx04"])
    identity = map_claims({"preferred_username": "alice", "groups": ["slurm-a-llm01", "slurm-a-unknown"]}, MAPPING)
    user_sync_from_identity(identity, user=alice)
    assert slurm_accounts_for_user(alice) == {"a-llm01"}
    assert not Project.objects.filter(slurm_account="a-unknown").exists()
    assert alice.is_staff is False
