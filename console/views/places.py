"""Console pages: a site (rooms and racks with fill and power) and a rack (elevation of both faces)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from cmdb.permissions import scope_lookups_cached

from ..places_selectors import rack_get, rack_overview, site_get, site_overview


@login_required
def site_detail(request: HttpRequest, site_code: str) -> HttpResponse:
    with scope_lookups_cached():  # the site and every list on its page: one read of the user's grants
        site = site_get(request.user, site_code)
        if site is None:
            raise Http404("No such site.")
        return render(request, "console/site_detail.html", {"site": site, **site_overview(request.user, site)})


@login_required
def rack_detail(request: HttpRequest, rack_id: int) -> HttpResponse:
    with scope_lookups_cached():  # the rack, its nodes and switches: one read of the user's grants
        rack = rack_get(request.user, rack_id)
        if rack is None:
            raise Http404("No such rack.")
        return render(request, "console/rack_detail.html", {"rack": rack, **rack_overview(request.user, rack)})


urlpatterns: list[URLPattern] = [
    path("sites/<str:site_code>/", site_detail, name="site-detail"),
    path("racks/<int:rack_id>/", rack_detail, name="rack-detail"),
]
