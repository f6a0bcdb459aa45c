"""Console page: failure analytics (/failures/) - failure rates and MTBF by model, vendor, site, driver or
firmware; the top health signals over time; repeat offenders; root causes. Reads are workflows.failures (scoped
to what the user may see, and to the site / cluster / tenant asked for); the charts are console.charts bars."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from cmdb.permissions import scope_lookups_cached
from workflows.failures import (
    DIMENSIONS,
    FailureQueryError,
    FailureScope,
    failure_rates,
    offenders_in_scope,
    root_cause_counts,
    top_signals,
)

from ..charts import Segment, largest, stacked_bar

SIGNAL_TONES = ("bad", "warn", "build", "ok", "muted", "gone")


def failures_context(scope: FailureScope, by: str) -> dict[str, Any]:
    """The page's figures and bars."""
    rates = failure_rates(scope, by)
    top_afr = max((r.afr_percent or 0 for r in rates), default=0)
    rate_rows = [
        {
            "row": r,
            # AFR in hundredths of a percent, so the bar keeps two decimals of resolution.
            "bar": stacked_bar(
                [Segment("AFR %", round((r.afr_percent or 0) * 100), "bad")], scale=round(top_afr * 100) or 1
            ),
        }
        for r in rates
    ]
    periods, series = top_signals(scope)
    tones = {s.signal: SIGNAL_TONES[i % len(SIGNAL_TONES)] for i, s in enumerate(series)}
    totals = [sum(s.by_period.get(p, 0) for s in series) for p in periods]
    scale = largest(totals)
    signal_bars = [
        {
            "period": p,
            "total": total,
            "bar": stacked_bar(
                [Segment(s.signal, s.by_period.get(p, 0), tones[s.signal]) for s in series], scale=scale
            ),
        }
        for p, total in zip(periods, totals, strict=True)
    ]
    return {
        "by": by,
        "dimensions": [(k, label) for k, (_path, label) in DIMENSIONS.items()],
        "rates": rate_rows,
        "signals": [{"series": s, "tone": tones[s.signal]} for s in series],
        "signal_bars": signal_bars,
        "offenders": offenders_in_scope(scope),
        "root_causes": root_cause_counts(scope),
    }


@login_required
def failures_view(request: HttpRequest) -> HttpResponse:
    by = request.GET.get("by") or "model"
    context: dict[str, Any] = {"params": {k: request.GET.get(k, "") for k in ("site", "cluster", "tenant", "days")}}
    try:
        scope = FailureScope.from_params(request.user, request.GET)
        with scope_lookups_cached():
            context.update(failures_context(scope, by), scope=scope)
    except FailureQueryError as exc:
        context.update(error=f"{exc.field}: {exc}", dimensions=[(k, v[1]) for k, v in DIMENSIONS.items()], by=by)
        return render(request, "console/failures.html", context, status=400)
    return render(request, "console/failures.html", context)


urlpatterns: list[URLPattern] = [
    path("failures/", failures_view, name="failures"),
]
