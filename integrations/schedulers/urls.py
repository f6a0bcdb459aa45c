"""/api/integrations/schedulers/: scheduler state synced back."""

from django.urls import path

from .api import NodeAllocationList, SchedulerDriftList

urlpatterns = [
    path("drift/", SchedulerDriftList.as_view(), name="scheduler-drift-list"),
    path("allocation/", NodeAllocationList.as_view(), name="scheduler-allocation-list"),
]
