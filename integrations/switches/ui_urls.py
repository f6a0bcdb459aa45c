"""Fabric pages, mounted at /fabrics/."""

from django.urls import path

from . import views

app_name = "fabrics"

urlpatterns = [
    path("", views.fabric_list, name="fabric-list"),
    path("<int:pk>/cabling/", views.fabric_cabling, name="fabric-cabling"),
    path("<int:pk>/cabling/tickets/", views.fabric_cabling_tickets, name="fabric-cabling-tickets"),
]
