"""OIDC login for production (enabled when OIDC_RP_CLIENT_ID is set; see portal/settings/base.py)."""
from django.conf import settings
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .claims import ClaimsError, ClaimsMapping, map_claims
from .services import user_sync_from_identity


def _mapping() -> ClaimsMapping:
    return ClaimsMapping(
        username_claim=settings.OIDC_USERNAME_CLAIM,
        groups_claim=settings.OIDC_GROUPS_CLAIM,
        staff_group=settings.OIDC_STAFF_GROUP,
        account_group_prefix=settings.OIDC_ACCOUNT_GROUP_PREFIX,
    )


class ProjectClaimsOIDCBackend(OIDCAuthenticationBackend):
    """Matches users by username claim and keeps staff flag and project memberships in sync."""

    def filter_users_by_claims(self, claims):
        try:
            username = map_claims(claims, _mapping()).username
        except ClaimsError:
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(username=username)

    def verify_claims(self, claims):
        try:
            map_claims(claims, _mapping())
        except ClaimsError:
            return False
        return super().verify_claims(claims)

    def create_user(self, claims):
        return user_sync_from_identity(map_claims(claims, _mapping()))

    def update_user(self, user, claims):
        return user_sync_from_identity(map_claims(claims, _mapping()), user=user)
