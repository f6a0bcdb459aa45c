"""Everything under /api/: one include per app, plus the schema and docs."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("cmdb/", include("cmdb.api.urls")),
    path("agent/", include("inventory_agents.urls")),
    path("workflows/", include("workflows.api_urls")),
    path("rollouts/", include("workflows.rollouts.api_urls")),
    path("integrations/", include("integrations.urls")),
]
