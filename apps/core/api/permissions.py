"""Permissions shared by the apps' APIs."""
from rest_framework import permissions


class IsStaff(permissions.BasePermission):
    """Signed-in staff only; the message says so instead of DRF's generic one."""

    message = "Only staff may do this."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)
