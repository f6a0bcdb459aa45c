"""/api/integrations/schedulers/: scheduler state synced back."""

from django.urls import path

from .api import SchedulerDriftList

urlpatterns = [
    path("drift/", SchedulerDriftList.as_view(), name="scheduler-drift-list"),
]
