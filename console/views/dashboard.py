"""Console pages: dashboard (the fleet at a glance; every number links to the list behind it)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from cmdb.permissions import scope_lookups_cached

from ..dashboard import cached_fleet_dashboard


@login_required
def dashboard_view(request: HttpRequest) -> HttpResponse:
    with scope_lookups_cached():  # a dozen scoped aggregates, one read of the user's grants
        figures = cached_fleet_dashboard(user=request.user)
    return render(request, "console/dashboard.html", {"d": figures})


urlpatterns: list[URLPattern] = [
    path("", dashboard_view, name="dashboard"),
]
