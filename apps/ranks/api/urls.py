"""Layout endpoints, mounted at the top of /api/v1/ next to the job they belong to."""
from django.urls import path

from .views import LayoutLogView, LayoutView, RankFigureView, RanksView

app_name = "ranks-api"

urlpatterns = [
    path("jobs/<slug:cluster>/<int:job_id>/layout/", LayoutView.as_view(), name="layout"),
    path("jobs/<slug:cluster>/<int:job_id>/layout/log/", LayoutLogView.as_view(), name="layout-log"),
    path("jobs/<slug:cluster>/<int:job_id>/ranks/", RanksView.as_view(), name="ranks"),
    path("jobs/<slug:cluster>/<int:job_id>/ranks/figure/", RankFigureView.as_view(), name="ranks-figure"),
]
