"""API routes of the rollouts app; mounted at /api/rollouts/ (gpuops/api_urls.py)."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("", api.RolloutViewSet, basename="rollout")

urlpatterns = [
    path("plan-preview/", api.PlanPreviewView.as_view(), name="rollout-plan-preview"),
    path("os-install/callback/", api.OsInstallCallbackView.as_view(), name="os-install-callback"),
    path("provisioning/<int:pk>/progress/", api.ProvisioningProgressView.as_view(), name="provisioning-progress"),
    path("", include(router.urls)),
]
