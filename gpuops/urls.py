"""URL map. Each app owns its own urls module; this file only mounts them."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from gpuops.login import LoginView
from gpuops.observability import healthz, metrics_view, readyz

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # OpenID Connect sign-on (404 while GPUOPS_OIDC_CLIENT_ID is unset; cmdb/signon/oidc.py)
    path("accounts/oidc/", include("cmdb.signon.urls")),
    path("api/", include("gpuops.api_urls")),
    path("rollouts/", include("workflows.rollouts.urls")),
    path("fabrics/", include("integrations.switches.ui_urls")),
    path("", include("workflows.urls")),
    path("", include("console.urls")),  # the dashboard at "/", search, object pages and lists
]

# JSON error envelope for /api/ paths, Django's pages elsewhere (gpuops.api.django_errors).
handler400 = "gpuops.api.django_errors.bad_request"
handler403 = "gpuops.api.django_errors.permission_denied"
handler404 = "gpuops.api.django_errors.page_not_found"
handler500 = "gpuops.api.django_errors.server_error"
