"""Notifications endpoints under /api/v1/notifications/: a project's opt-ins (read by its members and staff,
switched by its managers and staff) and the mails sent about the jobs the caller may see."""
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from ..selectors import (notifications_sent_for_user, project_get_for_user, project_managers, project_notifications_get,
                         project_notifications_may_change)
from ..services import project_notifications_update
from .serializers import NotificationSentSerializer, ProjectNotificationsPatchSerializer, ProjectNotificationsSerializer


class ProjectNotificationsView(APIView):
    """A project's opt-ins, by its Slurm account. Projects you are not a member of answer 404."""

    def _project(self, request, account):
        project = project_get_for_user(request.user, account)
        if project is None:
            raise Http404
        return project

    def _answer(self, request, project, row):
        context = {"may_change": project_notifications_may_change(request.user, project), "managers": project_managers(project)}
        return Response(ProjectNotificationsSerializer(row, context=context).data)

    @extend_schema(responses={200: ProjectNotificationsSerializer})
    def get(self, request, account):
        project = self._project(request, account)
        return self._answer(request, project, project_notifications_get(project))

    @extend_schema(request=ProjectNotificationsPatchSerializer, responses={200: ProjectNotificationsSerializer})
    def patch(self, request, account):
        project = self._project(request, account)
        if not project_notifications_may_change(request.user, project):
            raise PermissionDenied("Only the project's managers and staff may switch its notifications.")
        serializer = ProjectNotificationsPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        row = project_notifications_update(project, actor=request.user.get_username(), **serializer.validated_data)
        return self._answer(request, project, row)


class NotificationSentListView(generics.ListAPIView):
    """The latest mails (at most 200) about the jobs you may see; staff: all."""

    serializer_class = NotificationSentSerializer
    pagination_class = None

    def get_queryset(self):
        return notifications_sent_for_user(self.request.user, limit=200)
