"""The project's URLs plus the rollouts app's mounts (until gpuops/urls.py and gpuops/api_urls.py include them)."""

from django.urls import include, path

from gpuops.urls import urlpatterns as project_urlpatterns

urlpatterns = [
    path("rollouts/", include("workflows.rollouts.urls")),
    path("api/rollouts/", include("workflows.rollouts.api_urls")),
    *project_urlpatterns,
]
