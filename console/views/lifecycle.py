"""Console page: lifecycle (/lifecycle/) - warranties ending by site and vendor, idle cards by tenant and cluster,
RMA turnaround per vendor. Reads are cmdb.lifecycle selectors (scoped to what the user may see)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from cmdb.capacity import DIMENSIONS, STATES, CapacityQuery, card_hours
from cmdb.lifecycle import ReportQueryError, days_param, idle_cards, rma_turnaround, warranty_ending
from cmdb.permissions import scope_lookups_cached
from workflows.failures import FailureScope, failure_rates
from workflows.services.spares_forecast import RAISE_PERMISSION, spares_forecast, spares_refill_raise

from ..charts import Segment, largest, stacked_bar

#: the failures the console's spares forecast counts (the API takes ?days=)
FORECAST_DAYS = 180

# Bar colours of the card states (console/dashboard.css .seg-<tone>).
STATE_TONES = {
    "in_service": "ok",
    "idle": "warn",
    "repair": "bad",
    "rma": "bad",
    "burn_in": "build",
    "in_stock": "muted",
    "in_transit": "muted",
    "retired": "gone",
}


def _bars(rows: list[dict[str, Any]], tone: str) -> list[dict[str, Any]]:
    scale = largest([r["n"] for r in rows])
    return [{**r, "bar": stacked_bar([Segment("", r["n"], tone)], scale=scale)} for r in rows]


def _state_bars(rows: list[Any]) -> list[dict[str, Any]]:
    scale = largest([round(r.total_hours) for r in rows[:-1]]) if len(rows) > 1 else 0
    return [
        {
            "row": r,
            "data": r.as_dict(),
            "repair_hours": r.hours["repair"] + r.hours["rma"],
            "bar": stacked_bar(
                [Segment(s.replace("_", " "), round(r.hours[s]), STATE_TONES[s]) for s in STATES],
                scale=scale if i < len(rows) - 1 else None,
            ),
        }
        for i, r in enumerate(rows)
    ]


@login_required
def lifecycle_view(request: HttpRequest) -> HttpResponse:
    names = ("site", "vendor", "warranty_days", "idle_days", "rma_days", "from", "to", "by")
    params = {k: request.GET.get(k, "") for k in names}
    context: dict[str, Any] = {"params": params, "dimensions": [(k, v[1]) for k, v in DIMENSIONS.items()]}
    try:
        warranty_days = days_param(request.GET, "warranty_days", 90)
        idle_days = days_param(request.GET, "idle_days", 7)
        rma_days = days_param(request.GET, "rma_days", 365)
        capacity = CapacityQuery.from_params(request.GET, today=timezone.localdate())
    except ReportQueryError as exc:
        context["error"] = f"{exc.field}: {exc}"
        return render(request, "console/lifecycle.html", context, status=400)
    site, vendor = params["site"].strip(), params["vendor"].strip()
    with scope_lookups_cached():
        warranty = warranty_ending(request.user, days=warranty_days, site=site, vendor=vendor)
        idle = idle_cards(request.user, days=idle_days, site=site)
        turnaround = rma_turnaround(request.user, days=rma_days)
        hours = card_hours(request.user, capacity)
        forecast = spares_forecast(request.user, days=FORECAST_DAYS, site=site)
        rates = failure_rates(FailureScope(user=request.user, site=site, days=365), "model")
    context.update(
        rates=rates,
        forecast=forecast,
        forecast_days=FORECAST_DAYS,
        may_raise=request.user.has_perm(RAISE_PERMISSION),
        capacity=hours,
        capacity_rows=_state_bars([*hours.rows, hours.total]),
        state_tones=[(s, STATE_TONES[s]) for s in STATES],
        warranty=warranty,
        warranty_days=warranty_days,
        card_groups=_bars(warranty.cards_by_site_vendor, "warn"),
        node_groups=_bars(warranty.nodes_by_site_vendor, "warn"),
        idle=idle,
        idle_days=idle_days,
        idle_groups=_bars(idle.by_tenant_cluster, "muted"),
        turnaround=turnaround,
        rma_days=rma_days,
    )
    return render(request, "console/lifecycle.html", context)


@login_required
@require_POST
def spares_refill_view(request: HttpRequest) -> HttpResponse:
    """Raise the refill of a forecast row through procurement (the service checks the permission and the need)."""
    try:
        model_id = int(request.POST.get("model", ""))
    except ValueError:
        messages.error(request, "Pick an accelerator model from the forecast.")
        return redirect(reverse("console:lifecycle") + "#spares")
    try:
        outcome = spares_refill_raise(
            request.user, site=request.POST.get("site", ""), model_id=model_id, days=FORECAST_DAYS
        )
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        verb = "Opened" if outcome.created else "Updated"
        messages.success(request, f"{verb} procurement request {outcome.request}; it waits for its approvals.")
    return redirect(reverse("console:lifecycle") + "#spares")


urlpatterns: list[URLPattern] = [
    path("lifecycle/", lifecycle_view, name="lifecycle"),
    path("lifecycle/spares/refill/", spares_refill_view, name="lifecycle-spares-refill"),
]
