from django.contrib import admin

from .models import TriageItem


@admin.register(TriageItem)
class TriageItemAdmin(admin.ModelAdmin):
    list_display = ("key", "kind", "state", "owner", "gpu_hours_lost", "assignee", "last_seen")
    list_filter = ("kind", "state")
    search_fields = ("key", "title", "owner")
    raw_id_fields = ("job", "assignee")
