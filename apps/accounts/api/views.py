from drf_spectacular.utils import extend_schema
from rest_framework import generics, viewsets
from rest_framework.authtoken.views import ObtainAuthToken

from ..selectors import project_list_for_user
from .serializers import MeSerializer, ProjectSerializer


class MeView(generics.RetrieveAPIView):
    """The authenticated user, with the projects (Slurm accounts) they belong to."""

    serializer_class = MeSerializer

    def get_object(self):
        return self.request.user


@extend_schema(tags=["accounts"])
class ProjectViewSet(viewsets.ReadOnlyModelViewSet):
    """Projects visible to the caller: their own, or all of them for staff."""

    serializer_class = ProjectSerializer
    filterset_fields = ["slurm_account"]

    def get_queryset(self):
        return project_list_for_user(self.request.user).order_by("slurm_account")


@extend_schema(tags=["accounts"])
class TokenView(ObtainAuthToken):
    """Exchange a username and password for the user's API token (created on first use)."""
