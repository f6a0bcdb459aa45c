"""Switch integration API, mounted at /api/integrations/switches/."""

from django.urls import path

from .api import FabricCablingTicketsView, FabricCablingView

app_name = "switches-api"

urlpatterns = [
    path("fabrics/<int:pk>/cabling/", FabricCablingView.as_view(), name="fabric-cabling"),
    path("fabrics/<int:pk>/cabling/tickets/", FabricCablingTicketsView.as_view(), name="fabric-cabling-tickets"),
]
