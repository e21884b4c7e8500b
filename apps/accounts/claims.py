"""Map OpenID Connect claims to a Belvedere user. Pure: must not import django.

The identity provider says who the user is and which groups they belong to; Belvedere turns
that into a username, a staff flag and the Slurm accounts (projects) they are a member of.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class ClaimsMapping:
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"
    staff_group: str = "belvedere-staff"
    account_group_prefix: str = "slurm-"


@dataclass(frozen=True)
class MappedIdentity:
    username: str
    email: str
    first_name: str
    last_name: str
    is_staff: bool
    slurm_accounts: frozenset[str]


class ClaimsError(ValueError):
    """The provider's claims lack what Belvedere needs to identify the user."""


def map_claims(claims: dict, mapping: ClaimsMapping) -> MappedIdentity:
    username = str(claims.get(mapping.username_claim) or "").strip()
    if not username:
        raise ClaimsError(f"the identity provider sent no '{mapping.username_claim}' claim")
    groups = claims.get(mapping.groups_claim) or []
    if isinstance(groups, str):
        groups = [groups]
    groups = [str(group).strip().lstrip("/") for group in groups]
    accounts = frozenset(
        group[len(mapping.account_group_prefix):]
        for group in groups
        if group.startswith(mapping.account_group_prefix) and len(group) > len(mapping.account_group_prefix)
    )
    return MappedIdentity(
        username=username,
        email=str(claims.get("email") or ""),
        first_name=str(claims.get("given_name") or ""),
        last_name=str(claims.get("family_name") or ""),
        is_staff=mapping.staff_group in groups,
        slurm_accounts=accounts,
    )
