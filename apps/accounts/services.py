"""Writes about users and projects."""
from django.contrib.auth import get_user_model
from django.db import transaction

from .claims import MappedIdentity
from .models import Membership, Project


@transaction.atomic
def user_sync_from_identity(identity: MappedIdentity, user=None):
    """Create or update a user from an identity provider, and align their project memberships.

    Memberships follow the provider exactly for projects that exist in Belvedere; unknown Slurm
    accounts are ignored (staff create projects, the provider only assigns people to them).
    """
    User = get_user_model()
    if user is None:
        user, _created = User.objects.get_or_create(username=identity.username)
    user.email = identity.email
    user.first_name = identity.first_name
    user.last_name = identity.last_name
    user.is_staff = identity.is_staff
    user.save()
    wanted = set(Project.objects.filter(slurm_account__in=identity.slurm_accounts).values_list("id", flat=True))
    current = set(user.memberships.values_list("project_id", flat=True))
    Membership.objects.filter(user=user, project_id__in=current - wanted).delete()
    Membership.objects.bulk_create([Membership(user=user, project_id=project_id) for project_id in wanted - current])
    return user
