"""Staff edit each team's envelope and named approvers here; namespaces and requests are read-only (they
change only through the workflow, so every change is an event with a commit)."""
from django.contrib import admin

from .models import ManagedNamespace, NamespaceRequest, TeamEnvelope


@admin.register(TeamEnvelope)
class TeamEnvelopeAdmin(admin.ModelAdmin):
    list_display = ["project", "cpu", "memory", "namespaces", "gpus", "storage"]
    search_fields = ["project__slurm_account", "project__title"]
    filter_horizontal = ["approvers"]
    autocomplete_fields = ["project"]


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ManagedNamespace)
class ManagedNamespaceAdmin(_ReadOnly):
    list_display = ["name", "project", "environment", "state", "sync_status", "health_status", "status_checked"]
    list_filter = ["state", "environment"]
    search_fields = ["name", "project__slurm_account"]


@admin.register(NamespaceRequest)
class NamespaceRequestAdmin(_ReadOnly):
    list_display = ["id", "kind", "name", "project", "status", "requested_by", "decided_by", "created"]
    list_filter = ["status", "kind"]
    search_fields = ["name", "project__slurm_account", "requested_by__username"]
