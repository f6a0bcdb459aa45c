"""Mounted at /api/agent/ (gpuops/api_urls.py)."""

from django.urls import path

from . import api

app_name = "agent"

urlpatterns = [
    path("reports/", api.ReportsView.as_view(), name="reports"),
    path("reports/<uuid:pk>/", api.ReportDetailView.as_view(), name="report-detail"),
    path("enroll/", api.EnrollView.as_view(), name="enroll"),
]
