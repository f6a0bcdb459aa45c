"""Console page: the change log (/changes/). The reads and their scoping are console.history."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path
from django.utils.http import urlencode

from cmdb.models import ChangeAction
from gpuops.context import ChangeSource

from ..history import (
    FILTERS,
    PAGE_SIZE,
    FilterError,
    ViewScope,
    before_cursor,
    change_rows,
    changes_filter,
    changes_visible,
)


@login_required
def change_list_view(request: HttpRequest) -> HttpResponse:
    params = {k: request.GET.get(k, "").strip() for k in FILTERS}
    kept = {k: v for k, v in params.items() if v}
    scope = ViewScope.of(request.user)
    context: dict[str, Any] = {"filters": params, "sources": ChangeSource.CHOICES, "actions": ChangeAction.choices}
    try:
        qs = changes_filter(changes_visible(scope), params, scope).order_by("-at", "-id")
        if before := request.GET.get("before", "").strip():
            at, pk = before_cursor(before)
            qs = qs.filter(Q(at__lt=at) | Q(at=at, id__lt=pk))
            context["is_first_page"] = False
        else:
            context["is_first_page"] = True
        records = list(qs[: PAGE_SIZE + 1])
    except FilterError as exc:
        context.update(error=exc, rows=[])
        return render(request, "console/change_list.html", context, status=400)
    more = len(records) > PAGE_SIZE
    records = records[:PAGE_SIZE]
    context["rows"] = change_rows(records, scope)
    context["query"] = urlencode(kept)
    if more:
        last = records[-1]
        context["next_query"] = urlencode({**kept, "before": f"{last.at.isoformat()}|{last.pk}"})
    return render(request, "console/change_list.html", context)


urlpatterns: list[URLPattern] = [
    path("changes/", change_list_view, name="change-list"),
]
