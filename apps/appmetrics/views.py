"""Pages of the appmetrics app: the job comparison (/jobs/compare/?jobs=c/1,c/2). The first answer is rendered into
the page (the same body as GET /api/v1/jobs/compare/); adding or removing a job fetches the API in place."""
from django.shortcuts import render
from rest_framework.exceptions import ValidationError

from apps.core.api.params import parse_params

from .api.serializers import MAX_COMPARE, CompareParams
from .compare import job_compare, jobs_for_refs


def _problems(error: ValidationError) -> list[str]:
    detail = error.detail if isinstance(error.detail, dict) else {"jobs": error.detail}
    return [f"{field}: {message}" for field, messages in detail.items()
            for message in (messages if isinstance(messages, list) else [messages])]


def compare(request):
    """Jobs side by side; the jobs that are unknown or not the caller's are named and left out, never shown."""
    problems: list[str] = []
    unknown: list[str] = []
    jobs = []
    # Without JavaScript the form sends the list (jobs) and the job to add (add) as they are.
    asked = ",".join(part for part in (request.GET.get("jobs", "").strip(), request.GET.get("add", "").strip()) if part)
    if asked:
        try:
            refs = parse_params({"jobs": asked}, CompareParams)["jobs"]
        except ValidationError as error:
            problems = _problems(error)
        else:
            jobs, unknown = jobs_for_refs(request.user, refs)
    answer = job_compare(jobs)
    return render(request, "appmetrics/compare.html", {
        "answer": answer, "unknown": unknown, "problems": problems, "max_jobs": MAX_COMPARE,
        "refs": ",".join(entry["ref"] for entry in answer["jobs"]),
    })
