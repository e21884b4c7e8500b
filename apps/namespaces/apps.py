from django.apps import AppConfig


class NamespacesConfig(AppConfig):
    name = "apps.namespaces"
    label = "namespaces"
    verbose_name = "Namespaces"

    def ready(self):
        from apps.core.waiting import Waiting, register_waiting

        from .selectors import approval_queue_count

        register_waiting(Waiting(key="approvals", label="namespace requests to approve", one="namespace request to approve", order=10, url_name="namespaces:approvals",
                                 count=lambda request: approval_queue_count(request.user)))
