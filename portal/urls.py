"""Top-level URL map. Browser paths and /api/v1/ are stable interfaces: extend, never rename."""
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from apps.core import views as core_views
from apps.core.api.views import ApiRootView

API_APPS = ["accounts", "jobs", "topology", "ranks", "telemetry", "saturation", "vetting", "edf", "namespaces", "catalog", "appmetrics", "network", "storage", "flightrec", "campaigns", "system",
            "reports", "triage", "notifications"]
# Where an app's API sits when not under /api/v1/<app>/.
API_PREFIXES = {"accounts": "", "appmetrics": "", "flightrec": "", "network": "", "storage": "", "ranks": "", "saturation": "", "telemetry": "", "triage": "staff/triage/"}

api_v1 = [path("", ApiRootView.as_view(), name="api-root")]
for _app in API_APPS:
    # accounts (me/, projects/), ranks, saturation and telemetry (jobs/<cluster>/<id>/...; telemetry's own
    # endpoints under telemetry/) sit at the top of /api/v1/.
    _prefix = API_PREFIXES.get(_app, f"{_app}/")
    api_v1.append(path(_prefix, include(f"apps.{_app}.api.urls")))
# A node's history (system) beside its versions (telemetry), both at /api/v1/nodes/<host>/...
api_v1.append(path("", include("apps.system.api.node_urls")))

urlpatterns = [
    path("", include("apps.core.urls")),
    path("accounts/", include("apps.accounts.urls")),
    path("jobs/", include("apps.jobs.urls")),
    path("jobs/", include("apps.appmetrics.urls")),
    path("topology/", include("apps.topology.urls")),
    path("vetting/", include("apps.vetting.urls")),
    path("edf/", include("apps.edf.urls")),
    path("namespaces/", include("apps.namespaces.urls")),
    path("catalog/", include("apps.catalog.urls")),
    path("system/", include("apps.system.urls")),
    path("nodes/", include("apps.system.node_page_urls")),
    path("reports/", include("apps.reports.urls")),
    path("campaigns/", include("apps.campaigns.urls")),
    path("staff/triage/", include("apps.triage.urls")),
    path("notifications/", include("apps.notifications.urls")),
    path("healthz", core_views.healthz, name="healthz"),
    path("readyz", core_views.readyz, name="readyz"),
    path("demo-build", core_views.demo_build, name="demo-build"),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("admin/", admin.site.urls),
]

if settings.OIDC_ENABLED:
    from mozilla_django_oidc import views as oidc_views

    urlpatterns.append(
        path(
            "oidc/",
            include(
                [
                    path("authenticate/", login_not_required(oidc_views.OIDCAuthenticationRequestView.as_view()), name="oidc_authentication_init"),
                    path("callback/", login_not_required(oidc_views.OIDCAuthenticationCallbackView.as_view()), name="oidc_authentication_callback"),
                    path("logout/", oidc_views.OIDCLogoutView.as_view(), name="oidc_logout"),
                ]
            ),
        )
    )

handler400 = "apps.core.views.bad_request"
handler403 = "apps.core.views.permission_denied"
handler404 = "apps.core.views.page_not_found"
handler500 = "apps.core.views.server_error"
