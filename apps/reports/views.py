"""The usage and efficiency report page: the first answer is rendered into the page, later filters fetch the API."""
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.views.generic import TemplateView
from rest_framework.exceptions import APIException, ValidationError

from .api.views import download_links, usage_for_request
from .selectors import report_choices_for_user

PRESETS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}


def _query(get) -> tuple[dict, str]:
    """The page's parameters as the API's: a preset window (``window=24h|7d|30d``) becomes ``since``."""
    data = {key: get.get(key) for key in ("project", "user", "partition", "since", "until", "group_by") if get.get(key)}
    preset = get.get("window", "")
    if preset in PRESETS and not data.get("since"):
        data.pop("until", None)
        data["since"] = (datetime.now(timezone.utc) - PRESETS[preset]).isoformat()
        return data, preset
    if data.get("since") or data.get("until"):
        return data, "custom"
    return data, "7d"


class ReportView(TemplateView):
    template_name = "reports/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        data, preset = _query(self.request.GET)
        errors = []
        try:
            report = usage_for_request(self.request, data)
        except APIException as error:
            errors = [f"{item.get('field') or 'request'}: {item['message']}" for item in _items(error)]
            data, preset = {}, "7d"
            report = usage_for_request(self.request, {})
        report["downloads"] = download_links(report)
        context.update(report=report, preset=preset, errors=errors, choices=report_choices_for_user(self.request.user),
                       score_below=settings.WASTE_SCORE_BELOW,
                       presets=[("24h", "24 h"), ("7d", "7 days"), ("30d", "30 days"), ("custom", "custom")])
        return context


def _items(error: APIException) -> list[dict]:
    if isinstance(error, ValidationError) and isinstance(error.detail, dict):
        return [{"field": field, "message": str(message)} for field, messages in error.detail.items()
                for message in (messages if isinstance(messages, list) else [messages])]
    return [{"field": None, "message": str(error.detail)}]
