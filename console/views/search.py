"""Console pages: search (the top bar's box). One exact match goes straight to its page; otherwise the results
are listed by kind. The lookup itself is console.search.inventory_search."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import URLPattern, path

from cmdb.permissions import scope_lookups_cached

from ..search import PER_KIND, SEARCHABLE, inventory_search


@login_required
def search_view(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    context = {"query": query.strip(), "searchable": SEARCHABLE, "per_kind": PER_KIND}
    try:
        with scope_lookups_cached():  # one scoped query per kind, one read of the user's grants
            result = inventory_search(user=request.user, query=query)
    except ValueError as exc:
        return render(request, "console/search.html", {**context, "error": str(exc)}, status=400)
    if (url := result.redirect_url) is not None:
        return HttpResponseRedirect(url)
    return render(request, "console/search.html", {**context, "result": result})


urlpatterns: list[URLPattern] = [
    path("search/", search_view, name="search"),
]
