from django.contrib import admin

from .models import NotificationSent, ProjectNotifications


@admin.register(ProjectNotifications)
class ProjectNotificationsAdmin(admin.ModelAdmin):
    list_display = ("project", "waste", "straggler", "changed_by", "modified")
    list_select_related = ("project",)
    list_filter = ("waste", "straggler")


@admin.register(NotificationSent)
class NotificationSentAdmin(admin.ModelAdmin):
    list_display = ("sent_at", "job", "reason", "status", "user_name", "recipient", "subject")
    list_select_related = ("job", "job__cluster")
    list_filter = ("reason", "status")
    raw_id_fields = ("job",)
