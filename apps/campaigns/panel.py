"""What campaigns add to lower apps' pages: the job page's first-screen link to the job's campaign (a fact with a
link, through ``apps.core.panels``), and the campaign's page in the job's PDF report (``apps.core.report_pages``)."""
from django.urls import reverse

from apps.core.panels import Fact, JobPanel, PanelSummary, register_job_panel

from .selectors import campaign_for_job, campaign_summary, job_campaign_place, job_ref

KEY = "campaign"


def summary(job) -> PanelSummary | None:
    found = job_campaign_place(job)
    if found is None:
        return None
    # The first screen is shared by everyone who may see the job, a job token too, which may not see the campaign
    # (its other jobs): the fact names no campaign, only the job's place in it; the page behind the link checks access.
    return PanelSummary(facts=[Fact("Campaign", f"allocation {found['place']} of {found['total']}",
                                    "its goodput, failures and checkpoint advice", "info", "fact-campaign", rank=5,
                                    link=reverse("campaigns:detail", args=[found["id"]]))])


def context(job, request) -> dict:
    found = job_campaign_place(job)
    if found is None:
        return {"campaign": None}
    return {"campaign": found, "place": found["place"], "total": found["total"],
            "url": reverse("campaigns:detail", args=[found["id"]])}


def report_section(job) -> dict | None:
    """The campaign's page in the job's PDF report: goodput, badput by part, failures and the checkpoint advice."""
    campaign = campaign_for_job(job)
    if campaign is None:
        return None
    body = campaign_summary(campaign)
    goodput = body["goodput"]
    lines = [f"This job ({job_ref(job)}) is one of {len(body['jobs'])} allocations of the campaign “{campaign.name}”.",
             (f"Goodput {goodput * 100:.1f} % of {body['allocated_gpu_hours']:,.0f} allocated GPU-hours "
              f"({body['productive_gpu_hours']:,.0f} GPU-hours of kept training progress)." if goodput is not None
              else "No allocated GPU-hours yet."),
             f"Queue between allocations: {body['queue_hours']:.1f} h (not badput).", body["mtbf_words"],
             body["checkpoint"]["words"]]
    pairs = [(part.replace("_", " "), f"{value:,.1f} GPU-h") for part, value in body["badput"].items() if value > 0.05]
    rows = [[row["job"], row["end"].strftime("%Y-%m-%d %H:%M") if row["end"] else "", row["cause"], f"{row['lost_gpu_hours']:,.1f}",
             row["evidence"]] for row in body["failures"]]
    return {"title": f"Campaign {campaign.name}", "lines": lines, "pairs": pairs,
            "table": {"headers": ["job", "end (UTC)", "cause", "GPU-h lost", "evidence"], "rows": rows}}


def register() -> None:
    register_job_panel(JobPanel(key=KEY, title="Training campaign", order=95, template="campaigns/_job_panel.html",
                                context=context, summary=summary))
