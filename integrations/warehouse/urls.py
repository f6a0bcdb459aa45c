"""/api/integrations/warehouse/: the signed WMS webhook and the stock API."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from .api import views
from .webhooks import WmsEventWebhook

router = DefaultRouter()
router.register("movements", views.MovementViewSet, basename="warehouse-movement")
router.register("reservations", views.ReservationViewSet, basename="warehouse-reservation")
router.register("minimum-stock", views.MinimumStockViewSet, basename="warehouse-minimum-stock")
router.register("discrepancies", views.StockDiscrepancyViewSet, basename="warehouse-discrepancy")

urlpatterns = [
    path("events/", WmsEventWebhook.as_view(), name="warehouse-events"),
    path("overview/", views.StockOverviewView.as_view(), name="warehouse-overview"),
    path("stocktakes/", views.StocktakeView.as_view(), name="warehouse-stocktake"),
    path("", include(router.urls)),
]
