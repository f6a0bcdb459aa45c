"""Console pages: a cluster and a tenant (their nodes, cards by health, open work)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from ..places_selectors import cluster_get, group_overview, tenant_get


@login_required
def cluster_detail(request: HttpRequest, cluster_name: str) -> HttpResponse:
    cluster = cluster_get(request.user, cluster_name)
    if cluster is None:
        raise Http404("No such cluster.")
    context = {"group": cluster, "kind": "cluster", **group_overview(request.user, cluster=cluster)}
    return render(request, "console/group_detail.html", context)


@login_required
def tenant_detail(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get(request.user, tenant_slug)
    if tenant is None:
        raise Http404("No such tenant.")
    context = {"group": tenant, "kind": "tenant", **group_overview(request.user, tenant=tenant)}
    return render(request, "console/group_detail.html", context)


urlpatterns: list[URLPattern] = [
    path("clusters/<str:cluster_name>/", cluster_detail, name="cluster-detail"),
    path("tenants/<str:tenant_slug>/", tenant_detail, name="tenant-detail"),
]
