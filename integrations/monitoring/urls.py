"""/api/integrations/alerts/: alerts in from monitors, and the received alerts."""

from django.urls import path

from .api import AlertmanagerWebhookView, GenericAlertView, ReceivedAlertList

urlpatterns = [
    path("alertmanager/", AlertmanagerWebhookView.as_view(), name="alerts-alertmanager"),
    path("generic/", GenericAlertView.as_view(), name="alerts-generic"),
    path("", ReceivedAlertList.as_view(), name="alerts-list"),
]
