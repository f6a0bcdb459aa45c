"""Console pages: a switch (facts, ports, neighbours, link state) and a fabric (its picture beside the cabling)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from ..network_selectors import fabric_get, fabric_overview, switch_get, switch_overview


@login_required
def switch_detail(request: HttpRequest, switch_name: str) -> HttpResponse:
    switch = switch_get(request.user, switch_name)
    if switch is None:
        raise Http404("No such switch.")
    return render(request, "console/switch_detail.html", {"switch": switch, **switch_overview(request.user, switch)})


@login_required
def fabric_detail(request: HttpRequest, fabric_id: int) -> HttpResponse:
    fabric = fabric_get(request.user, fabric_id)
    if fabric is None:
        raise Http404("No such fabric.")
    return render(request, "console/fabric_detail.html", {"fabric": fabric, **fabric_overview(request.user, fabric)})


urlpatterns: list[URLPattern] = [
    path("switches/<str:switch_name>/", switch_detail, name="switch-detail"),
    path("fabrics/<int:fabric_id>/", fabric_detail, name="fabric-detail"),
]
