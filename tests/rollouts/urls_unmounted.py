"""The project's URLs without the rollouts app's mounts."""

from gpuops.urls import urlpatterns as project_urlpatterns

urlpatterns = [p for p in project_urlpatterns if not str(p.pattern).startswith("rollouts/")]
