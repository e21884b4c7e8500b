"""Pages of the campaigns app: the list (/campaigns/) and a campaign (/campaigns/<id>/), the same answers as the API."""
from django.http import Http404
from django.views.generic import TemplateView

from .goodput import PARTS
from .figures import PART_COLOURS, PART_LABELS
from .selectors import campaign_get_for_user, campaign_list_for_user, campaign_may_edit, campaign_summary


class CampaignListView(TemplateView):
    template_name = "campaigns/list.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["campaigns"] = list(campaign_list_for_user(self.request.user)[:500])
        return context


class CampaignDetailView(TemplateView):
    template_name = "campaigns/detail.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        campaign = campaign_get_for_user(self.request.user, kwargs["pk"])
        if campaign is None:
            raise Http404("no such campaign")
        body = campaign_summary(campaign)
        allocated = body["allocated_gpu_hours"] or 0.0
        parts = [{"key": part, "label": PART_LABELS[part], "colour": PART_COLOURS[part], "gpu_hours": body["badput"][part],
                  "share": body["badput"][part] / allocated * 100 if allocated else None, "words": body["words"]["badput"][part]}
                 for part in PARTS]
        largest = max(parts, key=lambda part: part["gpu_hours"]) if parts else None
        goodput_pct = body["goodput"] * 100 if body["goodput"] is not None else None
        context.update(campaign=campaign, body=body, parts=parts, goodput_pct=goodput_pct, largest=largest if largest and largest["gpu_hours"] > 0 else None,
                       may_edit=campaign_may_edit(self.request.user, campaign),
                       figures={"curves": body["figures"]["curves"], "goodput": body["figures"]["goodput"]})
        return context
