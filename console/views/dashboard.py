"""Console pages: dashboard."""

from __future__ import annotations

from django.http import HttpResponseRedirect
from django.urls import URLPattern, path

urlpatterns: list[URLPattern] = [
    path("", lambda request: HttpResponseRedirect("/tickets/"), name="dashboard"),
]
