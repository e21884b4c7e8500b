from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    verbose_name = "Accounts and projects"

    def ready(self):
        from apps.core.demo_logins import register_demo_logins

        from . import sections

        sections.register()  # projects on the home page, people and projects on the staff page
        register_demo_logins("apps.accounts.demo.DEMO_LOGINS")  # printed by manage.py demo
