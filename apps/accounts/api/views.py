from django.db.models import prefetch_related_objects
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, viewsets
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle

from ..lockout import lockout_api_response

from ..selectors import project_list_for_user
from .serializers import MeSerializer, ProjectSerializer


class MeView(generics.RetrieveAPIView):
    """The authenticated user, with the projects (Slurm accounts) they belong to."""

    serializer_class = MeSerializer

    def get_object(self):
        prefetch_related_objects([self.request.user], "memberships__project")  # the projects at once, not one query each
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
    """Exchange a username and password for the user's API token (created on first use).

    Throttled per client address (429 with Retry-After), and after too many wrong passwords for one
    username from one address that pair is locked out for a while, even with the right password:
    429 whose ``detail`` says until when."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "login"
    # ObtainAuthToken names DRF's own parsers; the project's bounded ones refuse deep or huge bodies.
    parser_classes = api_settings.DEFAULT_PARSER_CLASSES

    def post(self, request, *args, **kwargs):
        try:
            return super().post(request, *args, **kwargs)
        except serializers.ValidationError:
            # django-axes marks the request it was given (this DRF request) when the pair is locked out.
            if getattr(request, "axes_locked_out", False):
                return lockout_api_response(request, getattr(request, "axes_credentials", None))
            raise
