"""The workflows REST API, mounted at /api/workflows/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from .api.learning import (
    FailureRatesView,
    FailureSignalsView,
    RepeatOffendersView,
    RootCausesView,
    SparesForecastView,
    SparesRaiseView,
)
from .api.views import TicketViewSet, WorkflowTypeViewSet

router = DefaultRouter(trailing_slash=True)
router.register("tickets", TicketViewSet, basename="ticket")
router.register("types", WorkflowTypeViewSet, basename="workflow-type")

urlpatterns = [
    *router.urls,
    path("failures/rates/", FailureRatesView.as_view(), name="failure-rates"),
    path("failures/signals/", FailureSignalsView.as_view(), name="failure-signals"),
    path("failures/repeat-offenders/", RepeatOffendersView.as_view(), name="failure-repeat-offenders"),
    path("failures/root-causes/", RootCausesView.as_view(), name="failure-root-causes"),
    path("spares/forecast/", SparesForecastView.as_view(), name="spares-forecast"),
    path("spares/refill/", SparesRaiseView.as_view(), name="spares-refill"),
]
