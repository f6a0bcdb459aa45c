"""The workflows REST API, mounted at /api/workflows/."""

from rest_framework.routers import DefaultRouter

from .api.views import TicketViewSet, WorkflowTypeViewSet

router = DefaultRouter(trailing_slash=True)
router.register("tickets", TicketViewSet, basename="ticket")
router.register("types", WorkflowTypeViewSet, basename="workflow-type")

urlpatterns = router.urls
