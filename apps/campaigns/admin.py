from django.contrib import admin

from .models import Campaign, CampaignJob


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "cluster", "account", "user_name", "edited", "created")
    search_fields = ("name", "key", "account", "user_name")


@admin.register(CampaignJob)
class CampaignJobAdmin(admin.ModelAdmin):
    list_display = ("job", "campaign", "pinned")
    list_select_related = ("job__cluster", "campaign")  # each row names its job (with its cluster) and campaign
    raw_id_fields = ("job", "campaign")
