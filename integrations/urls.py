"""Everything under /api/integrations/: one include per peer package."""

from django.urls import include, path

urlpatterns = [
    path("switches/", include("integrations.switches.urls")),
    path("procurement/", include("integrations.procurement.urls")),
    path("warehouse/", include("integrations.warehouse.urls")),
    path("alerts/", include("integrations.monitoring.urls")),
    path("schedulers/", include("integrations.schedulers.urls")),
]
