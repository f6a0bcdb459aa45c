"""/api/integrations/procurement/: the signed webhook and the REST API of requests and discrepancies."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from .api import views
from .webhooks import ProcurementEventWebhook

router = DefaultRouter()
router.register("requests", views.ProcurementRequestViewSet, basename="procurement-request")
router.register("discrepancies", views.DiscrepancyViewSet, basename="procurement-discrepancy")
router.register("approval-rules", views.ApprovalRuleViewSet, basename="procurement-approval-rule")
router.register("inbound-events", views.InboundEventViewSet, basename="procurement-inbound-event")

urlpatterns = [
    path("events/", ProcurementEventWebhook.as_view(), name="procurement-events"),
    path("", include(router.urls)),
]
