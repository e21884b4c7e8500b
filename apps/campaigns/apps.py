from django.apps import AppConfig


class CampaignsConfig(AppConfig):
    name = "apps.campaigns"
    label = "campaigns"
    verbose_name = "Training campaigns"

    def ready(self):
        from apps.core.report_pages import register_report_section

        from . import panel

        panel.register()
        register_report_section("campaign", panel.report_section)
