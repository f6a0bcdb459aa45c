"""HTML routes of the rollouts app; mounted at /rollouts/ (gpuops/urls.py)."""

from django.urls import path

from . import views

app_name = "rollouts"

urlpatterns = [
    path("<int:pk>/", views.rollout_detail_view, name="rollout-detail"),
    path("<int:pk>/progress/", views.rollout_progress_view, name="rollout-progress"),
    path("tickets/<int:ticket_id>/progress/", views.ticket_progress_view, name="ticket-progress"),
]
