"""Pages of the appmetrics app: the job comparison (owned by the compare helper)."""
from django.shortcuts import render


def compare(request):
    return render(request, "appmetrics/compare.html", {"jobs": request.GET.get("jobs", "")})
